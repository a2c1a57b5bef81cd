"""What the trainer carries between optimiser steps: the gradient group being accumulated, and the
batches it had to skip (a non-finite loss or gradient, or out of memory)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from rnnt.training.stop import StopTraining


def is_out_of_memory(error: BaseException) -> bool:
    """A device's out-of-memory error, or the host's failed allocation (the CPU's: "Cannot allocate memory")."""
    return isinstance(error, torch.OutOfMemoryError) or any(
        words in str(error) for words in ("out of memory", "Cannot allocate memory"))


@dataclass
class GradientGroup:
    """The micro-batches whose gradients are in the parameters' .grad since the last optimiser step."""

    kept: int = 0  # micro-batches whose gradient was kept
    synced: bool = False  # under DDP: one of them ran its backward pass in sync, so the sum was all-reduced
    ranks: int = 0  # the batches of weight 1 they stand for on every rank, the same count on every rank (a rank
    # waiting at an epoch's end keeps batches of weight 0): what the optimiser step averages over

    def add(self, synced: bool, ranks: int = 1) -> None:
        self.kept += 1
        self.synced = self.synced or synced
        self.ranks += ranks

    def take(self) -> GradientGroup:
        """This group, for the optimiser step; a new one starts empty."""
        taken = GradientGroup(self.kept, self.synced, self.ranks)
        self.drop()
        return taken

    def drop(self) -> None:
        """Forgets the group (its gradient was zeroed: a backward pass broke off in the middle)."""
        self.kept, self.synced, self.ranks = 0, False, 0


REASONS = ("non-finite loss", "non-finite gradient", "out of memory")


@dataclass
class BadBatches:
    """Skipped batches: counted per reason for the checkpoints, and in a row since the last optimiser
    step, which stops training at `limit`: a model that diverged does not skip its way to the end."""

    limit: int
    in_row: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))

    def skip(self, reason: str) -> None:
        """One batch skipped, for reason (a key of counts)."""
        self.counts[reason] += 1
        self.in_row += 1
        if self.in_row >= self.limit:
            raise StopTraining(f"{self.in_row} batches in a row had a non-finite loss or gradient or ran out of "
                               "memory; lower the learning rate, check the data, or raise train.max_bad_steps")

    def step_taken(self) -> None:
        self.in_row = 0

    def meta(self) -> dict:
        return {"bad_in_row": self.in_row, **{f"skipped {reason}": n for reason, n in self.counts.items()}}

    def load_meta(self, meta: dict) -> None:
        self.in_row = meta["bad_in_row"]
        self.counts = {reason: meta.get(f"skipped {reason}", 0) for reason in REASONS}

    def summary(self) -> str:
        return "skipped " + ", ".join(f"{n} {reason}" for reason, n in self.counts.items())
