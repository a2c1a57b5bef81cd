"""CTC prefix beam search with a word LM through a lexicon (rnnt.lm.lexicon_search): exact against
enumeration, homophones kept apart, words only from the lexicon; phone units from the CMU dictionary
on the real speechocean762 transcripts."""

import itertools
import math
import os
import sys
import types

import pytest
import torch

from conftest import ROOT, run_tool
from ctc_reference import ctc_model, sequence_log_prob
from rnnt.ctc_search import ctc_prefix_beam_search
from rnnt.data.lexicon import read_lexicon
from rnnt.data.tokenizer import SPACE, Tokenizer
from rnnt.lm.arpa import write_arpa
from rnnt.lm.fusion import LN10, NgramScorer, load_fusion
from rnnt.lm.kneser_ney import EOS, estimate
from rnnt.lm.lexicon_search import LexiconTree, WordLexiconFusion
from rnnt.search import Hypothesis
from rnnt.transcriber import words_with_times

A, B, SEP = 1, 2, 3  # units of a 4-unit CTC model: <blank> 0, two "phones" and the word boundary
SPELLINGS = {"AB": [(A, B)], "BA": [(B, A)], "A": [(A,)], "TO": [(B,)], "TWO": [(B,)]}  # TO and TWO sound alike
SENTENCES = [["A", "TO", "AB"], ["TWO", "BA"], ["A", "TWO"], ["BA", "TO", "A"], ["AB"]]


def word_fusion(weight: float, bonus: float) -> WordLexiconFusion:
    lm = NgramScorer(estimate(SENTENCES, 3, list(SPELLINGS)), {}, "test")
    return WordLexiconFusion(lm, LexiconTree(SPELLINGS, lambda w: lm.log10_prob((), w)), SEP, weight, bonus)


def word_sequences(frames: int):
    """Every word sequence whose units (with boundaries) fit in `frames` CTC frames, with its units."""
    for n in range(4):  # the empty transcript too
        for words in itertools.product(SPELLINGS, repeat=n):
            units = list(itertools.chain(*[[SEP] * (i > 0) + list(SPELLINGS[w][0]) for i, w in enumerate(words)]))
            if len(units) + sum(a == b for a, b in zip(units, units[1:])) <= frames:
                yield list(words), units


@pytest.mark.parametrize("seed", range(3))
def test_the_search_finds_the_word_sequence_of_the_best_fused_score(seed):
    model = ctc_model(seed, vocab_size=4)
    enc = torch.randn(6, model.encoder.output_dim, generator=torch.Generator().manual_seed(seed)) * 2
    fusion = word_fusion(weight=0.7, bonus=0.3)
    lm = fusion.lm

    def fused(words, units):
        history, lm_score = ("<s>",), 0.0
        for w in words + [EOS]:
            lm_score += lm.log10_prob(history, w) * LN10
            history = (history + (w,))[-2:]
        return sequence_log_prob(model, enc, units) + 0.7 * lm_score + 0.3 * len(words)

    reference = sorted(((fused(words, units), words) for words, units in word_sequences(6)), reverse=True)
    nbest = ctc_prefix_beam_search(model, enc, 6, beam=500, fusion=fusion)
    assert nbest[0].words == reference[0][1] and nbest[0].score == pytest.approx(reference[0][0], abs=1e-4)
    scores = dict((tuple(words), score) for score, words in reference)
    assert all(h.score == pytest.approx(scores[tuple(h.words)], abs=1e-4) for h in nbest[:20])
    # homophones are separate hypotheses, each scored by its own words
    spoken = {tuple(h.tokens) for h in nbest[:20] if "TO" in h.words or "TWO" in h.words}
    assert any(sum(1 for h in nbest if h.tokens == list(t)) >= 2 for t in spoken)


