"""rnnt.lm.hotwords: the bonus a unit sequence collects, against a matcher written the plain way."""

import random
import re

import pytest

from rnnt.lm.hotwords import HotwordFusion, HotwordGraph, read_hotwords


def plain_bonus(phrases: list[list[int]], units: list[int], score: float, boundary: int | None = None,
                scores: list[float] | None = None) -> float:
    """The bonus by its definition: after each unit, the units of the current match are cut to their longest
    ending that begins some phrase and holds all or none of the phrase the match had banked (a boundary, its last
    unit, may be shared); a cut to none of it ends the match, which keeps its bank. Where phrases end the match,
    the longest of those is complete: it earns for each unit the largest score of the phrases that begin with the
    units up to it, and is banked if that is more than the bank; if a longer phrase begins with the match, the
    match goes on, else it keeps its bank and matching starts again. What a match had not banked when the
    sequence ends is lost. With a boundary unit, phrases are whole words: a boundary before and after each (the
    sequence's start and end count as ones), earning nothing."""
    scores = scores or [score] * len(phrases)
    if boundary is not None:
        phrases, units = [[boundary, *p, boundary] for p in phrases], [boundary, *units, boundary]

    def earned(phrase):
        return sum(max(s for p, s in zip(phrases, scores) if p[:k + 1] == phrase[:k + 1])
                   for k, unit in enumerate(phrase) if unit != boundary)

    def begins(cut):
        return any(p[:len(cut)] == cut for p in phrases)

    kept, banked, bank, match = 0.0, 0.0, None, []  # bank: the banked phrase's first and last position
    for position, unit in enumerate(units):
        cut = match + [unit]
        if not begins(cut):  # the match is broken
            def fits(cut):
                start = position - len(cut) + 1
                return bank is None or start <= bank[0] or start > bank[1] - (boundary is not None)
            cut = cut[1:]
            while cut and not (begins(cut) and fits(cut)):
                cut = cut[1:]
            if bank is None or position - len(cut) + 1 > bank[0]:  # none of the banked phrase: the match ends
                kept, banked, bank = kept + banked, 0.0, None
        match = cut
        complete = [p for p in phrases if len(p) <= len(match) and match[len(match) - len(p):] == p]
        if complete:
            longest = max(complete, key=len)
            if earned(longest) > banked:
                banked, bank = earned(longest), (position - len(longest) + 1, position)
            if not any(len(p) > len(match) and p[:len(match)] == match for p in phrases):
                kept, banked, bank, match = kept + banked, 0.0, None, [unit] if unit == boundary else []
    return kept + banked


def collected(fusion: HotwordFusion, units: list[int]) -> float:
    state, total = fusion.start(), 0.0
    for unit in units:
        ((added, state),) = fusion.expansions(state, unit)
        total += added
    ((end, _),) = fusion.finish(state)
    return total + end


@pytest.mark.parametrize("own_scores", [False, True])
@pytest.mark.parametrize("boundary", [None, 4])
def test_the_bonus_of_random_sequences_is_the_plain_matchers(boundary, own_scores):
    """Units 1-3 (and 4, a boundary between words where there is one): 3000 sequences over random phrases, one
    score for all or each phrase its own (None: the default), as a hotwords file's ':S' gives them."""
    rng = random.Random(0)
    for trial in range(300):
        phrases = [[rng.randrange(1, 4) for _ in range(rng.randrange(1, 5))] for _ in range(rng.randrange(1, 5))]
        own = [rng.choice([None, 0.5, 2.0, 3.0]) for _ in phrases] if own_scores else None
        fusion = HotwordFusion(HotwordGraph(phrases, 1.5, boundary, own))
        scores = [1.5 if s is None else s for s in own] if own else None
        for _ in range(10):
            units = [rng.randrange(1, 5) for _ in range(rng.randrange(0, 12))]
            expected = plain_bonus(phrases, units, 1.5, boundary, scores)
            assert collected(fusion, units) == pytest.approx(expected), (phrases, own, units)


