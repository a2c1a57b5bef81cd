"""The training loop: one process, or one per device under torchrun (DDP).

Every optimiser step may end in a checkpoint of the model, EMA, optimiser, scheduler, scaler, data position
(epoch, batches consumed) and every rank's RNG state: a resumed run ends as an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import logging
import os

import torch
from torch.nn.parallel import DistributedDataParallel

from rnnt.cpu_isa import bf16_refusal
from rnnt.data.noise import training_augmenter
from rnnt.data.loader import LoaderPosition, make_loader
from rnnt.data.pipeline import Pipeline
from rnnt.data.tokenizer import Tokenizer
from rnnt.data.splitting import Reader
from rnnt.model.transducer import built_model
from rnnt.training import checkpoint
from rnnt.training.accumulation import BadBatches, GradientGroup
from rnnt.training.distributed import (all_gather_objects, batches_of_every_rank, broadcast_buffers,
                                       check_parameters_agree, cleanup, rank_seed, setup)
from rnnt.training.ema import EMA
from rnnt.training.config_change import finish_setting_aside, start_over_if_changed, training_data_of
from rnnt.training.experiment import (Experiment, adopt_inputs, build_optimizer, forget_adopted, load_experiment,
                                      not_adopted_yet)
from rnnt.training.keys_log import KeysLog, remove_other_ranks
from rnnt.training.progress import Progress, close_logging, setup_logging
from rnnt.training.patience import Patience
from rnnt.training.schedules import warmup_unfinished
from rnnt.training.stop import StopTraining, held_alone_or_stop
from rnnt.training.stop_signals import StopSignals
from rnnt.training.trainer_checkpoints import Checkpointing
from rnnt.training.trainer_steps import Steps
from rnnt.training.validation import validate, validation_pipeline

log = logging.getLogger("rnnt.train")


class Trainer(Checkpointing, Steps):
    def __init__(self, experiment: Experiment, exp_dir: str, log_keys: bool = False, resume: bool = False):
        """resume: continue the newest checkpoint in exp_dir; an experiment made under another config is first
        set aside (rnnt.training.config_change), before anything is written to exp_dir."""
        self.experiment, self.exp_dir, self.resume_requested = experiment, exp_dir, resume
        # Subnormal floats take the CPU's slow path; a new model makes many (DeepSpeech 2 on AN4: several times slower)
        torch.set_flush_denormal(True)
        self.world = setup(experiment.train.device)
        self.train_data, data_warnings = training_data_of(experiment.paths.train_list)  # in every checkpoint's meta
        # the model and optimiser first: a value they refuse stops here, before an experiment is set aside
        torch.manual_seed(experiment.train.seed)
        self.tokenizer = Tokenizer(experiment.paths.lang_dir)
        self.model = built_model(experiment.model, self.tokenizer.vocab_size).to(self.world.device)
        if self.world.rank:  # the same initial weights on every rank, then each its own dropout masks
            torch.manual_seed(rank_seed(experiment.train.seed, self.world.rank))
        if refusal := bf16_refusal(self.model, self.world.device, experiment.train.precision):
            raise StopTraining(refusal)
        train_config = experiment.train
        self.optimizer, self.scheduler = build_optimizer(train_config, self.model.parameters())
        augmenter = training_augmenter(experiment.data)  # a noise list none of which reads stops here too
        self.alone = contextlib.ExitStack()  # this experiment's lock, held until run ends
        if self.world.main:  # (before anything is set aside: a second run set the running one's files aside)
            self.alone.enter_context(held_alone_or_stop(exp_dir))
        self.start_logging(resume)
        for warning in data_warnings:
            log.warning("%s", warning)
        if augmenter:
            augmenter.log_warnings()
        self.ddp = DistributedDataParallel(self.model) if self.world.distributed else self.model
        self.scaler = torch.amp.GradScaler(  # float16 only: bfloat16 has float32's exponent range, no underflow
            enabled=train_config.precision == "fp16" and self.world.device.type != "cpu")
        self.autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(train_config.precision)
        self.ema = EMA(self.model, train_config.ema_decay) if train_config.ema_decay > 0 else None
        self.make_pipelines(augmenter)
        self.epoch = self.batch = self.step = 0
        self.saved_as: tuple | None = None  # (name, epoch, batch) of the checkpoint saved last (trainer_checkpoints)
        self.step_lr = 0.0  # the learning rate of the last update
        self.position = LoaderPosition(experiment.data.num_workers)  # which worker gave how many batches
        self.group = GradientGroup()
        self.bad_batches = BadBatches(train_config.max_bad_steps)
        self.patience = Patience(train_config.patience, train_config.valid_wer)
        self.signals = StopSignals()  # this rank's SIGTERM or Ctrl-C, once run takes them
        self.stopping = False  # some rank got one: all stop at the next optimiser step
        self.valid_result: dict = {}
        self.validated_at: tuple[int, dict] = (-1, {})  # the step of the last validation inside an epoch, its result
        self.keys_log = KeysLog(exp_dir, self.world.rank) if log_keys else None
        self.progress = Progress(exp_dir, self.world, train_config.log_every, train_config.epochs)
        parameters = sum(p.numel() for p in self.model.parameters())
        log.info("model: %.2f M parameters, vocabulary %d, loss %s; world size %d on %s", parameters / 1e6,
                 self.tokenizer.vocab_size, experiment.model.loss.type, self.world.size, self.world.device)

    def make_pipelines(self, augmenter) -> None:
        """The training pipeline, its loader, and the validation pipeline (None without a dev list)."""
        experiment = self.experiment
        lengths = {"output_frames": experiment.model.encoder.output_frames,
                   "units_per_frame": experiment.model.loss.units_per_frame()}
        self.train_pipeline = Pipeline(experiment.paths.train_list, experiment.data, self.tokenizer, True,
                                       augmenter=augmenter, **lengths)
        self.loader = make_loader(self.train_pipeline, self.world.rank, self.world.size)
        self.valid_pipeline = validation_pipeline(experiment, self.tokenizer, lengths,
                                                  self.train_pipeline.audio_cache)  # data.cache_audio_mb for both

    def start_logging(self, resume: bool) -> None:
        """train.log begun, with what start_over_if_config_changed did or a resume honours."""
        restarted, honoured = self.start_over_if_config_changed(resume)
        os.makedirs(self.exp_dir, exist_ok=True)
        setup_logging(self.exp_dir, self.world)
        if restarted:
            log.warning("%s", restarted)
        if honoured:
            log.info("resuming with the config's edits a resume honours: %s", "; ".join(map(str, honoured)))

    def start_over_if_config_changed(self, resume: bool) -> tuple[str | None, list]:
        """The main rank finishes a setting aside a killed run left half done (whether or not this run resumes:
        one that does not would train beside the old experiment's rest), and, resuming, sets aside an experiment
        trained under another config; every rank waits for it. (What was done, the config edits a resume honours.)"""
        message, honoured = None, []
        if self.world.main:
            try:
                message = start_over_if_changed(self.experiment, self.exp_dir, load_experiment, self.train_data,
                                                honoured) if resume else finish_setting_aside(self.exp_dir)
            except ValueError as error:  # a config.yaml this version cannot read: nothing is touched
                message = StopTraining(f"{self.exp_dir}/config.yaml: {error}; give a new --exp-dir")
        message, honoured = all_gather_objects(self.world, (message, honoured))[0]
        if isinstance(message, StopTraining):
            cleanup(self.world, together=True)
            raise message
        return message, honoured

    # --- the loop -------------------------------------------------------------------------------------
    def run(self) -> int:
        """0 when training is complete; 128 + the signal after SIGTERM or Ctrl-C (rnnt.training.stop_signals: a
        checkpoint holds the position); 1 on failure."""
        self.ended_together = False
        try:
            with self.signals:
                return self.train_to_the_end()
        except StopTraining as error:
            log.error("%s", error)
            return 1
        except OSError as error:  # a checkpoint or config.yaml not written: a traceback, and train.log said nothing
            log.error("cannot write %s: %s; free space (or make it writable), then rerun with --resume",
                      error.filename or self.exp_dir, error.strerror or error)
            return 1
        finally:
            self.alone.close()
            self.progress.close()
            if self.keys_log:
                self.keys_log.close()
            close_logging()
            self.ddp = self.model  # DDP's reducer holds the process group
            cleanup(self.world, together=self.ended_together)

    def train_to_the_end(self) -> int:
        """run's training: started or resumed, epochs until complete or stopped, the position saved."""
        if not self.resume_requested and (existing := checkpoint.latest(self.exp_dir)):
            raise StopTraining(f"{self.exp_dir} already holds checkpoints (newest {existing}); "
                               "pass --resume to continue that run, or give a new --exp-dir")
        written = not_adopted_yet(self.exp_dir)
        adopt_inputs(self.experiment, self.exp_dir, self.world)
        try:
            resumed = self.resume_requested and self.resume()
        except StopTraining:
            forget_adopted(self.exp_dir, written if self.world.main else [])
            raise
        if not resumed:
            if self.keys_log:  # a fresh start's keys alone
                self.keys_log.resume(0, 0)
                if self.world.main:
                    remove_other_ranks(self.exp_dir, self.world.size)
            if self.experiment.train.init_from:
                self.start_from(self.experiment.train.init_from)
        while not self.complete():
            if not self.train_epoch():
                break
            self.end_epoch()
        partial = self.save_position()
        agree = check_parameters_agree(self.world, self.model.parameters())
        self.ended_together = True
        if not agree:
            raise StopTraining("the ranks ended with different parameters (above): this training is not one model")
        summary = f"{self.step} steps, {self.epoch} epochs{partial}; {self.bad_batches.summary()}"
        if not self.complete():
            log.info("stopped on %s at step %d (%s); run again to continue (the recipe's run.sh, or "
                     "steps/train.py --resume)", self.signals.name, self.step, summary)
            return self.signals.exit_status
        ended_early = self.epoch < self.experiment.train.epochs and self.patience.ends(self.epoch)
        log.info("training done: %s%s", summary, f"; {self.patience.why(self.epoch)}" if ended_early else "")
        if warning := warmup_unfinished(self.experiment.train.schedule, self.step):
            log.warning("%s", warning)
        return 0

    def max_steps_reached(self) -> bool:
        return bool(self.experiment.train.max_steps) and self.step >= self.experiment.train.max_steps

    def complete(self) -> bool:
        return self.epoch >= self.experiment.train.epochs or self.max_steps_reached() or self.patience.ends(self.epoch)

    def train_epoch(self) -> bool:
        """Trains from the current position to the end of the epoch; False if it stopped inside it, at an
        optimiser step (SIGTERM, or train.max_steps reached)."""
        accum_steps = self.experiment.train.accum_steps
        if self.batch == 0:
            self.position = LoaderPosition(self.experiment.data.num_workers)
        self.loader.dataset.set_epoch(self.epoch, self.position if self.batch else None)
        self.progress.start_epoch(self.epoch, self.batch)
        starts = self.batch == 0
        epoch = batches_of_every_rank(self.world, self.loader, lambda: bool(self.signals.received),
                                      self.loader.dataset.spare_batch)
        for turn in epoch:
            self.stopping = self.stopping or turn.stop
            if self.batch % accum_steps == 0 and (self.stopping or self.max_steps_reached()):
                self.progress.end_epoch()
                return False
            loss = self.train_batch(turn.batch, turn.weight, turn.ranks_with_batch, turn.delivered)
            self.progress.batch_done(loss if turn.weight else None)
            if self.batch % accum_steps == 0:
                self.end_group()
        self.progress.end_epoch()
        if starts and self.batch == 0:  # a rank's part empty (all with one process): the data report names why
            raise StopTraining(f"epoch {self.epoch + 1}: no usable utterance in {self.experiment.paths.train_list}"
                               + (f" for one of {self.world.size} ranks" if self.world.distributed else ""))
        if self.batch % accum_steps:  # the epoch's last group is short: its gradient is not carried over
            self.end_group()
        self.batch = 0
        self.epoch += 1
        return True

    def train_batch(self, batch: dict, weight: float, ranks_with_batch: int = 1,
                    delivered: dict | None = None) -> float | None:
        """delivered: the loader's batch whose place this step took (batch itself, or a place held), its position
        recorded for an exact resume; None: padding at an epoch's end (batches_of_every_rank's Turn)."""
        if weight and self.keys_log:
            self.keys_log.write(self.epoch, batch["keys"])
        if ranks_with_batch:  # a forward pass of weight 1 moves batch norm's statistics, whether or not a step follows:
            # an epoch's end validates again (a last group skipped left the result of other weights); decided by the
            # count every rank holds alike, so that no rank validates, in collectives, without the others
            self.validated_at = (-1, {})
        group_ends = (self.batch + 1) % self.experiment.train.accum_steps == 0
        # weight 0 (a rank waiting at an epoch's end): in eval mode, batch norm's statistics stay; without cuDNN,
        # whose LSTMs have no backward pass in eval mode
        self.model.train(weight > 0)
        with contextlib.nullcontext() if weight else torch.backends.cudnn.flags(enabled=False):
            loss = self.forward_backward(batch, sync=group_ends or not self.world.distributed, weight=weight,
                                         ranks_with_batch=ranks_with_batch)
        self.model.train()
        if delivered is not None:
            self.position.delivered(delivered["role"], delivered["position"])
        self.batch += 1
        return loss

    def end_group(self) -> None:
        """The optimiser step at the end of an accumulation group; then the report and the step checkpoint when due."""
        grad_norm = self.optimizer_step()
        if grad_norm is None:
            return
        self.progress.step_done(self.epoch, self.step, self.step_lr, grad_norm)
        train = self.experiment.train
        if train.valid_every and self.step % train.valid_every == 0 and self.valid_pipeline is not None \
                and not self.stopping:  # (a stop's checkpoint first; every rank knows of it)
            with torch.random.fork_rng(devices=[self.world.device] if self.world.device.type == "cuda" else []):
                self.validated_at = self.step, self.validate_now(within=True)  # the training as without it
        if train.checkpoint_every and self.step % train.checkpoint_every == 0:
            self.save(checkpoint.name("step", self.step))

    def validate_now(self, within: bool = False) -> dict:
        """The dev list's result ({'loss', 'wer'?, 'utterances', ...}), logged: every rank validates its part of the
        list, with the EMA weights if kept, and the sums are added over the ranks; within an epoch, or at its end."""
        part = self.valid_pipeline.batches(reader=Reader(self.world.rank, self.world.size))
        with self.ema.applied(self.model) if self.ema else contextlib.nullcontext():
            broadcast_buffers(self.world, self.model)  # every rank validates rank 0's model, the one saved
            result = validate(self.model, part, self.tokenizer, self.world.device, self.experiment.train.valid_wer,
                              self.world)
        if silence := self.experiment.data.tail_silence:  # the dev audio with data.tail_silence appended, which a
            result["dev_set"] += f"+{silence:g}s"  # resume takes: results measured so are another dev set's
        if self.world.main:
            self.progress.validated(self.epoch, self.step, result, ema=self.ema is not None, within=within)
        return result

    def end_epoch(self) -> None:
        """Validates, then saves epoch-N.pt with the result."""
        self.valid_result = {}
        if self.valid_pipeline is not None:
            step, result = self.validated_at
            if step != self.step:
                result = self.validate_now()
            elif self.world.main:  # validated at this step already (train.valid_every): the same weights
                self.progress.validated(self.epoch, self.step, result, ema=self.ema is not None)
            self.valid_result = {f"valid_{k}": v for k, v in result.items()}
            self.patience.validated(self.epoch, self.valid_result)
        self.save(checkpoint.name("epoch", self.epoch))
