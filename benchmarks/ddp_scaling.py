#!/usr/bin/env python3
"""CPU data-parallel scaling: training steps of a recipe's model under torchrun (gloo), at 1, 2, 4, ...
ranks on one machine, each rank with its share of the cores and the same batch (weak scaling, as a
recipe's per-rank batches do).

For each world size, torchrun starts the ranks; every rank builds the model of the config, wraps it in
DistributedDataParallel and times --steps training steps (forward, backward with the gradient
all-reduce, optimiser) on a synthetic batch of --batch utterances of --seconds each (80-bin frames at
10 ms, stacked as the config's input size says, --tokens tokens of the config's vocabulary size or --vocab). Rank 0
prints one line; the driver prints a markdown table: step time, utterances per second over all ranks,
speed-up over the first world size asked for (one rank by default), per rank, and efficiency
(speed-up / ranks).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(args) -> None:
    import torch
    import torch.distributed as dist

    from rnnt.model.transducer import Transducer
    from rnnt.training.experiment import OptimizerConfig, TrainConfig, build_optimizer, load_experiment

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(max(1, args.cores // world))
    torch.manual_seed(rank)
    model_config = load_experiment(args.config).model
    model = torch.nn.parallel.DistributedDataParallel(Transducer(model_config, args.vocab))
    optimizer, _ = build_optimizer(TrainConfig(optimizer=OptimizerConfig("adamw", 1e-4)), model.parameters())
    stacked = model_config.encoder.input_dim // 80  # the data pipeline's frame stacking
    frames = int(args.seconds * 100 / stacked)
    feats = torch.randn(args.batch, frames, model_config.encoder.input_dim)
    feat_lens = torch.linspace(frames, 0.85 * frames, args.batch).long()
    tokens = torch.randint(1, args.vocab, (args.batch, args.tokens))
    token_lens = torch.linspace(args.tokens, 0.85 * args.tokens, args.batch).long()

    def step():
        optimizer.zero_grad(set_to_none=True)
        model(feats, feat_lens, tokens, token_lens)["loss"].backward()
        optimizer.step()

    step()  # warm-up: thread pools, allocator, the first all-reduce buckets
    times = []
    for _ in range(args.steps):
        dist.barrier()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    slowest = torch.tensor([statistics.median(times)])
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"ranks": world, "threads": torch.get_num_threads(), "step": float(slowest)}), flush=True)
    dist.destroy_process_group()


def run_world(args, ranks: int) -> dict | None:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
           os.path.abspath(__file__), "--worker", "--config", args.config, "--cores", str(args.cores),
           "--steps", str(args.steps), "--batch", str(args.batch), "--seconds", str(args.seconds),
           "--tokens", str(args.tokens), "--vocab", str(args.vocab)]
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": str(max(1, args.cores // ranks))}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        print(f"ddp_scaling.py: {ranks} ranks failed:\n{out.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(lines[-1])


def main() -> int:
    from rnnt.cli import tool_parser

    parser = tool_parser(__doc__)
    parser.add_argument("--config", default=os.path.join(ROOT, "egs", "librispeech", "conf", "small.yaml"))
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--cores", type=int, default=os.cpu_count(), help="cores shared by the ranks (default: all)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per world size (median, slowest rank)")
    parser.add_argument("--batch", type=int, default=8, help="utterances per rank and step")
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--vocab", type=int, default=500)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ranks[0] != 1:  # (the speed-up of a first world size of 2 read as its own rate over 2: 2.00x, 100%)
        parser.error("--ranks starts with 1: the speed-up and efficiency are against one rank's rate")
    if args.worker:
        worker(args)
        return 0
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line("cpu") + "\n")  # benchmarks/machine.py: where the table was measured
    print(f"{os.path.relpath(args.config, ROOT)}, {args.cores} cores shared by the ranks, gloo, {args.batch} x "
          f"{args.seconds:g} s utterances ({args.tokens} tokens of {args.vocab}) per rank and step; median of "
          f"{args.steps} steps after a warm-up, the slowest rank's.\n")
    print("| ranks | threads / rank | step (s) | utterances / s | speed-up | efficiency |")
    print("|---|---|---|---|---|---|")
    base = None
    for ranks in args.ranks:
        result = run_world(args, ranks)
        if result is None and base is None:
            return 1  # (no rate to measure the others against)
        if result is None:
            continue
        rate = ranks * args.batch / result["step"]
        base = base or rate
        speed_up = rate / base
        print(f"| {ranks} | {result['threads']} | {result['step']:.3f} | {rate:.1f} | {speed_up:.2f}x | "
              f"{speed_up / ranks:.0%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
