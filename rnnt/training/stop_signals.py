"""The signals that stop a training at its next optimiser step, where its position is saved: SIGTERM (torchrun,
Slurm, a recipe's stages), and Ctrl-C (SIGINT) where the process takes it: train.py run by hand. A second Ctrl-C
stops it at once, unsaved. A process started with SIGINT ignored (a recipe's stage: utils/stages.sh stops it with
SIGTERM) keeps ignoring it. Ctrl-C ended a hand-run training at once, in a traceback, its steps since the last
checkpoint lost."""

from __future__ import annotations

import signal
import sys


class StopSignals:
    """A with block in which the stop signals are taken: `received` is the first one's number (0: none yet)."""

    def __init__(self):
        self.received = 0
        self.ctrl_c = 0  # Ctrl-Cs taken, whatever came first
        self.previous: dict = {}

    def __enter__(self) -> StopSignals:
        self.previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, self.take)}
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # Python's own: nobody ignores it
            self.previous[signal.SIGINT] = signal.signal(signal.SIGINT, self.take)
        return self

    def __exit__(self, *exc) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)

    def take(self, number: int, frame) -> None:
        if number == signal.SIGINT:
            self.ctrl_c += 1
            if self.ctrl_c >= 2:  # the second (after a SIGTERM too: it said "again: at once" and did nothing)
                raise KeyboardInterrupt
            print("train.py: Ctrl-C: stopping at the next optimiser step, where the position is saved (Ctrl-C again: "
                  "at once, unsaved)", file=sys.stderr, flush=True)
        self.received = self.received or number

    @property
    def name(self) -> str:
        """How the log names the signal that stopped the run."""
        return "Ctrl-C (SIGINT)" if self.received == signal.SIGINT else "SIGTERM"

    @property
    def exit_status(self) -> int:
        """The shell's for the signal (a rank stopped because another rank got one: SIGTERM's): 143 or 130."""
        return 128 + (self.received or signal.SIGTERM)
