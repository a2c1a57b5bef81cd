"""rnnt.export.hotwords: how sherpa-onnx spells hotwords (its bpe_vocab pieces, its characters), on the words of
speechocean762's real transcripts, and which phrases of a file it is given. sherpa-onnx itself favours them in
tests/rnnt/export/test_deploy.py."""

import sys

import pytest

from conftest import ROOT, run_tool
from rnnt.data.tokenizer import Tokenizer, sentencepiece_model
from rnnt.export.hotwords import (character_tokens, model_speller, read_vocab, sherpa_hotwords, sherpa_spelling,
                                  vocab_pieces, write_sentencepiece_files)


@pytest.fixture(scope="module")
def speechocean_units(test_data, tmp_path_factory):
    """BPE and unigram units (200) of speechocean762's training transcripts, their export files (bpe.model,
    bpe.vocab, tokens.txt as steps/export_onnx.py writes them) and the transcripts' words."""
    root = tmp_path_factory.mktemp("units")
    (root / "data").mkdir()
    (root / "data" / "text").write_bytes((test_data / "speechocean762" / "train" / "text").read_bytes())
    words = sorted({word for line in (root / "data" / "text").read_text().splitlines() for word in line.split()[1:]})
    dirs = {}
    for kind in ("bpe", "unigram"):
        out = run_tool(sys.executable, ROOT / "steps" / "build_units.py", "--unit-type", kind, "--vocab-size", "200",
                       root / "data", root / f"lang_{kind}")
        assert out.returncode == 0, out.stderr
        dirs[kind] = root / f"onnx_{kind}"
        dirs[kind].mkdir()
        tokenizer = Tokenizer(str(root / f"lang_{kind}"))
        write_sentencepiece_files(tokenizer.model, str(dirs[kind]))
        (dirs[kind] / "tokens.txt").write_text("".join(f"{s} {i}\n" for s, i in tokenizer.units.items()))
    return dirs, words


def test_a_unigram_models_words_are_spelt_by_sherpa_onnx_as_the_model_emits_them(speechocean_units):
    """sherpa-onnx cuts a word into the pieces of the highest score sum: a unigram model's own search, so every one
    of its 1885 words is spelt as the model emits it; a BPE model merges otherwise, and many are not."""
    dirs, words = speechocean_units
    spelt_otherwise = {}
    for kind, onnx in dirs.items():
        vocab = read_vocab(str(onnx / "bpe.vocab"))
        spelling = model_speller(kind, str(onnx))
        spelt_otherwise[kind] = [w for w in words if vocab_pieces(w, vocab) != spelling(w)]
    assert len(words) > 1800 and spelt_otherwise["unigram"] == []
    assert len(spelt_otherwise["bpe"]) > 100  # e.g. ALL: sherpa-onnx ▁A LL, the BPE model ▁ALL


def test_pieces_of_the_highest_score_sum_and_unknown_bytes():
    vocab = {"▁": -1.0, "▁A": -2.0, "B": -2.0, "AB": -3.5, "▁AB": -6.0, "C": -1.0}
    assert vocab_pieces("AB", vocab) == ["▁A", "B"]  # -4 against -4.5 and -6
    assert vocab_pieces("ABC", {**vocab, "▁AB": -3.0}) == ["▁AB", "C"]
    # as sherpa-onnx has it, a rest no piece begins counts 0: ▁ (-1) beats ▁A (-2) before A, which no piece
    # begins; then A and the two bytes of Ä are <unk> each
    assert vocab_pieces("AÄ", vocab) == ["▁", "<unk>", "<unk>", "<unk>"]
    assert vocab_pieces("CA", {"▁": -1.0, "C": -1.0, "A": -1.0, "▁C": -2.0}) == ["▁", "C", "A"]  # a tie: shorter


@pytest.mark.parametrize("word,tokens", [("FIVE", ["FIVE"]), ("北京", ["北", "京"]), ("über", ["über"]),
                                         ("DON'T", ["DON'T"]), ("A-B", ["A", "-", "B"]), ("да", ["д", "а"]),
                                         ("X北Y", ["X", "北", "Y"])])
