# The decoding end of a recipe, sourced by run.sh after utils/stages.sh:
#   model_to_decode STAGE EXP AVERAGE          sets $checkpoint and $model_tag; stage STAGE averages
#   decode_stage STAGE EXP SET METHOD [OPTIONS] decodes data/SET/data.list (OPTIONS go to decode.py); method
#                                               ctc_prefix_beam_lm reads EXP/lm/fusion.yaml
#   lm_fusion_stage STAGE EXP LANG ORDER DEV    an n-gram LM over LANG's units from data/train/text
#                                               (LANG/lm_<ORDER>gram.arpa), its weight and length bonus chosen
#                                               on data/DEV for the model decoded (EXP/lm/fusion.yaml)
#   decode_result LABEL EXP SET METHOD          prints "LABEL <%WER line>", or why there is none
#   export_stage STAGE EXP KIND                 exports the model for sherpa-onnx (KIND offline or streaming)
#                                               to EXP/onnx-KIND-<model_tag>
#   sherpa_onnx_decode_stage STAGE EXP SET KIND decodes data/SET/data.list with that export in sherpa-onnx
#                                               (method sherpa_onnx_KIND for decode_result), counting the
#                                               transcripts identical to our greedy search's where decoded
#   deploy_stages STAGE EXP "KINDS" "SETS"      both for each kind: exports at STAGE, decodes at STAGE + 1
# model_to_decode: with AVERAGE > 0, stage STAGE averages the last AVERAGE epoch checkpoints of EXP
# (fewer if fewer were trained) into EXP/avg-N.pt, and model_tag is avgN-epoch-K (K: the newest epoch
# averaged); with 0, the newest epoch, model_tag epoch-K. The tag names the average and decode stages'
# markers and the decode dirs: after more training or with another --average, the new model is
# averaged and decoded again, beside the old results. With no epoch checkpoints yet, model_tag is
# empty; that is an error only if a stage from STAGE on is wanted.
# shellcheck shell=bash

model_to_decode() {
  local from_stage=$1 exp=$2 average=$3 epochs newest n
  checkpoint= model_tag=
  epochs=$( (ls "$exp"/epoch-*.pt 2>/dev/null || true) | wc -l)
  if [ "$epochs" -eq 0 ]; then
    if [ "$stop_stage" -ge "$from_stage" ]; then
      echo "model_to_decode: no epoch checkpoints in $exp: train first" >&2
      return 1
    fi
    return 0
  fi
  newest=$(basename "$(ls -v "$exp"/epoch-*.pt | tail -n 1)" .pt)
  checkpoint=$exp/$newest.pt
  model_tag=$newest
  if [ "$average" -gt 0 ]; then
    n=$(( epochs < average ? epochs : average ))
    if stage_wanted "$from_stage" "average-$n-$newest" "$exp" -- $(ls -v "$exp"/epoch-*.pt | tail -n "$n"); then
      logged "$(stage_log "$from_stage" "average-$n-$newest" "$exp")" steps/average_checkpoints.py --last "$n" "$exp"
      stage_done "$from_stage" "average-$n-$newest" "$exp"
    fi
    if [ ! -f "$(stage_mark "$from_stage" "average-$n-$newest" "$exp")" ] && [ "$stop_stage" -gt "$from_stage" ]; then
      echo "model_to_decode: $exp/avg-$n.pt is not the average of the last $n epochs up to $newest yet:" \
        "run stage $from_stage first" >&2
      return 1
    fi
    checkpoint=$exp/avg-$n.pt
    model_tag=avg$n-$newest
  fi
}

