"""What a recipe's stages take from a training config besides its text.

The files it names, whose content the training depends on: train.init_from (the checkpoint it starts from,
unless the recipe passes its own: --no-init-from) and data.features.cmvn (the statistics it normalises by, with
the JSON read beside a Kaldi matrix). A train stage takes them among its inputs (utils/stages.sh config_files),
so that the model started from trained again, or statistics computed again, train it again: steps/train.py sees
both changes, but only when the stage runs.

What decoding reads of a trained experiment's config.yaml that a resumed training can change without a new
checkpoint (--decoding): data.tail_silence, the one such key (rnnt.training.config_change.RESUMABLE's others are
training's, or checked against the experiment's own copies). A decode stage takes it among its inputs
(utils/decoding.sh decoding_settings): the whole config.yaml, rewritten at each training run, re-decoded the same
checkpoint after an edit of train.log_every.

    python3 -m rnnt.training.config_inputs [--no-init-from] CONFIG   prints the files, one a line
    python3 -m rnnt.training.config_inputs --decoding EXP_DIR        prints 'data.tail_silence=S'
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from rnnt.data.cmvn_file import cmvn_source

if TYPE_CHECKING:
    from rnnt.training.experiment import Experiment


def config_inputs(experiment: Experiment, with_init_from: bool = True) -> list[str]:
    named = [experiment.train.init_from] if experiment.train.init_from and with_init_from else []
    cmvn = experiment.data.features.cmvn
    return named + ([cmvn] + ([cmvn_source(cmvn)] if cmvn_source(cmvn) != cmvn else []) if cmvn else [])


def main(argv: list[str]) -> int:
    options, paths = [a for a in argv if a.startswith("-")], [a for a in argv if not a.startswith("-")]
    if len(paths) != 1 or not set(options) <= {"--no-init-from", "--decoding"} or len(options) > 1:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    if options == ["--decoding"]:
        return print_decoding_settings(os.path.join(paths[0], "config.yaml"))
    from rnnt.training.experiment import load_experiment  # torch: not for the decoding settings, a stage's each

    try:
        experiment = load_experiment(paths[0])
    except (OSError, ValueError) as error:
        print(f"config_inputs: {paths[0]}: {error}", file=sys.stderr)
        return 1
    print("".join(f"{name}\n" for name in config_inputs(experiment, options != ["--no-init-from"])), end="")
    return 0


def print_decoding_settings(path: str) -> int:
    """The decoding settings of a trained experiment's config.yaml (steps/train.py writes it whole, the defaults
    in it), read as YAML alone: the stages ask for every decode, and torch's import took 1.6 s each time."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = (yaml.safe_load(f) or {}).get("data") or {}
        print(f"data.tail_silence={float(data.get('tail_silence', 0.0)):g}")
    except (OSError, ValueError, AttributeError, TypeError, yaml.YAMLError) as error:
        print(f"config_inputs: {path}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
