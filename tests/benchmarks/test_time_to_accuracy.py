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


def test_a_training_that_reaches_the_target_gives_its_minutes_and_epoch(yesno, tmp_path):
    """A row's result from the epochs the trial counted (TrialRun.counted): minutes and epoch to the target, the
    last epoch's dev WER, seconds an epoch."""
    recipe = tmp_path / "recipe"
    for name, target in (("train/data.list", yesno / "train.list"), ("dev/data.list", yesno / "test.list"),
                         ("lang_bpe64", yesno / "lang")):
        (recipe / "data" / name).parent.mkdir(parents=True, exist_ok=True)
        (recipe / "data" / name).symlink_to(target)
    config = yaml.safe_load((ROOT / "egs" / "yesno" / "conf" / "tiny.yaml").read_text())
    config["train"]["epochs"] = 2
    minutes, epoch, last_wer, per_epoch = time_to_target(config, False, str(recipe), str(tmp_path / "row"), 1000.0,
                                                         5.0)
    assert epoch == 1 and 0 < minutes < 5 and 0 <= last_wer and per_epoch >= 0  # (0: both ended within a poll)
