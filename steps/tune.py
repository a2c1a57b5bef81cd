#!/usr/bin/env python3
"""Hyper-parameter search with Optuna: each trial trains the real trainer on a recipe's data.

The search (which config keys, over which ranges, how many trials, each trial's training-time limit,
pruner, sampler) is a YAML file; see rnnt/tuning/space.py for its form. The objective is the lowest
dev WER a trial reaches within its time limit (train.valid_wer on a --valid-list), or, with a
target_wer in the search, the training minutes to reach that WER (the seed's SDA: a WER threshold
and a time limit). With the median pruner (not in a target_wer search), a trial whose per-epoch dev WER is
worse than the median of earlier trials at the same epoch is pruned.

The study lives in a database: by default sqlite:///<exp-dir>/study.db, so that a killed search
resumes where it was (run the same command again) and finishes the number of trials asked for;
any database URL (--storage postgresql://...) lets workers on several machines share one study.
Trials send a heartbeat: a trial whose worker died is failed after two missed beats and run again
with its values. Each trial trains in <exp-dir>/trial-NNN. At the end: <exp-dir>/best.yaml (the
--config with the best trial's values), <exp-dir>/trials.png and <exp-dir>/trials.tsv.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import sys

import torch
import yaml

from rnnt.cli import above, at_least, error_line, run_tool, tool_parser, ToolError
from rnnt.config import to_dict
from rnnt.cpu_isa import bf16_refusal
from rnnt.data.list_fingerprint import files_wherever_they_lie
from rnnt.data.tokenizer import Tokenizer, read_lang_config
from rnnt.prep.download import hex_digest
from rnnt.devices import auto_device
from rnnt.model.transducer import Transducer
from rnnt.tuning.space import load_search, suggest, values_to_check, with_values
from rnnt.tuning.study import completed, ended, open_study, optimize_until, summary, write_results
from rnnt.training import checkpoint
from rnnt.training.config_change import piece_scores, units_digest
from rnnt.training.config_checks import training_refusals
from rnnt.training.config_inputs import config_inputs
from rnnt.tuning.trial_run import NoDevWer, run_trial
from rnnt.training.experiment import experiment_from_values, load_experiment, with_absolute_paths, with_paths

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TrialFailed(Exception):
    """A trial's training failed: the trial is marked failed, the search goes on."""


def trial_config(exp_dir: str, number: int, config: dict) -> tuple[str, str]:
    """(trial dir, its trial.yaml) of trial `number`, the yaml written; TrialFailed where the dir holds another
    study's checkpoints (a shared --storage or --study-name: trials are numbered per study)."""
    trial_dir = os.path.join(exp_dir, f"trial-{number:03d}")
    if checkpoint.numbered(trial_dir, "epoch"):
        raise TrialFailed(f"trial {number}: {trial_dir} holds another study's checkpoints; give this study an "
                          "--exp-dir of its own")
    os.makedirs(trial_dir, exist_ok=True)
    path = os.path.join(trial_dir, "trial.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    return trial_dir, path


def check_dev_set(trial, dev_set: str) -> None:
    """TrialFailed where the trial's WER is of other dev utterances than the study's first scored trial's: the
    validation leaves out those the model cannot take (more units than its encoder's frames), which values of the
    space change (data.subsample, model.encoder.stack_time, model.loss.one_sym_per_frame): WERs over other
    utterances were ranked, and chose, as one."""
    import optuna

    trial.set_user_attr("dev_set", dev_set)
    scored = [t for t in trial.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,
                                                                           optuna.trial.TrialState.PRUNED))
              if t.user_attrs.get("dev_set")]
    first = min(scored, key=lambda t: t.number).user_attrs["dev_set"] if scored else dev_set
    if dev_set and first != dev_set:
        raise TrialFailed(f"trial {trial.number}: its dev WER is of {dev_set.split('-')[0]} dev utterances, the "
                          f"study's of {first.split('-')[0]} (another set: valid_dev_set {dev_set}, not {first}); the "
                          "validation leaves out what a model cannot take (more units than its encoder's frames), "
                          "which values of the space change: search a space that keeps the dev set")


