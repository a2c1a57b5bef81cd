#!/usr/bin/env python3
"""Prepare speechocean762 as Kaldi data dirs train, dev and (when the corpus has it) test.

Reads the corpus's own Kaldi-format halves, <corpus>/train/ and <corpus>/test/ (text, wav.scp with
paths relative to the corpus, utt2spk, spk2gender; tab- or space-separated). dev is a set of whole
training speakers (half women, half men; 10 by default), so no speaker is in
two sets; the test half, when present, is prepared as it is and never looked at otherwise.
Utterance ids become <speaker>-<utterance> (Kaldi sorts by speaker). Transcripts are normalised as
scoring sees them: upper case, single spaces. Missing or unreadable audio is named and skipped.
"""

import os
import sys

from rnnt.cli import at_least
from rnnt.prep.data_dir_writer import (Report, Utterance, add_entry, data_prep_parser, remove_stale_set,
                                       write_data_dirs)
from rnnt.prep.dev_speakers import pick_dev_speakers


def read_kaldi_table(path: str, report: Report) -> dict[str, tuple[str, str]]:
    """key -> (value, 'file:line')."""
    table = {}
    with open(path, encoding="utf-8-sig", errors="replace") as f:  # -sig: an editor's byte-order mark is no key
        for number, line in enumerate(f, 1):
            fields = line.rstrip("\n").replace("\t", " ").split(maxsplit=1)
            if not fields:
                continue
            if len(fields) != 2:
                report.skip("line without a value", f"{path}:{number}")
                continue
            add_entry(table, fields[0], fields[1].strip(), f"{path}:{number}", report)
    return table


def half_utterances(corpus: str, half: str, report: Report) -> tuple[list[Utterance], dict[str, str]]:
    """The utterances of <corpus>/<half>/, and speaker -> gender."""
    folder = os.path.join(corpus, half)
    text = read_kaldi_table(os.path.join(folder, "text"), report)
    wav = read_kaldi_table(os.path.join(folder, "wav.scp"), report)
    utt2spk = read_kaldi_table(os.path.join(folder, "utt2spk"), report)
    genders = {}
    if os.path.isfile(os.path.join(folder, "spk2gender")):
        genders = {s: g for s, (g, _) in read_kaldi_table(os.path.join(folder, "spk2gender"), report).items()}
    utterances = []
    for utt in sorted(text):
        words, where = text[utt]
        if utt not in wav:
            report.skip("no audio in wav.scp", f"{where} ({utt})")
            continue
        if utt not in utt2spk:
            report.skip("no speaker in utt2spk", f"{where} ({utt})")
            continue
        path = wav[utt][0]
        path = path if os.path.isabs(path) else os.path.join(corpus, path)
        if not os.path.isfile(path):
            report.skip("audio file not found", f"{wav[utt][1]} ({path})")
            continue
        speaker = utt2spk[utt][0]
        utterances.append(Utterance(f"{speaker}-{utt}", speaker, path, " ".join(words.upper().split()), where))
    for utt in sorted(set(wav) - set(text)):
        report.skip("audio without a transcript", wav[utt][1])
    return utterances, genders


def missing_files(corpus: str, half: str) -> list[str]:
    """The files of <corpus>/<half>/ that half_utterances reads and the half lacks."""
    return [f"{half}/{name}" for name in ("text", "wav.scp", "utt2spk")
            if not os.path.isfile(os.path.join(corpus, half, name))]


def main() -> int:
    parser = data_prep_parser(
        __doc__, ("corpus_dir", "the speechocean762/ folder (holds train/, WAVE/ and maybe test/)"),
        ("data_root", "writes <data_root>/train, <data_root>/dev and <data_root>/test"),
        example="local/data_prep.py downloads/speechocean762 data")
    parser.add_argument("--dev-speakers", type=at_least(1), default=10,
                        help="training speakers held out as dev (default 10)")
    args = parser.parse_args()
    if missing := missing_files(args.corpus_dir, "train"):
        print(f"data_prep.py: {args.corpus_dir}: no {' or '.join(missing)}; give the speechocean762/ folder",
              file=sys.stderr)
        return 1
    report = Report("speechocean762 data_prep")
    train, genders = half_utterances(args.corpus_dir, "train", report)
    women = {s for s, g in genders.items() if g == "f"}
    try:
        dev_speakers = pick_dev_speakers(sorted({u.speaker for u in train}), women, args.dev_speakers)
    except ValueError as error:
        print(f"data_prep.py: --dev-speakers {args.dev_speakers}: {error}", file=sys.stderr)
        return 1
    sets = {"train": [u for u in train if u.speaker not in dev_speakers],
            "dev": [u for u in train if u.speaker in dev_speakers]}
    if not (missing := missing_files(args.corpus_dir, "test")):
        sets["test"], test_genders = half_utterances(args.corpus_dir, "test", report)
        genders = {**genders, **test_genders}
    else:
        print(f"data_prep.py: {args.corpus_dir} has no test/ half ({' or '.join(missing)} missing); train and dev "
              "only", file=sys.stderr)
        remove_stale_set(os.path.join(args.data_root, "test"), f"{args.corpus_dir} has no test half")
    speakers = {u.speaker for utterances in sets.values() for u in utterances}  # spk2gender carried where whole
    spk2gender = genders if speakers <= genders.keys() and set(genders.values()) <= {"m", "f"} else None
    return write_data_dirs({os.path.join(args.data_root, name): utts for name, utts in sets.items()}, report,
                           spk2gender)


if __name__ == "__main__":
    sys.exit(main())
