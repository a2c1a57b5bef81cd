"""Learning-rate schedules as multipliers of the base rate, per optimiser step.

  mlperf:   linear warmup over warmup_steps, hold for hold_steps, then exponential decay
            lr = base * decay_rate ** ((step - warmup - hold) / decay_steps), never below min_lr (nor
            raised to it: a base rate under min_lr, as in fine-tuning, stays the base); with staircase,
            the exponent rounded up: the rate falls by decay_rate at the first step of each decay_steps and
            holds, as the MLPerf RNN-T reference's falls once an epoch (decay_steps its steps an epoch), the
            first decayed epoch already at decay_rate;
  noam:     base * min(step ** -0.5, step * warmup ** -1.5) * warmup ** 0.5 (peak base at warmup);
  constant: base, after an optional linear warmup.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


SCHEDULES = ("mlperf", "noam", "constant")


@dataclass(frozen=True)
class ScheduleConfig:
    type: str = "mlperf"  # mlperf, noam or constant (see the module docstring)
    warmup_steps: int = 0  # optimiser steps of linear warmup from 0 (noam: the step of the peak)
    hold_steps: int = 0  # mlperf: steps at the base rate after the warmup
    decay_steps: int = 1000  # mlperf: steps over which the rate falls by decay_rate
    decay_rate: float = 0.5  # mlperf: factor of the rate per decay_steps (above 0, at most 1)
    min_lr: float = 1e-5  # mlperf: the decayed rate never goes below this (a base rate under it stays the base)
    staircase: bool = False  # mlperf: fall once every decay_steps (at its first step), not a little every step


def lr_multiplier(config: ScheduleConfig, base_lr: float):
    """A function step -> factor for torch.optim.lr_scheduler.LambdaLR."""
    if config.type not in SCHEDULES:
        raise ValueError(f"train.schedule.type must be one of {', '.join(SCHEDULES)}, got '{config.type}'")
    warmup = max(config.warmup_steps, 0)

    def factor(step: int) -> float:
        step = step + 1  # LambdaLR counts from 0; the first update uses step 1
        if config.type == "noam":
            w = max(warmup, 1)
            return min(step ** -0.5, step * w ** -1.5) * w ** 0.5
        if warmup and step <= warmup:
            return step / warmup
        if config.type == "constant" or step <= warmup + config.hold_steps:
            return 1.0
        periods = (step - warmup - config.hold_steps) / config.decay_steps
        decayed = config.decay_rate ** (math.ceil(periods) if config.staircase else periods)
        return max(decayed, min(1.0, config.min_lr / base_lr) if base_lr > 0 else 0.0)  # lr 0: weights held

    return factor


def warmup_unfinished(config: ScheduleConfig, steps: int) -> str:
    """What to say of a training that ended after `steps` optimiser steps, inside the schedule's warmup: its rate
    never reached train.optimizer.lr (a short test run of a config made for a larger corpus learnt nothing, and
    only the lr logged said why); "" where the warmup was done."""
    if steps >= config.warmup_steps:
        return ""
    return (f"the training ended at step {steps}, inside train.schedule.warmup_steps {config.warmup_steps}: its "
            "learning rate never reached train.optimizer.lr (for a short run, lower warmup_steps to a share of "
            "the steps it trains)")
