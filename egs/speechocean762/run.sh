#!/usr/bin/env bash
# speechocean762: 5000 read English sentences by 250 non-native speakers (Mandarin L1, half of them
# children), 16 kHz. Download (OpenSLR 101) or --corpus-dir -> data dirs train, dev (10 whole
# training speakers) and test (the corpus's test/ half, when it has one) -> shards -> phone units and
# their lexicon from the CMU Pronouncing Dictionary -> DeepSpeech 2 over phones (CTC) and, at once, a
# transducer from nothing, then a transducer started from DeepSpeech 2 (or --train-config
# conf/deepspeech.yaml: DeepSpeech 2 alone; --unit-type char: over characters; --train-config
# conf/transducer.yaml --unit-type bpe: an LSTM transducer on the LibriSpeech front end), trained on the CPU
# -> average -> a word n-gram LM from the training text, searched through the lexicon and weighted on dev
# -> decode dev and test -> the three models' n-bests combined, the weights chosen on dev -> scores.
# Hyper-parameters are chosen on dev; test is decoded, never tuned on.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"  # `sh run.sh`: a bash script, run by bash
set -euo pipefail
{  # bash reads a script as it runs it; in braces all of it is read first: safe to edit while it runs

stage=0
stop_stage=100
corpus_dir=          # the speechocean762/ folder (train/, WAVE/, and test/ if present); empty: the
                     # one given to a run before (data/.corpus_dir), else download
mirror=https://www.openslr.org/resources/101
train_config=conf/transducer_conv_pruned_from_ctc.yaml  # with DeepSpeech 2 (--init-config), combined: the best
exp=exp/transducer_from_ctc_phone                       # on dev (RESULTS.md); conf/deepspeech.yaml: DeepSpeech 2
init_config=conf/deepspeech.yaml  # for a --train-config that starts from another model (train.init_from:
init_exp=exp/deepspeech_phone     # conf/transducer_conv_pruned_from_ctc.yaml), stage 4 trains this one first and
init_average=5                    # starts it from its average
companion_config=conf/transducer_conv_pruned.yaml  # with --init-config's model: a model from nothing, trained at
companion_exp=exp/transducer_phone                  # once with it and in --combine default ("": none; RESULTS.md)
unit_type=phone      # phone (CMU dictionary; words from the lexicon search), char, or bpe or unigram (of --vocab-size
                     # units)
vocab_size=256
dev_speakers=10
nj=2
ngpu=                # GPUs to train on, a process each (2 or more: torchrun's DDP); 0: the CPU; empty: one
                     # process, on a GPU where there is one
cpu_ranks=1          # with --ngpu 0: training processes on the CPU (2 or more: torchrun's DDP, gloo), each on
                     # its share of the cores
average=5            # the last N epoch checkpoints averaged for decoding (0: the last epoch alone)
seeds=1              # N > 1: the model trained N times at once, each on its share of the cores (exp with its config's
                     # seed, exp_seedK with --seed K, K < N), the best on dev with the leading method of --methods
                     # kept, and all of them in --combine default (RESULTS.md: a second seed in place of the
                     # companion 45.22, against 44.04)
methods="greedy pooled_beam_lm"  # DeepSpeech 2: "ctc_greedy ctc_prefix_beam ctc_prefix_beam_lm" (rnnt.search_methods)
lm_order=            # LM-fused methods (*_lm, *_lodr): the n-gram LM's order (built from data/train, weighted on dev)
lm_over=             # the LM's words: words (through the lexicon: char or phone units), or units (char, bpe)
lm_beam=             # the beam of the LM's search, its weights chosen with it; empty: what dev chose for
                     # the method and units (utils/units.sh lm_beam_of)
lm_weights=          # the LM weights and length bonuses dev chooses among, comma-separated; empty: those of
lm_bonuses=          # steps/tune_lm_fusion.py (6 weights, 0.2-1.5; 5 bonuses, -2 to 2 a word or 0 to 3 a unit)
combine=default      # stage 9 combines systems' n-bests (utils/combination.sh): "EXP:METHOD:AVERAGE ...", or
                     # default: for a --train-config that starts from another model, it (every seed), the
                     # companion and that model; "": none
deploy=              # "offline streaming": stages 7-8 export for sherpa-onnx and decode in it (conf/deploy.yaml)
attention_chunk=     # a streaming Conformer (egs/an4/conf/deploy_conformer.yaml) decoded and exported with attention
                     # in chunks of this many encoder frames, or whole (offline only), not its config's; its results
                     # named apart (decode-SET-METHOD+chunk16-TAG; rnnt.attention_chunks). Empty: the config's
left_chunks=         # the same, with this many chunks before each (at least 1; empty: the config's)
help_message="Usage: ./run.sh [--stage N] [--stop-stage M] [--corpus-dir DIR/speechocean762] [--mirror URL]
  [--train-config FILE] [--exp DIR] [--init-config FILE] [--init-exp DIR] [--init-average N]
  [--companion-config FILE] [--companion-exp DIR]
  [--unit-type bpe|unigram|char|phone] [--vocab-size N] [--dev-speakers N] [--nj N] [--ngpu N] [--cpu-ranks N]
  [--average N] [--seeds N] [--methods \"greedy beam modified_beam modified_beam_lm modified_beam_lodr pooled_beam_lm
  beam_lm beam_lodr ctc_greedy ctc_prefix_beam ctc_prefix_beam_lm\"]
  [--lm-order N] [--lm-over words|units] [--lm-beam N] [--deploy \"offline streaming\"]
  [--attention-chunk FRAMES|whole] [--left-chunks L]
  [--lm-weights W,W,...] [--lm-bonuses B,B,...]
  [--combine default|\"EXP:METHOD:AVERAGE EXP:METHOD:AVERAGE ...\"]
Stages: 0 download, 1 data dirs, 2 shards, 3 units (phones and their lexicon, characters or BPE), 4 train
(for a --train-config with train.init_from: --init-config's model first, with --companion-config's at once,
averaged, then it from that),
5 average, 6 decode and score (dev, and test when the corpus has its test/ half; an LM-fused method first
gets an n-gram LM from data/train's text, its weights chosen on dev), 7 export to ONNX (--deploy), 8 decode and
score the export in sherpa-onnx.
9 combine (--combine: each system decodes dev and test keeping its n-best; the weights chosen on dev).
Examples: ./run.sh --corpus-dir ../../../shared/data/speechocean762
  ./run.sh --corpus-dir ../../../shared/data/speechocean762 --train-config conf/deepspeech.yaml \\
    --exp exp/deepspeech_phone --methods \"ctc_greedy ctc_prefix_beam ctc_prefix_beam_lm\"
  ./run.sh --corpus-dir ../../../shared/data/speechocean762 --train-config conf/deepspeech.yaml --unit-type char \\
    --exp exp/deepspeech_char --methods \"ctc_greedy ctc_prefix_beam_lm\" --lm-over units --lm-order 6 --lm-beam 8
  ./run.sh --corpus-dir ../../../shared/data/speechocean762 --train-config conf/transducer.yaml \\
    --unit-type bpe --exp exp/transducer --methods \"greedy modified_beam\"
  ./run.sh --corpus-dir ../../../shared/data/speechocean762 --train-config conf/deploy.yaml --unit-type char \\
    --exp exp/deploy --methods greedy --deploy \"offline streaming\""

[ "$(cd "$(dirname "$0")" && pwd -P)" = "$(pwd -P)" ] || {  # its paths (conf/, local/, data/) are the recipe's
  case " $* " in *" --help "*|*" -h "*) printf '%s\n' "$help_message"; exit 0 ;; esac  # its usage from anywhere
  echo "$(basename "$0"): run it from its recipe folder: cd $(dirname "$0") && ./run.sh" >&2; exit 1; }
. utils/parse_options.sh  # before path.sh: --help needs no environment (a fresh clone's would install it first)
. ./path.sh
. utils/stages.sh
check_run_arguments "$@"
. utils/decoding.sh
. utils/combination.sh
. utils/training.sh
check_training_processes  # --ngpu, --cpu-ranks
. utils/units.sh

lang=$(lang_of "$unit_type" "$vocab_size")
default_lm_search "$unit_type"  # the LM options not given
check_methods "$train_config" "$methods"
# the companion is decoded in --combine default's combination by the model's leading method: one it cannot run (a
# CTC search of a companion without a CTC head) failed at the decoding, after the trainings
if [ "$combine" = default ] && [ -n "$companion_config" ] && [ -n "$init_config" ]; then
  check_methods "$companion_config" "$(leading_method "$methods")"
fi
check_combine "$combine"
attention=$(attention_of "$train_config")  # --attention-chunk, --left-chunks: chunk16, whole, ... (empty: the config's)
check_deployable "$unit_type" "$deploy" "$train_config" "$attention"

corpus_dir=$(corpus_dir_of "$corpus_dir")  # the one given before, if not given
if [ -z "$corpus_dir" ]; then
  corpus_dir=downloads/speechocean762
  if stage_wanted 0 download; then
    log=$(stage_log 0 download)
    logged "$log" local/download.py --mirror "$mirror" downloads
    stage_done 0 download -- "$corpus_dir"  # a corpus deleted since is downloaded again
  fi
fi

# another --dev-speakers N redoes data/
if stage_wanted 1 data -- "$corpus_dir" "$dev_speakers" ++ local/data_prep.py "$(corpus_place "$corpus_dir")"; then
  log=$(stage_log 1 data)
  logged "$log" local/data_prep.py --dev-speakers "$dev_speakers" "$corpus_dir" data
  written=(data/train/text data/dev/text)  # and test's, where the corpus has it: one deleted since is made again
  [ ! -f data/test/text ] || written+=(data/test/text)
  stage_done 1 data -- "${written[@]}"
fi
sets="train dev"
[ -f data/test/text ] && sets="$sets test"

# stage 1's marker among the inputs: audio replaced in the corpus (wav.scp and text the same) is sharded again
if stage_wanted 2 shards -- "$(stage_mark 1 data)" $(for set in $sets; do echo data/$set/wav.scp data/$set/text; done)
then
  log=$(stage_log 2 shards)
  for set in $sets; do
    logged "$log" steps/make_shards.py --replace --nj "$nj" --utts-per-shard 500 \
      data/$set data/$set/shards data/$set/data.list
  done
  stage_done 2 shards -- $(for set in $sets; do echo data/$set/data.list; done)
fi

units_stage 3 "$unit_type" "$vocab_size" "$lang"  # phones: their lexicon first

init_checkpoint=
if [ -n "$init_config" ] && starts_from_a_model "$train_config"; then
  init_model_stage 4 "$init_config" "$init_exp" "$lang" "$init_average" \
    "$companion_config" "$companion_exp" "$average"  # sets init_checkpoint
fi
# with --seeds N > 1, N models (exp, exp_seed1, ...), each averaged and decoded on dev, and exp set to the best
seed_stages 4 5 6 "$train_config" "$exp" "$lang" "$init_checkpoint" "$seeds" "$average" "$(leading_method "$methods")"

average_stage 5 "$exp" "$average"
model_tag=$(model_tag_of "$exp" "$average")  # names the model decoded: avg5-epoch-40
test_sets=${sets#train }
# LM-fused methods: their LM weighted on dev first; with --deploy: export (7), decode in sherpa-onnx (8)
decode_stages 6 "$exp" "$model_tag" "$lang" "$methods" "$test_sets" "$attention"
deploy_stages 7 "$exp" "$model_tag" "$deploy" "$test_sets" "$attention"
default_combination  # --combine default: this model (its seeds), the companion, the model this one starts from
[ -z "$combine" ] || combine_stages 5 6 9 "$combine" "$lang" "$test_sets"  # dev first: the weights chosen there
for method in $methods $(for kind in $deploy; do echo "sherpa_onnx_$kind"; done); do
  method=$method${attention:+"+$attention"}
  for set in $test_sets; do
    decode_result "speechocean762 $set $method ($(basename "$exp")${model_tag:+ $model_tag}):" \
      "$exp" "$model_tag" "$set" "$method"
  done
done
combination_results speechocean762 "$combine" "$test_sets"
exit
}
