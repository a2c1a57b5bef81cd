"""The training loop: one process, or one per device under torchrun (DDP).

Every optimiser step may end in a checkpoint that holds everything needed to continue exactly:
model, EMA, optimiser, scheduler, scaler, the data position (epoch, batches consumed) and every
rank's RNG state. A resumed run therefore produces the same parameters as an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import filecmp
import logging
import math
import os
import shutil
import signal
import sys
import time

import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from rnnt.data.loader import LoaderPosition, make_loader
from rnnt.data.pipeline import Pipeline
from rnnt.data.tokenizer import Tokenizer
from rnnt.model.transducer import Transducer
from rnnt.training import checkpoint
from rnnt.training.distributed import World, all_gather_objects, cleanup, every_rank, scale_gradients, setup
from rnnt.training.ema import EMA
from rnnt.training.experiment import Experiment, build_optimizer, save_experiment
from rnnt.training.validation import validate

log = logging.getLogger("rnnt.train")

STOPPED_BY_SIGNAL = 128 + signal.SIGTERM  # the exit status of a run stopped early: the shell's for SIGTERM


class StopTraining(RuntimeError):
    pass


def setup_logging(exp_dir: str, world: World) -> None:
    handlers = [logging.StreamHandler(sys.stderr)]
    if world.main:
        handlers.append(logging.FileHandler(os.path.join(exp_dir, "train.log")))
    logging.basicConfig(level=logging.INFO if world.main else logging.WARNING, handlers=handlers, force=True,
                        format=f"%(asctime)s [rank {world.rank}] %(message)s")


def is_out_of_memory(error: BaseException) -> bool:
    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error)


class Trainer:
    def __init__(self, experiment: Experiment, exp_dir: str, log_keys: bool = False):
        self.experiment, self.exp_dir = experiment, exp_dir
        self.world = setup(experiment.train.device)
        os.makedirs(exp_dir, exist_ok=True)
        setup_logging(exp_dir, self.world)
        torch.manual_seed(experiment.train.seed)
        self.tokenizer = Tokenizer(experiment.paths.lang_dir)
        self.model = Transducer(experiment.model, self.tokenizer.vocab_size).to(self.world.device)
        self.ddp = DistributedDataParallel(self.model) if self.world.distributed else self.model
        train_config = experiment.train
        self.optimizer, self.scheduler = build_optimizer(train_config, self.model.parameters())
        # Loss scaling for float16 only: bfloat16 has float32's exponent range, its gradients do not underflow.
        self.scaler = torch.amp.GradScaler(enabled=train_config.precision == "fp16" and self.world.device.type == "cuda")
        self.autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(train_config.precision)
        self.ema = EMA(self.model, train_config.ema_decay) if train_config.ema_decay > 0 else None
        self.train_pipeline = Pipeline(experiment.paths.train_list, experiment.data, self.tokenizer, train=True)
        self.loader = make_loader(self.train_pipeline, self.world.rank, self.world.size)
        self.valid_pipeline = (Pipeline(experiment.paths.valid_list, experiment.data, self.tokenizer, train=False)
                               if experiment.paths.valid_list else None)
        self.epoch = self.batch = self.step = 0
        self.position = LoaderPosition(experiment.data.num_workers)  # which worker gave how many batches
        self.bad_in_row = 0  # batches skipped since the last optimiser step
        self.kept = 0  # micro-batches in the current accumulation group whose gradient was kept
        self.synced = False  # under DDP: the group's gradient was all-reduced (its last backward ran in sync)
        self.skipped = {"non-finite loss": 0, "non-finite gradient": 0, "out of memory": 0}
        self.signal_received = False  # this rank got SIGTERM
        self.stopping = False  # some rank got SIGTERM: all stop at the next optimiser step
        self.valid_result: dict = {}
        self.keys_file = open(os.path.join(exp_dir, f"keys-rank{self.world.rank}.txt"), "a") if log_keys else None
        self.writer = None
        if self.world.main:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(os.path.join(exp_dir, "tensorboard"))
        parameters = sum(p.numel() for p in self.model.parameters())
        log.info("model: %.2f M parameters, vocabulary %d, loss %s; world size %d on %s", parameters / 1e6,
                 self.tokenizer.vocab_size, experiment.model.loss.type, self.world.size, self.world.device)

    def adopt_units(self) -> None:
        """Copies the lang dir into <exp-dir>/lang and saves config.yaml pointing there: the experiment
        keeps the units it was trained with when data/lang is rebuilt. A resumed run must use the same."""
        source, kept = self.experiment.paths.lang_dir, os.path.join(os.path.abspath(self.exp_dir), "lang")
        copy = os.path.abspath(source) != kept
        if copy and os.path.isdir(kept):
            # the inventory, not the sentencepiece model's bytes (they hold the path it was trained from)
            _, mismatch, errors = filecmp.cmpfiles(source, kept, ["units.txt", "units.json"], shallow=False)
            if mismatch or errors:
                raise StopTraining(f"{self.exp_dir} was trained with the units in {kept}, which differ from "
                                   f"{source} ({', '.join(mismatch + errors)}); use those units or a new --exp-dir")
        if self.world.distributed:
            torch.distributed.barrier()  # every rank has compared before the main one copies
        if self.world.main:
            if copy:
                shutil.copytree(source, kept, dirs_exist_ok=True)
            paths = dataclasses.replace(self.experiment.paths, lang_dir=kept)
            experiment = dataclasses.replace(self.experiment, paths=paths)
            save_experiment(experiment, os.path.join(self.exp_dir, "config.yaml"))

    # --- checkpoints ------------------------------------------------------------------------------------
    def state(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "ema": self.ema.state_dict() if self.ema else None,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "rng": all_gather_objects(self.world, checkpoint.rng_state()),
            "meta": {"step": self.step, "epoch": self.epoch, "batch": self.batch, "bad_in_row": self.bad_in_row,
                     "loader_position": self.position.state_dict(),
                     **{f"skipped {k}": v for k, v in self.skipped.items()}, **self.valid_result},
        }

    def save(self, name: str) -> None:
        state = self.state()  # every rank takes part: the RNG states are gathered
        if self.world.main:
            checkpoint.save(os.path.join(self.exp_dir, name), state)
            checkpoint.prune_step_checkpoints(self.exp_dir, self.experiment.train.keep_checkpoints)
            log.info("saved %s (epoch %d, batch %d, step %d)", name, self.epoch, self.batch, self.step)

    def resume(self) -> bool:
        path = checkpoint.latest(self.exp_dir)
        if path is None:
            return False
        state = checkpoint.load(path)
        self.model.load_state_dict(state["model"])
        if self.ema and state["ema"] is not None:
            self.ema.load_state_dict(state["ema"])
        elif self.ema:  # EMA switched on for the resumed run: it starts from the resumed weights
            self.ema = EMA(self.model, self.experiment.train.ema_decay)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        meta = state["meta"]
        self.step, self.epoch, self.batch, self.bad_in_row = meta["step"], meta["epoch"], meta["batch"], meta["bad_in_row"]
        workers = max(self.experiment.data.num_workers, 1)
        if self.batch and len(meta.get("loader_position", {}).get("counts", ())) != workers:
            raise StopTraining(f"{path} stopped inside epoch {self.epoch} with another data.num_workers (or before "
                               "positions were recorded); resume with the same num_workers, or from an epoch checkpoint")
        if self.batch:
            self.position = LoaderPosition.from_state(meta["loader_position"])
        self.skipped = {k: meta.get(f"skipped {k}", 0) for k in self.skipped}
        rng = state["rng"]
        checkpoint.set_rng_state(rng[self.world.rank] if self.world.rank < len(rng) else rng[0])
        log.info("resumed from %s: epoch %d, batch %d, step %d", path, self.epoch, self.batch, self.step)
        return True

    # --- one step -------------------------------------------------------------------------------------
    def forward_backward(self, batch: dict, sync: bool, weight: float = 1.0) -> float | None:
        """Loss of one batch with its gradient (times weight: 0 for a rank waiting for the others at an
        epoch's end) accumulated; None (nothing accumulated) if it was skipped."""
        device = self.world.device
        loss, usable, out_of_memory = None, False, False
        try:
            feats, feat_lens = batch["feats"].to(device), batch["feat_lens"].to(device)
            tokens, token_lens = batch["tokens"].to(device), batch["token_lens"].to(device)
            # DDP decides in the forward pass whether the backward pass all-reduces the gradients.
            with self.ddp.no_sync() if not sync else contextlib.nullcontext(), \
                    torch.autocast(device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None):
                loss = self.ddp(feats, feat_lens, tokens, token_lens)["loss"].float()
            usable = every_rank(self.world, bool(torch.isfinite(loss)))[0]  # every rank skips together
            if usable:
                self.scaler.scale(loss * (weight / self.experiment.train.accum_steps)).backward()
        except RuntimeError as error:
            if not is_out_of_memory(error):
                raise
            log.warning("out of memory on a batch of feats %s, tokens %s", tuple(batch["feats"].shape),
                        tuple(batch["tokens"].shape))
            if self.world.distributed:  # DDP's collectives are out of step already: no skipping together
                raise
            out_of_memory = True
        if out_of_memory:  # outside the handler: the traceback no longer holds the activations
            self.skipped["out of memory"] += 1
            if loss is not None:  # in the backward pass: the group's gradient is incomplete, dropped with it
                loss = None
                self.optimizer.zero_grad(set_to_none=True)
                self.kept, self.synced = 0, False
            if device.type == "cuda":
                torch.cuda.empty_cache()
        elif not usable:
            if torch.isfinite(loss):
                log.warning("batch skipped with the other ranks: one of them could not use its batch")
            else:
                self.skipped["non-finite loss"] += 1
                log.warning("non-finite loss (%s) on %s: batch skipped", float(loss.detach()), batch["keys"][:3])
        else:
            self.kept += 1
            self.synced = self.synced or sync
            return float(loss.detach())
        self.count_bad_batch()
        return None

    def count_bad_batch(self) -> None:
        self.bad_in_row += 1
        if self.bad_in_row >= self.experiment.train.max_bad_steps:
            raise StopTraining(f"{self.bad_in_row} batches in a row had a non-finite loss or gradient or ran out "
                               "of memory; lower the learning rate, check the data, or raise train.max_bad_steps")

    def optimizer_step(self) -> float | None:
        """Updates the weights with the gradient of the group's kept micro-batches, averaged over them (and
        over the ranks where DDP did not: a short last group of an epoch, or one whose last batch was
        skipped, ran all its backward passes under no_sync). Returns the gradient norm; None when no step
        was taken (nothing kept, or a non-finite gradient)."""
        kept, synced, self.kept, self.synced = self.kept, self.synced, 0, False
        if kept == 0:
            self.optimizer.zero_grad(set_to_none=True)
            return None
        scale, unsynced = self.experiment.train.accum_steps / kept, self.world.distributed and not synced
        if unsynced or scale != 1:
            scale_gradients(self.model.parameters(), scale, self.world if unsynced else None)
        self.scaler.unscale_(self.optimizer)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.experiment.train.grad_clip))
        if not math.isfinite(grad_norm) and not self.scaler.is_enabled():  # the scaler skips such steps itself
            self.optimizer.zero_grad(set_to_none=True)
            self.skipped["non-finite gradient"] += 1
            log.warning("non-finite gradient norm at step %d: update skipped", self.step)
            self.count_bad_batch()
            return None
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.ema:
            self.ema.update(self.model)
        self.step += 1
        self.bad_in_row = 0
        return grad_norm

    # --- the loop -------------------------------------------------------------------------------------
    def run(self, resume: bool) -> int:
        """0 when training is complete; STOPPED_BY_SIGNAL after SIGTERM (a checkpoint holds the position); 1 on failure."""
        train_config = self.experiment.train
        previous = signal.signal(signal.SIGTERM, self.request_stop)
        ended_together = False
        try:
            existing = None if resume else checkpoint.latest(self.exp_dir)
            if existing:
                raise StopTraining(f"{self.exp_dir} already holds checkpoints (newest {existing}); "
                                   "pass --resume to continue that run, or give a new --exp-dir")
            self.adopt_units()
            if resume:
                self.resume()
            while self.epoch < train_config.epochs and not self.finished():
                if not self.train_epoch():
                    break
                self.end_epoch()
            if self.batch:  # stopped inside an epoch: keep the exact position
                self.save(checkpoint.name("step", self.step))
            self.check_ranks_in_sync()
            ended_together = True
            summary = f"{self.step} steps, {self.epoch} epochs; skipped " + ", ".join(
                f"{n} {why}" for why, n in self.skipped.items())
            if self.epoch < train_config.epochs and not self.finished():
                log.info("stopped on SIGTERM at step %d (%s); rerun with --resume to continue", self.step, summary)
                return STOPPED_BY_SIGNAL
            log.info("training done: %s", summary)
            return 0
        except StopTraining as error:
            log.error("%s", error)
            return 1
        finally:
            signal.signal(signal.SIGTERM, previous)
            if self.writer:
                self.writer.close()
            self.ddp = self.model  # DDP's reducer holds the process group
            cleanup(self.world, together=ended_together)

    def request_stop(self, signum, frame) -> None:
        self.signal_received = True

    def finished(self) -> bool:
        return bool(self.experiment.train.max_steps) and self.step >= self.experiment.train.max_steps

    def train_epoch(self) -> bool:
        """Trains from the current position to the end of the epoch; False if it stopped inside it, at an
        optimiser step (SIGTERM, or train.max_steps reached)."""
        train_config = self.experiment.train
        if self.batch == 0:
            self.position = LoaderPosition(self.experiment.data.num_workers)
        self.loader.dataset.set_epoch(self.epoch, self.position if self.batch else None)
        batches = iter(self.loader)
        bar = tqdm(desc=f"epoch {self.epoch}", unit="batch", initial=self.batch, disable=not self.world.main,
                   file=sys.stderr, dynamic_ncols=True)
        started, losses, last, padding = time.time(), [], None, 0
        while True:
            batch = next(batches, None)
            # The epoch goes on while any rank has a batch; one that has run out repeats its last batch
            # with weight 0 (if a rank has none to repeat, all stop, as none can wait for it).
            every_rank_is_out, every_rank_can_go_on, no_rank_stops = every_rank(
                self.world, batch is None, batch is not None or last is not None, not self.signal_received)
            self.stopping = self.stopping or not no_rank_stops
            if every_rank_is_out or not every_rank_can_go_on:
                break
            if self.batch % train_config.accum_steps == 0 and (self.stopping or self.finished()):
                bar.close()
                return False
            weight = 1.0 if batch is not None else 0.0
            if batch is None:
                batch, padding = last, padding + 1
            elif self.keys_file:
                self.keys_file.write("".join(f"{self.epoch} {k}\n" for k in batch["keys"]))
                self.keys_file.flush()
            group_ends = (self.batch + 1) % train_config.accum_steps == 0
            loss = self.forward_backward(batch, sync=group_ends or not self.world.distributed,
                                         weight=weight)
            if weight:
                self.position.delivered(batch["role"])
                last = batch
            self.batch += 1
            bar.update(1)
            if loss is not None and weight:
                losses.append(loss)
            if self.batch % train_config.accum_steps:
                continue
            grad_norm = self.optimizer_step()
            if grad_norm is None:
                continue
            if self.writer and self.step % train_config.log_every == 0 and losses:
                lr = self.scheduler.get_last_lr()[0]
                self.writer.add_scalar("train/loss", sum(losses) / len(losses), self.step)
                self.writer.add_scalar("train/lr", lr, self.step)
                self.writer.add_scalar("train/grad_norm", grad_norm, self.step)
                bar.set_postfix(loss=f"{sum(losses) / len(losses):.3f}", lr=f"{lr:.2e}")
                log.info("epoch %d step %d: loss %.4f lr %.3e grad-norm %.2f (%.1f s)", self.epoch, self.step,
                         sum(losses) / len(losses), lr, grad_norm, time.time() - started)
                losses = []
            if train_config.checkpoint_every and self.step % train_config.checkpoint_every == 0:
                self.save(checkpoint.name("step", self.step))
        bar.close()
        if padding:
            log.info("rank %d: %d batches of weight 0 while other ranks finished epoch %d", self.world.rank, padding,
                     self.epoch)
        if self.batch % train_config.accum_steps:  # the epoch's last group is short: its gradient is not carried over
            self.optimizer_step()
        self.batch = 0
        self.epoch += 1
        return True

    def end_epoch(self) -> None:
        """Validates (on the main rank, with the EMA weights if kept), then saves epoch-N.pt with the result."""
        self.valid_result = {}
        if self.valid_pipeline is not None and self.world.main:
            with self.ema.applied(self.model) if self.ema else contextlib.nullcontext():
                result = validate(self.model, self.valid_pipeline.batches(), self.tokenizer, self.world.device,
                                  self.experiment.train.valid_wer)
            for name, value in result.items():
                if name != "utterances":
                    self.writer.add_scalar(f"valid/{name}", value, self.step)
            log.info("epoch %d validation%s: loss %.4f%s over %d utterances", self.epoch, " (EMA)" if self.ema else "",
                     result["loss"], f", WER {result['wer']:.2f}%" if "wer" in result else "", result["utterances"])
            self.valid_result = {f"valid_{k}": v for k, v in result.items()}
        self.save(checkpoint.name("epoch", self.epoch))

    def check_ranks_in_sync(self) -> None:
        """Under DDP every rank must end with the same parameters; checked, not assumed."""
        if not self.world.distributed:
            return
        digest = float(sum(p.detach().double().sum() for p in self.model.parameters()))
        digests = all_gather_objects(self.world, digest)
        if any(not math.isclose(d, digests[0], rel_tol=0, abs_tol=0) for d in digests):
            log.error("ranks ended with different parameters: %s", digests)
        else:
            log.info("all %d ranks hold identical parameters (checksum %.10g)", self.world.size, digests[0])
