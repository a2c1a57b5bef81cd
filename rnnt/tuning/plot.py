"""A study's trials as a PNG: each trial's dev WER per epoch against its training minutes (pruned
trials dashed, the best one bold), and each finished trial's objective (its best dev WER, or its minutes
to a target WER) in the order run, with the best so far."""

from __future__ import annotations


def plot_study(study, path: str, title: str = "", objective: str = "") -> None:
    """objective: what a trial's value is (empty: its best dev WER, which pruned trials are shown by too)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.trial import TrialState

    trials = [t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    best = study.best_trial.number if any(t.state == TrialState.COMPLETE for t in trials) else None
    figure, (curves, order) = plt.subplots(1, 2, figsize=(12, 4.5))
    for trial in trials:
        minutes = trial.user_attrs.get("epoch_minutes", [])
        wers = [trial.intermediate_values[e] for e in sorted(trial.intermediate_values)]
        style = {"linestyle": "--", "alpha": 0.5} if trial.state == TrialState.PRUNED else {}
        if trial.number == best:
            style = {"linewidth": 2.5, "color": "black", "label": f"best: trial {best}"}
        curves.plot(minutes[: len(wers)], wers, marker=".", **style)
    curves.set_xlabel("training minutes")
    curves.set_ylabel("dev WER (%)")
    curves.set_title("per epoch (dashed: pruned)")
    if best is not None:
        curves.legend()
    done = [t for t in trials if t.state == TrialState.COMPLETE]  # a pruned trial's value is its last report
    order.scatter([t.number for t in done], [t.value for t in done], label="complete")
    pruned = [t for t in trials if t.state == TrialState.PRUNED and t.intermediate_values]
    if pruned and not objective:  # their best epoch's WER, comparable with a complete trial's value
        order.scatter([t.number for t in pruned], [min(t.intermediate_values.values()) for t in pruned], marker="x",
                      label="pruned (best epoch)")
    running, best_so_far = float("inf"), []
    for t in done:
        running = min(running, t.value)
        best_so_far.append(running)
    order.step([t.number for t in done], best_so_far, where="post", color="black", label="best so far")
    order.set_xlabel("trial")
    order.set_ylabel(objective or "dev WER (%)")
    order.legend()
    for axes in (curves, order):
        axes.grid(alpha=0.3)
    figure.suptitle(title or f"study {study.study_name}: {len(trials)} trials")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
