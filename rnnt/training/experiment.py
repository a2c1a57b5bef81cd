"""An experiment's full configuration (model, data, train, paths), read from YAML and saved resolved."""

from __future__ import annotations

import dataclasses
import filecmp
import math
import os
import shutil
from dataclasses import dataclass, field

import torch
import yaml

from rnnt.atomic_write import write_atomically
from rnnt.config import from_dict, read_yaml, to_dict
from rnnt.data.cmvn_file import cmvn_source
from rnnt.data.config import DataConfig, data_config
from rnnt.data.noise_config import with_recording_lists
from rnnt.model.transducer import ModelConfig, check_model_config
from rnnt.training import checkpoint
from rnnt.training.config_change import CMVN_NAME, units_differ
from rnnt.training.config_checks import check_shapes
from rnnt.training.stop import StopTraining
from rnnt.training.distributed import World
from rnnt.training.lamb import Lamb
from rnnt.training.schedules import SCHEDULES, ScheduleConfig, lr_multiplier


OPTIMIZERS = ("adam", "adamw", "lamb")


@dataclass(frozen=True)
class OptimizerConfig:
    type: str = "adamw"  # the optimiser: adam, adamw or lamb (rnnt.training.lamb)
    lr: float = 1e-3  # base learning rate; train.schedule scales it per step
    betas: tuple[float, ...] = (0.9, 0.999)  # Adam's decay rates of the gradient's mean and square
    eps: float = 1e-8  # added to the denominator of Adam's update, for stability
    weight_decay: float = 0.0  # adamw and lamb: decoupled weight decay; adam: an L2 term in the gradient


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 10  # passes over paths.train_list; training ends after the last
    max_steps: int = 0  # stop after this many optimiser steps (0: no limit)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    grad_clip: float = 5.0  # the gradient's global L2 norm is clipped to this (always applied)
    accum_steps: int = 1  # batches whose gradients are averaged into one optimiser step (each batch's mean
    # over its utterances weighs the same, whatever its size, as WeNet's accum_grad; over DDP's ranks too)
    precision: str = "fp32"  # fp32, bf16 or fp16 (autocast; the loss is computed in float32)
    ema_decay: float = 0.0  # decay of an EMA of the weights, which validation uses and checkpoints keep (0: no EMA)
    checkpoint_every: int = 0  # optimiser steps between step-N.pt checkpoints (0: only at epoch ends)
    keep_checkpoints: int = 3  # step-N.pt files kept, the newest (at least 1: a resume starts from the newest)
    keep_whole_epochs: int = 2  # epoch-N.pt files kept whole (to resume from), the newest; older ones keep
    # the weights alone, for averaging and decoding (with Adam: half the file with EMA, a third without);
    # 0: every one whole, to resume from any
    log_every: int = 10  # optimiser steps between reports of the mean loss, rate and gradient norm
    max_bad_steps: int = 10  # skipped batches in a row before training stops: a non-finite loss or out of
    # memory skips a batch, a non-finite gradient its group's step (counted once); float16's overflows while
    # its loss scale is above 1 are not counted
    valid_wer: bool = True  # validation also decodes greedily and reports WER (false: the loss only)
    valid_every: int = 0  # optimiser steps between validations inside an epoch, logged and in tensorboard, for
    # epochs of hours (0: at epoch ends only, which checkpoints, averaging --best and patience take)
    patience: int = 0  # training ends once this many epochs have not bettered the dev WER (the dev loss with
    # valid_wer false) of the best epoch before them, however many train.epochs are left (0: never)
    seed: int = 0  # torch's seed: the model's initialisation and dropout
    device: str = "auto"  # auto (cuda where available, else cpu), cpu or cuda
    init_from: str = ""  # a checkpoint of another experiment to start from (rnnt.training.init_from)
    init_from_sha256: str = ""  # set by steps/train.py: init_from's content, so that a new one (the other
    # model trained again) is a changed config, which trains anew rather than resuming (config_change)


