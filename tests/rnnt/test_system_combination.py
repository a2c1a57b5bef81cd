"""rnnt.system_combination's choice among pooled hypotheses: choose picks the highest weighted sum as the
plain definition does (a weight-0 feature left out, -inf where a weighted feature is -inf, the first on a
tie), and grid_errors counts every weighting's errors as scoring choose's transcripts would, so a tuning
grid can be searched at once."""

import math
import random

from rnnt.scoring import score
from rnnt.search import Hypothesis
from rnnt.system_combination import choose, grid_errors, weight_grid

WORDS = "YES NO THREE FREE TREE".split()


def plain_choice(hyps, features, weights):
    def total(row):
        used = [(w, x) for w, x in zip(weights, row) if w]
        return sum(w * x for w, x in used) if all(math.isfinite(x) for _, x in used) else -math.inf
    return max(zip(hyps, features), key=lambda pair: total(pair[1]))[0]


def random_pools(rng, utterances=40, features=4):
    pools, rows, refs = {}, {}, {}
    for u in range(utterances):
        key = f"utt{u:02d}"
        refs[key] = " ".join(rng.choices(WORDS, k=rng.randint(1, 6)))
        if u % 13 == 12:
            continue  # a reference no system decoded: all deletions
        hyps = [Hypothesis([], [], 0.0, words=rng.choices(WORDS, k=rng.randint(0, 6)))
                for _ in range(rng.randint(1, 6))]
        table = [[rng.choice([-math.inf, -3.0, -1.5]) if rng.random() < 0.15 else round(rng.uniform(-9, 0), 1)
                  for _ in range(features)] for _ in hyps]
        if len(hyps) > 1:
            table[1] = list(table[0])  # a tie: the first must win
        if u % 7 == 0:
            table = [[-math.inf] * features for _ in hyps]  # nothing finite: the first
        pools[key], rows[key] = hyps, table
    pools["not-in-refs"], rows["not-in-refs"] = [Hypothesis([], [], 0.0, words=["NO"])], [[0.0] * features]
    return pools, rows, refs


def test_choose_is_the_plain_weighted_maximum():
    rng = random.Random(0)
    pools, rows, _ = random_pools(rng)
    grid = list(weight_grid(["a", "b", "c", "lm"], [0, 0.2, 0.7, 1.0]))
    for weights in grid:
        for key, hyps in pools.items():
            assert choose(hyps, rows[key], weights) is plain_choice(hyps, rows[key], weights), (key, weights)


def test_grid_errors_are_those_of_scoring_each_weightings_transcripts():
    rng = random.Random(1)
    pools, rows, refs = random_pools(rng)
    grid = list(weight_grid(["a", "b", "c", "lm"], [0, 0.2, 0.4, 0.7, 1.0]))
    errors = grid_errors(pools, rows, refs, grid)
    expected = [score(refs, {key: " ".join(choose(hyps, rows[key], w).words) for key, hyps in pools.items()})
                .counts.errors for w in grid]
    assert errors == expected
    assert len(set(errors)) > 5  # the weights matter on these pools


def test_an_nbest_line_that_is_not_utf8_is_named_and_left_out_the_rest_kept(tmp_path, capsys):
    """It ended the reading in a UnicodeDecodeError naming neither file nor line."""
    from rnnt.system_combination import read_nbest

    good = b'{"key": "u%d", "hyps": [{"text": "YES", "tokens": [{"id": 2}]}]}\n'
    path = tmp_path / "nbest.json"
    path.write_bytes(good % 1 + b'{"key": "u2", "hyps": [{"text": "CAF\xc9", "tokens": [{"id": 2}]}]}\n' + good % 3)
    nbests = read_nbest(str(path), 4)
    assert sorted(nbests) == ["u1", "u3"] and nbests["u3"][0].words == ["YES"]
    assert f"{path}:2: not a decode.py n-best line (UnicodeDecodeError: " in capsys.readouterr().err


def test_a_second_line_of_an_utterance_or_a_key_that_is_no_string_is_named_and_left_out(tmp_path, capsys):
    """A repeated utterance replaced the first line's hypotheses in silence, and a number was taken for a key;
    a blank line is no line (before: named as a JSON error)."""
    from rnnt.system_combination import read_nbest

    line = '{"key": %s, "hyps": [{"text": "%s", "tokens": [{"id": 2}]}]}\n'
    path = tmp_path / "nbest.json"
    path.write_text(line % ('"u1"', "YES") + "\n" + line % ('"u1"', "NO") + line % ("7", "NO"))
    nbests = read_nbest(str(path), 4)
    assert list(nbests) == ["u1"] and nbests["u1"][0].words == ["YES"]
    err = capsys.readouterr().err
    assert f"{path}:3: u1 again (its first line is kept); left out" in err
    assert f"{path}:4: not a decode.py n-best line (TypeError: key 7 is not a string); left out" in err
    assert ":2:" not in err


def test_an_nbest_line_nested_past_pythons_stack_is_named_and_left_out(tmp_path, capsys):
    """json.loads raises RecursionError on arrays nested some thousands deep: it ended the combination."""
    from rnnt.system_combination import read_nbest

    good = '{"key": "u%d", "hyps": [{"text": "YES", "tokens": [{"id": 2}]}]}\n'
    path = tmp_path / "nbest.json"
    path.write_text(good % 1 + "[" * 100_000 + "]" * 100_000 + "\n" + good % 3)
    assert sorted(read_nbest(str(path), 4)) == ["u1", "u3"]
    assert f"{path}:2: not a decode.py n-best line (RecursionError: " in capsys.readouterr().err
