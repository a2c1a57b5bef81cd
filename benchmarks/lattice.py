#!/usr/bin/env python3
"""The lattice's forward-backward alone (rnnt.loss.lattice.lattice_posteriors: log-likelihood and arc
posteriors from (B, T, U+1) arc log-probs), its two PyTorch schedules side by side: one scan per row of the
lattice (U + 1 steps, rnnt.loss.lattice_rows) and one step per anti-diagonal, or per frame in the one-symbol
lattice (T + U or T steps); which of them the backend picks (its cost model; these lattices all hold exactly
by rows); and on a CUDA device the Triton kernels too. Shapes from the recipes' batches (yesno, FSDD, AN4,
speechocean762-like) to loss.py's LibriSpeech-like ones; utterances of ragged length, float32. Milliseconds
per call, median after a warm-up. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fused_chunks import timed_steps  # noqa: E402
from loss import select_device  # noqa: E402

# name -> (B, T, U): T frames after the encoder's subsampling, U labels
SHAPES = {
    "yesno": (10, 100, 8), "FSDD": (32, 50, 2), "AN4": (8, 75, 20), "speechocean762": (8, 100, 40),
    "B8-T200-U50": (8, 200, 50), "B4-T400-U100": (4, 400, 100), "B8-T1000-U50": (8, 1000, 50),
    "B30-T440-U104": (30, 440, 104),
}


def random_lattice(B, T, U, one_sym, device):
    """Arc log-probs of a random joiner's output over 3 symbols, -inf off each utterance's lattice; the first
    utterance fills the padding, the others are up to a quarter shorter in frames and labels."""
    import torch

    g = torch.Generator().manual_seed(0)
    log_probs = torch.randn(B, T, U + 1, 3, generator=g).log_softmax(-1)
    T_b = T - torch.randint(0, T // 4 + 1, (B,), generator=g)
    U_b = U - torch.randint(0, U // 4 + 1, (B,), generator=g)
    T_b[0], U_b[0] = T, U
    if one_sym:
        U_b = torch.minimum(U_b, T_b)
    t, u = torch.arange(T)[None, :, None], torch.arange(U + 1)[None, None, :]
    node = (t < T_b[:, None, None]) & (u <= U_b[:, None, None])
    blank = log_probs[..., 0].masked_fill(~node, float("-inf"))
    label = log_probs[..., 1].masked_fill(~(node & (u < U_b[:, None, None])), float("-inf"))
    return [x.to(device) for x in (blank, label, T_b, U_b)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--device", default="cpu", help="cpu (default) or a CUDA device such as cuda or cuda:1")
    args = parser.parse_args()
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line(args.device) + "\n")  # benchmarks/machine.py: where the table was measured
    import torch

    from rnnt.loss import lattice, lattice_rows, lattice_triton

    select_device(args.device)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    triton = device.type == "cuda" and lattice_triton.triton_installed()
    cheaper = lattice_rows.cheaper  # forced below, so the rows still pay the CPU's exactness check as they do
    print("| batch | B, T, U | lattice | rows (ms) | steps (ms) | rows / steps | picked |"
          + (" Triton (ms) |" if triton else ""))
    print("|---|---|---|---|---|---|---|" + ("---|" if triton else ""))
    for name in args.shapes:
        B, T, U = SHAPES[name]
        for one_sym in (False, True):
            blank, label, T_b, U_b = random_lattice(B, T, U, one_sym, device)
            times = {}
            for schedule in ("rows", "steps"):
                lattice_rows.cheaper = lambda *shape, rows=schedule == "rows": rows
                times[schedule] = statistics.median(timed_steps(
                    lambda: lattice.lattice_posteriors(blank, label, T_b, U_b, one_sym, "torch"), args.runs, sync))
            lattice_rows.cheaper = cheaper
            picked = "rows" if cheaper(B, T + 1, U + 1, one_sym, device) else "steps"
            picked += " (auto: Triton)" if triton else ""  # the torch backend's choice; auto runs the kernels
            row = (f"| {name} | {B}, {T}, {U} | {'one symbol per frame' if one_sym else 'standard'} | "
                   f"{times['rows'] * 1e3:.2f} | {times['steps'] * 1e3:.2f} | {times['rows'] / times['steps']:.2f} | "
                   f"{picked} |")
            if triton:
                kernels = statistics.median(timed_steps(
                    lambda: lattice.lattice_posteriors(blank, label, T_b, U_b, one_sym, "triton"), args.runs, sync))
                row += f" {kernels * 1e3:.3f} |"
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
