"""rnnt.tuning.study on a real SQLite database, with an objective that stands in for a training run (it
reports a dev WER per epoch and sets the user attributes steps/tune.py sets): the study persists and
resumes, counts ended trials over runs, stops on too many failures, retries the trial of a dead worker
with its values, picks the lowest objective as the best, and writes its results."""

import socket
import sqlite3
import subprocess
import sys
import warnings

import optuna
import pytest
import sqlalchemy
import yaml
from optuna.trial import TrialState

from rnnt.tuning import study as study_module
from rnnt.tuning.space import Search, suggest, values_to_check
from rnnt.tuning.study import RETRIES, best_wer, completed, count, open_study, optimize_until, summary, write_results

PNG = b"\x89PNG\r\n\x1a\n"
SPACE = {"train.optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
         "model.joiner.activation": {"type": "categorical", "choices": ["tanh", "relu"]}}
USER_CONFIG = {"model": {"joiner": {"activation": "tanh", "hidden": 64}},
               "train": {"epochs": 3, "optimizer": {"type": "adam", "lr": 0.001}}}


@pytest.fixture(autouse=True)
def unsynced_sqlite():
    """SQLite without waiting for the disk at each commit (every report and attribute is one): what is
    written still reaches the file, for every later connection to read; only a power cut could lose it."""
    def unsynced(connection, _record):
        if isinstance(connection, sqlite3.Connection):
            connection.execute("PRAGMA synchronous = OFF")

    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "connect", unsynced)
    yield
    sqlalchemy.event.remove(sqlalchemy.engine.Engine, "connect", unsynced)


def search(**changes) -> Search:
    return Search(**{"space": SPACE, "pruner": {"type": "none"}, "sampler": {"type": "random", "seed": 0}, **changes})


class Training:
    """The objective: a trial's dev WER per epoch falls towards a floor set by its learning rate (lowest near
    lr 3e-3); it reports each epoch, may be pruned, and fails (a training that crashed) where told."""

    def __init__(self, fail=()):
        self.calls, self.fail = 0, set(fail)

    def __call__(self, trial) -> float:
        call, self.calls = self.calls, self.calls + 1
        values = suggest(trial, SPACE)
        if call in self.fail:
            raise RuntimeError(f"call {call}: training failed")
        floor = 20 + 400 * abs(values["train.optimizer.lr"] - 3e-3) + (5 if values["model.joiner.activation"] ==
                                                                          "relu" else 0)
        wers = [floor + 40 / epoch for epoch in (1, 2, 3)]
        for epoch, wer in enumerate(wers, 1):
            trial.report(wer, epoch)
            if trial.should_prune():
                trial.set_user_attr("epoch_minutes", [0.5 * e for e in range(1, epoch + 1)])
                raise optuna.TrialPruned()
        trial.set_user_attr("epoch_minutes", [0.5, 1.0, 1.5])
        trial.set_user_attr("best_epoch", 3)
        trial.set_user_attr("best_wer", wers[-1])
        trial.set_user_attr("minutes_to_best", 1.5)
        return wers[-1]


def states(study) -> list[str]:
    return [t.state.name for t in study.get_trials(deepcopy=False)]


