#!/usr/bin/env bash
# Hyper-parameter search on AN4 with Optuna (steps/tune.py), after run.sh's data stages (0-3):
# every trial trains conf/ci.yaml with values from conf/tune.yaml on data/train, for at most the
# search's minutes_per_trial, scored by its best dev WER (--search conf/tune_time_to_accuracy.yaml: by
# its minutes to a target dev WER, for benchmarks/time_to_accuracy.py). Killed, it resumes from
# $exp/study.db when run again. Then train the winner in full:
#   ./run.sh --stage 4 --unit-type bpe --train-config exp/tune/best.yaml --exp exp/tuned --seeds 1 \
#     --methods "greedy modified_beam"
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"  # `sh run.sh`: a bash script, run by bash
set -euo pipefail
{  # bash reads a script as it runs it; in braces all of it is read first: safe to edit while it runs

train_config=conf/ci.yaml  # what every trial trains, with the search's values put in
search=conf/tune.yaml
exp=exp/tune
vocab_size=64
trials=0             # 0: the search's own count
storage=             # a database URL shared by workers on several machines; empty: sqlite in $exp
help_message="Usage: ./tune.sh [--train-config FILE] [--search FILE] [--exp DIR] [--vocab-size N] [--trials N]
  [--storage URL]
Needs data/{train,dev}/data.list and data/lang_bpe\$vocab_size (./run.sh --unit-type bpe --stop-stage 3).
Writes \$exp/best.yaml, \$exp/trials.png, \$exp/trials.tsv; the log is \$exp/tune.log."

[ "$(cd "$(dirname "$0")" && pwd -P)" = "$(pwd -P)" ] || {  # its paths (conf/, data/) are the recipe's
  case " $* " in *" --help "*|*" -h "*) printf '%s\n' "$help_message"; exit 0 ;; esac  # its usage from anywhere
  echo "$(basename "$0"): run it from its recipe folder: cd $(dirname "$0") && ./tune.sh" >&2; exit 1; }
. utils/parse_options.sh  # before path.sh: --help needs no environment (a fresh clone's would install it first)
if [ $# -gt 0 ]; then  # parse_options.sh stops at the first word that is not an option: the rest would be lost
  echo "tune.sh: unexpected argument '$1': options are --name value" >&2
  exit 1
fi
. ./path.sh
. utils/stages.sh  # logged: the command line in the log, and SIGTERM, SIGHUP or Ctrl-C passed on to the search
hold_run_lock  # no run.sh beside it (preparing the data again, it rewrote the lists the trials read)

lang=data/lang_bpe$vocab_size
for needed in data/train/data.list data/dev/data.list "$lang/units.txt"; do
  if [ ! -e "$needed" ]; then
    echo "tune.sh: $needed is missing: run ./run.sh --unit-type bpe --stop-stage 3 first" >&2
    exit 1
  fi
done
logged "$exp/tune.log" steps/tune.py --config "$train_config" --search "$search" --train-list data/train/data.list \
  --valid-list data/dev/data.list --lang-dir "$lang" --exp-dir "$exp" --trials "$trials" \
  ${storage:+--storage "$storage"}
exit
}
