"""The yesno recipe's tiny model as training tests run it: a config file with their settings and the
steps/train.py command line."""

import sys
from pathlib import Path

import yaml

from conftest import ROOT

CONFIG = ROOT / "egs" / "yesno" / "conf" / "tiny.yaml"


def config_file(tmp_path: Path, batch_size: int = 5, dropout: float = 0.0, **train) -> Path:
    """The yesno recipe's config with batches of 5 (6 steps an epoch on its 30 training utterances)."""
    values = yaml.safe_load(CONFIG.read_text())
    values["data"]["batch"] = {"type": "static", "batch_size": batch_size}
    values["model"]["encoder"]["dropout"] = values["model"]["predictor"]["dropout"] = dropout
    values["train"].update(train)
    path = tmp_path / "conf.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def train_args(yesno, exp_dir, conf):
    return [sys.executable, str(ROOT / "steps" / "train.py"), "--config", str(conf), "--train-list",
            str(yesno / "train.list"), "--lang-dir", str(yesno / "lang"), "--exp-dir", str(exp_dir)]
