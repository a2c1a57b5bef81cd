"""Text <-> unit ids for the unit inventories of steps/build_units.py.

A lang dir holds units.txt ('<symbol> <id>', <blank> 0, <unk> 1) and units.json (the unit type:
bpe or unigram with bpe.model, char, word, or phone with lexicon.txt). Unknown symbols map to <unk>.
Phone units spell each word with its first pronunciation and put SPACE between words; decoding maps
each word's phones back to the first word of the lexicon that has them (the most frequent), else <unk>.
"""

from __future__ import annotations

import itertools
import json
import os

from rnnt.data.lexicon import read_lexicon
from rnnt.datadir.table import BYTE_ORDER_MARK, kaldi_fields

BLANK, UNK = "<blank>", "<unk>"
SPACE = "\u2581"  # the word-boundary mark of char units, as sentencepiece writes it




def read_units(path: str) -> dict[str, int]:
    """{symbol: id} of a units.txt: ids 0 to N - 1, each once, <blank> 0 and <unk> 1. The file defines the
    model's output layer, so any line against that is an error naming it by file and line (a gap in the ids
    would point past the layer, a repeated symbol or id would merge two units)."""
    units: dict[str, int] = {}
    where: dict[int, int] = {}  # id: the line that gave it
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if number == 1 and raw.startswith(BYTE_ORDER_MARK):  # (an editor's) it read as part of <blank>
                raise ValueError(f"{path}:1: a byte-order mark (U+FEFF) before the first symbol; save the file "
                                 "without it")
            try:  # fields apart at ASCII blanks alone, as C's isspace (sherpa-onnx) and Kaldi read them: a piece
                fields = kaldi_fields(raw.decode("utf-8"))  # may hold U+0085
            except UnicodeDecodeError:
                raise ValueError(f"{path}:{number}: not UTF-8") from None
            if len(fields) != 2 or not fields[1].isdigit():
                raise ValueError(f"{path}:{number}: expected '<symbol> <id>', got '{raw.decode('utf-8').rstrip()}'")
            symbol, unit = fields[0], int(fields[1])
            if symbol in units or unit in where:
                first = where[units[symbol]] if symbol in units else where[unit]
                raise ValueError(f"{path}:{number}: '{symbol} {unit}' repeats the "
                                 f"{'symbol' if symbol in units else 'id'} of line {first}")
            units[symbol], where[unit] = unit, number
    if units.get(BLANK) != 0 or units.get(UNK) != 1:
        raise ValueError(f"{path}: <blank> must be 0 and <unk> 1")
    if gaps := sorted(set(range(len(units))) - set(where)):
        raise ValueError(f"{path}: the ids must run from 0 to {len(units) - 1} (one a unit); {gaps[0]} is missing, "
                         f"and {max(where)} is the largest")
    return units


UNIT_TYPES = ("bpe", "unigram", "char", "word", "phone")
NEEDS = {"bpe": "model", "unigram": "model", "phone": "lexicon"}  # what a unit type's units.json names besides


def read_lang_config(lang_dir: str) -> dict:
    """A lang dir's units.json: the unit type and what it needs (sentencepiece model, lexicon)."""
    path = os.path.join(lang_dir, "units.json")
    with open(path, encoding="utf-8") as f:
        try:
            config = json.load(f)
        except ValueError as error:
            raise ValueError(f"{path}: not JSON ({error})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: not a JSON object")
    return config


def lang_unit_type(lang_dir: str) -> str:
    """The unit type named by a lang dir's units.json ('' when it has none)."""
    has_config = os.path.isfile(os.path.join(lang_dir, "units.json"))
    return read_lang_config(lang_dir).get("type", "") if has_config else ""


