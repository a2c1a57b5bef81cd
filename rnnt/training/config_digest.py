"""A digest of a training config as steps/train.py resolves it, its defaults filled in: a recipe's training stage
takes it among its inputs beside the config's text (utils/stages.sh config_inputs), so that a default an upgrade
changed trains again. Without it the stage read as done before, while steps/train.py --resume would have set the
experiment aside as trained under another config (rnnt.training.config_change).

Left out, as a resume leaves them out or a stage fingerprints them otherwise: the keys a resume honours
(config_change.RESUMABLE), the paths section (the stage's data lists and units), and the files the config names
with the digests train.py records of them (config_change.DIGESTED: the stage takes those files among its inputs,
rnnt.training.config_inputs).

    python3 -m rnnt.training.config_digest CONFIG   prints 'resolved-config <16 hex digits>'
"""

from __future__ import annotations

import hashlib
import json
import sys

from rnnt.cli import module_usage
from rnnt.config import to_dict
from rnnt.training.config_change import DIGESTED, RESUMABLE, flat


def config_digest(experiment) -> str:
    """16 hex digits of the experiment's resolved settings less those a resume or a stage's other inputs cover."""
    left_out = RESUMABLE | set(DIGESTED) | set(DIGESTED.values())
    kept = {key: value for key, value in flat(to_dict(experiment)).items()
            if key not in left_out and not key.startswith("paths.")}
    text = json.dumps(kept, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def main(argv: list[str]) -> int:
    if (status := module_usage(argv, __doc__, len(argv) == 1 and not argv[0].startswith("-"))) is not None:
        return status
    from rnnt.training.experiment import load_experiment  # torch's import: 1-2 s, once per training stage

    try:
        experiment = load_experiment(argv[0])
    except (OSError, ValueError) as error:
        print(f"config_digest: {error}", file=sys.stderr)
        return 1
    print(f"resolved-config {config_digest(experiment)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
