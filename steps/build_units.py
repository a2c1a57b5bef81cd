#!/usr/bin/env python3
"""Build the output units from a data dir's text: sentencepiece BPE or unigram of a given size,
characters, words, or phones (the phones of <lang>/lexicon.txt, which steps/build_lexicon.py writes,
and the word boundary). Writes <lang>/units.txt (<blank> 0, <unk> 1, then the units), units.json
(the type) and, for bpe/unigram, bpe.model. Checks that the training text round-trips; for phones, that
every word has a pronunciation (those without one train as <unk> and are counted). With the data dir's
utt2dur, writes <lang>/unit_rate.json: each transcript's units a second, which training checks against
the encoder's frame rate when the model emits one symbol per frame.
"""

import collections
import json
import os
import random
import sys
import tempfile
import unicodedata

from rnnt.cli import at_least, error_line, run_tool, tool_parser, ToolError
from rnnt.counting import counted
from rnnt.data.lexicon import read_lexicon
from rnnt.data.tokenizer import BLANK, SPACE, UNIT_TYPES, UNK, Tokenizer
from rnnt.datadir.table import kaldi_fields, read_table
from rnnt.datadir.utterances import read_transcripts
from rnnt.datadir.values import is_positive_number
from rnnt.training.config_checks import UNIT_RATE_FILE


SAMPLED_SENTENCES = 10_000_000  # a longer text trains sentencepiece on a sample of this many lines


def sampled(lines: list[str]) -> list[str]:
    """lines, or where more than SAMPLED_SENTENCES, the same sample of them in every run, in their order.
    sentencepiece's own sampling (input_sentence_size) draws another in every process, whatever seed it is
    given: units.txt changed from one run to the next on the same text."""
    if len(lines) <= SAMPLED_SENTENCES:
        return lines
    return [lines[i] for i in sorted(random.Random(0).sample(range(len(lines)), SAMPLED_SENTENCES))]


def train_sentencepiece(lines: list[str], lang: str, kind: str, vocab_size: int, coverage: float) -> list[str]:
    import sentencepiece

    lines = sampled(lines)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
        f.writelines(line + "\n" for line in lines)
        corpus = f.name
    try:
        sentencepiece.SentencePieceTrainer.train(
            input=corpus, model_prefix=os.path.join(lang, "bpe"), model_type=kind, vocab_size=vocab_size - 1,
            character_coverage=coverage, unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1, hard_vocab_limit=False,
            minloglevel=2,
            # every line, however long: one over the default 4192 bytes was left out in silence, and a character
            # only it held had no unit at coverage 1.0 (and never under the default: sentencepiece refuses under 10)
            max_sentence_length=max([4192] + [len(line.encode("utf-8")) + 1 for line in lines]),
            # NFKC, not sentencepiece's default nmt_nfkc: that one makes word boundaries of the zero-width
            # characters the data dir rules accept (Persian's ZWNJ, U+200E/F), so such text did not round-trip
            normalization_rule_name="nfkc",
            unk_surface=UNK,  # <unk> decodes as itself (the default is U+2047), as tokens.txt spells it
        )
    finally:
        os.remove(corpus)
    model = sentencepiece.SentencePieceProcessor(model_file=os.path.join(lang, "bpe.model"))
    return [model.id_to_piece(i) for i in range(1, model.get_piece_size())]  # piece 0 is <unk>


def check_sentencepiece_sizes(args, lines: list[str]) -> None:
    """--character-coverage in sentencepiece's range, and a --vocab-size that holds the units every character
    needs (with the coverage 1.0: sentencepiece's own errors named its flags and an INTERNAL check)."""
    if not 0.98 <= args.character_coverage <= 1.0:
        raise ValueError(f"--character-coverage {args.character_coverage}: sentencepiece takes 0.98 to 1.0")
    characters = len(set(unicodedata.normalize("NFKC", "".join(lines))) - {" "})  # as sentencepiece reads them
    needed = characters + 3  # <blank>, <unk> and the word-start mark besides
    if args.character_coverage == 1.0 and args.vocab_size < needed:
        raise ValueError(f"--vocab-size {args.vocab_size}: the text has {characters} characters, so {args.unit_type} "
                         f"units need at least {needed} (with <blank>, <unk> and the word-start mark); raise it, or "
                         f"lower --character-coverage to leave rare characters as <unk>")


