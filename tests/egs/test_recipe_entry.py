"""How every recipe starts: --help before its environment (a fresh clone's path.sh installs it first), and a
run.sh started from another folder refused (its conf/, local/ and data/ are relative: from the project's root it
wrote data/ and exp/ there and failed on conf/)."""

import os
import subprocess

import pytest
from recipe_runs import copy_recipe

from conftest import ROOT

ENTRIES = sorted((p.parent.name, p.name) for p in (ROOT / "egs").glob("*/*.sh") if p.name != "path.sh")


@pytest.mark.parametrize("name, script", ENTRIES)
def test_help_needs_no_environment_and_another_folder_is_refused(name, script, tmp_path):
    """Every script a recipe folder offers (run.sh, an4's tune.sh): its usage from anywhere (tune.sh's --help from
    the project's root was refused), and anything else from another folder refused."""
    recipe = copy_recipe(name, tmp_path)
    os.unlink(recipe / "path.sh")
    (recipe / "path.sh").write_text("echo path.sh sourced >&2; exit 9\n")  # as an install that fails
    for command in ([f"./{script}"], ["sh", script]):  # sh: "set: Illegal option -o pipefail" (dash's)
        out = subprocess.run([*command, "--help"], cwd=recipe, capture_output=True, text=True)
        assert out.returncode == 0 and out.stdout.startswith("Usage: ") and out.stderr == "", (command, out.stderr)
    out = subprocess.run([str(recipe / script), "--exp", "exp/x"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1
    assert out.stderr == f"{script}: run it from its recipe folder: cd {recipe} && ./{script}\n", out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing written where it was started
    out = subprocess.run([str(recipe / script), "--help"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("Usage: "), out.stderr  # (it was refused: no usage)


@pytest.mark.parametrize("name, option", [("yesno", "--method"), ("fsdd", "--method"), ("librispeech", "--methods")])
def test_a_recipe_without_an_lm_stage_refuses_an_lm_fused_method_at_its_start(name, option, tmp_path):
    """LibriSpeech's run.sh took modified_beam_lm and failed at its decode stage, after training."""
    recipe = copy_recipe(name, tmp_path)
    out = subprocess.run(["./run.sh", option, "modified_beam_lm", "--stage", "99"], cwd=recipe, capture_output=True,
                         text=True)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "run.sh: --method modified_beam_lm fuses an n-gram LM, which this recipe does not build" in out.stderr


@pytest.mark.parametrize("name", ["yesno", "fsdd"])
def test_a_recipe_that_decodes_one_search_refuses_several_at_its_start(name, tmp_path):
    """check_methods took 'greedy beam', and decode.py refused it at the decode stage, after training."""
    recipe = copy_recipe(name, tmp_path)
    out = subprocess.run(["./run.sh", "--method", "greedy beam", "--stage", "99"], cwd=recipe, capture_output=True,
                         text=True)
    assert out.returncode == 1 and out.stderr == ("run.sh: --method takes one search, not 'greedy beam' (this recipe "
                                                  "decodes one; run it again for another)\n"), out.stdout + out.stderr


def test_an_experiment_dir_that_holds_or_lies_in_another_is_refused_at_the_start(tmp_path):
    """A changed config sets the experiment aside whole: --exp exp moved every other experiment and the data stages'
    markers into exp.1 (all trained and prepared again), and exp/tiny/v2 went with exp/tiny."""
    recipe = copy_recipe("yesno", tmp_path)
    (recipe / "exp" / "tiny" / "v2").mkdir(parents=True)
    for experiment in ("tiny", "tiny/v2"):
        (recipe / "exp" / experiment / "config.yaml").write_text("model: {}\n")
    refusals = {("--exp", "exp"): "--exp exp: it holds the run's stage markers (exp/.stages) and every experiment",
                ("--exp", "exp/tiny/"): "--exp exp/tiny: it holds the experiment exp/tiny/v2; give each experiment a "
                                        "dir of its own",
                ("--exp", "exp/tiny/v2"): "--exp exp/tiny/v2: it lies inside the experiment exp/tiny;"}
    for options, message in refusals.items():
        out = subprocess.run(["./run.sh", *options, "--stage", "99"], cwd=recipe, capture_output=True, text=True)
        assert out.returncode == 1 and out.stderr.startswith(f"run.sh: {message}"), (options, out.stderr)
    out = subprocess.run(["./run.sh", "--exp", "exp/other", "--stage", "99"], cwd=recipe, capture_output=True,
                         text=True)
    assert "give each experiment a dir of its own" not in out.stderr, out.stderr
