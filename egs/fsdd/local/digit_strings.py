#!/usr/bin/env python3
"""Connected digits from the Free Spoken Digit Dataset: strings of 2-7 digits made of one speaker's recordings.

Each new recording joins --min-digits to --max-digits random recordings of one speaker of the source
data dir (so strings made from the test split hold only test recordings), with pauses of 50-300 ms
between the digits and up to 200 ms of silence at either end; faint noise (about -60 dBFS) over the
whole string keeps the silences from being digital zero. The transcript is the digits' words in order.

Writes DEST/wav/*.wav and the Kaldi data dir DEST (wav.scp, text, utt2spk, spk2utt, utt2dur); the
utterance ids are <speaker>-<DEST's name>-<n>, so strings of two data dirs never share an id. Source
utterances that are not one word, lack a speaker, are commands, or whose audio is unreadable, empty,
not mono or not at --sample-rate are named (file:line), counted and skipped.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import soundfile
from rnnt.progress_bar import progress

from rnnt.cli import tool_parser
from rnnt.prep.data_dir_writer import Report, Utterance, read_counted_table, write_data_dirs
from rnnt.prep.unchanged_wav import write_unless_same

NOISE_LEVEL = 1e-3


def read_recordings(source: str, rate: int, report: Report) -> dict[str, list[tuple[np.ndarray, str]]]:
    """speaker -> [(samples, word)] of the source data dir's one-word utterances."""
    wav, text, speakers = (read_counted_table(os.path.join(source, name), report)
                           for name in ("wav.scp", "text", "utt2spk"))
    by_speaker: dict[str, list[tuple[np.ndarray, str]]] = {}
    for utt, line in progress(sorted(wav.items()), desc="digit_strings: reading", unit="utt", leave=False):
        words = text[utt].value.split() if utt in text else []
        if len(words) != 1:
            where = text[utt].where if utt in text else f"{line.where} (no transcript for {utt})"
            report.skip("not one word", where)
            continue
        if utt not in speakers:
            report.skip("no speaker", f"{line.where} (no utt2spk line for {utt})")
            continue
        if line.value.endswith("|"):
            report.skip("a command, not a file", line.where)
            continue
        try:
            samples, utt_rate = soundfile.read(line.value, dtype="float32", always_2d=True)
        except (OSError, RuntimeError) as error:
            report.skip("unreadable audio", f"{line.where} ({error})")
            continue
        if utt_rate != rate or samples.shape[1] != 1 or not len(samples):
            report.skip(f"not mono audio at {rate} Hz", f"{line.where} ({utt_rate} Hz, {samples.shape[1]} channels, "
                                                         f"{len(samples)} samples)")
            continue
        by_speaker.setdefault(speakers[utt].value, []).append((samples[:, 0], words[0]))
    return by_speaker


def make_string(rng: np.random.Generator, recordings: list[tuple[np.ndarray, str]], digits: int,
                rate: int) -> tuple[np.ndarray, list[str]]:
    """digits random recordings joined by random pauses, with random silence at the ends."""
    picks = [recordings[i] for i in rng.integers(0, len(recordings), digits)]

    def silence(low: float, high: float) -> np.ndarray:
        return np.zeros(int(rng.uniform(low, high) * rate), dtype=np.float32)

    pieces = [silence(0.0, 0.2)]
    for i, (samples, _) in enumerate(picks):
        pieces += [samples] if i == 0 else [silence(0.05, 0.3), samples]
    pieces.append(silence(0.0, 0.2))
    audio = np.concatenate(pieces)
    audio += rng.normal(0.0, NOISE_LEVEL, audio.shape).astype(np.float32)
    peak = float(np.abs(audio).max())
    if peak > 1.0:
        audio /= peak
    return audio, [word for _, word in picks]


def main() -> int:
    parser = tool_parser(__doc__)
    parser.add_argument("source", help="a prepared FSDD data dir (one digit an utterance)")
    parser.add_argument("dest", help="the new data dir; its audio goes to DEST/wav")
    parser.add_argument("--num", type=int, default=1000, help="strings to make (default 1000)")
    parser.add_argument("--min-digits", type=int, default=2)
    parser.add_argument("--max-digits", type=int, default=7)
    parser.add_argument("--sample-rate", type=int, default=8000, help="of the source audio (default 8000, FSDD's)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.num < 1 or not 1 <= args.min_digits <= args.max_digits or args.sample_rate < 1:
        parser.error("need --num >= 1, 1 <= --min-digits <= --max-digits and --sample-rate >= 1")
    for name in ("wav.scp", "text", "utt2spk"):
        if not os.path.isfile(os.path.join(args.source, name)):
            print(f"digit_strings.py: {os.path.join(args.source, name)} not found; run local/data_prep.py first",
                  file=sys.stderr)
            return 1
    report = Report("digit_strings")
    by_speaker = read_recordings(args.source, args.sample_rate, report)
    if not by_speaker:
        print(f"digit_strings.py: no usable one-digit recordings in {args.source}; {report.summary()}", file=sys.stderr)
        return 1
    rng = np.random.default_rng(args.seed)
    speakers = sorted(by_speaker)
    name = os.path.basename(os.path.normpath(args.dest))
    wav_dir = os.path.join(args.dest, "wav")
    os.makedirs(wav_dir, exist_ok=True)
    utterances = []
    for i in progress(range(args.num), desc="digit_strings: writing", unit="utt"):
        speaker = speakers[int(rng.integers(0, len(speakers)))]
        digits = int(rng.integers(args.min_digits, args.max_digits + 1))
        audio, words = make_string(rng, by_speaker[speaker], digits, args.sample_rate)
        utt = f"{speaker}-{name}-{i:05d}"
        path = os.path.join(wav_dir, f"{utt}.wav")
        write_unless_same(path, audio, args.sample_rate)  # a rerun: the same files, their shards reused
        utterances.append(Utterance(utt, speaker, path, " ".join(words)))
    return write_data_dirs({args.dest: utterances}, report)


if __name__ == "__main__":
    sys.exit(main())
