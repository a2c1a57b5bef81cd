# System combination for recipes, sourced by run.sh after utils/decoding.sh (it needs run.sh's $lm_order,
# $lm_over and lm_beam_of, as decode_stages does):
#   default_combination                         where run.sh's $combine is "default", sets it to the models
#                                               of an --init-config run (a $train_config that starts from
#                                               another model): $exp searched by leading_method of $methods
#                                               (utils/decoding.sh), with --seeds the other seeds'
#                                               experiments (other_seeds, utils/training.sh) searched so too,
#                                               with run.sh's --companion-config its $companion_exp so too,
#                                               then the init model's CTC prefix search with the LM,
#                                               "$exp:METHOD:$average [SEED:METHOD:$average ...]
#                                               [$companion_exp:METHOD:$average]
#                                               $init_exp:ctc_prefix_beam_lm:$init_average"; else to none
#   combine_stages AVERAGE_STAGE DECODE_STAGE STAGE "SYSTEMS" LANG "SETS"  SYSTEMS, "EXP:METHOD:AVERAGE ..."
#                                               (two or more): each model (EXP trained before, its last AVERAGE
#                                               epochs averaged at AVERAGE_STAGE: average_stage, an average of
#                                               other epochs not decoded under the tag that names these) decodes
#                                               dev and SETS with METHOD at DECODE_STAGE
#                                               (decode_stages: the n-best kept; a decode done before is
#                                               skipped); at STAGE, steps/combine_nbest.py pools the n-bests,
#                                               chooses the weights on dev (the LM's: the first LM-fused
#                                               system's) and applies dev's weights to the other sets, into
#                                               exp/combination/decode-SET-combined-NAME
#   check_combine "SYSTEMS"                     run.sh's --combine (not default, not empty) stops run.sh now
#                                               where combine_stages would refuse it after the training: two
#                                               systems or more, each EXP:METHOD:AVERAGE of a known METHOD,
#                                               one of them fusing the LM (the combination weighs it)
#   combination_name "SYSTEMS"                  NAME: each system's EXP's name, METHOD and model tag, joined by +
#   combination_results CORPUS "SYSTEMS" "SETS"  decode_result's line for each set's systems (but run.sh's
#                                               $exp searched by one of its $methods, whose lines run.sh
#                                               prints) and their combination (none if SYSTEMS is empty)
# The combination's own stage (combine-SET-NAME in exp/combination) depends on every system's checkpoint
# and n-best, the LM's weights and, beyond dev, dev's weights: a model trained again is combined again.
# shellcheck shell=bash

default_combination() {
  [ "$combine" = default ] || return 0
  combine=
  [ -n "${init_config:-}" ] || return 0  # the model started from: none trained (--init-config "")
  starts_from_a_model "$train_config" || return 0
  local method seed
  method=$(leading_method "$methods")
  combine="$exp:$method:$average"
  for seed in "${other_seeds[@]}"; do combine+=" $seed:$method:$average"; done
  [ -z "${companion_config:-}" ] || combine+=" $companion_exp:$method:$average"
  combine+=" $init_exp:ctc_prefix_beam_lm:$init_average"
}

split_system() {  # split_system EXP:METHOD:AVERAGE: sets system_exp, system_method and system_average
  IFS=: read -r system_exp system_method system_average <<< "$1"
  if [ -z "$system_exp" ] || [ -z "$system_method" ] || ! [[ $system_average =~ ^[0-9]+$ ]]; then
    echo "run.sh: --combine takes systems as EXP:METHOD:AVERAGE (exp/a:pooled_beam_lm:5), got '$1'" >&2
    return 1
  fi
}

