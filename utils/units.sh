# Output units of a recipe, sourced by run.sh after utils/stages.sh: where they live, and the stage that
# builds them from data/train's text (phones: their lexicon from the CMU Pronouncing Dictionary first).

lang_of() {  # lang_of UNIT_TYPE VOCAB_SIZE: the lang dir of those units (data/lang_bpe64, data/lang_phone)
  case $1 in
    bpe|unigram) echo "data/lang_$1$2" ;;
    char|phone) echo "data/lang_$1" ;;
    *) echo "run.sh: --unit-type must be bpe, unigram, char or phone, got '$1'" >&2; return 1 ;;
  esac
}

default_lm_search() {  # default_lm_search UNIT_TYPE: lm_over and lm_order, where run.sh left them empty, set
  local over order       # to the LM dev chose for those units (RESULTS.md): a word 3-gram through the lexicon
  case $1 in             # for phones and characters, a 5-gram over BPE units
    phone|char) over=words order=3 ;;
    *) over=units order=5 ;;
  esac
  lm_over=${lm_over:-$over} lm_order=${lm_order:-$order}
  case $lm_over in units|words) ;; *)  # checked before the training, not at the LM stage after it
    echo "run.sh: --lm-over takes units or words, not '$lm_over'" >&2; return 1 ;;
  esac
  if [ "$lm_over" = words ] && [ "$1" != phone ] && [ "$1" != char ]; then  # the LM search refused it after training
    echo "run.sh: --lm-over words needs --unit-type phone or char (a word is spelt in them through the lexicon);" \
      "over $1 units take --lm-over units" >&2
    return 1
  fi
  [[ $lm_order =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --lm-order takes an n-gram order (1 or more), not '$lm_order'" >&2
    return 1; }
  [[ ${lm_beam:-1} =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --lm-beam takes a beam (1 or more), not '$lm_beam'" >&2
    return 1; }
  local refused  # the grid steps/tune_lm_fusion.py takes, read by its own rules (it refused them after the training)
  refused=$(python3 -c 'import argparse, sys
from rnnt.cli import number_list
for option, text, low in (("--lm-weights", sys.argv[1], 0), ("--lm-bonuses", sys.argv[2], None)):
    try:
        text and number_list(low)(text)
    except argparse.ArgumentTypeError as error:
        print(f"run.sh: {option}: {error}")' "${lm_weights:-}" "${lm_bonuses:-}") || return
  [ -z "$refused" ] || { echo "$refused" >&2; return 1; }
}

lm_beam_of() {  # lm_beam_of METHOD: run.sh's $lm_beam, or the beam dev chose for the method's LM search: 16
  if [ -n "${lm_beam:-}" ]; then  # where a CTC prefix search goes through the lexicon (ctc_*, pooled_*: 8
    echo "$lm_beam"               # lost 1.7 points on speechocean762), 8 for the transducers' own searches
  elif [[ $1 == ctc_* || $1 == pooled_* ]] && [ "$lm_over" = words ]; then  # (AN4: 16 no better, 3x the time)
    echo 16
  else
    echo 8
  fi
}

check_deployable() {  # check_deployable UNIT_TYPE DEPLOY CONFIG [ATTENTION]: a --deploy that sherpa-onnx could not
  # run stops run.sh now, not after the training: phones, or a model of CONFIG it cannot run (steps/export_onnx.py
  # --check-config), at attention_of's ATTENTION chunks where given (whole does not stream; utils/decoding.sh's
  # attention_options then sourced)
  if [ -n "$2" ] && [ "$1" = phone ]; then
    echo "run.sh: --deploy needs --unit-type bpe, unigram or char: sherpa-onnx prints the units, and phones are" \
      "not words" >&2
    return 1
  fi
  local kind streaming chunks=()
  [ -z "${4:-}" ] || read -ra chunks <<< "$(attention_options "$4")"
  for kind in $2; do
    case $kind in offline|streaming) ;; *)  # 'offlin' passed as offline and failed at the export, after training
      echo "run.sh: --deploy takes offline and/or streaming, not '$kind'" >&2; return 1 ;;
    esac
    streaming=()
    [ "$kind" != streaming ] || streaming=(--streaming)
    steps/export_onnx.py --check-config "$3" --unit-type "$1" "${streaming[@]}" "${chunks[@]}" || {
      echo "run.sh: --deploy $kind with --train-config $3: nothing done (conf/deploy.yaml is a config it runs)" >&2
      return 1
    }
  done
}

first_pronunciations=local/first_pronunciations.txt  # phones: where a recipe has it, the pronunciations its
# words train with where the dictionary lists another first (steps/build_lexicon.py --first)

units_stage() {  # units_stage N UNIT_TYPE VOCAB_SIZE LANG
  local n=$1 unit_type=$2 vocab_size=$3 lang=$4 log first=()
  # one marker a lang dir (units-bpe64): data/lang_X holds one split's units at a time, and data/train/text changes
  # with the split (a marker a split found the other split's units there when it came back)
  local name="units-${lang#data/lang_}"
  [ ! -f "$first_pronunciations" ] || first=(--first "$first_pronunciations")
  if stage_wanted "$n" "$name" -- data/train/text "$vocab_size" "${first[@]}"; then
    log=$(stage_log "$n" "$name")
    [ "$unit_type" != phone ] || logged "$log" steps/build_lexicon.py "${first[@]}" data/train "$lang" || return
    logged "$log" steps/build_units.py --unit-type "$unit_type" --vocab-size "$vocab_size" data/train "$lang" || return
    stage_done "$n" "$name" -- "$lang/units.txt"
  fi
}