def build_inventory(args, lines: list[str]) -> tuple[list[str], dict]:
    """The units (without <blank> and <unk>) and units.json's values, for --unit-type."""
    config = {"type": args.unit_type}
    if args.unit_type in ("bpe", "unigram"):
        config["model"] = "bpe.model"
        check_sentencepiece_sizes(args, lines)
        units = train_sentencepiece(lines, args.lang_dir, args.unit_type, args.vocab_size, args.character_coverage)
        if len(units) + 2 < args.vocab_size:  # sentencepiece's soft limit: the text held no more pieces
            print(f"build_units.py: --vocab-size {args.vocab_size} asked, the text gives {len(units) + 2} units "
                  f"({args.unit_type}); units.txt holds those", file=sys.stderr)
        return units, config
    if args.unit_type == "phone":
        try:
            lexicon = read_lexicon(os.path.join(args.lang_dir, "lexicon.txt"))
        except OSError as error:
            raise ValueError(f"{error} (steps/build_lexicon.py writes one)") from None
        config["lexicon"] = "lexicon.txt"
        return sorted({phone for variants in lexicon.values() for phones in variants for phone in phones}
                      | {SPACE}), config
    counts = collections.Counter()
    for line in lines:
        counts.update(SPACE.join(kaldi_fields(line)) if args.unit_type == "char" else kaldi_fields(line))
    for special in (BLANK, UNK):  # a transcript's literal <unk> (Kaldi-style text) is the unit of id 1 already
        counts.pop(special, None)
    return sorted(counts), config


def phone_summary(lang_dir: str, tokenizer: Tokenizer, lines: list[str], size: int) -> str:
    """Phone units' checks: the transcripts with a word without a pronunciation (<unk> in its place), and those
    that spell back otherwise: homophones (KNOW, NO) read back as the lexicon's first word, which a search
    without the word LM and its lexicon cannot tell apart; the most common are printed."""
    unknown = respelt = 0
    homophones = collections.Counter()
    for line in lines:
        words = kaldi_fields(line)
        if any(word not in tokenizer.lexicon for word in words):
            unknown += 1
            continue
        spelt = kaldi_fields(tokenizer.decode(tokenizer.encode(line)))
        pairs = [(word, back) for word, back in zip(words, spelt) if word != back]
        respelt += bool(pairs)
        homophones.update(pairs)
    if homophones:
        common = ", ".join(f"{word}->{back} {n}" for (word, back), n in homophones.most_common(8))
        print(f"build_units.py: homophones spelt back as the lexicon's first word (only a search with the word LM "
              f"tells them apart): {common}", file=sys.stderr)
    return (f"{lang_dir}: {size} phone units from {counted(len(lines), 'transcript')}; {unknown} transcripts have "
            f"a word without a pronunciation (<unk> in its place), {respelt} spell back with a homophone")


