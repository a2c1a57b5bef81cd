"""Which files a Kaldi data dir holds, how each is keyed, and loading/writing a dir as a whole."""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections import Counter

from rnnt.datadir.speakers import utt2spk_to_spk2utt
from rnnt.datadir.table import KEEP_BYTES, kaldi_fields, read_lines, write_lines, write_table
from rnnt.datadir.values import VALUE_RULES

# name -> number of fields a line must have (None: at least two; text may have one).
PER_UTTERANCE = {"utt2spk": 2, "text": None, "segments": 4, "feats.scp": None,
                 "utt2dur": 2, "utt2num_frames": 2, "utt2lang": 2}  # an utterance missing from one is dropped,
# as Kaldi's fix drops it
FILTERED_UTTERANCE = {"vad.scp": None, "utt2uniq": 2, "utt2warp": 2}  # kept to the utterances kept, as Kaldi's fix
PER_SPEAKER = {"spk2gender": 2, "cmvn.scp": None}  # a speaker missing from one is dropped, as Kaldi's fix does
FILTERED_SPEAKER = {"spk2warp": 2}
PER_RECORDING = {"wav.scp": None, "reco2file_and_channel": 3, "reco2dur": 2}
FIELDS = {**PER_UTTERANCE, **FILTERED_UTTERANCE, **PER_SPEAKER, **FILTERED_SPEAKER, **PER_RECORDING}
# read by key alone, as Kaldi's fix filters them: a line of another shape ('a m  # checked' in spk2gender) is kept
# as written for validation to name, not dropped with every utterance it speaks for
KEYED_ONLY = {"spk2gender", "cmvn.scp", "utt2lang", "feats.scp", "reco2file_and_channel"}

Tables = dict[str, dict[str, str]]
KALDI_BLANKS = re.compile(r"[ \t]+")  # what separates fields in Kaldi's tables (not every Unicode space)


def read_normalised(path: str, dropped: Counter) -> dict[str, str]:
    """Reads '<key> <value>' records, repairing the spacing around the key and the line ends (a CR inside a line
    a space, as validation says), counting what it drops. Fields are split as Kaldi splits them, on spaces and
    TABs only; the value is kept as written between its first and last character (a quoted path with two spaces
    in a piped command, a no-break space in a name), and bytes that are not UTF-8 are kept (KEEP_BYTES), as
    Kaldi's tools keep them. A KEYED_ONLY file's lines are kept whatever their fields."""
    name = os.path.basename(path)
    n_fields = None if name in KEYED_ONLY else FIELDS.get(name)
    min_fields = 1 if name in ("text", *KEYED_ONLY) else 2
    records: dict[str, str] = {}
    for line in read_lines(path, KEEP_BYTES):
        stripped = line.text.rstrip("\r").replace("\r", " ").strip(" \t")  # a CR inside a line parts two words
        fields = KALDI_BLANKS.split(stripped) if stripped else []
        if not fields:
            continue
        if len(fields) < min_fields or (n_fields is not None and len(fields) != n_fields):
            dropped[f"malformed line in {name}"] += 1
            print(f"{line.where}: dropped, {len(fields)} fields", file=sys.stderr)
        elif name in VALUE_RULES and not VALUE_RULES[name][0](fields[1:]):
            dropped[f"bad value in {name}"] += 1
            print(f"{line.where}: dropped, value is not {VALUE_RULES[name][1]}", file=sys.stderr)
        elif fields[0] in records:
            dropped[f"duplicate key in {name}"] += 1
            print(f"{line.where}: dropped duplicate key '{fields[0]}'", file=sys.stderr)
        else:
            records[fields[0]] = KALDI_BLANKS.split(stripped, maxsplit=1)[1] if len(fields) > 1 else ""
    return records


