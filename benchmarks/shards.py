#!/usr/bin/env python3
"""make_shards throughput, one process (--nj 1), audio bytes kept: utterances/s, audio hours/minute, MB/s.

Corpora, built in a temporary dir from $RNNT_TEST_DATA (default ../shared/data):
  librispeech-flac: the 8 real LibriSpeech samples copied to --copies utterances (16 kHz FLAC, ~8 s each);
  fsdd-wav: the 3000 Free Spoken Digit recordings (8 kHz WAV, ~0.4 s each).
Each runs --runs times into a fresh shard dir; the table gives the median. Prints a markdown table.
"""

from __future__ import annotations

import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from rnnt.cli import tool_parser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_corpus(name: str, data: str, work: str, copies: int) -> tuple[str, float, int]:
    """A Kaldi data dir for the corpus; returns (dir, audio seconds, audio bytes)."""
    from rnnt.prep.data_dir_writer import Report, Utterance, write_data_dirs

    utterances = []
    if name == "librispeech-flac":
        samples = sorted(glob.glob(os.path.join(data, "librispeech_samples", "LibriSpeech", "*", "*", "*", "*.flac")))
        audio_dir = os.path.join(work, "flac")
        os.makedirs(audio_dir)
        for i in range(copies):
            source = samples[i % len(samples)]
            path = os.path.join(audio_dir, f"spk{i % 40:03d}-{i:06d}.flac")
            shutil.copyfile(source, path)
            utterances.append(Utterance(f"spk{i % 40:03d}-{i:06d}", f"spk{i % 40:03d}", path, "SOME WORDS"))
    else:
        for path in sorted(glob.glob(os.path.join(data, "fsdd", "recordings", "*.wav"))):
            digit, speaker, index = os.path.basename(path)[:-4].split("_")
            utterances.append(Utterance(f"{speaker}-{digit}-{int(index):02d}", speaker, path, "DIGIT"))
    data_dir = os.path.join(work, name)
    report = Report("shards benchmark")
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            if write_data_dirs({data_dir: utterances}, report) != 0:
                raise SystemExit(f"shards.py: {data_dir}: the data dir could not be written")
        finally:
            sys.stdout = stdout
    with open(os.path.join(data_dir, "utt2dur")) as f:
        seconds = sum(float(line.split()[1]) for line in f)
    size = sum(os.path.getsize(u.audio) for u in utterances)
    return data_dir, seconds, size


def main() -> int:
    parser = tool_parser(__doc__)
    parser.add_argument("--copies", type=int, default=2000, help="LibriSpeech utterances to build (default 2000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per corpus (default 3)")
    parser.add_argument("--utts-per-shard", type=int, default=500)
    args = parser.parse_args()
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line("cpu") + "\n")  # benchmarks/machine.py: where the table was measured
    data = os.environ.get("RNNT_TEST_DATA", os.path.join(ROOT, "..", "shared", "data"))
    print(f"make_shards.py --nj 1 --utts-per-shard {args.utts_per_shard}, audio kept; median of {args.runs} runs, "
          "whole process (Python start-up included).\n")
    print("| corpus | utterances | audio (h) | MB | time (s) | utterances/s | audio h/min | MB/s |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for name in ("librispeech-flac", "fsdd-wav"):
            data_dir, seconds, size = build_corpus(name, data, work, args.copies)
            with open(os.path.join(data_dir, "utt2spk")) as f:
                n = sum(1 for _ in f)
            times = []
            for run in range(args.runs):
                out = os.path.join(work, f"{name}-shards-{run}")
                start = time.perf_counter()
                subprocess.run([sys.executable, os.path.join(ROOT, "steps", "make_shards.py"), "--utts-per-shard",
                                str(args.utts_per_shard), data_dir, out, out + ".list"], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                times.append(time.perf_counter() - start)
                shutil.rmtree(out)
            t = statistics.median(times)
            print(f"| {name} | {n} | {seconds / 3600:.2f} | {size / 1e6:.0f} | {t:.2f} | {n / t:.0f} | "
                  f"{seconds / 3600 / (t / 60):.1f} | {size / 1e6 / t:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
