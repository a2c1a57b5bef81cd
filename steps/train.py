#!/usr/bin/env python3
"""Train an RNN-T model from a conf/*.yaml into an experiment dir.

One process by default; under torchrun, one process per device with DDP (gloo on CPU, nccl on GPU):
  torchrun --nproc_per_node=4 steps/train.py --config conf/small.yaml ...
  torchrun --nnodes=2 --node_rank=$NODE --master_addr=$HEAD --master_port=29500 --nproc_per_node=8 steps/train.py ...
The resolved configuration is saved as <exp-dir>/config.yaml; --resume continues from the newest
checkpoint exactly where it stopped, unless the config differs from config.yaml in a key a resume cannot
honour (anything but the epochs or max_steps, logging, checkpoint keeping, bad-step, validation and patience
settings, the device, loader workers and the audio and noise caches, paths, the CMVN statistics' path (the
statistics themselves are compared) and decoding's data.tail_silence): then the old experiment is set aside
whole as <exp-dir>.N and training starts anew (rnnt.training.config_change). SIGTERM (to any rank) saves a
checkpoint at the next optimiser step and exits with status 143, so that a recipe does not take the run for
finished; so does Ctrl-C, with status 130 (a second Ctrl-C stops at once, unsaved). torchrun passes a SIGTERM
it gets on to every rank, but kills them 30 s later (the recipes give it 600 s: TORCH_ELASTIC_SHUTDOWN_TIMEOUT)
and exits with its own status: a rank in the middle of validation or of a long accumulation group may be killed
before it saves.
Exit status: 0 training complete, 1 error, 143 stopped by SIGTERM, 130 by Ctrl-C.
"""

import dataclasses
import json
import os
import signal
import sys

from rnnt.atomic_write import write_atomically
from rnnt.cli import error_line, tool_parser
from rnnt.data.noise_config import with_recording_lists
from rnnt.prep.download import hex_digest
from rnnt.training.config_checks import training_refusals
from rnnt.training.experiment import TrainConfig, load_experiment, with_absolute_paths
from rnnt.training.stop import StopTraining
from rnnt.training.trainer import Trainer


def with_input_digests(experiment):
    """train.init_from_sha256 set to the init_from checkpoint's SHA-256, data.noise's and data.reverb's
    wav_scp_sha256 to their lists' (each left as it is where there is no file: the trainer names it), so that
    another start or an edited list is a changed config, which trains anew rather than resuming."""
    path = experiment.train.init_from
    if path and os.path.isfile(path):
        experiment = dataclasses.replace(experiment, train=dataclasses.replace(experiment.train,
                                                                             init_from_sha256=hex_digest(path)))

    def digested(lists):
        found = os.path.isfile(lists.wav_scp)
        return dataclasses.replace(lists, wav_scp_sha256=hex_digest(lists.wav_scp)) if found else lists

    return dataclasses.replace(experiment, data=with_recording_lists(experiment.data, digested))


GIVEN_FILE = "command_line.json"  # in the exp dir: the train.init_from and train.seed its run was given as options
COMMAND_LINE_KEYS = ("init_from", "seed")


def given_when_begun(exp_dir: str, experiment) -> dict:
    """The --init-from and --seed the experiment in exp_dir was given on the command line (GIVEN_FILE), where the
    config leaves them at their defaults: a resume that did not repeat them set the run aside and trained from
    random weights, as if the config had changed. Values its config gave are not taken (config.yaml's were: a
    seed or init_from deleted from the config came back, and the old model was resumed and reported as new)."""
    try:
        with open(os.path.join(exp_dir, GIVEN_FILE), encoding="utf-8") as f:
            given = json.load(f)
    except (OSError, ValueError):
        return {}  # none yet (or of a version before it: its run's options are repeated, as the recipes do)
    defaults = TrainConfig()
    return {key: given[key] for key in COMMAND_LINE_KEYS if isinstance(given, dict) and key in given
            and getattr(experiment.train, key) == getattr(defaults, key)}


