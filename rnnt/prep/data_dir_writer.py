"""Writes a Kaldi data dir from a corpus's utterances, skipping and counting the bad ones.

Every corpus prep (local/<corpus>/data_prep.py) collects audio files and transcripts, pairs them
with pair_audio_with_text, and hands the pairs to write_data_dirs, which reads each audio header,
then writes wav.scp, text, utt2spk, spk2utt, utt2dur (and spk2gender), then validates the dir. An utterance
whose transcript Kaldi's text rules refuse or whose audio cannot be read is skipped, named and counted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections import Counter
from dataclasses import dataclass

from rnnt.cli import tool_parser
from rnnt.counting import counted
from rnnt.data.audio_header import AudioError, UnreadableAudio, open_audio
from rnnt.data.report import rates_text
from rnnt.datadir.layout import remove_unwritten, write_spk2utt
from rnnt.datadir.table import Line, read_table, write_table
from rnnt.datadir.table_rules import transcript_problems
from rnnt.datadir.validate import validate_data_dir
from rnnt.progress_bar import progress


def data_prep_parser(doc: str, corpus: tuple[str, str], output: tuple[str, str],
                     example: str | None = None) -> argparse.ArgumentParser:
    """The command line every recipe's local/data_prep.py starts from: the corpus's folder, then where the
    data dirs go, each a (name, help) pair; the recipe adds its own options."""
    parser = tool_parser(doc, example)
    for name, help_text in (corpus, output):
        parser.add_argument(name, help=help_text)
    return parser


@dataclass(frozen=True)
class Utterance:
    utt_id: str
    speaker: str
    audio: str  # path to a file soundfile can read
    text: str
    listed_at: str = ""  # 'file:line' of the corpus list's line that gave it, where a list did

    def named(self) -> str:
        """How a skip names it: by its list line, where it has one, and its id and audio."""
        return f"{self.listed_at} ({self.utt_id}, {self.audio})" if self.listed_at else f"{self.audio} ({self.utt_id})"


class Report:
    """Counts what was skipped and why, and names each skipped item: on standard error, or, with a listing
    file, the first `shown` of each reason there and every one in the file (a corpus with thousands of bad
    lines would bury the rest of the stage's output)."""

    def __init__(self, stage: str, listing: str | None = None, shown: int = 20):
        self.stage, self.listing, self.shown = stage, listing, shown
        self.skipped: Counter = Counter()
        if listing is not None and os.path.exists(listing):
            os.remove(listing)  # a run's own skips only

    def skip(self, reason: str, detail: str) -> None:
        self.skipped[reason] += 1
        line = f"{self.stage}: skipped {detail}: {reason}"
        if self.listing is None or self.skipped[reason] <= self.shown:
            print(line, file=sys.stderr)
        elif self.skipped[reason] == self.shown + 1:
            print(f"{self.stage}: more skipped as '{reason}': named in {self.listing} only", file=sys.stderr)
        if self.listing is not None:
            os.makedirs(os.path.dirname(os.path.abspath(self.listing)), exist_ok=True)
            with open(self.listing, "a", encoding="utf-8") as f:
                f.write(line + "\n")

    def summary(self, since: Counter | None = None) -> str:
        """What was skipped (since the counts `since` were taken, where given)."""
        counts = self.skipped - since if since is not None else self.skipped
        text = ", ".join(f"{n} {why}" for why, n in sorted(counts.items())) or "nothing skipped"
        hidden = self.listing is not None and any(n > self.shown for n in self.skipped.values())
        return text + (f" (each named in {self.listing})" if hidden and counts else "")


NOT_UTF8_LINE = "not UTF-8 (re-encode the file as UTF-8)"  # Report reasons of the lines a reader leaves out
REPEATED_KEY = "repeated key (the first kept)"


def add_entry(table: dict[str, tuple[str, str]], key: str, value: str, where: str, report: Report) -> None:
    """table[key] = (value, where), where 'file:line' it came from; a key seen before is reported by both
    lines and left out (the first kept). A line read with errors="replace" that was not UTF-8 is left out too (its
    transcript would hold U+FFFD for the bytes)."""
    if "\ufffd" in key or "\ufffd" in value:
        report.skip(NOT_UTF8_LINE, where)
    elif key in table:
        report.skip(REPEATED_KEY, f"{where} ({key}; first on {table[key][1]})")
    else:
        table[key] = (value, where)


def read_counted_table(path: str, report: Report) -> dict[str, Line]:
    """read_table of a data dir's table, each line it leaves out (not UTF-8, a repeated key) counted in report."""
    skipped: list[str] = []
    table = read_table(path, skipped)
    for message in skipped:
        reason = NOT_UTF8_LINE if "not UTF-8" in message else REPEATED_KEY
        report.skip(reason, message.removesuffix("; line left out").removesuffix("; left out"))
    return table


def pair_audio_with_text(audio: dict[str, str], text: dict[str, tuple[str, str]],
                         report: Report) -> list[tuple[str, str, str, str]]:
    """(utt, audio path, transcript, 'file:line' of the transcript) for keys with both; the rest are reported by
    name and counted.

    audio: utt -> path; text: utt -> (transcript, 'file:line' it came from).
    """
    for utt in sorted(set(text) - set(audio)):
        report.skip("transcript without audio", f"{text[utt][1]} ({utt})")
    for utt in sorted(set(audio) - set(text)):
        report.skip("audio without transcript", audio[utt])
    return [(utt, audio[utt], *text[utt]) for utt in sorted(set(audio) & set(text))]


@dataclass(frozen=True)
class AudioInfo:
    duration: float  # seconds
    rate: int
    channels: int


def audio_info(path: str) -> AudioInfo:
    """Duration, rate and channels from the file header; AudioError saying why if unreadable or empty, under
    0.5 ms (utt2dur's 0.000, which the validator refuses), or where the header gives no length or the file is cut
    short."""
    try:
        with open_audio(path) as info:  # (a WAV's data size left 0 counted as what follows: as the loader reads it)
            pass
    except (UnreadableAudio, OSError):
        raise AudioError("unreadable or empty audio") from None
    if info.frames <= 0 or info.samplerate <= 0:
        raise AudioError("unreadable or empty audio")
    if round(info.frames / info.samplerate, 3) <= 0:  # (a readable file: not 'unreadable or empty')
        raise AudioError("audio under 0.5 ms (utt2dur would say 0.000 s, which Kaldi's validator refuses)")
    return AudioInfo(info.frames / info.samplerate, info.samplerate, info.channels)


def audio_summary(infos: list[AudioInfo]) -> str:
    """'849 at 16000 Hz, 3 with several channels (...)': what the pipeline will find."""
    rates = Counter(i.rate for i in infos)
    summary = rates_text(rates)
    multi = sum(i.channels > 1 for i in infos)
    if multi:
        summary += f", {multi} with several channels (mixed down to mono when read)"
    if len(rates) > 1:
        summary += "; training resamples to its config's data.sample_rate on the fly, every epoch"
    return summary


def remove_stale_set(data_dir: str, why: str) -> None:
    """Removes a data dir an earlier run wrote and this one does not (a corpus copy without its test half):
    the recipe's later stages would take it for this run's."""
    if os.path.isdir(data_dir):
        shutil.rmtree(data_dir)
        print(f"data_prep: removed {data_dir}: {why}")


def write_data_dirs(dirs: dict[str, list[Utterance]], report: Report,
                    spk2gender: dict[str, str] | None = None) -> int:
    """Every data-prep tool's ending: checks every dest dir's utterances (usable_utterances), then, where each
    dir keeps one, writes them all (a dir left empty writes none: no train/ of this run beside an old dev/);
    the tool's exit status, 0, or 1 with the problem printed under the tool's name. Several dirs: each line
    names what was skipped checking it, and a last line everything skipped (before the split too)."""
    checked: dict[str, tuple[list[tuple[Utterance, AudioInfo]], str]] = {}
    try:
        for dest, utterances in dirs.items():
            since = Counter(report.skipped) if len(dirs) > 1 else None
            kept = usable_utterances(dest, utterances, report, since)
            checked[dest] = kept, report.summary(since)
    except ValueError as error:
        print(f"{os.path.basename(sys.argv[0])}: {error}", file=sys.stderr)
        return 1
    return write_checked_dirs(checked, report, spk2gender)


def write_checked_dirs(checked: dict[str, tuple[list[tuple[Utterance, AudioInfo]], str]], report: Report,
                       spk2gender: dict[str, str] | None = None) -> int:
    """Writes dirs of utterances usable_utterances kept, each with what checking it skipped (a tool that checks
    its whole corpus before splitting it, so that a bad file leaves a held-out set its size); exit status as
    write_data_dirs'."""
    try:
        for dest, (kept, skipped) in checked.items():
            write_data_dir(dest, kept, report.stage, skipped, spk2gender)
    except ValueError as error:
        print(f"{os.path.basename(sys.argv[0])}: {error}", file=sys.stderr)
        return 1
    if len(checked) > 1:
        print(f"{report.stage}: wrote {sum(len(kept) for kept, _ in checked.values())} utterances in {len(checked)} "
              f"data dirs; skipped in all: {report.summary()}")
    return 0


def usable_utterances(dest: str, utterances: list[Utterance], report: Report,
                      since: Counter | None = None) -> list[tuple[Utterance, AudioInfo]]:
    """The utterances dest can hold, each with its audio's header: a repeated id, a transcript Kaldi's text
    rules refuse or audio that cannot be read is skipped into the report; none left is a ValueError naming what
    was skipped (since the counts `since`, where given: this dir's)."""
    kept: list[tuple[Utterance, AudioInfo]] = []
    first_of: dict[str, Utterance] = {}
    for utt in progress(utterances, desc=f"audio headers of {dest}", unit=" files"):
        if not utt.utt_id.startswith(utt.speaker):
            raise ValueError(f"utterance id '{utt.utt_id}' must start with its speaker id '{utt.speaker}'")
        first = first_of.setdefault(utt.utt_id, utt)
        if first is not utt:  # a corpus list naming a file twice: one utterance, not an invalid dir
            report.skip("repeated utterance id (the first kept)", f"{utt.named()}; first {first.named()}")
            continue
        problems = transcript_problems(utt.text)
        if problems:
            report.skip("transcript Kaldi's text rules refuse",
                        f"{utt.named()}: {'; '.join(problem for problem, _, _ in problems)}")
            continue
        try:
            kept.append((utt, audio_info(utt.audio)))
        except AudioError as error:
            report.skip(str(error), utt.named())
    if not kept:  # (a corpus whose every file was skipped before the split: "nothing skipped" alone misled)
        before = f"; skipped in all: {report.summary()}" if since else ""
        raise ValueError(f"{dest}: no usable utterances ({report.summary(since)}{before}); no data dir written")
    return kept


def write_data_dir(dest: str, kept: list[tuple[Utterance, AudioInfo]], stage: str, skipped: str,
                   spk2gender: dict[str, str] | None = None) -> None:
    """Writes the dir of usable_utterances' and validates it; its line says what checking it skipped."""
    os.makedirs(dest, exist_ok=True)
    written = {"wav.scp", "text", "utt2spk", "spk2utt", "utt2dur", *(["spk2gender"] if spk2gender is not None else [])}
    remove_unwritten(dest, written)  # an earlier run's spk2gender or segments would not fit these utterances
    write_table(os.path.join(dest, "wav.scp"), ((u.utt_id, os.path.abspath(u.audio)) for u, _ in kept))
    write_table(os.path.join(dest, "text"), ((u.utt_id, u.text) for u, _ in kept))
    write_table(os.path.join(dest, "utt2spk"), ((u.utt_id, u.speaker) for u, _ in kept))
    write_table(os.path.join(dest, "utt2dur"), ((u.utt_id, f"{i.duration:.3f}") for u, i in kept))
    speakers = write_spk2utt(dest, ((u.utt_id, u.speaker) for u, _ in kept))
    if spk2gender is not None:
        write_table(os.path.join(dest, "spk2gender"),
                    ((s, spk2gender[s]) for s in sorted({u.speaker for u, _ in kept})))
    problems = validate_data_dir(dest, no_feats=True)
    if problems:
        raise ValueError(f"{dest}: the prepared dir is not valid:\n" + "\n".join(problems))
    hours = sum(i.duration for _, i in kept) / 3600
    print(f"{stage}: wrote {dest}: {counted(len(kept), 'utterance')}, {counted(speakers, 'speaker')}, {hours:.2f} h; "
          f"{skipped}; audio: {audio_summary([i for _, i in kept])}")