def write_unit_rates(data_dir: str, lang_dir: str, tokenizer: Tokenizer, texts: dict) -> str:
    """<lang>/unit_rate.json from the data dir's text (read: texts) and utt2dur; a summary ('' without utt2dur)."""
    durations_file = os.path.join(data_dir, "utt2dur")
    if not os.path.isfile(durations_file):
        return ""
    durations = read_table(durations_file)
    rates = []
    for utt, line in durations.items():
        if not is_positive_number(line.value):
            print(f"build_units.py: {line.where}: duration '{line.value}' is not a positive number; left out of "
                  f"{UNIT_RATE_FILE}", file=sys.stderr)
        elif utt in texts:
            rates.append(len(tokenizer.encode(texts[utt].value)) / float(line.value))
    rates.sort()
    with open(os.path.join(lang_dir, UNIT_RATE_FILE), "w", encoding="utf-8") as f:
        json.dump({"units_per_second": [round(rate, 3) for rate in rates]}, f)
    if not rates:
        return ""
    median, p99 = rates[len(rates) // 2], rates[int(0.99 * (len(rates) - 1))]
    return f"; units a second: median {median:.1f}, 99th percentile {p99:.1f}"


def round_trips(tokenizer: Tokenizer, texts: dict) -> tuple[int, int, int]:
    """The transcripts whose units do not decode back to them, each of the first five named by line: (those that
    fail, those sentencepiece's NFKC normalisation changes, those with <unk>). A transcript with <unk> (a rare
    character --character-coverage leaves out, a literal <unk>) is counted, not a failure: it trains with id 1
    there; one NFKC changes (a decomposed É, ½, a full-width letter) trains as its normal form: named, not a
    failure."""
    lines = [line for line in texts.values() if line.value]
    decoded = [(line, tokenizer.decode(ids)) for line in lines
               if tokenizer.units[UNK] not in (ids := tokenizer.encode(line.value))]
    changed = [(line, text) for line, text in decoded if text != " ".join(kaldi_fields(line.value))]
    normalised = [(line, text) for line, text in changed
                  if text == unicodedata.normalize("NFKC", " ".join(kaldi_fields(line.value)))]
    failed = [line for line, text in changed if (line, text) not in normalised]
    for line in failed[:5]:
        print(f"build_units.py: {line.where}: does not round-trip: '{line.value}'", file=sys.stderr)
    for line, text in normalised[:5]:
        print(f"build_units.py: {line.where}: trains as its NFKC form {text!r} ({line.value!r} as written, which "
              "scoring compares with: normalise the data dir's text)", file=sys.stderr)
    return len(failed), len(normalised), len(lines) - len(decoded)


WORD_MARKS = "'-"  # punctuation inside words (DON'T, TWENTY-ONE) that transcripts keep


def unnormalised(texts: dict) -> list[str]:
    """Warnings for transcripts that look unnormalised: punctuation other than WORD_MARKS (units of its own, and
    'ZERO.' a word apart from 'ZERO'), letters in both cases (each case its own units). Either passed silently into
    the units and the WER."""
    marks, cases = {}, {}  # character -> the first line holding it
    for line in texts.values():
        for char in set(line.value):
            if unicodedata.category(char).startswith("P") and char not in WORD_MARKS:
                marks.setdefault(char, line.where)
            elif char != char.swapcase():
                cases.setdefault(char, line.where)
    mixed = sorted(char for char in cases if char.isupper() and char.lower() in cases)
    warnings = []
    if marks:
        listed = ", ".join(f"{char!r} (first {where})" for char, where in sorted(marks.items())[:5])
        warnings.append(f"punctuation in the transcripts: {listed}{', ...' if len(marks) > 5 else ''}: units of its "
                        "own, and 'WORD.' scored apart from 'WORD': remove it from the data dir's text unless your "
                        "test transcripts hold it too")
    if mixed:
        listed = ", ".join(f"{char}/{char.lower()} (first {cases[char]} and {cases[char.lower()]})"
                           for char in mixed[:5])
        warnings.append(f"letters in both cases in the transcripts: {listed}{', ...' if len(mixed) > 5 else ''}: "
                        "each case its own units: bring the data dir's text to one case")
    return warnings


def main() -> str:
    parser = tool_parser(__doc__, "steps/build_units.py --unit-type bpe --vocab-size 500 data/train data/lang")
    parser.add_argument("--unit-type", choices=UNIT_TYPES, default="bpe")
    parser.add_argument("--vocab-size", type=at_least(0), default=500,
                        help="bpe/unigram: units in units.txt, <blank> and <unk> included (default 500)")
    parser.add_argument("--character-coverage", type=float, default=1.0,
                        help="sentencepiece character coverage (default 1.0; 0.9995 suits large alphabets)")
    parser.add_argument("data_dir", help="a data dir whose text file trains the units")
    parser.add_argument("lang_dir", help="output dir")
    args = parser.parse_args()
    try:
        texts, left_out = read_transcripts(args.data_dir)
        lines = [" ".join(kaldi_fields(line.value)) for line in texts.values() if line.value]  # (a TAB between
        # words, which Kaldi's text takes as a space: under NFKC a piece of its own, and units.txt unreadable)
        if not lines:
            raise ValueError(f"{args.data_dir}/text has no transcripts")
        os.makedirs(args.lang_dir, exist_ok=True)
        units, config = build_inventory(args, lines)
    except (OSError, ValueError, RuntimeError) as error:  # sentencepiece: RuntimeError for a vocabulary too small
        raise ToolError(error_line(error)) from error
    with open(os.path.join(args.lang_dir, "units.txt"), "w", encoding="utf-8") as f:
        for i, unit in enumerate([BLANK, UNK] + units):
            f.write(f"{unit} {i}\n")
    config["vocab_size"] = len(units) + 2
    with open(os.path.join(args.lang_dir, "units.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
    for warning in unnormalised(texts):
        print(f"build_units.py: warning: {warning}", file=sys.stderr)
    tokenizer = Tokenizer(args.lang_dir)
    rates = write_unit_rates(args.data_dir, args.lang_dir, tokenizer, texts)
    if args.unit_type == "phone":
        return phone_summary(args.lang_dir, tokenizer, lines, len(units) + 2) + rates + left_out
    failed, normalised, with_unk = round_trips(tokenizer, texts)
    summary = (f"{args.lang_dir}: {len(units) + 2} {args.unit_type} units from {counted(len(lines), 'transcript')}; "
               f"{failed} transcripts do not round-trip, "
               + (f"{normalised} train as their NFKC form, " if normalised else "")
               + f"{with_unk} have <unk>{rates}{left_out}")
    if failed:
        raise ToolError(summary)
    return summary


if __name__ == "__main__":
    run_tool(main)
