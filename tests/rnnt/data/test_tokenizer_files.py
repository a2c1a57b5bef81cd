"""A lang dir's units.txt and units.json define the model's output layer: a units.txt whose ids do not run
from 0 to N - 1 once each (a gap pointed past the layer in training, a repeated symbol or id merged two units),
or a units.json without what its unit type needs, is an error naming the file (and line), not a KeyError or an
IndexError far from it."""

import json

import pytest

from rnnt.data.tokenizer import Tokenizer, read_units

GOOD = "<blank> 0\n<unk> 1\nYES 2\nNO 3\n"


def test_a_good_units_file(tmp_path):
    (tmp_path / "units.txt").write_text(GOOD)
    (tmp_path / "units.json").write_text(json.dumps({"type": "word"}))
    tokenizer = Tokenizer(str(tmp_path))
    assert tokenizer.vocab_size == 4 and tokenizer.encode("YES NO MAYBE") == [2, 3, 1]


def test_a_unit_holding_a_character_python_takes_for_a_blank_is_read(tmp_path):
    """sentencepiece makes a piece of U+0085 (a cp1252 ellipsis read as Latin-1) or U+1680 where a transcript holds
    it; units.txt was written and then refused by its own reader (str.split takes them for blanks, sherpa-onnx and
    Kaldi do not)."""
    (tmp_path / "units.txt").write_text(GOOD + "GOOD\u0085DAY 4\n\u1680 5\t\r\n", encoding="utf-8")
    assert read_units(str(tmp_path / "units.txt")) == {"<blank>": 0, "<unk>": 1, "YES": 2, "NO": 3,
                                                       "GOOD\u0085DAY": 4, "\u1680": 5}


def test_phones_spell_back_as_the_word_they_are_the_first_pronunciation_of(tmp_path):
    """WHEN, the more frequent (listed first), has W IH N as its second pronunciation; WIN trains as W IH N, and was
    read back as WHEN every time. Among first pronunciations, the word listed first (TO before TWO)."""
    (tmp_path / "lexicon.txt").write_text("WHEN W EH N\nWHEN W IH N\nTO T UW\nI AY\nTWO T UW\nWIN W IH N\n")
    units = ["<blank>", "<unk>", "▁", "W", "EH", "N", "IH", "T", "UW", "AY"]
    (tmp_path / "units.txt").write_text("".join(f"{unit} {i}\n" for i, unit in enumerate(units)))
    (tmp_path / "units.json").write_text(json.dumps({"type": "phone", "lexicon": "lexicon.txt"}))
    tokenizer = Tokenizer(str(tmp_path))
    assert tokenizer.decode(tokenizer.encode("I WIN WHEN TWO")) == "I WIN WHEN TO"


def test_words_are_apart_at_ascii_blanks_alone_as_scoring_takes_them(tmp_path):
    """A no-break space (or U+2028) inside a transcript's word: Kaldi's validate_text.pl refuses the line, so each
    tool that learns from a text leaves it out, named (the lexicon and the units took two words there, str.split,
    where scoring took one); the tokenizer and scoring, which meet such text in a hypothesis or a reference from
    elsewhere, take one word there, as Kaldi's compute-wer does."""
    import subprocess
    import sys

    from conftest import ROOT
    from rnnt.scoring import count_errors

    data, lang = tmp_path / "train", tmp_path / "lang"
    data.mkdir()
    (data / "text").write_text("u1 NEW\u00a0YORK IS BIG\nu2 THE CITY\u2028HALL\nu3 THE CITY IS BIG\n")
    for tool in (["build_lexicon.py"], ["build_units.py", "--unit-type", "phone"]):
        out = subprocess.run([sys.executable, ROOT / "steps" / tool[0], *tool[1:], data, lang], capture_output=True,
                             text=True)
        assert out.returncode == 0, out.stderr
        assert out.stderr.splitlines() == [
            f"{tool[0]}: {data}/text:1: u1: whitespace U+00A0 (Kaldi allows only space and TAB); left out",
            f"{tool[0]}: {data}/text:2: u2: whitespace U+2028 (Kaldi allows only space and TAB); left out"]
        assert out.stdout.endswith("; 2 transcripts Kaldi's rules refuse left out (named above)\n"), out.stdout
    words = {line.split(" ")[0] for line in (lang / "lexicon.txt").read_text().splitlines()}
    assert words == {"BIG", "CITY", "IS", "THE"}
    tokenizer = Tokenizer(str(lang))
    assert tokenizer.pieces("NEW\u00a0YORK IS") == ["<unk>", "\u2581", "IH", "Z"]
    assert count_errors("NEW\u00a0YORK IS", "NEW\u00a0YORK IS").reference_words == 2
    chars = Tokenizer.__new__(Tokenizer)
    chars.model, chars.kind = None, "char"
    assert chars.pieces("A\u00a0B C") == ["A", "\u00a0", "B", "\u2581", "C"]


