"""Files written whole or not at all: a crash, a full disk or a kill leaves the old file or the new one, never
a part (checkpoints, an experiment's config.yaml, data lists). Standard library only: the data tools use it
without torch."""

from __future__ import annotations

import os


def write_atomically(path: str, write, mode: str = "w", tmp: str | None = None, **open_options) -> None:
    """write(f) to tmp (default path.tmp), flushed to disk, then renamed: a crash leaves the old file or the new
    one, whole; a failure (a full disk, path a directory) leaves no tmp. A text file is UTF-8; open_options go to
    open() (errors, newline)."""
    tmp = tmp or f"{path}.tmp"
    if "b" not in mode:
        open_options.setdefault("encoding", "utf-8")
    try:
        with open(tmp, mode, **open_options) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.isfile(tmp):
            os.remove(tmp)
        raise
    directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself
    finally:
        os.close(directory)
