"""An exclusive lock on a file beside the thing it guards, held by one process at a time across processes on a
machine (fcntl.flock): two runs at once that would both write the same files take turns. The kernel lets it go
when its holder ends, killed or not, so a lock file left behind never blocks anyone. Standard library only."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys


@contextlib.contextmanager
def held(lock_path: str, waiting: str | None = None):
    """Holds lock_path's lock (the file made if need be) for the with block; when another process holds it, waits
    for it, first printing `waiting` (if given) to stderr so that the wait is not taken for a hang."""
    lock, got = _opened_and_tried(lock_path, "a")
    with lock:
        if not got:
            if waiting:
                print(waiting, file=sys.stderr, flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _opened_and_tried(path: str, mode: str):
    """(path opened in mode, its folder made if need be; whether its lock was free and is now this process's)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    lock = open(path, mode)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return lock, False
    return lock, True


class Busy(RuntimeError):
    """The lock is another process's: its pid where it wrote one."""


_HELD_HERE: dict[str, list] = {}  # the locks held_alone holds in this process: path -> [open file, holders here]


@contextlib.contextmanager
def held_alone(lock_path: str):
    """Holds lock_path's lock for the with block, its pid written in it; Busy at once, naming the holder's pid,
    where another process holds it (a second training of one experiment: a requeued job, a forgotten terminal).
    Within a process it is held again as often as asked (a Trainer made to look at an experiment another one
    trained in the same process), and let go when the last holder here is done."""
    path = os.path.abspath(lock_path)
    if path not in _HELD_HERE:
        _HELD_HERE[path] = [_locked(path), 0]
    _HELD_HERE[path][1] += 1
    try:
        yield
    finally:
        _HELD_HERE[path][1] -= 1
        if not _HELD_HERE[path][1]:
            _HELD_HERE.pop(path)[0].close()


def _locked(path: str):
    """path opened and locked, this process's pid written in it; Busy naming the holder's where another holds it."""
    lock, got = _opened_and_tried(path, "a+")
    if not got:
        lock.seek(0)
        holder = lock.read().strip() or "(unknown)"
        lock.close()
        raise Busy(f"{path} is held by process {holder}")
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock
