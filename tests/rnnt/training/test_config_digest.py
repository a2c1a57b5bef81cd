"""rnnt.training.config_digest: what a recipe's training stage takes of a config as resolved, its defaults in."""

import dataclasses
import subprocess
import sys

from conftest import ROOT
from rnnt.training.config_digest import config_digest
from rnnt.training.experiment import load_experiment

YESNO = ROOT / "egs" / "yesno" / "conf" / "tiny.yaml"


def test_a_default_that_changed_changes_it_and_what_a_resume_honours_does_not():
    experiment = load_experiment(str(YESNO))
    digest = config_digest(experiment)
    train = experiment.train
    other_default = dataclasses.replace(experiment, train=dataclasses.replace(train, grad_clip=train.grad_clip + 1))
    assert config_digest(other_default) != digest  # train.py --resume sets the experiment aside over it
    honoured = dataclasses.replace(experiment, train=dataclasses.replace(
        train, epochs=train.epochs + 5, log_every=3, init_from="/elsewhere/init.pt", init_from_sha256="ab"),
        paths=dataclasses.replace(experiment.paths, train_list="other.list"))
    assert config_digest(honoured) == digest  # resumed (the files and lists: the stage's other inputs)


def test_the_command_prints_it_and_names_a_config_it_cannot_read(tmp_path):
    out = subprocess.run([sys.executable, "-m", "rnnt.training.config_digest", str(YESNO)], capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout == f"resolved-config {config_digest(load_experiment(str(YESNO)))}\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: {epochs: 0}\n")
    out = subprocess.run([sys.executable, "-m", "rnnt.training.config_digest", str(bad)], capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 1 and f"{bad}: train.epochs must be at least 1" in out.stderr