@dataclass(frozen=True)
class Paths:
    train_list: str = ""  # data list to train on (steps/make_raw_list.py or make_shards.py); --train-list
    valid_list: str = ""  # data list validated on after every epoch ("": no validation); --valid-list
    lang_dir: str = ""  # units dir from steps/build_units.py, copied into the exp dir; --lang-dir


@dataclass(frozen=True)
class Experiment:
    """One training run's YAML, resolved by load_experiment: each section a config of its own, with the
    defaults of its dataclass where the YAML is silent (an empty YAML is the default experiment)."""

    model: ModelConfig
    data: DataConfig
    train: TrainConfig
    paths: Paths


def load_experiment(path: str, **paths: str) -> Experiment:
    """The YAML at path; non-empty keyword paths (train_list, valid_list, lang_dir) override its paths."""
    values = read_yaml(path) or {}
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a mapping of model, data, train, paths")
    values.setdefault("paths", {})
    values["paths"] = {**(values["paths"] or {}), **{k: v for k, v in paths.items() if v}}
    return experiment_from_values(values, path)


def load_trained(exp_dir: str) -> Experiment:
    """A trained experiment's config.yaml with the units and CMVN statistics the dir holds (adopt_inputs' copies):
    config.yaml names them by absolute path, so a dir moved or copied elsewhere would read those of the old
    place (gone, or another experiment's since). A path that is no experiment (a checkpoint given for its folder,
    a folder without config.yaml) is a ValueError that says what is wanted (before: errno's 'Not a directory')."""
    config = os.path.join(exp_dir, "config.yaml")
    if not os.path.isfile(config):
        given = ("a file (a checkpoint?)" if os.path.isfile(exp_dir) else
                 "a folder without config.yaml" if os.path.isdir(exp_dir) else "not there")
        raise ValueError(f"{exp_dir} is {given}: give the experiment folder steps/train.py trained into (holding "
                         "config.yaml, exp/<name>), and a checkpoint of it, where not its model.pt, with --checkpoint")
    experiment = load_experiment(config)
    own_lang, own_cmvn = os.path.join(exp_dir, "lang"), os.path.join(exp_dir, CMVN_NAME)
    if os.path.isdir(own_lang):
        experiment = dataclasses.replace(experiment, paths=dataclasses.replace(experiment.paths, lang_dir=own_lang))
    if experiment.data.features.cmvn and os.path.isfile(own_cmvn):
        features = dataclasses.replace(experiment.data.features, cmvn=own_cmvn)
        experiment = dataclasses.replace(experiment, data=dataclasses.replace(experiment.data, features=features))
    return experiment


def experiment_from_values(values: dict, where: str) -> Experiment:
    """The experiment of a YAML's mapping (model, data, train, paths); a ValueError names where, then the key."""
    unknown = set(values) - {"model", "data", "train", "paths"}
    if unknown:
        raise ValueError(f"{where}: unknown sections {sorted(unknown)}; expected model, data, train, paths")
    try:
        experiment = Experiment(
            model=from_dict(ModelConfig, values.get("model"), "model"),
            data=data_config(values.get("data")),
            train=from_dict(TrainConfig, values.get("train"), "train"),
            paths=from_dict(Paths, values.get("paths"), "paths"),
        )
        check_model_config(experiment.model)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    problems = train_value_problems(experiment.train) + check_shapes(experiment)
    if problems:
        raise ValueError(f"{where}: " + "; ".join(problems))
    return experiment


