# Training stages for recipes with data/train and data/dev, sourced by run.sh after utils/stages.sh and
# utils/decoding.sh:
#   train_wanted STAGE CONFIG EXP LANG [INIT] [SEED]  whether a training's stage is to run (stage_wanted)
#   train_model (the same arguments)            trains CONFIG over LANG's units on data/train, validated on
#                                               data/dev, into EXP (steps/train.py --resume: an interrupted
#                                               run goes on), and plots it into EXP/training.png; INIT, a
#                                               checkpoint of another experiment, is the start
#                                               (--init-from: it overrides the config's train.init_from);
#                                               SEED overrides the config's train.seed (--seed)
#   train_at_once STAGE LANG "CONFIG|EXP|INIT|SEED"...  train_model for each, those wanted, at once: each
#                                               with OMP_NUM_THREADS its share of the cores, its output in its
#                                               log alone; one after another where each trains in several
#                                               processes (--ngpu N > 1, --cpu-ranks N > 1)
#   seed_stages STAGE AVERAGE_STAGE DECODE_STAGE CONFIG EXP LANG INIT SEEDS AVERAGE METHOD
#                                               trains EXP, and with SEEDS > 1 EXP_seedK with --seed K
#                                               (K = 1 .. SEEDS-1) too, those still to train at once
#                                               (train_at_once); then each model is averaged
#                                               (AVERAGE) and decoded on dev with METHOD (an LM-fused one
#                                               weighted on dev first), and exp is set to the one with the
#                                               lowest dev WER (the first on a tie): a run's chance, chosen
#                                               on dev, never on test; other_seeds, to the others
#                                               (utils/combination.sh's default combines them too)
#   init_model_stage STAGE CONFIG EXP LANG AVERAGE [COMPANION_CONFIG COMPANION_EXP COMPANION_AVERAGE]
#                                               trains and averages the model another starts from, and sets
#                                               init_checkpoint to its averaged checkpoint; a companion, a
#                                               model from nothing that --combine default adds (run.sh's
#                                               --companion-config), is trained at once with it (each on its
#                                               share of the cores) and averaged; with STAGE out of this
#                                               run's range, only init_checkpoint (the model trained before),
#                                               so that the train stage's inputs read as they were
#   starts_from_a_model CONFIG                  whether CONFIG starts from another model (sets
#                                               train.init_from): run.sh trains its --init-config only for
#                                               such a config, so that another one never silently starts
#                                               from DeepSpeech 2
#   check_training_processes                    at run.sh's start: --ngpu and --cpu-ranks (run.sh's ngpu,
#                                               cpu_ranks) are whole numbers this machine can run: as many GPUs
#                                               as --ngpu asks for, --cpu-ranks only with --ngpu 0
#   training_command                            what runs steps/train.py, one word a line: one process on the
#                                               config's train.device (--ngpu empty: a GPU when at hand), on
#                                               the CPU (--ngpu 0) or a GPU (1); torchrun's DDP for several,
#                                               one a GPU (--ngpu N) or --cpu-ranks N on the CPU, each
#                                               process on its share of the cores; LibriSpeech's --nnodes
#                                               too (its nnodes, node_rank, master_addr, master_port)
# A change to INIT (the other model trained again) trains EXP again, as a change to its config does
# (steps/train.py records INIT's SHA-256 in the config, train.init_from_sha256: a resume sees the change).
# shellcheck shell=bash

train_wanted() {  # train_wanted STAGE CONFIG EXP LANG [INIT] [SEED]: stage_wanted for train_model's training
  # (the config's text, and its settings as resolved: a default an upgrade changed trains again, as train.py would)
  local options units later
  mapfile -t options < <(train_options "${5:-}" "${6:-}")
  mapfile -t units < <(unit_files "$4")
  config_inputs later "$2" "${5:-}"
  stage_wanted "$1" train "$3" -- "$2" data/train/shards data/dev/shards "${units[@]}" "${options[@]}" ++ "${later[@]}"
}

train_options() {  # train_options [INIT] [SEED]: steps/train.py's options for them, one a line
  [ -z "${1:-}" ] || printf '%s\n' --init-from "$1"
  [ -z "${2:-}" ] || printf '%s\n' --seed "$2"
}

