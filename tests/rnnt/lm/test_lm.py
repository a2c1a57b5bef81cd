"""n-gram LMs (rnnt.lm): Kneser-Ney estimates against hand-computed values and as distributions on real
transcripts, ARPA files written and read back, and prefix beam search with shallow fusion against
exhaustive enumeration."""

import gzip
import math
import sys

import pytest
import torch

from conftest import ROOT, run_tool
from ctc_reference import ctc_model, sequence_log_prob
from rnnt.ctc_search import ctc_prefix_beam_search
from rnnt.lm.arpa import read_arpa, write_arpa
from rnnt.lm.fusion import NgramScorer, ShallowFusion, load_fusion
from rnnt.lm.kneser_ney import EOS, estimate
from search_reference import all_sequences


def scorer(model, units):
    return NgramScorer(model, dict(enumerate(["<blank>", *units])), "test")


def test_a_bigram_model_has_the_hand_computed_kneser_ney_probabilities():
    # "A B", "A C": bigram discount 4 / (4 + 2 * 1) = 2/3 (the four bigrams seen once, <s> A twice);
    # unigram continuation counts A 1, B 1, C 1, </s> 2, discount 3 / (3 + 2) = 0.6, so
    # p(B) = (1 - 0.6) / 5 + 0.6 * 4 / 5 / 4 = 0.2, p(</s>) = 1.4 / 5 + 0.12 = 0.4;
    # p(B | A) = (1 - 2/3) / 2 + (2/3 * 2 / 2) * 0.2 = 0.3, p(A | A) = 2/3 * 0.2, p(A | <s>) = (2 - 2/3) / 2 + 1/3 * 0.2
    lm = scorer(estimate([["A", "B"], ["A", "C"]], 2, ["A", "B", "C"]), ["A", "B", "C"])
    expected = {((), "B"): 0.2, ((), EOS): 0.4, (("A",), "B"): 0.3, (("A",), "C"): 0.3, (("A",), "A"): 2 / 15,
                (("A",), EOS): 2 / 3 * 0.4, (("<s>",), "A"): 2 / 3 + 1 / 15, (("<s>",), "B"): 1 / 15}
    for (history, word), p in expected.items():
        assert 10 ** lm.log10_prob(history, word) == pytest.approx(p, rel=1e-9), (history, word)


def test_the_discounts_come_from_the_counts_of_counts():
    """A B, A B, A C, B C: bigram counts n1 = 3 (A C, <s> B, B C), n2 = 3 (A B, B </s>, C </s>), so
    D2 = 3 / (3 + 2 x 3) = 1/3; continuation counts A 1, B 2, C 2, </s> 2 (7 in all): D1 = 1 / (1 + 2 x 3) = 1/7.
    p(B) = (2 - 1/7) / 7 + 1/7 x 4/7 x 1/4 = 2/7, p(A) = 1/7; p(B | A) = (2 - 1/3) / 3 + (1/3 x 2/3) x 2/7 = 13/21,
    p(C | A) = 2/7, p(A | A) = 2/63, p(</s> | A) = 4/63 (the first case's n2 = 1 hid a wrong formula)."""
    lm = scorer(estimate([["A", "B"], ["A", "B"], ["A", "C"], ["B", "C"]], 2, ["A", "B", "C"]), ["A", "B", "C"])
    expected = {((), "B"): 2 / 7, ((), "A"): 1 / 7, ((), EOS): 2 / 7, (("A",), "B"): 13 / 21, (("A",), "C"): 2 / 7,
                (("A",), "A"): 2 / 63, (("A",), EOS): 4 / 63}
    for (history, word), p in expected.items():
        assert 10 ** lm.log10_prob(history, word) == pytest.approx(p, rel=1e-9), (history, word)