def test_only_words_of_the_lexicon_come_out_where_the_units_spell_another():
    # posteriors that read B A A B, with a word boundary as likely as a blank between the A's:
    # "BAAB" is no word, "BA AB" is two
    logits = torch.full((5, 4), -10.0)
    for t, units in enumerate([[B], [A], [0, SEP], [A], [B]]):
        logits[t, units] = 0.0
    head = types.SimpleNamespace(ctc=lambda enc: enc, blank=0)  # the encoder output is the head's output
    without = ctc_prefix_beam_search(head, logits, 5, beam=8)[0]
    assert without.tokens == [B, A, A, B] and without.words is None
    best = ctc_prefix_beam_search(head, logits, 5, beam=8, fusion=word_fusion(0.1, 0.0))[0]
    assert best.words == ["BA", "AB"] and best.tokens == [B, A, SEP, A, B]


def test_phone_units_from_the_cmu_dictionary_on_real_transcripts(test_data, tmp_path, capsys):
    data = tmp_path / "train"
    data.mkdir()
    lines = (test_data / "speechocean762" / "train" / "text").read_text().splitlines()[:300]
    lines.append("0000ZZZZZ WE SAW A ZQXJW")  # a word no dictionary has
    (data / "text").write_text("".join(line.replace("\t", " ") + "\n" for line in sorted(lines)))
    lang = tmp_path / "lang_phone"
    out = run_tool(sys.executable, ROOT / "steps" / "build_lexicon.py", data, lang)
    assert out.returncode == 0, out.stderr
    oov = dict(line.split() for line in (lang / "oov.txt").read_text().splitlines())
    assert oov["ZQXJW"] == "1" and 1 < len(oov) < 10  # and a few names of the corpus (BALT, HADI)
    assert f"{len(oov)} words ({sum(map(int, oov.values()))} of" in out.stdout
    out = run_tool(sys.executable, ROOT / "steps" / "build_units.py", "--unit-type", "phone", data, lang)
    assert out.returncode == 0, out.stderr
    missing = sum(1 for line in lines if set(line.split()[1:]) & set(oov))
    assert f"{missing} transcripts have a word without a pronunciation" in out.stdout
    # homophones read back as the lexicon's first word, counted and named (greedy phone search has that floor)
    known = [line.split()[1:] for line in lines if not set(line.split()[1:]) & set(oov)]
    respelt = int(out.stdout.split(" spell back with a homophone")[0].rsplit(" ", 1)[1])
    assert sum("TWO" in words for words in known) <= respelt < len(known) and "TWO->TO" in out.stderr
    tokenizer = Tokenizer(str(lang))
    phones = set(tokenizer.units) - {"<blank>", "<unk>", SPACE}
    assert phones <= set("AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH UH "
                         "UW V W Y Z ZH".split()) and len(phones) > 30  # ARPAbet, stress removed
    lexicon = read_lexicon(str(lang / "lexicon.txt"))
    assert lexicon["TWO"][0] == lexicon["TO"][0] == ("T", "UW") and lexicon["THE"] == [("DH", "AH"), ("DH", "IY")]
    assert tokenizer.pieces("WE CALL IT") == ["W", "IY", SPACE, "K", "AO", "L", SPACE, "IH", "T"]
    assert tokenizer.decode(tokenizer.encode("I WANT TWO")) == "I WANT TO"  # TO is the more frequent
    assert tokenizer.decode(tokenizer.encode("WE SAW A ZQXJW")) == "WE SAW A <unk>"
    counts = {w: sum(line.split()[1:].count(w) for line in lines) for w in ("TO", "TWO")}
    assert counts["TO"] > counts["TWO"]
    # a word LM over these transcripts spells its words in the lexicon's phones; ZQXJW has none
    arpa = tmp_path / "lm.arpa"
    out = run_tool(sys.executable, ROOT / "steps" / "build_ngram_lm.py", "--over", "words", "--order", "2", data,
                   lang, arpa)
    assert out.returncode == 0, out.stderr
    capsys.readouterr()
    fusion = load_fusion(str(arpa), Tokenizer(str(lang)), 1.0, 0.0, "words")
    spelt = {w for words in fusion.tree.words for w in words}
    assert "ZQXJW" not in spelt and {"TO", "TWO", "WE"} <= spelt
    # the LM's words the search can never give, counted and named (they were left out in silence)
    note = capsys.readouterr().err
    assert note.startswith(f"{os.path.basename(sys.argv[0])}: {arpa}: {len(oov)} of the LM's {len(spelt) + len(oov)} "
                           "words have no pronunciation in the lexicon, and the search never gives them: "), note
    assert set(note.split(": ")[-1].split()) == set(oov)
    assert all(math.isfinite(best) for best in fusion.tree.best)
    # the units a search asks about from each node: exactly those with an expansion there
    for node in range(len(fusion.tree.children)):
        state = (fusion.start()[0].extended("WE"), node)
        assert fusion.allowed(state) == {u for u in range(len(tokenizer.units)) if fusion.expansions(state, u)}


