"""utils/units.sh's choices of the LM search for a recipe's options left empty, and which configs
utils/training.sh starts from another model."""

import os
import subprocess
import sys

import pytest
from conftest import ROOT


def sourced(script: str, *args: str) -> subprocess.CompletedProcess:
    """SCRIPT run by bash with both files sourced, as run.sh does after path.sh (this Python first on PATH)."""
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    return subprocess.run(["bash", "-c", f"set -euo pipefail; . utils/units.sh; . utils/training.sh; {script}",
                           "units", *args], cwd=ROOT, capture_output=True, text=True, env=env)


@pytest.mark.parametrize("unit_type, method, expected", [
    ("phone", "ctc_prefix_beam_lm", "words 3 16"),  # CTC prefix search over words: beam 16
    ("phone", "modified_beam_lm", "words 3 8"),  # the transducers: 8 (16 tied it on dev at three times the time)
    ("char", "pooled_beam_lm", "words 3 16"),  # its CTC prefix search too
    ("char", "beam_lodr", "words 3 8"),
    ("bpe", "ctc_prefix_beam_lm", "units 5 8"),  # over units: 8
    ("bpe", "modified_beam_lodr", "units 5 8"),
])
def test_the_lm_search_dev_chose_for_the_units_and_method(unit_type, method, expected):
    out = sourced('lm_over= lm_order= lm_beam=; default_lm_search "$1"; echo "$lm_over $lm_order $(lm_beam_of "$2")"',
                  unit_type, method)
    assert out.returncode == 0 and out.stdout.strip() == expected, out.stderr


def test_options_given_are_kept():
    out = sourced('lm_over=units lm_order=6 lm_beam=4; default_lm_search phone; '
                  'echo "$lm_over $lm_order $(lm_beam_of ctc_prefix_beam_lm)"')
    assert out.returncode == 0 and out.stdout.strip() == "units 6 4", out.stderr


@pytest.mark.parametrize("options, message", [
    ("lm_over=word lm_order=", "run.sh: --lm-over takes units or words, not 'word'"),
    ("lm_over= lm_order=three", "run.sh: --lm-order takes an n-gram order (1 or more), not 'three'"),
    ("lm_over=words lm_order= unit_type=bpe", "run.sh: --lm-over words needs --unit-type phone or char (a word is "
     "spelt in them through the lexicon); over bpe units take --lm-over units"),
    ("lm_over= lm_order= lm_beam=abc", "run.sh: --lm-beam takes a beam (1 or more), not 'abc'"),
    ("lm_over= lm_order= lm_weights=x,y", "run.sh: --lm-weights: expected finite numbers of at least 0 separated by "
     "commas, got 'x,y'"),
    ("lm_over= lm_order= lm_bonuses=none", "run.sh: --lm-bonuses: expected finite numbers separated by commas, got "
     "'none'"),
])
def test_lm_options_are_checked_before_any_stage(options, message):
    """They failed at the LM stage (a word LM over BPE units: at the LM search), after the training."""
    out = sourced(f'unit_type=char lm_beam= lm_weights= lm_bonuses=-2,0.5 {options}; default_lm_search "$unit_type"; '
                  'echo reached')
    assert out.returncode == 1 and out.stderr.strip() == message and "reached" not in out.stdout


def test_a_deploy_kind_is_offline_or_streaming():
    """'offlin' passed (anything not streaming was offline) and failed at the export stage, after the training."""
    out = sourced("check_deployable char offlin conf/deploy.yaml; echo reached")
    assert out.returncode == 1 and out.stderr.strip() == "run.sh: --deploy takes offline and/or streaming, not 'offlin'"


def test_only_a_config_that_starts_from_a_model_gets_one(tmp_path):
    """run.sh trains --init-config's model only for a --train-config with train.init_from."""
    configs = {"block": "train:\n  epochs: 1\n  init_from: exp/other/avg-5.pt\n",
               "flow": "train: {epochs: 1, init_from: exp/other/avg-5.pt}\n",
               "alone": "train: {epochs: 1}\n", "empty": "train:\n  init_from: ''\n", "nothing": ""}
    for name, text in configs.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    starts = {name: sourced('starts_from_a_model "$1"', str(tmp_path / f"{name}.yaml")).returncode == 0
              for name in configs}
    assert starts == {"block": True, "flow": True, "alone": False, "empty": False, "nothing": False}


def test_each_unit_type_has_a_lang_dir_of_its_own():
    out = sourced("for kind in bpe unigram char phone; do lang_of $kind 64; done")
    assert out.returncode == 0 and out.stdout.split() == ["data/lang_bpe64", "data/lang_unigram64", "data/lang_char",
                                                          "data/lang_phone"], out.stderr
    out = sourced("lang_of word 64")
    assert out.returncode == 1 and "--unit-type must be bpe, unigram, char or phone, got 'word'" in out.stderr
