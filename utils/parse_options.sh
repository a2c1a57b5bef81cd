# Kaldi-style option parsing; source it after setting defaults:
#   stage=0; use_gpu=false; help_message="Usage: $0 [options] <dir>"
#   . utils/parse_options.sh
# Rules:
#   --foo-bar X and --foo-bar=X set the existing variable foo_bar (an undefined one is an error);
#   a variable whose current value is true or false only accepts true or false, one whose value is a whole number
#   (stage=0, average=5) only a whole number; a value that is another option of the script (--stage --stop-stage 3)
#   is a missing value;
#   --config FILE sources FILE (shell assignments) before the remaining options, so a script may not
#   have a variable named config of its own (refused at once);
#   --help / -h prints $help_message and exits 0;
#   parsing stops at the first argument not starting with --, or after a bare --;
#   positional arguments stay in "$@".
# shellcheck shell=bash

__po_name=$(basename "$0")

__po_fail() {
  echo "$__po_name: $*" >&2
  [ -n "${help_message:-}" ] && printf '%s\n' "$help_message" >&2
  exit 1
}

if [[ "$(declare -p config 2>/dev/null)" == "declare -- "* ]]; then  # the script's own (not the environment's):
  # it could never be set, --config sourcing a file instead
  __po_fail "the script defines a variable 'config', but --config FILE is reserved for a file of shell" \
    "assignments: rename the variable (e.g. train_config)"
fi

__po_set() {  # __po_set <option-as-typed> <value>
  local opt=$1 value=$2 var
  var=$(printf '%s' "${opt#--}" | tr '-' '_')
  case "$var" in
    ''|[0-9]*|*[!A-Za-z0-9_]*) __po_fail "invalid option '$opt'" ;;
  esac
  if [ -z "${!var+set}" ]; then
    __po_fail "unknown option '$opt' (no variable '$var' is defined in the script)"
  fi
  local current=${!var} __po_next  # named so that no script's option is one of these locals
  __po_next=$(printf '%s' "${value#--}" | tr '-' '_')
  if [[ "$value" == --* ]] && [[ "$__po_next" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && [ -n "${!__po_next+set}" ]; then
    __po_fail "option '$opt' needs a value (the next word is the option '$value')"
  fi
  if { [ "$current" = true ] || [ "$current" = false ]; } && [ "$value" != true ] && [ "$value" != false ]; then
    __po_fail "option '$opt' takes true or false, not '$value'"
  fi
  if [[ "$current" =~ ^[0-9]+$ ]]; then
    [[ "$value" =~ ^[0-9]{1,18}$ ]] || __po_fail "option '$opt' takes a whole number, not '$value'"  # 19: wraps
    value=$((10#$value))  # 08 as 8: bash arithmetic reads a leading 0 as octal (08 failed, 010 was 8)
  fi
  printf -v "$var" '%s' "$value"
}

# --config files are applied first so that explicit options on the command line win.
__po_args=("$@")
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
unset __po_args __po_i __po_cfg
true
