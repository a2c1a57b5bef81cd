#!/usr/bin/env python3
"""Prepare a folder of recordings and a transcript list as Kaldi data dirs train, dev and test.

The transcript list has one line per recording: the file's path relative to the corpus folder, with or
without its extension, then the transcript, separated by a space or tab (a tab where the path has spaces:
a line with a tab is split at it where the part before names a file, else at its first space):
    speaker1/hello_01.wav HELLO WORLD
    speaker1/hello_02     GOOD MORNING
Audio: any format soundfile reads (wav, flac, ogg, mp3, ...), any sample rate, mono or stereo. Transcripts
are NFKC-normalised, upper-cased, with single spaces (edit normalise()). A line without a transcript, or
naming a file that is not there, is reported by file and line number and skipped; so is unreadable audio;
the rest is kept. Every skipped line is named in <data>/local/skipped.txt, the first 20 of each kind on the
terminal too.

dev (and test, unless --test-transcripts lists the test recordings) are held out from the usable recordings of
the list: whole speakers where there are enough of them, else utterances at random (seed 0; rnnt.prep.held_out),
each in a place of its own in a seeded order, so that recordings added or removed later leave the other
recordings in their sets (but for one or two at a set's edge).

For a corpus in another layout, rewrite utterances() below; the rest is generic.
"""

import dataclasses
import functools
import os
import re
import sys
import unicodedata

from rnnt.prep.data_dir_writer import (NOT_UTF8_LINE, AudioInfo, Report, Utterance, data_prep_parser,
                                       remove_stale_set, usable_utterances, write_checked_dirs)
from rnnt.prep.held_out import hold_out

# the extensions of the formats soundfile reads (its headerless raw aside), taken in this order where one name
# has several: the common ones first
AUDIO = (".flac", ".wav", ".ogg", ".opus", ".mp3", ".sph", ".aiff", ".aif", ".au",
         ".caf", ".w64", ".rf64", ".oga", ".snd", ".nist", ".voc", ".htk", ".sd2", ".paf", ".pvf", ".xi", ".wve",
         ".avr", ".sds", ".mat", ".sf", ".ircam", ".mpc", ".8svx", ".svx", ".iff")


APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})  # typographic, as typed: the dictionary's


SENTENCE_MARKERS = {"<S>", "</S>"}  # as normalise() writes them


def normalise(text: str) -> str:
    """The transcript as it is trained on and scored: NFKC (as sentencepiece's BPE units read and write text: an
    accent typed as its own code point, CAFE + U+0301, is the one letter of CAFÉ), typographic apostrophes as
    the typed one (DON\u2019T is the dictionary's DON'T, one word, one LM word), upper case, single spaces."""
    return " ".join(unicodedata.normalize("NFKC", text).translate(APOSTROPHES).upper().split())


@functools.lru_cache(maxsize=64)
def audio_files(folder: str) -> dict[str, str]:
    """A folder's audio files by name without extension (the preferred extension where several share one), read
    once: a list that names a million files without their extensions reads each folder once, not per file."""
    files: dict[str, str] = {}
    with os.scandir(folder) as entries:
        for entry in entries:
            stem, extension = os.path.splitext(entry.name)
            if extension.lower() in AUDIO and entry.is_file():
                kept = files.get(stem)
                if kept is None or AUDIO.index(extension.lower()) < AUDIO.index(os.path.splitext(kept)[1].lower()):
                    files[stem] = entry.name
    return files


def find_audio(corpus_dir: str, name: str) -> str | None:
    """corpus_dir/name as listed, else corpus_dir/name.<an audio extension>, else (a name of an audio extension:
    a corpus converted since its list was written, take.wav now take.flac) its stem's audio file."""
    path = os.path.join(corpus_dir, name)
    if os.path.isfile(path):
        return path
    folder, base = os.path.split(path)
    files = audio_files(folder) if os.path.isdir(folder) else {}
    stem, extension = os.path.splitext(base)
    found = files.get(base) or (files.get(stem) if extension.lower() in AUDIO else None)
    return os.path.join(folder, found) if found else None


def utterance_id(text: str) -> str:
    """A Kaldi key: letters (of any script), digits, '_' and '-' (a shard's member is <key>.<extension>)."""
    return re.sub(r"[^\w-]", "_", text.replace(os.sep, "-"))


def utf16(path: str) -> bool:
    """Whether a text file is UTF-16: its byte-order mark, or NULs among its first bytes."""
    with open(path, "rb") as f:
        head = f.read(512)
    return head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\0" in head


