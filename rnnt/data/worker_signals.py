"""DataLoader workers that a stop signal meant for the training leaves alive.

A training stops on SIGTERM at its next optimiser step and saves its position there: it needs its workers' batches
until then. The signal reaches the workers too where it is sent to a process group (torchrun stops its ranks so, as
do kill -TERM -PGID and a terminal's Ctrl-C) or to every process (Slurm at a time limit, systemd's stop, pkill -f):
they died of it, and the training failed on its next batch instead, unsaved. So each worker, as it starts:
- leaves the training's process group, so that a signal to the group reaches the training alone;
- ignores SIGINT, which nothing sends a worker on purpose;
- takes SIGTERM in a thread of its own and dies of it only when the training process sent it: its DataLoader ends
  a worker that does not finish in time so, as does Python's exit. A SIGTERM from anyone else is left to the
  training, which ends its workers itself as it stops (and a worker whose training is gone ends on its own).
While the training starts its workers it holds the two signals back (blocked, as its workers are born with them
blocked): one sent in between reaches the training once they are started, and is dropped in a worker.
"""

from __future__ import annotations

import functools
import os
import signal
import threading

from torch.utils.data import DataLoader

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def obey_the_training_only(training_pid: int, worker_id: int) -> None:
    """A worker's first act (worker_init_fn), as the module says. SIGTERM stays blocked in this thread and in each
    one it starts, so that sigwaitinfo in the watcher takes it, with its sender. Both signals' handlers are reset
    first: a forked worker inherits the training's, and with the training's SIGTERM handler a worker outlived its
    training's end, which waited for it for good."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # drops one pending
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.setpgrp()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    threading.Thread(target=die_of_the_trainings_sigterm, args=(training_pid,), name="sigterm-watcher",
                     daemon=True).start()


def die_of_the_trainings_sigterm(training_pid: int) -> None:
    """Waits for SIGTERMs: one from the training process is let through to its default action, death."""
    while signal.sigwaitinfo({signal.SIGTERM}).si_pid != training_pid:
        pass
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)


class OwnGroupWorkersLoader(DataLoader):
    """A DataLoader whose worker processes obey stop signals from the training process only
    (obey_the_training_only)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, worker_init_fn=functools.partial(obey_the_training_only, os.getpid()), **kwargs)

    def __iter__(self):
        if self.num_workers == 0:
            return super().__iter__()
        held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # the workers are started with them blocked
        try:
            return super().__iter__()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
