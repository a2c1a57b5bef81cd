#!/usr/bin/env python3
"""Decoding speed on CPU: real-time factor per core of greedy and modified beam search (beam 4), and of
Graves beam search, at the LibriSpeech small configuration (egs/librispeech/conf/small.yaml).

The model is untrained; its joiner's blank bias is set so that greedy search emits about 40 tokens per
12 s utterance, the rate of BPE-500 units on LibriSpeech. Eight 12 s utterances, batch 8, one thread.
RTF per core = decoding seconds x threads / audio seconds. Prints a markdown table.
"""

from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import torch

from rnnt.cli import tool_parser
from rnnt.model.transducer import Transducer
from rnnt.search import greedy_search
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
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    seconds, B = 12.0, 8
    T = int(seconds * 100 / 3)  # stacked 30 ms frames
    feats, feat_lens = torch.randn(B, T, 240), torch.full((B,), T)
    model, emitted = calibrated_model(500, feats, feat_lens)
    print(f"LibriSpeech small config, untrained, {B} x {seconds:.0f} s utterances, about {emitted:.0f} tokens each; "
          f"one thread; median of {args.runs} runs.\n")
    print("| method | decode time (s) | RTF per core |")
    print("|---|---|---|")
    for method in ("greedy", "modified_beam", "beam"):
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            decode_batch(model, feats, feat_lens, method, beam=4)
            times.append(time.perf_counter() - start)
        t = sorted(times)[len(times) // 2]
        name = {"greedy": "greedy", "modified_beam": "modified beam 4", "beam": "beam 4 (Graves)"}[method]
        print(f"| {name} | {t:.2f} | {t / (B * seconds):.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