check_training_processes() {
  local gpus
  [[ ${ngpu:-} =~ ^(0|[1-9][0-9]*)?$ ]] || {  # not 08: bash's arithmetic reads it as octal
    echo "$(basename "$0"): --ngpu ${ngpu:-}: a number of GPUs (0: the CPU)" >&2; exit 1; }
  [[ ${cpu_ranks:-1} =~ ^[1-9][0-9]*$ ]] || {
    echo "$(basename "$0"): --cpu-ranks ${cpu_ranks:-}: a number of training processes, 1 or more" >&2; exit 1; }
  [[ ${nnodes:-1} =~ ^[1-9][0-9]*$ && ${node_rank:-0} =~ ^(0|[1-9][0-9]*)$ ]] &&
    [ "${node_rank:-0}" -lt "${nnodes:-1}" ] || {
    # a node 1 of --nnodes 1 (left out) trained alone, a run of its own, into node 0's experiment
    echo "$(basename "$0"): --nnodes ${nnodes:-1} --node-rank ${node_rank:-0}: the nodes are 1 or more, each node's" \
      "rank 0 to nnodes - 1 (give every node the same --nnodes)" >&2; exit 1; }
  if [ "${nnodes:-1}" -gt 1 ] && [ "${master_addr:-localhost}" = localhost ]; then
    echo "$(basename "$0"): --nnodes ${nnodes}: --master-addr is localhost; the other nodes reach node 0 by its" \
      "address (give it on every node)" >&2
  fi
  if [ "${cpu_ranks:-1}" -gt 1 ] && [ "${ngpu:-}" != 0 ]; then
    echo "$(basename "$0"): --cpu-ranks ${cpu_ranks} trains on the CPU: give --ngpu 0 with it" >&2; exit 1
  fi
  if [ "${ngpu:-0}" -gt 0 ]; then
    gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')
    if [ "$gpus" -lt "$ngpu" ]; then
      echo "$(basename "$0"): --ngpu $ngpu: torch sees $gpus GPU(s) here (CUDA_VISIBLE_DEVICES=" \
        "${CUDA_VISIBLE_DEVICES-unset}); --ngpu 0 trains on the CPU" >&2
      exit 1
    fi
  fi
}

training_processes() {  # training_processes: steps/train.py's processes on this node
  if [ "${ngpu:-}" = 0 ]; then echo "${cpu_ranks:-1}"; else echo "${ngpu:-1}"; fi
}

training_command() {
  local processes threads
  processes=$(training_processes)
  if [ "$processes" -gt 1 ] || [ "${nnodes:-1}" -gt 1 ]; then
    threads=$(( $(nproc) / processes ))  # torchrun would give each process one
    # torchrun passes a SIGTERM on and kills the ranks 30 s later: let a long step reach its checkpoint
    printf '%s\n' env "OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( threads > 0 ? threads : 1 ))}" \
      TORCH_ELASTIC_SHUTDOWN_TIMEOUT=600 torchrun
    if [ "${nnodes:-1}" -gt 1 ]; then
      printf '%s\n' "--nnodes=$nnodes" "--node_rank=$node_rank" "--master_addr=$master_addr" \
        "--master_port=$master_port"
    else
      echo --standalone  # a free port of its own: trainings of other recipes at once do not meet
    fi
    echo "--nproc_per_node=$processes"
  fi
  echo steps/train.py
  case ${ngpu:-} in
    "") ;;
    0) printf '%s\n' --device cpu ;;
    *) printf '%s\n' --device cuda ;;
  esac
}

train_model() {  # train_model STAGE CONFIG EXP LANG [INIT] [SEED]: the training once train_wanted chose to run it
  local stage_n=$1 config=$2 exp=$3 lang=$4 log options command
  mapfile -t options < <(train_options "${5:-}" "${6:-}")
  command=$(training_command) || return  # (a failure inside mapfile's < <(...) would go unseen)
  mapfile -t command <<< "$command"
  log=$(stage_log "$stage_n" train "$exp")
  logged "$log" "${command[@]}" --config "$config" --train-list data/train/data.list --valid-list data/dev/data.list \
    --lang-dir "$lang" --exp-dir "$exp" --resume "${options[@]}" || return
  logged "$log" steps/plot_training.py --title "$(basename "$PWD") $(basename "$exp")" "$exp/training.png" "$exp" \
    || return
  trained_done "$stage_n" train "$exp"
}

seed_exp() {  # seed_exp BASE K: the experiment of seed K (0: the config's own seed)
  if [ "$2" -eq 0 ]; then echo "$1"; else echo "${1}_seed$2"; fi
}

seed_option() {  # seed_option K: train_model's SEED for seed K (0: none, the config's)
  if [ "$1" -gt 0 ]; then echo "$1"; fi
}

