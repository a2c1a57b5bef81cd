"""steps/tune.py: Optuna over the real trainer on real yesno audio; a killed search resumes from its
database; trials are stopped by the pruner and by the time limit through the trainer's SIGTERM path."""

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, run_tool
from rnnt.training import checkpoint
from rnnt.training.experiment import load_experiment
from rnnt.tuning.trial_run import run_trial

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
    assert "tune: 3 of 3 trials ended (3 complete, 0 pruned, 1 fail)" in out.stdout
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


def trainer_command(yesno, tmp_path, epochs: int) -> list[str]:
    return [sys.executable, str(ROOT / "steps" / "train.py"), "--config", str(yesno_config(tmp_path, epochs)),
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
    assert "stopped on SIGTERM" in (tmp_path / "exp" / "train.log").read_text()


def test_the_time_limit_stops_a_trial_and_keeps_its_epochs(yesno, tmp_path):
    run = run_trial(trainer_command(yesno, tmp_path, 1000), str(tmp_path / "exp"), 0.25, lambda e, w: False,
                    str(tmp_path / "output.log"))
    assert run.stopped_by == "time limit" and run.returncode == 143
    assert run.epochs and run.best[1] == min(w for _, w, _ in run.epochs)
    assert all(minutes <= 0.25 + 0.1 for _, _, minutes in run.epochs)


@pytest.mark.parametrize("space, message", [
    ({"train.optimizer.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2}},
     "space.train.optimizer.learning_rate is not a key of the experiment config"),
    ({"train.optimizer.lr": {"type": "float", "low": 1e-2, "high": 1e-4}}, "low (0.01) must be below high"),
    ({"train.optimizer.lr": {"type": "uniform", "low": 1e-4, "high": 1e-2}}, "type one of float, int, categorical"),
])
def test_a_bad_search_is_refused_before_any_trial_naming_file_and_key(yesno, tmp_path, space, message):
    out = run_tool(*tune_args(yesno, tmp_path, {"trials": 2, "space": space}))
    assert out.returncode == 1
    assert str(tmp_path / "search.yaml") in out.stderr and message in out.stderr
    assert not (tmp_path / "tune" / "trial-000").exists()
