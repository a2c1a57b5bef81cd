#!/usr/bin/env python3
"""Global CMVN statistics of fbank features over a data list (raw or shards).

Writes <out> as a Kaldi stats matrix (2 x (D+1): feature sums and the frame count, then sums of
squares; kaldiio binary, readable by Kaldi's apply-cmvn) and <out>.json with the same numbers
({"mean_stat", "var_stat", "frame_num"}, as WeNet's global_cmvn) plus the mean and stddev.
"""

import json
import logging
import os
import sys

import numpy as np
import torch
from rnnt.progress_bar import progress

from rnnt.cli import at_least, cannot_write, error_line, run_tool, tool_parser, ToolError
from rnnt.data.audio import AudioError, load_audio, to_mono
from rnnt.data.cmvn_file import mean_and_std
from rnnt.data.features import PRESETS, check_mel_bins, fbank
from rnnt.data.resample import resample
from rnnt.data.sources import records


def features(record: dict, args) -> torch.Tensor:
    """The utterance's fbank in float64; AudioError where it has none (unreadable, or shorter than a frame)."""
    waveform, rate = load_audio(record["audio"], record.get("start"), record.get("end"))
    feats = fbank(resample(to_mono(waveform), rate, args.sample_rate), args.sample_rate, args.preset,
                  args.num_mel_bins, dither=0.0).double()
    if feats.shape[0] == 0:
        raise AudioError("shorter than a frame")
    return feats


def accumulate(utterances, args) -> tuple[torch.Tensor, torch.Tensor, int, int, int]:
    """(sums, sums of squares, frames, utterances used, skipped) over the utterances' features."""
    sums = torch.zeros(args.num_mel_bins, dtype=torch.float64)
    squares = torch.zeros(args.num_mel_bins, dtype=torch.float64)
    frames = used = skipped = 0
    for record in progress(utterances, desc="cmvn", unit="utt"):
        try:
            feats = features(record, args)
        except AudioError as error:
            print(f"compute_cmvn_stats.py: skipped {record['key']} ({record['source']}): {error}", file=sys.stderr)
            skipped += 1
            continue
        sums += feats.sum(0)
        squares += feats.square().sum(0)
        frames += feats.shape[0]
        used += 1
        if used == args.max_utts:
            break
    return sums, squares, frames, used, skipped


def main() -> str:
    parser = tool_parser(__doc__, "steps/compute_cmvn_stats.py data/train/data.list data/train/global_cmvn")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="kaldi", help="fbank preset (default kaldi)")
    parser.add_argument("--num-mel-bins", type=at_least(1), default=80)
    parser.add_argument("--sample-rate", type=at_least(1000), default=16000,
                        help="resample to this rate first (default 16000)")
    parser.add_argument("--max-utts", type=at_least(0), default=0,
                        help="use the first N utterances of the list (0: all); a list in speaker order gives its first "
                             "speakers' statistics: shuffle its lines first for a spread")
    parser.add_argument("data_list")
    parser.add_argument("out", help="output path of the Kaldi matrix; <out>.json is written beside it")
    args = parser.parse_args()
    try:  # (1000 bins at 8 kHz wrote a std of 1.7e-07 for the empty ones, exit 0)
        check_mel_bins(args.preset, args.sample_rate, args.num_mel_bins)
    except ValueError as error:
        parser.error(str(error).replace("data.features.num_mel_bins", "--num-mel-bins")
                     .replace("set data.sample_rate to", "give --sample-rate"))
    logging.basicConfig(level=logging.WARNING, format="compute_cmvn_stats.py: %(message)s")
    warned = WarningCount()  # list lines and shard members skipped, named by the data's readers
    logging.getLogger().addHandler(warned)
    import kaldiio

    try:
        utterances = records(args.data_list)
    except (OSError, ValueError) as error:
        raise ToolError(error_line(error)) from error
    sums, squares, frames, used, skipped = accumulate(utterances, args)
    if frames == 0:
        raise ToolError(f"{args.data_list}: no usable audio")
    stats = np.zeros((2, args.num_mel_bins + 1))
    stats[0, :-1], stats[0, -1], stats[1, :-1] = sums.numpy(), frames, squares.numpy()
    mean, std = mean_and_std(sums.numpy(), squares.numpy(), frames)
    try:  # (a folder of that name, or a file where a folder is wanted: tracebacks)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        kaldiio.save_mat(args.out, stats)
        with open(args.out + ".json", "w") as f:
            json.dump({"mean_stat": sums.tolist(), "var_stat": squares.tolist(), "frame_num": frames,
                       "mean": mean.tolist(), "std": std.tolist(), "preset": args.preset,
                       "sample_rate": args.sample_rate}, f)
    except OSError as error:
        raise cannot_write(error.filename or args.out, "the statistics", error) \
            from error
    return (f"{args.out}: {used} utterances, {frames} frames, {args.num_mel_bins} bins; skipped {skipped}"
            + (f"; {warned.count} more of the list or its shards skipped (named above)" if warned.count else ""))


class WarningCount(logging.Handler):
    """Counts the warnings logged (what the list's and shards' readers skip, each named as it is), but their own
    sums of those ('1 line skipped (named above), 5 kept')."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "(named above)" not in record.getMessage()


if __name__ == "__main__":
    run_tool(main)