def listed_fields(line: str, corpus_dir: str, where: str, report: Report) -> list[str] | None:
    """A transcript list line's file and transcript (a tab between them where the path holds spaces); [] for a
    blank line; None for a line skipped (named and counted in report)."""
    fields = line.split(maxsplit=1)
    if fields and "\ufffd" in line:
        report.skip(NOT_UTF8_LINE, where)
        return None
    if line.strip().count("\t") > 1:  # a table of more columns: they would be words of the transcript
        report.skip("more than two tab-separated fields (want '<file>\t<transcript>')", where)
        return None
    if "\t" in line.strip():  # the path up to the tab (it may hold spaces: take 2.wav beside take.wav)
        path_name, rest = (field.strip() for field in line.split("\t", 1))
        if find_audio(corpus_dir, path_name) is not None:
            fields = [path_name, rest]
    return fields


def speaker_of(stem: str, audio: str, speaker_regex: re.Pattern | None, where: str, report: Report) -> str | None:
    """The speaker id of a recording (stem: its path from the corpus folder, without the extension): the regex's
    first group, else the recording's own; None where the regex finds none (named and counted in report)."""
    if speaker_regex is None:
        return utterance_id(stem)  # unknown speakers: each recording its own
    if stem.startswith(os.pardir + os.sep):  # its speaker was '..', in silence
        report.skip("outside the corpus folder, whose paths --speaker-regex reads", f"{where} ({audio})")
        return None
    match = speaker_regex.search(stem)
    if match is None or not match.group(1):
        report.skip(f"no speaker in the file name (--speaker-regex '{speaker_regex.pattern}')", where)
        return None
    # '-' only between speaker and the rest: it sorts before every character a speaker id keeps, so utterances
    # sorted are sorted by speaker too (john-z before john_smith-a), as Kaldi requires
    return utterance_id(match.group(1)).replace("-", "_")


def utterances(corpus_dir: str, transcripts: str, speaker_regex: re.Pattern | None, report: Report) -> list[Utterance]:
    """The corpus's utterances: rewrite this for a corpus in another layout.

    Each Utterance is (utterance id, speaker id, audio path, transcript); the utterance id must start
    with the speaker id. Report what you skip with report.skip(reason, where) so that it is counted.
    """
    found: dict[str, Utterance] = {}
    marked = 0  # transcripts holding sentence markers (Sphinx's and the ARPA format's <s> ... </s>): removed
    # lines end at newlines only: a CR inside one (an editor's) is whitespace of its transcript, as Kaldi reads it
    with open(transcripts, encoding="utf-8-sig", errors="replace", newline="\n") as f:
        for number, line in enumerate(f, 1):
            where = f"{transcripts}:{number}"
            fields = listed_fields(line.lstrip("\ufeff"), corpus_dir, where, report)  # (a second list's BOM)
            if not fields:
                continue
            words = normalise(fields[1]).split() if len(fields) > 1 else []
            spoken = [word for word in words if word not in SENTENCE_MARKERS]
            marked += len(spoken) < len(words)
            if not spoken:
                report.skip("malformed line (want '<file> <transcript>')", where)
                continue
            audio = find_audio(corpus_dir, fields[0])
            if audio is None:
                header = number == 1  # 'path<TAB>transcript' or the like: no recording of the corpus
                report.skip("a first line naming no file, taken for a header" if header else "audio file not found",
                            f"{where} ({line.strip()[:60] if header else os.path.join(corpus_dir, fields[0])})")
                continue
            stem = os.path.splitext(os.path.relpath(audio, corpus_dir))[0]
            if (speaker := speaker_of(stem, audio, speaker_regex, where, report)) is None:
                continue
            utt = utterance_id(stem)  # Kaldi's order: prefixed by its speaker, '-' between
            utt = utt if utt == speaker or utt.startswith(speaker + "-") else f"{speaker}-{utt}"
            if utt in found:
                again = os.path.samefile(found[utt].audio, audio)
                report.skip("the recording is listed again" if again else "another recording makes the same "
                            f"utterance id as {found[utt].audio}: rename one", f"{where} ({utt})")
                continue
            found[utt] = Utterance(utt, speaker, audio, " ".join(spoken), where)
    if marked:  # (they trained as the letters < S >, and scored as words)
        print(f"data_prep.py: {transcripts}: {marked} transcripts held sentence markers (<s>, </s>): removed",
              file=sys.stderr)
    return [found[utt] for utt in sorted(found)]


def share(fraction: float, total: int) -> int:
    """How many utterances a fraction of total holds out: at least one unless the fraction is 0."""
    return max(1, round(fraction * total)) if fraction > 0 else 0