def make_objective(base: dict, search, args):
    import optuna

    def objective(trial: optuna.Trial) -> float:
        values = suggest(trial, search.space)
        trial_dir, config = trial_config(args.exp_dir, trial.number, with_values(base, values))
        command = [sys.executable, os.path.join(ROOT, "steps", "train.py"), "--config", config, "--exp-dir", trial_dir]
        if args.device:
            command += ["--device", args.device]
        print(f"trial {trial.number}: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                                   for k, v in values.items()), flush=True)

        reached = []  # with a target WER: the epoch that reached it

        def report(epoch: int, wer: float) -> bool:
            trial.report(wer, epoch)
            print(f"  trial {trial.number} epoch {epoch}: dev WER {wer:.2f}%", flush=True)
            if search.target_wer is not None and wer <= search.target_wer:
                reached.append(epoch)
                return True
            return trial.should_prune()

        try:
            run = run_trial(command, trial_dir, search.minutes_per_trial, report, os.path.join(trial_dir, "output.log"))
        except (NoDevWer, checkpoint.UnreadableCheckpoint) as error:  # the trial's, read as it trained
            raise TrialFailed(f"trial {trial.number}: {error}") from error
        trial.set_user_attr("epoch_minutes", [minutes for _, _, minutes in run.epochs])
        trial.set_user_attr("stopped_by", "target reached" if reached else run.stopped_by)
        if run.failed:
            raise TrialFailed(f"trial {trial.number}: training failed (exit {run.returncode}); see "
                              f"{trial_dir}/output.log")
        if run.best is None:
            raise TrialFailed(f"trial {trial.number}: no epoch ended within {search.minutes_per_trial} minutes")
        check_dev_set(trial, run.dev_set)
        epoch, wer, minutes = run.best  # reached: the epoch that reached the target (those before were above it)
        trial.set_user_attr("best_epoch", epoch)  # a pruned trial's too (trials.tsv)
        trial.set_user_attr("best_wer", wer)
        trial.set_user_attr("minutes_to_best", minutes)
        if run.stopped_by == "asked" and not reached:
            print(f"  trial {trial.number} pruned at epoch {run.asked_at}", flush=True)
            raise optuna.TrialPruned()
        score = search.score(wer, minutes if reached else None)
        print(f"  trial {trial.number}: dev WER {wer:.2f}% (epoch {epoch}, {minutes:.1f} min)"
              + (" [target reached]" if reached else " [time limit]" if run.stopped_by else "")
              + (f"; objective {score:.2f}" if search.target_wer is not None else ""), flush=True)
        return score

    return objective


def check_trial_configs(base: dict, search, search_path: str, vocab_size: int, device: str, config: str) -> None:
    """The values a trial can draw at the parameters' ends, alone and two together (values_to_check), with the
    base config's others, give a config and a model the trainer takes (built on the meta device: no memory) on
    this machine's `device` (--device, else the config's): a choice the model refuses (a misspelt activation), a
    float where the config takes a whole number, two values it refuses together (the fused loss with a joiner
    dropout), a precision the device cannot train in, or a frame rate too slow for the transcripts' units with
    one symbol per frame (steps/train.py's refusals) failed each trial that drew them, after the study had taken
    the search. The base config is checked first: what it alone makes the trainer refuse is its."""
    for values in ({}, *values_to_check(search.space)):
        where = f"{search_path}: " + " with ".join(f"space.{k} = {v!r}" for k, v in values.items()) + \
            " gives a trial config" if values else f"{config} (the config the trials start from)"
        try:
            experiment = experiment_from_values(with_values(base, values), where)
        except ValueError as error:  # named by where
            raise ToolError(error_line(error)) from None
        train = dataclasses.replace(experiment.train, device=device or experiment.train.device)
        experiment = dataclasses.replace(experiment, train=train)
        try:
            with torch.device("meta"):
                model = Transducer(experiment.model, vocab_size)
        except ValueError as error:
            raise ToolError(f"{where}: {error}") from None
        refusals = [*training_refusals(experiment),
                    bf16_refusal(model, torch.device(auto_device(train.device)), train.precision)]
        if refusal := next(filter(None, refusals), None):
            raise ToolError(f"{where}: {refusal}")


def data_digest(experiment, pieces: bool = True, files: bool = True) -> str:
    """The data the trials train and are scored on, by content that is the same on every machine of a study: the
    units (units.txt, a phone lexicon, a sentencepiece model's pieces and scores, which decide how it splits the
    transcripts; not before 2026-12: pieces=False), the transcripts of each list's data dir (the text beside
    it, as the recipes write it; else the names of the list's entries); and (not before 2026-12-06: files=False)
    the files each list names, wherever they lie (a shard or recording written again with other audio), and the
    content of those the config names (train.init_from, data.features.cmvn, the noise and reverb lists)."""
    lang_dir = experiment.paths.lang_dir
    digest = hashlib.sha256(units_digest(lang_dir).encode())
    config = read_lang_config(lang_dir) if os.path.isfile(os.path.join(lang_dir, "units.json")) else {}
    if pieces and config.get("model"):
        digest.update(json.dumps(piece_scores(os.path.join(lang_dir, config["model"]))).encode())
    named = [os.path.join(lang_dir, config["lexicon"])] if config.get("lexicon") else []  # (lexicon.txt)
    for list_path in filter(None, (experiment.paths.train_list, experiment.paths.valid_list)):
        text = os.path.join(os.path.dirname(list_path), "text")
        if os.path.isfile(text):
            named.append(text)
        else:
            with open(list_path, encoding="utf-8") as f:
                digest.update("".join(os.path.basename(line.strip()) + "\n" for line in f).encode())
        if files:
            digest.update(files_wherever_they_lie(list_path).encode())
    for path in named:
        with open(path, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    for path in config_inputs(to_dict(experiment)) if files else []:
        digest.update(f"{hex_digest(path, quiet=True) if os.path.isfile(path) else 'none'}\n".encode())
    return digest.hexdigest()


def check_same_search(study, experiment, search, where: str) -> None:
    """A study holds the trials of one config, search and data: resumed with others, its trials (and best config)
    would mix two searches; refused. The number of trials may change. The config's paths count relative to the
    working directory: workers of one study in checkouts at other places (--storage postgresql://, several
    machines) run from the same recipe folder give one fingerprint; the data by content (data_digest). (A study
    fingerprinted before, with the paths absolute or without the data, is taken and its fingerprint rewritten.)"""
    asked = {key: value for key, value in vars(search).items() if key != "trials"}
    data = data_digest(experiment)

    def fingerprint(config, data: str | None = data) -> str:
        inputs = {"config": to_dict(config), "search": asked} | ({"data": data} if data is not None else {})
        return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()
    now = fingerprint(with_paths(experiment, os.path.relpath))
    before = (now, fingerprint(experiment, None), fingerprint(with_paths(experiment, os.path.relpath), None),
              fingerprint(with_paths(experiment, os.path.relpath), data_digest(experiment, pieces=False, files=False)),
              fingerprint(with_paths(experiment, os.path.relpath), data_digest(experiment, files=False)))
    if study.user_attrs.get("inputs", now) not in before:
        raise ToolError(f"{where} holds the trials of another config, search or data (units, transcripts, audio); give "
                        "another --exp-dir (its trial dirs are the exp dir's), or the same ones to resume it")
    study.set_user_attr("inputs", now)


def parse_args():
    parser = tool_parser(__doc__, "steps/tune.py --config conf/ci.yaml --search conf/tune.yaml "
                                  "--train-list data/train/data.list --valid-list data/dev/data.list "
                                  "--lang-dir data/lang_bpe64 --exp-dir exp/tune")
    parser.add_argument("--config", required=True, help="the experiment YAML the trials start from")
    parser.add_argument("--search", required=True, help="the search YAML (space, trials, minutes_per_trial, ...)")
    parser.add_argument("--exp-dir", required=True, help="where the trials train, and the default database")
    parser.add_argument("--train-list", default="", help="overrides paths.train_list")
    parser.add_argument("--valid-list", default="", help="overrides paths.valid_list (needed: the objective)")
    parser.add_argument("--lang-dir", default="", help="overrides paths.lang_dir")
    parser.add_argument("--storage", default="", help="database URL (default: sqlite:///<exp-dir>/study.db)")
    parser.add_argument("--study-name", default="tune")
    parser.add_argument("--trials", type=at_least(0), default=0, help="overrides the search's trials")
    parser.add_argument("--heartbeat", type=above(0), default=60.0,
                        help="seconds between a running trial's heartbeats; two missed fail it")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="", help="passed to steps/train.py")
    args = parser.parse_args()
    args.exp_dir = os.path.abspath(args.exp_dir)
    return args


def opened_study(args, search):
    """(the study, its storage URL): the exp dir made, the database opened (or created) there or at --storage."""
    try:
        os.makedirs(args.exp_dir, exist_ok=True)
    except OSError as error:
        raise ToolError(f"--exp-dir {args.exp_dir}: {error.strerror or error}") from error
    storage = args.storage or f"sqlite:///{os.path.join(args.exp_dir, 'study.db')}"
    try:
        return open_study(storage, args.study_name, search, args.heartbeat), storage
    except Exception as error:  # sqlalchemy's: a damaged database file, a URL it cannot parse, a server not there
        if not type(error).__module__.startswith("sqlalchemy") and not isinstance(error, (ValueError, OSError)):
            raise
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ToolError(f"{storage}: cannot open the study's storage ({reason})") from error


def stopped_by_ctrl_c(signum, frame) -> None:
    """Ctrl-C ends the search as SIGTERM does, at once, its running trial left running in the database: the next run
    fails it and runs it again with its values (Optuna stored a KeyboardInterrupt's trial as failed, its values
    never tried again, and the trials after it drew others)."""
    os.write(2, b"tune.py: stopped by Ctrl-C; run it again to go on (the trial under way runs again)\n")
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


def main() -> str:
    args = parse_args()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # (run in the background: ignored, left so)
        signal.signal(signal.SIGINT, stopped_by_ctrl_c)
    try:
        experiment = with_absolute_paths(load_experiment(args.config, train_list=args.train_list,
                                                         valid_list=args.valid_list, lang_dir=args.lang_dir))
        if not experiment.paths.valid_list or not experiment.train.valid_wer:
            raise ValueError(f"{args.config}: tuning needs a dev set: give --valid-list and keep train.valid_wer true")
        base = to_dict(experiment)
        with open(args.config) as f:  # as the trials start from: an edit while they train is not best.yaml's
            user_config = yaml.safe_load(f) or {}
        search = load_search(args.search, base)
        vocab_size = Tokenizer(experiment.paths.lang_dir).vocab_size
    except (OSError, ValueError) as error:
        raise ToolError(error_line(error)) from error
    check_trial_configs(base, search, args.search, vocab_size, args.device, args.config)
    trials = args.trials or search.trials
    study, storage = opened_study(args, search)
    check_same_search(study, experiment, search, f"{storage} (study {args.study_name})")
    try:
        optimize_until(study, make_objective(base, search, args), trials, catch=(TrialFailed,))
    except OSError as error:  # a trial dir, its yaml or its log not written (a full disk): the search cannot go on
        raise ToolError(f"{error.filename or args.exp_dir}: {error.strerror or error}; the study's database keeps "
                        "the trials ended, run again to go on") from error
    write_results(study, user_config, args.exp_dir, objective="" if search.target_wer is None else
                  f"minutes to dev WER {search.target_wer:g}% (missed: scaled up)")
    if not completed(study) or ended(study) < trials:  # stopped by failures: named in the trials' logs
        raise ToolError(summary(study, trials))
    return summary(study, trials)


if __name__ == "__main__":
    run_tool(main)
