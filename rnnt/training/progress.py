"""What training reports as it goes: the log (stderr, and train.log on the main rank) with a line every
log_every steps (loss, rate, time left), TensorBoard scalars, and a progress bar per epoch where a person
watches (rnnt.progress_bar: never in a log). Only the main rank writes TensorBoard and the bars."""

from __future__ import annotations

import logging
import os
import sys
import time

from rnnt.progress_bar import progress
from rnnt.training.distributed import World

log = logging.getLogger("rnnt.train")


_handlers: list[logging.Handler] = []  # what setup_logging installed last, replaced by the next call


def setup_logging(exp_dir: str, world: World) -> None:
    """The package's log ("rnnt" and below) to stderr, and to exp_dir/train.log on the main rank. Its own
    handlers on the package's logger, not the root's: a program that embeds a Trainer (or pytest) keeps its
    logging, and the records still reach it; a second Trainer closes the first one's train.log."""
    close_logging()
    package = logging.getLogger("rnnt")
    _handlers[:] = [logging.StreamHandler(sys.stderr)]
    if world.main:
        _handlers.append(logging.FileHandler(os.path.join(exp_dir, "train.log")))
    formatter = logging.Formatter(f"%(asctime)s [rank {world.rank}] %(message)s")
    for handler in _handlers:
        handler.setFormatter(formatter)
        package.addHandler(handler)
    package.setLevel(logging.INFO if world.main else logging.WARNING)


def close_logging() -> None:
    """Takes setup_logging's handlers off the package's logger (and closes train.log)."""
    package = logging.getLogger("rnnt")
    for handler in _handlers:
        package.removeHandler(handler)
        handler.close()
    _handlers.clear()


class Progress:
    def __init__(self, exp_dir: str, world: World, log_every: int, epochs: int):
        self.world, self.log_every, self.epochs = world, log_every, epochs
        self.writer = None
        if world.main:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(os.path.join(exp_dir, "tensorboard"))
        self.bar, self.started, self.losses = None, 0.0, []
        self.epoch_batches = None  # batches in the last whole epoch: how long one takes
        self.batches = self.first_batch = 0

    def start_epoch(self, epoch: int, batch: int) -> None:
        self.bar = progress(desc=f"epoch {epoch + 1}", unit="batch", initial=batch, disable=not self.world.main)
        self.started, self.losses = time.time(), []
        self.epoch, self.batches, self.first_batch = epoch, batch, batch

    def batch_done(self, loss: float | None) -> None:
        """One batch trained; loss None for a skipped batch or one that only kept a rank waiting."""
        self.bar.update(1)
        self.batches += 1
        if loss is not None and self.writer:  # the main rank reports them (elsewhere they piled up all epoch)
            self.losses.append(loss)

    def pace(self) -> str:
        """Batches a second in this epoch, and the time left in it and in the training (from the last whole
        epoch's batches; unknown in the first)."""
        elapsed = time.time() - self.started
        rate = (self.batches - self.first_batch) / max(elapsed, 1e-9)
        text = f"{rate:.2f} batches/s, {elapsed:.0f} s into epoch {self.epoch + 1}"
        if self.epoch_batches and rate > 0:
            in_epoch = max(self.epoch_batches - self.batches, 0)
            left = (in_epoch + self.epoch_batches * max(self.epochs - self.epoch - 1, 0)) / rate
            text += f", {in_epoch / rate:.0f} s left in the epoch, {left / 60:.1f} min left in the training"
        return text

    def step_done(self, epoch: int, step: int, lr: float, grad_norm: float) -> None:
        """An optimiser step taken: every log_every steps, the mean loss of the batches since the last report.
        Epochs are counted from 0 here and named from 1 in the log, as epoch-N.pt and the validation lines."""
        if not self.writer or step % self.log_every or not self.losses:
            return
        loss = sum(self.losses) / len(self.losses)
        self.writer.add_scalar("train/loss", loss, step)
        self.writer.add_scalar("train/lr", lr, step)
        self.writer.add_scalar("train/grad_norm", grad_norm, step)
        self.bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}")
        log.info("epoch %d step %d: loss %.4f lr %.3e grad-norm %.2f (%s)", epoch + 1, step, loss, lr, grad_norm,
                 self.pace())
        self.losses = []

    def end_epoch(self) -> None:
        self.bar.close()
        if self.first_batch == 0 and self.batches:  # a whole epoch (not one resumed midway)
            self.epoch_batches = self.batches

    def validated(self, epoch: int, step: int, result: dict, ema: bool, within: bool = False) -> None:
        """Logs a validation at an epoch's end (epoch: the epochs done), or within epoch + 1 (train.valid_every)."""
        for name, value in result.items():
            if name not in ("utterances", "dev_set"):
                self.writer.add_scalar(f"valid/{name}", value, step)
        left_out = result.get("skipped_out_of_memory")
        where = f"epoch {epoch + 1} step {step}" if within else f"epoch {epoch}"
        log.info("%s validation%s: loss %.4f%s over %d utterances%s", where, " (EMA)" if ema else "",
                 result["loss"], f", WER {result['wer']:.2f}%" if "wer" in result else "", result["utterances"],
                 f" ({left_out} left out: out of memory)" if left_out else "")

    def close(self) -> None:
        if self.writer:
            self.writer.close()
