"""The Optuna study of a search: opened from its database with heartbeats, run until enough trials
have ended, and its results written (best config, a table and a plot)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket

import numpy as np
import yaml

from rnnt.atomic_write import write_atomically
from rnnt.file_lock import held
from rnnt.tuning.plot import plot_study
from rnnt.tuning.space import Search, with_values

RETRIES = 2  # a trial whose worker died runs again with its values at most this often
WORKER = "worker"  # a trial's user attribute: '<host>:<pid>' of the process that runs it


def without_traceback(record: logging.LogRecord) -> bool:
    """Optuna's 'Trial N failed ... because of the following error: ERROR' without the traceback under it: a
    trial failed by its training (TrialFailed) is named in that line, and an error the search does not catch goes
    on up to the tool, which names it (or Python prints its traceback once)."""
    record.exc_info = None
    return True


def open_study(storage_url: str, name: str, search: Search, heartbeat: float):
    """The study in the database at storage_url (created on first use); its trials beat every
    `heartbeat` seconds, and one silent for two beats is failed and queued again with its values. A study
    opened again (resumed, or by another worker) seeds its sampler past the trials made, whose values it
    would otherwise draw again."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("optuna.study._optimize").addFilter(without_traceback)
    # heartbeats, and retrying the trials of a dead worker, are still marked experimental
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    engine = {"connect_args": {"timeout": 60}} if storage_url.startswith("sqlite") else {}
    if search.pruner["type"] == "median":
        pruner = optuna.pruners.MedianPruner(n_startup_trials=search.pruner.get("startup_trials", 2),
                                             n_warmup_steps=search.pruner.get("warmup_epochs", 1))
    else:
        pruner = optuna.pruners.NopPruner()
    with creating(storage_url):
        storage = optuna.storages.RDBStorage(
            storage_url, engine_kwargs=engine, heartbeat_interval=max(1, round(heartbeat)),
            grace_period=max(2, round(2 * heartbeat)),
            heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=RETRIES))
        study = optuna.create_study(storage=storage, study_name=name, direction="minimize", sampler=sampler(search),
                                    pruner=pruner, load_if_exists=True)
    if not study.trials:  # a study of an earlier version goes on as it began, its seeds the trials' numbers
        study.set_user_attr(SEEDING, "fresh trials")
    return study


@contextlib.contextmanager
def creating(storage_url: str):
    """Held while a study's storage and study are opened: for a SQLite file, a lock beside it, so that workers
    started at once on a new one do not both create its tables (one failed with 'table ... already exists', as if
    the database were damaged); another database sees to it itself."""
    path = storage_url.removeprefix("sqlite:///") if storage_url.startswith("sqlite:///") else ""
    if not path or path == ":memory:":
        yield
        return
    with held(f"{path}.lock"):
        yield


SEEDING = "seeding"  # a study's user attribute: how its trials are seeded (sampler's PerTrialSeed)


def sampler(search: Search):
    """The search's sampler, each trial's draws seeded by the search's seed and the trial's number (trial_seed) in a
    search that nobody killed (trial_seed_index): a resumed study goes on from the trials made, as it would have gone on
    without the kill, and workers that open it at once draw trials of their own (seeded alike, two drew the same
    values, trial after trial); without a seed, unseeded."""
    import optuna

    seed = search.sampler.get("seed")

    def make(trial_seed):
        if search.sampler["type"] == "tpe":
            return optuna.samplers.TPESampler(seed=trial_seed,
                                              n_startup_trials=search.sampler.get("startup_trials", 10))
        return optuna.samplers.RandomSampler(seed=trial_seed)

    if seed is None:
        return make(None)

    class PerTrialSeed(optuna.samplers.BaseSampler):
        def __init__(self):
            self.inner = make(seed)

        def before_trial(self, study, trial):
            self.inner = make(trial_seed(seed, trial_seed_index(study, trial)))
            self.inner.before_trial(study, trial)

        def infer_relative_search_space(self, study, trial):
            return self.inner.infer_relative_search_space(study, trial)

        def sample_relative(self, study, trial, search_space):
            return self.inner.sample_relative(study, trial, search_space)

        def sample_independent(self, study, trial, param_name, param_distribution):
            return self.inner.sample_independent(study, trial, param_name, param_distribution)

        def after_trial(self, study, trial, state, values):
            self.inner.after_trial(study, trial, state, values)

        def reseed_rng(self):
            self.inner.reseed_rng()

    return PerTrialSeed()


def trial_seed(seed: int, index: int) -> int:
    """The seed of a trial's draws: of the search's seed and the trial's number both (seed + number drew seed 1's
    trials as seed 0's one trial later, and a seed near 2^32 was past numpy's range at the second trial)."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


def trial_seed_index(study, trial) -> int:
    """The number a trial's seed is drawn with (trial_seed): the one it would have had if no worker had been killed (a
    dead worker's trial runs again under the next number; counted so, every later trial drew with another seed
    than in a search nobody killed): the trials before it that are not such a run again, and for one, its first
    run's (the values it draws where its first run died before drawing them). A study of an earlier version: the
    trial's number."""
    import optuna

    if study.user_attrs.get(SEEDING) != "fresh trials":
        return trial.number
    retried = optuna.storages.RetryFailedTrialCallback.retried_trial_number
    first = retried(trial)
    number = trial.number if first is None else first
    return sum(t.number < number and retried(t) is None for t in study.get_trials(deepcopy=False))


def count(study, *states) -> int:
    return sum(t.state in states for t in study.get_trials(deepcopy=False))


