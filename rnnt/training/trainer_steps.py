"""The trainer's steps: one batch's forward and backward pass (the batches every rank skips together, the
out-of-memory ones) and the optimiser step of an accumulation group. A part of rnnt.training.trainer.Trainer,
which inherits it."""

from __future__ import annotations

import contextlib
import functools
import logging
import math

import torch

from rnnt.training.accumulation import is_out_of_memory
from rnnt.training.distributed import every_rank, scale_gradients
from rnnt.training.stop import StopTraining

log = logging.getLogger("rnnt.train")


def running_statistics(model: torch.nn.Module) -> list[torch.Tensor]:
    """Each normalisation's running statistics (BatchNorm's mean, variance and count), which a forward pass in
    training updates before its loss is known."""
    return [buffer for module in model.modules()
            if isinstance(module, torch.nn.modules.batchnorm._NormBase) and module.track_running_stats
            for buffer in (module.running_mean, module.running_var, module.num_batches_tracked) if buffer is not None]


class Steps:
    """Methods of the Trainer; they read its model, ddp, optimizer, scheduler, scaler, ema, world, group,
    bad_batches, step and experiment."""

    @functools.cached_property
    def norm_statistics(self) -> list[torch.Tensor]:
        """The model's running_statistics, found once (the same tensors, updated in place, for the whole run)."""
        return running_statistics(self.model)

    def forward_backward(self, batch: dict, sync: bool, weight: float = 1.0, ranks_with_batch: int = 1) -> float | None:
        """Loss of one batch with its gradient (times weight: 0 for a rank waiting for the others at an
        epoch's end) added to the group, which counts the ranks with a batch of weight 1 (the same on every
        rank: batches_of_every_rank's); None (nothing added) if it was skipped: by every rank together where one
        had a non-finite loss or ran out of memory in the forward pass (before any collective of DDP's)."""
        value, out_of_memory = math.nan, None
        kept = [buffer.clone() for buffer in self.norm_statistics]  # a skipped batch's go (an fp16 overflow's NaNs
        try:
            loss = self.batch_loss(batch, sync)
            value = float(loss.detach())  # the step's one read of the device before its gradient norm's
        except RuntimeError as error:
            out_of_memory = self.out_of_memory(error, batch, "forward")
        # every rank skips together, and counts why
        usable, memory_sufficed = every_rank(self.world, math.isfinite(value), out_of_memory is None)
        if usable:
            try:
                self.scaler.scale(loss * (weight / self.experiment.train.accum_steps)).backward()
            except RuntimeError as error:
                out_of_memory = self.out_of_memory(error, batch, "backward")
        loss = None  # outside the handlers: nothing holds the activations any more
        if out_of_memory or not usable:  # (a backward pass's too: its batch is skipped as well)
            for buffer, before in zip(self.norm_statistics, kept):  # stayed for good)
                buffer.copy_(before)
        if out_of_memory:
            self.recover_from_out_of_memory(in_backward=out_of_memory == "backward")
        elif not usable:
            self.skip_unusable(value, batch["keys"], memory_sufficed)
        else:
            self.group.add(synced=sync, ranks=ranks_with_batch)
        return None if out_of_memory or not usable else value

    def out_of_memory(self, error: RuntimeError, batch: dict, where: str) -> str:
        """where, for an out-of-memory error (logged); any other error is raised again, and so is one in a backward
        pass under DDP, whose all-reduces are out of step then (a resume meets the same batch again)."""
        if not is_out_of_memory(error):
            raise error
        shapes = f"feats {tuple(batch['feats'].shape)}, tokens {tuple(batch['tokens'].shape)}"
        log.warning("out of memory in the %s pass of a batch of %s", where, shapes)
        if where == "backward" and self.world.distributed:
            raise StopTraining(f"out of memory in the backward pass of a batch of {shapes}: under DDP it cannot be "
                               "skipped (the ranks' all-reduces are out of step), and a resume meets it again; "
                               "lower data.batch's size or data.filter's longest, and train anew") from error
        return where

    def batch_loss(self, batch: dict, sync: bool) -> torch.Tensor:
        device = self.world.device
        inputs = [batch[name].to(device) for name in ("feats", "feat_lens", "tokens", "token_lens")]
        # DDP decides in the forward pass whether the backward pass all-reduces the gradients.
        with self.ddp.no_sync() if not sync else contextlib.nullcontext(), \
                torch.autocast(device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None):
            return self.ddp(*inputs, step=self.step,  # the lengths as the host has them spare reading the device's
                            host_lengths=(batch["feat_lens"].tolist(), batch["token_lens"].tolist()))["loss"].float()

    def recover_from_out_of_memory(self, in_backward: bool) -> None:
        if in_backward:  # part of the batch's gradient is in .grad: the group's sum is broken, dropped with it
            self.optimizer.zero_grad(set_to_none=True)
            self.group.drop()
        if self.world.device.type == "cuda":
            torch.cuda.empty_cache()
        self.bad_batches.skip("out of memory")

    def skip_unusable(self, loss: float, keys: list[str], memory_sufficed: bool) -> None:
        """A batch every rank skips for a non-finite loss on one, or one out of memory: counted on each, by that
        reason (rank 0's counts are saved)."""
        reason = "non-finite loss" if memory_sufficed else "out of memory"
        if math.isfinite(loss):
            log.warning("batch skipped with the other ranks: %s on one of them",
                        "a non-finite loss" if memory_sufficed else "out of memory")
        else:
            log.warning("non-finite loss (%s) on %s: batch skipped", loss, keys[:3])
        self.bad_batches.skip(reason)

    def optimizer_step(self) -> float | None:
        """Updates the weights with the gradient of the group's kept micro-batches on every rank, averaged
        over them by their weights: a rank's batch of weight 0 while it waits at an epoch's end counts for
        nothing (DDP's average over the ranks counted it as a batch, so the step's gradient was divided by the
        world's size there). Where DDP did not all-reduce (a short last group of an epoch, or one whose last
        batch was skipped, ran all its backward passes under no_sync), the sum over the ranks is taken here.
        Returns the gradient norm; None when no step was taken (nothing kept, or a non-finite gradient)."""
        group = self.group.take()
        if group.kept == 0 or group.ranks == 0:  # every rank skipped the same batches, or ran places held (a global
            self.optimizer.zero_grad(set_to_none=True)  # batch its filters emptied) alone: the same on all
            return None
        # each rank's gradient is its batches' weighted sum over accum_steps, DDP's average over the world: the
        # group's count is of the batches of weight 1 of every rank (at least one a kept batch: some rank had one)
        scale = self.experiment.train.accum_steps * self.world.size / group.ranks
        unsynced = self.world.distributed and not group.synced
        if unsynced or scale != 1:
            scale_gradients(self.model.parameters(), scale, self.world if unsynced else None)
        self.scaler.unscale_(self.optimizer)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.experiment.train.grad_clip))
        if not math.isfinite(grad_norm):  # no update, and no step counted: the schedule and EMA wait
            self.optimizer.zero_grad(set_to_none=True)
            if self.scaler.is_enabled() and self.scaler.get_scale() > 1:
                # float16's loss scale probing from 2^16 down: the first steps overflow by design (about 7 at
                # initial gradients near 80), which train.max_bad_steps is not about
                log.info("float16 overflow at loss scale %g, step %d: update skipped, the scale halved",
                         self.scaler.get_scale(), self.step)
                self.scaler.update()
                return None
            if self.scaler.is_enabled():  # the scale is lowered (unscale_ recorded the overflow)
                self.scaler.update()
            log.warning("non-finite gradient norm at step %d: update skipped", self.step)
            self.bad_batches.skip("non-finite gradient")
            return None
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.step_lr = self.optimizer.param_groups[0]["lr"]  # the rate of this update, reported with it
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.ema:
            self.ema.update(self.model)
        self.step += 1
        self.bad_batches.step_taken()
        return grad_norm
