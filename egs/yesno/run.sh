#!/usr/bin/env bash
# Kaldi's yesno, for transducers: 60 recordings of one man saying eight yes/no words each.
# Download, data dirs (Kaldi's split: first 30 sorted files train, last 30 test), shards, word
# units, a tiny model trained on CPU, checkpoint averaging, decoding of the test set, the %WER line.
# Every training recording starts with "no" and none holds a word more than five times in a row:
# the model also trains on 600 recordings synthesised from the training recordings' own words in
# random order (local/synthesize.py), or it learns those accidents as rules. Kaldi's split has no dev set:
# training validates on 60 more synthesised from the training recordings (another seed), never on test.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"  # `sh run.sh`: a bash script, run by bash
set -euo pipefail
{  # bash reads a script as it runs it; in braces all of it is read first: safe to edit while it runs

stage=0
stop_stage=100
corpus_dir=          # a folder holding the 60 waves_yesno .wav files; empty: the one given to a
                     # run before (data/.corpus_dir), else download it
mirror=https://www.openslr.org/resources/1
train_config=conf/tiny.yaml
exp=exp/tiny
num_synth=600        # synthesised training recordings (and 60 more, of another seed, the dev set)
average=3            # the last N epochs averaged for decoding (0: the last epoch alone)
method=modified_beam
help_message="Usage: ./run.sh [--stage N] [--stop-stage M] [--corpus-dir DIR] [--mirror URL] [--train-config FILE]
  [--exp DIR] [--num-synth N] [--average N] [--method greedy|beam|modified_beam]
Stages: 0 download, 1 data dirs (train, its synthesised sequences, a synthesised dev set, test), 2 shards, 3 units,
4 train, 5 average, 6 decode (prints the %WER line)."

[ "$(cd "$(dirname "$0")" && pwd -P)" = "$(pwd -P)" ] || {  # its paths (conf/, local/, data/) are the recipe's
  case " $* " in *" --help "*|*" -h "*) printf '%s\n' "$help_message"; exit 0 ;; esac  # its usage from anywhere
  echo "$(basename "$0"): run it from its recipe folder: cd $(dirname "$0") && ./run.sh" >&2; exit 1; }
. utils/parse_options.sh  # before path.sh: --help needs no environment (a fresh clone's would install it first)
. ./path.sh
. utils/stages.sh
check_run_arguments "$@"
. utils/decoding.sh
check_one_method "$method"
check_methods "$train_config" "$method"
check_no_lm_methods "$method"

corpus_dir=$(corpus_dir_of "$corpus_dir")  # the one given before, if not given
if [ -z "$corpus_dir" ]; then
  corpus_dir=downloads/waves_yesno
  if stage_wanted 0 download; then
    log=$(stage_log 0 download)
    logged "$log" local/download.py --mirror "$mirror" downloads
    stage_done 0 download -- "$corpus_dir"  # a corpus deleted since is downloaded again
  fi
fi

if stage_wanted 1 data -- "$corpus_dir" "$num_synth" ++ local/data_prep.py local/synthesize.py local/word_segments.py \
    "$(corpus_place "$corpus_dir")"; then
  log=$(stage_log 1 data)
  logged "$log" local/data_prep.py "$corpus_dir" data
  logged "$log" local/synthesize.py --num "$num_synth" data/train_yesno data/train_yesno_synth
  logged "$log" utils/combine_data.sh data/train_yesno_aug data/train_yesno data/train_yesno_synth
  logged "$log" local/synthesize.py --num 60 --seed 1 --name dev data/train_yesno data/dev_yesno
  stage_done 1 data -- data/train_yesno_aug/text data/dev_yesno/text data/test_yesno/text
fi

sets="train_yesno_aug dev_yesno test_yesno"
if stage_wanted 2 shards -- "$(stage_mark 1 data)" $(for set in $sets; do echo data/$set/wav.scp data/$set/text; done)
then
  log=$(stage_log 2 shards)
  for set in $sets; do
    logged "$log" steps/make_shards.py --replace --utts-per-shard 200 data/$set data/$set/shards data/$set/data.list
  done
  stage_done 2 shards -- $(for set in $sets; do echo data/$set/data.list; done)
fi

if stage_wanted 3 units -- data/train_yesno/text; then
  log=$(stage_log 3 units)
  logged "$log" steps/build_units.py --unit-type word data/train_yesno data/lang
  stage_done 3 units -- data/lang/units.txt
fi

config_inputs later "$train_config"
if stage_wanted 4 train "$exp" -- "$train_config" data/train_yesno_aug/shards data/dev_yesno/shards \
    data/lang/units.txt ++ "${later[@]}"; then
  log=$(stage_log 4 train "$exp")
  logged "$log" steps/train.py --config "$train_config" \
    --train-list data/train_yesno_aug/data.list --valid-list data/dev_yesno/data.list \
    --lang-dir data/lang --exp-dir "$exp" --resume
  trained_done 4 train "$exp"
fi

average_stage 5 "$exp" "$average"
model_tag=$(model_tag_of "$exp" "$average")  # names the model decoded: avg3-epoch-10

# stage 6: the test set decoded into $exp/decode-test_yesno-$method-$model_tag
checkpoint=$(checkpoint_of "$exp" "$model_tag")
if stage_wanted 6 "decode-test_yesno-$method-$model_tag" "$exp" -- "$checkpoint" data/test_yesno/data.list \
    data/test_yesno/text ++ "$(decoding_settings "$exp")"; then
  logged "$(stage_log 6 "decode-test_yesno-$method-$model_tag" "$exp")" steps/decode.py --method "$method" \
    --checkpoint "$checkpoint" --tag "$model_tag" "$exp" data/test_yesno/data.list test_yesno
  stage_done 6 "decode-test_yesno-$method-$model_tag" "$exp" -- "$exp/decode-test_yesno-$method-$model_tag/wer"
fi
decode_result "yesno: test" "$exp" "$model_tag" test_yesno "$method"
exit
}