def test_no_unit_earns_twice_where_phrases_overlap():
    """A completed phrase banked while a longer one could follow (NEW YORK, NEW YORK TIMES): a break fell back to a
    suffix reaching into it (YORK CITY), which paid YORK again: NEW YORK CITY earned 22.5 with NEW YORK TIMES in
    the list, 10.5 without it. The suffix holds all of the banked phrase (2 3 5 after 1 2 3, 2 3 banked) or none."""
    letters = {c: i for i, c in enumerate("▁ABCDEFGHIJKLMNOPQRSTUVWXYZ", start=2)}

    def spelt(text):
        return [letters["▁" if c == " " else c] for c in text]

    for phrases in (["NEW YORK", "YORK CITY"], ["NEW YORK", "YORK CITY", "NEW YORK TIMES"]):
        graph = HotwordGraph([spelt(p) for p in phrases], 1.5, boundary=letters["▁"])
        assert collected(HotwordFusion(graph), spelt("NEW YORK CITY")) == 7 * 1.5  # NEW YORK's 7 letters
    assert collected(HotwordFusion(HotwordGraph([[1, 2], [2, 1], [1, 2, 3]], 1.0)), [1, 2, 1]) == 2.0  # not 4
    assert collected(HotwordFusion(HotwordGraph([[2, 3], [1, 2, 3, 4], [2, 3, 5]], 1.0)), [1, 2, 3, 5]) == 3.0
    rng = random.Random(1)
    for trial in range(3000):  # at most the largest score for each unit
        phrases = [[rng.randrange(1, 4) for _ in range(rng.randrange(1, 6))] for _ in range(rng.randrange(2, 8))]
        units = [rng.randrange(1, 4) for _ in range(rng.randrange(0, 12))]
        assert collected(HotwordFusion(HotwordGraph(phrases, 1.0)), units) <= len(units), (phrases, units)


def test_letters_match_whole_words_only():
    """Char units, ▁ (4) between words: IT (1 2) in I T, and I T ▁ I T, not inside S I T (3 1 2) or I T S."""
    fusion = HotwordFusion(HotwordGraph([[1, 2]], 1.0, boundary=4))
    assert collected(fusion, [1, 2]) == 2.0 and collected(fusion, [1, 2, 4, 1, 2]) == 4.0
    assert collected(fusion, [3, 1, 2]) == 0.0 and collected(fusion, [1, 2, 3]) == 0.0
    assert collected(fusion, [3, 4, 1, 2, 4, 3]) == 2.0


def test_a_partial_match_is_taken_back_and_a_phrase_inside_another_keeps_its_bonus():
    fusion = HotwordFusion(HotwordGraph([[1, 2, 3], [2]], 2.0))
    assert collected(fusion, [1, 2, 3]) == 6.0  # "2" completes inside 1 2 3, whose match goes on
    assert collected(fusion, [1, 2, 1]) == 2.0  # the match broken: "2" kept, 1 taken back
    assert collected(fusion, [1, 3]) == 0.0 and collected(fusion, [1]) == 0.0
    nested = HotwordFusion(HotwordGraph([[1, 2], [1, 2, 3, 4]], 1.0))  # CENTRE and CENTRE AVE
    assert collected(nested, [1, 2, 3, 4]) == 4.0 and collected(nested, [1, 2, 3]) == 2.0
    assert collected(nested, [1, 2, 3, 1, 2]) == 4.0 and collected(nested, [1, 2]) == 2.0
    longer = HotwordFusion(HotwordGraph([[1, 2, 3]], 2.0))
    assert collected(longer, [1, 2, 3, 1, 2]) == 6.0  # the second, incomplete at the end, taken back
    state = longer.start()
    steps = [longer.expansions(state, 1)[0]]
    steps.append(longer.expansions(steps[-1][1], 2)[0])
    assert [added for added, _ in steps] == [2.0, 2.0]  # each unit of a match is favoured as it comes


class Inner:
    """An LM's fusion stand-in: each unit adds -1 and can lead two ways; the end adds -0.5."""

    def start(self):
        return "s"

    def allowed(self, state):
        return frozenset({1, 2})

    def expansions(self, state, token):
        return [(-1.0, state + "a"), (-1.5, state + "b")]

    def finish(self, state):
        return [(-0.5, [state])]


