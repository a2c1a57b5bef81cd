"""Checks a Kaldi data directory with the rules of Kaldi's utils/validate_data_dir.sh: sorted unique
keys, utt2spk/spk2utt agreement, speaker prefixes, the same utterances in every per-utterance file,
clean text, well-formed segments and durations.

Every problem names the file, the line and how to fix it; exit status 1 when the dir is not valid.
Run as `utils/validate_data_dir.sh [--no-feats] [--no-text] [--no-wav] [--no-spk-sort] [--non-print] <data-dir>`.
"""

from __future__ import annotations

import os
import re
import sys

from rnnt.cli import tool_parser
from rnnt.counting import counted
from rnnt.datadir.table import KEEP_BYTES, read_lines
from rnnt.datadir.table_rules import (Problems, check_genders, check_recordings, check_same_keys, check_speakers,
                                      check_table, check_text, check_values, problems_in, segment_recordings)

TILDE_PATH = re.compile(r"^\S+\s+~")  # Kaldi refuses '~' in wav.scp: no shell expands it there
# Optional files Kaldi checks when present, keyed by utterance or by speaker: name -> most fields (None: any)
UTTERANCE_FILES = {"feats.scp": None, "utt2dur": 2, "utt2num_frames": 2, "vad.scp": None, "utt2lang": None,
                   "utt2uniq": None, "utt2warp": 2}
SPEAKER_FILES = {"cmvn.scp": None, "spk2warp": 2}


def validate_data_dir(data_dir: str, no_feats: bool = False, no_text: bool = False, no_wav: bool = False,
                      no_spk_sort: bool = False, non_print: bool = False) -> list[str]:
    """Returns the problems found (empty list: the directory is valid); the options are Kaldi's."""
    if not os.path.isdir(data_dir):
        return [f"{data_dir}: not a directory"]
    required = ["utt2spk", "spk2utt"] + [name for name, skipped in (("text", no_text), ("feats.scp", no_feats),
                                                                     ("wav.scp", no_wav)) if not skipped]
    missing = [name for name in required if not os.path.isfile(os.path.join(data_dir, name))]
    if missing:
        hints = {"feats.scp": " (pass --no-feats if features are computed on the fly)"}
        return [f"{os.path.join(data_dir, name)}: required file is "
                f"{'a folder' if os.path.isdir(os.path.join(data_dir, name)) else 'missing'}{hints.get(name, '')}"
                for name in missing]

    problems = Problems()
    utt2spk = check_table(os.path.join(data_dir, "utt2spk"), problems, 2, 2)
    spk2utt = check_table(os.path.join(data_dir, "spk2utt"), problems, 2)
    check_speakers(utt2spk, spk2utt, data_dir, problems, spk_sort=not no_spk_sort)
    if not utt2spk:
        problems.add(os.path.join(data_dir, "utt2spk"), "no utterances", "prepare the data dir again", "empty dir")
    segments = check_audio(data_dir, utt2spk, problems)
    if not no_text:
        text_path = os.path.join(data_dir, "text")
        text = check_table(text_path, problems, 1)
        check_text(text, problems, non_print)
        check_same_keys(utt2spk, "utt2spk", text, text_path, problems, "utterance")
    check_optional_tables(data_dir, utt2spk, spk2utt, segments, problems)
    return problems.summary()


def check_audio(data_dir: str, utt2spk: dict, problems: Problems) -> dict | None:
    """wav.scp, segments and reco2file_and_channel, as far as they are there; returns the segments (None
    without them)."""
    def path(name: str) -> str:
        return os.path.join(data_dir, name)

    wav = check_table(path("wav.scp"), problems, 2) if os.path.isfile(path("wav.scp")) else None
    for line in (wav or {}).values():
        if TILDE_PATH.match(line.text):
            problems.add(line.where, "'~' in wav.scp (no shell expands it there)", "write the path out in full",
                         "tilde")
    if not os.path.isfile(path("segments")):
        if wav is not None:  # recordings are utterances: so are reco2file_and_channel's keys
            check_same_keys(utt2spk, "utt2spk", wav, path("wav.scp"), problems, "utterance")
            check_reco2file_and_channel(path("reco2file_and_channel"), utt2spk, "utt2spk", "utterance", problems)
        return None
    segments = check_table(path("segments"), problems, 4, 4)
    check_values(segments, problems)
    if wav is not None:
        check_recordings(segments, wav, problems)
    else:  # Kaldi refuses it even under --no-wav: the segments cut recordings nobody lists
        problems.add(path("segments"), "segments is there but not wav.scp", "add wav.scp or remove segments",
                     "segments without wav")
    check_same_keys(utt2spk, "utt2spk", segments, path("segments"), problems, "utterance")
    check_reco2file_and_channel(path("reco2file_and_channel"), segment_recordings(segments), "segments", "recording",
                                problems)
    return segments


