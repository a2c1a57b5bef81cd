"""The files a training config names, whose content the training depends on beyond the config's text:
train.init_from (the checkpoint it starts from) and data.features.cmvn (the statistics it normalises by,
with the JSON read beside a Kaldi matrix). A recipe's train stage takes them among its inputs (utils/stages.sh
config_files), so that the model started from trained again, or statistics computed again, train it again:
steps/train.py sees both changes, but only when the stage runs.

    python3 -m rnnt.training.config_inputs CONFIG   prints them, one a line
"""

from __future__ import annotations

import sys

from rnnt.data.cmvn_file import cmvn_source
from rnnt.training.experiment import Experiment, load_experiment


def config_inputs(experiment: Experiment) -> list[str]:
    named = [experiment.train.init_from] if experiment.train.init_from else []
    cmvn = experiment.data.features.cmvn
    return named + ([cmvn] + ([cmvn_source(cmvn)] if cmvn_source(cmvn) != cmvn else []) if cmvn else [])


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        experiment = load_experiment(argv[0])
    except (OSError, ValueError) as error:
        print(f"config_inputs: {argv[0]}: {error}", file=sys.stderr)
        return 1
    print("".join(f"{path}\n" for path in config_inputs(experiment)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
