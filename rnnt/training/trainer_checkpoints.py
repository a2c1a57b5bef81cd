"""The trainer's checkpoints: what one holds (everything an exact resume needs: model, EMA, optimiser,
scheduler, scaler, the data position and every rank's RNG state), saving, resuming, and a fresh start
from another experiment's weights. A part of rnnt.training.trainer.Trainer, which inherits it."""

from __future__ import annotations

import logging
import os

import torch

from rnnt.data.loader import LoaderPosition
from rnnt.training import checkpoint
from rnnt.training.config_change import units_digest
from rnnt.training.trained_under import inference_settings
from rnnt.training.distributed import all_gather_objects, rank_seed
from rnnt.training.ema import EMA
from rnnt.training.init_from import initialise_from
from rnnt.training.keys_log import cut_other_ranks
from rnnt.training.stop import StopTraining

SET_ASIDE = ".set-aside"  # the suffix of a step checkpoint a resume with other ranks or workers could not take

log = logging.getLogger("rnnt.train")


def saved_positions(meta: dict) -> list[dict]:
    """Every rank's data position in a checkpoint's meta (one 'loader_position' before they were kept per rank)."""
    return meta.get("loader_positions") or ([meta["loader_position"]] if "loader_position" in meta else [])


class Checkpointing:
    """Methods of the Trainer; they read its model, ema, optimizer, scheduler, scaler, world, position,
    bad_batches, patience, step, epoch, batch, train_data, valid_result and keys_log."""

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
                     "inference": inference_settings(self.experiment),
                     "loader_positions": all_gather_objects(self.world, self.position.state_dict()),
                     "keys_logged": all_gather_objects(self.world, self.keys_log.offset() if self.keys_log else None),
                     **self.bad_batches.meta(), **self.valid_result, **self.patience.meta()},
        }

    def save_position(self) -> str:
        """Saves step-N.pt where the run stopped inside an epoch (its exact position: SIGTERM, train.max_steps); the
        words that say so in the run's summary (those batches are in no epoch checkpoint: not averaged, nor decoded
        by a recipe)."""
        if not self.batch:
            return ""
        name = checkpoint.name("step", self.step)
        if self.saved_as != (name, self.epoch, self.batch):  # not saved there already (checkpoint_every's step)
            self.save(name)
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
        self.saved_as = name, self.epoch, self.batch

    def resume(self) -> bool:
        """Every rank resumes from the checkpoint rank 0 chooses (a node with a stale view of the exp dir resumed
        from another, and trained another model); False: none."""
        choice = None
        if self.world.main:
            try:
                newest = checkpoint.latest(self.exp_dir)
                choice = self.resumable(newest) if newest else None
            except StopTraining as error:
                choice = error
        path = all_gather_objects(self.world, choice)[0]
        if isinstance(path, StopTraining):
            raise path
        if path is None:
            return False
        try:
            state = checkpoint.load(path)
        except FileNotFoundError as error:
            raise StopTraining(f"rank {self.world.rank} cannot read {path}, rank 0's newest checkpoint: {error}") \
                from error
        if state["meta"].get("slimmed"):
            raise StopTraining(f"{path} holds the weights alone (train.keep_whole_epochs slimmed it): it cannot be "
                               "resumed from; start a new experiment from it with train.init_from")
        self.load_resumed_weights(path, state)
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
        self.patience.load_meta(meta)
        rng = state["rng"]
        if self.batch:
            self.position = LoaderPosition.from_state(saved_positions(meta)[self.world.rank])
        if self.keys_log:
            logged = meta.get("keys_logged") or []
            self.keys_log.resume(logged[self.world.rank] if len(logged) == self.world.size else None, self.epoch,
                                 self.batch)
            if self.world.main:
                cut_other_ranks(self.exp_dir, self.world.size, self.epoch, self.batch)
        checkpoint.set_rng_state(rng[self.world.rank] if self.world.rank < len(rng) else rng[0])
        if self.world.rank >= len(rng):  # a rank the run did not have: random numbers of its own
            torch.manual_seed(rank_seed(self.experiment.train.seed, self.world.rank) + self.step)
        log.info("resumed from %s: after %d epochs and %d batches, step %d", path, self.epoch, self.batch, self.step)
        return True

    def load_resumed_weights(self, path: str, state: dict) -> None:
        """The model's weights from the checkpoint resumed, which must be of this model and these units (a
        checkpoint copied into an exp dir without its config.yaml was resumed with other units in silence, or
        with another model's shapes as torch's traceback)."""
        units = units_digest(self.experiment.paths.lang_dir)
        if state["meta"].get("units", units) != units:
            raise StopTraining(f"{path} was trained with other units than {self.experiment.paths.lang_dir}'s "
                               "units.txt: resume it with the lang dir it was trained with, or start a new "
                               "experiment from it with train.init_from")
        try:
            self.model.load_state_dict(state["model"])
        except RuntimeError as error:  # other tensors or shapes: torch's first line says no more than that
            detail = ([line.strip() for line in str(error).splitlines() if line.strip()][1:] or [str(error)])[0]
            raise StopTraining(f"{path} holds another model than this config's ({detail}): "
                               "resume it with the config it was trained with, or start a new experiment from "
                               "it with train.init_from") from error

    def resumable(self, path: str) -> str:
        """path, or the newest epoch checkpoint where path stopped inside an epoch with other ranks or data workers:
        each rank reads its own part of the data, so the part, the position in it and the RNG states hold for the
        same ranks and workers only (the batches after that epoch are trained again, as the warning says)."""
        meta = checkpoint.load_meta(path)
        if not meta["batch"]:
            return path
        positions = saved_positions(meta)
        workers = max(self.experiment.data.num_workers, 1)
        if len(positions) == self.world.size and all(len(p.get("counts", ())) == workers for p in positions):
            return path
        epochs = checkpoint.numbered(self.exp_dir, "epoch")
        saved = f"{len(positions)} ranks of {len(positions[0].get('counts', ()))}" if positions else "unrecorded"
        why = (f"{path} stopped inside epoch {meta['epoch'] + 1} with {saved} data workers, this run has "
               f"{self.world.size} of {workers}")
        if not epochs:
            raise StopTraining(f"{why}, and there is no epoch checkpoint; resume with those")
        start = checkpoint.load_meta(epochs[-1])["step"]
        newer = [step_file for step_file in checkpoint.numbered(self.exp_dir, "step")
                 if checkpoint.load_meta(step_file)["step"] > start]
        for step_file in newer:  # or, newer than this run's, they would outrank its checkpoints (pruning, decoding)
            os.replace(step_file, f"{step_file}{SET_ASIDE}")
        aside = f"; {len(newer)} newer step checkpoints set aside as step-N.pt{SET_ASIDE}" if newer else ""
        log.warning("%s: resuming from %s instead (the batches trained after it are trained again%s)", why,
                    epochs[-1], aside)
        return epochs[-1]

    def start_from(self, path: str) -> None:
        """A fresh run starts from another experiment's weights (every rank loads the same file)."""
        try:
            initialise_from(self.model, path, self.tokenizer.units, self.tokenizer.kind)
        except (FileNotFoundError, ValueError) as error:
            raise StopTraining(str(error)) from error
        if self.ema:
            self.ema = EMA(self.model, self.experiment.train.ema_decay)
