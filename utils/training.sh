# Training stages for recipes with data/train and data/dev, sourced by run.sh after utils/stages.sh and
# utils/decoding.sh:
#   train_stage STAGE CONFIG EXP LANG [INIT] [SEED]  trains CONFIG over LANG's units on data/train, validated
#                                               on data/dev, into EXP (steps/train.py --resume: an interrupted
#                                               run goes on), and plots it into EXP/training.png; INIT, a
#                                               checkpoint of another experiment, is the start
#                                               (--init-from: it overrides the config's train.init_from);
#                                               SEED overrides the config's train.seed (--seed)
#   seed_stages STAGE AVERAGE_STAGE DECODE_STAGE CONFIG EXP LANG INIT SEEDS AVERAGE METHOD
#                                               train_stage for EXP, and with SEEDS > 1 for EXP_seedK with
#                                               --seed K (K = 1 .. SEEDS-1) too; then each model is averaged
#                                               (AVERAGE) and decoded on dev with METHOD (an LM-fused one
#                                               weighted on dev first), and exp is set to the one with the
#                                               lowest dev WER (the first on a tie): a run's chance, chosen
#                                               on dev, never on test
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
  local stage_n=$1 config=$2 exp=$3 lang=$4 init=${5:-} seed=${6:-} log options=()
  [ -z "$init" ] || options=(--init-from "$init")
  [ -z "$seed" ] || options+=(--seed "$seed")
  if stage_wanted "$stage_n" train "$exp" -- "$config" data/train/shards data/dev/shards "$lang/units.txt" \
      "${options[@]}"; then
    log=$(stage_log "$stage_n" train "$exp")
    logged "$log" steps/train.py --config "$config" --train-list data/train/data.list --valid-list data/dev/data.list \
      --lang-dir "$lang" --exp-dir "$exp" --resume "${options[@]}"
    logged "$log" steps/plot_training.py --title "$(basename "$PWD") $(basename "$exp")" "$exp/training.png" "$exp"
    stage_done "$stage_n" train "$exp"
  fi
}

seed_stages() {
  local train_n=$1 average_n=$2 decode_n=$3 config=$4 base=$5 lang=$6 init=$7 seeds=$8 average=$9 method=${10}
  local seed candidate tag wer best= best_wer= results=()
  [[ $seeds =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --seeds takes a number of 1 or more, got '$seeds'" >&2; return 1; }
  train_stage "$train_n" "$config" "$base" "$lang" "$init"
  [ "$seeds" -gt 1 ] || return 0
  for ((seed = 1; seed < seeds; seed++)); do
    train_stage "$train_n" "$config" "${base}_seed$seed" "$lang" "$init" "$seed"
  done
  [ "$stop_stage" -ge "$decode_n" ] || return 0
  for ((seed = 0; seed < seeds; seed++)); do
    candidate=$base
    [ "$seed" -eq 0 ] || candidate=${base}_seed$seed
    average_stage "$average_n" "$candidate" "$average"
    tag=$(model_tag_of "$candidate" "$average")
    decode_stages "$decode_n" "$candidate" "$tag" "$lang" "$method" dev
    wer=$candidate/decode-dev-$method-$tag/wer
    [ -f "$wer" ] || { echo "seed_stages: $wer missing: run stage $decode_n for it first" >&2; return 1; }
    wer=$(awk '{print $2; exit}' "$wer")
    results+=("$candidate $wer")
    if [ -z "$best" ] || awk -v a="$wer" -v b="$best_wer" 'BEGIN {exit !(a < b)}'; then
      best=$candidate best_wer=$wer
    fi
  done
  echo "$(date +%T) stage $decode_n: of $seeds seeds, $best is the best on dev ($method, %WER: ${results[*]})"
  exp=$best  # run.sh's
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
