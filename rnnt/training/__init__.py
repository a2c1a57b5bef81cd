"""Training: optimiser, schedules, EMA, checkpoints, distributed helpers and the loop."""
