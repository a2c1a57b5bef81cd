# Kaldi-style option parsing; source it after setting defaults:
#   stage=0; use_gpu=false; help_message="Usage: $0 [options] <dir>"
#   . utils/parse_options.sh
# Rules:
#   --foo-bar X and --foo-bar=X set the existing variable foo_bar (an undefined one is an error);
#   a variable whose value is true or false only accepts true or false, one whose value is a whole number
#   (stage=0, average=5) only a whole number of at least 0 (a recipe's first stage is 0), as the script set it
#   (a --config file's value, or the option given before, does not change what it takes); a value that is
#   another option of the script (--stage --stop-stage 3) is a missing value;
#   --config FILE sources FILE (shell assignments, each of a variable the script defines: another name is
#   refused by its line) before the remaining options, so a script may not have a variable named config of its
#   own (refused at once);
#   --help / -h prints $help_message and exits 0;
#   parsing stops at the first argument not starting with --, or after a bare --;
#   positional arguments stay in "$@".
# shellcheck shell=bash

__po_name=$(basename "$0")

__po_fail() {  # the help first, the mistake last: the line a terminal shows (it scrolled away above 40 lines of help)
  [ -n "${help_message:-}" ] && printf '%s\n\n' "$help_message" >&2
  echo "$__po_name: $*" >&2
  exit 1
}

if [[ "$(declare -p config 2>/dev/null)" == "declare -- "* ]]; then  # the script's own (not the environment's):
  # it could never be set, --config sourcing a file instead
  __po_fail "the script defines a variable 'config', but --config FILE is reserved for a file of shell" \
    "assignments: rename the variable (e.g. train_config)"
fi

__po_kind() {  # __po_kind VALUE: what an option of that default takes: bool, int or anything (empty)
  case $1 in
    true|false) echo bool ;;
    *) [[ $1 =~ ^[0-9]+$ ]] && echo int || true ;;
  esac
}

