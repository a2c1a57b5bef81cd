"""steps/tune.py: Optuna over the real trainer on real yesno audio; a killed search resumes from its
database; trials are stopped by the pruner and by the time limit through the trainer's SIGTERM path."""

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from conftest import PYTHON, ROOT, run_tool
from rnnt.training import checkpoint
from rnnt.training.experiment import load_experiment
from rnnt.tuning.space import Search
from rnnt.tuning.trial_run import NoDevWer, run_trial

CONFIG = ROOT / "egs" / "yesno" / "conf" / "tiny.yaml"


def yesno_config(tmp_path: Path, epochs: int) -> Path:
    values = yaml.safe_load(CONFIG.read_text())
    values["train"]["epochs"] = epochs
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def tune_args(yesno, tmp_path, search: dict, epochs: int = 3) -> list:
    (tmp_path / "search.yaml").write_text(yaml.safe_dump(search))
    return [sys.executable, ROOT / "steps" / "tune.py", "--config", yesno_config(tmp_path, epochs),
            "--search", tmp_path / "search.yaml", "--train-list", yesno / "train.list",
            "--valid-list", yesno / "test.list", "--lang-dir", yesno / "lang", "--exp-dir", tmp_path / "tune",
            "--heartbeat", "1"]


def trial_states(db: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(db) as connection:
        return connection.execute("SELECT number, state FROM trials ORDER BY number").fetchall()


@pytest.mark.slow
def test_killed_search_resumes_from_its_database_and_finishes_the_trials_asked(yesno, tmp_path):
    search = {"trials": 3, "pruner": {"type": "none"}, "sampler": {"type": "random", "seed": 1},
              "space": {"train.optimizer.lr": {"type": "float", "low": 1e-3, "high": 1e-2, "log": True},
                        "model.joiner.activation": {"type": "categorical", "choices": ["tanh", "relu"]}}}
    args = [str(a) for a in tune_args(yesno, tmp_path, search)]
    exp = tmp_path / "tune"
    first = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not (exp / "trial-001" / "epoch-1.pt").exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    first.send_signal(signal.SIGKILL)  # mid-trial 1: its training must die with the tuner
    first.wait()
    time.sleep(1.0)
    stopped_at = len(checkpoint.numbered(str(exp / "trial-001"), "epoch"))
    time.sleep(2.0)  # two heartbeats missed
    assert len(checkpoint.numbered(str(exp / "trial-001"), "epoch")) == stopped_at < 3
    out = run_tool(*args)
    assert out.returncode == 0, out.stdout + out.stderr
    states = trial_states(exp / "study.db")
    assert [s for _, s in states].count("COMPLETE") == 3 and (1, "FAIL") in states, states
    assert "tune.py: 3 of 3 trials ended (3 complete, 0 pruned, 1 fail)" in out.stdout
    best = load_experiment(str(exp / "best.yaml"))  # the user's config with the best values: a valid experiment
    rows = [line.split("\t") for line in (exp / "trials.tsv").read_text().splitlines()[1:]]
    complete = [r for r in rows if r[1] == "COMPLETE"]
    winner = min(complete, key=lambda r: float(r[2]))
    header = (exp / "trials.tsv").read_text().splitlines()[0].split("\t")
    assert best.train.optimizer.lr == pytest.approx(float(winner[header.index("train.optimizer.lr")]))
    assert best.model.joiner.activation == winner[header.index("model.joiner.activation")]
    assert (exp / "trials.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the killed trial ran again with its values, from scratch, under a new number
    killed = yaml.safe_load((exp / "trial-001" / "trial.yaml").read_text())
    rerun = [n for n, _ in states if n > 1 and yaml.safe_load((exp / f"trial-{n:03d}" / "trial.yaml").read_text())
             ["train"]["optimizer"]["lr"] == killed["train"]["optimizer"]["lr"]]
    assert rerun, "the killed trial was not run again"
    out = run_tool(*args)  # asked again: nothing left to do
    assert out.returncode == 0 and len(trial_states(exp / "study.db")) == len(states)
    out = run_tool(*tune_args(yesno, tmp_path, {**search, "trials": 4}))  # more trials of the same search: resumed
    assert out.returncode == 0 and "4 of 4 trials ended" in out.stdout, out.stderr[-2000:]
    out = run_tool(*tune_args(yesno, tmp_path, {**search, "sampler": {"type": "random", "seed": 2}}))
    assert out.returncode == 1 and "holds the trials of another config, search or data" in out.stderr
    assert len(trial_states(exp / "study.db")) == len(states) + 1  # nothing mixed in


@pytest.mark.slow  # a trial of its own; CI runs it
def test_ctrl_c_leaves_the_trial_under_way_to_run_again(yesno, tmp_path):
    """Optuna stores a trial a KeyboardInterrupt ended as failed: its values were never tried again, and every draw
    after it shifted. Ctrl-C now ends the search as SIGTERM and SIGKILL do, the trial left running in the database
    (the next run fails it and runs it again with its values: the test above)."""
    search = {"trials": 1, "pruner": {"type": "none"}, "sampler": {"type": "random", "seed": 1},
              "space": {"train.optimizer.lr": {"type": "float", "low": 1e-3, "high": 1e-2, "log": True}}}
    exp = tmp_path / "tune"
    tuner = subprocess.Popen([str(a) for a in tune_args(yesno, tmp_path, search, epochs=50)], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as at a terminal
    deadline = time.time() + 120
    while not (exp / "trial-000" / "epoch-1.pt").exists() and tuner.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    os.killpg(tuner.pid, signal.SIGINT)  # a terminal's Ctrl-C: the tuner and its trial's training
    _, said = tuner.communicate(timeout=60)
    assert tuner.returncode == -signal.SIGINT and "stopped by Ctrl-C; run it again to go on" in said, said[-2000:]
    assert "Traceback" not in said and trial_states(exp / "study.db") == [(0, "RUNNING")]


@pytest.mark.slow  # trainings of their own (8-11 s); CI runs it
def test_best_yaml_is_the_config_the_trials_started_from_not_one_edited_while_they_trained(yesno, tmp_path):
    search = {"trials": 1, "pruner": {"type": "none"}, "sampler": {"type": "random", "seed": 1},
              "space": {"train.optimizer.lr": {"type": "float", "low": 1e-3, "high": 1e-2, "log": True}}}
    args = [str(a) for a in tune_args(yesno, tmp_path, search, epochs=1)]
    base, exp = tmp_path / "base.yaml", tmp_path / "tune"
    search_run = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while not (exp / "trial-000" / "trial.yaml").exists() and search_run.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    edited = yaml.safe_load(base.read_text())
    edited["train"]["epochs"] = 7  # the user edits the config while the trial trains
    base.write_text(yaml.safe_dump(edited))
    output = search_run.communicate(timeout=300)[0]
    assert search_run.returncode == 0, output
    trained = yaml.safe_load((exp / "trial-000" / "trial.yaml").read_text())
    best = yaml.safe_load((exp / "best.yaml").read_text())
    assert trained["train"]["epochs"] == best["train"]["epochs"] == 1


def trainer_command(yesno, tmp_path, epochs: int) -> list[str]:
    return [PYTHON, str(ROOT / "steps" / "train.py"), "--config", str(yesno_config(tmp_path, epochs)),
            "--train-list", str(yesno / "train.list"), "--valid-list", str(yesno / "test.list"),
            "--lang-dir", str(yesno / "lang"), "--exp-dir", str(tmp_path / "exp")]


def test_a_pruned_trial_stops_through_the_trainers_sigterm(yesno, tmp_path):
    reported = []
    exp = tmp_path / "exp"

    def prune_after_the_first(epoch, wer):
        # epochs of a few steps can end faster than the tuner polls: count those already written when asked
        reported.append((epoch, wer, len(checkpoint.numbered(str(exp), "epoch"))))
        return True

    run = run_trial(trainer_command(yesno, tmp_path, 50), str(exp), 0, prune_after_the_first,
                    str(tmp_path / "output.log"))
    assert run.stopped_by == "asked" and run.returncode == 143
    assert len(reported) == 1 and reported[0][0] == 1 and 0 <= reported[0][1]
    written_when_asked = reported[0][2]
    # SIGTERM follows the answer at once: at most the epoch under way when it came ends, never all 50
    assert written_when_asked <= len(run.epochs) <= written_when_asked + 1 < 50
    # the epoch the pruner saw is the trial's best: one ended after it was not reported (it was the best when lower)
    assert run.asked_at == 1 and run.best == run.epochs[0] and [e[0] for e in run.counted] == [1]
    assert "stopped on SIGTERM" in (tmp_path / "exp" / "train.log").read_text()


@pytest.mark.slow
def test_the_time_limit_stops_a_trial_and_keeps_its_epochs(yesno, tmp_path):
    run = run_trial(trainer_command(yesno, tmp_path, 1000), str(tmp_path / "exp"), 0.25, lambda e, w: False,
                    str(tmp_path / "output.log"))
    assert run.stopped_by == "time limit" and run.returncode == 143
    # the best of the epochs in time: one that ended past the limit (a fast machine's, while the tuner polls) is
    # kept but not counted
    assert run.epochs and run.best[1] == min(w for _, w, minutes in run.epochs if minutes <= 0.25)
    assert all(minutes <= 0.25 + 0.1 for _, _, minutes in run.epochs)


@pytest.mark.parametrize("space, message", [
    ({"train.optimizer.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2}},
     "space.train.optimizer.learning_rate is not a key of the experiment config"),
    ({"train.optimizer.lr": {"type": "float", "low": 1e-2, "high": 1e-4}}, "low (0.01) must be below high"),
    ({"train.optimizer.lr": {"type": "uniform", "low": 1e-4, "high": 1e-2}}, "type one of float, int, categorical"),
    # what optuna refused only when the first trial drew, after the study had taken the search for its own
    ({"train.optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True, "step": 0.001}},
     "space.train.optimizer.lr: The parameter `step` is not supported when `log` is true"),
    ({"train.schedule.warmup_steps": {"type": "int", "low": 0, "high": 400, "log": True}},
     "space.train.schedule.warmup_steps: `low >= 1` must hold for `log=True`"),
    ({"train.optimizer.lr": {"type": "float", "low": "abc", "high": 1e-2}},
     "low and high must be finite numbers, got 'abc'"),
    ({"train.optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "step": None}},  # float(None): a traceback
     "space.train.optimizer.lr: step must be a finite number, got None"),
    ({"train.optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "step": float("inf")}},
     "space.train.optimizer.lr: step must be a finite number, got inf"),
    ({"train.schedule.warmup_steps": {"type": "int", "low": 1, "high": 4, "step": "abc"}},
     "space.train.schedule.warmup_steps: step must be a finite number, got 'abc'"),
    ({"train.optimizer.lr": {"type": "float", "low": 1e-4, "high": float("inf")}},  # int()'s OverflowError before
     "space.train.optimizer.lr: low and high must be finite numbers, got 0.0001 and inf"),
    ({"train.optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": "false"}},  # true to optuna
     "space.train.optimizer.lr: log must be true or false, got 'false'"),
    ({"train.schedule.warmup_steps": {"type": "int", "low": 1.5, "high": 4}},  # drew 1, below its low
     "space.train.schedule.warmup_steps: an int's low must be whole numbers, got low 1.5"),
    # values the trainer refuses, which failed each trial that drew them
    ({"model.joiner.activation": {"type": "categorical", "choices": ["tanh", "relux"]}},
     "space.model.joiner.activation = 'relux' gives a trial config: model.joiner.activation must be relu or tanh"),
    ({"train.epochs": {"type": "float", "low": 1, "high": 3}},
     "space.train.epochs = 1.0 gives a trial config: train.epochs: expected a whole number, got 1.0"),
    ({"train.ema_decay": {"type": "float", "low": 0.5, "high": 1.0}},
     "space.train.ema_decay = 1.0 gives a trial config: train.ema_decay must be at least 0 (no EMA) and below 1"),
    ({"train.optimizer.type": {"type": "categorical", "choices": ["adam", "sgd"]}},
     "space.train.optimizer.type = 'sgd' gives a trial config: train.optimizer.type must be one of adam, adamw, lamb"),
    # two values the trainer takes alone and refuses together
    ({"model.loss.type": {"type": "categorical", "choices": ["full", "fused"]},
      "model.joiner.dropout": {"type": "float", "low": 0.0, "high": 0.2}},
     "space.model.joiner.dropout = 0.2 with space.model.loss.type = 'fused' gives a trial config: model.joiner."
     "dropout needs the joiner's activations"),
])
def test_a_bad_search_is_refused_before_any_trial_naming_file_and_key(yesno, tmp_path, space, message):
    out = run_tool(*tune_args(yesno, tmp_path, {"trials": 2, "space": space}))
    assert out.returncode == 1
    assert str(tmp_path / "search.yaml") in out.stderr and message in out.stderr
    assert not (tmp_path / "tune" / "trial-000").exists()


@pytest.mark.parametrize("space, message", [
    ({"train.precision": {"type": "categorical", "choices": ["fp32", "fp16"]}},
     "space.train.precision = 'fp16' gives a trial config: train.precision fp16 needs a CUDA device"),
    ({"model.encoder.stack_time": {"type": "int", "low": 2, "high": 64}},
     "space.model.encoder.stack_time = 64 gives a trial config: model.loss.one_sym_per_frame: the encoder has 0.5 "
     "frames a second"),
])
def test_values_steps_train_refuses_on_this_device_are_refused_before_any_trial(yesno, tmp_path, space, message):
    """train.py's own refusals (the precision on the device trials train on, the frame rate against the units a
    second of the transcripts) failed every trial that drew them: "no trial completed" at the end."""
    out = run_tool(*tune_args(yesno, tmp_path, {"trials": 2, "space": space}), "--device", "cpu")
    assert out.returncode == 1 and message in out.stderr, out.stderr
    assert not (tmp_path / "tune" / "trial-000").exists()


def test_a_base_config_the_trainer_refuses_is_named_as_the_base_not_a_search_value(yesno, tmp_path):
    args = tune_args(yesno, tmp_path, {"trials": 1, "space": {
        "train.optimizer.lr": {"type": "float", "low": 1e-3, "high": 1e-2}}})
    config = args[args.index("--config") + 1]
    values = yaml.safe_load(config.read_text())
    values["train"]["precision"] = "fp16"
    config.write_text(yaml.safe_dump(values))
    out = run_tool(*args, "--device", "cpu")
    assert out.returncode == 1
    assert f"{config} (the config the trials start from): train.precision fp16 needs a CUDA device" in out.stderr


def test_the_data_and_what_trials_are_scored_on_are_not_searched(tmp_path):
    """paths.valid_list among the choices scored trials on a test list, which then chose the best."""
    from rnnt.tuning.space import load_search

    base = {"paths": {"valid_list": "data/dev/data.list"}, "train": {"valid_wer": True}}
    for key, spec in (("paths.valid_list", {"type": "categorical", "choices": ["data/test/data.list"]}),
                      ("train.valid_wer", {"type": "categorical", "choices": [True, False]})):
        (tmp_path / "s.yaml").write_text(yaml.safe_dump({"space": {key: spec}}))
        with pytest.raises(ValueError, match=f"space.{key}: the data and what trials are scored on are not searched"):
            load_search(str(tmp_path / "s.yaml"), base)


def test_numbers_yaml_reads_as_strings_are_numbers_and_trials_a_whole_number(yesno, tmp_path):
    """YAML 1.1 reads 1e-4 as a string: the search named it 'not below' 1e-2, or crashed on comparing it."""
    from rnnt.tuning.space import load_search

    base = {"train": {"optimizer": {"lr": 0.001}}}
    for values, message in (({"trials": "5"}, "trials must be a whole number, at least 1, got '5'"),
                            ({"trials": None}, "trials must be a whole number, at least 1, got None"),
                            ({"minutes_per_trial": "five"}, "minutes_per_trial must be a number of minutes"),
                            ({"minutes_per_trial": float("nan")}, "minutes_per_trial must be a number of minutes"),
                            ({"minutes_per_trial": float("inf")}, "minutes_per_trial must be a number of minutes")):
        (tmp_path / "s.yaml").write_text(yaml.safe_dump({"space": {"train.optimizer.lr": {
            "type": "float", "low": 1e-4, "high": 1e-2}}, **values}))
        with pytest.raises(ValueError, match=message):
            load_search(str(tmp_path / "s.yaml"), base)
    (tmp_path / "s.yaml").write_text("space:\n  train.optimizer.lr: {type: float, low: 1e-4, high: 1e-2, log: true}\n")
    assert load_search(str(tmp_path / "s.yaml"), base).space["train.optimizer.lr"]["low"] == "1e-4"


@pytest.mark.parametrize("section, message", [
    ({"pruner": {"type": "median", "warmup_epoch": 5}}, "pruner.warmup_epoch is not a setting of the pruner (its "
                                                        "keys: type, startup_trials, warmup_epochs)"),
    ({"sampler": {"type": "tpe", "sead": 7}}, "sampler.sead is not a setting of the sampler"),
    ({"sampler": {"type": "tpe", "seed": "seven"}}, "sampler.seed must be a whole number, 0 or more, got 'seven'"),
])
def test_a_misspelt_pruner_or_sampler_setting_is_refused(yesno, tmp_path, section, message):
    """They were read with a default where misspelt: pruning from the first epoch, an unseeded search."""
    space = {"train.optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2}}
    out = run_tool(*tune_args(yesno, tmp_path, {"trials": 2, "space": space, **section}))
    assert out.returncode == 1 and message in out.stderr, out.stderr
    assert not (tmp_path / "tune" / "trial-000").exists()


def test_a_trial_dir_holding_another_studys_checkpoints_is_not_read_into_this_one(yesno, tmp_path):
    """Another study in the same exp dir (a shared --storage, another --study-name) numbers its trials from 0 too:
    its trial-000's dev WERs were reported into this study's trial 0. The trial fails naming why and trains
    nothing there; the next trial (trial-001) takes its place."""
    (tmp_path / "tune" / "trial-000").mkdir(parents=True)
    (tmp_path / "tune" / "trial-000" / "epoch-1.pt").write_text("another study's")
    space = {"train.optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2}}
    out = run_tool(*tune_args(yesno, tmp_path, {"trials": 1, "space": space}, epochs=1), "--study-name", "other")
    assert f"trial 0: {tmp_path / 'tune' / 'trial-000'} holds another study's checkpoints" in out.stdout + out.stderr
    assert not (tmp_path / "tune" / "trial-000" / "trial.yaml").exists() and out.returncode == 0, out.stderr
    assert (tmp_path / "tune" / "trial-001" / "epoch-1.pt").exists()


@pytest.mark.slow
def test_a_target_wer_search_scores_minutes_to_the_target_and_stops_there(yesno, tmp_path):
    search = {"trials": 2, "minutes_per_trial": 3, "target_wer": 60, "pruner": {"type": "none"},
              "sampler": {"type": "random", "seed": 0},
              "space": {"train.optimizer.lr": {"type": "float", "low": 3e-3, "high": 1e-2, "log": True}}}
    out = run_tool(*tune_args(yesno, tmp_path, search, epochs=60))
    assert out.returncode == 0, out.stdout + out.stderr
    exp = tmp_path / "tune"
    header, *lines = (exp / "trials.tsv").read_text().splitlines()
    rows = [dict(zip(header.split("\t"), line.split("\t"))) for line in lines]
    assert len(rows) == 2 and all(r["state"] == "COMPLETE" for r in rows), rows
    assert any(float(r["dev_wer"]) <= 60 for r in rows), rows  # yesno's tiny model reaches it in 20-40 epochs
    for row in rows:
        epochs = checkpoint.numbered(str(exp / f"trial-{int(row['trial']):03d}"), "epoch")
        wers = [checkpoint.load_meta(p)["valid_wer"] for p in epochs]
        if float(row["dev_wer"]) <= 60:  # reached: stopped at the first epoch at the target, scored its minutes
            first = next(i for i, wer in enumerate(wers) if wer <= 60)
            assert int(row["best_epoch"]) == first + 1 and float(row["dev_wer"]) == pytest.approx(wers[first], abs=0.01)
            # stopped there, not after 60: epochs of a few steps (0.2 s) can end while the tuner polls (0.5 s)
            assert len(epochs) <= first + 5 < 60
            assert float(row["objective"]) == pytest.approx(float(row["minutes_to_best"]), abs=0.01)
            assert float(row["objective"]) <= 3 + 0.1
        else:  # missed: ranked below every trial that reached it
            assert float(row["objective"]) == pytest.approx(3 * float(row["dev_wer"]) / 60, abs=0.01)
    named = re.search(r"best: trial (\d+),", out.stdout)
    assert named and "objective" in out.stdout, out.stdout
    lowest = min(float(r["objective"]) for r in rows)  # trials.tsv rounds: two may tie at its precision
    assert float(next(r for r in rows if r["trial"] == named.group(1))["objective"]) == pytest.approx(lowest, abs=0.01)


LATE_EPOCH_TRAINER = """
import os, signal, sys, time
staged, exp = sys.argv[1:]
def show(epoch):  # an epoch checkpoint written (made beforehand: this stand-in starts at once, without torch)
    os.replace(f"{staged}/epoch-{epoch}.pt", f"{exp}/epoch-{epoch}.pt")
def stop(*_):  # as the trainer: the validation under way when SIGTERM came ends and is saved, after the limit
    show(2)
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
show(1)
time.sleep(60)
"""


def test_an_epoch_ended_after_the_time_limit_neither_reports_nor_counts(tmp_path):
    """Stopped at its limit, the trainer ends the epoch it was validating and saves it: that epoch, after the
    limit, was the trial's best, and with a target WER it scored below the limit, ahead of trials that reached
    the target in time."""
    staged, exp = tmp_path / "staged", tmp_path / "exp"
    staged.mkdir()
    exp.mkdir()
    for epoch, wer in ((1, 50.0), (2, 5.0)):
        torch.save({"model": {}, "meta": {"epoch": epoch, "valid_wer": wer}}, staged / f"epoch-{epoch}.pt")
    (tmp_path / "late.py").write_text(LATE_EPOCH_TRAINER)
    reported = []
    run = run_trial([sys.executable, str(tmp_path / "late.py"), str(staged), str(exp)], str(exp), 1 / 60,
                    lambda epoch, wer: reported.append(epoch) or False, str(tmp_path / "output.log"))
    assert run.stopped_by == "time limit" and run.returncode == 143, (tmp_path / "output.log").read_text()
    assert [epoch for epoch, _, _ in run.epochs] == [1, 2] and reported == [1]
    assert run.best[:2] == (1, 50.0)
    assert Search(space={}, minutes_per_trial=4, target_wer=40).score(10.0, None) == 4  # never below the limit


def test_a_trial_that_misses_the_target_ranks_below_every_trial_that_reached_it():
    search = Search(space={}, minutes_per_trial=4, target_wer=40)
    reached = [search.score(wer, minutes) for wer, minutes in ((39.0, 3.9), (12.0, 0.5))]
    missed = [search.score(wer, None) for wer in (40.5, 41.0, 90.0)]
    assert reached == [3.9, 0.5] and max(reached) < min(missed) and missed == sorted(missed)
    assert missed[0] == pytest.approx(4 * 40.5 / 40)
    assert Search(space={}, minutes_per_trial=4).score(41.0, None) == 41.0  # no target: the WER itself


def test_a_target_wer_needs_a_time_limit_a_wer_and_no_pruner(yesno, tmp_path):
    space = {"train.optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2}}
    for search in ({"trials": 2, "target_wer": 40, "space": space},
                   {"trials": 2, "target_wer": 140, "minutes_per_trial": 2, "space": space}):
        out = run_tool(*tune_args(yesno, tmp_path, search))
        assert out.returncode == 1 and str(tmp_path / "search.yaml") in out.stderr
        assert "target_wer must be a WER (%) above 0 and below 100, with minutes_per_trial above 0" in out.stderr
    # scored in minutes, pruned by WER at the same epoch: trials of bigger batches (shorter epochs) were cut
    out = run_tool(*tune_args(yesno, tmp_path, {"trials": 2, "target_wer": 40, "minutes_per_trial": 2,
                                                "pruner": {"type": "median"}, "space": space}))
    assert out.returncode == 1 and "a target_wer search is scored in minutes, and the median pruner" in out.stderr
    assert not (tmp_path / "tune" / "trial-000").exists()


def tune_tool():
    """steps/tune.py as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tune_tool", ROOT / "steps" / "tune.py")
    tune = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tune)
    return tune


class Study:
    """What check_same_search uses of an Optuna study."""
    def __init__(self):
        self.user_attrs = {}

    def set_user_attr(self, key, value):
        self.user_attrs[key] = value


def test_workers_in_checkouts_at_other_places_share_a_study_and_an_older_fingerprint_is_taken(tmp_path, monkeypatch):
    """The study's fingerprint held the resolved config's absolute paths: a worker of the same recipe in a checkout
    elsewhere (--storage postgresql://, another machine) was refused as 'another config'."""
    import dataclasses
    import hashlib
    import json

    from rnnt.config import to_dict
    from rnnt.training.experiment import with_absolute_paths

    tune = tune_tool()
    search = Search(space={"train.optimizer.lr": {"type": "float", "low": 1e-3, "high": 1e-2}})
    study = Study()
    for checkout in ("a", "b"):  # the same recipe folder in two checkouts
        recipe = tmp_path / checkout / "egs" / "an4"
        for folder in ("lang", "train"):
            (recipe / "data" / folder).mkdir(parents=True)
        (recipe / "data" / "lang" / "units.txt").write_text("<blank> 0\n<unk> 1\nYES 2\nNO 3\n")
        (recipe / "data" / "train" / "text").write_text("a YES NO\n")
        (recipe / "data" / "train" / "data.list").write_text(f"{recipe}/data/train/shards/shards_000000.tar\n")
        monkeypatch.chdir(recipe)
        experiment = with_absolute_paths(load_experiment(str(ROOT / "egs" / "yesno" / "conf" / "tiny.yaml"),
                                                         train_list="data/train/data.list", lang_dir="data/lang"))
        assert experiment.paths.lang_dir == str(tmp_path / checkout / "egs" / "an4" / "data" / "lang")
        tune.check_same_search(study, experiment, search, "db")  # the second worker is not refused
    asked = {key: value for key, value in vars(search).items() if key != "trials"}
    older = hashlib.sha256(json.dumps({"config": to_dict(experiment), "search": asked}, sort_keys=True,
                                      default=str).encode()).hexdigest()
    study.user_attrs["inputs"] = older  # a study fingerprinted with absolute paths: resumed, rewritten
    tune.check_same_search(study, experiment, search, "db")
    assert study.user_attrs["inputs"] != older
    other = dataclasses.replace(experiment, train=dataclasses.replace(experiment.train, epochs=99))
    with pytest.raises(Exception, match="holds the trials of another config, search or data"):
        tune.check_same_search(study, other, search, "db")
    # the data prepared again with other transcripts under the same paths: trials of two data sets, refused
    (tmp_path / "b" / "egs" / "an4" / "data" / "train" / "text").write_text("a YES YES\n")
    with pytest.raises(Exception, match="holds the trials of another config, search or data"):
        tune.check_same_search(study, experiment, search, "db")


def test_a_sentencepiece_model_that_splits_text_otherwise_is_other_data(tmp_path):
    """BPE units built again with the same pieces but other scores split the same transcripts into other targets:
    the study's data changed though units.txt did not (the fingerprint held units.txt alone); a study fingerprinted
    before the pieces counted is taken."""
    import hashlib
    import json
    import os

    from sentencepiece import sentencepiece_model_pb2

    from rnnt.config import to_dict
    from rnnt.training.experiment import with_paths

    tune = tune_tool()
    data = tmp_path / "data" / "train"
    data.mkdir(parents=True)
    (data / "text").write_text("".join(f"u{i:02d} {'NO YES' if i % 2 else 'YES NO NO'}\n" for i in range(20)))
    (data / "data.list").write_text("shards_000000.tar\n")
    lang = tmp_path / "lang"
    out = run_tool(sys.executable, ROOT / "steps" / "build_units.py", "--unit-type", "bpe", "--vocab-size", "12",
                   data, lang)
    assert out.returncode == 0, out.stderr
    experiment = load_experiment(str(CONFIG), train_list=str(data / "data.list"), lang_dir=str(lang))
    search, study = Search(space={"train.optimizer.lr": {"type": "float", "low": 1e-3, "high": 1e-2}}), Study()
    tune.check_same_search(study, experiment, search, "db")
    first = study.user_attrs["inputs"]
    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString((lang / "bpe.model").read_bytes())
    for piece in model.pieces:
        piece.score = -piece.score if piece.type == piece.NORMAL else piece.score
    units = (lang / "units.txt").read_text()
    (lang / "bpe.model").write_bytes(model.SerializeToString())
    assert (lang / "units.txt").read_text() == units
    with pytest.raises(Exception, match="holds the trials of another config, search or data"):
        tune.check_same_search(study, experiment, search, "db")
    asked = {key: value for key, value in vars(search).items() if key != "trials"}
    older = {"config": to_dict(with_paths(experiment, os.path.relpath)), "search": asked,
             "data": tune.data_digest(experiment, pieces=False, files=False)}  # as fingerprinted before: taken
    study.user_attrs["inputs"] = hashlib.sha256(json.dumps(older, sort_keys=True, default=str).encode()).hexdigest()
    tune.check_same_search(study, experiment, search, "db")
    assert study.user_attrs["inputs"] not in (first, older)


def test_audio_or_a_file_the_config_names_written_again_is_other_data(tmp_path):
    """A corpus prepared again from other recordings with the same transcripts, or the model a search starts from
    trained again: a resumed study mixed trials of two data sets (its fingerprint held the transcripts alone).
    The files count wherever they lie (a worker in another checkout takes the study); a study fingerprinted before
    they counted is taken."""
    import dataclasses
    import hashlib
    import json

    from rnnt.config import to_dict
    from rnnt.training.experiment import with_paths

    tune = tune_tool()
    (tmp_path / "lang").mkdir()
    (tmp_path / "lang" / "units.txt").write_text("<blank> 0\n<unk> 1\nYES 2\nNO 3\n")
    shards = tmp_path / "data" / "train" / "shards"
    shards.mkdir(parents=True)
    (shards.parent / "text").write_text("a YES NO\n")
    (shards / "shards_000000.tar").write_bytes(b"audio" * 100)
    (shards.parent / "data.list").write_text(f"{shards}/shards_000000.tar\n")
    (tmp_path / "start.pt").write_bytes(b"a model")
    experiment = load_experiment(str(CONFIG), train_list=str(shards.parent / "data.list"),
                                 lang_dir=str(tmp_path / "lang"))
    experiment = dataclasses.replace(experiment, train=dataclasses.replace(experiment.train,
                                                                           init_from=str(tmp_path / "start.pt")))
    search, study = Search(space={"train.optimizer.lr": {"type": "float", "low": 1e-3, "high": 1e-2}}), Study()
    tune.check_same_search(study, experiment, search, "db")
    for path, other in ((shards / "shards_000000.tar", b"other audio" * 100), (tmp_path / "start.pt", b"a model 2")):
        kept = path.read_bytes()
        path.write_bytes(other)
        with pytest.raises(Exception, match=r"holds the trials of another config, search or data \(units, "
                                            r"transcripts, audio\)"):
            tune.check_same_search(study, experiment, search, "db")
        path.write_bytes(kept)
        tune.check_same_search(study, experiment, search, "db")
    # a shard of the same size whose recorded content differs (steps/make_shards.py's SHA256SUMS)
    (shards / "SHA256SUMS").write_text(f"{'0' * 64}  shards_000000.tar\n")
    with pytest.raises(Exception, match="holds the trials of another config, search or data"):
        tune.check_same_search(study, experiment, search, "db")
    (shards / "SHA256SUMS").unlink()
    asked = {key: value for key, value in vars(search).items() if key != "trials"}
    older = {"config": to_dict(with_paths(experiment, os.path.relpath)), "search": asked,
             "data": tune.data_digest(experiment, files=False)}  # this data, as fingerprinted before: taken
    study.user_attrs["inputs"] = hashlib.sha256(json.dumps(older, sort_keys=True, default=str).encode()).hexdigest()
    tune.check_same_search(study, experiment, search, "db")


def test_a_damaged_study_database_or_a_bad_storage_url_is_named(yesno, tmp_path):
    """sqlalchemy's DatabaseError and ArgumentError went up as tracebacks."""
    search = {"trials": 1, "pruner": {"type": "none"}, "sampler": {"type": "random", "seed": 1},
              "space": {"train.optimizer.lr": {"type": "float", "low": 1e-3, "high": 1e-2}}}
    args = tune_args(yesno, tmp_path, search)
    (tmp_path / "tune").mkdir()
    (tmp_path / "tune" / "study.db").write_text("not a database\n")
    out = run_tool(*args)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert f"tune.py: sqlite:///{tmp_path / 'tune' / 'study.db'}: cannot open the study's storage (" in out.stderr
    out = run_tool(*args, "--storage", "notaurl")
    assert out.returncode == 1 and "tune.py: notaurl: cannot open the study's storage (" in out.stderr, out.stderr


def test_an_exp_dir_or_trial_dir_that_cannot_be_made_is_named_not_a_traceback(yesno, tmp_path):
    """os.makedirs's FileExistsError (an --exp-dir that is a file; a file where trial-000's dir goes: a full disk
    ends the same way) went up as a traceback; the study's database keeps what ended, so a rerun goes on."""
    search = {"trials": 1, "pruner": {"type": "none"}, "sampler": {"type": "random", "seed": 1},
              "space": {"train.optimizer.lr": {"type": "float", "low": 1e-3, "high": 1e-2}}}
    args = tune_args(yesno, tmp_path, search, epochs=1)
    (tmp_path / "tune").write_text("a file\n")
    out = run_tool(*args)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert f"tune.py: --exp-dir {tmp_path / 'tune'}: File exists" in out.stderr, out.stderr
    (tmp_path / "tune").unlink()
    (tmp_path / "tune").mkdir()
    (tmp_path / "tune" / "trial-000").write_text("a file\n")
    out = run_tool(*args)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert f"tune.py: {tmp_path / 'tune' / 'trial-000'}: File exists; the study's database keeps" in out.stderr


def test_an_epoch_checkpoint_without_a_dev_wer_fails_its_trial_and_stops_the_training(tmp_path):
    """new_epochs' RuntimeError went up through Optuna as a traceback, ending the search."""
    torch.save({"model": {}, "meta": {"epoch": 1}}, tmp_path / "epoch-1.pt")
    with pytest.raises(NoDevWer, match="epoch-1.pt holds no dev WER"):
        run_trial([sys.executable, "-c", "import time; time.sleep(60)"], str(tmp_path), 0, lambda *_: False,
                  str(tmp_path / "log"))


def test_a_trial_scored_on_other_dev_utterances_than_the_studys_fails(tmp_path):
    """The validation leaves out dev utterances a model cannot take (more units than its encoder's frames): a
    trial of stack_time 3 was scored on 8 of 21 utterances, one of stack_time 2 on 16, and the two WERs ranked as
    one. Each epoch's valid_dev_set is read; a trial of another set than the study's first scored trial fails."""
    import optuna

    tune = tune_tool()
    for epoch, dev_set in ((1, "16-ab"), (2, "16-ab")):
        torch.save({"model": {}, "meta": {"epoch": epoch, "valid_wer": 50.0 - epoch, "valid_dev_set": dev_set}},
                   tmp_path / f"epoch-{epoch}.pt")
    run = run_trial([sys.executable, "-c", "pass"], str(tmp_path), 0, lambda *_: False, str(tmp_path / "log"))
    assert run.dev_set == "16-ab" and [e[:2] for e in run.epochs] == [(1, 49.0), (2, 48.0)]
    study = optuna.create_study()
    first = study.ask()
    tune.check_dev_set(first, run.dev_set)  # the first sets it
    study.tell(first, 48.0)
    same, other = study.ask(), study.ask()
    tune.check_dev_set(same, "16-ab")
    with pytest.raises(tune.TrialFailed, match=r"trial 2: its dev WER is of 8 dev utterances, the study's of 16"):
        tune.check_dev_set(other, "8-cd")
