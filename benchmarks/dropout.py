#!/usr/bin/env python3
"""Dropout on the CPU: rnnt.model.dropout against torch.nn.Dropout, alone and in a training step.

The first table times one dropout's forward and backward (rate 0.1) on the activations it meets in the
recipes' models: a Conformer block's feed-forward (8 utterances of 150 frames, 576 wide), an LSTM
layer's output (8 x 300 x 512), the MLPerf joiner's (4 x 100 x 41 x 512), in float32 and bfloat16, on one
thread and on all. The second times a whole training step (forward and backward, the loss included) of
egs/an4's Conformer and of its default transducer (DeepSpeech 2's LSTMs) on a synthetic batch of 8
utterances of 3 s with 15 labels each, one thread, the two dropouts alternating step by step; the
models and batches are the same for both. Medians; prints markdown tables.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import rnnt  # noqa: F401  (first: keeps oneDNN off an AMX unit the machine cannot run)
import torch

from rnnt.cli import at_least, tool_parser
from rnnt.model import dropout
from rnnt.model.transducer import Transducer
from rnnt.training.experiment import load_experiment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {"Conformer feed-forward 8 x 150 x 576": (8, 150, 576), "LSTM output 8 x 300 x 512": (8, 300, 512),
          "MLPerf joiner 4 x 100 x 41 x 512": (4, 100, 41, 512)}
MODELS = {"egs/an4 Conformer": "egs/an4/conf/transducer_conformer.yaml",
          "egs/an4 default (LSTM)": "egs/an4/conf/transducer_conv_pruned_from_ctc_20ep.yaml"}
OURS = dropout.Dropout.forward


def torch_forward(module: torch.nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    return torch.nn.Dropout.forward(module, x)


def alternating_medians(run, runs: int) -> dict[str, float]:
    """Seconds of run(), its median over `runs` calls with each dropout, the two taking turns (which goes
    first alternating too)."""
    times = {"torch": [], "ours": []}
    order = [("torch", torch_forward), ("ours", OURS)]
    try:
        for _ in range(runs):
            for name, forward in order:
                dropout.Dropout.forward = forward
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
            order.reverse()
    finally:
        dropout.Dropout.forward = OURS
    return {name: statistics.median(values) for name, values in times.items()}


def dropout_row(name: str, shape: tuple[int, ...], dtype: torch.dtype, threads: int, runs: int) -> str:
    torch.set_num_threads(threads)
    x = torch.randn(shape, dtype=dtype, requires_grad=True)
    module = dropout.Dropout(0.1)
    gradient = torch.ones(shape, dtype=dtype)

    def run():
        module(x).backward(gradient)

    run()
    medians = alternating_medians(run, runs)
    return (f"| {name} | {str(dtype).removeprefix('torch.')} | {threads} | {medians['torch'] * 1e3:.2f} | "
            f"{medians['ours'] * 1e3:.2f} | {medians['ours'] / medians['torch']:.2f}x |")


def step_row(name: str, config: str, runs: int) -> str:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model_config = load_experiment(os.path.join(ROOT, config)).model
    model = Transducer(model_config, 40).train()
    frames, labels = 300, 15
    feats = torch.randn(8, frames, model_config.encoder.input_dim)
    feat_lens = torch.tensor([frames - 10 * i for i in range(8)])
    tokens, token_lens = torch.randint(1, 40, (8, labels)), torch.full((8,), labels)

    def run():
        model(feats, feat_lens, tokens, token_lens)["loss"].backward()

    run()
    medians = alternating_medians(run, runs)
    return (f"| {name} | {medians['torch'] * 1e3:.0f} | {medians['ours'] * 1e3:.0f} | "
            f"{medians['torch'] / medians['ours']:.2f}x |")


def main() -> int:
    parser = tool_parser(__doc__)
    parser.add_argument("--runs", type=at_least(1), default=20, help="calls timed per dropout and row")
    parser.add_argument("--step-runs", type=at_least(1), default=8, help="training steps timed per dropout")
    parser.add_argument("--no-steps", action="store_true", help="the first table only")
    args = parser.parse_args()
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line("cpu") + "\n")
    print("| activations | dtype | threads | torch.nn.Dropout (ms) | ours (ms) | ours / torch |")
    print("|---|---|---|---|---|---|")
    for name, shape in SHAPES.items():
        for dtype in (torch.float32, torch.bfloat16):
            for threads in sorted({1, os.cpu_count() or 1}):
                print(dropout_row(name, shape, dtype, threads, args.runs), flush=True)
    if not args.no_steps:
        print("\n| training step, one thread | with torch.nn.Dropout (ms) | with ours (ms) | speed-up |")
        print("|---|---|---|---|")
        for name, config in MODELS.items():
            print(step_row(name, config, args.step_runs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