def test_a_lexicon_line_without_phones_is_named_and_left_out(tmp_path):
    path = tmp_path / "lexicon.txt"
    path.write_text("HELLO HH AH L OW\nWORLD\nWORLD W ER L D\n")
    skipped = []
    assert read_lexicon(str(path), skipped) == {"HELLO": [("HH", "AH", "L", "OW")], "WORLD": [("W", "ER", "L", "D")]}
    assert len(skipped) == 1 and skipped[0].startswith(f"{path}:2: expected '<word> <phone> ...', got 'WORLD'")
    path.write_text("WORLD\n")
    with pytest.raises(ValueError, match=f"{path}: no pronunciations"):
        read_lexicon(str(path), [])


def test_a_word_lm_needs_a_word_boundary_unit(tmp_path):
    (tmp_path / "units.txt").write_text("<blank> 0\n<unk> 1\n\u2581a 2\nb 3\n")
    (tmp_path / "units.json").write_text('{"type": "word", "vocab_size": 4}')
    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=3\n\n\\1-grams:\n-0.5\ta\n-0.5\t</s>\n-99\t<s>\n\n\\end\\\n")
    with pytest.raises(ValueError, match="a word LM needs character or phone units"):
        load_fusion(str(arpa), Tokenizer(str(tmp_path)), 1.0, 0.0, "words")
    # characters of a corpus of one word an utterance: no boundary (before: 'needs character units ..., not char')
    (tmp_path / "units.txt").write_text("<blank> 0\n<unk> 1\nA 2\nB 3\n")
    (tmp_path / "units.json").write_text('{"type": "char", "vocab_size": 4}')
    with pytest.raises(ValueError, match=r"a word LM needs a word boundary among the units \(.*\): these char units "
                                         r"have none, .*run.sh --lm-over units"):
        load_fusion(str(arpa), Tokenizer(str(tmp_path)), 1.0, 0.0, "words")


def test_a_cmu_toolkit_unk_in_a_word_lm_is_its_unknown_word_not_a_word_to_spell(tmp_path, capsys):
    """AN4's an4.lm spells the unknown word <UNK>; with character units that spell it (a text of <UNK> marks),
    it went into the lexicon as a word and the LM had it as <unk>: a bare KeyError '<UNK>', no file named."""
    units = ["<blank>", "<unk>", SPACE, "A", "B", "<", ">", "U", "N", "K"]
    (tmp_path / "units.txt").write_text("".join(f"{u} {i}\n" for i, u in enumerate(units)))
    (tmp_path / "units.json").write_text('{"type": "char", "vocab_size": 10}')
    arpa = tmp_path / "an4.lm"
    arpa.write_text("\\data\\\nngram 1=5\n\n\\1-grams:\n-0.5\tAB\n-0.7\tBA\n-1.0\t<UNK>\n-0.5\t</s>\n-99\t<s>\n\n"
                    "\\end\\\n")
    fusion = load_fusion(str(arpa), Tokenizer(str(tmp_path)), 1.0, 0.0, "words")
    assert "<UNK>" not in capsys.readouterr().err  # not named as a word without a spelling either
    assert fusion.lm.log10_prob((), "<unk>") == -1.0


