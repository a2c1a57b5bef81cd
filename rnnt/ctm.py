"""Word times as a NIST CTM file, as Kaldi's steps/get_ctm.sh writes one: '<file> <channel> <start> <duration>
<word> [<confidence>]' a line, seconds with two decimals, the word's confidence where the decode gave one
(rnnt.confidence), sorted by file, channel and start (sclite and asclite read it).

Without segments, an utterance is its own file on channel 1, times from its start (Kaldi's nbest-to-ctm).
Where the data dir has segments, times count from the start of the recording the utterance was cut from, and the
file and channel are those reco2file_and_channel gives the recording (as Kaldi's utils/ctm/convert_ctm.pl; a
recording it lacks is named and its utterances left out, as Kaldi's validate_data_dir.sh refuses the file),
or, without that file, the recording's id and channel 1.
"""

from __future__ import annotations

import math
import os

from rnnt.datadir.table import left_out, read_table, write_lines
from rnnt.datadir.values import segment_problem


def start_within(start: float, duration: float, frame_seconds: float) -> float:
    """A word's start, inside the audio: one emitted whole in the silence appended after it starts on the last
    frame that starts inside it (a CTM line of no duration at its end before; `duration - frame_seconds`, before
    that frame's start where the frame does not divide the duration, ran times backwards)."""
    if start < duration:
        return start
    return max(math.ceil(duration / frame_seconds - 1e-9) - 1, 0) * frame_seconds


def word_span(start: float, end: float, duration: float, frame_seconds: float) -> dict:
    """{"start", "end"} of a word from its first unit's frame start to its last's frame end (seconds), inside the
    audio (start_within; never past duration), to the millisecond and at least one long (a frame starting under
    0.5 ms before the end rounded to a word of 0 s)."""
    start = max(min(start_within(start, duration, frame_seconds), duration - 0.001), 0.0)
    return {"start": round(start, 3), "end": round(min(end, duration), 3)}


def recording_offsets(data_dir: str) -> dict[str, tuple[str, str, float]] | None:
    """utt -> (file, channel, start of the utterance in it) from data_dir's segments and reco2file_and_channel;
    None without segments. A malformed line of either is named by file and line on standard error and left out
    (its utterance's words then have no place in the ctm: ctm_rows names them)."""
    segments = os.path.join(data_dir, "segments")
    if not os.path.isfile(segments):
        return None
    channels = {}
    reco2file = os.path.join(data_dir, "reco2file_and_channel")
    if os.path.isfile(reco2file):
        for recording, line in read_table(reco2file).items():
            if len(line.fields) != 3:
                left_out(f"{line.where}: expected '<recording> <file> <channel>', got '{line.text}'; left out", None)
            else:
                channels[recording] = (line.fields[1], line.fields[2])
    offsets = {}
    for utt, line in read_table(segments).items():
        if len(line.fields) != 4:
            left_out(f"{line.where}: expected '<utt> <recording> <start> <end>', got '{line.text}'; left out", None)
        elif problem := segment_problem(line.fields[2], line.fields[3]):
            left_out(f"{line.where}: {utt}: {problem}; left out", None)
        elif os.path.isfile(reco2file) and line.fields[1] not in channels:  # its id beside NIST's names: unscored
            left_out(f"{line.where}: {utt}: recording {line.fields[1]} is not in {reco2file}; left out", None)
        else:
            file, channel = channels.get(line.fields[1], (line.fields[1], "1"))
            offsets[utt] = (file, channel, float(line.fields[2]))
    return offsets


def ctm_rows(words: dict[str, list[dict]], offsets: dict[str, tuple[str, str, float]] | None,
             unplaced: list[str]) -> list[str]:
    """The CTM lines of each utterance's words ({"word", "start", "end"}, seconds from the utterance's start, and
    "confidence" where given), sorted. An utterance the segments do not name is left out (its times belong to no
    recording) and appended to unplaced."""
    rows = []
    for utt, utterance_words in words.items():
        if offsets is not None and utt not in offsets:
            unplaced.append(utt)
            continue
        file, channel, offset = offsets[utt] if offsets is not None else (utt, "1", 0.0)
        for word in utterance_words:
            start = round(offset + word["start"], 2)
            confidence = f" {word['confidence']:.4f}" if "confidence" in word else ""
            duration = max(round(word["end"] - word["start"], 2), 0.01)  # (a last frame of under 5 ms: 0.00)
            rows.append((file, channel, start, duration, word["word"] + confidence))
    rows.sort(key=lambda row: (row[0], row[1], row[2]))
    return [f"{file} {channel} {start:.2f} {duration:.2f} {word}" for file, channel, start, duration, word in rows]


def write_ctm(path: str, words: dict[str, list[dict]], data_dir: str) -> list[str]:
    """Writes words' CTM (recording times where data_dir has segments); returns the utterances left out, those
    the segments do not name."""
    unplaced: list[str] = []
    write_lines(path, ctm_rows(words, recording_offsets(data_dir), unplaced))
    return unplaced
