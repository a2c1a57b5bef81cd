#!/usr/bin/env bash
# Kaldi's yesno, for transducers: 60 recordings of one man saying eight yes/no words each.
# Download, data dirs (Kaldi's split: first 30 sorted files train, last 30 test), shards, word
# units, a tiny model trained on CPU, decoding of the test set, the %WER line.
# Every training file starts with "no": the model trains on the recordings plus cuts of
# every span of words (local/word_segments.py), or it learns to say "no" first without listening.
set -euo pipefail

stage=0
stop_stage=100
corpus_dir=          # a folder holding the 60 waves_yesno .wav files; empty: download it
mirror=https://www.openslr.org/resources/1
train_config=conf/tiny.yaml
exp=exp/tiny
method=modified_beam
help_message="Usage: ./run.sh [--stage N] [--stop-stage M] [--corpus-dir DIR] [--mirror URL] [--train-config FILE] [--exp DIR] [--method M]
Stages: 0 download, 1 data dirs, 2 shards, 3 units, 4 train, 5 decode (prints the %WER line)."

. ./path.sh
. utils/parse_options.sh
. utils/stages.sh

if [ -z "$corpus_dir" ]; then
  corpus_dir=downloads/waves_yesno
  if stage_wanted 0 download; then
    local/download.py --mirror "$mirror" downloads
    stage_done 0 download
  fi
fi

if stage_wanted 1 data; then
  local/data_prep.py --word-segments "$corpus_dir" data
  stage_done 1 data
fi

if stage_wanted 2 shards; then
  for set in train_yesno_segments test_yesno; do
    steps/make_shards.py --utts-per-shard 100 data/$set data/$set/shards data/$set/data.list
  done
  stage_done 2 shards
fi

if stage_wanted 3 units; then
  steps/build_units.py --unit-type word data/train_yesno data/lang
  stage_done 3 units
fi

if stage_wanted 4 train; then
  steps/train.py --config "$train_config" --train-list data/train_yesno_segments/data.list --valid-list data/test_yesno/data.list \
    --lang-dir data/lang --exp-dir "$exp" --resume
  stage_done 4 train
fi

if stage_wanted 5 decode; then
  steps/decode.py --method "$method" "$exp" data/test_yesno/data.list test_yesno
  stage_done 5 decode
fi

echo "yesno: test $(cat "$exp/decode-test_yesno-$method/wer")"
