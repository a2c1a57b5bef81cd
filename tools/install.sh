#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment and install the pinned requirements.
# Idempotent: when tools/venv already satisfies tools/requirements.txt it returns in seconds.
set -euo pipefail

usage() {
  cat <<USAGE
Usage: tools/install.sh [--python PYTHON] [--force]

Creates tools/venv with PYTHON (default: python3) and installs tools/requirements.txt
(direct pins) under tools/constraints.txt (transitive pins).
If a virtual environment is already active (VIRTUAL_ENV is set), installs into it instead.
  --python PYTHON   interpreter to build the venv with (must be >= 3.10)
  --force           reinstall even when the requirements stamp is up to date (and take over a venv that
                    another checkout uses)
USAGE
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=python3
force=false
while [ $# -gt 0 ]; do
  case "$1" in
    --python) [ $# -ge 2 ] || { echo "tools/install.sh: --python needs an interpreter" >&2; usage >&2; exit 1; }
              python="$2"; shift 2 ;;
    --python=*) python=${1#--python=}; shift ;;
    --force) force=true; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "tools/install.sh: unknown option '$1'" >&2; usage >&2; exit 1 ;;
  esac
done

requirements="$root/tools/requirements.txt"
constraints="$root/tools/constraints.txt"
if [ -n "${VIRTUAL_ENV:-}" ]; then
  venv="$VIRTUAL_ENV"
  echo "tools/install.sh: using the active virtual environment $venv"
else
  venv="$root/tools/venv"
fi

if ! command -v "$python" >/dev/null 2>&1 && [ ! -x "$venv/bin/python" ]; then
  echo "tools/install.sh: '$python' not found; install Python >= 3.10 or pass --python" >&2
  exit 1
fi
interpreter="$venv/bin/python"
[ -x "$interpreter" ] || interpreter="$python"
if ! "$interpreter" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'; then
  echo "tools/install.sh: Python >= 3.10 is required, $interpreter is $("$interpreter" -V 2>&1); pass --python" >&2
  exit 1
fi

site_packages() {
  "$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
}
# Scripts anywhere in the project import the rnnt package from this checkout: the venv's site-packages
# names it in a .pth file (the one way a script finds the package; no sys.path edits in scripts). A venv serves
# one checkout: one that names another checkout still there (tools/venv linked in from it, or one venv active for
# both) is refused, unless --force: renamed, every tool of that checkout would run this one's code.
link_project() {
  local pth other
  pth="$(site_packages)/rnnt-recipes.pth"
  other=$(cat "$pth" 2> /dev/null || true)
  if ! $force && [ -n "$other" ] && [ "$(readlink -f "$other")" != "$(readlink -f "$root")" ] && [ -d "$other/rnnt" ] &&
      [ -f "$other/tools/install.sh" ]; then
    echo "tools/install.sh: $venv is the environment of the checkout $other (its scripts import rnnt from there):" \
      "a venv serves one checkout; give this one its own (remove $venv if it is a link or a copy, then run" \
      "tools/install.sh), or take it over with --force" >&2
    exit 1
  fi
  echo "$root" > "$pth"
}

# One install at a time (two recipes started at once on a fresh clone both built the venv, each over the other):
# the second waits, then finds it up to date.
if command -v flock > /dev/null; then
  exec 9> "$root/tools/.install.lock"
  flock 9
fi

# The stamp records the requirements the venv was built from; equal stamp -> nothing to do.
stamp="$venv/.rnnt-requirements.sha256"
want=$(cat "$requirements" "$constraints" | sha256sum | cut -d' ' -f1)
# and every pin installed at its version (a package uninstalled or upgraded by hand since: the stamp still matched),
# looked up in the packages' metadata, not imported (torch's import takes seconds, and every test run and recipe asks)
fresh=false
if ! $force && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  if unmet=$("$venv/bin/python" "$root/tools/unmet_pins.py" "$requirements" "$constraints"); then
    fresh=true
  else
    echo "tools/install.sh: $venv differs from the pins ($(echo "$unmet" | head -3 | paste -sd ';' -)):" \
      "installing them again"
  fi
fi
if $fresh; then
  link_project
  touch "$stamp"  # newer than the requirements again (path.sh compares their times)
  echo "tools/install.sh: $venv is up to date"
  exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "tools/install.sh: creating $venv"
  "$python" -m venv "$venv"
elif ! "$venv/bin/python" -m pip --version > /dev/null 2>&1; then  # `python -m venv` without python3-venv
  if [ "$venv" != "$root/tools/venv" ]; then
    echo "tools/install.sh: $venv has no pip; install it there (python -m ensurepip) or deactivate it" >&2
    exit 1
  fi
  echo "tools/install.sh: $venv has no pip (an earlier venv failed half way): creating it again"
  "$python" -m venv --clear "$venv"
fi
link_project

pip_args=(--disable-pip-version-check)
# The CPU torch wheel lies on this machine's disk; point pip at it if the environment does not.
[ -d /opt/wheels ] && pip_args+=(--find-links /opt/wheels)
echo "tools/install.sh: installing $(grep -cv '^\s*\(#\|$\)' "$requirements") pinned requirements into $venv"
"$venv/bin/python" -m pip install "${pip_args[@]}" --no-compile -q -r "$requirements" -c "$constraints"
# the bytecode compiled on every core at once (pip compiles a file at a time: 50 s of a 100 s install; 32 s on 2
# cores); a file that does not compile (a template, a Python 2 example) is left as pip leaves it
"$venv/bin/python" -m compileall -q -j 0 "$(site_packages)" > /dev/null || true
"$venv/bin/python" -c 'import torch, sentencepiece, jiwer, soundfile, kaldiio, yaml, tqdm' 
echo "$want" > "$stamp"
echo "tools/install.sh: done, torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') in $venv"
