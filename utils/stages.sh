# Stage control for recipes, sourced by run.sh after parse_options.sh (needs $stage, $stop_stage):
#   if stage_wanted 3 units -- data/train/text "$vocab_size"; then ...; stage_done 3 units; fi
#   if stage_wanted 4 train "$exp" -- "$train_config" data/train/data.list; then ...; stage_done 4 train "$exp"; fi
# A finished stage leaves <marks>/<N>.<name>.done holding a fingerprint of its inputs (the words after
# --: options as they are; files by their content, a data list (*.list) with the shards (by content)
# or recordings (sizes and times) it names (rnnt.data.list_fingerprint); folders by the names, sizes and times of the
# files in them, links followed; files over 64 MB by size and time; not by their paths: a corpus dir given as DIR,
# DIR/ or a link to it is one input). Run again, a stage is skipped when its
# marker's fingerprint is that of its inputs now and the outputs its stage_done names are all there (a data
# list with the files it names), and runs again when they changed (saying which: the marker keeps each input's
# digest and spelling, input_lines) or one is gone; since a stage's inputs are
# the outputs of the stages before it, the stages after a changed one run again too. Inputs a newer recipe gives a
# stage go after ++ (-- INPUT... ++ LATER...): a marker written before, of exactly the others as they are now, is
# taken as done once and rewritten with them (an upgrade prepared the data again and retrained); an option
# added goes before ++, so that its value, new, runs the stage. An explicit --stage N (N > 0) runs
# stages N and on again whatever their markers say, as in Kaldi; the default --stage 0 skips finished
# work. An interrupted stage left no marker and runs again (every step is safe to rerun or resumes). Marks live in
# $stage_marks (default exp/.stages), or in DIR/.stages for a stage given a DIR: stages that make a
# model's outputs pass its --exp dir, so a new --exp trains and decodes again.
# Each stage's commands run through `logged "$log" COMMAND...` with log=$(stage_log N NAME [DIR]): their output
# goes to the terminal and to <DIR or exp>/log/<N>.<NAME>.log, which starts anew when the stage starts and
# holds each command line before its output and its exit status after it, as Kaldi's steps write logs.
# Stopping a recipe stops its stage: SIGTERM, SIGHUP or SIGINT (Ctrl-C) to the shell that sourced this file
# pass SIGTERM on to the command `logged` is running (steps/train.py then saves a checkpoint at its next step),
# wait for it, and exit 128 + the signal's number, as a shell killed by it would (143 SIGTERM, 130 Ctrl-C, 129
# SIGHUP). Without this, `kill <run.sh>` would leave the stage's command running alone.
# Stages run at once in subshells (their pids in background_stages) get the SIGTERM too, and pass it on.
# check_run_arguments "$@" (run.sh, after parse_options.sh): no word left over, whole stage numbers, --stop-stage
# not before --stage, one run at a time in the folder (.run.lock: hold_run_lock, which tune.sh takes too), and at
# the end a --stage past every stage of the run ends 1. corpus_dir=$(corpus_dir_of "$corpus_dir"): --corpus-dir kept
# in data/.corpus_dir for the runs after it.
# shellcheck shell=bash
stage_marks=${stage_marks:-exp/.stages}
declare -A done_this_run=()  # the markers stage_done wrote in this run
out_of_date=()  # stages --stage/--stop-stage left out whose inputs changed since they ran (decode_result says so)