def test_hotwords_over_an_lm_add_to_each_of_its_expansions():
    fusion = HotwordFusion(HotwordGraph([[1, 2]], 3.0), Inner())
    assert fusion.allowed(fusion.start()) == frozenset({1, 2})
    first = fusion.expansions(fusion.start(), 1)
    assert [(score, state) for score, state in first] == [(2.0, ((1, 0.0, 0, 0), "sa")), (1.5, ((1, 0.0, 0, 0), "sb"))]
    assert fusion.finish(first[0][1]) == [(-3.5, ["sa"])]  # the partial match taken back with the LM's end


def test_a_hotwords_file_in_the_models_units(tmp_path):
    class Chars:
        kind = "char"
        units = {"<blank>": 0, "<unk>": 1, "▁": 2, "A": 3, "B": 4}

        def encode(self, text):
            return [self.units.get("▁" if c == " " else c, 1) for c in text]

    def read(path):
        skipped = []
        phrases, lines = read_hotwords(str(path), Chars(), skipped)
        return phrases, lines, skipped

    (tmp_path / "hot.txt").write_text("AB  A\n\nB :2.5\nA :0\n")  # sherpa-onnx's ':0' is the default too
    assert read(tmp_path / "hot.txt") == ([([3, 4, 2, 3], None), ([4], 2.5), ([3], None)], 3, [])
    # a line that cannot be used is named by its line and left out, the rest kept (one aborted the whole run, where
    # decode_sherpa_onnx.py's hotwords left it out)
    for line, problem in [("A :1 B", "comes last on its line"), ("A :x", "':x' is not a finite number"),
                          ("A :-1", "':-1' is not a finite number"), ("A :inf", "is not a finite"),
                          (":2", "no phrase"), ("ABC", "holds what the model's units cannot spell")]:
        (tmp_path / "scored.txt").write_text(f"A\n{line}\n")
        phrases, lines, skipped = read(tmp_path / "scored.txt")
        assert (phrases, lines, len(skipped)) == ([([3], None)], 1, 1)
        assert re.fullmatch(f".*scored.txt:2: '{re.escape(line)}'.*{problem}.*; left out", skipped[0]), skipped
    (tmp_path / "latin1.txt").write_bytes(b"A\nCAF\xc9\n")  # was UnicodeDecodeError's words alone, no file
    assert read(tmp_path / "latin1.txt")[1:] == (1, [f"{tmp_path}/latin1.txt:2: not UTF-8 (save the file as UTF-8); "
                                                    "left out"])
    (tmp_path / "bom.txt").write_bytes("\ufeffAB\nB\n".encode())  # saved by Notepad: its first phrase was refused
    assert read(tmp_path / "bom.txt")[0] == [([3, 4], None), ([4], None)]
    (tmp_path / "empty.txt").write_text("\n")
    with pytest.raises(ValueError, match="no hotword in it"):
        read(tmp_path / "empty.txt")
    (tmp_path / "bad.txt").write_text("ABC\n")
    with pytest.raises(ValueError, match=r"no hotword in it \(one phrase a line\); its 1 line left out:\n  "
                                         r".*bad.txt:1: 'ABC' holds what"):
        read(tmp_path / "bad.txt")


def test_a_phone_models_hotword_is_every_pronunciation_of_its_words(tmp_path):
    class Phones:
        kind = "phone"
        units = {"<blank>": 0, "<unk>": 1, "▁": 2, "R": 3, "IY": 4, "D": 5, "EH": 6, "IH": 7, "T": 8}
        lexicon = {"READ": [("R", "IY", "D"), ("R", "EH", "D")], "IT": [("IH", "T")]}

    (tmp_path / "hot.txt").write_text("READ IT\n")
    assert read_hotwords(str(tmp_path / "hot.txt"), Phones(), []) == ([([3, 4, 5, 2, 7, 8], None),
                                                                        ([3, 6, 5, 2, 7, 8], None)], 1)
    (tmp_path / "bad.txt").write_text("READ THIS\n")
    with pytest.raises(ValueError, match=r"bad.txt:1: 'READ THIS' holds what the model's units cannot spell \(a "
                                         r"word its lexicon lacks\)"):
        read_hotwords(str(tmp_path / "bad.txt"), Phones(), [])
