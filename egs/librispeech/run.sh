#!/usr/bin/env bash
# LibriSpeech: download -> data dirs for every subset -> shards -> BPE units -> train (one process,
# or torchrun over GPUs and nodes) -> average checkpoints -> decode dev/test clean/other -> scores.
# The training data is named after its subsets (data/train_clean_100+clean_360+other_500) and keeps
# its units (lang_bpe500/ in it); markers name what a stage was run for, so another --train-sets,
# --vocab-size or --average runs exactly the stages it changes (training on other data or units sets the old
# experiment aside as <exp>.N and starts anew; give it its own --exp to keep both current).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"  # `sh run.sh`: a bash script, run by bash
set -euo pipefail
{  # bash reads a script as it runs it; in braces all of it is read first: safe to edit while it runs

stage=0
stop_stage=100
corpus_dir=          # the LibriSpeech/ folder holding <subset>/<reader>/<chapter>/; empty: the one
                     # given to a run before (data/.corpus_dir), else download into downloads/
mirror=https://www.openslr.org/resources/12
train_sets="train-clean-100 train-clean-360 train-other-500"
valid_set=dev-clean
test_sets="dev-clean dev-other test-clean test-other"
train_config=conf/small.yaml
exp=exp/small
unit_type=bpe
vocab_size=500
nj=4                 # parallel jobs: data preparation (one subset each) and shard writing
ngpu=                # training processes per node, one per GPU (2 or more: torchrun's DDP); 0: the CPU; empty: one
                     # process, on a GPU where there is one
cpu_ranks=1          # with --ngpu 0: training processes on the CPU (2 or more: torchrun's DDP, gloo)
nnodes=1             # multi-node training: run this on every node with its --node-rank; node 0 then decodes
node_rank=0
master_addr=localhost
master_port=29500
average=5            # the last N epoch checkpoints averaged for decoding (0: the last epoch alone)
methods="greedy modified_beam"
help_message="Usage: ./run.sh [--stage N] [--stop-stage M] [--corpus-dir DIR/LibriSpeech] [--mirror URL] [--nj N]
  [--train-sets \"...\"] [--valid-set SET] [--test-sets \"...\"] [--unit-type bpe|unigram|char] [--vocab-size N]
  [--train-config FILE] [--exp DIR] [--ngpu N] [--cpu-ranks N]
  [--nnodes N --node-rank R --master-addr HOST --master-port PORT]
  [--average N] [--methods \"greedy modified_beam beam\"]
Stages: 0 download, 1 data dirs, 2 shards, 3 units, 4 train, 5 average, 6 decode and score.
Several nodes: data/, downloads/ and --exp on storage every node sees at the same path (data lists name files
by absolute path); give every node the same options, and --node-rank its own: nodes other than 0 run stage 4
alone, when node 0's training is not done before (start them once node 0 has reached it)."

[ "$(cd "$(dirname "$0")" && pwd -P)" = "$(pwd -P)" ] || {  # its paths (conf/, local/, data/) are the recipe's
  case " $* " in *" --help "*|*" -h "*) printf '%s\n' "$help_message"; exit 0 ;; esac  # its usage from anywhere
  echo "$(basename "$0"): run it from its recipe folder: cd $(dirname "$0") && ./run.sh" >&2; exit 1; }
. utils/parse_options.sh  # before path.sh: --help needs no environment (a fresh clone's would install it first)
. ./path.sh
. utils/stages.sh
check_run_arguments "$@"
. utils/decoding.sh
. utils/training.sh
check_training_processes  # --ngpu, --cpu-ranks
check_methods "$train_config" "$methods"
check_no_lm_methods "$methods"

name() { echo "${1//-/_}"; }  # dev-clean -> dev_clean
all_sets=$(echo $train_sets $valid_set $test_sets | tr ' ' '\n' | sort -u | tr '\n' ' ')
combined=false
if [ "$(echo $train_sets | wc -w)" -eq 1 ]; then
  train=$(name $train_sets)  # the subset's own data dir
else
  combined=true
  train=train_$(echo $train_sets | tr ' ' '\n' | sort -u | sed 's/^train-//' | tr '-' '_' | paste -sd+)
fi
lang=data/$train/lang_$unit_type$vocab_size
[ "$node_rank" -eq 0 ] || stop_stage=$(( stop_stage < 4 ? stop_stage : 4 ))  # node 0 prepares the data and decodes

if [ "$node_rank" -eq 0 ]; then  # stages 0-3: the data every node reads (node 0's; the others train alone)
  corpus_dir=$(corpus_dir_of "$corpus_dir")  # the one given before, if not given
  if [ -z "$corpus_dir" ]; then
    corpus_dir=downloads/LibriSpeech
    for set in $all_sets; do
      if stage_wanted 0 "download-$set"; then
        log=$(stage_log 0 "download-$set")
        logged "$log" local/download.py --mirror "$mirror" downloads "$set"
        stage_done 0 "download-$set" -- "$corpus_dir/$set"  # deleted since: downloaded again
      fi
    done
  fi

  todo=()
  for set in $all_sets; do
    if stage_wanted 1 "data-$set" -- "$corpus_dir/$set" ++ local/data_prep.py "$(corpus_place "$corpus_dir/$set")"; then
      todo+=("$set")
    fi
  done
  # up to --nj subsets at a time, each with its stage log, each marked done once its prep ended well; in the
  # background (at_once), so that kill <run.sh> stops them at once
  failed=() at_a_time=$(( nj > 0 ? nj : ${#todo[@]} + 1 ))  # --nj 0: all at once, as xargs -P 0
  for ((first = 0; first < ${#todo[@]}; first += at_a_time)); do
    group=("${todo[@]:first:at_a_time}")
    for set in "${group[@]}"; do
      at_once logged "$(stage_log 1 "data-$set")" local/data_prep.py "$corpus_dir/$set" "data/$(name "$set")"
    done
    each_ended
    for i in "${!group[@]}"; do
      if ${ended_well[i]}; then stage_done 1 "data-${group[i]}" -- "data/$(name "${group[i]}")/text"
      else failed+=("${group[i]}"); fi
    done
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "stage 1: the data prep of ${failed[*]} failed (their logs say why)" >&2
    exit 1
  fi
  # the subsets' files and markers (another corpus's audio at other paths under the same transcripts combines again)
  if $combined && stage_wanted 1 "data-$train" -- $(for set in $train_sets; do echo data/$(name $set)/text; done) ++ \
      $(for set in $train_sets; do
        echo data/$(name $set)/wav.scp data/$(name $set)/utt2spk "$(stage_mark 1 "data-$set")"
      done); then
    log=$(stage_log 1 "data-$train")
    logged "$log" utils/combine_data.sh data/$train $(for set in $train_sets; do echo data/$(name $set); done)
    logged "$log" utils/validate_data_dir.sh --no-feats data/$train
    stage_done 1 "data-$train" -- data/$train/text
  fi

  data_marks() {  # data_marks DIR: the stage-1 markers of data/DIR's audio (each subset's, for the combined set)
    local subset
    if $combined && [ "$1" = "$train" ]; then
      for subset in $train_sets; do stage_mark 1 "data-$subset"; done
    else
      stage_mark 1 "data-${1//_/-}"
    fi
  }
  for set in $(for s in $train $valid_set $test_sets; do name $s; done | sort -u); do
    # the markers: a recording rewritten as another of the same length changes no file of the data dir
    if stage_wanted 2 "shards-$set" -- $(data_marks "$set") data/$set/wav.scp data/$set/text data/$set/utt2dur; then
      log=$(stage_log 2 "shards-$set")
      logged "$log" steps/make_shards.py --replace --nj "$(( nj > 0 ? nj : $(nproc) ))" --utts-per-shard 1000 \
        data/$set data/$set/shards data/$set/data.list
      stage_done 2 "shards-$set" -- data/$set/data.list
    fi
  done

  # An experiment keeps a copy of its units (<exp>/lang), and a resumed one refuses others.
  if stage_wanted 3 "units-$train-$unit_type$vocab_size" -- data/$train/text; then
    log=$(stage_log 3 "units-$train-$unit_type$vocab_size")
    logged "$log" steps/build_units.py --unit-type "$unit_type" --vocab-size "$vocab_size" data/$train "$lang"
    stage_done 3 "units-$train-$unit_type$vocab_size" -- "$lang/units.txt"
  fi
fi

mapfile -t units < <(unit_files "$lang")
config_inputs later "$train_config"
inputs=("$train_config" data/$train/shards data/$(name $valid_set)/shards "${units[@]}" ++ "${later[@]}")
train_stage=train  # each node its own marker and log in the shared $exp: node 1's train-node1
if [ "$node_rank" -gt 0 ]; then  # node 0's marker decides, read alone: the nodes train together or not at all
  train_stage=train-node$node_rank
  if [ "$stage" -eq 0 ] && stage_done_before 4 train "$exp" -- "${inputs[@]}"; then
    echo "run.sh: node $node_rank: node 0's training of $exp is done before with these inputs: nothing to train"
    exit 0
  fi
  rm -f "$(stage_mark 4 "$train_stage" "$exp")"  # (its own would skip a training node 0 runs, and leave it waiting)
fi
if stage_wanted 4 "$train_stage" "$exp" -- "${inputs[@]}"; then
  log=$(stage_log 4 "$train_stage" "$exp")
  command=$(training_command)  # torchrun for several processes or nodes (utils/training.sh)
  mapfile -t command <<< "$command"
  logged "$log" "${command[@]}" --config "$train_config" --train-list data/$train/data.list \
    --valid-list data/$(name $valid_set)/data.list --lang-dir "$lang" --exp-dir "$exp" --resume
  trained_done 4 "$train_stage" "$exp"
fi
if [ "$node_rank" -gt 0 ]; then
  echo "run.sh: node $node_rank has done its part of training; node 0 averages and decodes"
  exit 0
fi

average_stage 5 "$exp" "$average"
model_tag=$(model_tag_of "$exp" "$average")  # names the model decoded: avg5-epoch-40

device=cpu
[ "$ngpu" = 0 ] || ! python -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' || device=cuda
# stage 6: each set decoded by each method into $exp/decode-SET-METHOD-$model_tag
checkpoint=$(checkpoint_of "$exp" "$model_tag")
settings=$(decoding_settings "$exp")  # once for every method and set
for method in $methods; do
  for set in $test_sets; do
    set=$(name "$set")
    if stage_wanted 6 "decode-$set-$method-$model_tag" "$exp" -- "$checkpoint" "data/$set/data.list" "data/$set/text" \
        --device "$device" ++ "$settings"; then
      logged "$(stage_log 6 "decode-$set-$method-$model_tag" "$exp")" steps/decode.py --method "$method" \
        --checkpoint "$checkpoint" --tag "$model_tag" --device "$device" "$exp" "data/$set/data.list" "$set"
      stage_done 6 "decode-$set-$method-$model_tag" "$exp" -- "$exp/decode-$set-$method-$model_tag/wer"
    fi
  done
done
for method in $methods; do
  for set in $test_sets; do
    decode_result "librispeech $set $method ($(basename "$exp")${model_tag:+ $model_tag}):" \
      "$exp" "$model_tag" "$(name $set)" "$method"
  done
done
exit
}