check_run_arguments() {  # check_run_arguments "$@": run.sh after parse_options.sh: no word left over, whole stages,
  # no other run in this dir
  if [ $# -gt 0 ]; then  # parse_options.sh stops at the first word that is not an option: the rest would be lost
    echo "$(basename "$0"): unexpected argument '$1': options are --name value (quote a list: --methods \"a b\")" >&2
    exit 1
  fi
  local name
  for name in stage stop_stage; do
    [[ ${!name} =~ ^[0-9]+$ ]] || { echo "$(basename "$0"): --${name//_/-} ${!name}: not a stage number" >&2; exit 1; }
  done
  local value
  for name in exp init_exp companion_exp; do  # exp/t/ with --seeds 2 trained the second seed inside the first
    value=${!name:-}                        # (exp/t/_seed1): an experiment dir without its trailing slashes
    while [[ $value == ?*/ ]]; do value=${value%/}; done
    [ -z "${!name+set}" ] || printf -v "$name" '%s' "$value"
  done
  if [ -n "${exp+set}" ] && [ -z "$exp" ]; then  # averaging looked for checkpoints in '', training wrote into ''
    echo "$(basename "$0"): --exp is empty: give the experiment dir (e.g. exp/tiny)" >&2
    exit 1
  fi
  check_experiment_dirs
  if [ "$stop_stage" -lt "$stage" ]; then  # it ran nothing and printed the last run's result
    echo "$(basename "$0"): --stop-stage $stop_stage is before --stage $stage: no stage to run" >&2
    exit 1
  fi
  hold_run_lock
  trap no_stage_ran_check EXIT
}

check_experiment_dirs() {  # check_experiment_dirs: --exp, --init-exp and --companion-exp are each an experiment's
  # own dir: setting one aside (a config changed) moved all it held: with --exp exp, every other experiment and the
  # data stages' markers; with exp/tiny/v2 inside exp/tiny, the one inside; and one of them was the other's
  local name other value marks found
  local -A given=()
  marks=$(realpath -m -- "$(dirname "$stage_marks")")
  for name in exp init_exp companion_exp; do
    [ -n "${!name:-}" ] || continue
    value=$(realpath -m -- "${!name}")
    found=""
    if [[ ${marks%/}/ == "${value%/}"/* ]]; then
      found="it holds the run's stage markers ($stage_marks) and every experiment beside it"
    elif [ -d "$value" ]; then
      found=$(find "$value" -mindepth 2 -maxdepth 3 -name config.yaml -printf 'it holds the experiment %h\n' -quit \
        2> /dev/null)  # (not deeper: an experiment's own folders are its decodes and exports)
      found=${found/"$PWD"\//}
    fi
    other=$(dirname "$value")
    while [ -z "$found" ] && [[ $other/ == "$PWD"/?* ]]; do  # (up to the recipe's folder)
      [ ! -f "$other/config.yaml" ] || found="it lies inside the experiment ${other#"$PWD"/}"
      other=$(dirname "$other")
    done
    for other in "${!given[@]}"; do
      [[ -n $found || ! ( ${value%/}/ == "${other%/}"/* || ${other%/}/ == "${value%/}"/* ) ]] ||
        found="it is, or lies inside or around, --${given[$other]//_/-} ${other#"$PWD"/}"
    done
    if [ -n "$found" ]; then
      echo "$(basename "$0"): --${name//_/-} ${!name}: $found; give each experiment a dir of its own" \
        "(e.g. exp/tiny), which a changed config sets aside whole" >&2
      exit 1
    fi
    given[$value]=$name
  done
}

hold_run_lock() {  # hold_run_lock: run.sh's (check_run_arguments) and tune.sh's: one run at a time in a recipe dir
  # (two would train into one exp and write each other's markers; a run.sh preparing the data again rewrote the
  # lists a search's trials read). The lock is held by this shell and every command it starts, until the last of
  # them ends (a training left running too).
  local lock=.run.lock pid
  # a training's other nodes in the same folder (shared storage: egs/librispeech --nnodes) hold a lock of their own
  [ "${node_rank:-0}" = 0 ] || lock=.run.lock.node$node_rank
  exec {run_lock}<> "$lock"
  if ! flock -n "$run_lock"; then
    pid=$(head -n 1 "$lock")
    if kill -0 "$pid" 2> /dev/null; then
      echo "$(basename "$0"): another run is under way in $(pwd) (pid $pid, holding $lock);" \
        "wait for it, or stop it (kill it: its stage stops too)" >&2
    else  # the run was killed (kill -9) and left its running command holding the lock
      echo "$(basename "$0"): a run in $(pwd) was killed (pid $pid is gone), and commands it started still run," \
        "holding $lock: $(lock_holders "$lock"); wait for them, or kill them" >&2
    fi
    exit 1
  fi
  echo $$ > "$lock"
}

lock_holders() {  # lock_holders [LOCK]: 'PID (COMMAND)' of each process holding this folder's LOCK (.run.lock) open
  local fd lock holders=()
  lock=$(readlink -f "${1:-.run.lock}")
  for fd in /proc/[0-9]*/fd/*; do
    [ "$(readlink "$fd" 2> /dev/null)" = "$lock" ] || continue
    fd=${fd#/proc/}
    holders+=("${fd%%/*} ($(tr '\0' ' ' < "/proc/${fd%%/*}/cmdline" 2> /dev/null | cut -c1-80))")
  done
  local IFS=,
  echo "${holders[*]:-none found}"
}

corpus_place() {  # corpus_place DIR: a data stage's input (after ++) naming where the corpus is, resolved: its wav.scp
  # files name the recordings by path, so a corpus moved prepares the data again (the same shards after it, no
  # training: a folder input counts by content alone, and a moved corpus was 'done before' with paths that are gone)
  printf 'corpus at %s\n' "$( (CDPATH='' cd -P -- "$1" 2> /dev/null && pwd -P) || printf '%s' "$1")"
}

given_before() {  # value=$(given_before OPTION KEPT VALUE [VALID]): --OPTION's VALUE as given, kept in the file KEPT
  # where the command VALID takes it (a typo is not kept over the one given before); not given (empty), the one
  # given before that VALID still takes, said so: an option of the corpus itself, which a later run neither needs
  # again nor, left out, takes for an edit of the data (another split, a retraining); 'none' forgets it (back to
  # the recipe's default: each recording its own speaker, a test set held out of the list)
  local option=$1 kept=$2 value=$3 valid=${4:-true}
  if [ "$value" = none ]; then
    [ ! -f "$kept" ] || echo "$(basename "$0"): --$option none: $(cat "$kept"), given before, forgotten" >&2
    rm -f "$kept"
  elif [ -n "$value" ]; then
    if $valid "$value"; then
      mkdir -p "$(dirname "$kept")"
      printf '%s\n' "$value" > "$kept"
    fi
    printf '%s\n' "$value"
  elif [ -f "$kept" ] && $valid "$(cat "$kept")"; then
    echo "$(basename "$0"): --$option $(cat "$kept"), as given before ($kept)" >&2
    cat "$kept"
  fi
}

corpus_dir_of() {  # corpus_dir=$(corpus_dir_of "$corpus_dir"): --corpus-dir as given (kept where it is a folder); not
  # given, the one given before (if it is still there); empty where none was given (the recipe downloads its corpus)
  given_before corpus-dir data/.corpus_dir "$1" is_folder
}

is_folder() { [ -d "$1" ]; }

last_stage_seen=-1  # the highest stage number stage_wanted was asked about in this run
first_stage_seen=-1  # and the lowest
no_stage_ran_check() {  # check_run_arguments' EXIT trap: a --stage past every stage of this run, or a --stop-stage
  # before every one, ran nothing (a typo, or a stage an option turns on): a failure, not a silent success
  local status=$?
  if [ "$status" -eq 0 ] && [ "$stage" -gt 0 ] && [ "$stage" -gt "$last_stage_seen" ]; then
    echo "$(basename "$0"): --stage $stage: this run has no stage $stage or later (its last is $last_stage_seen; the" \
      "stages, and the options that turn some on: --help); nothing ran" >&2
    exit 1
  elif [ "$status" -eq 0 ] && [ "$stop_stage" -lt "$first_stage_seen" ]; then  # (it printed the last run's result)
    echo "$(basename "$0"): --stop-stage $stop_stage: this run has no stage $stop_stage or before (its first is" \
      "$first_stage_seen); nothing ran" >&2
    exit 1
  fi
}

stage_mark() {  # stage_mark N NAME [DIR]: the marker file of a finished stage
  if [ -n "${3:-}" ] && [ "$3" != "--" ]; then echo "$3/.stages/$1.$2.done"; else echo "$stage_marks/$1.$2.done"; fi
}

stage_log() {  # stage_log N NAME [DIR]: the log file of a stage (beside exp/.stages-X's markers: exp/log-X)
  if [ -n "${3:-}" ] && [ "$3" != "--" ]; then
    echo "$3/log/$1.$2.log"
  else
    local marks_name
    marks_name=$(basename "$stage_marks")
    echo "$(dirname "$stage_marks")/log${marks_name#.stages}/$1.$2.log"
  fi
}

progress_bars=true  # false: logged draws no bars on the terminal (commands running at once would share its line)
logged() {  # logged LOG COMMAND [ARG...]: runs COMMAND, its output to the terminal and appended to LOG
  local log=$1 status=0 terminal= output
  shift
  mkdir -p "$(dirname "$log")"
  { printf '#'; printf ' %q' "$@"; printf '\n# started %s\n' "$(date '+%F %T')"; } >> "$log"
  # progress bars go straight to the terminal (rnnt/progress_bar.py), never into the log
  if [ -t 2 ] && $progress_bars; then terminal=/dev/tty; fi
  # the command runs in the background, so that a signal to this shell reaches stop_logged at once (a
  # shell waiting on a foreground command handles its traps after it), reading nothing (stdin /dev/null)
  # Ctrl-C stops the command, not its log, nor does a reader of run.sh's output gone (`| tee` stopped by the same
  # Ctrl-C): the log is still written to the end (tee -p goes on past a closed pipe)
  exec {output}> >(trap '' INT TERM HUP PIPE; exec tee -p -a "$log")
  logged_tee=$!
  # Ctrl-C and a hangup (a closed terminal, an ssh connection lost) reach every process of the terminal: the
  # command ignores them, this shell passes SIGTERM on (stop_logged), and training saves its position
  (trap '' INT HUP; RNNT_TERMINAL=$terminal PYTHONUNBUFFERED=1 exec "$@") >&"$output" 2>&1 < /dev/null &
  logged_command=$!
  logged_log=$log
  exec {output}>&-
  wait "$logged_command" || status=$?
  wait "$logged_tee" || true  # the output is all in the log before its last line
  logged_command=
  printf '# ended %s with status %d\n' "$(date '+%F %T')" "$status" >> "$log"
  if [ "$status" -ne 0 ]; then
    echo "$1 failed with status $status; its log: $log" >&2
  fi
  return "$status"
}

logged_command=
background_stages=()  # subshells running commands at once (at_once), each with this trap
at_once() {  # at_once COMMAND [ARG...]: COMMAND (a function too) in a subshell in the background, with this trap:
  # stop_logged passes SIGTERM on to it; each_ended waits for those started so far
  (
    background_stages=() progress_bars=false  # commands at once would share the terminal's line
    trap_stop_logged
    "$@"
  ) &
  background_stages+=("$!")
}
ended_well=()  # each_ended: true or false for each command at_once started, in their order
each_ended() {  # each_ended: waits for the commands at_once started; ended_well says how each ended
  local pid
  ended_well=()
  for pid in "${background_stages[@]}"; do
    if wait "$pid"; then ended_well+=(true); else ended_well+=(false); fi
  done
  background_stages=()
}
stop_logged() {  # stop_logged SIGNAL: the trap of SIGTERM, SIGHUP and SIGINT: the running commands are stopped
  # (with SIGTERM, whichever came: a training saves its position) and waited for
  local status=0 came exit_status
  case ${1:-TERM} in
    INT) came="Ctrl-C (SIGINT)" exit_status=130 ;;
    HUP) came="a hangup (SIGHUP)" exit_status=129 ;;
    *) came=SIGTERM exit_status=143 ;;
  esac
  # once; and a reader of this shell's output that is gone (`./run.sh 2>&1 | tee`, whose tee the same Ctrl-C
  # stopped) must not end it before it has passed the signal on: the messages come after, and may fail
  trap '' TERM HUP INT PIPE
  if [ "${#background_stages[@]}" -gt 0 ]; then
    kill -TERM "${background_stages[@]}" 2>/dev/null || true
    echo "$(date +%T) stopped by $came: SIGTERM passed on to the stages running at once (pids" \
      "${background_stages[*]})" \
      >&2 2>/dev/null || true
    wait "${background_stages[@]}" || true
  fi
  if [ -n "$logged_command" ]; then
    kill -TERM "$logged_command" 2>/dev/null || true
    echo "$(date +%T) stopped by $came: SIGTERM passed on to the running command (pid $logged_command);" \
      "waiting for it" \
      >&2 2>/dev/null || true
    wait "$logged_command" || status=$?
    wait "$logged_tee" || true
    printf '# stopped %s: the command got SIGTERM and ended with status %d\n' "$(date '+%F %T')" "$status" \
      >> "$logged_log"
  fi
  exit "$exit_status"
}
trap_stop_logged() {  # stop_logged the trap of each, told which came
  local signal
  for signal in TERM HUP INT; do
    # shellcheck disable=SC2064  # (the signal's name now)
    trap "stop_logged $signal" "$signal"
  done
}
trap_stop_logged

fingerprint_line() {  # fingerprint_line INPUT [FORM]: what stage_fingerprint hashes of one input: a file or folder by
  # its content alone, however its path is spelled (a trailing slash, ./, a link: the stages after it ran again);
  # FORM named: as markers before that held it, the path first; legacy: as those before data lists and links counted
  local input=$1 form=${2:-} list follow=-L name=
  [ "$form" != legacy ] || follow=-P
  [ -z "$form" ] || name="$input "
  if [ -f "$input" ] && [[ "$input" == *.list ]] && [ "$form" != legacy ]; then  # a data list, with what it names
    list=$(python3 -m rnnt.data.list_fingerprint "$input") || {
      echo "stages.sh: cannot fingerprint the data list $input (python3 -m rnnt.data.list_fingerprint failed:" \
        "is the project's environment active? run.sh sources path.sh)" >&2
      return 1
    }
    printf '%slist %s\n' "$name" "$list"
  elif [ -f "$input" ] && [ "$(stat -c %s "$input")" -gt 67108864 ]; then  # a big checkpoint: size and time
    printf '%sfile %s\n' "$name" "$(stat -c '%s %Y' "$input")"
  elif [ -f "$input" ]; then
    printf '%sfile %s\n' "$name" "$(sha256sum < "$input" | cut -d' ' -f1)"
  elif [ -d "$input" ]; then
    printf '%sdir %s\n' "$name" "$(find "$follow" "$input" -type f ! -path '*/.stages/*' -printf '%P %s %T@\n' \
      2> /dev/null | LC_ALL=C sort | sha256sum | cut -d' ' -f1)"
  else
    printf '%s\n' "$input"
  fi
}

stage_fingerprint() {  # stage_fingerprint [--named|--legacy] INPUT...: one line that changes when any input does
  local input line lines= form=
  case ${1:-} in --named|--legacy) form=${1#--}; shift ;; esac
  for input in "$@"; do
    line=$(fingerprint_line "$input" "$form") || return 1
    lines+=$line$'\n'
  done
  printf '%s' "$lines" | sha256sum | cut -d' ' -f1
}

earlier_form_matches() {  # earlier_form_matches MARK INPUT...: the marker holds these inputs' fingerprint as an
  # earlier stages.sh wrote it (stage_fingerprint --named or --legacy): taken as done once, then rewritten
  local recorded form
  recorded=$(head -n 1 "$1")
  shift
  for form in named legacy; do
    [ "$recorded" != "$(stage_fingerprint "--$form" "$@" 2> /dev/null)" ] || return 0
  done
  return 1
}

inputs_added_since() {  # inputs_added_since MARK N INPUT...: the marker records the first N inputs (those before ++),
  # each as it is now, and of the rest (after ++: what a newer recipe gives the stage, its local/ scripts, the
  # experiment's decoding settings) some or none: taken as done once, its marker rewritten with them all (an input
  # added and changed before it was recorded goes unseen that once): without this, an upgrade prepared the data again
  # and set every training aside. Only those named after ++: another option added (a grid) runs the stage again
  local mark=$1 n=$2 recorded before now
  shift 2
  # a marker of before input lines: its fingerprint of them, in any form an earlier stages.sh wrote
  [ "$(head -n 1 "$mark")" != "$(stage_fingerprint "${@:1:$n}" 2> /dev/null)" ] || return 0
  earlier_form_matches "$mark" "${@:1:$n}" && return 0
  recorded=$(grep '^input ' "$mark" 2> /dev/null | LC_ALL=C sort) || return 1
  before=$(input_lines "${@:1:$n}" 2> /dev/null | LC_ALL=C sort)
  now=$(input_lines "$@" 2> /dev/null | LC_ALL=C sort)
  # in any order (a marker of today's first form listed the local/ scripts first): every input before ++ recorded
  # as it is now, and nothing recorded that is not an input now
  [ -z "$(LC_ALL=C comm -23 <(printf '%s\n' "$before") <(printf '%s\n' "$recorded"))" ] &&
    [ -z "$(LC_ALL=C comm -23 <(printf '%s\n' "$recorded") <(printf '%s\n' "$now"))" ]
}

marker_taken() {  # marker_taken MARK FINGERPRINT INPUT...: the marker holds for these inputs (FINGERPRINT: theirs
  # now): it is theirs, or an earlier stages.sh's form of it, or a marker of before the inputs stage_wanted names
  # after ++ (it reads stage_wanted's $later and $earlier)
  local mark=$1 fingerprint=$2
  shift 2
  [ "$(head -n 1 "$mark")" = "$fingerprint" ] || earlier_form_matches "$mark" "$@" ||
    { $later && inputs_added_since "$mark" "${#earlier[@]}" "$@"; }
}

rewrite_marker() {  # rewrite_marker MARK FINGERPRINT INPUT...: the marker of these inputs, its outputs kept
  local mark=$1 fingerprint=$2
  shift 2
  { echo "$fingerprint"; input_lines "$@"; grep '^output ' "$mark" || true; } > "$mark.rewritten"
  sync "$mark.rewritten" 2> /dev/null || true
  mv "$mark.rewritten" "$mark"
}

output_digest() {  # output_digest FILE: a small file's SHA-256 (under 1 MB: a yaml, units.txt, a wer), else nothing
  if [ -f "$1" ] && [ "$(stat -c %s "$1")" -lt 1048576 ]; then sha256sum < "$1" | cut -d' ' -f1; fi
}

outputs_missing() {  # outputs_missing MARK: the outputs a marker lists (stage_done's) that are gone or, for a small
  # file, changed since (another run of a stage sharing it wrote it: other LM weights, other units), one a line; a
  # data list is gone with a file it names (a deleted shard), or names shards not beside it (a copied recipe's)
  local line output digest
  tail -n +2 "$1" | while IFS=$'\t' read -r line digest; do
    [[ $line == "output "* ]] || continue  # an input's line (input_lines)
    output=${line#output }
    if [ ! -e "$output" ] || { [ -n "$digest" ] && [ "$(output_digest "$output")" != "$digest" ]; }; then
      printf '%s\n' "$output"
    elif [[ "$output" == *.list ]]; then
      python3 -m rnnt.data.list_fingerprint --stale "$output" || {
        echo "stages.sh: cannot read the data list $output (is the project's environment active?)" >&2
        return 1
      }
    fi
  done
}

input_lines() {  # input_lines INPUT...: a line each, 'input <its fingerprint's digest>\t<the input as given>', kept
  # in a marker after its fingerprint, so that a stage run again can say which input changed (changed_inputs)
  local input
  for input in "$@"; do
    printf 'input %s\t%s\n' "$(fingerprint_line "$input" | sha256sum | cut -c1-16)" "${input//$'\n'/ }"
  done
}

changed_inputs() {  # changed_inputs MARK INPUT...: ' (what changed: ...)' of the inputs whose digest differs from the
  # marker's (an option given another value, a file's content), or nothing where the marker holds no input lines
  local mark=$1 now i was name before changed=()
  shift
  mapfile -t was < <(grep '^input ' "$mark" 2>/dev/null || true)
  [ "${#was[@]}" -eq $# ] || return 0  # a marker of before input lines, or of other inputs
  mapfile -t now < <(input_lines "$@" 2> /dev/null)
  for i in "${!now[@]}"; do
    [ "${now[i]%%$'\t'*}" != "${was[i]%%$'\t'*}" ] || continue
    name=${now[i]#*$'\t'} before=${was[i]#*$'\t'}
    if [ -e "$name" ] && { [ "$before" -ef "$name" ] || [ ! -e "$before" ]; }; then  # a file or folder (however
      changed+=("$name: its content")  # spelt before, or renamed)
    else  # an option's value, or another file given (--train-config conf/b.yaml after conf/a.yaml)
      changed+=("'$before' now '$name'")
    fi
  done
  [ "${#changed[@]}" -eq 0 ] || printf ' (what changed: %s)' "$(IFS=';'; echo "${changed[*]:0:3}" | sed 's/;/; /g')"
}

unit_files() {  # unit_files LANG: the files of a lang dir that define its units, one a line (a training stage's
  # inputs): the inventory and its type, and what maps words to units where the type has one: a phone lexicon,
  # a sentencepiece model (one the type has not is fingerprinted as its name alone, which never changes)
  printf '%s\n' "$1/units.txt" "$1/units.json" "$1/lexicon.txt" "$1/bpe.model"
}

config_files() {  # config_files CONFIG [INIT]: the files a training config names, one a line (a training stage's
  # inputs beside the config's text and resolved_config's digest): train.init_from's checkpoint (not where the
  # recipe gives INIT, which overrides it), data.features.cmvn's statistics, data.noise's and data.reverb's wav.scp
  python3 -m rnnt.training.config_inputs ${2:+--no-init-from} "$1"
}

stage_done_before() {  # stage_done_before N NAME [DIR] -- INPUT... [++ LATER...]: whether the stage's marker holds
  # these inputs as they are now (as stage_wanted takes it: an earlier form too) and its outputs are all there;
  # reads alone (another process's stage: node 0's training, to the other nodes of a multi-node one)
  local n name mark dir inputs earlier later missing
  stage_arguments "$@"
  [ -f "$mark" ] && marker_taken "$mark" "$(stage_fingerprint "${inputs[@]}" 2> /dev/null)" "${inputs[@]}" &&
    missing=$(outputs_missing "$mark") && [ -z "$missing" ]
}

config_inputs() {  # config_inputs ARRAY CONFIG [INIT]: sets ARRAY to a training stage's inputs besides the config's
  # text: the files it names (config_files) and its settings as resolved, the defaults filled in (resolved_config: a
  # default an upgrade changed trains again, as steps/train.py --resume would set the experiment aside); a config
  # that cannot be read stops the run (inside mapfile's < <(...) a failure went unseen)
  local -n config_inputs_of=$1
  local lines
  lines=$({ config_files "$2" "${3:-}" && resolved_config "$2"; }) || exit 1
  mapfile -t config_inputs_of <<< "$lines"
}

resolved_config() {  # resolved_config CONFIG: 'resolved-config DIGEST', its settings with the defaults filled in
  python3 -m rnnt.training.config_digest "$1"
}

stage_arguments() {  # stage_arguments N NAME [DIR] [-- INPUT... [++ LATER_INPUT...]]: sets its caller's locals
  # n, name, mark, inputs (all of them), earlier (those before ++, where there are later ones) and later (true
  # where there are): stage_wanted's and stage_done_before's
  local input
  n=$1 name=$2 dir= inputs=() earlier=() later=false
  shift 2
  if [ $# -gt 0 ] && [ "$1" != "--" ]; then dir=$1; shift; fi
  [ "${1:-}" = "--" ] && shift
  for input in "$@"; do
    if [ "$input" = "++" ]; then later=true; continue; fi
    inputs+=("$input")
    $later || earlier+=("$input")
  done
  $later || earlier=()  # no input added later: nothing to take in place of the stage
  mark=$(stage_mark "$n" "$name" "$dir")
}

stage_wanted() {  # stage_wanted N NAME [DIR] [-- INPUT... [++ LATER_INPUT...]]
  # LATER_INPUT: inputs a newer recipe gave the stage, absent from markers of before (inputs_added_since)
  local n name mark dir fingerprint missing inputs earlier later
  stage_arguments "$@"
  set -- "${inputs[@]}"
  [ "$n" -le "$last_stage_seen" ] || last_stage_seen=$n
  [ "$first_stage_seen" -ge 0 ] && [ "$n" -ge "$first_stage_seen" ] || first_stage_seen=$n
  if [ "$n" -lt "$stage" ] || [ "$n" -gt "$stop_stage" ]; then  # not run: out of date if its inputs changed, or
    # if it was started on changed inputs and stopped (its marker gone, the pending one left)
    if [ -f "$mark" ] && ! marker_taken "$mark" "$(stage_fingerprint "$@" 2> /dev/null)" "$@"; then
      out_of_date+=("stage $n ($name${dir:+ in $dir})$(changed_inputs "$mark" "$@")")
    elif [ ! -f "$mark" ] && [ -f "$mark.pending" ]; then
      out_of_date+=("stage $n ($name${dir:+ in $dir}), stopped before it ended")
    fi
    return 1
  fi
  fingerprint=$(stage_fingerprint "$@") || exit 1  # in an if, a return would only skip the stage
  # an explicit --stage N runs its stages again, but once: one done earlier in this run with these inputs is done
  if [ -f "$mark" ] && { [ "$stage" -eq 0 ] || [ -n "${done_this_run[$mark]:-}" ]; }; then
    missing=$(outputs_missing "$mark") || exit 1
    if [ "$(head -n 1 "$mark")" != "$fingerprint" ] && marker_taken "$mark" "$fingerprint" "$@"; then
      rewrite_marker "$mark" "$fingerprint" "$@"  # an earlier form, or of before its later inputs: as they are now
    fi
    if [ "$(head -n 1 "$mark")" = "$fingerprint" ] && [ -z "$missing" ]; then
      echo "$(date +%T) stage $n ($name): done before; skipped (delete $mark to redo)"
      return 1
    fi
    if [ -n "$missing" ]; then
      echo "$(date +%T) stage $n ($name): its output $(head -n 1 <<< "$missing") is gone or changed; running it again"
    else
      echo "$(date +%T) stage $n ($name): its inputs changed since it was done$(changed_inputs "$mark" "$@");" \
        "running it again"
    fi
  else
    echo "$(date +%T) stage $n ($name)"
  fi
  mkdir -p "$(dirname "$mark")"
  rm -f "$mark" "$(stage_log "$n" "$name" "$dir")"  # a stage run starts its log anew
  # the inputs as they were when the stage started; a marker that cannot be written (a name too long, a full disk)
  # stops the run (in an if, a failure here would only have skipped the stage, in silence)
  { echo "$fingerprint"; input_lines "$@"; } > "$mark.pending" || exit 1
}

stage_done() {  # stage_done N NAME [DIR] [-- OUTPUT...]: the outputs, whose loss runs the stage again
  local mark output
  if [ $# -gt 2 ] && [ "$3" != "--" ]; then mark=$(stage_mark "$1" "$2" "$3"); shift 3; else
    mark=$(stage_mark "$1" "$2"); shift 2; fi
  [ "${1:-}" = "--" ] && shift
  for output in "$@"; do
    [ -e "$output" ] || { echo "stage_done: $output, an output of $mark, was not made" >&2; return 1; }
    printf 'output %s\t%s\n' "$output" "$(output_digest "$output")" >> "$mark.pending"
  done
  sync "$mark.pending" 2> /dev/null || true  # on the disk before it says done: a power loss leaves it pending
  mv "$mark.pending" "$mark"
  done_this_run[$mark]=1
}
