#!/usr/bin/env python3
"""Wall-clock time to a target dev WER on AN4, lever by lever, as the seed's table of speed-ups.

Each row trains egs/an4's conf/ci.yaml with the real trainer (steps/train.py) on the recipe's data
(run egs/an4/run.sh --unit-type bpe --stop-stage 3 first) until its per-epoch dev WER (greedy, what the trainer
validates) reaches the target, or the row's time limit passes. Time counts from the trainer's start:
model building, data loading and validation included. The rows, in turn:

  1. float32, no StackTime (stack_time 1): the baseline;
  2. + StackTime (the config's factor);
  3. + bf16 autocast;
  4. + the hyper-parameters of a search (--tuned: steps/tune.py's best.yaml; its searched values),
     best from a search that scores each trial by its minutes to the same target: in egs/an4,
     ./tune.sh --search conf/tune_time_to_accuracy.yaml --exp exp/tune_time_to_accuracy;
  5. + two torchrun ranks of one thread each, in place of one process with two threads.

A lever is kept for the rows after it only where it shortened the time to the target (or reached it
where the row before did not): a lever that costs time on this machine is shown, not carried on.
Prints a markdown table; each row's experiment stays in --out.
"""

from __future__ import annotations

import os
import shutil
import sys

import yaml

from rnnt.cli import tool_parser
from rnnt.tuning.space import with_values
from rnnt.tuning.trial_run import run_trial

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TORCHRUN_TWO_RANKS = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def tuned_values(path: str, base: dict) -> dict:
    """The dotted keys where the tuned config differs from the base, with the tuned values."""
    with open(path) as f:
        tuned = yaml.safe_load(f)
    values = {}

    def walk(node, reference, prefix):
        for key, value in node.items():
            other = reference.get(key) if isinstance(reference, dict) else None
            if isinstance(value, dict):
                walk(value, other or {}, f"{prefix}{key}.")
            elif value != other:
                values[f"{prefix}{key}"] = value

    walk(tuned, base, "")
    return values


def levers(base: dict, tuned: str) -> list[tuple[str, dict, bool]]:
    """(description, config values, two ranks) of each lever, in the order they are added; base: the
    config as its file has it (what the search started from)."""
    factor = base["model"]["encoder"].get("stack_time", 2)
    rows = [("float32 baseline, no StackTime", {"model.encoder.stack_time": 1, "train.precision": "fp32"}, False),
            (f"+ StackTime {factor}", {"model.encoder.stack_time": factor}, False),
            ("+ bf16 autocast", {"train.precision": "bf16"}, False)]
    if tuned:
        found = tuned_values(tuned, base)
        shown = ", ".join(f"{k.split('.')[-1]} {v:.3g}" if isinstance(v, float) else f"{k.split('.')[-1]} {v}"
                          for k, v in found.items())
        rows.append((f"+ tuned: {shown}", found, False))
    rows.append(("+ 2 torchrun ranks x 1 thread", {}, True))
    return rows


def time_to_target(config: dict, two_ranks: bool, recipe: str, out: str, target: float,
                   minutes: float) -> tuple[float | None, int | None, float | None, float | None]:
    """(minutes to the target, epochs to it, dev WER of the last epoch, seconds per epoch) of one training."""
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    path = os.path.join(out, "config.in.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    train = [os.path.join(ROOT, "steps", "train.py"), "--config", path, "--exp-dir", out,
             "--train-list", os.path.join(recipe, "data", "train", "data.list"),
             "--valid-list", os.path.join(recipe, "data", "dev", "data.list"),
             "--lang-dir", os.path.join(recipe, "data", "lang_bpe64")]
    command = TORCHRUN_TWO_RANKS + train if two_ranks else [sys.executable] + train
    env = {**os.environ, "OMP_NUM_THREADS": "1"} if two_ranks else None
    run = run_trial(command, out, minutes, lambda epoch, wer: wer <= target, os.path.join(out, "output.log"), env=env)
    if run.failed:  # a lever that crashes is no slow one
        raise RuntimeError(f"training failed (exit {run.returncode}); see {os.path.join(out, 'output.log')}")
    reached = next(((m, e) for e, w, m in run.counted if w <= target), (None, None))
    if not run.epochs:
        return reached[0], reached[1], None, None
    (first, _, start), (last, _, end) = run.epochs[0], run.epochs[-1]
    per_epoch = 60 * (end - start) / (last - first) if last > first else 60 * end / first  # after start-up
    return reached[0], reached[1], run.epochs[-1][1], per_epoch


def main() -> int:
    parser = tool_parser(__doc__)
    parser.add_argument("--recipe", default=os.path.join(ROOT, "egs", "an4"), help="a recipe dir with data stages done")
    parser.add_argument("--config", default="conf/ci.yaml", help="the config, relative to --recipe")
    parser.add_argument("--tuned", default="", help="steps/tune.py's best.yaml for the tuned row (none: no such row)")
    parser.add_argument("--target-wer", type=float, default=45.0, help="dev WER (%%) to reach")
    parser.add_argument("--minutes", type=float, default=10.0, help="each row's time limit")
    parser.add_argument("--epochs", type=int, default=40, help="train.epochs of every row (the limit is the time)")
    parser.add_argument("--out", default="/tmp/time_to_accuracy", help="where the rows' experiments go")
    args = parser.parse_args()
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line("cpu") + "\n")  # benchmarks/machine.py: where the table was measured
    with open(os.path.join(args.recipe, args.config)) as f:
        config_file = yaml.safe_load(f)
    base = with_values(config_file, {"train.epochs": args.epochs})
    print(f"AN4 dev WER target {args.target_wer:g}% (greedy, per epoch), {args.config} for up to {args.epochs} "
          f"epochs, at most {args.minutes:g} minutes a row; torch threads: the default ({os.cpu_count()} cores here) "
          "unless stated.\n")
    print("| lever | minutes to target | epochs | dev WER at the stop | s / epoch | speed-up over the baseline "
          "| kept |")
    print("|---|---|---|---|---|---|---|")
    kept, kept_time, baseline = {}, None, None  # the levers kept so far, and their time to the target
    failures = 0
    for number, (name, values, two_ranks) in enumerate(levers(config_file, args.tuned)):
        config = with_values(base, {**kept, **values})
        out = os.path.join(args.out, f"row{number}")
        try:
            minutes, epochs, last_wer, per_epoch = time_to_target(config, two_ranks, args.recipe, out, args.target_wer,
                                                              args.minutes)
        except RuntimeError as error:
            print(f"| {name} | failed: {error} | | | | | no |", flush=True)
            failures += 1
            continue
        keep = number == 0 or (minutes is not None and (kept_time is None or minutes < kept_time))
        if keep:
            kept, kept_time = {**kept, **values}, minutes
        baseline = minutes if number == 0 else baseline
        reached = f"{minutes:.2f}" if minutes is not None else f"not in {args.minutes:g}"
        speed_up = f"{baseline / minutes:.2f}x" if minutes and baseline else ""
        last = f"{last_wer:.2f}" if last_wer is not None else "no epoch ended"
        seconds = f"{per_epoch:.1f}" if per_epoch is not None else ""
        print(f"| {name} | {reached} | {epochs or ''} | {last} | {seconds} | {speed_up} | {'yes' if keep else 'no'} |",
              flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
