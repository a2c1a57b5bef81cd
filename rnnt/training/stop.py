"""The error that ends a training run with a message (no traceback): what went wrong and what to do; and the lock
that keeps a second training of an experiment from running beside the first."""

import contextlib
import os

from rnnt.file_lock import Busy, held_alone


class StopTraining(RuntimeError):
    """Training cannot go on; the message says why and what to do."""


@contextlib.contextmanager
def held_alone_or_stop(exp_dir: str):
    """The experiment's lock, beside its dir (which a setting aside renames: .<name>.train.lock), held for the with
    block; StopTraining naming the holder where another training holds it (a requeued job, a forgotten terminal:
    it resumed from the first's checkpoints, or set its files aside, and both wrote the same ones)."""
    exp_dir = os.path.abspath(exp_dir)
    lock = os.path.join(os.path.dirname(exp_dir), f".{os.path.basename(exp_dir)}.train.lock")
    try:
        with held_alone(lock):
            yield
    except Busy as error:
        raise StopTraining(f"another training of {exp_dir} is running ({error}); wait for it to end, or stop it") \
            from None