def main() -> int:
    parser = data_prep_parser(__doc__, ("corpus_dir", "the folder of recordings"),
                              ("data_root", "writes <data_root>/train, <data_root>/dev and <data_root>/test"),
                              example="local/data_prep.py --speaker-regex '^([^/]+)/' corpus data")
    parser.add_argument("--transcripts", help="the transcript list (default: <corpus_dir>/transcripts.txt)")
    parser.add_argument("--test-transcripts", default="",
                        help="a transcript list of the test recordings (default: --test-fraction held out)")
    parser.add_argument("--speaker-regex", default="",
                        help="its first group, searched in a file's path (relative to corpus_dir, without the "
                             "extension), names the speaker; default: each recording its own speaker")
    parser.add_argument("--dev-fraction", type=float, default=0.1, help="share held out as dev (default 0.1)")
    parser.add_argument("--test-fraction", type=float, default=0.1,
                        help="share held out as test without --test-transcripts (default 0.1; 0: no test set)")
    parser.add_argument("--seed", type=int, default=0, help="of the held-out draws (default 0)")
    args = parser.parse_args()
    transcripts = args.transcripts or os.path.join(args.corpus_dir, "transcripts.txt")
    try:
        regex = re.compile(args.speaker_regex) if args.speaker_regex else None
    except re.error as error:
        print(f"data_prep.py: --speaker-regex '{args.speaker_regex}': {error}", file=sys.stderr)
        return 1
    if regex is not None and regex.groups < 1:
        print(f"data_prep.py: --speaker-regex '{args.speaker_regex}' needs a group: (...)", file=sys.stderr)
        return 1
    if not 0 < args.dev_fraction < 0.5 or not 0 <= args.test_fraction < 0.5:
        print("data_prep.py: --dev-fraction must be above 0 and --test-fraction at least 0, both below 0.5",
              file=sys.stderr)
        return 1
    for path in (transcripts, args.test_transcripts):
        if path and not os.path.isfile(path):
            print(f"data_prep.py: no transcript list {path}; see --help for its format", file=sys.stderr)
            return 1
        if path and utf16(path):  # read as UTF-8, each of its lines was a file not found, NULs on the terminal
            print(f"data_prep.py: {path} is UTF-16 (Notepad's 'Unicode'): save it as UTF-8", file=sys.stderr)
            return 1
    report = Report("data_prep", listing=os.path.join(args.data_root, "local", "skipped.txt"))
    found = utterances(args.corpus_dir, transcripts, regex, report)
    if not found:
        print(f"data_prep.py: {transcripts}: no usable line ({report.summary()}); a line is '<file> <transcript>', "
              "split at its first space or tab (not CSV)", file=sys.stderr)
        return 1
    try:  # the audio and transcripts checked before the split: a bad file leaves a held-out set its size
        train, infos = usable(found, transcripts, report)
        if args.test_transcripts:
            test, test_infos = usable(utterances(args.corpus_dir, args.test_transcripts, regex, report),
                                      args.test_transcripts, report)
            infos.update(test_infos)
            in_test = {u.utt_id for u in test}
            for u in train:
                if u.utt_id in in_test:
                    report.skip("also in the test list", u.named())
            train, how = [u for u in train if u.utt_id not in in_test], f"{len(test)} from {args.test_transcripts}"
        else:
            train, test, how = hold_out(train, share(args.test_fraction, len(train)), args.seed, "test")
        print(f"data_prep: test: {how}")
        train, dev, how = hold_out(train, share(args.dev_fraction, len(train) + len(test)), args.seed, "dev")
        print(f"data_prep: dev: {how}")
    except ValueError as error:
        print(f"data_prep.py: {error}", file=sys.stderr)
        return 1
    sets = {"train": train, "dev": dev, "test": test}
    if not test:
        del sets["test"]
        remove_stale_set(os.path.join(args.data_root, "test"), "no test set this time")
    return write_checked_dirs({os.path.join(args.data_root, name): ([(u, infos[u.utt_id]) for u in utts],
                                                                    "checked before the split")
                               for name, utts in sets.items()}, report)


def usable(found: list[Utterance], where: str, report: Report) -> tuple[list[Utterance], dict[str, AudioInfo]]:
    """The utterances of a transcript list whose transcript (normalised) and audio a data dir can hold, and their
    audio's headers by utterance id (rnnt.prep.data_dir_writer.usable_utterances)."""
    kept = usable_utterances(where, [dataclasses.replace(u, text=normalise(u.text)) for u in found], report)
    return [u for u, _ in kept], {u.utt_id: info for u, info in kept}


if __name__ == "__main__":
    sys.exit(main())
