#!/usr/bin/env bash
# Free Spoken Digit Dataset: 6 speakers x 10 digits x 50 recordings, 8 kHz. The yesno recipe copied
# to a new corpus: only local/fsdd/data_prep.py and conf/ differ. Test split: recordings 0-4.
set -euo pipefail

stage=0
stop_stage=100
corpus_dir=          # the dataset's recordings/ folder
train_config=conf/tiny.yaml
exp=exp/tiny
method=greedy
help_message="Usage: ./run.sh --corpus-dir FSDD/recordings [--stage N] [--stop-stage M] [--train-config FILE] [--exp DIR]
FSDD is not on OpenSLR: git clone https://github.com/Jakobovski/free-spoken-digit-dataset and pass its recordings/.
Stages: 1 data dirs, 2 shards, 3 units, 4 train, 5 decode (prints the %WER line)."

. ./path.sh
. utils/parse_options.sh
. utils/stages.sh

if [ -z "$corpus_dir" ] || [ ! -d "$corpus_dir" ]; then
  echo "run.sh: --corpus-dir must name FSDD's recordings/ folder (got '$corpus_dir')" >&2
  printf '%s\n' "$help_message" >&2
  exit 1
fi

if stage_wanted 1 data; then
  local/data_prep.py "$corpus_dir" data
  stage_done 1 data
fi

if stage_wanted 2 shards; then
  for set in train test; do
    steps/make_shards.py --nj 2 --utts-per-shard 300 data/$set data/$set/shards data/$set/data.list
  done
  stage_done 2 shards
fi

if stage_wanted 3 units; then
  steps/build_units.py --unit-type word data/train data/lang
  stage_done 3 units
fi

if stage_wanted 4 train; then
  steps/train.py --config "$train_config" --train-list data/train/data.list --valid-list data/test/data.list \
    --lang-dir data/lang --exp-dir "$exp" --resume
  stage_done 4 train
fi

if stage_wanted 5 decode; then
  steps/decode.py --method "$method" "$exp" data/test/data.list test
  stage_done 5 decode
fi

echo "fsdd: test $(cat "$exp/decode-test-$method/wer")"
