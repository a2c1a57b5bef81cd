#!/usr/bin/env python3
"""The passes the transducer loss makes over its logits, PyTorch against the Triton kernels
(rnnt.loss.row_kernels) at several launch shapes: the forward's per-row log-normaliser and arc log-probs,
and the backward's gradient written over the logits. Rows as loss.py's shapes make them (B * T * (U+1)
rows of V), float32. Milliseconds per call (median after a warm-up) and the bandwidth it reaches (bytes
of logits read, and written by the gradient, a second). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fused_chunks import timed_steps  # noqa: E402
from loss import SHAPES, select_device  # noqa: E402

LAUNCHES = ["4096x4", "2048x4", "8192x8", "16384x8"]  # elements a program step x warps


def median_ms(call, runs: int, sync) -> float:
    return statistics.median(timed_steps(call, runs, sync)) * 1e3


def shape_of(name: str) -> tuple[int, int, int, int]:
    """(B, T, U, V) of one of loss.py's shapes, or of R<n>-V<v>: n rows of v."""
    if name in SHAPES:
        return SHAPES[name]
    rows, _, vocab = name.partition("-")
    if not (rows[:1] == "R" and vocab[:1] == "V" and rows[1:].isdigit() and vocab[1:].isdigit()):
        raise SystemExit(f"row_kernels.py: a shape is one of {', '.join(SHAPES)} or R<rows>-V<vocabulary>, got {name}")
    return 1, int(rows[1:]), 0, int(vocab[1:])


def passes(B, T, U, V, device):
    """The two passes of each backend on one shape's rows: {backend: (stats call, gradient call)}."""
    import torch

    from rnnt.loss import row_triton
    from rnnt.loss.logits_loss import logits_gradient, row_arc_log_probs

    g = torch.Generator(device=device).manual_seed(0)
    n = B * T * (U + 1)
    rows = torch.randn(n, V, device=device, generator=g)
    labels = torch.randint(1, V, (n,), device=device, generator=g)
    batch = torch.arange(n, device=device) // (T * (U + 1))
    post = torch.rand(2, n, device=device, generator=g) / 4
    scale = torch.ones(B, device=device)
    lse = rows.logsumexp(1)
    written = rows.clone()  # the gradient pass's, written in place (it wrote over the rows the statistics then read)

    def pair(triton):
        stats = (lambda: row_triton.row_stats(rows, labels, 0, torch.float32)) if triton else \
            (lambda: row_arc_log_probs(rows, labels, 0, False))
        return (stats,
                lambda: logits_gradient(written, lse, labels, batch, scale, 0, post[0], post[1], False, None,
                                        in_place=True, triton=triton))
    return {"torch": pair(False), "triton": pair(True)}, rows.numel() * rows.element_size()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["R8-V500"] + list(SHAPES),
                        help=f"{', '.join(SHAPES)} or R<rows>-V<vocabulary> (default: R8-V500 and all three)")
    parser.add_argument("--launches", nargs="+", default=LAUNCHES, help="Triton launch shapes, ELEMENTSxWARPS")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line(args.device) + "\n")  # benchmarks/machine.py: where the table was measured
    import torch

    from rnnt.loss import row_triton

    select_device(args.device)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    print("| shape | backend | launch | stats (ms) | stats GB/s | gradient (ms) | gradient GB/s |")
    print("|---|---|---|---|---|---|---|")
    for shape in args.shapes:
        calls, size = passes(*shape_of(shape), args.device)
        runs = [("torch", "chunks")] + [("triton", launch) for launch in args.launches]
        for backend, launch in runs:
            if backend == "triton":
                elements, warps = launch.split("x")
                row_triton.TILE_ELEMENTS, row_triton.WARPS = int(elements), int(warps)
            stats, gradient = (median_ms(call, args.runs, sync) for call in calls[backend])
            print(f"| {shape} | {backend} | {launch} | {stats:.3f} | {size / stats / 1e6:.0f} | {gradient:.3f} | "
                  f"{2 * size / gradient / 1e6:.0f} |", flush=True)
        del calls
        torch.cuda.empty_cache() if args.device.startswith("cuda") else None
    return 0


if __name__ == "__main__":
    sys.exit(main())
