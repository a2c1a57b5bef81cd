#!/usr/bin/env python3
"""Data pipeline benchmark: one worker process, from shards to padded batches; and fbank alone.

Pipeline rows: utterances/s, x real time (audio seconds per wall second), padding share, with mlperf
features + SpecAugment + frame stacking (3/3), sort buffer 1000, dynamic batches; one thread; and the wait
for the first batch of an epoch resumed half way, in a fresh pipeline (as a restarted training's: no audio
kept).
Corpora from $RNNT_TEST_DATA: FSDD train (2520 utterances, 8 kHz) and the 8 LibriSpeech samples
listed 40 times (320 utterances, 16 kHz); FSDD once more with its decoded audio kept from the warm-up
epoch on (data.cache_audio_mb; not LibriSpeech x40, whose 40 copies of each utterance would hit it in one
epoch). fbank rows: milliseconds per utterance, Kaldi numerics,
ours against kaldi-native-fbank and (from benchmarks/venv-torchaudio) torchaudio.compliance.kaldi.fbank.
Prints markdown tables.
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from rnnt.cli import at_least, tool_parser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args: str) -> None:
    """A Python tool of the repo, run by this interpreter."""
    command([sys.executable, *args])


def command(argv: list[str]) -> None:
    """A preparation command, with this interpreter's folder first on PATH (the shell tools run `python3`, which
    is to be the one that imports rnnt, whether or not path.sh was sourced); its error output shown if it fails."""
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"pipeline.py: {' '.join(argv)} failed with status {done.returncode}:\n{done.stderr[-3000:]}")


def prepare(data: str, work: str) -> dict[str, tuple[str, str, int, int, bool]]:
    """name -> (shard list, lang dir, sample rate, max frames per batch, whether its keys are unique)."""
    fsdd = os.path.join(work, "fsdd")
    run(os.path.join(ROOT, "egs", "fsdd", "local", "data_prep.py"), os.path.join(data, "fsdd", "recordings"), fsdd)
    run(os.path.join(ROOT, "steps", "make_shards.py"), "--utts-per-shard", "300", os.path.join(fsdd, "train"),
        os.path.join(fsdd, "shards"), os.path.join(fsdd, "train.list"))
    run(os.path.join(ROOT, "steps", "build_units.py"), "--unit-type", "char", os.path.join(fsdd, "train"),
        os.path.join(fsdd, "lang"))
    ls = os.path.join(work, "ls")
    os.makedirs(ls)
    dirs = []
    for subset in ("dev-clean", "test-clean"):
        run(os.path.join(ROOT, "egs", "librispeech", "local", "data_prep.py"),
            os.path.join(data, "librispeech_samples", "LibriSpeech", subset), os.path.join(ls, subset))
        dirs.append(os.path.join(ls, subset))
    command([os.path.join(ROOT, "utils", "combine_data.sh"), os.path.join(ls, "all"), *dirs])
    run(os.path.join(ROOT, "steps", "make_shards.py"), os.path.join(ls, "all"), os.path.join(ls, "shards"),
        os.path.join(ls, "one.list"))
    with open(os.path.join(ls, "one.list")) as f:
        shard = f.read().strip()
    with open(os.path.join(ls, "train.list"), "w") as f:
        f.write(f"{shard}\n" * 40)
    run(os.path.join(ROOT, "steps", "build_units.py"), "--unit-type", "char", os.path.join(ls, "all"),
        os.path.join(ls, "lang"))
    # Batches of about 90 digit clips and about 25 LibriSpeech utterances: the 1000-utterance sort
    # buffer spans ten or more batches, as it should for low padding.
    return {"fsdd (8 kHz)": (os.path.join(fsdd, "train.list"), os.path.join(fsdd, "lang"), 8000, 4000, True),
            "LibriSpeech x40 (16 kHz)": (os.path.join(ls, "train.list"), os.path.join(ls, "lang"), 16000, 20000,
                                         False)}


def pipeline_row(name: str, list_path: str, lang: str, rate: int, max_frames: int, speed: bool, cache: bool,
                 runs: int) -> str:
    import torch

    from rnnt.data.config import data_config
    from rnnt.data.pipeline import Pipeline
    from rnnt.data.tokenizer import Tokenizer

    torch.set_num_threads(1)
    config = data_config({
        "sample_rate": rate, "speed_perturb": [0.9, 1.0, 1.1] if speed else [], "stack": 3, "subsample": 3,
        "features": {"preset": "mlperf", "num_mel_bins": 80, "dither": 1e-5},
        "spec_augment": {"freq_masks": 2, "freq_width": 27, "adaptive": True, "time_width": 0.05},
        "shuffle_buffer": 300, "sort_buffer": 1000, "batch": {"type": "dynamic", "max_frames": max_frames},
        "cache_audio_mb": 1024 if cache else 0,
    })
    pipeline = Pipeline(list_path, config, Tokenizer(lang), train=True)
    times, utts, seconds, frames, padded, batches = [], 0, 0.0, 0, 0, 0
    for epoch in range(runs + 1):
        start = time.perf_counter()
        n = f = p = b = 0
        for batch in pipeline.batches(epoch=epoch):
            n, b = n + len(batch["keys"]), b + 1
            f += int(batch["feat_lens"].sum())
            p += batch["feats"].shape[0] * batch["feats"].shape[1]
        if epoch:  # the first epoch warms up
            times.append(time.perf_counter() - start)
        utts, frames, padded, batches = n, f, p, b
    seconds = frames * 0.03  # stacked frames are 30 ms apart
    t = statistics.median(times)
    fresh = Pipeline(list_path, config, Tokenizer(lang), train=True)
    start = time.perf_counter()
    next(iter(fresh.batches(epoch=runs, skip=batches // 2)))
    resumed = time.perf_counter() - start
    return (f"| {name} | {'0.9/1.0/1.1' if speed else 'off'} | {'kept' if cache else 'off'} | {utts} | {t:.2f} | "
            f"{utts / t:.0f} | {seconds / t:.0f}x | {100 * (1 - frames / padded):.1f}% | {resumed:.2f} |")


FBANK_WORKER = r"""
import json, statistics, sys, time, soundfile, torch
torch.set_num_threads(1)
kind, paths = sys.argv[1], json.loads(sys.argv[2])
audio = [soundfile.read(p, dtype="float32") for p in paths]
def ours(x, rate):
    from rnnt.data.features import fbank
    return fbank(torch.from_numpy(x), rate, "kaldi", 80)