def test_word_times_name_the_words_the_word_lm_chose(tmp_path):
    (tmp_path / "lexicon.txt").write_text("TO T UW\nTWO T UW\nGO G OW\n")
    units = ["<blank>", "<unk>", "G", "OW", "T", "UW", SPACE]
    (tmp_path / "units.txt").write_text("".join(f"{u} {i}\n" for i, u in enumerate(units)))
    (tmp_path / "units.json").write_text('{"type": "phone", "lexicon": "lexicon.txt", "vocab_size": 7}')
    tokenizer = Tokenizer(str(tmp_path))
    tokens, frames = tokenizer.encode("TWO GO"), [3, 5, 8, 9, 12]
    assert tokenizer.pieces("TWO GO") == ["T", "UW", SPACE, "G", "OW"]
    spelt = Hypothesis(tokens, frames)
    chosen = Hypothesis(tokens, frames, words=["TWO", "GO"])
    assert tokenizer.text(spelt) == "TO GO" and tokenizer.text(chosen) == "TWO GO"
    assert words_with_times(tokenizer, chosen, 0.04) == [{"word": "TWO", "start": 0.12, "end": 0.24},
                                                       {"word": "GO", "start": 0.36, "end": 0.52}]
    assert [w["word"] for w in words_with_times(tokenizer, spelt, 0.04)] == ["TO", "GO"]


def test_lower_case_transcripts_find_their_pronunciations(tmp_path):
    """The CMU dictionary is upper case; text in lower case is looked up so and kept as written, which the
    tokenizer then finds. Text with no dictionary word at all is an error, not an empty lexicon."""
    data, lang = tmp_path / "train", tmp_path / "lang"
    data.mkdir()
    (data / "text").write_text("u1 the cat\nu2 a Dog\n")
    out = run_tool(sys.executable, ROOT / "steps" / "build_lexicon.py", data, lang)
    assert out.returncode == 0, out.stderr
    lexicon = read_lexicon(str(lang / "lexicon.txt"))
    assert lexicon["cat"] == [("K", "AE", "T")] and lexicon["Dog"][0] == ("D", "AO", "G") and set(lexicon) == {
        "the", "cat", "a", "Dog"}
    (tmp_path / "a_file").write_text("")  # a lang dir that is a file: named, not a traceback
    out = run_tool(sys.executable, ROOT / "steps" / "build_lexicon.py", data, tmp_path / "a_file")
    assert out.returncode == 1 and out.stderr == f"build_lexicon.py: {tmp_path / 'a_file'}: File exists\n"
    (data / "text").write_text("u1 zqxjw qqq\n")
    out = run_tool(sys.executable, ROOT / "steps" / "build_lexicon.py", data, lang)
    assert out.returncode == 1 and "none of the 2 words of" in out.stderr and "is it English?" in out.stderr


def test_first_pronunciations_name_the_targets_a_word_trains_with(tmp_path):
    """AN4 spells letters: its A is EY, the dictionary's first A the article's AH, so every spelt A trained as
    AH (the phone of EIGHT's and J's EY otherwise). --first puts the corpus's first; a word the dictionary lacks
    is added so; the AN4 recipe's file names A EY."""
    data, lang = tmp_path / "train", tmp_path / "lang"
    data.mkdir()
    (data / "text").write_text("u1 A B C\nu2 EIGHT ZQXJ\n")
    first = tmp_path / "first.txt"
    first.write_text("A EY\nZQXJ Z K\n")
    out = run_tool(sys.executable, ROOT / "steps" / "build_lexicon.py", data, lang)
    assert out.returncode == 0 and trained_phones(lang, "A") == ("AH",), out.stderr
    out = run_tool(sys.executable, ROOT / "steps" / "build_lexicon.py", "--first", first, data, lang)
    assert out.returncode == 0, out.stderr
    lexicon = read_lexicon(str(lang / "lexicon.txt"))
    assert lexicon["A"] == [("EY",), ("AH",)] and lexicon["ZQXJ"] == [("Z", "K")]
    assert trained_phones(lang, "A") == ("EY",)
    assert (ROOT / "egs" / "an4" / "local" / "first_pronunciations.txt").read_text() == "A EY\n"
    # in the dictionary's own style: stress marks removed as from its phones (EY1 was a unit of its own, A EY1 and
    # A EY two pronunciations), and every pronunciation of a word kept (only the first was), in the file's order
    first.write_text("A EY1\nZQXJ Z K\nZQXJ Z AH0 K\n")
    out = run_tool(sys.executable, ROOT / "steps" / "build_lexicon.py", "--first", first, data, lang)
    assert out.returncode == 0, out.stderr
    lexicon = read_lexicon(str(lang / "lexicon.txt"))
    assert lexicon["A"] == [("EY",), ("AH",)] and lexicon["ZQXJ"] == [("Z", "K"), ("Z", "AH", "K")]
    first.write_text("A EY\nZQXJ Z KX\n")  # a phone of no unit: named by its line and left out (the run refused)
    out = run_tool(sys.executable, ROOT / "steps" / "build_lexicon.py", "--first", first, data, lang)
    assert out.returncode == 0 and f"build_lexicon.py: {first}:2: ZQXJ: KX is none of the CMU dictionary's phones; " \
        "left out\n" in out.stderr, out.stderr
    assert out.stdout.rstrip().endswith(f"; 1 line of {first} left out (named above)"), out.stdout
    assert trained_phones(lang, "A") == ("EY",) and "ZQXJ" not in read_lexicon(str(lang / "lexicon.txt"))
    first.write_text("ZQXJ Z KX\n")  # nothing of it usable: refused
    out = run_tool(sys.executable, ROOT / "steps" / "build_lexicon.py", "--first", first, data, lang)
    assert out.returncode == 1 and f"{first}: no pronunciation in it (1 line left out: the first {first}:1: " \
        in out.stderr, out.stderr


