"""Text <-> unit ids for the unit inventories of steps/build_units.py.

A lang dir holds units.txt ('<symbol> <id>', <blank> 0, <unk> 1) and units.json (the unit type:
bpe or unigram with bpe.model, char, or word). Unknown symbols map to <unk>.
"""

from __future__ import annotations

import json
import os

BLANK, UNK = "<blank>", "<unk>"
SPACE = "\u2581"  # the word-boundary mark of char units, as sentencepiece writes it


def read_units(path: str) -> dict[str, int]:
    units = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if len(fields) != 2 or not fields[1].isdigit():
                raise ValueError(f"{path}:{number}: expected '<symbol> <id>', got '{line.rstrip()}'")
            units[fields[0]] = int(fields[1])
    if units.get(BLANK) != 0 or units.get(UNK) != 1:
        raise ValueError(f"{path}: <blank> must be 0 and <unk> 1")
    return units


class Tokenizer:
    def __init__(self, lang_dir: str):
        with open(os.path.join(lang_dir, "units.json"), encoding="utf-8") as f:
            self.config = json.load(f)
        self.kind = self.config["type"]
        self.units = read_units(os.path.join(lang_dir, "units.txt"))
        self.symbols = {i: s for s, i in self.units.items()}
        self.model = None
        if self.kind in ("bpe", "unigram"):
            import sentencepiece

            self.model = sentencepiece.SentencePieceProcessor(model_file=os.path.join(lang_dir, self.config["model"]))

    @property
    def vocab_size(self) -> int:
        return len(self.units)

    def pieces(self, text: str) -> list[str]:
        if self.model is not None:
            return self.model.encode(text, out_type=str)
        if self.kind == "char":
            return list(SPACE.join(text.split()))
        return text.split()

    def encode(self, text: str) -> list[int]:
        unk = self.units[UNK]
        return [self.units.get(piece, unk) for piece in self.pieces(text)]

    def decode(self, ids: list[int]) -> str:
        pieces = [self.symbols.get(i, UNK) for i in ids if i != 0]
        if self.model is not None:
            return self.model.decode_pieces(pieces)
        if self.kind == "char":
            return "".join(pieces).replace(SPACE, " ").strip()
        return " ".join(pieces)