def train_value_problems(train: TrainConfig) -> list[str]:
    """The train section's values that no run can use, each named by its key."""
    problems = [f"train.{key} must be at least 1, got {getattr(train, key)}"
                for key in ("epochs", "accum_steps", "log_every", "keep_checkpoints", "max_bad_steps")
                if getattr(train, key) < 1]
    problems += [f"train.{key} must be 0 (none) or more, got {getattr(train, key)}"
                 for key in ("max_steps", "checkpoint_every", "keep_whole_epochs", "patience", "valid_every")
                 if getattr(train, key) < 0]
    if not 0 <= train.ema_decay < 1:
        problems.append(f"train.ema_decay must be at least 0 (no EMA) and below 1, got {train.ema_decay}")
    if train.grad_clip <= 0:
        problems.append(f"train.grad_clip must be above 0 (it is always applied), got {train.grad_clip}")
    problems += optimizer_problems(train.optimizer)
    schedule = train.schedule
    if schedule.type not in SCHEDULES:
        problems.append(f"train.schedule.type must be one of {', '.join(SCHEDULES)}, got '{schedule.type}'")
    problems += [f"train.schedule.{key} must be 0 (none) or more, got {getattr(schedule, key)}"
                 for key in ("warmup_steps", "hold_steps", "min_lr") if not getattr(schedule, key) >= 0]
    if schedule.decay_steps < 1:
        problems.append(f"train.schedule.decay_steps must be at least 1, got {schedule.decay_steps}")
    if not 0 < schedule.decay_rate <= 1:
        problems.append(f"train.schedule.decay_rate must be above 0 and at most 1, got {schedule.decay_rate}")
    choices = {"precision": ("fp32", "bf16", "fp16"), "device": ("auto", "cpu", "cuda")}
    problems += [f"train.{key} must be one of {', '.join(allowed)}, got '{getattr(train, key)}'"
                 for key, allowed in choices.items() if getattr(train, key) not in allowed]
    return problems


def optimizer_problems(optimizer: OptimizerConfig) -> list[str]:
    """The optimizer section's values that no run can use (one beta was an IndexError, another type a message
    without the file: in the trainer, or in every trial of a search that drew them)."""
    problems = [] if optimizer.type in OPTIMIZERS else [
        f"train.optimizer.type must be one of {', '.join(OPTIMIZERS)}, got '{optimizer.type}'"]
    if not 0 <= optimizer.lr < math.inf:
        problems.append(f"train.optimizer.lr must be 0 (the weights held) or more, got {optimizer.lr}")
    betas = optimizer.betas
    if not (isinstance(betas, (list, tuple)) and len(betas) == 2 and all(0 <= beta < 1 for beta in betas)):
        problems.append(f"train.optimizer.betas must be two numbers, each at least 0 and below 1, got {betas}")
    if not 0 < optimizer.eps < math.inf:
        problems.append(f"train.optimizer.eps must be above 0, got {optimizer.eps}")
    if not 0 <= optimizer.weight_decay < math.inf:
        problems.append(f"train.optimizer.weight_decay must be 0 (none) or more, got {optimizer.weight_decay}")
    return problems


def with_absolute_paths(experiment: Experiment) -> Experiment:
    """Paths in the saved config must work from anywhere: decoding and transcription read only the exp dir."""
    return with_paths(experiment, os.path.abspath)


def with_paths(experiment: Experiment, convert) -> Experiment:
    """The experiment with each path it names (paths.*, data.features.cmvn, train.init_from, the wav.scp of
    data.noise and data.reverb) put through convert (os.path.abspath, os.path.relpath)."""
    def converted(path):
        return convert(path) if path else path

    paths = dataclasses.replace(experiment.paths, **{k: converted(v) for k, v in vars(experiment.paths).items()})
    data = with_recording_lists(experiment.data, lambda lists: dataclasses.replace(
        lists, wav_scp=converted(lists.wav_scp)))
    data = dataclasses.replace(data, features=dataclasses.replace(data.features, cmvn=converted(data.features.cmvn)))
    train = dataclasses.replace(experiment.train, init_from=converted(experiment.train.init_from))
    return dataclasses.replace(experiment, paths=paths, train=train, data=data)


def save_experiment(experiment: Experiment, path: str) -> None:
    """Written whole or not at all (rnnt.atomic_write): a config.yaml cut short by a full disk or a kill
    made the next resume take the defaults for it and set the experiment aside as trained under another config."""
    write_atomically(path, lambda f: yaml.safe_dump(to_dict(experiment), f, sort_keys=False))


