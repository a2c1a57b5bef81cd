# Sourced by every recipe's run.sh (symlinked into egs/<corpus>/): locates the project,
# installs the virtual environment on first use, and sets up the environment.
# shellcheck shell=bash
RNNT_ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
export RNNT_ROOT

if [ -z "${VIRTUAL_ENV:-}" ] || [ "$VIRTUAL_ENV" != "$RNNT_ROOT/tools/venv" ]; then
  if [ ! -x "$RNNT_ROOT/tools/venv/bin/python" ] && [ -z "${VIRTUAL_ENV:-}" ]; then
    echo "path.sh: no environment at $RNNT_ROOT/tools/venv yet; running tools/install.sh (about a minute)" >&2
    "$RNNT_ROOT/tools/install.sh" >&2
  fi
  if [ -z "${VIRTUAL_ENV:-}" ]; then
    # shellcheck disable=SC1091
    . "$RNNT_ROOT/tools/venv/bin/activate"
  fi
fi

export PATH="$RNNT_ROOT/utils:$RNNT_ROOT/steps:$PATH"
export LC_ALL=C
export PYTHONUNBUFFERED=1
