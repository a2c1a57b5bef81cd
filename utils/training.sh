# Training stages for recipes with data/train and data/dev, sourced by run.sh after utils/stages.sh and
# utils/decoding.sh:
#   train_stage STAGE CONFIG EXP LANG [INIT]    trains CONFIG over LANG's units on data/train, validated on
#                                               data/dev, into EXP (steps/train.py --resume: an interrupted
#                                               run goes on), and plots it into EXP/training.png; INIT, a
#                                               checkpoint of another experiment, is the start
#                                               (--init-from: it overrides the config's train.init_from)
#   init_model_stage STAGE CONFIG EXP LANG AVERAGE  trains and averages the model another starts from, and
#                                               sets init_checkpoint to its averaged checkpoint
#   starts_from_a_model CONFIG                  whether CONFIG starts from another model (sets
#                                               train.init_from): run.sh trains its --init-config only for
#                                               such a config, so that another one never silently starts
#                                               from DeepSpeech 2
# A change to INIT (the other model trained again) trains EXP again, as a change to its config does
# (steps/train.py records INIT's SHA-256 in the config, train.init_from_sha256: a resume sees the change).
# shellcheck shell=bash

train_stage() {
  local stage_n=$1 config=$2 exp=$3 lang=$4 init=${5:-} log init_option=()
  [ -z "$init" ] || init_option=(--init-from "$init")
  if stage_wanted "$stage_n" train "$exp" -- "$config" data/train/shards data/dev/shards "$lang/units.txt" \
      "${init_option[@]}"; then
    log=$(stage_log "$stage_n" train "$exp")
    logged "$log" steps/train.py --config "$config" --train-list data/train/data.list --valid-list data/dev/data.list \
      --lang-dir "$lang" --exp-dir "$exp" --resume "${init_option[@]}"
    logged "$log" steps/plot_training.py --title "$(basename "$PWD") $(basename "$exp")" "$exp/training.png" "$exp"
    stage_done "$stage_n" train "$exp"
  fi
}

init_model_stage() {
  local stage_n=$1 config=$2 exp=$3 lang=$4 average=$5
  echo "$(date +%T) stage $stage_n: first $config into $exp, the model --train-config starts from"
  train_stage "$stage_n" "$config" "$exp" "$lang"
  average_stage "$stage_n" "$exp" "$average"
  init_checkpoint=$(checkpoint_of "$exp" "$(model_tag_of "$exp" "$average")")
}

starts_from_a_model() {
  python3 -c 'import sys, yaml; config = yaml.safe_load(open(sys.argv[1])) or {}
sys.exit(0 if (config.get("train") or {}).get("init_from") else 1)' "$1"
}
