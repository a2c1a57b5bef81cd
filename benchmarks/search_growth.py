#!/usr/bin/env python3
"""The host-side searches' time per frame as the labels found so far grow: Graves beam search, the LM-fused
modified beam search and CTC prefix beam search (beam 4; with and without a 3-gram LM over the units), on
one utterance of 1000 frames and of 8000 (30 ms frames: 30 s and 4 minutes of audio, decoded whole).

The model is a tiny untrained one (a one-layer LSTM encoder of 6 units, a stateless predictor, 20 units,
its blank's bias lowered so that labels come often), so that its networks cost little and the per-frame
time is mostly the search's own bookkeeping: a frame's work that grows with the labels found so far shows
as a longer time per frame at 8000 frames than at 1000. One thread; prints a markdown table.
"""

from __future__ import annotations

import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))  # search_reference: the searches' tests' small models

import torch

from rnnt.cli import at_least, tool_parser
from rnnt.ctc_search import ctc_prefix_beam_search
from rnnt.lm.fusion import NgramScorer, ShallowFusion
from rnnt.lm.kneser_ney import estimate
from rnnt.modified_beam_search_lm import modified_beam_search_lm
from rnnt.search import beam_search
from search_reference import encoder_output, random_model

VOCAB = 20
SEARCHES = {"beam": "beam 4 (Graves)", "beam_lm": "beam 4 (Graves) + LM",
            "modified_beam_lm": "modified beam 4 + LM", "ctc_prefix": "CTC prefix beam 4",
            "ctc_prefix_lm": "CTC prefix beam 4 + LM"}


def unit_fusion() -> ShallowFusion:
    units = [f"u{i}" for i in range(1, VOCAB)]
    rng = random.Random(0)
    sentences = [[rng.choice(units) for _ in range(20)] for _ in range(200)]
    return ShallowFusion(NgramScorer(estimate(sentences, 3, units), dict(enumerate(["<blank>"] + units)),
                                     "random sentences"), weight=0.3)


def timed_search(search: str, frames: int) -> tuple[float, int]:
    """Seconds to search one utterance of `frames` frames, and the labels of its best hypothesis."""
    model = random_model(0, "stateless", search == "modified_beam_lm", vocab_size=VOCAB, ctc_weight=0.3)
    with torch.no_grad():
        model.joiner.output.bias[model.blank] = -1.0
    enc = encoder_output(0, model, frames)
    fusion = unit_fusion() if search.endswith("_lm") else None
    start = time.perf_counter()
    if search.startswith("ctc_prefix"):
        best = ctc_prefix_beam_search(model, enc[0], frames, 4, fusion)[0]
    elif search == "modified_beam_lm":
        best = modified_beam_search_lm(model, enc, torch.tensor([frames]), 4, fusion)[0][0]
    else:
        best = beam_search(model, enc[0], frames, 4, fusion=fusion)[0]
    return time.perf_counter() - start, len(best.tokens)


def main() -> int:
    parser = tool_parser(__doc__)
    parser.add_argument("--frames", type=at_least(1), nargs=2, default=[1000, 8000], metavar=("SHORT", "LONG"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line("cpu") + "\n")
    short, long = args.frames
    print(f"| search | ms a frame at {short} frames (labels) | ms a frame at {long} frames (labels) | growth |")
    print("|---|---|---|---|")
    for search, name in SEARCHES.items():
        (short_time, short_labels), (long_time, long_labels) = timed_search(search, short), timed_search(search, long)
        per_short, per_long = 1000 * short_time / short, 1000 * long_time / long
        print(f"| {name} | {per_short:.3f} ({short_labels}) | {per_long:.3f} ({long_labels}) | "
              f"{per_long / per_short:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
