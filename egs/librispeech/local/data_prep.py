#!/usr/bin/env python3
"""Prepare one LibriSpeech subset as a Kaldi data dir.

Speaker = reader-chapter (as Kaldi's recipe), utterance ids <reader>-<chapter>-<n>; spk2gender from
SPEAKERS.TXT. Transcripts without audio, audio without transcripts and unreadable audio are named,
counted and skipped.
"""

import glob
import os
import sys

from rnnt.prep.data_dir_writer import (Report, Utterance, add_entry, data_prep_parser, pair_audio_with_text,
                                       write_data_dirs)


def read_speaker_genders(path: str) -> dict[str, str]:
    """reader id -> 'm' or 'f' from LibriSpeech's SPEAKERS.TXT ('ID | SEX | SUBSET | MINUTES | NAME')."""
    genders = {}
    if not os.path.isfile(path):
        return genders
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(";") or "|" not in line:
                continue
            fields = [field.strip() for field in line.split("|")]
            if fields[1] in ("M", "F"):
                genders[fields[0]] = fields[1].lower()
    return genders


def main() -> int:
    parser = data_prep_parser(
        __doc__, ("subset_dir", "e.g. .../LibriSpeech/dev-clean (holds <reader>/<chapter>/ folders)"),
        ("data_dir", "the Kaldi data dir to write"),
        example="local/data_prep.py corpus/LibriSpeech/dev-clean data/dev_clean")
    args = parser.parse_args()
    if not os.path.isdir(args.subset_dir):
        print(f"data_prep.py: {args.subset_dir}: no such directory", file=sys.stderr)
        return 1
    report = Report("librispeech data_prep")
    audio = {os.path.basename(p)[: -len(".flac")]: p
             for p in glob.glob(os.path.join(glob.escape(args.subset_dir), "*", "*", "*.flac"))}
    subsets = sorted(glob.glob(os.path.join(glob.escape(args.subset_dir), "*", "*", "*", "*.flac")))
    if not audio and subsets:  # LibriSpeech/ itself: "no usable utterances (nothing skipped)" said nothing of why
        names = sorted({os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(p)))) for p in subsets})
        print(f"data_prep.py: {args.subset_dir} holds subsets ({', '.join(names)}), not a subset's "
              f"<reader>/<chapter>/ folders: give one, e.g. {os.path.join(args.subset_dir, names[0])}", file=sys.stderr)
        return 1
    text = {}
    for trans in sorted(glob.glob(os.path.join(glob.escape(args.subset_dir), "*", "*", "*.trans.txt"))):
        with open(trans, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                fields = line.split(maxsplit=1)
                if len(fields) != 2:
                    report.skip("malformed transcript line", f"{trans}:{number}")
                    continue
                add_entry(text, fields[0], fields[1].strip(), f"{trans}:{number}", report)
    genders = read_speaker_genders(os.path.join(os.path.dirname(os.path.abspath(args.subset_dir)), "SPEAKERS.TXT"))
    utterances = []
    for utt, path, words, where in pair_audio_with_text(audio, text, report):
        speaker = "-".join(utt.split("-")[:2])
        utterances.append(Utterance(utt, speaker, path, words, where))
    spk2gender = None
    if genders:
        spk2gender = {u.speaker: genders.get(u.speaker.split("-")[0]) for u in utterances}
        if None in spk2gender.values():
            print("data_prep.py: some readers are not in SPEAKERS.TXT; spk2gender not written", file=sys.stderr)
            spk2gender = None
    return write_data_dirs({args.data_dir: utterances}, report, spk2gender)


if __name__ == "__main__":
    sys.exit(main())