def sentencepiece_model(path: str, named_by: str):
    """A sentencepiece model loaded; a missing or damaged file is a ValueError naming it (sentencepiece's own
    RuntimeError went up as a traceback)."""
    import sentencepiece

    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such file ({named_by} names it as the units' model)")
    try:
        return sentencepiece.SentencePieceProcessor(model_file=path)
    except RuntimeError as error:
        raise ValueError(f"{path}: not a sentencepiece model ({str(error).strip().splitlines()[0]})") from None


class Tokenizer:
    def __init__(self, lang_dir: str):
        self.config = read_lang_config(lang_dir)
        where = os.path.join(lang_dir, "units.json")
        if "type" not in self.config:
            raise ValueError(f"{where}: no unit 'type' (steps/build_units.py writes it)")
        self.kind = self.config["type"]
        if self.kind not in UNIT_TYPES:  # any other trained every transcript as <unk>s, its words split at spaces
            raise ValueError(f"{where}: unit type '{self.kind}' is none of {', '.join(UNIT_TYPES)}")
        if self.kind in NEEDS and NEEDS[self.kind] not in self.config:
            raise ValueError(f"{where}: units of type {self.kind} name their '{NEEDS[self.kind]}'")
        self.units = read_units(os.path.join(lang_dir, "units.txt"))
        self.symbols = {i: s for s, i in self.units.items()}
        self.model = None
        if self.kind in ("bpe", "unigram"):
            self.model = sentencepiece_model(os.path.join(lang_dir, self.config["model"]), where)
            # units.txt is the inventory (a unit added by hand to word units trains); a piece it lacks is <unk>
            pieces = (self.model.id_to_piece(i) for i in range(1, self.model.get_piece_size()))  # 0: <unk>
            if unknown := [piece for piece in pieces if piece not in self.units]:
                raise ValueError(f"{lang_dir}/{self.config['model']}: {len(unknown)} of its pieces are not in "
                                 f"units.txt ('{unknown[0]}'): the two are of different builds (make them again "
                                 "with steps/build_units.py)")
        self.lexicon, self.spellings = {}, {}
        if self.kind == "phone":
            self.lexicon = read_lexicon(os.path.join(lang_dir, self.config["lexicon"]))
            # phones spelt back: the word whose first pronunciation (the one it trains as) they are, before one
            # that lists them later (WHEN's third, W IH N, read every WIN back as WHEN); on a tie the word listed first
            for word, variants in reversed(self.lexicon.items()):
                self.spellings.update({phones: word for phones in variants[1:]})
            for word, variants in reversed(self.lexicon.items()):
                self.spellings[variants[0]] = word

    @property
    def vocab_size(self) -> int:
        return len(self.units)

    def pieces(self, text: str) -> list[str]:
        if self.model is not None:
            return self.sentencepiece_pieces(text)
        if self.kind == "char":
            return list(SPACE.join(kaldi_fields(text)))
        if self.kind == "phone":
            pieces = []
            for word in kaldi_fields(text):
                pieces += ([SPACE] if pieces else []) + list(self.lexicon.get(word, [(UNK,)])[0])
            return pieces
        return kaldi_fields(text)

    def sentencepiece_pieces(self, text: str) -> list[str]:
        """The model's pieces of text, a whole word <unk> (Kaldi's mark of a word not transcribed) the unit <unk>
        after the word-start piece: sentencepiece spelt it < u n k > where its training text had those letters (a
        lowercase corpus)."""
        words = kaldi_fields(text)
        if UNK not in words:  # the words as the units were trained on them, a space apart (a TAB is a piece)
            return self.model.encode(" ".join(words), out_type=str)
        word_start = [SPACE] if SPACE in self.units else []
        pieces: list[str] = []
        while words:
            known = list(itertools.takewhile(lambda word: word != UNK, words))
            pieces += self.model.encode(" ".join(known), out_type=str) if known else [*word_start, UNK]
            words = words[len(known) or 1:]
        return pieces

    def encode(self, text: str) -> list[int]:
        unk = self.units[UNK]  # text never gives <blank> (id 0): a literal one in a transcript is unknown
        return [self.units.get(piece, unk) or unk for piece in self.pieces(text)]

    def unit_pieces(self, text: str) -> list[str]:
        """The units the text is trained as (encode's), by name: a piece without a unit, or <blank>, is <unk>."""
        return [self.symbols[unit] for unit in self.encode(text)]

    def starts_word(self, token: int) -> bool:
        """Whether a word starts at this unit: every word unit, a sentencepiece piece with the word-start mark, the
        word boundary unit of char and phone units (the space before a word)."""
        return self.kind == "word" or self.symbols.get(token, UNK).startswith(SPACE)

    def text(self, hyp) -> str:
        """A search result's text (an rnnt.search.Hypothesis): the words a word LM chose, else its tokens decoded."""
        return " ".join(hyp.words) if hyp.words is not None else self.decode(hyp.tokens)

    def decode(self, ids: list[int]) -> str:
        pieces = [self.symbols.get(i, UNK) for i in ids if i != 0]
        if self.model is not None:
            return self.model.decode_pieces(pieces)
        if self.kind == "char":
            return "".join(pieces).replace(SPACE, " ").strip()
        if self.kind == "phone":
            words = " ".join(pieces).split(SPACE)
            return " ".join(self.spellings.get(tuple(word.split()), UNK) for word in words if word.split())
        return " ".join(pieces)
