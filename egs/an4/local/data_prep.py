#!/usr/bin/env python3
"""Prepare CMU AN4 as Kaldi data dirs train, dev and test.

Reads the corpus's own lists: etc/an4_{train,test}.fileids (audio paths under wav/, no extension) and
etc/an4_{train,test}.transcription (Sphinx format `<s> WORDS </s> (<id>)`; the test file has no
<s> </s>). The audio may have any extension soundfile reads: CMU's archive has NIST SPHERE (.sph),
our copy FLAC. dev is a set of whole training speakers (half women, half men; about 100
utterances by default), so no speaker is in two sets. Utterance ids are <speaker>-<id without the
speaker>, e.g. fash-an251-b. Transcripts are normalised as scoring sees them: upper case, single
spaces. Transcripts without audio and unreadable audio are named by file and line and skipped.
"""

import glob
import os
import re
import sys

from rnnt.cli import at_least
from rnnt.prep.data_dir_writer import Report, Utterance, add_entry, data_prep_parser, write_data_dirs
from rnnt.prep.dev_speakers import pick_dev_speakers

TRANSCRIPT = re.compile(r"^(?:<s>\s+)?(?P<words>.*?)(?:\s+</s>)?\s*\((?P<id>[^()\s]+)\)\s*$")


def normalise(words: str) -> str:
    return " ".join(words.upper().split())


def read_transcription(path: str, report: Report) -> dict[str, tuple[str, str]]:
    """id -> (normalised words, 'file:line')."""
    text = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            match = TRANSCRIPT.match(line.strip())
            if match is None:
                report.skip("malformed transcript line (want '<s> WORDS </s> (id)')", f"{path}:{number}")
                continue
            words = normalise(match["words"].replace("<s>", " ").replace("</s>", " "))
            add_entry(text, match["id"], words, f"{path}:{number}", report)
    return text


def find_audio(wav_dir: str, fileid: str) -> str | None:
    """wav/<fileid>.<any extension>, preferring a lossless one."""
    found = glob.glob(os.path.join(glob.escape(wav_dir), glob.escape(fileid) + ".*"))
    order = {".sph": 0, ".flac": 1, ".wav": 2}
    found.sort(key=lambda p: (order.get(os.path.splitext(p)[1].lower(), 9), p))
    return found[0] if found else None


def split_utterances(corpus: str, part: str, report: Report) -> list[Utterance]:
    """The utterances of an4_<part> (train or test)."""
    etc = os.path.join(corpus, "etc")
    text = read_transcription(os.path.join(etc, f"an4_{part}.transcription"), report)
    fileids = os.path.join(etc, f"an4_{part}.fileids")
    utterances, listed = [], set()
    with open(fileids, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            fileid = line.strip()
            if not fileid:
                continue
            utt = os.path.basename(fileid)
            listed.add(utt)
            speaker = os.path.basename(os.path.dirname(fileid))
            if utt not in text:
                report.skip("no transcript for this file id", f"{fileids}:{number} ({utt})")
                continue
            audio = find_audio(os.path.join(corpus, "wav"), fileid)
            if audio is None:
                report.skip("audio not found", f"{fileids}:{number} (wav/{fileid}.*)")
                continue
            words = text[utt][0]
            if not words:
                report.skip("empty transcript", text[utt][1])
                continue
            rest = "-".join(p for p in utt.split("-") if p != speaker)
            utterances.append(Utterance(f"{speaker}-{rest}", speaker, audio, words, f"{fileids}:{number}"))
    for utt in sorted(set(text) - listed):  # the file list names the speaker: without it, no utterance
        report.skip("transcript whose id the file list lacks", f"{text[utt][1]} ({utt})")
    return utterances


def main() -> int:
    parser = data_prep_parser(__doc__, ("corpus_dir", "the an4/ folder (holds etc/ and wav/)"),
                              ("data_root", "writes <data_root>/train, <data_root>/dev and <data_root>/test"),
                              example="local/data_prep.py downloads/an4 data")
    parser.add_argument("--dev-speakers", type=at_least(1), default=8,
                        help="training speakers held out as dev (default 8)")
    args = parser.parse_args()
    lists = [f"etc/an4_{part}.{kind}" for part in ("train", "test") for kind in ("fileids", "transcription")]
    if missing := [name for name in lists if not os.path.isfile(os.path.join(args.corpus_dir, name))]:
        print(f"data_prep.py: {args.corpus_dir}: no {', '.join(missing)}; give the an4/ folder of the corpus",
              file=sys.stderr)
        return 1
    report = Report("an4 data_prep")
    train = split_utterances(args.corpus_dir, "train", report)
    speakers = sorted({u.speaker for u in train})  # AN4 speaker ids begin with their sex: f... or m...
    try:
        dev_speakers = pick_dev_speakers(speakers, {s for s in speakers if s.startswith("f")}, args.dev_speakers)
    except ValueError as error:
        print(f"data_prep.py: --dev-speakers {args.dev_speakers}: {error}", file=sys.stderr)
        return 1
    sets = {"train": [u for u in train if u.speaker not in dev_speakers],
            "dev": [u for u in train if u.speaker in dev_speakers],
            "test": split_utterances(args.corpus_dir, "test", report)}
    return write_data_dirs({os.path.join(args.data_root, name): utts for name, utts in sets.items()}, report)


if __name__ == "__main__":
    sys.exit(main())
