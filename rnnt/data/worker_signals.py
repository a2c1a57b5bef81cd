"""DataLoader workers out of the training process's process group.

A SIGTERM or SIGINT to the group (torchrun stops its ranks so, as do kill -TERM -PGID and a terminal's Ctrl-C)
reached the workers too: they died of it, and the training, stopping at its next step to save its position,
failed on its next batch instead, unsaved. Each worker now leaves the group as it starts, so that the signal
reaches the training process alone, which shuts its workers down itself. While it starts them it holds the two
signals back (blocked, as its workers are born with them blocked): one sent in between reaches the training
process once they are started, and is dropped in a worker before it leaves the group.
"""

from __future__ import annotations

import os
import signal

from torch.utils.data import DataLoader

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def leave_process_group(worker_id: int) -> None:
    """A worker's first act (worker_init_fn): out of the group, the stop signals sent before this dropped, then
    each signal's default action, death, as torch's own handler ends in (not the training's handlers, which a
    forked worker inherits: the training's SIGTERM handler in a worker left it alive when its training process,
    ending, terminated it, and the training process waited for it for good)."""
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_IGN)  # drops one pending
    os.setpgrp()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_DFL)


class OwnGroupWorkersLoader(DataLoader):
    """A DataLoader whose worker processes each leave the process group (leave_process_group)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, worker_init_fn=leave_process_group, **kwargs)

    def __iter__(self):
        if self.num_workers == 0:
            return super().__iter__()
        held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # the workers are started with them blocked
        try:
            return super().__iter__()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
