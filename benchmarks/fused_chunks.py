#!/usr/bin/env python3
"""Fused joiner + loss by chunk size: forward + backward time and tensor peak of fused_joiner_loss at each
--chunks size (logits elements evaluated at once), then the kernels of one step at the default size under
the PyTorch profiler, sorted by device time. Float32, the joiner tanh + Linear(512 -> V), as
benchmarks/loss.py; its tensor peak as loss.py's (on a GPU the allocator's, on the CPU the profiler's).

On a GPU the fused loss is bound by how many chunks it cuts (each a handful of launches) until a chunk
fills the device; this shows where that happens and what the rest of the step's time is.
Prints a markdown table, then the profiler's table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loss import SHAPES, cuda_memory, make_step, select_device, tensor_peak_bytes  # noqa: E402


def timed_steps(step, runs: int, sync) -> list[float]:
    step()
    times = []
    for _ in range(runs):
        sync()
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return times


def fused_step(B, T, U, V, device, chunk_elements):
    """loss.py's fused joiner + loss step with its blocks of chunk_elements (None: the device's default)."""
    return make_step("fused", B, T, U, V, device=device, chunk_elements=chunk_elements)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--chunks", nargs="+", type=int, default=[1 << 20, 1 << 22, 1 << 23, 1 << 24, 1 << 25],
                        help="logits elements a chunk (default 1M 4M 8M 16M 32M)")
    parser.add_argument("--runs", type=int, default=5, help="timed steps per size (median)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-profile", action="store_true", help="leave out the profiler's table")
    args = parser.parse_args()
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line(args.device) + "\n")  # benchmarks/machine.py: where the table was measured
    import torch

    select_device(args.device)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    print("| shape | chunk (M elements) | time (s) median [min-max] | tensor peak (MiB) |\n|---|---|---|---|")
    for shape in args.shapes:
        for chunk in args.chunks:
            step = fused_step(*SHAPES[shape], args.device, chunk)
            times = timed_steps(step, args.runs, sync)
            spread = f"{statistics.median(times):.4f} [{min(times):.4f}-{max(times):.4f}]"
            peak = cuda_memory(step)["tensor_peak_mb"] if args.device.startswith("cuda") else \
                tensor_peak_bytes(step) / 2**20
            print(f"| {shape} | {chunk / 2**20:g} | {spread} | {peak:.1f} |", flush=True)
    if not args.no_profile:
        print(profile_table(fused_step(*SHAPES[args.shapes[-1]], args.device, None), args.device, sync))
    return 0


def profile_table(step, device: str, sync) -> str:
    """The profiler's table of one step after a warm-up, by device time on a GPU."""
    import torch

    step()
    sync()
    on_gpu = device.startswith("cuda")
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if on_gpu else [])
    with torch.profiler.profile(activities=activities) as profile:
        step()
        sync()
    return profile.key_averages().table(sort_by="cuda_time_total" if on_gpu else "cpu_time_total", row_limit=15)


if __name__ == "__main__":
    sys.exit(main())