def record_given(exp_dir: str, experiment, given: set[str]) -> None:
    """GIVEN_FILE of this run: the values of the keys given as options (or taken from the run before)."""
    values = {key: getattr(experiment.train, key) for key in COMMAND_LINE_KEYS if key in given}
    write_atomically(os.path.join(exp_dir, GIVEN_FILE), lambda f: json.dump(values, f))


def with_options(args, experiment):
    """The experiment with the options that override its config (--device, --init-from, --seed), and the keys of
    COMMAND_LINE_KEYS given so: on --resume, those its run began with where the resume does not repeat them."""
    overrides = {"device": args.device or None, "init_from": args.init_from or None, "seed": args.seed}
    if args.resume:  # an --init-from or --seed the run began with and the resume does not repeat is the run's own
        overrides.update({key: value for key, value in given_when_begun(args.exp_dir, experiment).items()
                          if overrides[key] is None})
    experiment = dataclasses.replace(experiment, train=dataclasses.replace(
        experiment.train, **{key: value for key, value in overrides.items() if value is not None}))
    return experiment, {key for key in COMMAND_LINE_KEYS if overrides[key] is not None}


def main() -> int:
    parser = tool_parser(__doc__, "steps/train.py --config conf/tiny.yaml --train-list data/train/data.list "
                                  "--valid-list data/dev/data.list --lang-dir data/lang_bpe64 --exp-dir exp/tiny")
    parser.add_argument("--config", required=True, help="YAML with model, data and train sections")
    parser.add_argument("--train-list", default="", help="data list to train on (overrides paths.train_list)")
    parser.add_argument("--valid-list", default="", help="data list to validate on (overrides paths.valid_list)")
    parser.add_argument("--lang-dir", default="", help="units dir from steps/build_units.py (overrides paths.lang_dir)")
    parser.add_argument("--exp-dir", required=True)
    parser.add_argument("--init-from", default="",
                        help="a checkpoint of another experiment to start from (overrides train.init_from)")
    parser.add_argument("--seed", type=int, default=None,
                        help="torch's seed: the model's initialisation and dropout (overrides train.seed)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="",
                        help="where to train (overrides train.device; auto: CUDA when present)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest checkpoint in --exp-dir (without it, a dir with checkpoints "
                             "is refused)")
    parser.add_argument("--log-keys", action="store_true", help="write the utterance keys each rank trains on")
    args = parser.parse_args()
    try:
        experiment = load_experiment(args.config, train_list=args.train_list, valid_list=args.valid_list,
                                     lang_dir=args.lang_dir)
    except (OSError, ValueError) as error:
        print(f"train.py: {error_line(error)}", file=sys.stderr)
        return 1
    experiment, given = with_options(args, experiment)
    experiment = with_input_digests(with_absolute_paths(experiment))
    for name in ("train_list", "lang_dir"):
        if not getattr(experiment.paths, name):
            print(f"train.py: no {name}: give --{name.replace('_', '-')} or paths.{name}", file=sys.stderr)
            return 1
    for problem in training_refusals(experiment):
        print(f"train.py: {args.config}: {problem}", file=sys.stderr)
        return 1
    try:
        trainer = Trainer(experiment, args.exp_dir, args.log_keys, resume=args.resume)
        if trainer.world.main:  # after the Trainer set an experiment of another config aside, with its record
            record_given(args.exp_dir, experiment, given)
    except (StopTraining, OSError, ValueError) as error:  # a missing or empty list, lang dir, init checkpoint, ...
        print(f"train.py: {error_line(error)}", file=sys.stderr)
        return 1
    try:
        return trainer.run()
    except KeyboardInterrupt:  # the second Ctrl-C (rnnt.training.stop_signals)
        print("train.py: stopped at once by a second Ctrl-C; the steps since the last checkpoint are not saved",
              file=sys.stderr)
        return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())
