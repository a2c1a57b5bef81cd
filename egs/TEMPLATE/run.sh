#!/usr/bin/env bash
# A recipe for a corpus of your own: a folder of recordings and a transcript list -> data dirs train, dev
# and test (local/data_prep.py) -> shards -> character units (or BPE) -> a small transducer trained on the
# CPU (conf/transducer.yaml) -> average -> decode and score dev and test. Made by utils/new_recipe.sh from
# egs/TEMPLATE (README.md, "Adding a corpus"). Hyper-parameters are chosen on dev, never on test.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"  # `sh run.sh`: a bash script, run by bash
set -euo pipefail
{  # bash reads a script as it runs it; in braces all of it is read first: safe to edit while it runs

stage=0
stop_stage=100
corpus_dir=          # the folder of recordings (any format soundfile reads, any rate, mono or stereo); empty: the one
                     # given to a run before (data/.corpus_dir)
transcripts=         # the transcript list; empty: the one given before (data/.transcripts), else
                     # <corpus_dir>/transcripts.txt
test_transcripts=    # a transcript list of the test recordings; empty: the one given before (data/.test_transcripts),
                     # else --test-fraction of the recordings
speaker_regex=       # its first group, searched in a file's path (relative to corpus_dir, without its extension),
                     # names the speaker, e.g. '^([^/]+)/' (a folder per speaker); empty: the one given before
                     # (data/.speaker_regex), else each recording its own
data_dirs=           # instead of --corpus-dir: Kaldi data dirs of your own, "TRAIN DEV [TEST]" (wav.scp, text, utt2spk;
                     # segments, utt2dur where they have them), copied in by steps/import_data_dir.py; empty: the
                     # ones given before (data/.data_dirs)
dev_fraction=        # share held out as dev: whole speakers if there are enough, else recordings at random; empty:
                     # the one given before (data/.dev_fraction), else 0.1
test_fraction=       # share held out as test, as dev, without --test-transcripts (0: no test set); empty: as dev's
train_config=conf/transducer.yaml
exp=exp/transducer
unit_type=char       # char (any language), or bpe or unigram (of --vocab-size units, for a bigger corpus)
vocab_size=64
nj=2
ngpu=                # GPUs to train on, a process each (2 or more: torchrun's DDP); 0: the CPU; empty: one
                     # process, on a GPU where there is one
cpu_ranks=1          # with --ngpu 0: training processes on the CPU (2 or more: torchrun's DDP, gloo), each on
                     # its share of the cores
average=5            # the last N epoch checkpoints averaged for decoding (0: the last epoch alone)
seeds=1              # N > 1: the model trained N times at once (exp with its config's seed, exp_seedK with --seed K,
                     # K < N), each on its share of the cores, and the best on dev kept (by the first LM-fused of
                     # --methods, else the last)
methods=greedy       # rnnt.search_methods: greedy, beam, modified_beam, or LM-fused (modified_beam_lm, beam_lodr, ...):
                     # each one decodes dev and test
lm_order=            # LM-fused methods: the n-gram LM's order (built from data/train, weighted on dev); empty: 3
                     # (char: a word LM) or 5 (bpe: a unit LM)
lm_over=             # the LM's words: words (through the units: char), or units (bpe); empty: as the units
lm_beam=             # the beam of the LM's search, its weights chosen with it; empty: utils/units.sh lm_beam_of
lm_weights=          # the LM weights and length bonuses dev chooses among, comma-separated; empty: those of
lm_bonuses=          # steps/tune_lm_fusion.py
deploy=              # "offline streaming": stages 7-8 export for sherpa-onnx and decode dev and test in it (a
                     # --train-config it runs: conf/deploy.yaml)
attention_chunk=     # a streaming Conformer (model.encoder.chunk_frames) decoded and exported with attention in
                     # chunks of this many encoder frames, or whole (offline only), not its config's; its results
                     # named apart (decode-SET-METHOD+chunk16-TAG; rnnt.attention_chunks). Empty: the config's
left_chunks=         # the same, with this many chunks before each (at least 1; empty: the config's)
help_message="Usage: ./run.sh --corpus-dir DIR [--transcripts FILE] [--test-transcripts FILE] [--speaker-regex RE]
  [--dev-fraction F] [--test-fraction F] | --data-dirs \"TRAIN DEV [TEST]\"
  [--stage N] [--stop-stage M] [--train-config FILE] [--exp DIR] [--unit-type char|bpe|unigram] [--vocab-size N]
  [--nj N] [--ngpu N] [--cpu-ranks N] [--average N] [--seeds N]
  [--methods \"greedy beam modified_beam modified_beam_lm beam_lodr ...\"] [--lm-order N] [--lm-over words|units]
  [--lm-beam N] [--lm-weights W,...] [--lm-bonuses B,...] [--deploy \"offline streaming\"]
  [--attention-chunk FRAMES|whole] [--left-chunks L]
The transcript list (default DIR/transcripts.txt) has a line per recording: its path relative to DIR, with
or without the extension, then the transcript, e.g. 'speaker1/rec01.wav HELLO WORLD'. Bad lines are
reported by file and line and skipped. Audio: any format soundfile reads, any sample rate, mono or stereo.
--speaker-regex: its first group, searched in a file's path without the extension, names the speaker (default:
the one given before, data/.speaker_regex; else each recording its own). dev and test (--dev-fraction,
--test-fraction: 0.1 each) are whole speakers when there are enough, else recordings at random; --test-transcripts
FILE: a test set of your own, recordings of DIR too. These options of the corpus, left out, are the ones given
before with the same --corpus-dir (kept in data/: another --corpus-dir forgets them; 'none', e.g.
--speaker-regex none, forgets one).
--data-dirs: Kaldi data dirs you have (wav.scp of files or of commands ending in '|', text, utt2spk, segments),
copied in as data/train, data/dev and data/test, utt2dur measured where missing.
--ngpu N: training on N GPUs, a process each (torchrun's DDP; --seeds N then trains one model after another);
--ngpu 0 --cpu-ranks N: N processes on the CPU. A stopped training resumes on another number (from an epoch's end).
Stages: 1 data dirs (local/data_prep.py; steps/import_data_dir.py with --data-dirs), 2 shards, 3 units, 4 train
(--seeds N: N models at once, each averaged and decoded on dev, the best kept), 5 average, 6 decode and score dev
and test (prints the %WER lines; words' confidences calibrated on dev first; an LM-fused method first gets an
n-gram LM from data/train's text, its weights chosen on dev),
7 export to ONNX (--deploy), 8 decode and score dev and test in sherpa-onnx (--deploy; conf/deploy.yaml is a
model it runs as it is).
Example: ./run.sh --corpus-dir /data/mycorpus --speaker-regex '^([^/]+)/'
  ./run.sh --corpus-dir /data/mycorpus --train-config conf/deploy.yaml --exp exp/deploy --deploy offline
  ./run.sh --data-dirs \"/kaldi/egs/mine/s5/data/train /kaldi/egs/mine/s5/data/dev\" --ngpu 4"

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
. utils/units.sh

are_data_dirs() {  # are_data_dirs "TRAIN DEV [TEST]": two or three folders (paths without spaces), each with wav.scp,
  # text and utt2spk
  local dir dirs
  read -r -a dirs <<< "$1"
  for dir in "${dirs[@]}"; do
    [ -f "$dir/wav.scp" ] && [ -f "$dir/text" ] && [ -f "$dir/utt2spk" ] || return 1
  done
  [ ${#dirs[@]} -ge 2 ] && [ ${#dirs[@]} -le 3 ]
}
if [ -n "$corpus_dir" ] && [ -n "$data_dirs" ]; then
  echo "run.sh: give --corpus-dir (a folder of recordings) or --data-dirs (Kaldi data dirs), not both" >&2
  exit 1
elif [ -n "$data_dirs" ] && ! are_data_dirs "$data_dirs"; then  # (the data given before is kept)
  echo "run.sh: --data-dirs must name two or three Kaldi data dirs, train dev [test], each with wav.scp, text and" \
    "utt2spk (got '$data_dirs'; without speakers, each utterance its own: awk '{print \$1, \$1}' text > utt2spk)" >&2
  exit 1
elif [ -n "$corpus_dir" ] && ! is_folder "$corpus_dir"; then
  echo "run.sh: --corpus-dir must name the folder of recordings (got '$corpus_dir')" >&2
  exit 1
fi
[ -z "$data_dirs" ] || rm -f data/.corpus_dir  # the data given last is the data: the other is forgotten
[ -z "$corpus_dir" ] || rm -f data/.data_dirs
data_dirs=$(given_before data-dirs data/.data_dirs "$data_dirs" are_data_dirs)
if [ -z "$data_dirs" ]; then
  corpus_options=(data/.transcripts data/.test_transcripts data/.speaker_regex data/.dev_fraction data/.test_fraction)
  # another corpus: the options given with the one before are not its (the same one spelt DIR/, by a link or
  # relative to here is the same: its options were lost, the data split again)
  if [ -n "$corpus_dir" ] && [ "$(corpus_place "$corpus_dir")" != \
      "$(corpus_place "$(cat data/.corpus_dir 2> /dev/null || true)")" ]; then
    rm -f "${corpus_options[@]}"
  fi
  corpus_dir=$(corpus_dir_of "$corpus_dir")  # the one given before, if not given
  if [ -z "$corpus_dir" ] || [ ! -d "$corpus_dir" ]; then
    echo "run.sh: --corpus-dir must name the folder of recordings, or --data-dirs your Kaldi data dirs (got" \
      "'$corpus_dir')" >&2
    printf '%s\n' "$help_message" >&2
    exit 1
  fi
  # the options of the corpus, left out, as given before: a rerun without them re-split the data and retrained
  is_file() { [ -f "$1" ]; }
  # the shares data_prep.py takes (a typo is not kept: a plain rerun failed on it for good): a decimal below a half
  # (0.1, .1 or 1e-1, as Python reads it), the dev share above 0
  is_share() {
    [[ $1 =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]] && awk -v share="$1" 'BEGIN { exit !(share < 0.5) }'
  }
  is_dev_share() { is_share "$1" && awk -v share="$1" 'BEGIN { exit !(share > 0) }'; }
  has_group() { [[ $1 == *"("* ]]; }  # a --speaker-regex worth keeping: data_prep.py takes its first group
  transcripts=$(given_before transcripts data/.transcripts "$transcripts" is_file)
  transcripts=${transcripts:-$corpus_dir/transcripts.txt}
  test_transcripts=$(given_before test-transcripts data/.test_transcripts "$test_transcripts" is_file)
  speaker_regex=$(given_before speaker-regex data/.speaker_regex "$speaker_regex" has_group)
  dev_fraction=$(given_before dev-fraction data/.dev_fraction "$dev_fraction" is_dev_share)
  test_fraction=$(given_before test-fraction data/.test_fraction "$test_fraction" is_share)
  dev_fraction=${dev_fraction:-0.1} test_fraction=${test_fraction:-0.1}
  if ! is_dev_share "$dev_fraction" || ! is_share "$test_fraction"; then
    echo "run.sh: --dev-fraction must be above 0 and --test-fraction at least 0, both below 0.5 (got" \
      "$dev_fraction and $test_fraction)" >&2
    exit 1
  fi
fi
lang=$(lang_of "$unit_type" "$vocab_size")
default_lm_search "$unit_type"  # the LM options not given
check_methods "$train_config" "$methods"
attention=$(attention_of "$train_config")  # --attention-chunk, --left-chunks: chunk16, whole, ... (empty: the config's)
check_deployable "$unit_type" "$deploy" "$train_config" "$attention"
recipe=$(basename "$PWD")  # names the result lines

data_done() {  # stage 1 done: its data dirs' texts, test's where written (one deleted since is made again)
  local written=(data/train/text data/dev/text)
  [ ! -f data/test/text ] || written+=(data/test/text)
  stage_done 1 data -- "${written[@]}"
}
if [ -n "$data_dirs" ]; then  # your Kaldi data dirs: their tables, and the recordings they name (a file that could
  read -r -a dirs <<< "$data_dirs"  # not be read put back or replaced imports the dir again)
  if stage_wanted 1 data -- steps/import_data_dir.py $(for dir in "${dirs[@]}"; do
      ls -d "$dir"/{wav.scp,text,utt2spk,segments,utt2dur,spk2gender} 2> /dev/null; done) \
      ++ "$(for dir in "${dirs[@]}"; do corpus_place "$dir"; done)" \
      "$(python3 -m rnnt.datadir.recordings_fingerprint "${dirs[@]/%//wav.scp}")"; then
    names=(train dev test)
    if [ ${#dirs[@]} -eq 2 ] && [ -d data/test ]; then  # of a run before: stage 6 would decode it as this run's
      rm -rf data/test
      echo "run.sh: removed data/test: --data-dirs names no test dir"
    fi
    for i in "${!dirs[@]}"; do
      logged "$(stage_log 1 data)" steps/import_data_dir.py --nj "$nj" "${dirs[$i]}" "data/${names[$i]}"
    done
    held_out=("${names[@]:1:${#dirs[@]}-1}")  # dev [test]: a warning where they hold training utterances
    logged "$(stage_log 1 data)" python3 -m rnnt.datadir.overlap data/train "${held_out[@]/#/data/}"
    data_done
  fi
elif stage_wanted 1 data -- local/data_prep.py "$corpus_dir" "$transcripts" "$test_transcripts" "$speaker_regex" \
    "$dev_fraction" "$test_fraction" ++ "$(corpus_place "$corpus_dir")"; then
  logged "$(stage_log 1 data)" local/data_prep.py --transcripts "$transcripts" --test-transcripts "$test_transcripts" \
    --speaker-regex "$speaker_regex" --dev-fraction "$dev_fraction" --test-fraction "$test_fraction" "$corpus_dir" data
  data_done
fi
sets="train dev"
[ ! -f data/test/text ] || sets="$sets test"

# stage 1's marker among the inputs: audio replaced in the corpus (wav.scp and text the same) is sharded again; with
# --data-dirs, the recordings their wav.scp name, by size and time (a corpus folder is an input of stage 1)
recordings=()
[ -z "$data_dirs" ] || recordings=(++ "$(python3 -m rnnt.datadir.recordings_fingerprint \
  $(for set in $sets; do echo data/$set/wav.scp; done))")
tables=()  # each set's wav.scp and text, and segments where it has one (make_shards.py cuts the recordings by it)
for set in $sets; do
  tables+=("data/$set/wav.scp" "data/$set/text")
  [ ! -f "data/$set/segments" ] || tables+=("data/$set/segments")
done
if stage_wanted 2 shards -- "$(stage_mark 1 data)" "${tables[@]}" "${recordings[@]}"; then
  log=$(stage_log 2 shards)
  for set in $sets; do  # --replace: shards of the data before a change go; an interrupted run's are kept
    logged "$log" steps/make_shards.py --replace --nj "$nj" --utts-per-shard 500 data/$set data/$set/shards \
      data/$set/data.list
  done
  stage_done 2 shards -- $(for set in $sets; do echo data/$set/data.list; done)
fi

units_stage 3 "$unit_type" "$vocab_size" "$lang"  # data/lang_char or data/lang_bpe<N>, from data/train/text

# with --seeds N > 1, N models (exp, exp_seed1, ...) trained at once, each averaged and decoded on dev, and exp
# set to the best
seed_stages 4 5 6 "$train_config" "$exp" "$lang" "" "$seeds" "$average" "$(leading_method "$methods")"

average_stage 5 "$exp" "$average"
model_tag=$(model_tag_of "$exp" "$average")  # names the model decoded: avg5-epoch-40
# into $exp/decode-SET-METHOD-$model_tag; with --deploy: export (7), decode in sherpa-onnx (8)
decode_stages 6 "$exp" "$model_tag" "$lang" "$methods" "${sets#train }" "$attention"
deploy_stages 7 "$exp" "$model_tag" "$deploy" "${sets#train }" "$attention"
for method in $methods $(for kind in $deploy; do echo "sherpa_onnx_$kind"; done); do
  method=$method${attention:+"+$attention"}
  for set in ${sets#train }; do
    decode_result "$recipe $set $method ($(basename "$exp")${model_tag:+ $model_tag}):" \
      "$exp" "$model_tag" "$set" "$method"
  done
done
exit
}