def check_reco2file_and_channel(path: str, recordings: dict, source: str, what: str, problems: Problems) -> None:
    """reco2file_and_channel where it is there: three fields, the recordings of source (the segments' or, without
    segments, the utterances), and channel A or B, as Kaldi's validator asks (it lets 1 pass with a warning only,
    so 1 passes here too)."""
    if not os.path.isfile(path):
        return
    channels = check_table(path, problems, 3, 3)
    check_same_keys(recordings, source, channels, path, problems, what)
    for line in channels.values():
        fields = line.fields
        if len(fields) == 3 and fields[2] not in ("A", "B", "1"):
            problems.add(line.where, f"channel '{fields[2]}' in reco2file_and_channel", "mark each channel A or B",
                         "channel")


def check_optional_tables(data_dir: str, utt2spk: dict, spk2utt: dict, segments: dict | None,
                          problems: Problems) -> None:
    """The per-utterance and per-speaker tables Kaldi checks when present, reco2dur and spk2gender."""
    def path(name: str) -> str:
        return os.path.join(data_dir, name)

    for files, reference, ref_name, what in ((UTTERANCE_FILES, utt2spk, "utt2spk", "utterance"),
                                             (SPEAKER_FILES, spk2utt, "spk2utt", "speaker")):
        for name, max_fields in files.items():
            if os.path.isfile(path(name)):
                table = check_table(path(name), problems, 2, max_fields)
                check_same_keys(reference, ref_name, table, path(name), problems, what)
                check_values(table, problems)
    if os.path.isfile(path("reco2dur")):
        table = check_table(path("reco2dur"), problems, 2, 2)
        recordings = segment_recordings(segments) if segments is not None else utt2spk  # as Kaldi
        check_same_keys(recordings, "segments" if segments is not None else "utt2spk", table, path("reco2dur"),
                        problems, "recording")
        check_values(table, problems)
    if os.path.isfile(path("spk2gender")):
        check_genders(path("spk2gender"), spk2utt, problems)


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, "utils/validate_data_dir.sh --no-feats data/train", prog="validate_data_dir.sh")
    parser.add_argument("--no-feats", action="store_true", help="feats.scp is not required")
    parser.add_argument("--no-text", action="store_true", help="text is not required")
    parser.add_argument("--no-wav", action="store_true", help="wav.scp is not required")
    parser.add_argument("--no-spk-sort", action="store_true",
                        help="utt2spk need not be sorted by speaker as well as by utterance")
    parser.add_argument("--non-print", action="store_true", help="non-printable characters in text are accepted")
    parser.add_argument("data_dir")
    args = parser.parse_args(argv)
    found = validate_data_dir(args.data_dir, args.no_feats, args.no_text, args.no_wav, args.no_spk_sort,
                              args.non_print)
    if found:
        for problem in found:
            print(problem, file=sys.stderr)
        total, listed = problems_in(found)
        listed = f"{listed} listed, the rest counted by kind" if listed < total else "listed"
        print(f"validate_data_dir.sh: {args.data_dir} is NOT valid ({total} problems, {listed})", file=sys.stderr)
        return 1
    n_utts = sum(1 for _ in read_lines(os.path.join(args.data_dir, "utt2spk"), KEEP_BYTES))
    print(f"validate_data_dir.sh: {args.data_dir} is valid ({counted(n_utts, 'utterance')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
