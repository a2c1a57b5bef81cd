#!/usr/bin/env bash
# Output units of a recipe, sourced by run.sh after utils/stages.sh: where they live, and the stage that
# builds them from data/train's text (phones: their lexicon from the CMU Pronouncing Dictionary first).

lang_of() {  # lang_of UNIT_TYPE VOCAB_SIZE: the lang dir of those units (data/lang_bpe64, data/lang_phone)
  case $1 in
    bpe) echo "data/lang_bpe$2" ;;
    char|phone) echo "data/lang_$1" ;;
    *) echo "run.sh: --unit-type must be bpe, char or phone, got '$1'" >&2; return 1 ;;
  esac
}

lm_search_of() {  # lm_search_of UNIT_TYPE: "OVER ORDER BEAM", the LM search dev chose for those units (RESULTS.md):
  case $1 in       # a word 3-gram through the lexicon at beam 16 (phones, characters), a 5-gram over BPE units at 8
    phone|char) echo "words 3 16" ;;
    *) echo "units 5 8" ;;
  esac
}

check_deployable() {  # check_deployable UNIT_TYPE DEPLOY: --deploy with phones stops run.sh now, not after training
  if [ -n "$2" ] && [ "$1" = phone ]; then
    echo "run.sh: --deploy needs --unit-type bpe or char: sherpa-onnx prints the units, and phones are not words" >&2
    return 1
  fi
}

units_stage() {  # units_stage N UNIT_TYPE VOCAB_SIZE LANG DEV_SPEAKERS
  local n=$1 unit_type=$2 vocab_size=$3 lang=$4 dev_speakers=$5 log
  local name="units-${lang#data/lang_}-dev$dev_speakers"  # units-bpe64-dev8, units-phone-dev10
  if stage_wanted "$n" "$name" -- data/train/text "$vocab_size"; then
    log=$(stage_log "$n" "$name")
    [ "$unit_type" != phone ] || logged "$log" steps/build_lexicon.py data/train "$lang"
    logged "$log" steps/build_units.py --unit-type "$unit_type" --vocab-size "$vocab_size" data/train "$lang"
    stage_done "$n" "$name"
  fi
}
