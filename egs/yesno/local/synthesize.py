#!/usr/bin/env python3
"""Synthesise yesno utterances (training's, and the dev set's with another seed): random sequences of the
training recordings' own words.

Kaldi's split trains on 30 recordings that all start with "no" and never hold a word more than five
times in a row, while the test recordings start with "yes" and hold runs of seven and eight. A
transducer takes both as rules of the language. This tool cuts every training recording into its
leading silence, words, pauses and trailing silence (found by energy), and writes new recordings:
a random leading silence, N random words (runs of one word as likely as alternations) with random
pauses between them, a random trailing silence, plus the corpus's own background noise (all its
silences, joined) at levels that change along the utterance, since a few recordings of both sets were
made with a loud and changing background; and, at random, a fragment of a word at either edge, as a
recording cut from a longer session catches.

Writes DEST/wav/*.wav and the Kaldi data dir DEST (wav.scp, text, utt2spk, spk2utt, utt2dur).
"""

from __future__ import annotations

import os
import sys
from functools import cached_property

import numpy as np
import soundfile
from rnnt.progress_bar import progress

from rnnt.cli import tool_parser
from rnnt.prep.data_dir_writer import Report, Utterance, read_counted_table, write_data_dirs
from rnnt.prep.unchanged_wav import write_unless_same
from word_segments import split_recording

SPEAKER = "yesno"


class Pieces:
    """Everything the synthesis draws from: word clips by word, pauses, leading and trailing silences."""

    def __init__(self):
        self.words: dict[str, list[np.ndarray]] = {}
        self.gaps: list[np.ndarray] = []
        self.leads: list[np.ndarray] = []
        self.trails: list[np.ndarray] = []
        self.rate = 0

    def add(self, path: str, transcript: list[str], where: str, report: Report) -> None:
        """Takes the recording's silences, and its words where the energy finds as many as the transcript; where:
        its wav.scp line, which a recording skipped is named by."""
        try:
            samples, rate = soundfile.read(path, dtype="float32", always_2d=True)
        except (OSError, RuntimeError) as error:  # gone, or not audio (soundfile's LibsndfileError)
            report.skip("unreadable audio", f"{where}: {path} ({error})")
            return
        if self.rate and rate != self.rate:
            report.skip(f"sample rate not {self.rate} Hz like the others", f"{where}: {path} ({rate} Hz)")
            return
        try:
            parts = split_recording(samples[:, 0], rate)
        except ValueError as error:
            report.skip(str(error), f"{where}: {path}")
            return
        self.rate = rate
        self.gaps += parts.gaps
        self.leads.append(parts.lead)
        self.trails.append(parts.trail)
        if len(parts.words) != len(transcript):
            report.skip("words found by energy do not match the transcript (its silences are used)",
                        f"{where}: the words of {path} ({len(parts.words)} found, {len(transcript)} in the "
                        "transcript)")
            return
        for word, clip in zip(transcript, parts.words):
            self.words.setdefault(word, []).append(clip)

    @cached_property
    def clips(self) -> list[np.ndarray]:
        """Every word clip, whatever the word (read once all recordings are added)."""
        return [clip for clips in self.words.values() for clip in clips]

    def background(self) -> np.ndarray:
        """Every silence joined into one track of unit RMS: the recordings' own background."""
        noise = np.concatenate(self.leads + self.gaps + self.trails).astype(np.float64)
        return noise / max(np.sqrt(np.mean(noise ** 2)), 1e-9)


def word_sequence(rng: np.random.Generator, words: list[str], min_words: int, max_words: int) -> list[str]:
    """A random sequence whose chance of repeating the previous word is itself random per sequence,
    so long runs of one word and strict alternations both occur."""
    length = int(rng.integers(min_words, max_words + 1))
    repeat = rng.uniform(0.1, 0.9)
    sequence = [str(rng.choice(words))]
    while len(sequence) < length:
        others = [w for w in words if w != sequence[-1]]
        sequence.append(sequence[-1] if rng.random() < repeat or not others else str(rng.choice(others)))
    return sequence


