"""The DataLoader workers' stop signals (rnnt/data/worker_signals.py) on real worker processes."""

import os
import signal
import subprocess
import time

import pytest
from torch.utils.data import IterableDataset

from rnnt.data.worker_signals import OwnGroupWorkersLoader


class WorkerPids(IterableDataset):
    """Each worker's pid, forever."""

    def __iter__(self):
        while True:
            time.sleep(0.01)
            yield os.getpid()


def worker_pids(batches, workers: int = 2) -> set[int]:
    pids = set()
    while len(pids) < workers:
        pids.add(next(batches))
    return pids


def sent_by_another_process(number: int, pid: int) -> None:
    subprocess.run(["kill", f"-{number}", str(pid)], check=True)


def test_a_stop_signal_from_another_process_leaves_the_workers_serving_the_trainings_own_ends_them():
    """As Slurm, systemd or pkill -f send SIGTERM and SIGINT to each process: the workers serve on, out of the
    training's process group, until the training, stopping, ends them; a SIGTERM from the training kills one."""
    batches = iter(OwnGroupWorkersLoader(WorkerPids(), batch_size=None, num_workers=2))
    pids = worker_pids(batches)
    for pid in pids:
        assert os.getpgid(pid) == pid != os.getpgid(0)
        sent_by_another_process(signal.SIGTERM, pid)
        sent_by_another_process(signal.SIGINT, pid)
    time.sleep(0.5)
    assert worker_pids(batches) == pids  # the same two, alive
    victim = min(pids)
    os.kill(victim, signal.SIGTERM)
    with pytest.raises(RuntimeError, match=f"pid.*{victim}"):
        for _ in range(1000):
            next(batches)


def test_the_workers_end_with_the_loader():
    batches = iter(OwnGroupWorkersLoader(WorkerPids(), batch_size=None, num_workers=2))
    pids = worker_pids(batches)
    del batches
    deadline = time.time() + 30
    while time.time() < deadline and any(os.path.exists(f"/proc/{pid}") for pid in pids):
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)
