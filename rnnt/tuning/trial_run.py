"""One trial's training: the real trainer (steps/train.py) in a child process, watched from outside.

Each epoch checkpoint the trainer writes carries its dev WER; every new one is reported as it appears.
The caller's report function answers whether to stop (a pruned trial, a target reached); the time limit stops
it too. Stopping is the trainer's own SIGTERM path (it finishes the optimiser step, saves and exits),
and the child is tied to this process: if the tuner is killed, its training dies with it.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable

from rnnt.training import checkpoint

POLL_SECONDS = 0.5


class NoDevWer(Exception):
    """An epoch checkpoint of the trial without the dev WER the search is scored on."""


@dataclass
class TrialRun:
    epochs: list[tuple[int, float, float]] = field(default_factory=list)  # (epoch, dev WER %, minutes)
    stopped_by: str = ""  # "" (ran its epochs), "time limit", or "asked" (report returned True)
    returncode: int = 0
    minutes_limit: float = 0.0  # > 0: the time limit, past which an epoch does not count
    asked_at: int = 0  # the epoch whose report asked to stop (0: none); the trainer may end one more, not counted
    dev_set: str = ""  # the newest epoch's valid_dev_set: the dev utterances its WER is of ("" where not kept)

    @property
    def failed(self) -> bool:
        """The training ended in error: not 0, nor SIGTERM's status when this run stopped it (143 from the
        trainer's own handler; killed by the signal, once training ended and the default handler was back)."""
        stopped = self.stopped_by and self.returncode in (128 + signal.SIGTERM, -signal.SIGTERM)
        return self.returncode != 0 and not stopped

    @property
    def counted(self) -> list[tuple[int, float, float]]:
        """The epochs ended within the time limit and not after the one whose report asked to stop: the trainer
        stopped may still end the epoch it was validating (a pruned trial's best was one the pruner never saw)."""
        return [e for e in self.epochs if (not self.minutes_limit or e[2] <= self.minutes_limit)
                and (not self.asked_at or e[0] <= self.asked_at)]

    @property
    def best(self) -> tuple[int, float, float] | None:
        """The counted epoch with the lowest dev WER (the first of equals)."""
        counted = self.counted
        return min(counted, key=lambda e: e[1]) if counted else None


def die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent dies (Linux; elsewhere nothing)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def new_epochs(exp_dir: str, seen: int) -> list[tuple[int, float, str]]:
    """(epoch number, dev WER, the dev set it is of: valid_dev_set) of the epoch checkpoints after the first `seen`."""
    found = []
    for path in checkpoint.numbered(exp_dir, "epoch")[seen:]:
        meta = checkpoint.load_meta(path)
        if "valid_wer" not in meta:
            raise NoDevWer(f"{path} holds no dev WER: tuning needs a valid list and train.valid_wer: true")
        found.append((int(meta["epoch"]), float(meta["valid_wer"]), str(meta.get("valid_dev_set", ""))))
    return found


def run_trial(command: list[str], exp_dir: str, minutes: float, report: Callable[[int, float], bool],
              log_path: str, env: dict | None = None) -> TrialRun:
    """Runs command (a steps/train.py line writing to exp_dir), its output to log_path; report(epoch,
    WER) is called per finished epoch and returns True to stop the training (a pruned trial, a target
    reached). minutes > 0 stops it
    after that much wall-clock time. env: the child's environment (default: this process's)."""
    run = TrialRun(minutes_limit=minutes)
    started = time.monotonic()
    with open(log_path, "w") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent)
        try:
            while True:
                finished = child.poll() is not None
                elapsed = (time.monotonic() - started) / 60
                for epoch, wer, run.dev_set in new_epochs(exp_dir, len(run.epochs)):
                    run.epochs.append((epoch, wer, elapsed))
                    if minutes > 0 and elapsed > minutes and not run.stopped_by:
                        run.stopped_by = "time limit"  # ended after the limit: not reported, not counted
                    if not run.stopped_by and report(epoch, wer):
                        run.stopped_by, run.asked_at = "asked", epoch
                if finished:
                    break
                if not run.stopped_by and minutes > 0 and elapsed > minutes:
                    run.stopped_by = "time limit"
                if run.stopped_by and child.returncode is None:
                    child.send_signal(signal.SIGTERM)
                    child.wait()
                    continue  # one more look: the stop may have followed an epoch's end
                time.sleep(POLL_SECONDS)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    run.returncode = child.returncode
    return run
