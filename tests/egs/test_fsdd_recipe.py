"""egs/fsdd's data stages with --strings (digit strings joined from one speaker's recordings)."""

import pytest
from recipe_runs import copy_recipe, run_recipe

pytestmark = pytest.mark.slow


def test_fsdd_strings_data_stages(test_data, tmp_path):
    """fsdd --strings N: its data, shards and units stages beside the single-digit ones, at least one
    test string for a small N, the result lines saying what is not decoded yet, and a clear error for
    an N that is not a number; its stage logs beside its markers, not over the single digits' logs."""
    recipe = copy_recipe("fsdd", tmp_path)
    corpus = str(test_data / "fsdd" / "recordings")
    bad = run_recipe(recipe, "--corpus-dir", corpus, "--strings", "many")
    assert bad.returncode == 1 and "run.sh: option '--strings' takes a whole number of at least 0, not 'many'" \
        in bad.stderr
    out = run_recipe(recipe, "--corpus-dir", corpus, "--strings", "3", "--stop-stage", "3")
    assert out.returncode == 0, out.stderr[-3000:]
    data = recipe / "data"
    assert len((data / "train_with_strings3" / "text").read_text().splitlines()) == 2520 + 3
    assert len((data / "test_strings3" / "text").read_text().splitlines()) == 1
    for name in ("train_with_strings3", "test", "test_strings3"):
        assert (data / name / "data.list").is_file()
    assert sorted(p.name for p in (recipe / "exp" / ".stages-strings3").iterdir()) == \
        ["1.data.done", "2.shards.done", "3.units.done"]
    logs = sorted(p.name for p in (recipe / "exp" / "log-strings3").iterdir())  # the single digits' logs apart
    assert logs == ["1.data.log", "2.shards.log", "3.units.log"] and not (recipe / "exp" / "log").exists()
    assert out.stdout.strip().splitlines()[-3:] == [
        "fsdd: dev not decoded yet (no model in exp/strings3)", "fsdd: test not decoded yet (no model in exp/strings3)",
        "fsdd: test_strings3 not decoded yet (no model in exp/strings3)"]
    # another N has data of its own: nothing of N=3 is overwritten or refused
    more = run_recipe(recipe, "--corpus-dir", corpus, "--strings", "7", "--stop-stage", "2")
    assert more.returncode == 0, more.stderr[-3000:]
    assert len((data / "train_with_strings7" / "text").read_text().splitlines()) == 2520 + 7
    assert len((data / "train_with_strings3" / "text").read_text().splitlines()) == 2520 + 3