__po_set() {  # __po_set <option-as-typed> <value>
  # every name __po_ (its locals too): a script's option of a local's name was the local, its value lost
  local __po_opt=$1 __po_value=$2 __po_var __po_next __po_takes
  __po_var=$(printf '%s' "${__po_opt#--}" | tr '-' '_')
  case "$__po_var" in
    ''|[0-9]*|*[!A-Za-z0-9_]*) __po_fail "invalid option '$__po_opt'" ;;
  esac
  if [ -z "${!__po_var+set}" ]; then
    __po_fail "unknown option '$__po_opt' (no variable '$__po_var' is defined in the script)"
  fi
  if [[ $(declare -p "$__po_var") =~ ^declare\ -[a-zA-Z]*x ]]; then  # --PATH x: set, and the next command not found
    __po_fail "unknown option '$__po_opt' ('$__po_var' is an environment variable, not an option of the script)"
  fi
  __po_next=$(printf '%s' "${__po_value#--}" | tr '-' '_')
  if [[ "$__po_value" == --* ]] && [[ "$__po_next" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && [ -n "${!__po_next+set}" ]; then
    __po_fail "option '$__po_opt' needs a value (the next word is the option '$__po_value')"
  fi
  __po_takes=${__po_kinds[$__po_var]-$(__po_kind "${!__po_var}")}
  if [ "$__po_takes" = bool ] && [ "$__po_value" != true ] && [ "$__po_value" != false ]; then
    __po_fail "option '$__po_opt' takes true or false, not '$__po_value'"
  fi
  if [ "$__po_takes" = int ]; then
    [[ "$__po_value" =~ ^[0-9]{1,18}$ ]] ||  # (not negative: a Kaldi recipe's --stage -1 is this one's --stage 0)
      __po_fail "option '$__po_opt' takes a whole number of at least 0, not '$__po_value'"
    __po_value=$((10#$__po_value))  # 08 as 8: bash arithmetic reads a leading 0 as octal (08 failed, 010 was 8)
  fi
  printf -v "$__po_var" '%s' "$__po_value"
}

__po_args=("$@")
# what each option given takes, from the script's value, before a --config file sets another (neg=0 in one made
# --neg 0.5 'not a whole number')
declare -A __po_kinds=()
__po_i=0
while [ $__po_i -lt ${#__po_args[@]} ]; do
  case "${__po_args[__po_i]}" in
    --) break ;;
    --help|-h) __po_i=$((__po_i + 1)); continue ;;
    --*=*) __po_var=${__po_args[__po_i]%%=*}; __po_i=$((__po_i + 1)) ;;
    --*) __po_var=${__po_args[__po_i]}; __po_i=$((__po_i + 2)) ;;
    *) break ;;
  esac
  __po_var=$(printf '%s' "${__po_var#--}" | tr '-' '_')
  if [[ $__po_var =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && [ -n "${!__po_var+set}" ] && [ -z "${__po_kinds[$__po_var]+set}" ]
  then
    __po_kinds[$__po_var]=$(__po_kind "${!__po_var}")
  fi
done

# --config files are applied first so that explicit options on the command line win.
__po_i=0
while [ $__po_i -lt ${#__po_args[@]} ]; do
  __po_cfg=
  case "${__po_args[__po_i]}" in
    --) break ;;
    --help|-h) __po_i=$((__po_i + 1)); continue ;;
    --config=*) __po_cfg=${__po_args[__po_i]#--config=}; __po_i=$((__po_i + 1)) ;;
    --config)
      __po_cfg=${__po_args[__po_i + 1]:-}
      [ -n "$__po_cfg" ] || __po_fail "--config needs a file"
      __po_i=$((__po_i + 2)) ;;
    --*=*) __po_i=$((__po_i + 1)); continue ;;
    --*) __po_i=$((__po_i + 2)); continue ;;
    *) break ;;
  esac
  [ -f "$__po_cfg" ] || __po_fail "config file '$__po_cfg' not found"
  case $__po_cfg in *.yaml|*.yml)  # sourced as shell, a model's YAML ran its lines as commands
    __po_fail "--config $__po_cfg: --config takes a file of shell assignments (name=value); a model's YAML is" \
      "--train-config" ;;
  esac
  case $__po_cfg in */*) ;; *) __po_cfg=./$__po_cfg ;; esac  # a bare name: the file checked, not one on $PATH
  # each name it assigns is an option of the script, as on the command line (a typo, nj_jobs=8, set a variable
  # nothing read, and the run went on with the default)
  __po_i_line=0
  while IFS= read -r __po_line || [ -n "$__po_line" ]; do
    __po_i_line=$((__po_i_line + 1))
    [[ $__po_line =~ ^[[:space:]]*([A-Za-z_][A-Za-z0-9_]*)= ]] || continue
    __po_var=${BASH_REMATCH[1]}
    if [ -z "${!__po_var+set}" ] || [[ $(declare -p "$__po_var") =~ ^declare\ -[a-zA-Z]*x ]]; then
      __po_fail "$__po_cfg:$__po_i_line: '$__po_var' is no option of the script (no variable of that name is" \
        "defined in it)"
    fi
  done < "$__po_cfg"
  # shellcheck disable=SC1090
  . "$__po_cfg"
done

while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    --help|-h) printf '%s\n' "${help_message:-Usage: $__po_name [options]; no help message is defined}"; exit 0 ;;
    --config=*) shift ;;
    --config) shift 2 ;;
    --*=*) __po_set "${1%%=*}" "${1#*=}"; shift ;;
    --*) [ $# -ge 2 ] || __po_fail "option '$1' needs a value"; __po_set "$1" "$2"; shift 2 ;;
    *) break ;;
  esac
done
unset __po_args __po_i __po_cfg __po_var __po_kinds __po_i_line __po_line
true