def load_dir(data_dir: str, dropped: Counter | None = None, extra: tuple[str, ...] = ()) -> Tables:
    """Every known file of the dir and the extra ones named (spk2utt excepted: it is derived from utt2spk)."""
    path = os.path.join(data_dir, "utt2spk")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: {'a folder' if os.path.isdir(path) else 'missing'}; every data dir needs "
                                "utt2spk")
    dropped = Counter() if dropped is None else dropped
    return {name: read_normalised(os.path.join(data_dir, name), dropped)
            for name in (*FIELDS, *extra) if os.path.isfile(os.path.join(data_dir, name))}


def utterance_files(tables: Tables) -> list[str]:
    """The files keyed by utterance; wav.scp is one of them when there are no segments."""
    names = [name for name in PER_UTTERANCE if name in tables]
    return names + ["wav.scp"] if "wav.scp" in tables and "segments" not in tables else names


def write_spk2utt(dest: str, pairs) -> int:
    """Writes <dest>/spk2utt from (utterance, speaker) pairs; returns the number of speakers."""
    spk2utt = utt2spk_to_spk2utt(sorted(pairs))
    write_table(os.path.join(dest, "spk2utt"), ((s, " ".join(us)) for s, us in spk2utt.items()))
    return len(spk2utt)


def refuse_writing_over_a_source(sources: list[str], dest: str, what: str) -> None:
    """ValueError where dest is one of the dirs read (writing it would lose what they hold before it is read)."""
    for src in sources:
        if os.path.isdir(dest) and os.path.isdir(src) and os.path.samefile(src, dest):
            raise ValueError(f"{dest}: {what} must go to another dir than its source {src}")


def remove_unwritten(dest: str, written, extra: tuple[str, ...] = ()) -> None:
    """Removes the data-dir files (and the extra ones) an earlier run left in dest that this one does not write
    (those named in written): a stale utt2dur or spk2gender would be taken for the new dir's (Kaldi's tools
    start from an empty dest)."""
    for name in [*FIELDS, *extra, "spk2utt", "frame_shift", "stm"]:
        if name not in written and os.path.isfile(os.path.join(dest, name)):
            os.remove(os.path.join(dest, name))


def write_dir(tables: Tables, keep: set[str], dest: str, utt_extra: tuple[str, ...] = (),
              spk_extra: tuple[str, ...] = ()) -> set[str]:
    """Writes the files restricted to the utterances in keep (and their speakers and recordings); utt_extra and
    spk_extra name more files keyed by utterance and by speaker. Returns the recordings kept."""
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise ValueError(f"{dest}: exists and is not a directory")
    os.makedirs(dest, exist_ok=True)
    utt2spk = tables["utt2spk"]
    by_utterance = {*utterance_files(tables), *FILTERED_UTTERANCE, *utt_extra}
    speakers = {utt2spk[u] for u in keep}
    segments = tables.get("segments")
    recordings = {kaldi_fields(segments[u])[0] for u in keep if u in segments} if segments is not None else keep
    for name, records in tables.items():
        if name in by_utterance:
            wanted = keep
        elif name in PER_SPEAKER or name in FILTERED_SPEAKER or name in spk_extra:
            wanted = speakers
        else:
            wanted = recordings
        write_table(os.path.join(dest, name), ((k, v) for k, v in records.items() if k in wanted))
    write_spk2utt(dest, ((u, utt2spk[u]) for u in keep))
    return recordings


def carry_side_files(src: str, dest: str, recordings: set[str]) -> None:
    """As Kaldi's subset_data_dir.sh: frame_shift copied, and stm (for sclite) kept to the recordings kept, its
    ';;' comment lines first."""
    if os.path.isfile(os.path.join(src, "frame_shift")):
        shutil.copyfile(os.path.join(src, "frame_shift"), os.path.join(dest, "frame_shift"))
    if os.path.isfile(os.path.join(src, "stm")):
        lines = [line.text for line in read_lines(os.path.join(src, "stm"), KEEP_BYTES)]
        comments = [text for text in lines if text.startswith(";;")]
        kept = comments + [text for text in lines if kaldi_fields(text)[:1] and kaldi_fields(text)[0] in recordings]
        write_lines(os.path.join(dest, "stm"), kept)