decode_stage() {
  local stage_n=$1 exp=$2 set=$3 method=$4
  shift 4
  if [ "$method" = ctc_prefix_beam_lm ]; then
    set -- --lm-fusion "$exp/lm/fusion.yaml" "$@"  # a file among the inputs: a new LM or new weights decode again
  fi
  if stage_wanted "$stage_n" "decode-$set-$method-$model_tag" "$exp" -- "$checkpoint" "data/$set/data.list" \
      "data/$set/text" "$@"; then
    logged "$(stage_log "$stage_n" "decode-$set-$method-$model_tag" "$exp")" steps/decode.py --method "$method" \
      --checkpoint "$checkpoint" --tag "$model_tag" "$@" "$exp" "data/$set/data.list" "$set"
    stage_done "$stage_n" "decode-$set-$method-$model_tag" "$exp"
  fi
}

lm_fusion_stage() {
  local stage_n=$1 exp=$2 lang=$3 order=$4 dev=$5
  local arpa=$lang/lm_${order}gram.arpa
  if stage_wanted "$stage_n" "lm-${order}gram" "$lang" -- data/train/text "$lang/units.txt" "$order"; then
    logged "$(stage_log "$stage_n" "lm-${order}gram" "$lang")" steps/build_ngram_lm.py --order "$order" data/train \
      "$lang" "$arpa"
    stage_done "$stage_n" "lm-${order}gram" "$lang"
  fi
  if stage_wanted "$stage_n" "lm-fusion-${order}gram-$model_tag" "$exp" -- "$checkpoint" "$arpa" \
      "data/$dev/data.list" "data/$dev/text"; then
    logged "$(stage_log "$stage_n" "lm-fusion-${order}gram-$model_tag" "$exp")" steps/tune_lm_fusion.py \
      --arpa "$arpa" --checkpoint "$checkpoint" "$exp" "data/$dev/data.list"
    stage_done "$stage_n" "lm-fusion-${order}gram-$model_tag" "$exp"
  fi
}

decode_result() {
  local label=$1 exp=$2 set=$3 method=$4
  local wer_file=$exp/decode-$set-$method-$model_tag/wer
  if [ -z "$model_tag" ]; then
    echo "$label not decoded yet (no model in $exp)"
  elif [ -f "$wer_file" ]; then
    echo "$label $(cat "$wer_file")"
  else
    echo "$label not decoded yet ($wer_file missing)"
  fi
}

export_stage() {
  local stage_n=$1 exp=$2 kind=$3 option=
  case $kind in
    offline) ;;
    streaming) option=--streaming ;;
    *) echo "export_stage: unknown export kind '$kind' (offline or streaming)" >&2; return 1 ;;
  esac
  if stage_wanted "$stage_n" "export-$kind-$model_tag" "$exp" -- "$checkpoint"; then
    logged "$(stage_log "$stage_n" "export-$kind-$model_tag" "$exp")" steps/export_onnx.py $option \
      --checkpoint "$checkpoint" "$exp" "$exp/onnx-$kind-$model_tag"
    stage_done "$stage_n" "export-$kind-$model_tag" "$exp"
  fi
}

sherpa_onnx_decode_stage() {
  local stage_n=$1 exp=$2 set=$3 kind=$4 compare=()
  local onnx=$exp/onnx-$kind-$model_tag ours=$exp/decode-$set-greedy-$model_tag
  [ -f "$ours/hyp" ] && compare=(--compare "$ours")
  if stage_wanted "$stage_n" "decode-$set-sherpa_onnx_$kind-$model_tag" "$exp" -- "$onnx" "data/$set/data.list" \
      "data/$set/text"; then
    logged "$(stage_log "$stage_n" "decode-$set-sherpa_onnx_$kind-$model_tag" "$exp")" steps/decode_sherpa_onnx.py \
      "${compare[@]}" "$onnx" "data/$set/data.list" "$exp/decode-$set-sherpa_onnx_$kind-$model_tag"
    stage_done "$stage_n" "decode-$set-sherpa_onnx_$kind-$model_tag" "$exp"
  fi
}

deploy_stages() {
  local stage_n=$1 exp=$2 kinds=$3 sets=$4 kind set
  for kind in $kinds; do
    export_stage "$stage_n" "$exp" "$kind"
    for set in $sets; do
      sherpa_onnx_decode_stage $((stage_n + 1)) "$exp" "$set" "$kind"
    done
  done
}
