"""What training reports as it goes: the log (stderr, and train.log on the main rank), TensorBoard
scalars, and a progress bar per epoch. Only the main rank writes TensorBoard and the bars."""

from __future__ import annotations

import logging
import os
import sys
import time

from tqdm import tqdm

from rnnt.training.distributed import World

log = logging.getLogger("rnnt.train")


def setup_logging(exp_dir: str, world: World) -> None:
    handlers = [logging.StreamHandler(sys.stderr)]
    if world.main:
        handlers.append(logging.FileHandler(os.path.join(exp_dir, "train.log")))
    logging.basicConfig(level=logging.INFO if world.main else logging.WARNING, handlers=handlers, force=True,
                        format=f"%(asctime)s [rank {world.rank}] %(message)s")


class Progress:
    def __init__(self, exp_dir: str, world: World, log_every: int):
        self.world, self.log_every = world, log_every
        self.writer = None
        if world.main:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(os.path.join(exp_dir, "tensorboard"))
        self.bar, self.started, self.losses = None, 0.0, []

    def start_epoch(self, epoch: int, batch: int) -> None:
        self.bar = tqdm(desc=f"epoch {epoch}", unit="batch", initial=batch, disable=not self.world.main,
                        file=sys.stderr, dynamic_ncols=True)
        self.started, self.losses = time.time(), []

    def batch_done(self, loss: float | None) -> None:
        """One batch trained; loss None for a skipped batch or one that only kept a rank waiting."""
        self.bar.update(1)
        if loss is not None:
            self.losses.append(loss)

    def step_done(self, epoch: int, step: int, lr: float, grad_norm: float) -> None:
        """An optimiser step taken: every log_every steps, the mean loss of the batches since the last report."""
        if not self.writer or step % self.log_every or not self.losses:
            return
        loss = sum(self.losses) / len(self.losses)
        self.writer.add_scalar("train/loss", loss, step)
        self.writer.add_scalar("train/lr", lr, step)
        self.writer.add_scalar("train/grad_norm", grad_norm, step)
        self.bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}")
        log.info("epoch %d step %d: loss %.4f lr %.3e grad-norm %.2f (%.1f s)", epoch, step, loss, lr, grad_norm,
                 time.time() - self.started)
        self.losses = []

    def end_epoch(self) -> None:
        self.bar.close()

    def validated(self, epoch: int, step: int, result: dict, ema: bool) -> None:
        for name, value in result.items():
            if name != "utterances":
                self.writer.add_scalar(f"valid/{name}", value, step)
        log.info("epoch %d validation%s: loss %.4f%s over %d utterances", epoch, " (EMA)" if ema else "",
                 result["loss"], f", WER {result['wer']:.2f}%" if "wer" in result else "", result["utterances"])

    def close(self) -> None:
        if self.writer:
            self.writer.close()
