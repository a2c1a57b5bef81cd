#!/usr/bin/env python3
"""Estimate an n-gram language model over a model's units from a data dir's transcripts (interpolated
Kneser-Ney) and write it as an ARPA file, for the LM-fused searches (steps/decode.py --method
modified_beam_lm, ctc_prefix_beam_lm, ...; a 2-gram over the units is LODR's low-order LM). The LM's
words are the unit symbols of LANG_DIR/units.txt, so character and BPE units get an LM over characters
or pieces; every unit has a unigram. With --over words, its words are the transcripts' words, searched
through a lexicon of the units (character or phone units: rnnt.lm.lexicon_search).
"""

import os
import sys
from collections import Counter

from rnnt.cli import at_least, cannot_write, error_line, run_tool, tool_parser, ToolError
from rnnt.counting import counted
from rnnt.data.tokenizer import BLANK, SPACE, UNK, Tokenizer
from rnnt.datadir.table import kaldi_fields
from rnnt.datadir.utterances import read_transcripts
from rnnt.lm.fusion import OVER
from rnnt.lm.arpa import write_arpa
from rnnt.lm.kneser_ney import BOS, EOS, estimate


SHOWN = 5  # transcripts named for what the model's units cannot spell


def spellable(tokenizer: Tokenizer, word: str) -> bool:
    """Whether the lexicon search can spell a word of a word LM in the model's units (characters all units, or a
    pronunciation in the lexicon)."""
    return word in tokenizer.lexicon if tokenizer.kind == "phone" else all(c in tokenizer.units for c in word)


def unknown_account(tokenizer: Tokenizer, over: str, keys: list[str], sentences: list[list[str]], lines: dict,
                    lang_dir: str) -> str:
    """Names (on standard error) the first transcripts holding what the model's units cannot spell (a unit LM's
    <unk>, a word LM's word the lexicon search never reaches: a lowercase text against uppercase units) and returns
    the summary's account of them ('' for none); ToolError where that is everything."""
    unknown = [[word for word in words if (word == UNK if over == "units" else not spellable(tokenizer, word))]
               for words in sentences]
    holding = [(key, found) for key, found in zip(keys, unknown) if found]
    for key, found in holding[:SHOWN]:
        print(f"build_ngram_lm.py: {lines[key].where}: {key}: " + (
            f"{len(found)} pieces {lang_dir} has no unit for (<unk> in the LM)" if over == "units" else
            f"{' '.join(found[:3])}: no spelling in {lang_dir}'s units"), file=sys.stderr)
    if not holding:
        return ""
    total = sum(word != SPACE for words in sentences for word in words)  # (a boundary spells no word)
    missing = sum(map(len, unknown))
    what = "units <unk>" if over == "units" else "words the units cannot spell"
    if missing == total:
        raise ToolError(f"{lang_dir}: its units spell none of the text's {total} {over} (the units of another text: "
                        "its case, its script?)")
    return (f"; {len(holding)} transcripts hold {what} ({missing} of {total}; the first {min(SHOWN, len(holding))}"
            " named above)")


def main() -> str:
    parser = tool_parser(__doc__, "steps/build_ngram_lm.py --order 6 data/train data/lang_char "
                                  "data/lang_char/lm_6gram.arpa")
    parser.add_argument("--order", type=at_least(1), default=4, help="the longest n-gram (default 4)")
    parser.add_argument("--over", choices=OVER, default="units",
                        help="the LM's words: the model's units (default) or the transcripts' words")
    parser.add_argument("data_dir", help="a Kaldi data dir: its text is the training text (train only, never test)")
    parser.add_argument("lang_dir", help="units.txt and units.json of the model the LM is for")
    parser.add_argument("arpa", help="the ARPA file to write")
    args = parser.parse_args()
    text_path = os.path.join(args.data_dir, "text")
    try:
        tokenizer = Tokenizer(args.lang_dir)
        transcripts, left_out = read_transcripts(args.data_dir)
    except (OSError, ValueError) as error:
        raise ToolError(error_line(error)) from error
    if not transcripts:
        raise ToolError(f"{text_path}: no transcript to train the LM on")
    if args.over == "words" and tokenizer.kind not in ("char", "phone"):  # (tuning refused it, once decoding began)
        raise ToolError(f"--over words: a word LM is searched through a lexicon of character or phone units; "
                        f"{args.lang_dir} holds {tokenizer.kind} units (an LM over them: leave --over out)")
    if args.over == "words":
        sentences = [kaldi_fields(line.value) for _, line in sorted(transcripts.items())]
    else:
        sentences = [tokenizer.unit_pieces(line.value) for _, line in sorted(transcripts.items())]  # as training's
    vocabulary = sorted({word for words in sentences for word in words}) if args.over == "words" else \
        [symbol for symbol in tokenizer.units if symbol not in (BLANK, BOS, EOS)]
    if not any(sentences):  # an LM of '<s> </s>' alone, which favours saying nothing
        raise ToolError(f"{text_path}: its {len(sentences)} transcripts hold no {args.over} to train the LM on")
    unknown = unknown_account(tokenizer, args.over, sorted(transcripts), sentences, transcripts, args.lang_dir)
    # (no n-gram is longer than a sentence and its markers: --order 10000000 took 22 s and 2 GB for a 10-gram)
    model = estimate(sentences, min(args.order, max(map(len, sentences)) + 2), vocabulary)
    try:
        os.makedirs(os.path.dirname(os.path.abspath(args.arpa)), exist_ok=True)
        write_arpa(model, args.arpa)
    except OSError as error:  # a directory of that name, a folder not writable, a full disk
        raise cannot_write(args.arpa, "the LM", error) from error
    per_order = Counter(len(ngram) for ngram in model)
    order = max(per_order)  # (the summary said 100-gram of a 17-gram, and counted the model once an order)
    longest = f" (--order {args.order}: the text's longest n-gram)" if order < args.order else ""
    word = args.over[:-1]  # unit, word
    return (f"{args.arpa}: {order}-gram{longest} over {counted(len(vocabulary), word)} from "
            f"{counted(len(sentences), 'transcript')} of {text_path} ({counted(sum(map(len, sentences)), word)}); "
            f"n-grams per order: {' '.join(str(per_order[k]) for k in range(1, order + 1))}"
            + unknown
            + left_out)


if __name__ == "__main__":
    run_tool(main)