combine_checked=  # the systems check_combine passed last (run.sh checks them at its start, the stage again)
check_combine() {
  local system methods=() exps=() unknown method dir
  if [ "$1" = default ]; then  # its systems are run.sh's exp dirs, in a list split at blanks (after the training)
    for dir in "${exp:-}" "${init_exp:-}" "${companion_exp:-}"; do
      if [[ $dir == *[[:space:]]* ]]; then
        echo "run.sh: --combine default names the systems by their exp dirs, and '$dir' holds a blank: give" \
          "another --exp, --init-exp or --companion-exp, or --combine \"\"" >&2
        return 1
      fi
    done
  fi
  { [ -n "$1" ] && [ "$1" != default ] && [ "$1" != "$combine_checked" ]; } || return 0
  if [ "$(wc -w <<< "$1")" -lt 2 ]; then
    echo "run.sh: --combine needs two systems or more, got '$1'" >&2
    return 1
  fi
  for system in $1; do
    split_system "$system" || return
    methods+=("$system_method")
    exps+=("$(realpath -m "$system_exp")")
  done
  if [ "$(printf '%s\n' "${exps[@]}" | sort -u | wc -l)" -lt "${#exps[@]}" ]; then  # (combine_nbest.py refused
    echo "run.sh: --combine takes each experiment once (their systems' features are named by it), got '$1'" >&2
    return 1  # it after all the training and decoding)
  fi
  # one Python for all (it imports torch): the names no method has
  unknown=$(python3 -c 'import sys; from rnnt.search_methods import METHODS
print(" ".join(m for m in sys.argv[1:] if m not in METHODS))' "${methods[@]}") || return
  if [ -n "$unknown" ]; then
    echo "run.sh: --combine: no decoding method '${unknown// /, }' (rnnt.search_methods)" >&2
    return 1
  fi
  for method in "${methods[@]}"; do
    if fuses_lm "$method"; then combine_checked=$1; return 0; fi
  done
  echo "run.sh: --combine needs an LM-fused method (*_lm, *_lodr) among '$1'" >&2
  return 1
}

combination_name() {
  local system name= tag
  for system in $1; do
    split_system "$system" || return
    tag=$(model_tag_of "$system_exp" "$system_average") || return
    name+=${name:++}$(basename "$system_exp")-$system_method-$tag
  done
  # its stage marker and decode dir are named after it: a name of many systems (--seeds 3 beside --combine default)
  # was longer than a file name can be, and the stage was skipped in silence; the first 100 characters and a hash
  (( ${#name} <= 120 )) || name="${name:0:100}-$(printf '%s' "$name" | sha256sum | cut -c1-12)"
  echo "$name"
}

combine_stages() {
  local average_stage=$1 decode_stage=$2 stage_n=$3 systems=$4 lang=$5 sets=$6 system set tag checkpoint lm= name
  local out input
  local args=() inputs=() weights=()
  check_combine "$systems" || return
  local others=()
  for set in $sets; do [ "$set" = dev ] || others+=("$set"); done
  sets="dev ${others[*]}"  # dev first: its weights are the others'
  for system in $systems; do  # every system checked before any is decoded
    split_system "$system" || return
    tag=$(model_tag_of "$system_exp" "$system_average")
    checkpoint=$(checkpoint_of "$system_exp" "$tag")
    if [ -z "$tag" ]; then  # (--stop-stage before the decoding: nothing to combine, nothing out of date)
      [ "$stop_stage" -ge "$decode_stage" ] || return 0
      echo "run.sh: --combine: no model of $system_exp: train it first" >&2
      return 1
    fi
    if fuses_lm "$system_method"; then lm=${lm:-$system_exp/lm/$system_method-$tag.yaml}; fi
    args+=(--system "$system_exp" "$checkpoint" "$system_exp/decode-SET-$system_method-$tag")
    inputs+=("$checkpoint" "$system_exp/decode-SET-$system_method-$tag/nbest.json")
  done
  for system in $systems; do  # each average made of the epochs its tag names: one written by hand before more
    split_system "$system"  # epochs were trained was decoded and combined under the newer tag
    average_stage "$average_stage" "$system_exp" "$system_average"
    decode_stages "$decode_stage" "$system_exp" "$(model_tag_of "$system_exp" "$system_average")" "$lang" \
      "$system_method" "$sets"  # a decode done before (run.sh's own, at the same stage) is skipped
  done
  name=$(combination_name "$systems")
  for set in $sets; do
    out=exp/combination/decode-$set-combined-$name
    weights=(--weights "exp/combination/decode-dev-combined-$name/weights.yaml")
    [ "$set" != dev ] || weights=(--tune)
    if stage_wanted "$stage_n" "combine-$set-$name" exp/combination -- "${inputs[@]//decode-SET-/decode-$set-}" \
        "$lm" "data/$set/data.list" "data/$set/text" "${weights[@]}"; then
      for input in "${inputs[@]//decode-SET-/decode-$set-}"; do
        if [ ! -f "$input" ]; then
          echo "run.sh: --combine: $input missing: decode (stage $decode_stage) first" >&2
          return 1
        fi
      done
      logged "$(stage_log "$stage_n" "combine-$set-$name" exp/combination)" steps/combine_nbest.py \
        "${args[@]//decode-SET-/decode-$set-}" --lm-fusion "$lm" "${weights[@]}" "data/$set/data.list" "$out" || return
      stage_done "$stage_n" "combine-$set-$name" exp/combination -- "$out/wer"
    fi
  done
}

combination_results() {
  local corpus=$1 systems=$2 sets=$3 name set system tag
  [ -n "$systems" ] || return 0
  name=$(combination_name "$systems")
  for set in $sets; do
    for system in $systems; do
      split_system "$system"
      [ "$system_exp" != "$exp" ] || [[ " $methods " != *" $system_method "* ]] || continue  # run.sh's own line
      tag=$(model_tag_of "$system_exp" "$system_average")
      decode_result "$corpus $set $system_method ($(basename "$system_exp") $tag):" "$system_exp" "$tag" "$set" \
        "$system_method"
    done
    decode_result "$corpus $set combined ($name):" exp/combination "$name" "$set" combined
  done
}