def trained_phones(lang, word: str) -> tuple[str, ...]:
    """The phones `word` trains with, by the lang dir's tokenizer."""
    run_tool(sys.executable, ROOT / "steps" / "build_units.py", "--unit-type", "phone", lang.parent / "train", lang)
    tokenizer = Tokenizer(str(lang))
    return tuple(tokenizer.pieces(word))


def test_an_lm_over_the_units_given_as_a_word_lm_is_refused(tmp_path):
    """Read as words, a character LM's letters and word boundary spelt every real word as impossible: the
    WER came out as garbage, with no error."""
    (tmp_path / "units.txt").write_text("".join(f"{u} {i}\n" for i, u in enumerate(
        ["<blank>", "<unk>", SPACE, "A", "C", "T"])))
    (tmp_path / "units.json").write_text('{"type": "char", "vocab_size": 6}')
    tokenizer = Tokenizer(str(tmp_path))
    units_lm = estimate([tokenizer.pieces("CAT A CAT")], 2, [SPACE, "A", "C", "T", "<unk>"])
    write_arpa(units_lm, str(tmp_path / "units.arpa"))
    with pytest.raises(ValueError, match="4 of the LM's 4 words are the model's units: it is an LM over the units"):
        load_fusion(str(tmp_path / "units.arpa"), tokenizer, 1.0, 0.0, "words")
    write_arpa(estimate([["CAT", "A", "CAT"], ["A", "TACT"]], 2, ["CAT", "A", "TACT"]), str(tmp_path / "words.arpa"))
    assert load_fusion(str(tmp_path / "words.arpa"), tokenizer, 1.0, 0.0, "words").tree is not None
    # words most of them letters (AN4's spelt words: C A T, then ACT) are a words LM all the same
    spelt = estimate([["C", "A", "T"], ["T", "A", "C", "T"], ["ACT"]], 2, ["A", "C", "T", "ACT"])
    write_arpa(spelt, str(tmp_path / "spelt.arpa"))
    assert load_fusion(str(tmp_path / "spelt.arpa"), tokenizer, 1.0, 0.0, "words").tree is not None


def test_a_word_lm_search_returns_at_most_beam_hypotheses():
    """A prefix ends once per homophone (TO, TWO): beam 1 gave 2 hypotheses, and pooled_beam_lm, which pools
    this search's n-best with the transducer's, more than 2 x beam."""
    homophones_kept = False
    for seed in range(4):
        model = ctc_model(seed, vocab_size=4)
        enc = torch.randn(4, model.encoder.output_dim, generator=torch.Generator().manual_seed(seed)) * 2
        for beam in (1, 2, 3):
            nbest = ctc_prefix_beam_search(model, enc, 4, beam=beam, fusion=word_fusion(weight=0.7, bonus=0.3))
            assert len(nbest) <= beam and [h.score for h in nbest] == sorted((h.score for h in nbest), reverse=True)
            homophones_kept |= len({tuple(h.tokens) for h in nbest}) < len(nbest)
    assert homophones_kept  # the cap cut n-bests where homophones were apart