@pytest.mark.parametrize("text,message", [
    (GOOD + "YES 4\n", ":5: 'YES 4' repeats the symbol of line 3"),
    (GOOD + "MAYBE 3\n", ":5: 'MAYBE 3' repeats the id of line 4"),
    (GOOD.replace("NO 3", "NO 5"), ": the ids must run from 0 to 3 (one a unit); 3 is missing, and 5 is the largest"),
    (GOOD + "NOT TWO FIELDS\n", ":5: expected '<symbol> <id>', got 'NOT TWO FIELDS'"),
    (GOOD.replace("<unk> 1", "<unk> 2").replace("YES 2", "YES 1"), ": <blank> must be 0 and <unk> 1"),
    # an editor's: read into the first symbol, it said "<blank> must be 0 and <unk> 1" of a file whose line 1 is so
    ("\ufeff" + GOOD, ":1: a byte-order mark (U+FEFF) before the first symbol; save the file without it"),
])
def test_a_units_file_against_its_contract_names_the_line(tmp_path, text, message):
    path = tmp_path / "units.txt"
    path.write_text(text)
    with pytest.raises(ValueError) as error:
        read_units(str(path))
    assert str(error.value) == f"{path}{message}"


def test_a_units_file_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "units.txt"
    path.write_bytes(GOOD.encode() + b"CAF\xc9 4\n")
    with pytest.raises(ValueError, match=f"^{path}:5: not UTF-8$"):
        read_units(str(path))


@pytest.mark.parametrize("config,message", [
    ({"type": "bpe"}, "units of type bpe name their 'model'"),
    ({"type": "phone"}, "units of type phone name their 'lexicon'"),
    ({"model": "bpe.model"}, "no unit 'type' (steps/build_units.py writes it)"),
    ({"type": "character"}, "unit type 'character' is none of bpe, unigram, char, word, phone"),  # all <unk>s
])
def test_a_units_json_without_what_its_type_needs_names_the_file(tmp_path, config, message):
    (tmp_path / "units.txt").write_text(GOOD)
    (tmp_path / "units.json").write_text(json.dumps(config))
    with pytest.raises(ValueError) as error:
        Tokenizer(str(tmp_path))
    assert str(error.value) == f"{tmp_path / 'units.json'}: {message}"


def test_a_missing_or_damaged_sentencepiece_model_is_named(tmp_path):
    """sentencepiece's own RuntimeError went up as a traceback from train.py, decode.py and export."""
    (tmp_path / "units.txt").write_text(GOOD)
    (tmp_path / "units.json").write_text(json.dumps({"type": "bpe", "model": "bpe.model"}))
    with pytest.raises(ValueError, match=f"^{tmp_path / 'bpe.model'}: no such file \\({tmp_path / 'units.json'} names"):
        Tokenizer(str(tmp_path))
    (tmp_path / "bpe.model").write_bytes(b"not a model")
    with pytest.raises(ValueError, match=f"^{tmp_path / 'bpe.model'}: not a sentencepiece model \\("):
        Tokenizer(str(tmp_path))


def test_the_units_digest_is_of_the_units_not_of_their_line_ends(tmp_path):
    """A units.txt whose line ends an editor made CRLF was refused as other units than the checkpoint's."""
    from rnnt.training.config_change import units_digest

    (tmp_path / "units.txt").write_text(GOOD)
    digest = units_digest(str(tmp_path))
    (tmp_path / "units.txt").write_bytes(GOOD.replace("\n", "\r\n").replace(" ", "\t").encode())
    assert units_digest(str(tmp_path)) == digest
    (tmp_path / "units.txt").write_text(GOOD.replace("YES 2\nNO 3", "NO 2\nYES 3"))
    assert units_digest(str(tmp_path)) != digest


def test_a_sentencepiece_model_and_units_txt_of_different_builds_are_refused(tmp_path):
    """A bpe.model beside another build's units.txt trained every piece the model has and units.txt lacks as <unk>,
    with no error. (Word units with a unit added to units.txt by hand train: units.txt is the inventory.)"""
    import sentencepiece

    (tmp_path / "units.txt").write_text(GOOD + "MAYBE 4\n")
    (tmp_path / "units.json").write_text(json.dumps({"type": "word", "vocab_size": 4}))
    assert Tokenizer(str(tmp_path)).encode("YES MAYBE") == [2, 4]
    corpus = tmp_path / "text"
    corpus.write_text("".join(f"{line}\n" for line in ["yes no yes", "no no yes", "yes yes yes no"] * 20))
    sentencepiece.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "bpe"), model_type="bpe",
                                             vocab_size=10, unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1, minloglevel=2)
    model = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "bpe.model"))
    units = ["<blank>", "<unk>"] + [model.id_to_piece(i) for i in range(1, model.get_piece_size())]
    (tmp_path / "units.txt").write_text("".join(f"{unit} {i}\n" for i, unit in enumerate(units)))
    (tmp_path / "units.json").write_text(json.dumps({"type": "bpe", "model": "bpe.model", "vocab_size": len(units)}))
    assert Tokenizer(str(tmp_path)).vocab_size == len(units)
    other = units[:-1] + ["\u2581maybe"]  # another build's last piece
    (tmp_path / "units.txt").write_text("".join(f"{unit} {i}\n" for i, unit in enumerate(other)))
    with pytest.raises(ValueError, match=f"^{tmp_path / 'bpe.model'}: 1 of its pieces are not in units.txt "
                                         f"\\('{units[-1]}'\\): the two are of different builds"):
        Tokenizer(str(tmp_path))