def test_sherpa_onnx_takes_characters_for_tokens_but_latin_words_whole(word, tokens):
    assert character_tokens(word) == tokens
    assert sherpa_spelling(f"{word} {word}", "cjkchar", {}) == tokens * 2  # nothing between words


def test_a_phrase_is_apart_at_ascii_blanks_alone_as_sherpa_onnx_reads_it():
    """sherpa-onnx reads a hotword phrase's words at C's isspace; a no-break space was taken for a word boundary."""
    assert model_speller("char", "")("A\u00a0B C") == ["A", "\u00a0", "B", "\u2581", "C"]
    assert model_speller("word", "")("A\u00a0B C") == ["\u2581A\u00a0B", "\u2581C"]
    assert sherpa_spelling("AB\u00a0CD EF", "cjkchar", {}) == [*character_tokens("AB\u00a0CD"), "EF"]


def test_the_phrases_given_to_sherpa_onnx_and_those_left_out(speechocean_units, tmp_path):
    dirs, _ = speechocean_units
    onnx = dirs["bpe"]
    args = {"tokens": str(onnx / "tokens.txt"), "bpe_vocab": str(onnx / "bpe.vocab"), "modeling_unit": "bpe"}
    hotwords = tmp_path / "hot.txt"
    hotwords.write_text("THEY  :2.5\n\nALL\nTHEY'RE\nTHEY ARE\nZÜRICH\n")
    kept, left_out = sherpa_hotwords(str(onnx), args, "bpe", str(hotwords))
    assert kept == ["THEY :2.5", "THEY'RE"]
    with pytest.raises(ValueError, match="names no bpe_vocab for its bpe units .* export it again"):
        sherpa_hotwords(str(onnx), {"tokens": args["tokens"]}, "bpe", str(hotwords))  # an export older than that
    assert left_out == [f"{hotwords}:3: 'ALL': sherpa-onnx (bpe) spells it ▁A LL, the model ▁ALL; left out",
                        f"{hotwords}:5: 'THEY ARE': sherpa-onnx (bpe) spells it ▁THEY ▁A RE, the model ▁THEY ▁ARE; "
                        "left out", f"{hotwords}:6: 'ZÜRICH': the model has no unit Ü; left out"]
    chars = tmp_path / "chars"
    chars.mkdir()
    (chars / "tokens.txt").write_text("".join(f"{s} {i}\n" for i, s in enumerate(["<blank>", "<unk>", "▁", "北",
                                                                                   "京", "A", "B"])))
    hotwords.write_text("北京\n北 京\nAB\n")
    kept, left_out = sherpa_hotwords(str(chars), {"tokens": str(chars / "tokens.txt")}, "char", str(hotwords))
    assert kept == ["北京"] and len(left_out) == 2
    assert left_out[0] == f"{hotwords}:2: '北 京': sherpa-onnx (cjkchar) spells it 北 京, the model 北 ▁ 京; left out"
    with pytest.raises(ValueError, match="a model of phone units: sherpa-onnx spells hotwords in characters or "
                                         "pieces, never phones"):  # each phrase was 'the model has no unit'
        sherpa_hotwords(str(chars), {"tokens": str(chars / "tokens.txt")}, "phone", str(hotwords))


def test_the_vocab_holds_every_piece_of_the_model_with_its_score(speechocean_units, tmp_path):
    dirs, _ = speechocean_units
    model = sentencepiece_model(str(dirs["unigram"] / "bpe.model"), "test")
    vocab = read_vocab(str(dirs["unigram"] / "bpe.vocab"))
    assert list(vocab) == [model.id_to_piece(i) for i in range(model.get_piece_size())]
    assert list(vocab.values()) == pytest.approx([model.get_score(i) for i in range(model.get_piece_size())])
    (tmp_path / "bad.vocab").write_text("▁A\t-1.0\nB\n")
    with pytest.raises(ValueError, match=r"bad.vocab:2: expected '<piece> <score>', got 'B'"):
        read_vocab(str(tmp_path / "bad.vocab"))
