"""keys-rank<R>.txt (steps/train.py --log-keys): '<epoch> <key>' for each utterance a rank trained on, in the
order it trained on them. Each checkpoint records how far every rank's file had got; a resumed run cuts its
file back to that, so the batches a kill threw away (trained again after the resume) are not listed twice, and
a run that starts afresh starts the file afresh."""

from __future__ import annotations

import glob
import os
import re


class KeysLog:
    def __init__(self, exp_dir: str, rank: int):
        self.file = open(os.path.join(exp_dir, f"keys-rank{rank}.txt"), "a+", encoding="utf-8")
        self.file.seek(0, os.SEEK_END)

    def write(self, epoch: int, keys: list[str]) -> None:
        self.file.write("".join(f"{epoch} {key}\n" for key in keys))
        self.file.flush()

    def offset(self) -> int:
        """How far the file has got: what a checkpoint records."""
        return self.file.tell()

    def resume(self, offset: int | None, epoch: int, batch: int = 0) -> None:
        """Cuts the file back to offset, as a checkpoint recorded it. Where it recorded none (a checkpoint of an
        earlier version, of a run without --log-keys, or of another number of ranks, which is resumed where an
        epoch ended), to the lines of the epochs before `epoch`, or, resumed at batch > 0 inside it, up to its
        (the batches a kill threw away may then be listed twice)."""
        if offset is None:
            last = epoch if batch else epoch - 1
            self.file.seek(0)
            offset = 0
            for line in self.file:
                if not (line.split(" ", 1)[0].isdigit() and int(line.split(" ", 1)[0]) <= last):
                    break
                offset += len(line.encode("utf-8"))
        self.file.truncate(min(offset, os.fstat(self.file.fileno()).st_size))
        self.file.seek(0, os.SEEK_END)

    def close(self) -> None:
        self.file.close()


def other_ranks(exp_dir: str, world_size: int) -> list[tuple[int, str]]:
    """(rank, path) of each keys file of a rank this run does not have (an earlier run's, with more ranks)."""
    found = [(re.fullmatch(r"keys-rank(\d+)\.txt", os.path.basename(path)), path)
             for path in glob.glob(os.path.join(glob.escape(exp_dir), "keys-rank*.txt"))]
    return [(int(rank.group(1)), path) for rank, path in found if rank and int(rank.group(1)) >= world_size]


def remove_other_ranks(exp_dir: str, world_size: int) -> None:
    """Removes the keys files of ranks this run does not have: a fresh start keeps its own alone."""
    for _, path in other_ranks(exp_dir, world_size):
        os.remove(path)


def cut_other_ranks(exp_dir: str, world_size: int, epoch: int, batch: int) -> None:
    """Cuts the keys files of ranks this run does not have back to where it resumed (a resume with fewer ranks, from
    where an epoch ended): their batches after it, trained again by this run's ranks, were listed twice."""
    for rank, _ in other_ranks(exp_dir, world_size):
        keys = KeysLog(exp_dir, rank)
        keys.resume(None, epoch, batch)
        keys.close()