def knf(x, rate):
    import kaldi_native_fbank as k
    o = k.FbankOptions(); o.frame_opts.dither = 0; o.frame_opts.samp_freq = rate; o.mel_opts.num_bins = 80
    f = k.OnlineFbank(o); f.accept_waveform(rate, x); f.input_finished()
    return [f.get_frame(i) for i in range(f.num_frames_ready)]
def ta(x, rate):
    import torchaudio.compliance.kaldi as kaldi
    return kaldi.fbank(torch.from_numpy(x)[None] * 32768, num_mel_bins=80, dither=0.0, sample_frequency=rate)
fn = {"ours": ours, "knf": knf, "torchaudio": ta}[kind]
if kind == "knf":  # its API takes a list of 16-bit-scaled floats: made before the clock, as a caller would hold it
    audio = [((x * 32768).tolist(), rate) for x, rate in audio]
for x, rate in audio[:2]:
    fn(x, rate)
times = []
for _ in range(5):
    start = time.perf_counter()
    for x, rate in audio:
        fn(x, rate)
    times.append((time.perf_counter() - start) / len(audio))
print(json.dumps(statistics.median(times)))
"""


def fbank_rows(data: str, torchaudio_python: str) -> list[str]:
    sets = {
        "LibriSpeech samples (16 kHz, 8.2 s avg)": sorted(glob.glob(os.path.join(
            data, "librispeech_samples", "LibriSpeech", "*", "*", "*", "*.flac"))),
        "fsdd (8 kHz, 0.44 s avg), 200 files": sorted(glob.glob(os.path.join(
            data, "fsdd", "recordings", "*.wav")))[:200],
    }
    rows = []
    env = {**os.environ, "PYTHONPATH": ROOT}
    for name, paths in sets.items():
        result = {}
        for kind, python in (("ours", sys.executable), ("knf", sys.executable), ("torchaudio", torchaudio_python)):
            if not os.path.exists(python):
                continue
            out = subprocess.run([python, "-c", FBANK_WORKER, kind, json.dumps(paths)], capture_output=True,
                                 text=True, env=env)
            if out.returncode == 0:
                result[kind] = json.loads(out.stdout)
            else:
                print(f"pipeline.py: fbank {kind} failed: {out.stderr[-500:]}", file=sys.stderr)
        ours = result["ours"]
        for kind, t in result.items():
            rows.append(f"| {name} | {kind} | {t * 1000:.2f} | {t / ours:.1f}x |")
    return rows


def main() -> int:
    parser = tool_parser(__doc__)
    parser.add_argument("--runs", type=at_least(1), default=3, help="timed epochs per pipeline row (default 3)")
    parser.add_argument("--torchaudio-python",
                        default=os.path.join(ROOT, "benchmarks", "venv-torchaudio", "bin", "python"))
    args = parser.parse_args()
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line("cpu", threads=1) + "\n")  # benchmarks/machine.py: where the table was measured (rows: 1)
    data = os.environ.get("RNNT_TEST_DATA", os.path.join(ROOT, "..", "shared", "data"))
    print("Pipeline, one process, one thread, shards -> padded batches (mlperf fbank, SpecAugment, stacking 3/3, "
          "sort buffer 1000, dynamic batches of 4000 (fsdd) or 20000 (LibriSpeech) input frames); median of epochs "
          "after a warm-up.\n")
    print("| corpus | speed perturbation | audio cache | utterances | time (s) | utterances/s | x real time | "
          "padding | resumed half way: first batch (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for name, (list_path, lang, rate, max_frames, unique_keys) in prepare(data, work).items():
            rows = [(False, False), (True, False)] + ([(True, True)] if unique_keys else [])
            for speed, cache in rows:  # (speed perturbation, audio cache)
                print(pipeline_row(name, list_path, lang, rate, max_frames, speed, cache, args.runs), flush=True)
    print("\nfbank alone, Kaldi numerics, 80 bins, one thread: milliseconds per utterance (median of 5 passes), "
          "and time relative to ours.\n")
    print("| audio | implementation | ms / utterance | vs ours |")
    print("|---|---|---|---|")
    for row in fbank_rows(data, args.torchaudio_python):
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
