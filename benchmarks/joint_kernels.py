#!/usr/bin/env python3
"""The fused joiner + loss on a GPU two ways: blocks of logits (PyTorch matmuls and the row kernels) and
the Triton kernels that never hold logits (rnnt.loss.joint_kernels) at several launch shapes. Forward +
backward of loss.py's fused step (tanh + Linear(512 -> V), float32), milliseconds (median after a
warm-up) and the step's tensor peak beyond what it held before (MiB). Prints a markdown table; loss.py
compares the default with torchaudio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fused_chunks import timed_steps  # noqa: E402
from loss import SHAPES, make_step  # noqa: E402

LAUNCHES = ["32x32x4", "16x64x4", "32x64x8", "64x32x8"]  # lattice cells x vocabulary columns x warps


def tensor_peak_mb(step, device) -> float:
    import torch

    if not device.startswith("cuda"):
        return float("nan")
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - held) / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--launches", nargs="+", default=LAUNCHES, help="kernel launch shapes, CELLSxCOLUMNSxWARPS")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    import torch

    from rnnt.loss import joint_triton

    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    fits = joint_triton.fits
    print("| shape | path | launch | ms | tensor peak (MiB) |")
    print("|---|---|---|---|---|")
    for shape in args.shapes:
        step = make_step("fused", *SHAPES[shape], device=args.device, backend="triton")
        for path, launch in [("blocks", "")] + [("kernels", launch) for launch in args.launches]:
            joint_triton.fits = (lambda enc, weight: False) if path == "blocks" else fits
            if path == "kernels":
                cells, columns, warps = map(int, launch.split("x"))
                joint_triton.TILE_ROWS, joint_triton.COLUMNS, joint_triton.WARPS = cells, columns, warps
                joint_triton.MAX_TILE_U = min(16, cells)
            ms = statistics.median(timed_steps(step, args.runs, sync)) * 1e3
            print(f"| {shape} | {path} | {launch} | {ms:.2f} | {tensor_peak_mb(step, args.device):.1f} |", flush=True)
        del step
        torch.cuda.empty_cache() if args.device.startswith("cuda") else None
    joint_triton.fits = fits
    return 0


if __name__ == "__main__":
    sys.exit(main())
