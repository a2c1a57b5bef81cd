# Sourced by every recipe's run.sh (symlinked into egs/<corpus>/): locates the project,
# installs the virtual environment on first use, and sets up the environment.
# shellcheck shell=bash
RNNT_ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
export RNNT_ROOT

# An active virtual environment is used when it imports this checkout's rnnt (tools/install.sh run in it);
# any other (another project's, another clone's) would run this recipe with the wrong code or none.
imports_this_checkout() {
  # (from / : python -c puts the current folder first on its path, where this checkout's rnnt lies in the repo's root)
  [ "$(cd / && "$VIRTUAL_ENV/bin/python" -c 'import importlib.util as u; s = u.find_spec("rnnt")
print(s.submodule_search_locations[0] if s else "")' 2>/dev/null)" = "$RNNT_ROOT/rnnt" ]
}
activate_own=false  # tools/venv to be activated here; checked (and installed or updated) whenever it is the one used
if [ "${VIRTUAL_ENV:-}" != "$RNNT_ROOT/tools/venv" ] && ! { [ -n "${VIRTUAL_ENV:-}" ] && imports_this_checkout; }; then
  if [ -n "${VIRTUAL_ENV:-}" ]; then
    echo "path.sh: the active environment $VIRTUAL_ENV does not import this checkout's rnnt;" \
      "using $RNNT_ROOT/tools/venv" >&2
  fi
  activate_own=true
fi
# none yet, one an interrupted install left (no stamp), or one older than the requirements (a git pull), also
# when it is active already (`. ./path.sh` in this shell before the pull)
stamp="$RNNT_ROOT/tools/venv/.rnnt-requirements.sha256"
if { $activate_own || [ "${VIRTUAL_ENV:-}" = "$RNNT_ROOT/tools/venv" ]; } &&
    { [ ! -x "$RNNT_ROOT/tools/venv/bin/python" ] || [ ! -f "$stamp" ] ||
      [ "$RNNT_ROOT/tools/requirements.txt" -nt "$stamp" ] || [ "$RNNT_ROOT/tools/constraints.txt" -nt "$stamp" ]
    }; then
  echo "path.sh: $RNNT_ROOT/tools/venv is missing or not up to date; running tools/install.sh (about a minute)" >&2
  env -u VIRTUAL_ENV "$RNNT_ROOT/tools/install.sh" >&2
fi
if $activate_own; then
  # shellcheck disable=SC1091
  . "$RNNT_ROOT/tools/venv/bin/activate"
  if ! imports_this_checkout; then  # a checkout moved since (install.sh names the new place), or tools/venv
    env -u VIRTUAL_ENV "$RNNT_ROOT/tools/install.sh" >&2 || return 1  # another's (refused, saying why)
  fi
fi

export PATH="$RNNT_ROOT/utils:$RNNT_ROOT/steps:$PATH"
export LC_ALL=C
export PYTHONUNBUFFERED=1