def test_a_study_persists_in_its_database_and_resumes_where_it_stopped(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    first = open_study(url, "lr", search(), heartbeat=1)
    training = Training()
    optimize_until(first, training, 2, catch=())
    assert training.calls == 2 and completed(first) == 2
    values = [t.params for t in first.trials]

    again = open_study(url, "lr", search(), heartbeat=1)  # another process, later: the same study
    assert [t.params for t in again.trials] == values and again.best_trial.number == first.best_trial.number
    resumed = Training()
    optimize_until(again, resumed, 2, catch=())  # the trials asked have all ended: nothing runs
    assert resumed.calls == 0 and len(again.trials) == 2
    optimize_until(again, resumed, 3, catch=())  # one more, counted over both runs
    assert resumed.calls == 1 and states(again) == ["COMPLETE"] * 3
    assert [t.params for t in again.trials[:2]] == values
    assert again.trials[2].params not in values  # a resumed seed draws on, not the first run's values again
    fresh = open_study(f"sqlite:///{tmp_path / 'fresh.db'}", "lr", search(), heartbeat=1)
    optimize_until(fresh, Training(), 3, catch=())
    assert [t.params for t in fresh.trials[:2]] == values  # a new study draws what the first run drew
    assert len(open_study(url, "lr", search(), heartbeat=1).trials) == 3
    assert open_study(url, "other", search(), heartbeat=1).trials == []  # a study is found by its name


def test_the_sampler_and_pruner_are_the_searchs(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    tpe = open_study(url, "tpe", search(sampler={"type": "tpe", "seed": 5},
                                        pruner={"type": "median", "startup_trials": 4, "warmup_epochs": 2}), 1)
    assert isinstance(tpe.sampler.inner, optuna.samplers.TPESampler)  # each trial's seeded 5 + its number
    assert isinstance(tpe.pruner, optuna.pruners.MedianPruner)
    assert (tpe.pruner._n_startup_trials, tpe.pruner._n_warmup_steps) == (4, 2)
    assert tpe.direction == optuna.study.StudyDirection.MINIMIZE
    plain = open_study(url, "random", search(), 1)
    assert isinstance(plain.sampler.inner, optuna.samplers.RandomSampler)
    assert isinstance(plain.pruner, optuna.pruners.NopPruner)
    # the seed fixes the values drawn
    a, b = (open_study(f"sqlite:///{tmp_path / f'{n}.db'}", "s", search(), 1) for n in ("a", "b"))
    for study in (a, b):
        optimize_until(study, Training(), 2, catch=())
    assert [t.params for t in a.trials] == [t.params for t in b.trials] and a.trials[0].params != a.trials[1].params
    # two workers that open a new study at once (seeded alike, they drew the same values trial after trial)
    first, second = (open_study(f"sqlite:///{tmp_path / 'shared.db'}", "s", search(), 1) for _ in range(2))
    for _ in range(2):
        for study in (first, second):
            optimize_until(study, Training(), len(study.trials) + 1, catch=())
    drawn = [t.params["train.optimizer.lr"] for t in first.trials]
    assert len(drawn) == 4 and len(set(drawn)) == 4, drawn
    assert drawn[:2] == [t.params["train.optimizer.lr"] for t in a.trials]  # as one worker draws, by trial number
    startup = open_study(url, "startup", search(sampler={"type": "tpe", "seed": 0, "startup_trials": 3}), 1)
    assert startup.sampler.inner._n_startup_trials == 3
    # seed 1 drew seed 0's trials one trial later, and a seed near 2^32 went past numpy's range at the second trial
    one, top = (open_study(f"sqlite:///{tmp_path / f'seed{n}.db'}", "s",
                           search(sampler={"type": "random", "seed": n}), 1) for n in (1, 2**32 - 1))
    for study in (one, top):
        optimize_until(study, Training(), 2, catch=())
    assert [t.params for t in one.trials][0] != [t.params for t in a.trials][1]
    assert [t.state.name for t in top.trials] == ["COMPLETE", "COMPLETE"]


def test_failed_trials_are_not_counted_and_too_many_stop_the_search(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = open_study(url, "flaky", search(), heartbeat=1)
    training = Training(fail={0, 2})
    optimize_until(study, training, 2, catch=(RuntimeError,))
    assert states(study) == ["FAIL", "COMPLETE", "FAIL", "COMPLETE"]
    assert count(study, TrialState.COMPLETE, TrialState.PRUNED) == 2 and training.calls == 4

    broken = open_study(url, "broken", search(), heartbeat=1)
    always = Training(fail=range(100))
    optimize_until(broken, always, 1, catch=(RuntimeError,))  # must end: more failures than trials stop it
    assert always.calls == 2 and states(broken) == ["FAIL"] * 2
    with pytest.raises(RuntimeError, match="training failed"):  # an error not caught ends the search
        optimize_until(open_study(url, "uncaught", search(), heartbeat=1), Training(fail={0}), 1, catch=())


def test_failures_of_an_earlier_run_do_not_stop_a_resumed_one(tmp_path):
    """A first run whose every trial failed (a device that was not there, mended since): resumed, the search
    runs the trials asked for; it stopped after one when the earlier failures counted."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    broken = Training(fail=range(100))
    optimize_until(open_study(url, "mended", search(), heartbeat=1), broken, 2, catch=(RuntimeError,))
    study = open_study(url, "mended", search(), heartbeat=1)
    assert states(study) == ["FAIL"] * 3
    optimize_until(study, Training(), 2, catch=(RuntimeError,))
    assert states(study) == ["FAIL"] * 3 + ["COMPLETE"] * 2


def test_a_section_left_empty_takes_the_searched_value_and_best_yaml_is_whole(tmp_path):
    """`optimizer:` with no value (its defaults) crashed the search at its end, after every trial, leaving a
    best.yaml of its comment alone, which loads as the default experiment."""
    from rnnt.tuning.space import with_values

    assert with_values({"train": {"optimizer": None}}, {"train.optimizer.lr": 0.002}) == {
        "train": {"optimizer": {"lr": 0.002}}}
    study = open_study(f"sqlite:///{tmp_path / 'study.db'}", "empty", search(), heartbeat=1)
    optimize_until(study, Training(), 1, catch=())
    write_results(study, {"train": {"epochs": 3, "optimizer": None}}, str(tmp_path))
    best = yaml.safe_load((tmp_path / "best.yaml").read_text())
    assert best["train"]["optimizer"]["lr"] == study.best_trial.params["train.optimizer.lr"]


def test_pruned_trials_count_as_ended(tmp_path):
    pruning = search(pruner={"type": "median", "startup_trials": 1, "warmup_epochs": 0})
    study = open_study(f"sqlite:///{tmp_path / 'study.db'}", "pruned", pruning, heartbeat=1)
    optimize_until(study, Training(), 3, catch=())
    assert count(study, TrialState.PRUNED) >= 1, states(study)
    assert count(study, TrialState.COMPLETE, TrialState.PRUNED) == 3 == len(study.trials)


def test_the_trial_of_a_dead_worker_runs_again_with_its_values(tmp_path):
    """A trial whose heartbeat stopped more than two beats ago (its worker was killed) is failed when the
    search is resumed, and a new trial runs with the same values."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = open_study(url, "dead", search(), heartbeat=1)
    storage = study._storage
    assert (storage.get_heartbeat_interval(), RETRIES) == (1, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Optuna's note that heartbeats go with optimize()
        dead = study.ask()
    values = suggest(dead, SPACE)
    storage.record_heartbeat(dead._trial_id)  # its one beat, then silence: 10 s of it, written to the database
    with sqlite3.connect(tmp_path / "study.db") as connection:  # (SQLite's clock counts whole seconds)
        connection.execute("UPDATE trial_heartbeats SET heartbeat = datetime('now', '-10 seconds')")
    training = Training()
    optimize_until(open_study(url, "dead", search(), heartbeat=1), training, 1, catch=())
    trials = optuna.load_study(study_name="dead", storage=url).trials
    assert [t.state.name for t in trials] == ["FAIL", "COMPLETE"]
    assert trials[1].params == values and training.calls == 1
    assert optuna.storages.RetryFailedTrialCallback.retried_trial_number(trials[1]) == 0


def test_the_trial_of_a_worker_of_this_machine_that_is_gone_runs_again_at_once(tmp_path):
    """A search run again at once after a kill: its trial's heartbeat was still fresh, so new values were drawn in
    its place and it stayed RUNNING for good (its values never trained). Its worker, a process of this machine that
    is gone, fails it now; a running trial of a live worker is left to run."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = open_study(url, "killed", search(), heartbeat=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Optuna's note that heartbeats go with optimize()
        killed, alive = study.ask(), study.ask()
    values = suggest(killed, SPACE)
    suggest(alive, SPACE)
    gone = subprocess.Popen(["true"])
    gone.wait()
    killed.set_user_attr(study_module.WORKER, f"{socket.gethostname()}:{gone.pid}")
    alive.set_user_attr(study_module.WORKER, study_module.this_worker())
    for trial in (killed, alive):
        study._storage.record_heartbeat(trial._trial_id)  # fresh: two beats of 60 s are far off
    training = Training()
    optimize_until(open_study(url, "killed", search(), heartbeat=60), training, 1, catch=())
    trials = optuna.load_study(study_name="killed", storage=url).trials
    assert [t.state.name for t in trials] == ["FAIL", "RUNNING", "COMPLETE"]
    assert trials[2].params == values and training.calls == 1
    assert trials[2].user_attrs[study_module.WORKER] == study_module.this_worker()


def test_two_workers_failing_one_gone_workers_trial_at_once_both_go_on(tmp_path, monkeypatch):
    """Two workers started together after a kill both saw the gone worker's trial running: the second to fail it got
    optuna's UpdateFinishedTrialError, a traceback that ended it (optuna's own fail_stale_trials takes it)."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = open_study(url, "raced", search(), heartbeat=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        killed = study.ask()
    suggest(killed, SPACE)
    gone = subprocess.Popen(["true"])
    gone.wait()
    killed.set_user_attr(study_module.WORKER, f"{socket.gethostname()}:{gone.pid}")

    def failed_by_the_other(*args, **kwargs):
        raise optuna.exceptions.UpdateFinishedTrialError("Trial#0 has already finished and can not be updated.")

    monkeypatch.setattr(study._storage, "set_trial_state_values", failed_by_the_other)
    study_module.fail_trials_of_dead_workers(study)  # goes on: the other worker failed it


def test_workers_opening_a_new_sqlite_study_at_once_both_open_it(tmp_path):
    """Two workers started together on a new study.db: both created its tables, and one failed ('table
    study_directions already exists') as if the database were damaged (1 round in 3 before)."""
    opener = ("import sys; from rnnt.tuning.study import open_study; from rnnt.tuning.space import Search; "
              "open_study(sys.argv[1], 'both', Search(space={'train.optimizer.lr': {'type': 'float', 'low': 1e-4, "
              "'high': 1e-2}}, pruner={'type': 'none'}, sampler={'type': 'random', 'seed': 0}), 60)")
    for round_ in range(3):
        url = f"sqlite:///{tmp_path / f'study{round_}.db'}"
        workers = [subprocess.Popen([sys.executable, "-c", opener, url], stderr=subprocess.PIPE, text=True)
                   for _ in range(2)]
        errors = [worker.communicate(timeout=120)[1] for worker in workers]
        assert [worker.returncode for worker in workers] == [0, 0], errors
        assert len(optuna.load_study(study_name="both", storage=url).directions) == 1


def test_a_search_with_a_killed_trial_draws_what_one_nobody_killed_draws(tmp_path):
    """The trial of a dead worker runs again under the next number; the trials after it drew with the seeds of
    numbers one higher than in a search nobody killed, so a resumed search searched other values."""
    whole = open_study(f"sqlite:///{tmp_path / 'whole.db'}", "s", search(), heartbeat=1)
    optimize_until(whole, Training(), 3, catch=())
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    killed = open_study(url, "s", search(), heartbeat=1)
    optimize_until(killed, Training(), 1, catch=())
    killed_trial(killed, tmp_path / "killed.db")
    optimize_until(open_study(url, "s", search(), heartbeat=1), Training(), 3, catch=())
    trials = optuna.load_study(study_name="s", storage=url).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]
    assert [t.params for t in trials] == [t.params for t in whole.trials[:2]] + [whole.trials[1].params,
                                                                                 whole.trials[2].params]


def killed_trial(study, database) -> None:
    """A trial asked, its values drawn, one heartbeat, then its worker dead (10 s of silence in the database)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Optuna's note that heartbeats go with optimize()
        dead = study.ask()
    suggest(dead, SPACE)
    study._storage.record_heartbeat(dead._trial_id)
    with sqlite3.connect(database) as connection:  # (SQLite's clock counts whole seconds)
        connection.execute("UPDATE trial_heartbeats SET heartbeat = datetime('now', '-10 seconds')")


@pytest.mark.parametrize("begun_by", ["this version", "an earlier version"])
def test_no_trial_draws_the_values_of_another_after_a_retry_whatever_version_began_the_study(tmp_path, begun_by,
                                                                                             monkeypatch):
    """A study begun by an earlier version seeded each trial by its number: counted the new way after a retry, a
    new trial of it drew the values of one already run. Such a study goes on as it began."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    with monkeypatch.context() as earlier:
        if begun_by == "an earlier version":  # its seeds the trials' numbers, and no record of it
            earlier.setattr(study_module, "trial_seed_index", lambda study, trial: trial.number)
            earlier.setattr(optuna.study.Study, "set_user_attr", lambda *args: None)
        study = open_study(url, "s", search(), heartbeat=1)
        optimize_until(study, Training(), 1, catch=())
        killed_trial(study, tmp_path / "study.db")
        optimize_until(open_study(url, "s", search(), heartbeat=1), Training(), 4, catch=())  # the retry, 2 more
    optimize_until(open_study(url, "s", search(), heartbeat=1), Training(), 5, catch=())  # this version
    trials = optuna.load_study(study_name="s", storage=url).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "FAIL"] + ["COMPLETE"] * 4
    lrs = [t.params["train.optimizer.lr"] for t in trials]
    assert lrs[2] == lrs[1] and len(set(lrs)) == 5, lrs  # the retry alone repeats, its killed trial's values


def test_the_best_trial_is_the_lowest_objective_and_the_summary_names_it(tmp_path):
    study = open_study(f"sqlite:///{tmp_path / 'study.db'}", "best", search(), heartbeat=1)
    assert summary(study, 4) == "0 of 4 trials ended (0 complete, 0 pruned, 0 fail); no trial completed"
    optimize_until(study, Training(fail={1}), 3, catch=(RuntimeError,))
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    lowest = min(done, key=lambda t: t.value)
    assert study.best_trial.number == lowest.number and best_wer(lowest) == lowest.user_attrs["best_wer"]
    line = summary(study, 3)
    assert line.startswith(f"3 of 3 trials ended (3 complete, 0 pruned, 1 fail); best: trial {lowest.number}, "
                           f"dev WER {lowest.value:.2f}% at epoch 3 after 1.5 min (its epochs done; objective "
                           f"{lowest.value:.2f}), with train.optimizer.lr=")
    assert line.endswith(f"model.joiner.activation={lowest.params['model.joiner.activation']}")
    assert f"train.optimizer.lr={lowest.params['train.optimizer.lr']:.4g}" in line


def test_best_wer_is_the_objective_of_studies_from_before_target_wer():
    old = optuna.trial.create_trial(value=33.0)
    new = optuna.trial.create_trial(value=2.5, user_attrs={"best_wer": 41.0})
    assert (best_wer(old), best_wer(new)) == (33.0, 41.0)


def test_a_pruned_trials_row_has_no_objective_and_its_best_wer():
    """Optuna gives a pruned trial its last reported WER as its value: the objective column mixed WERs with
    the minutes of a target search, and its dev WER was the last epoch's, not its best."""
    from rnnt.tuning.study import trial_row

    pruned = optuna.trial.create_trial(state=TrialState.PRUNED, value=75.0, intermediate_values={1: 80, 2: 70, 3: 75},
                                       user_attrs={"best_wer": 70.0, "best_epoch": 2, "minutes_to_best": 1.0})
    assert trial_row(pruned, [])[1:] == ["PRUNED", "", "70.00", "2", "1.00"]


def test_write_results_writes_the_table_the_plot_and_the_best_config(tmp_path):
    study = open_study(f"sqlite:///{tmp_path / 'study.db'}", "results", search(), heartbeat=1)
    optimize_until(study, Training(fail={2}), 3, catch=(RuntimeError,))
    exp = tmp_path / "exp"
    exp.mkdir()
    write_results(study, USER_CONFIG, str(exp))
    header, *rows = [line.split("\t") for line in (exp / "trials.tsv").read_text().splitlines()]
    assert header == ["trial", "state", "objective", "dev_wer", "best_epoch", "minutes_to_best",
                      "model.joiner.activation", "train.optimizer.lr"]
    assert [(r[0], r[1]) for r in rows] == [("0", "COMPLETE"), ("1", "COMPLETE"), ("2", "FAIL"), ("3", "COMPLETE")]
    assert rows[2][2:6] == ["", "", "", ""]  # a failed trial: its values only
    for row, trial in zip(rows, study.trials):
        assert row[6] == trial.params["model.joiner.activation"]
        assert float(row[7]) == trial.params["train.optimizer.lr"]
        if trial.state == TrialState.COMPLETE:
            assert row[2:6] == [f"{trial.value:.2f}", f"{trial.value:.2f}", "3", "1.50"]
    assert (exp / "trials.png").read_bytes()[:8] == PNG
    text = (exp / "best.yaml").read_text()
    best = study.best_trial
    assert text.splitlines()[0] == (f"# steps/tune.py: trial {best.number}, dev WER {best.value:.2f}% "
                                    f"(objective {best.value:.2f})")
    assert yaml.safe_load(text) == {
        "model": {"joiner": {"activation": best.params["model.joiner.activation"], "hidden": 64}},
        "train": {"epochs": 3, "optimizer": {"type": "adam", "lr": best.params["train.optimizer.lr"]}}}
    assert USER_CONFIG["train"]["optimizer"]["lr"] == 0.001  # the user's config itself is left as it was


def test_without_a_complete_trial_there_is_no_best_config(tmp_path):
    study = open_study(f"sqlite:///{tmp_path / 'study.db'}", "none", search(), heartbeat=1)
    optimize_until(study, Training(fail=range(10)), 1, catch=(RuntimeError,))
    exp = tmp_path / "exp"
    exp.mkdir()
    for left in ("trials.png", "best.yaml"):  # an earlier study's, there: trained as this one's best
        (exp / left).write_text("an earlier study's")
    write_results(study, USER_CONFIG, str(exp))
    assert len((exp / "trials.tsv").read_text().splitlines()) == 1 + 2  # both failed trials listed
    assert not (exp / "trials.png").exists() and not (exp / "best.yaml").exists()
    assert summary(study, 1) == "0 of 1 trials ended (0 complete, 0 pruned, 2 fail); no trial completed"


def test_the_values_checked_before_any_trial_are_each_end_alone_then_every_two_parameters_ends_together():
    space = {"train.schedule.warmup_steps": {"type": "int", "low": 0, "high": 110, "step": 50},  # draws 100 at most
             "train.optimizer.lr": {"type": "float", "low": "1e-4", "high": 1e-2, "log": True},
             "model.joiner.activation": {"type": "categorical", "choices": ["tanh", "relu"]}}
    checked = list(values_to_check(space))
    steps, lr, activation = space
    assert checked[:6] == [{steps: 0}, {steps: 100}, {lr: 1e-4}, {lr: 1e-2}, {activation: "tanh"},
                           {activation: "relu"}]
    assert [type(values[steps]) for values in checked[:2]] == [int, int]
    assert len(checked) == 6 + 3 * 4 and all(len(values) == 2 for values in checked[6:])
    assert {steps: 100, activation: "relu"} in checked and {lr: 1e-4, activation: "tanh"} in checked
