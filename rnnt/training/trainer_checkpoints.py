"""The trainer's checkpoints: what one holds (everything an exact resume needs: model, EMA, optimiser,
scheduler, scaler, the data position and every rank's RNG state), saving, resuming, and a fresh start
from another experiment's weights. A part of rnnt.training.trainer.Trainer, which inherits it."""

from __future__ import annotations

import logging
import os

from rnnt.data.loader import LoaderPosition
from rnnt.training import checkpoint
from rnnt.training.config_change import units_digest
from rnnt.training.distributed import all_gather_objects
from rnnt.training.ema import EMA
from rnnt.training.init_from import initialise_from
from rnnt.training.stop import StopTraining

log = logging.getLogger("rnnt.train")


class Checkpointing:
    """Methods of the Trainer; they read its model, ema, optimizer, scheduler, scaler, world, position,
    bad_batches, step, epoch, batch, train_data and valid_result."""

    def state(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "ema": self.ema.state_dict() if self.ema else None,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "rng": all_gather_objects(self.world, checkpoint.rng_state()),
            "meta": {"step": self.step, "epoch": self.epoch, "batch": self.batch, "train_data": self.train_data,
                     "units": units_digest(self.experiment.paths.lang_dir),
                     "loader_positions": all_gather_objects(self.world, self.position.state_dict()),
                     **self.bad_batches.meta(), **self.valid_result},
        }

    def save_position(self) -> str:
        """Saves step-N.pt where the run stopped inside an epoch (its exact position: SIGTERM, train.max_steps); the
        words that say so in the run's summary (those batches are in no epoch checkpoint: not averaged, nor decoded
        by a recipe)."""
        if not self.batch:
            return ""
        self.save(checkpoint.name("step", self.step))
        return (f" and {self.batch} batches of epoch {self.epoch + 1}, kept in step-{self.step}.pt alone (epoch "
                "checkpoints, which averaging and the recipes decode, hold none of them)")

    def save(self, name: str) -> None:
        state = self.state()  # every rank takes part: the RNG states are gathered
        if self.world.main:
            checkpoint.save(os.path.join(self.exp_dir, name), state)
            checkpoint.prune_step_checkpoints(self.exp_dir, self.experiment.train.keep_checkpoints)
            log.info("saved %s (after %d epochs and %d batches, step %d)", name, self.epoch, self.batch, self.step)
            if name == checkpoint.name("epoch", self.epoch):  # a new epoch file: the one before may be slimmed
                checkpoint.slim_old_epochs(self.exp_dir, self.experiment.train.keep_whole_epochs)

    def resume(self) -> bool:
        path = checkpoint.latest(self.exp_dir)
        if path is None:
            return False
        state = checkpoint.load(path)
        if state["meta"].get("slimmed"):
            raise StopTraining(f"{path} holds the weights alone (train.keep_whole_epochs slimmed it): it cannot be "
                               "resumed from; start a new experiment from it with train.init_from")
        self.model.load_state_dict(state["model"])
        if self.ema and state["ema"] is not None:
            self.ema.load_state_dict(state["ema"])
        elif self.ema:  # EMA switched on for the resumed run: it starts from the resumed weights
            self.ema = EMA(self.model, self.experiment.train.ema_decay)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        meta = state["meta"]
        self.step, self.epoch, self.batch = meta["step"], meta["epoch"], meta["batch"]
        self.bad_batches.load_meta(meta)
        rng = state["rng"]
        if self.batch:
            self.position = self.position_inside_epoch(path, meta, len(rng))
        checkpoint.set_rng_state(rng[self.world.rank] if self.world.rank < len(rng) else rng[0])
        log.info("resumed from %s: after %d epochs and %d batches, step %d", path, self.epoch, self.batch, self.step)
        return True

    def position_inside_epoch(self, path: str, meta: dict, ranks: int) -> LoaderPosition:
        """This rank's data position in a checkpoint saved inside an epoch: each rank reads its own part of the
        data, so the part, the position in it and the RNG states hold for the same ranks and workers only."""
        if ranks != self.world.size:
            raise StopTraining(f"{path} stopped inside epoch {self.epoch + 1} with {ranks} ranks, this run has "
                               f"{self.world.size}; resume with {ranks}, or from an epoch checkpoint")
        positions = meta.get("loader_positions") or [meta.get("loader_position", {})]  # one rank's, before
        workers = max(self.experiment.data.num_workers, 1)
        if len(positions) != self.world.size or len(positions[self.world.rank].get("counts", ())) != workers:
            raise StopTraining(f"{path} stopped inside epoch {self.epoch + 1} with another data.num_workers (or before "
                               "every rank's position was recorded); resume with the same num_workers, or from an "
                               "epoch checkpoint")
        return LoaderPosition.from_state(positions[self.world.rank])

    def start_from(self, path: str) -> None:
        """A fresh run starts from another experiment's weights (every rank loads the same file)."""
        try:
            initialise_from(self.model, path, self.tokenizer.units, self.tokenizer.kind)
        except (FileNotFoundError, ValueError) as error:
            raise StopTraining(str(error)) from error
        if self.ema:
            self.ema = EMA(self.model, self.experiment.train.ema_decay)
