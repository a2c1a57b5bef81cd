# Training stages for recipes with data/train and data/dev, sourced by run.sh after utils/stages.sh and
# utils/decoding.sh:
#   train_stage STAGE CONFIG EXP LANG [INIT] [SEED]  trains CONFIG over LANG's units on data/train, validated
#                                               on data/dev, into EXP (steps/train.py --resume: an interrupted
#                                               run goes on), and plots it into EXP/training.png; INIT, a
#                                               checkpoint of another experiment, is the start
#                                               (--init-from: it overrides the config's train.init_from);
#                                               SEED overrides the config's train.seed (--seed)
#   train_wanted, train_model (the same arguments) train_stage's two halves: whether the stage runs, and
#                                               the training itself
#   seed_stages STAGE AVERAGE_STAGE DECODE_STAGE CONFIG EXP LANG INIT SEEDS AVERAGE METHOD
#                                               train_stage for EXP, and with SEEDS > 1 for EXP_seedK with
#                                               --seed K (K = 1 .. SEEDS-1) too, the trainings still to run at
#                                               once (train_at_once: each with OMP_NUM_THREADS its share of
#                                               the cores, its output in its log alone); then each model is averaged
#                                               (AVERAGE) and decoded on dev with METHOD (an LM-fused one
#                                               weighted on dev first), and exp is set to the one with the
#                                               lowest dev WER (the first on a tie): a run's chance, chosen
#                                               on dev, never on test; other_seeds, to the others
#                                               (utils/combination.sh's default combines them too)
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
  train_wanted "$@" || return 0
  train_model "$@"
}

train_wanted() {  # train_wanted STAGE CONFIG EXP LANG [INIT] [SEED]: stage_wanted for train_stage's training
  local options
  mapfile -t options < <(train_options "${5:-}" "${6:-}")
  stage_wanted "$1" train "$3" -- "$2" data/train/shards data/dev/shards "$4/units.txt" "${options[@]}"
}

train_options() {  # train_options [INIT] [SEED]: steps/train.py's options for them, one a line
  [ -z "${1:-}" ] || printf '%s\n' --init-from "$1"
  [ -z "${2:-}" ] || printf '%s\n' --seed "$2"
}

train_model() {  # train_model STAGE CONFIG EXP LANG [INIT] [SEED]: the training once train_wanted chose to run it
  local stage_n=$1 config=$2 exp=$3 lang=$4 log options
  mapfile -t options < <(train_options "${5:-}" "${6:-}")
  log=$(stage_log "$stage_n" train "$exp")
  logged "$log" steps/train.py --config "$config" --train-list data/train/data.list --valid-list data/dev/data.list \
    --lang-dir "$lang" --exp-dir "$exp" --resume "${options[@]}"
  logged "$log" steps/plot_training.py --title "$(basename "$PWD") $(basename "$exp")" "$exp/training.png" "$exp"
  stage_done "$stage_n" train "$exp"
}

seed_exp() {  # seed_exp BASE K: the experiment of seed K (0: the config's own seed)
  if [ "$2" -eq 0 ]; then echo "$1"; else echo "${1}_seed$2"; fi
}

seed_option() {  # seed_option K: train_stage's SEED for seed K (0: none, the config's)
  if [ "$1" -gt 0 ]; then echo "$1"; fi
}

train_at_once() {  # train_at_once STAGE CONFIG BASE LANG INIT K...: seeds K's trainings, each already wanted
  local n=$1 config=$2 base=$3 lang=$4 init=$5 seed exp threads pid logs=() status=0
  shift 5
  if [ $# -le 1 ]; then
    [ $# -eq 0 ] || train_model "$n" "$config" "$(seed_exp "$base" "$1")" "$lang" "$init" "$(seed_option "$1")"
    return
  fi
  threads=$(( $(nproc) / $# ))
  [ "$threads" -ge 1 ] || threads=1
  for seed; do
    exp=$(seed_exp "$base" "$seed")
    logs+=("$(stage_log "$n" train "$exp")")
    (
      background_stages=() progress_bars=false
      trap stop_logged TERM HUP INT  # SIGTERM from stop_logged reaches the training inside
      export OMP_NUM_THREADS=$threads
      train_model "$n" "$config" "$exp" "$lang" "$init" "$(seed_option "$seed")" > /dev/null
    ) &
    background_stages+=("$!")  # stop_logged stops them
  done
  echo "$(date +%T) stage $n: $# trainings at once, $threads thread(s) each; their output only in their logs: ${logs[*]}"
  for pid in "${background_stages[@]}"; do
    wait "$pid" || status=$?
  done
  background_stages=()
  echo "$(date +%T) stage $n: the $# trainings ended$([ "$status" -eq 0 ] || echo ", not all well (status $status)")"
  return "$status"
}

other_seeds=()  # seed_stages: the seeds' experiments not chosen
seed_stages() {
  local train_n=$1 average_n=$2 decode_n=$3 config=$4 base=$5 lang=$6 init=$7 seeds=$8 average=$9 method=${10}
  local seed candidate tag wer best= best_wer= results=() wanted=()
  [[ $seeds =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --seeds takes a number of 1 or more, got '$seeds'" >&2; return 1; }
  for ((seed = 0; seed < seeds; seed++)); do
    if train_wanted "$train_n" "$config" "$(seed_exp "$base" "$seed")" "$lang" "$init" "$(seed_option "$seed")"; then
      wanted+=("$seed")
    fi
  done
  train_at_once "$train_n" "$config" "$base" "$lang" "$init" "${wanted[@]}"
  [ "$seeds" -gt 1 ] && [ "$stop_stage" -ge "$decode_n" ] || return 0
  for ((seed = 0; seed < seeds; seed++)); do
    candidate=$(seed_exp "$base" "$seed")
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
  other_seeds=()
  for ((seed = 0; seed < seeds; seed++)); do
    candidate=$(seed_exp "$base" "$seed")
    [ "$candidate" = "$best" ] || other_seeds+=("$candidate")
  done
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
