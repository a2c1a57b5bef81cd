"""Progress bars that a person watches and a log never holds.

A bar goes to stderr when that is a terminal. A recipe's stage runs its tool with output through `tee`
into the stage log (utils/stages.sh, logged); there the tool's stderr is a pipe, and logged names the
terminal it runs on in RNNT_TERMINAL: the bar goes there, beside the log, not into it. With neither (a
job, a test, output to a file), no bar: the tool's log lines and summary line say what was done.
"""

from __future__ import annotations

import os
import sys
from functools import cache


def bar_stream():
    """Where bars go: stderr on a terminal, else the terminal RNNT_TERMINAL names; None for no bar."""
    if sys.stderr.isatty():
        return sys.stderr
    terminal = os.environ.get("RNNT_TERMINAL")
    return _opened(terminal) if terminal else None


@cache
def _opened(terminal: str):
    """The terminal opened once for all of a process's bars (tqdm leaves its file open)."""
    try:
        return open(terminal, "w")
    except OSError:  # no controlling terminal after all (a detached job)
        return None


def progress(iterable=None, **options):
    """tqdm(iterable, **options) drawn where bar_stream says, or disabled (options may disable it too); where tqdm
    is not installed (the data-dir utils run before the virtual environment exists: rnnt.datadir), no bar."""
    try:
        from tqdm import tqdm
    except ImportError:
        return NoBar(iterable)
    asked_off = options.pop("disable", False)
    stream = None if asked_off else bar_stream()
    return tqdm(iterable, file=stream or sys.stderr, disable=stream is None, dynamic_ncols=True, **options)


class NoBar:
    """What tqdm's disabled bar does: iterates, and takes its calls."""

    def __init__(self, iterable=None):
        self.iterable = iterable

    def __iter__(self):
        return iter(self.iterable)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def __getattr__(self, name: str):  # update, close, set_postfix, ...: nothing to draw
        return lambda *args, **kwargs: None