def completed(study) -> int:
    from optuna.trial import TrialState

    return count(study, TrialState.COMPLETE)


def ended(study) -> int:
    """The trials that ended complete or pruned, over all workers and runs."""
    from optuna.trial import TrialState

    return count(study, TrialState.COMPLETE, TrialState.PRUNED)


def this_worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def fail_trials_of_dead_workers(study) -> None:
    """Fails the running trials of a worker of this machine that is gone, and queues each again with its values, as
    a heartbeat gone silent for two beats does: a search run again at once, its killed trial's heartbeat still
    fresh, drew new values in its place and left it running for good."""
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    host = socket.gethostname()
    storage = study._storage  # (optuna's own fail_stale_trials does the same through these)
    retry = storage.get_heartbeat_stale_trial_callback()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker_host, _, pid = str(trial.user_attrs.get(WORKER, "")).rpartition(":")
        if worker_host != host or not pid.isdigit() or process_alive(int(pid)):
            continue
        try:
            failed = storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)
        except UpdateFinishedTrialError:  # another worker starting at once failed it first: a traceback here
            continue
        if failed and retry is not None:
            retry(study, storage.get_trial(trial._trial_id))


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def optimize_until(study, objective, trials: int, catch: tuple) -> None:
    """Runs trials until `trials` of them, over all workers and earlier runs, have ended complete or
    pruned. Failed ones are not counted (a worker killed mid-trial leaves one, which is run again: at once where
    the worker ran on this machine, else once its heartbeat is silent for two beats), but more failures in this run
    than trials stop it: something is wrong with every trial (the failures of earlier runs, whose cause may be
    mended since, do not count)."""
    from optuna.trial import TrialState

    fail_trials_of_dead_workers(study)
    failed_before = count(study, TrialState.FAIL)

    def with_worker(trial):
        trial.set_user_attr(WORKER, this_worker())
        return objective(trial)

    def stop_when_done(study_, _trial) -> None:
        if ended(study_) >= trials or count(study_, TrialState.FAIL) - failed_before > trials:
            study_.stop()

    if ended(study) < trials:
        study.optimize(with_worker, catch=catch, callbacks=[stop_when_done])


def summary(study, trials: int) -> str:
    from optuna.trial import TrialState

    counts = {state.name.lower(): count(study, state) for state in (TrialState.COMPLETE, TrialState.PRUNED,
                                                                    TrialState.FAIL)}
    line = f"{counts['complete'] + counts['pruned']} of {trials} trials ended (" + ", ".join(
        f"{n} {state}" for state, n in counts.items()) + ")"
    if not counts["complete"]:
        return line + "; no trial completed"
    best = study.best_trial
    values = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in best.params.items())
    return (f"{line}; best: trial {best.number}, dev WER {best_wer(best):.2f}% at epoch "
            f"{best.user_attrs.get('best_epoch')} after {best.user_attrs.get('minutes_to_best', 0):.1f} min "
            f"({best.user_attrs.get('stopped_by') or 'its epochs done'}; objective {best.value:.2f}), with {values}")


def best_wer(trial) -> float:
    """A finished trial's lowest dev WER (its objective value in studies from before target_wer)."""
    return trial.user_attrs.get("best_wer", trial.value)


def trial_row(trial, keys: list[str]) -> list[str]:
    """A trial's line of trials.tsv: its objective where it completed (a pruned trial's value is its last
    WER, not an objective), its best dev WER, the epoch and minutes to it, its values at keys."""
    from optuna.trial import TrialState

    complete, attrs = trial.state == TrialState.COMPLETE, trial.user_attrs
    wer = attrs["best_wer"] if "best_wer" in attrs else trial.value if complete else None
    return [str(trial.number), trial.state.name, f"{trial.value:.2f}" if complete else "",
            "" if wer is None else f"{wer:.2f}", str(attrs.get("best_epoch", "")),
            f"{attrs['minutes_to_best']:.2f}" if "minutes_to_best" in attrs else "",
            *(str(trial.params.get(k, "")) for k in keys)]


def write_results(study, user_config: dict, exp_dir: str, objective: str = "") -> None:
    """<exp-dir>/trials.tsv (one row per trial), trials.png and, when a trial completed, best.yaml: the
    user's config with the best trial's values (where none has, an earlier study's best.yaml and trials.png there
    are removed: a new study of failed trials left them beside its trials.tsv, to be trained as this one's).
    objective: what a trial's value is, for the plot (empty: its best dev WER)."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    keys = sorted({k for t in trials for k in t.params})
    with open(os.path.join(exp_dir, "trials.tsv"), "w") as f:
        f.write("\t".join(["trial", "state", "objective", "dev_wer", "best_epoch", "minutes_to_best", *keys]) + "\n")
        f.writelines("\t".join(trial_row(t, keys)) + "\n" for t in trials)
    if any(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials):
        plot_study(study, os.path.join(exp_dir, "trials.png"), objective=objective)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(exp_dir, "trials.png"))
    if not any(t.state == TrialState.COMPLETE for t in trials):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(exp_dir, "best.yaml"))
    else:
        text = (f"# steps/tune.py: trial {study.best_trial.number}, dev WER {best_wer(study.best_trial):.2f}% "
                f"(objective {study.best_value:.2f})\n"
                + yaml.safe_dump(with_values(user_config, study.best_trial.params), sort_keys=False))
        write_atomically(os.path.join(exp_dir, "best.yaml"), lambda f: f.write(text))
