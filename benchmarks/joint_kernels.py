#!/usr/bin/env python3
"""The fused joiner + loss on a GPU two ways: blocks of logits (PyTorch matmuls and the row kernels) and
the Triton kernels that never hold logits (rnnt.loss.joint_kernels) at several launch shapes. Forward +
backward of loss.py's fused step (tanh + Linear(512 -> V)) in float32, TF32 or under bfloat16 autocast,
milliseconds (median after a warm-up), the step's tensor peak beyond what it held before (MiB) and its
loss; --profile adds each kernels row's top GPU kernels. A launch that fails (too much shared memory, say)
gets its error in the row and the rest go on. Prints a markdown table; loss.py compares the default path
(the blocks) with torchaudio.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fused_chunks import timed_steps  # noqa: E402
from loss import SHAPES, cuda_memory, make_step, select_device  # noqa: E402

# lattice cells x vocabulary columns x warps x hidden units a weight-gradient program sums
LAUNCHES = ["16x32x4x128", "16x32x4x64", "16x32x4x256", "16x32x4x512", "32x32x4x128", "16x32x8x128",
            "64x32x4x128"]


def print_top_kernels(step, top: int = 6) -> None:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=top), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--launches", nargs="+", default=LAUNCHES,
                        help="kernel launch shapes, CELLSxCOLUMNSxWARPS[xCHUNK]")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "tf32", "bf16"], default=["fp32"],
                        help="float32 products as IEEE or TF32, or the step under bfloat16 autocast")
    parser.add_argument("--profile", action="store_true", help="after each kernels row, its step's top GPU kernels")
    args = parser.parse_args()
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line(args.device) + "\n")  # benchmarks/machine.py: where the table was measured
    import torch

    from rnnt.loss import joint_triton

    select_device(args.device)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    print("| shape | precision | path | launch | ms | tensor peak (MiB) | loss |")
    print("|---|---|---|---|---|---|---|")
    for shape, precision in itertools.product(args.shapes, args.precisions):
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        for path, launch in [("blocks", "")] + [("kernels", launch) for launch in args.launches]:
            if path == "kernels":
                joint_triton.use_launch(launch)
            fused = make_step("fused", *SHAPES[shape], device=args.device, backend="triton", kernels=path == "kernels")

            def step(fused=fused, precision=precision):
                with torch.autocast(args.device.split(":")[0], torch.bfloat16, enabled=precision == "bf16"):
                    return fused()
            step.clear = fused.clear

            try:
                ms = statistics.median(timed_steps(step, args.runs, sync)) * 1e3
                peak = cuda_memory(step)["tensor_peak_mb"] if args.device.startswith("cuda") else float("nan")
                row = f"{ms:.2f} | {peak:.1f} | {step():.4f}"
            except Exception as error:  # noqa: BLE001 - one launch's failure is a result, the others still run
                row = f"failed: {type(error).__name__}: {(str(error).splitlines() or [''])[0][:120]} | | "
            print(f"| {shape} | {precision} | {path} | {launch} | {row} |", flush=True)
            if args.profile and path == "kernels":
                print_top_kernels(step)
            del step, fused
            torch.cuda.empty_cache() if args.device.startswith("cuda") else None
    return 0


if __name__ == "__main__":
    sys.exit(main())