def test_on_real_transcripts_every_history_gets_a_distribution_and_the_arpa_file_keeps_it(test_data, tmp_path):
    sentences = [line.split("\t", 1)[1].split() for line in
                 (test_data / "speechocean762" / "train" / "text").read_text().splitlines()[:400]]
    letters = [list("\u2581".join(words)) for words in sentences]  # characters, as char units are
    vocabulary = sorted({c for s in letters for c in s} | {"<unk>", "Q", "Z"})
    model = estimate(letters, 4, vocabulary)
    write_arpa(model, str(tmp_path / "lm.arpa"))
    reread = read_arpa(str(tmp_path / "lm.arpa"))
    packed = gzip.compress((tmp_path / "lm.arpa").read_bytes())  # as LMs ship: .arpa.gz, read as it is
    (tmp_path / "lm.arpa.gz").write_bytes(packed)
    assert read_arpa(str(tmp_path / "lm.arpa.gz")) == reread
    (tmp_path / "cut.arpa.gz").write_bytes(packed[:len(packed) // 2])
    with pytest.raises(ValueError, match=f"^{tmp_path / 'cut.arpa.gz'}: a damaged gzip file"):
        read_arpa(str(tmp_path / "cut.arpa.gz"))
    # a plain file cut inside its last n-gram's last word ('</s>' cut to '</'): its counts hold, and it read as
    # another model
    cut = "\\data\\\nngram 1=3\nngram 2=1\n\n\\1-grams:\n-0.5 <s> -0.1\n-0.3 a -0.2\n-0.3 </s>\n\n\\2-grams:\n-0.1 a </"
    (tmp_path / "cut.arpa").write_text(cut)
    with pytest.raises(ValueError, match=rf"^{tmp_path / 'cut.arpa'}:11: the file ends without \\end\\ \(cut "
                                         r"short\?\)"):
        read_arpa(str(tmp_path / "cut.arpa"))
    assert reread.keys() == model.keys()
    assert all(abs(reread[k][0] - model[k][0]) < 1e-5 and abs(reread[k][1] - model[k][1]) < 1e-5 for k in model)
    lm = scorer(reread, vocabulary)
    words = vocabulary + [EOS]
    histories = [(), ("<s>",), ("T", "H"), ("<s>", "T", "H"), ("\u2581", "Q", "Z"), ("Z", "Z", "Z")]
    for history in histories:
        assert sum(10 ** lm.log10_prob(history, w) for w in words) == pytest.approx(1.0, abs=1e-4), history
    # seen contexts predict what followed them
    assert lm.log10_prob(("T", "H"), "E") > lm.log10_prob(("T", "H"), "Q")


def test_a_bad_arpa_file_is_named_with_its_line(tmp_path):
    path = tmp_path / "bad.arpa"
    path.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0\ta\n-x\tb\n\\end\\\n")
    with pytest.raises(ValueError, match=rf"{path}:6: not a number"):
        read_arpa(str(path))
    path.write_text("\\data\\\nngram 1=3\n\n\\1-grams:\n-1.0\ta\n-1.0\tb\n\\end\\\n")
    with pytest.raises(ValueError, match=rf"^{path}:2: \\data\\ declares 3 1-grams, the file holds 2"):  # its line
        read_arpa(str(path))
    path.write_bytes(b"\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0\ta\n-1.0\tcaf\xe9\n\\end\\\n")  # Latin-1
    with pytest.raises(ValueError, match=rf"{path}:6: not UTF-8 \(invalid continuation byte at byte 8\)"):
        read_arpa(str(path))


def test_the_comment_before_data_may_show_the_format_and_sections_not_declared_are_refused(test_data, tmp_path):
    """CMU's toolkit writes a sample '\\1-grams:' line in the comment before \\data\\ (AN4's own an4.lm): it was
    read as a section, and the file refused. A section \\data\\ does not declare, or </s> as a context, was
    taken (KenLM refuses both)."""
    model = read_arpa(str(test_data / "an4" / "etc" / "an4.lm"))
    assert sum(len(ngram) == 1 for ngram in model) == 107 and sum(len(ngram) == 2 for ngram in model) == 1
    path = tmp_path / "lm.arpa"
    path.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0\t</s>\n-1.0\ta\n\n\\2-grams:\n-0.5\ta </s>\n"
                    "\\end\\\n")
    with pytest.raises(ValueError, match=rf"^{path}:8: a 2-grams section that .data. does not declare"):
        read_arpa(str(path))
    path.write_text("\\data\\\nngram 1=2\nngram 2=1\n\n\\1-grams:\n-1.0\t</s>\n-1.0\ta\n\n\\2-grams:\n"
                    "-0.5\t</s> a\n\\end\\\n")
    with pytest.raises(ValueError, match=rf"^{path}:10: <s> inside an n-gram or </s> before its end"):
        read_arpa(str(path))


def test_an_lm_over_other_units_is_refused_and_units_it_never_saw_are_unk_in_its_histories():
    """An LM with <unk> over characters given a model over word pieces: the pieces it lacks are not scored as
    <unk> in silence (its words that are no unit give it away). An LM over these units whose text never used
    one of them reads that unit as <unk>, as the predicted word and, as KenLM and SRILM read it, in the history."""
    chars = estimate([list("the cat"), list("a cab")], 3, sorted(set("the cat a cab")) + ["<unk>"])
    with pytest.raises(ValueError, match=r"no unigram for 2 of the model's units \(▁THE ▁CAT\) and words that are "
                                         r"not units \(  a b c e h t\): it is over other units"):
        scorer(chars, ["<unk>", "\u2581THE", "\u2581CAT"])
    model = {("<s>",): (-99.0, -0.5), ("a",): (-1.0, -0.3), ("b",): (-1.0, -0.3), ("<unk>",): (-1.5, -0.2),
             ("</s>",): (-1.0, 0.0), ("<unk>", "a"): (-0.05, 0.0), ("a", "b"): (-0.1, 0.0)}
    lm = scorer(model, ["<unk>", "a", "b", "q"])  # q: a unit the LM text never had
    assert lm.unknown == {"q"}
    fusion = ShallowFusion(lm, weight=1.0)
    _, after_q = fusion.extend(lm.start(), 4)
    assert after_q == ("<unk>",)
    assert lm.log10_prob(after_q, "a") == -0.05  # the ARPA's own <unk> a, not a backoff to p(a)
    assert lm.log10_prob(after_q, "b") == pytest.approx(-0.2 - 1.0)  # <unk>'s backoff, then p(b)


@pytest.mark.parametrize("seed", range(3))
def test_prefix_beam_search_with_an_lm_finds_the_best_fused_score(seed):
    model = ctc_model(seed)
    enc = torch.randn(5, model.encoder.output_dim, generator=torch.Generator().manual_seed(seed)) * 2
    lm = scorer(estimate([["a", "b", "b"], ["b", "a"], ["a", "a", "b", "b"]], 3, ["a", "b"]), ["a", "b"])
    fusion = ShallowFusion(lm, weight=0.8, length_bonus=0.4)

    def fused(tokens):
        words = ["<blank>", "a", "b"]
        history, lm_score = ("<s>",), 0.0
        for w in [words[t] for t in tokens] + [EOS]:
            lm_score += math.log(10 ** lm.log10_prob(history, w))
            history = (history + (w,))[-2:]
        return sequence_log_prob(model, enc, tokens) + 0.8 * lm_score + 0.4 * len(tokens)

    with torch.no_grad():
        best = max(all_sequences([1, 2], 5), key=fused)
    nbest = ctc_prefix_beam_search(model, enc, 5, beam=200, fusion=fusion)
    assert nbest[0].tokens == best and nbest[0].score == pytest.approx(fused(best), abs=1e-4)
    assert all(h.score == pytest.approx(fused(h.tokens), abs=1e-4) for h in nbest[:10])
    assert [h.score for h in nbest] == sorted((h.score for h in nbest), reverse=True)


def test_an_lm_built_over_units_reads_what_is_not_a_unit_as_unk(tmp_path):
    """Training targets turn a piece the units lack into <unk>; so does the LM's text, which had kept the raw
    symbol (n-grams the model can never emit, and none for the <unk> it does)."""
    for name, text in (("train", "u1 THE CAT\nu2 A CAT\n"), ("lm_text", "u1 THE CAF\u00c9\nu2 A CAF\u00c9\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "text").write_text(text)
    (tmp_path / "train" / "utt2dur").write_text("u1 1.0\nu2 1.0\n")
    steps = ROOT / "steps"
    out = run_tool(sys.executable, steps / "build_units.py", "--unit-type", "char", tmp_path / "train",
                   tmp_path / "lang")
    assert out.returncode == 0, out.stderr
    out = run_tool(sys.executable, steps / "build_ngram_lm.py", "--order", "2", tmp_path / "lm_text", tmp_path / "lang",
                   tmp_path / "lm.arpa")
    assert out.returncode == 0, out.stderr
    assert f"{tmp_path}/lm_text/text:1: u1: 2 pieces {tmp_path}/lang has no unit for (<unk> in the LM)" in out.stderr
    assert "; 2 transcripts hold units <unk> (4 of 12; the first 2 named above)" in out.stdout, out.stdout
    model = read_arpa(str(tmp_path / "lm.arpa"))
    assert not any("\u00c9" in word for ngram in model for word in ngram)
    assert ("A", "<unk>") in model and ("<unk>", "<unk>") in model and ("<unk>", "</s>") in model  # C A F É
    (tmp_path / "lm_text" / "text").write_text("")  # no transcript: one line naming it (a division by zero before)
    out = run_tool(sys.executable, steps / "build_ngram_lm.py", tmp_path / "lm_text", tmp_path / "lang", tmp_path / "x")
    assert out.returncode == 1 and out.stderr == f"build_ngram_lm.py: {tmp_path}/lm_text/text: no transcript to " \
        "train the LM on\n"
    (tmp_path / "lm_text" / "text").write_text(text)  # an output that cannot be written: named, not a traceback
    out = run_tool(sys.executable, steps / "build_ngram_lm.py", tmp_path / "lm_text", tmp_path / "lang", tmp_path)
    assert out.returncode == 1 and out.stderr.endswith(f"build_ngram_lm.py: {tmp_path}: cannot write the LM (Is a "
                                                       "directory)\n"), out.stderr


def test_a_narrow_beam_ranks_its_prefixes_with_the_lm(monkeypatch):
    """Beam 1, two frames: the acoustics prefer a (0.55) to b (0.45) in the first, the LM b by far. The beam keeps
    the prefix of the best fused score, b; ranked without the LM it would keep a, which the exhaustive tests (beams
    too wide to prune anything) never see."""
    import rnnt.ctc_search

    class PrefersB:  # a Fusion: b costs nothing, a costs 10 nats
        def start(self):
            return ()

        def allowed(self, state):
            return None

        def expansions(self, state, token):
            return [(0.0 if token == 2 else -10.0, state + (token,))]

        def finish(self, state):
            return [(0.0, None)]

    frames = torch.tensor([[-5.0, math.log(0.55), math.log(0.45)], [-0.01, -5.0, -5.0]])
    monkeypatch.setattr(rnnt.ctc_search, "ctc_log_probs", lambda model, enc: frames)
    model = type("Model", (), {"blank": 0})()
    best = ctc_prefix_beam_search(model, torch.zeros(2, 1), 2, beam=1, fusion=PrefersB())[0]
    assert best.tokens == [2] and best.score == pytest.approx(math.log(0.45 * (math.exp(-0.01) + math.exp(-5.0))))
    plain = ctc_prefix_beam_search(model, torch.zeros(2, 1), 2, beam=1)[0]
    assert plain.tokens == [1]  # without the LM, the acoustics' choice


def test_arpa_values_out_of_range_duplicates_and_a_byte_order_mark(tmp_path):
    """A NaN or a probability above 1 would poison every hypothesis's score; a repeated n-gram overwrote the
    first; a UTF-8 file that opens with a byte-order mark read as no ARPA file."""
    path = tmp_path / "lm.arpa"
    head = "\\data\\\nngram 1=2\n\n\\1-grams:\n"
    for line in ("nan\tb", "0.5\tb", "-1.0\tb\tinf"):
        path.write_text(f"{head}-1.0\ta\n{line}\n\\end\\\n")
        with pytest.raises(ValueError, match=rf"{path}:6: a log10 probability is at most 0 and a backoff finite"):
            read_arpa(str(path))
    path.write_text(f"{head}-1.0\ta\n-0.5\ta\n\\end\\\n")
    with pytest.raises(ValueError, match=rf"{path}:6: the 1-gram 'a' again"):
        read_arpa(str(path))
    path.write_bytes(f"\ufeff{head}-1.0\ta\n-inf\tb\t0.3\n\\end\\\n".encode())
    assert read_arpa(str(path)) == {("a",): (-1.0, 0.0), ("b",): (-99.0, 0.3)}  # -inf: as SRILM writes 0


def test_a_probability_of_zero_gives_finite_scores_at_every_fusion_weight(tmp_path):
    """-inf in an ARPA file, scaled by a weight of 0 (an LM or LODR weight searched from 0) or less the look-ahead
    of a lexicon node whose words all have it, made NaN scores, which took the best hypotheses' places in a beam."""
    from rnnt.lm.fusion import LowOrderSubtraction
    from rnnt.lm.lexicon_search import LexiconTree, WordLexiconFusion

    path = tmp_path / "lm.arpa"
    path.write_text("\\data\\\nngram 1=5\n\n\\1-grams:\n-0.5\t</s>\n-99\t<s>\n-0.3\ta\n-0.6\tb\n-inf\tc\n"
                    "\\end\\\n")
    lm = NgramScorer(read_arpa(str(path)), {0: "<blank>", 1: "<unk>", 2: "a", 3: "b", 4: "c"}, str(path))
    assert ShallowFusion(lm, weight=0.0).extend(lm.start(), 4)[0] == 0.0
    lodr = LowOrderSubtraction(ShallowFusion(lm, 0.5), ShallowFusion(lm, 0.0))
    assert all(math.isfinite(score) for score, _ in lodr.expansions(lodr.start(), 4))
    words = NgramScorer(read_arpa(str(path)), {}, str(path))
    fusion = WordLexiconFusion(words, LexiconTree({"a": [(2,)], "b": [(3,)], "c": [(4, 4)]},
                                                  lambda word: words.log10_prob((), word)), 5, weight=0.5)
    (first, state), = fusion.expansions(fusion.start(), 4)
    (second, _), = fusion.expansions(state, 4)
    assert math.isfinite(first) and second == 0.0


def test_an_lm_without_an_end_of_sentence_is_refused_and_one_without_unk_scores_it_as_impossible():
    """Every ended hypothesis is scored with </s>: an LM without it failed with KeyError in the middle of a
    decode. A closed-vocabulary LM (SRILM's ngram-count without -unk) was refused as over other units, and so was
    one whose text never used one of the model's units."""
    model = {("<s>",): (-99.0, -0.3), ("a",): (-0.5, 0.0), ("b",): (-0.6, 0.0)}
    with pytest.raises(ValueError, match="test: the LM has no unigram for </s>"):
        scorer(model, ["<unk>", "a", "b"])
    lm = scorer({**model, ("</s>",): (-0.4, 0.0)}, ["<unk>", "a", "b"])
    assert lm.log10_prob(("<s>",), "<unk>") == -99.0 - 0.3 and lm.log10_prob(("a",), "b") == -0.6
    closed = scorer({**model, ("</s>",): (-0.4, 0.0)}, ["<unk>", "a", "b", "c"])  # text that never used c: the
    assert closed.log10_prob(("a",), "c") == -99.0  # impossible, as KenLM scores an unknown word (it was refused)
    cmu = scorer({**model, ("</s>",): (-0.4, 0.0), ("<UNK>",): (-2.0, 0.0), ("a", "<UNK>"): (-1.0, 0.0)},
                 ["<unk>", "a", "b"])  # the CMU toolkit's <UNK> (AN4's an4.lm): the unknown word, not a word
    assert cmu.log10_prob(("a",), "<unk>") == -1.0 and cmu.log10_prob(("b",), "<unk>") == -2.0


def text_and_lang(tmp_path, text: str, symbols: list[str], kind: str = "char"):
    """tmp_path/data with text, and tmp_path/lang of units <blank> <unk> and symbols, of kind; (data, lang)."""
    data, lang = tmp_path / "data", tmp_path / "lang"
    data.mkdir(exist_ok=True)
    (data / "text").write_text(text)
    write_units(lang, symbols, kind)
    return data, lang


def write_units(lang, symbols: list[str], kind: str) -> None:
    lang.mkdir(exist_ok=True)
    (lang / "units.txt").write_text("".join(f"{s} {i}\n" for i, s in enumerate(["<blank>", "<unk>", *symbols])))
    (lang / "units.json").write_text(f'{{"type": "{kind}", "vocab_size": {len(symbols) + 2}}}')


def test_a_transcript_holding_sentence_markers_is_left_out_named_as_kaldi_refuses_it(tmp_path):
    """Text prepared with <s> and </s> around a sentence (Kaldi's validate_data_dir.sh refuses them in text, and
    training leaves such a transcript out) crashed the estimate (KeyError) at order 2 and up."""
    data, _ = text_and_lang(tmp_path, "u1 <s> THE CAT </s>\nu2 THE DOG\nu3 THE CAT\n", ["\u2581", *"THECADOG"])
    out = run_tool(ROOT / "steps" / "build_ngram_lm.py", "--order", "3", "--over", "words", data, tmp_path / "lang",
                   tmp_path / "lm.arpa")
    assert out.returncode == 0, out.stderr
    assert out.stderr == f"build_ngram_lm.py: {data}/text:1: u1: reserved symbol '<s>' in a transcript; left out\n"
    assert "from 2 transcripts of" in out.stdout and "; 1 transcript Kaldi's rules refuse left out" in out.stdout
    model = read_arpa(str(tmp_path / "lm.arpa"))
    assert ("<s>", "THE", "CAT") in model and ("CAT", "</s>") in model
    assert sorted(w for (w, *rest) in model if not rest) == ["</s>", "<s>", "CAT", "DOG", "THE"]
    # word units from elsewhere holding the markers as units: an LM over them was a ValueError's traceback
    write_units(tmp_path / "lang", ["</s>", "<s>", "CAT", "DOG", "THE"], "word")
    out = run_tool(ROOT / "steps" / "build_ngram_lm.py", "--order", "2", "--over", "units", data, tmp_path / "lang",
                   tmp_path / "units.arpa")
    assert out.returncode == 0, out.stderr
    assert sorted(w for (w, *rest) in read_arpa(str(tmp_path / "units.arpa")) if not rest) == \
        ["</s>", "<s>", "<unk>", "CAT", "DOG", "THE"]
    # the model's <s> and </s> units fused with that LM: nothing added and the history kept (<s> scored as
    # impossible, -99 log10, and </s> as a sentence's end in the middle of one)
    from rnnt.data.tokenizer import Tokenizer

    tokenizer = Tokenizer(str(tmp_path / "lang"))
    fusion = load_fusion(str(tmp_path / "units.arpa"), tokenizer, 0.5, 0.0)
    with_markers, without = fusion.start(), fusion.start()
    total = 0.0
    for token in tokenizer.encode("<s> THE CAT </s>"):
        score, with_markers = fusion.extend(with_markers, token)
        total += score
    plain = 0.0
    for token in tokenizer.encode("THE CAT"):
        score, without = fusion.extend(without, token)
        plain += score
    assert (total, with_markers) == (plain, without) and total > -5
    with pytest.raises(ValueError, match="a sentence holds <s> or </s>"):
        estimate([["<s>", "A"]], 2, ["A"])


def test_the_scores_cache_stays_bounded_and_scores_the_same(monkeypatch):
    """It grew without end over a decode (8 KB a character: gigabytes over a large test set)."""
    from rnnt.lm import fusion

    model = estimate([["a", "b", "a"], ["b", "a", "a", "b"]], 3, ["a", "b"])
    scorer = NgramScorer(model, {1: "<unk>", 2: "a", 3: "b"}, "lm")
    histories = [(fusion.BOS,), ("a",), ("b",), ("a", "b"), ("b", "a"), ("a", "a")]
    want = {(h, w): scorer.log10_prob(h, w) for h in histories for w in ("a", "b", EOS)}
    monkeypatch.setattr(fusion, "CACHE_ENTRIES", 4)
    bounded = NgramScorer(model, {1: "<unk>", 2: "a", 3: "b"}, "lm")
    for _ in range(3):
        assert {key: bounded.log10_prob(*key) for key in want} == want
        assert len(bounded.cache) <= 4


def test_negative_length_bonuses_are_a_value_of_tune_lm_fusion_not_an_option(tmp_path):
    """--bonuses -2,-1,0,1,2 (its own default for word LMs, as run.sh --lm-bonuses passes it) was argparse's
    'expected one argument': a recipe's LM stage failed after the training."""
    out = run_tool(sys.executable, ROOT / "steps" / "tune_lm_fusion.py", "--arpa", tmp_path / "lm.arpa", "--bonuses",
                   "-2,-1,0,1,2", tmp_path / "exp", tmp_path / "dev.list")
    assert out.returncode == 1 and "expected one argument" not in out.stderr, out.stderr
    assert f"{tmp_path / 'exp'}" in out.stderr  # past the options: the experiment not there, named


def test_an_lm_of_words_holding_a_no_break_space_is_read_back(tmp_path):
    """An ARPA file from elsewhere whose words hold U+202F (French typography) or U+3000: the reader split and
    stripped at every Unicode space, so the decoder refused it (and misread a unigram's word). build_ngram_lm.py
    itself leaves such a transcript out, named, as Kaldi's validate_text.pl refuses it."""
    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=4\nngram 2=1\n\n\\1-grams:\n-0.6\t<s>\t-0.3\n-0.6\t</s>\n"
                    "-0.5\tBONJOUR\u202f!\t-0.2\n-0.5\t\u3000\n\n\\2-grams:\n-0.1\tBONJOUR\u202f! \u3000\n\n\\end\\\n")
    assert read_arpa(str(arpa)) == {("<s>",): (-0.6, -0.3), ("</s>",): (-0.6, 0.0), ("BONJOUR\u202f!",): (-0.5, -0.2),
                                    ("\u3000",): (-0.5, 0.0), ("BONJOUR\u202f!", "\u3000"): (-0.1, 0.0)}
    data = tmp_path / "data"
    data.mkdir()
    (data / "text").write_text("u1 BONJOUR\u202f! CA VA\u202f?\nu2 OUI MERCI\n")
    out = run_tool(ROOT / "steps" / "build_units.py", "--unit-type", "char", data, tmp_path / "lang")
    assert out.returncode == 0, out.stderr
    out = run_tool(ROOT / "steps" / "build_ngram_lm.py", "--over", "words", data, tmp_path / "lang", arpa)
    assert out.returncode == 0 and "from 1 transcript of" in out.stdout, out.stdout
    assert f"{data}/text:1: u1: whitespace U+202F (Kaldi allows only space and TAB); left out" in out.stderr
    assert {word for (word, *_) in read_arpa(str(arpa))} == {"<s>", "</s>", "OUI", "MERCI"}


def test_an_lm_of_nothing_or_of_words_over_pieces_is_refused_and_a_long_order_says_what_it_wrote(tmp_path):
    """Keys without words gave an LM of '<s> </s>' alone (it favours saying nothing), --over words a lang dir of
    word or BPE units that tuning refused later, and --order 100 of a text whose longest n-gram is 4 words said
    '100-gram'."""
    data, _ = text_and_lang(tmp_path, "u1\nu2\n", ["\u2581", "T", "H", "E"])
    out = run_tool(ROOT / "steps" / "build_ngram_lm.py", data, tmp_path / "lang", tmp_path / "lm.arpa")
    assert (out.returncode, out.stderr) == (1, f"build_ngram_lm.py: {data}/text: its 2 transcripts hold no units to "
                                               "train the LM on\n")
    (data / "text").write_text("u1 THE THE\nu2 THE\n")
    out = run_tool(ROOT / "steps" / "build_ngram_lm.py", "--order", "100", "--over", "words", data,
                   tmp_path / "lang", tmp_path / "lm.arpa")
    assert out.returncode == 0 and ": 4-gram (--order 100: the text's longest n-gram) over 1 word from" in out.stdout
    assert out.stdout.split("n-grams per order: ")[1].split() == ["3", "3", "3", "1"], out.stdout
    write_units(tmp_path / "lang", ["THE"], "word")  # (as of pieces: bpe)
    out = run_tool(ROOT / "steps" / "build_ngram_lm.py", "--over", "words", data, tmp_path / "lang",
                   tmp_path / "lm.arpa")
    assert out.returncode == 1 and "--over words: a word LM is searched through a lexicon of character or phone " \
        "units" in out.stderr, out.stderr


def test_a_text_the_units_cannot_spell_is_named_counted_and_refused_where_it_is_all(tmp_path):
    """A lowercase text against uppercase units built an LM of <unk> alone, exit 0; a word LM over character units,
    of words the lexicon search can never spell; and --order 10000000 took 22 s and 2 GB for a 10-gram."""
    data, lang = text_and_lang(tmp_path, "u1 the cat\nu2 the dog\n", ["\u2581", "T", "H", "E", "C", "A", "D", "O", "G"])
    for over in ("units", "words"):
        out = run_tool(ROOT / "steps" / "build_ngram_lm.py", "--over", over, data, lang, tmp_path / "lm.arpa")
        assert out.returncode == 1 and f"build_ngram_lm.py: {lang}: its units spell none of the text's " in out.stderr
        assert f"{data}/text:1: u1: " in out.stderr, out.stderr
    (data / "text").write_text("u1 THE CAT\nu2 THE dog\n")
    out = run_tool(ROOT / "steps" / "build_ngram_lm.py", "--order", "10000000", "--over", "words", data, lang,
                   tmp_path / "lm.arpa")
    assert out.returncode == 0 and f"{data}/text:2: u2: dog: no spelling in {lang}'s units" in out.stderr
    assert "; 1 transcripts hold words the units cannot spell (1 of 4; the first 1 named above)" in out.stdout
    assert "4-gram (--order 10000000: the text's longest n-gram)" in out.stdout, out.stdout


def test_the_tuning_table_rounds_each_wer_as_the_wer_lines_do(tmp_path):
    """1462 errors of 1491 words: compute-wer's float prints 98.06 and so does the %WER line; the table said 98.05
    (a double), so the grid's best and the decode it chose disagreed in the last digit."""
    import importlib.util
    from types import SimpleNamespace

    from rnnt.scoring import ErrorCounts, Report

    spec = importlib.util.spec_from_file_location("tune_lm_fusion_tool", ROOT / "steps" / "tune_lm_fusion.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    report = Report(counts=ErrorCounts(substitutions=1462, reference_words=1491))
    point = SimpleNamespace(weight=0.3, length_bonus=0.5, lodr_weight=0.0, ctc_weight=0.0)
    tool.write_grid(str(tmp_path / "grid.tsv"), [(0.5, report), (point, report)])  # (0.5: without the LM)
    assert (tmp_path / "grid.tsv").read_text().splitlines()[1:] == ["none\tnone\tnone\t0.5\t98.06",
                                                                     "0.3\t0.5\t0.0\t0.0\t98.06"]
    assert report.wer_line.startswith("%WER 98.06 [ 1462 / 1491, ")


def test_a_literal_blank_in_a_transcript_is_unk_to_the_lm_as_to_training(tmp_path):
    """Word units hold <blank>: the LM learnt a transcript's literal '<blank>' as that word (a third of the mass
    after 'A', which no search scores: fusion never scores the blank), while training reads it as <unk>."""
    for name, text in (("train", "u1 A B\nu2 B A\n"), ("lm_text", "u1 A <blank> B\nu2 B A\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "text").write_text(text)
    (tmp_path / "train" / "utt2dur").write_text("u1 1.0\nu2 1.0\n")
    out = run_tool(sys.executable, ROOT / "steps" / "build_units.py", "--unit-type", "word", tmp_path / "train",
                   tmp_path / "lang")
    assert out.returncode == 0, out.stderr
    out = run_tool(sys.executable, ROOT / "steps" / "build_ngram_lm.py", "--order", "2", tmp_path / "lm_text",
                   tmp_path / "lang", tmp_path / "lm.arpa")
    assert out.returncode == 0 and "; 1 transcripts hold units <unk> (1 of 5;" in out.stdout, out.stdout + out.stderr
    model = read_arpa(str(tmp_path / "lm.arpa"))
    assert ("A", "<unk>") in model and ("<unk>", "B") in model and not any("<blank>" in ngram for ngram in model)
