#!/usr/bin/env bash
# LibriSpeech: download -> data dirs for every subset -> shards -> BPE units -> train (one process,
# or torchrun over GPUs and nodes) -> average checkpoints -> decode dev/test clean/other -> scores.
set -euo pipefail

stage=0
stop_stage=100
corpus_dir=          # a folder holding LibriSpeech/<subset>/...; empty: download into downloads/
mirror=https://www.openslr.org/resources/12
train_sets="train-clean-100 train-clean-360 train-other-500"
valid_set=dev-clean
test_sets="dev-clean dev-other test-clean test-other"
train_config=conf/small.yaml
exp=exp/small
unit_type=bpe
vocab_size=500
nj=4                 # parallel jobs for data preparation
ngpu=1               # processes per node for training (0: one process on the CPU)
nnodes=1             # multi-node training: run this on every node with its --node-rank
node_rank=0
master_addr=localhost
master_port=29500
average=5            # checkpoints averaged for decoding (0: none)
methods="greedy modified_beam"
help_message="Usage: ./run.sh [--stage N] [--stop-stage M] [--corpus-dir DIR] [--train-config FILE] [--exp DIR] [--ngpu N]
  [--nnodes N --node-rank R --master-addr HOST --master-port PORT] [--train-sets \"...\"] [--test-sets \"...\"]
Stages: 0 download, 1 data dirs, 2 shards, 3 units, 4 train, 5 average, 6 decode and score."

. ./path.sh
. utils/parse_options.sh
. utils/stages.sh

name() { echo "${1//-/_}"; }  # dev-clean -> dev_clean
all_sets=$(echo $train_sets $valid_set $test_sets | tr ' ' '\n' | sort -u | tr '\n' ' ')

if [ -z "$corpus_dir" ]; then
  corpus_dir=downloads/LibriSpeech
  if stage_wanted 0 download; then
    local/download.py --mirror "$mirror" downloads $all_sets
    stage_done 0 download
  fi
fi

if stage_wanted 1 data; then
  for set in $all_sets; do
    local/data_prep.py "$corpus_dir/$set" data/$(name $set)
  done
  utils/combine_data.sh data/train $(for set in $train_sets; do echo data/$(name $set); done)
  utils/validate_data_dir.sh --no-feats data/train
  stage_done 1 data
fi

if stage_wanted 2 shards; then
  for set in train $(for s in $valid_set $test_sets; do name $s; done | sort -u); do
    steps/make_shards.py --nj "$nj" --utts-per-shard 1000 data/$set data/$set/shards data/$set/data.list
  done
  stage_done 2 shards
fi

if stage_wanted 3 units; then
  steps/build_units.py --unit-type "$unit_type" --vocab-size "$vocab_size" data/train data/lang
  stage_done 3 units
fi

if stage_wanted 4 train "$exp"; then
  train_args=(--config "$train_config" --train-list data/train/data.list --valid-list data/$(name $valid_set)/data.list
              --lang-dir data/lang --exp-dir "$exp" --resume)
  if [ "$ngpu" -gt 1 ] || [ "$nnodes" -gt 1 ]; then
    torchrun --nnodes="$nnodes" --node_rank="$node_rank" --nproc_per_node="$ngpu" \
      --master_addr="$master_addr" --master_port="$master_port" steps/train.py "${train_args[@]}"
  else
    steps/train.py "${train_args[@]}"
  fi
  stage_done 4 train "$exp"
fi

# The model decoded: the average of the last --average epochs (fewer if fewer were trained), or the
# last epoch; model_tag names it in the decode stages' markers.
epochs=$( (ls -v "$exp"/epoch-*.pt 2>/dev/null || true) | wc -l)
last_epoch=$( (ls -v "$exp"/epoch-*.pt 2>/dev/null || true) | tail -n 1)
checkpoint_args=(--checkpoint "$last_epoch")
model_tag=$(basename "$last_epoch" .pt)
if [ "$average" -gt 0 ]; then
  n=$(( epochs < average ? epochs : average ))
  if stage_wanted 5 "average-$n" "$exp"; then
    [ "$n" -gt 0 ] || { echo "run.sh: no epoch checkpoints in $exp to average; train first (stage 4)" >&2; exit 1; }
    steps/average_checkpoints.py --last "$n" "$exp"  # writes $exp/avg-$n.pt
    stage_done 5 "average-$n" "$exp"
  fi
  checkpoint_args=(--checkpoint "$exp/avg-$n.pt")
  model_tag=avg$n
fi

device=cpu
[ "$ngpu" -gt 0 ] && python -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' && device=cuda
for method in $methods; do
  for set in $test_sets; do
    if stage_wanted 6 "decode-$(name $set)-$method-$model_tag" "$exp"; then
      steps/decode.py --method "$method" --device "$device" "${checkpoint_args[@]}" "$exp" \
        data/$(name $set)/data.list $(name $set)
      stage_done 6 "decode-$(name $set)-$method-$model_tag" "$exp"
    fi
  done
done

for method in $methods; do
  for set in $test_sets; do
    wer_file=$exp/decode-$(name $set)-$method/wer
    if [ -f "$wer_file" ]; then
      echo "librispeech $set $method: $(cat "$wer_file")"
    else
      echo "librispeech $set $method: not decoded yet ($wer_file missing)"
    fi
  done
done
