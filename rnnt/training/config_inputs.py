"""What a recipe's stages take from a training config besides its text.

The files it names, whose content the training depends on: train.init_from (the checkpoint it starts from,
unless the recipe passes its own: --no-init-from), data.features.cmvn (the statistics it normalises by, with
the JSON read beside a Kaldi matrix), and the lists of data.noise's and data.reverb's recordings (not the
recordings themselves). A train stage takes them among its inputs (utils/stages.sh config_files),
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

from rnnt.cli import module_usage


def section(config: dict, name: str) -> dict:
    value = config.get(name) or {}
    if not isinstance(value, dict):
        raise ValueError(f"'{name}' is not a mapping")
    return value


def config_inputs(config: dict, with_init_from: bool = True) -> list[str]:
    """The files a config (its YAML, as read) names: train.init_from's, data.features.cmvn's (and its JSON), the
    wav.scp of data.noise's and data.reverb's recordings."""
    init_from = section(config, "train").get("init_from") or ""
    data = section(config, "data")
    cmvn = section(data, "features").get("cmvn") or ""
    named = [str(init_from)] if init_from and with_init_from else []
    # the JSON read_cmvn reads beside a matrix (cmvn_source) whether it is there or not: one that appears later is
    # an input changed (named only once there, it was taken for an input a newer recipe added: the stage skipped)
    named += [str(cmvn)] + ([f"{cmvn}.json"] if not str(cmvn).endswith(".json") else []) if cmvn else []
    return named + [str(section(data, key)["wav_scp"]) for key in ("noise", "reverb")
                    if section(data, key).get("wav_scp")]


def decoding_settings(config: dict) -> str:
    """What decoding reads of a trained experiment's config.yaml (steps/train.py writes it whole, the defaults in
    it) that a resumed training can change."""
    return f"data.tail_silence={float(section(config, 'data').get('tail_silence', 0.0)):g}"


def main(argv: list[str]) -> int:
    """Reads the YAML alone: the stages ask for every training and decode, and torch's import (load_experiment's)
    took 1.6 s each time; the training itself checks the config (check_methods has read it before any stage)."""
    import yaml

    options, paths = [a for a in argv if a.startswith("-")], [a for a in argv if not a.startswith("-")]
    right = len(paths) == 1 and set(options) <= {"--no-init-from", "--decoding"} and len(options) <= 1
    if (status := module_usage(argv, __doc__, right)) is not None:
        return status
    path = os.path.join(paths[0], "config.yaml") if options == ["--decoding"] else paths[0]
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
        if not isinstance(config, dict):
            raise ValueError("not a mapping")
        lines = [decoding_settings(config)] if options == ["--decoding"] else \
            config_inputs(config, options != ["--no-init-from"])
        print("".join(f"{line}\n" for line in lines), end="")
    except (OSError, ValueError, TypeError, yaml.YAMLError) as error:
        print(f"config_inputs: {path}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
