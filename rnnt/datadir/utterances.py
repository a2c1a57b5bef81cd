"""A data dir's utterances: each transcript paired with its audio (a wav.scp entry, or a segment of one), for
the tools that pack or list them. Whatever cannot be paired (audio without a transcript, a transcript without
audio or segment, a malformed segment, a repeated key), and a transcript Kaldi's rules refuse (not UTF-8, a
control character, <s>), is named by file and line and counted, not dropped in silence; the rest is kept."""

from __future__ import annotations

import os
from dataclasses import dataclass

from rnnt.counting import counted
from rnnt.datadir.table import KEEP_BYTES, Line, left_out, read_counting_left_out, read_table
from rnnt.datadir.table_rules import transcript_problem
from rnnt.datadir.values import segment_problem


@dataclass(frozen=True)
class Utterance:
    key: str
    text: str
    source: str  # a wav.scp value: a path, or a command ending in '|'
    where: str  # its transcript's file:line
    start: float | None = None  # seconds, with segments
    end: float | None = None
    audio_where: str = ""  # its wav.scp entry's file:line; a segment's: its segments line's, and its recording's


def read_utterances(data_dir: str) -> tuple[list[Utterance], list[str]]:
    """The dir's utterances sorted by key, and a message for each entry left out. Raises OSError without
    text or wav.scp."""
    skipped: list[str] = []
    text = read_table(os.path.join(data_dir, "text"), skipped, KEEP_BYTES)
    wav = read_table(os.path.join(data_dir, "wav.scp"), skipped, KEEP_BYTES)  # a path's bytes, as the file has them
    segments_path = os.path.join(data_dir, "segments")
    segmented = os.path.isfile(segments_path)  # wav.scp's keys are recordings, not utterances
    bad_text = _leave_out(text, {} if segmented else wav, lambda line: transcript_problem(line.text), skipped)
    _leave_out(wav, {} if segmented else text, lambda line: "no audio after the key" if not line.value else None,
               skipped)
    if segmented:
        utterances = segment_utterances(text, wav, read_table(segments_path, skipped), skipped, bad_text)
    else:
        utterances = [Utterance(key, line.value, wav[key].value, line.where, audio_where=wav[key].where)
                      for key, line in text.items() if key in wav]
        skipped += [f"{line.where}: {key}: no transcript in text" for key, line in wav.items() if key not in text]
        skipped += [f"{line.where}: {key}: no audio in wav.scp" for key, line in text.items() if key not in wav]
    return sorted(utterances, key=lambda utterance: utterance.key), skipped


def read_transcripts(data_dir: str) -> tuple[dict[str, Line], str]:
    """A data dir's transcripts for a tool that learns from them (units, a lexicon, an LM): its text but the lines
    read_table leaves out and the transcripts Kaldi's rules refuse, which training leaves out too, each named on
    standard error under the tool's name; and its summary line's account of them ('' where none was)."""
    path = os.path.join(data_dir, "text")
    transcripts, account = read_counting_left_out(path)
    refused: list[str] = []
    _leave_out(transcripts, {}, lambda line: transcript_problem(line.text), refused)  # as read_utterances
    for message in refused:
        left_out(f"{message}; left out", None)
    if refused:
        account += f"; {counted(len(refused), 'transcript')} Kaldi's rules refuse left out (named above)"
    return transcripts, account


def _leave_out(table: dict[str, Line], other: dict[str, Line], problem, skipped: list[str]) -> set[str]:
    """The keys of the lines of table that problem(line) finds a problem in (it says which, or None): each named,
    and its utterance gone from both tables (the one utterance, counted once)."""
    found = {key: why for key, line in table.items() if (why := problem(line))}
    for key, why in found.items():
        skipped.append(f"{table.pop(key).where}: {key}: {why}")
        other.pop(key, None)
    return set(found)


def segment_utterances(text: dict[str, Line], wav: dict[str, Line], segments: dict[str, Line],
                       skipped: list[str], named: set[str] = frozenset()) -> list[Utterance]:
    """The utterances of segments, each segment's transcript from text and audio from its recording's wav.scp
    entry; what cannot be paired named in skipped, but for the utterances named already (their transcripts)."""
    utterances = []
    for key, line in segments.items():
        fields = line.fields
        if len(fields) != 4:
            skipped.append(f"{line.where}: {key}: expected '<utterance> <recording> <start> <end>', "
                           f"got {len(fields)} fields")
        elif problem := segment_problem(fields[2], fields[3]):
            skipped.append(f"{line.where}: {key}: {problem}")
        elif fields[1] not in wav:
            skipped.append(f"{line.where}: {key}: its recording {fields[1]} is not in wav.scp")
        elif key not in text:
            if key not in named:
                skipped.append(f"{line.where}: {key}: no transcript in text")
        else:
            utterances.append(Utterance(key, text[key].value, wav[fields[1]].value, text[key].where,
                                        float(fields[2]), float(fields[3]),
                                        f"{line.where} (its recording {wav[fields[1]].where})"))
    skipped += [f"{line.where}: {key}: no segment in segments" for key, line in text.items() if key not in segments]
    return utterances
