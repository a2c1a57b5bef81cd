"""benchmarks/time_to_accuracy.py: a lever whose training crashes is a failed row (main exits 1), not a slow
one (a crash, bf16 on a CPU without it say, read as 'not in 10 minutes' and left out, the run exit 0)."""

import sys

import pytest
import yaml

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from time_to_accuracy import time_to_target  # noqa: E402


def test_a_training_that_crashes_raises_with_its_log(tmp_path):
    recipe = tmp_path / "recipe"  # no data stages run: the training exits 1 at once
    recipe.mkdir()
    config = yaml.safe_load((ROOT / "egs" / "an4" / "conf" / "ci.yaml").read_text())
    with pytest.raises(RuntimeError, match=r"training failed \(exit 1\); see .*row0/output.log"):
        time_to_target(config, False, str(recipe), str(tmp_path / "row0"), 45.0, 0.5)
    assert "data.list" in (tmp_path / "row0" / "output.log").read_text()