train_at_once() {
  local n=$1 lang=$2 training config exp init seed threads pid logs=() status=0
  shift 2
  if [ $# -eq 0 ]; then return 0; fi
  if [ $# -eq 1 ] || [ "$(training_processes)" -gt 1 ]; then  # several processes each: one training after another
    for training; do
      IFS='|' read -r config exp init seed <<< "$training"
      train_model "$n" "$config" "$exp" "$lang" "$init" "$seed"
    done
    return
  fi
  threads=$(( $(nproc) / $# ))
  [ "$threads" -ge 1 ] || threads=1
  for training; do
    IFS='|' read -r config exp init seed <<< "$training"
    logs+=("$(stage_log "$n" train "$exp")")
    at_once train_quietly "$threads" "$n" "$config" "$exp" "$lang" "$init" "$seed"  # stop_logged stops them
  done
  echo "$(date +%T) stage $n: $# trainings at once, $threads thread(s) each;" \
    "their output only in their logs: ${logs[*]}"
  each_ended
  [[ " ${ended_well[*]} " != *" false "* ]] || status=1
  echo "$(date +%T) stage $n: the $# trainings ended$([ "$status" -eq 0 ] || echo ", not all well")"
  return "$status"
}

train_quietly() {  # train_quietly THREADS STAGE CONFIG EXP LANG INIT SEED: train_model on THREADS, output in its log
  export OMP_NUM_THREADS=$1
  shift
  train_model "$@" > /dev/null
}

other_seeds=()  # seed_stages: the seeds' experiments not chosen
seed_stages() {
  local train_n=$1 average_n=$2 decode_n=$3 config=$4 base=$5 lang=$6 init=$7 seeds=$8 average=$9 method=${10}
  local seed candidate tag wer best= best_wer= results=() wanted=()
  [[ $seeds =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --seeds takes a number of 1 or more, got '$seeds'" >&2; return 1; }
  for ((seed = 0; seed < seeds; seed++)); do
    candidate=$(seed_exp "$base" "$seed")
    if train_wanted "$train_n" "$config" "$candidate" "$lang" "$init" "$(seed_option "$seed")"; then
      wanted+=("$config|$candidate|$init|$(seed_option "$seed")")
    fi
  done
  train_at_once "$train_n" "$lang" "${wanted[@]}"
  [ "$seeds" -gt 1 ] && [ "$stop_stage" -ge "$average_n" ] || return 0
  for ((seed = 0; seed < seeds; seed++)); do  # every seed averaged where its stage runs: a later --stage finds it
    average_stage "$average_n" "$(seed_exp "$base" "$seed")" "$average"
  done
  [ "$stop_stage" -ge "$decode_n" ] || return 0
  for ((seed = 0; seed < seeds; seed++)); do
    candidate=$(seed_exp "$base" "$seed")
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
  local stage_n=$1 config=$2 exp=$3 lang=$4 average=$5 companion_config=${6:-} companion_exp=${7:-}
  local companion_average=${8:-} wanted=()
  if [ "$stage" -gt "$stage_n" ] || [ "$stop_stage" -lt "$stage_n" ]; then  # --stage 5: decode what exists;
    # the trainings are asked about all the same, so that a config or data of theirs changed since marks the
    # results printed as from before the changes
    train_wanted "$stage_n" "$config" "$exp" "$lang" || true
    [ -z "$companion_config" ] || train_wanted "$stage_n" "$companion_config" "$companion_exp" "$lang" || true
    init_checkpoint=$(checkpoint_of "$exp" "$(model_tag_of "$exp" "$average")")
    return
  fi
  local companion=${companion_config:+, and at once its companion $companion_config into $companion_exp}
  echo "$(date +%T) stage $stage_n: first $config into $exp, the model --train-config starts from$companion"
  ! train_wanted "$stage_n" "$config" "$exp" "$lang" || wanted+=("$config|$exp||")
  if [ -n "$companion_config" ] && train_wanted "$stage_n" "$companion_config" "$companion_exp" "$lang"; then
    wanted+=("$companion_config|$companion_exp||")
  fi
  train_at_once "$stage_n" "$lang" "${wanted[@]}"
  [ -z "$companion_config" ] || average_stage "$stage_n" "$companion_exp" "$companion_average"
  average_stage "$stage_n" "$exp" "$average"
  init_checkpoint=$(checkpoint_of "$exp" "$(model_tag_of "$exp" "$average")")
}

starts_from_a_model() {
  python3 -c 'import sys, yaml; config = yaml.safe_load(open(sys.argv[1])) or {}
sys.exit(0 if (config.get("train") or {}).get("init_from") else 1)' "$1"
}
