"""Hotwords in sherpa-onnx's own search of an export: which phrases of a hotwords file it spells in the units the
model emits for them, and the file of those it is given.

sherpa-onnx does not spell a hotword with the model's tokenizer. With modeling_unit "bpe" it cuts each word, the
word-start mark before it, into the pieces of bpe.vocab whose scores sum highest (a unigram model's own search:
a sentencepiece BPE model splits many words otherwise, by its merges); with "cjkchar" it takes each character for
a token but keeps a run of Latin letters and digits whole, and puts nothing between words. A phrase it spells
otherwise than the model emits it is favoured along a path the model hardly takes (or not at all, where a piece
is not a unit), so it is left out, named with both spellings. steps/export_onnx.py writes bpe.vocab and bpe.model
for bpe and unigram units (modeling_unit "bpe") and names modeling_unit "cjkchar" for characters.
"""

from __future__ import annotations

import os
import string
import unicodedata

from rnnt.data.tokenizer import SPACE, UNK, sentencepiece_model
from rnnt.datadir.table import kaldi_fields
from rnnt.lm.hotwords import hotword_lines

BPE_VOCAB, BPE_MODEL = "bpe.vocab", "bpe.model"
# the two-byte letters sherpa-onnx's SplitUtf8 keeps inside a word (German, Spanish and French ones)
LETTERS_IN_WORDS = set("äöüÄÖÜßáéíóúñÁÉÍÓÚÑàèùçâêîôûëïÀÈÙÇÂÊÎÔÛËÏ")


def write_sentencepiece_files(model, out_dir: str) -> None:
    """bpe.model (the units' sentencepiece model) and bpe.vocab ('<piece>\\t<score>' a line, its pieces in id order,
    as sherpa-onnx's bpe_vocab is read) into out_dir."""
    with open(os.path.join(out_dir, BPE_MODEL), "wb") as f:
        f.write(model.serialized_model_proto())
    with open(os.path.join(out_dir, BPE_VOCAB), "w", encoding="utf-8") as f:
        f.writelines(f"{model.id_to_piece(i)}\t{model.get_score(i)}\n" for i in range(model.get_piece_size()))


def read_vocab(path: str) -> dict[str, float]:
    """A bpe.vocab's pieces and their scores; a line of another form is a ValueError naming it."""
    vocab = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = kaldi_fields(line)
            try:
                vocab.setdefault(fields[0], float(fields[1]))
            except (IndexError, ValueError):
                raise ValueError(f"{path}:{number}: expected '<piece> <score>', got '{line.rstrip()}'") from None
    return vocab


def vocab_pieces(word: str, vocab: dict[str, float]) -> list[str]:
    """A word cut as sherpa-onnx's bpe_vocab encoder cuts it: the word-start mark, then the word, into the pieces
    whose scores sum highest, of two cuts as high the one whose first piece is shorter; a character no piece begins
    with is <unk> (its UTF-8 bytes are, each)."""
    text = SPACE + word
    lengths = range(min(max(map(len, vocab), default=0), len(text)), 0, -1)
    best: list[tuple[float, int] | None] = [None] * len(text) + [(0.0, 0)]  # from each position: score, next
    for start in range(len(text) - 1, -1, -1):
        for length in lengths:
            piece, end = text[start:start + length], start + length
            if end <= len(text) and piece in vocab:
                total = vocab[piece] + best[end][0]
                if best[start] is None or total > best[start][0] or total == best[start][0] and end <= best[start][1]:
                    best[start] = (total, end)
        if best[start] is None:
            best[start] = (0.0, -1)
    pieces, at = [], 0
    while at < len(text):
        end = best[at][1]
        if end == -1:
            pieces += ["<unk>"] * len(text[at].encode("utf-8"))
            at += 1
        else:
            pieces.append(text[at:end])
            at = end
    return pieces


def character_tokens(word: str) -> list[str]:
    """A word's tokens as sherpa-onnx's cjkchar spells it: each character, but a run of ASCII letters and digits
    (and the Latin letters of LETTERS_IN_WORDS) kept whole."""
    tokens: list[str] = []
    in_run = False
    for char in word:
        joins = (char.isascii() and char not in string.punctuation.replace("'", "") and not char.isspace()) \
            or char in LETTERS_IN_WORDS
        if joins and in_run:
            tokens[-1] += char
        else:
            tokens.append(char)
        in_run = joins
    return tokens


def sherpa_spelling(phrase: str, modeling_unit: str, vocab: dict[str, float]) -> list[str]:
    """The tokens sherpa-onnx looks a phrase up as in tokens.txt."""
    split = (lambda word: vocab_pieces(word, vocab)) if modeling_unit == "bpe" else character_tokens
    return [token for word in kaldi_fields(phrase) for token in split(word)]


def model_speller(unit_type: str, onnx_dir: str):
    """A function of a phrase to the units the model emits for it (tokens.txt's symbols)."""
    if unit_type in ("bpe", "unigram"):
        model = sentencepiece_model(os.path.join(onnx_dir, BPE_MODEL), f"{onnx_dir}/sherpa-onnx.json")
        return lambda phrase: model.encode(unicodedata.normalize("NFKC", phrase), out_type=str)
    if unit_type == "char":
        return lambda phrase: list(SPACE.join(kaldi_fields(phrase)))
    return lambda phrase: [SPACE + word for word in kaldi_fields(phrase)]  # word units, as tokens.txt writes them


def sherpa_hotwords(onnx_dir: str, args: dict, unit_type: str, path: str) -> tuple[list[str], list[str]]:
    """The lines of a hotwords file that sherpa-onnx spells as the model emits them, as it reads them (a phrase and
    its own ':S'), and for each other line why it is left out, naming it by file and line. args: the export's
    sherpa-onnx.json, its paths absolute."""
    modeling_unit = args.get("modeling_unit", "cjkchar")
    if unit_type == "phone":  # (each phrase was left out as a word the model has no unit for)
        raise ValueError(f"{onnx_dir}: a model of phone units: sherpa-onnx spells hotwords in characters or pieces, "
                         "never phones; decode with steps/decode.py --hotwords, which spells them through the lexicon")
    if unit_type in ("bpe", "unigram") and "bpe_vocab" not in args:
        raise ValueError(f"{onnx_dir}/sherpa-onnx.json names no bpe_vocab for its {unit_type} units (an export older "
                         "than sherpa-onnx's hotwords): export it again with steps/export_onnx.py")
    vocab = read_vocab(args["bpe_vocab"]) if modeling_unit == "bpe" else {}
    spelling = model_speller(unit_type, onnx_dir)
    with open(args["tokens"], encoding="utf-8") as f:
        units = {fields[0] for line in f if (fields := kaldi_fields(line))}
    kept, left_out = [], []
    for where, line, phrase, _ in hotword_lines(path, left_out):
        theirs, ours = sherpa_spelling(phrase, modeling_unit, vocab), spelling(phrase)
        if lacking := [unit for unit in ours if unit not in units or unit == UNK]:
            left_out.append(f"{where}: '{phrase}': the model has no unit {lacking[0]}; left out")
        elif theirs != ours:
            left_out.append(f"{where}: '{phrase}': sherpa-onnx ({modeling_unit}) spells it {' '.join(theirs)}, the "
                            f"model {' '.join(ours)}; left out")
        else:
            kept.append(line)
    return kept, left_out
