"""Learning-rate schedules as multipliers of the base rate, per optimiser step.

  mlperf:   linear warmup over warmup_steps, hold for hold_steps, then exponential decay
            lr = base * decay_rate ** ((step - warmup - hold) / decay_steps), never below min_lr;
  noam:     base * min(step ** -0.5, step * warmup ** -1.5) * warmup ** 0.5 (peak base at warmup);
  constant: base, after an optional linear warmup.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScheduleConfig:
    type: str = "mlperf"
    warmup_steps: int = 0
    hold_steps: int = 0
    decay_steps: int = 1000
    decay_rate: float = 0.5
    min_lr: float = 1e-5


def lr_multiplier(config: ScheduleConfig, base_lr: float):
    """A function step -> factor for torch.optim.lr_scheduler.LambdaLR."""
    if config.type not in ("mlperf", "noam", "constant"):
        raise ValueError(f"train.schedule.type must be mlperf, noam or constant, got '{config.type}'")
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
        decayed = config.decay_rate ** ((step - warmup - config.hold_steps) / config.decay_steps)
        return max(decayed, config.min_lr / base_lr)

    return factor
