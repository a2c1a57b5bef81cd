#!/usr/bin/env bash
# Free Spoken Digit Dataset: 6 speakers x 10 digits x 50 recordings, 8 kHz. The yesno recipe copied
# to a new corpus: its own local/data_prep.py and conf/. Test split: recordings 0-4; dev (validation): 5-7.
# With --strings N the model also learns connected digits: N strings of 2-7 digits made from the
# training recordings (local/digit_strings.py) join the training set (data/train_with_stringsN), and
# N/5 (at least 1) made from the test recordings are a second test set (data/test_stringsN); the model
# is then conf/strings.yaml in exp/stringsN.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"  # `sh run.sh`: a bash script, run by bash
set -euo pipefail
{  # bash reads a script as it runs it; in braces all of it is read first: safe to edit while it runs

stage=0
stop_stage=100
corpus_dir=          # the dataset's recordings/ folder; empty: the one given to a run before (data/.corpus_dir)
train_config=        # default conf/tiny.yaml; with --strings, conf/strings.yaml
exp=                 # default exp/tiny; with --strings N, exp/stringsN
method=greedy
average=0            # the last N epochs averaged for decoding (0: the last epoch alone)
strings=0            # digit strings to train on (0: single digits only); N/5 more are tested
help_message="Usage: ./run.sh --corpus-dir FSDD/recordings [--stage N] [--stop-stage M] [--train-config FILE]
  [--exp DIR] [--strings N] [--average N] [--method greedy|beam|modified_beam]
FSDD is not on OpenSLR: git clone https://github.com/Jakobovski/free-spoken-digit-dataset and pass its recordings/.
Stages: 1 data dirs (train, dev: recordings 5-7, test: 0-4), 2 shards, 3 units, 4 train, 5 average (with
--average N), 6 decode dev and test (prints the %WER lines).
Connected digits: ./run.sh --corpus-dir DIR --strings 1000 (a modified transducer, conf/strings.yaml, in
exp/strings1000)"

[ "$(cd "$(dirname "$0")" && pwd -P)" = "$(pwd -P)" ] || {  # its paths (conf/, local/, data/) are the recipe's
  case " $* " in *" --help "*|*" -h "*) printf '%s\n' "$help_message"; exit 0 ;; esac  # its usage from anywhere
  echo "$(basename "$0"): run it from its recipe folder: cd $(dirname "$0") && ./run.sh" >&2; exit 1; }
. utils/parse_options.sh  # before path.sh: --help needs no environment (a fresh clone's would install it first)
. ./path.sh
test_sets="dev test"  # decoded: dev (validated on; choices are made there) and test
train_set=train
if [ "$strings" -gt 0 ]; then
  test_sets="dev test test_strings$strings"
  train_set=train_with_strings$strings
  train_config=${train_config:-conf/strings.yaml}
  exp=${exp:-exp/strings$strings}
  stage_marks=exp/.stages-strings$strings  # the data stages of each N, beside those of single digits
fi
train_config=${train_config:-conf/tiny.yaml}
exp=${exp:-exp/tiny}
. utils/stages.sh
check_run_arguments "$@"
. utils/decoding.sh
check_one_method "$method"
check_methods "$train_config" "$method"
check_no_lm_methods "$method"

corpus_dir=$(corpus_dir_of "$corpus_dir")  # the one given before, if not given
if [ -z "$corpus_dir" ] || [ ! -d "$corpus_dir" ]; then
  echo "run.sh: --corpus-dir must name FSDD's recordings/ folder (got '$corpus_dir')" >&2
  printf '%s\n' "$help_message" >&2
  exit 1
fi

if stage_wanted 1 data -- "$corpus_dir" "$strings" ++ local/data_prep.py local/digit_strings.py \
    "$(corpus_place "$corpus_dir")"; then
  log=$(stage_log 1 data)
  logged "$log" local/data_prep.py "$corpus_dir" data
  if [ "$strings" -gt 0 ]; then
    logged "$log" local/digit_strings.py --num "$strings" --seed 1 data/train data/train_strings$strings
    logged "$log" local/digit_strings.py --num $(( strings >= 5 ? strings / 5 : 1 )) --seed 2 \
      data/test data/test_strings$strings
    logged "$log" utils/combine_data.sh data/$train_set data/train data/train_strings$strings
  fi
  stage_done 1 data -- data/$train_set/text $(for set in $test_sets; do echo data/$set/text; done)
fi

if stage_wanted 2 shards -- "$(stage_mark 1 data)" \
    $(for set in $train_set $test_sets; do echo data/$set/wav.scp data/$set/text; done); then
  log=$(stage_log 2 shards)
  for set in $train_set $test_sets; do
    logged "$log" steps/make_shards.py --replace --nj 2 --utts-per-shard 300 \
      data/$set data/$set/shards data/$set/data.list
  done
  stage_done 2 shards -- $(for set in $train_set $test_sets; do echo data/$set/data.list; done)
fi

if stage_wanted 3 units -- data/$train_set/text; then
  log=$(stage_log 3 units)
  logged "$log" steps/build_units.py --unit-type word data/$train_set data/lang
  stage_done 3 units -- data/lang/units.txt
fi

config_inputs later "$train_config"
if stage_wanted 4 train "$exp" -- "$train_config" data/$train_set/shards data/dev/shards data/lang/units.txt \
    ++ "${later[@]}"; then
  log=$(stage_log 4 train "$exp")
  logged "$log" steps/train.py --config "$train_config" \
    --train-list data/$train_set/data.list --valid-list data/dev/data.list \
    --lang-dir data/lang --exp-dir "$exp" --resume
  trained_done 4 train "$exp"
fi

average_stage 5 "$exp" "$average"
model_tag=$(model_tag_of "$exp" "$average")  # names the model decoded: avg5-epoch-40

# stage 6: each set decoded into $exp/decode-SET-$method-$model_tag
checkpoint=$(checkpoint_of "$exp" "$model_tag")
settings=$(decoding_settings "$exp")  # once for every set
for set in $test_sets; do
  if stage_wanted 6 "decode-$set-$method-$model_tag" "$exp" -- \
      "$checkpoint" "data/$set/data.list" "data/$set/text" ++ "$settings"; then
    logged "$(stage_log 6 "decode-$set-$method-$model_tag" "$exp")" steps/decode.py --method "$method" \
      --checkpoint "$checkpoint" --tag "$model_tag" "$exp" "data/$set/data.list" "$set"
    stage_done 6 "decode-$set-$method-$model_tag" "$exp" -- "$exp/decode-$set-$method-$model_tag/wer"
  fi
done
for set in $test_sets; do
  decode_result "fsdd: $set" "$exp" "$model_tag" "$set" "$method"
done
exit
}