def synthesise(pieces: Pieces, sequence: list[str], noise: np.ndarray, levels_db: tuple[float, float],
               rng: np.random.Generator) -> np.ndarray:
    """Lead + words with pauses + trail, plus background noise whose level moves linearly from one
    random level in levels_db to another, so loud stretches of noise that are not words occur too.
    Half the utterances begin with the last 20-100 ms of a word and half end with the first 20-100 ms
    of one, untranscribed: recordings cut from a session catch the edges of the words around them."""
    def pick(clips):
        return clips[int(rng.integers(len(clips)))]

    def fragment_length() -> int:
        return int(rng.uniform(0.02, 0.1) * pieces.rate)

    parts = [pick(pieces.clips)[-fragment_length():]] if rng.random() < 0.5 else []
    parts.append(pick(pieces.leads))
    for k, word in enumerate(sequence):
        if k:
            parts.append(pick(pieces.gaps))
        parts.append(pick(pieces.words[word]))
    parts.append(pick(pieces.trails))
    if rng.random() < 0.5:
        parts.append(pick(pieces.clips)[:fragment_length()])
    audio = np.concatenate(parts).astype(np.float64)
    start = int(rng.integers(max(1, len(noise) - len(audio))))
    level_db = np.linspace(rng.uniform(*levels_db), rng.uniform(*levels_db), len(audio))
    audio += 10 ** (level_db / 20) * np.resize(noise[start:], len(audio))
    return np.clip(audio, -1.0, 1.0)


def main() -> int:
    parser = tool_parser(__doc__)
    parser.add_argument("src", help="a yesno data dir to draw from (wav.scp with plain paths, text)")
    parser.add_argument("dest", help="the data dir to write (its audio goes to DEST/wav/)")
    parser.add_argument("--num", type=int, default=600, help="utterances to write (default 600)")
    parser.add_argument("--min-words", type=int, default=1, help="fewest words an utterance (default 1)")
    parser.add_argument("--max-words", type=int, default=12, help="most words an utterance (default 12)")
    parser.add_argument("--noise-db", type=float, nargs=2, default=(-70.0, -30.0), metavar=("LOW", "HIGH"),
                        help="background noise levels, dB RMS re full scale: an utterance's noise fades between "
                             "two levels drawn uniformly from [LOW, HIGH] (default -70 -30)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="synth", help="utterance ids are <speaker>-<name><n> (default synth)")
    args = parser.parse_args()
    if args.num < 1 or not 1 <= args.min_words <= args.max_words or args.noise_db[0] > args.noise_db[1]:
        parser.error("need --num >= 1, 1 <= --min-words <= --max-words and --noise-db LOW HIGH with LOW <= HIGH")
    report = Report("yesno synthesize")
    wav_scp, text = os.path.join(args.src, "wav.scp"), os.path.join(args.src, "text")
    for path in (wav_scp, text):
        if not os.path.isfile(path):
            print(f"synthesize.py: {path} not found; run local/data_prep.py first", file=sys.stderr)
            return 1
    audio, transcripts = read_counted_table(wav_scp, report), read_counted_table(text, report)
    pieces = Pieces()
    for utt, line in audio.items():
        if utt not in transcripts:
            report.skip("no transcript", line.where)
        elif line.value.endswith("|"):
            report.skip("a command, not a file", line.where)
        else:
            pieces.add(line.value, transcripts[utt].value.split(), line.where, report)
    if not pieces.gaps or not pieces.words:
        print(f"synthesize.py: {args.src}: no recording could be cut into words ({report.summary()})", file=sys.stderr)
        return 1
    noise, words = pieces.background(), sorted(pieces.words)
    rng = np.random.default_rng(args.seed)
    os.makedirs(os.path.join(args.dest, "wav"), exist_ok=True)
    utterances = []
    for n in progress(range(args.num), desc="synthesize", unit="utt", leave=False):
        sequence = word_sequence(rng, words, args.min_words, args.max_words)
        samples = synthesise(pieces, sequence, noise, args.noise_db, rng)
        utt = f"{SPEAKER}-{args.name}{n:05d}"
        path = os.path.join(args.dest, "wav", f"{utt}.wav")
        write_unless_same(path, samples, pieces.rate)
        utterances.append(Utterance(utt, SPEAKER, path, " ".join(sequence)))
    return write_data_dirs({args.dest: utterances}, report)


if __name__ == "__main__":
    sys.exit(main())
