#!/usr/bin/env python3
"""Decoding speed on CPU: real-time factor per core of greedy and modified beam search (beam 4), and of
Graves beam search, at the LibriSpeech small configuration (egs/librispeech/conf/small.yaml); the beam
searches also with a 4-gram LM over the units fused in (modified_beam_lm, beam_lm), and the LM-fused
modified search's time against the plain one's (the goal: at most 3x).

The model is untrained; its joiner's blank bias is set so that greedy search emits about 40 tokens per
12 s utterance, the rate of BPE-500 units on LibriSpeech. Eight 12 s utterances, batch 8, one thread.
The LM is estimated from 2000 random 40-unit sentences (every unit seen, so every history backs off).
RTF per core = decoding seconds x threads / audio seconds. Prints a markdown table.
"""

from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import torch

from rnnt.cli import at_least, tool_parser
from rnnt.model.transducer import Transducer
from rnnt.search import greedy_search
from rnnt.lm.fusion import NgramScorer, ShallowFusion
from rnnt.lm.kneser_ney import estimate
from rnnt.search_methods import SearchOptions
from rnnt.training.experiment import load_experiment
from rnnt.transcriber import decode_batch

TOKENS_PER_UTTERANCE = 40


def calibrated_model(vocab: int, feats, feat_lens):
    torch.manual_seed(0)
    experiment = load_experiment(os.path.join(ROOT, "egs", "librispeech", "conf", "small.yaml"))
    model = Transducer(experiment.model, vocab).eval()
    with torch.no_grad():
        enc, enc_lens = model.encode(feats, feat_lens)
        low, high = -5.0, 30.0
        for _ in range(20):  # bisect the blank bias for the target emission rate
            mid = (low + high) / 2
            model.joiner.output.bias[0] = mid
            emitted = sum(len(h.tokens) for h in greedy_search(model, enc, enc_lens)) / len(feats)
            low, high = (mid, high) if emitted > TOKENS_PER_UTTERANCE else (low, mid)
    return model, emitted


def main() -> int:
    parser = tool_parser(__doc__)
    parser.add_argument("--runs", type=at_least(1), default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line("cpu") + "\n")  # benchmarks/machine.py: where the table was measured
    seconds, B = 12.0, 8
    T = int(seconds * 100 / 3)  # stacked 30 ms frames
    feats, feat_lens = torch.randn(B, T, 240), torch.full((B,), T)
    model, emitted = calibrated_model(500, feats, feat_lens)
    print(f"LibriSpeech small config, untrained, {B} x {seconds:.0f} s utterances, about {emitted:.0f} tokens each; "
          f"one thread; median of {args.runs} runs after one warm-up run.\n")
    print("| method | decode time (s) | RTF per core | x without the LM |")
    print("|---|---|---|---|")
    names = {"greedy": "greedy", "modified_beam": "modified beam 4", "beam": "beam 4 (Graves)",
             "modified_beam_lm": "modified beam 4 + 4-gram LM", "beam_lm": "beam 4 (Graves) + 4-gram LM"}
    timed = {}
    for method, name in names.items():
        # each LM method its own LM, its score cache warmed by its own first run only (shared, the second
        # method ran on the first's cache: its time depended on the order)
        lm = ShallowFusion(unit_lm(500), weight=0.3, length_bonus=0.5) if method.endswith("_lm") else None
        options = SearchOptions(beam=4, fusion=lm)
        decode_batch(model, feats, feat_lens, method, options)  # warm-up, untimed
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            decode_batch(model, feats, feat_lens, method, options)
            times.append(time.perf_counter() - start)
        timed[method] = t = sorted(times)[len(times) // 2]
        ratio = f"{t / timed[method[:-3]]:.2f}" if method.endswith("_lm") else ""
        print(f"| {name} | {t:.2f} | {t / (B * seconds):.4f} | {ratio} |", flush=True)
    return 0


def unit_lm(vocab: int) -> NgramScorer:
    """A 4-gram over units 1..vocab-1 from random sentences."""
    generator = torch.Generator().manual_seed(0)
    units = [str(u) for u in range(1, vocab)]
    sentences = [[units[i] for i in torch.randint(0, vocab - 1, (40,), generator=generator).tolist()]
                 for _ in range(2000)]
    return NgramScorer(estimate(sentences, 4, units), {u: str(u) for u in range(vocab)}, "random sentences")


if __name__ == "__main__":
    sys.exit(main())