def build_optimizer(config: TrainConfig, params) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    settings = config.optimizer
    kinds = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "lamb": Lamb}  # OPTIMIZERS
    params = list(params)
    # torch's fused Adam updates every tensor in one kernel: on the CPU 5x faster than its default loop
    # (11 ms of a 135 ms AN4 step saved, docs/training.md); it takes floating tensors on the CPU or CUDA
    fused = {"fused": True} if settings.type != "lamb" and all(
        p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params) else {}
    optimizer = kinds[settings.type](params, lr=settings.lr, betas=tuple(settings.betas), eps=settings.eps,
                                     weight_decay=settings.weight_decay, **fused)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_multiplier(config.schedule, settings.lr))


ADOPTED = ("config.yaml", "lang", CMVN_NAME)  # what adopt_inputs writes into an experiment


def not_adopted_yet(exp_dir: str) -> list[str]:
    """What of ADOPTED exp_dir does not hold yet: the files adopt_inputs would write anew."""
    return [name for name in ADOPTED if not os.path.exists(os.path.join(exp_dir, name))]


def forget_adopted(exp_dir: str, names: list[str]) -> None:
    """Removes what adopt_inputs wrote of names: a resume refused after it (a checkpoint copied into an empty dir,
    of another model or units) left the refused config's config.yaml, which the next run, with the right config,
    took for the experiment's own, and set the experiment aside as changed."""
    for path in (os.path.join(exp_dir, name) for name in names):
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)


def adopt_inputs(experiment: Experiment, exp_dir: str, world: World) -> None:
    """Copies the lang dir into <exp-dir>/lang and the CMVN statistics (data.features.cmvn) into
    <exp-dir>/global_cmvn.json, and saves config.yaml naming them: the experiment keeps the units and statistics it
    was trained with when data/ is rebuilt, and decodes with them. A resumed run must use the same (with --resume,
    rnnt.training.config_change sets an experiment of others aside first). Each copy is made beside and renamed
    into place: a run stopped in it leaves no part of one to compare with."""
    exp_dir = os.path.abspath(exp_dir)
    lang, kept_lang = experiment.paths.lang_dir, os.path.join(exp_dir, "lang")
    cmvn, kept_cmvn = experiment.data.features.cmvn, os.path.join(exp_dir, CMVN_NAME)
    cmvn = cmvn and cmvn_source(cmvn)  # the JSON beside a matrix compute_cmvn_stats.py wrote: it names the features
    trained = checkpoint.latest(exp_dir) is not None
    copy_lang = os.path.abspath(lang) != kept_lang and not (trained and os.path.isdir(kept_lang))
    copy_cmvn = bool(cmvn) and os.path.abspath(cmvn) != kept_cmvn and not (trained and os.path.isfile(kept_cmvn))
    differ = ([os.path.join(lang, name) for name in units_differ(lang, kept_lang)]
              if os.path.abspath(lang) != kept_lang and not copy_lang else [])
    if cmvn and os.path.abspath(cmvn) != kept_cmvn and not copy_cmvn and not filecmp.cmp(cmvn, kept_cmvn, False):
        differ.append(cmvn)
    if differ:
        raise StopTraining(f"{exp_dir} was trained with other units or CMVN statistics: {', '.join(differ)} differ "
                           "from its copies; use those, --resume (it starts the experiment over, the old one set "
                           "aside), or another experiment dir")
    if world.distributed:
        torch.distributed.barrier()  # every rank has compared before the main one copies
    if world.main:
        if copy_lang:  # units no checkpoint was trained with: replaced
            shutil.rmtree(f"{kept_lang}.tmp", ignore_errors=True)
            shutil.copytree(lang, f"{kept_lang}.tmp")
            shutil.rmtree(kept_lang, ignore_errors=True)
            os.replace(f"{kept_lang}.tmp", kept_lang)
        if copy_cmvn:
            shutil.copyfile(cmvn, f"{kept_cmvn}.tmp")
            os.replace(f"{kept_cmvn}.tmp", kept_cmvn)
        features = dataclasses.replace(experiment.data.features, cmvn=kept_cmvn if cmvn else None)
        saved = dataclasses.replace(experiment, paths=dataclasses.replace(experiment.paths, lang_dir=kept_lang),
                                    data=dataclasses.replace(experiment.data, features=features))
        save_experiment(saved, os.path.join(exp_dir, "config.yaml"))
