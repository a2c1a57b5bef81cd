"""rnnt.edit_distance counts and aligns as Kaldi's compute-wer and align-text do: a hand-worked case where the two
split the same two errors differently (compute-wer 1 insertion and 1 deletion, align-text 2 substitutions), and
on random word strings a minimum edit script every time (jiwer's distance) that spells both strings."""

import random

import jiwer
import pytest

from rnnt.edit_distance import alignment, error_counts
from rnnt.scoring import score


def test_kaldis_two_tie_breaks_by_hand():
    # compute-wer along the hypothesis: b against c: substitution (1) beats insertion and deletion (2); a against
    # c, then a against b: substitution ties insertion, and an insertion wins the tie
    assert error_counts(["c", "b"], ["b", "a"]) == (1, 1, 0)
    # align-text traced back from the end: match or substitution first on ties
    assert alignment(["c", "b"], ["b", "a"]) == [("c", "b"), ("b", "a")]
    report = score({"u": "c b"}, {"u": "b a"})
    assert report.wer_line == "%WER 100.00 [ 2 / 2, 1 ins, 1 del, 0 sub ]"
    assert "u #csid 0 2 0 0" in report.lines  # as Kaldi's wer_per_utt_details shows the same utterance


@pytest.mark.parametrize("reference,hypothesis,counts,pairs", [
    ("", "a b", (2, 0, 0), [(None, "a"), (None, "b")]),
    ("a b", "", (0, 2, 0), [("a", None), ("b", None)]),
    ("a b c", "a c", (0, 1, 0), [("a", "a"), ("b", None), ("c", "c")]),
    ("a c", "a b c", (1, 0, 0), [("a", "a"), (None, "b"), ("c", "c")]),
    ("a", "b a", (1, 0, 0), [(None, "b"), ("a", "a")]),
])
def test_plain_cases(reference, hypothesis, counts, pairs):
    assert error_counts(reference.split(), hypothesis.split()) == counts
    assert alignment(reference.split(), hypothesis.split()) == pairs


def test_random_strings_get_a_minimum_edit_script_that_spells_both():
    rng = random.Random(0)
    for _ in range(2000):
        ref = [rng.choice("abcd") for _ in range(rng.randint(0, 8))]
        hyp = [rng.choice("abcd") for _ in range(rng.randint(0, 8))]
        if ref and hyp:  # jiwer takes non-empty strings only
            words = jiwer.process_words(" ".join(ref), " ".join(hyp))
            minimum = words.substitutions + words.deletions + words.insertions
        else:
            minimum = len(ref) + len(hyp)
        assert sum(error_counts(ref, hyp)) == minimum, (ref, hyp)
        pairs = alignment(ref, hyp)
        assert [r for r, _ in pairs if r is not None] == ref and [h for _, h in pairs if h is not None] == hyp
        assert sum(r != h for r, h in pairs) == minimum, (ref, hyp)


def test_a_sentence_with_one_error_is_a_sentence_error():
    report = score({"a": "yes no", "b": "no no"}, {"a": "yes yes", "b": "no no"})
    assert report.ser_line == "%SER 50.00 [ 1 / 2 ]" and report.wer_line == "%WER 25.00 [ 1 / 4, 0 ins, 0 del, 1 sub ]"


def test_percentages_round_as_kaldis_float32():
    """compute-wer keeps the percentage in a float32 before printing two decimals: 1462 errors in 1491 words
    print 98.06 there, where the double gives 98.05; one sentence in 3, 33.33."""
    refs = {f"u{i:03d}": "w w w" for i in range(497)}  # 1491 words
    hyps = {**refs, **{f"u{i:03d}": "x x x" for i in range(487)}, "u487": "x w w"}  # 487 x 3 + 1 errors
    assert f"{100 * 1462 / 1491:.2f}" == "98.05"
    assert score(refs, hyps).wer_line == "%WER 98.06 [ 1462 / 1491, 0 ins, 0 del, 1462 sub ]"
    assert score({"a": "x", "b": "y", "c": "z"}, {"a": "x", "b": "y", "c": "q"}).ser_line == "%SER 33.33 [ 1 / 3 ]"


def test_words_split_at_ascii_whitespace_only_and_no_reference_word_is_an_infinite_wer():
    """compute-wer's words: a no-break or ideographic space is inside one (str.split made two of it); of no
    reference word its %WER is inf, 0 of 0 -nan, as glibc prints x86's NaN of 0 / 0 (a made-up 200.00 before)."""
    report = score({"u1": "a\u00a0b c\u3000d\te"}, {"u1": "a b c\u3000d e"})
    assert report.wer_line.startswith("%WER 66.67 [ 2 / 3, 1 ins, 0 del, 1 sub ]")
    assert score({"u1": ""}, {"u1": "x y"}).wer_line.startswith("%WER inf [ 2 / 0, 2 ins, 0 del, 0 sub ]")
    assert score({"u1": ""}, {"u1": ""}).wer_line.startswith("%WER -nan [ 0 / 0,")


def test_the_per_word_statistics_by_hand():
    """Kaldi's per-word lines: word, times correct, errors it took part in (a substitution counts for both its
    words), count in the references, count in the hypotheses; most errors first."""
    text = score({"u1": "a b c", "u2": "a a"}, {"u1": "a x c d", "u2": "a"}).text()
    stats = text.split("PER-WORD STATS: word  corr  errors  count-in-ref  count-in-hyp\n")[1].splitlines()
    assert stats == ["a   2 1 3 2", "b   0 1 1 0", "d   0 1 0 1", "x   0 1 0 1", "c   1 0 1 1"]
    assert "SUBSTITUTIONS: count ref -> hyp\n1   b -> x\n" in text and "INSERTIONS: count hyp\n1   d\n" in text
