"""rnnt.tuning.plot: a study's trials drawn as a real PNG. The figure is caught as it is saved, so that
what each panel plots (each trial's dev WER per epoch against its minutes, the objectives in the order
run, the best so far) is checked point by point, and the file is read back as an image."""

import matplotlib
import numpy as np
import optuna
import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from rnnt.tuning.plot import plot_study

matplotlib.use("Agg")
optuna.logging.set_verbosity(optuna.logging.WARNING)
PNG = b"\x89PNG\r\n\x1a\n"
DISTRIBUTIONS = {"lr": FloatDistribution(1e-4, 1e-2, log=True), "act": CategoricalDistribution(["tanh", "relu"])}


def trial(state, wers, minutes, value=None, lr=1e-3):
    """A trial as steps/tune.py leaves it: the dev WER of each epoch reported, the minutes of each epoch;
    a pruned trial's value is its last report, as Optuna sets it."""
    if state == TrialState.PRUNED:
        value = wers[-1] if wers else None
    return create_trial(state=state, value=value, params={"lr": lr, "act": "tanh"}, distributions=DISTRIBUTIONS,
                        intermediate_values={epoch + 1: wer for epoch, wer in enumerate(wers)},
                        user_attrs={"epoch_minutes": minutes})


@pytest.fixture
def study():
    """Six trials: three complete (trial 3 the best), two pruned, one failed (not drawn)."""
    study = optuna.create_study(study_name="an4-lr", direction="minimize")
    for t in [trial(TrialState.COMPLETE, [60.0, 41.0, 38.0], [0.5, 1.0, 1.6], value=38.0),
              trial(TrialState.PRUNED, [70.0, 66.0], [0.4, 0.9]),
              trial(TrialState.COMPLETE, [55.0, 44.0, 40.0], [0.6, 1.1, 1.7], value=40.0),
              trial(TrialState.COMPLETE, [50.0, 35.0, 31.0, 33.0], [0.5, 1.0, 1.5, 2.1], value=31.0),
              trial(TrialState.FAIL, [], []),
              trial(TrialState.PRUNED, [64.0, 52.0, 58.0], [0.5, 1.0, 1.4, 1.9])]:  # killed after a 4th epoch
        study.add_trial(t)
    return study


@pytest.fixture
def saved(monkeypatch):
    """Every figure saved, caught (it stays readable after plt.close)."""
    figures = []
    original = Figure.savefig

    def savefig(self, *args, **kwargs):
        figures.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return figures


def read_png(path) -> np.ndarray:
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG
    return matplotlib.image.imread(str(path))


def test_the_figure_is_a_png_of_both_panels(study, tmp_path, saved):
    plot_study(study, str(tmp_path / "trials.png"))
    image = read_png(tmp_path / "trials.png")
    assert image.shape[:2] == (450, 1200)  # 12 x 4.5 inches at 100 dpi
    assert len(np.unique(image.reshape(-1, image.shape[2]), axis=0)) > 20  # drawn, not a blank canvas
    (figure,) = saved
    curves, order = figure.axes
    assert figure.get_suptitle() == "study an4-lr: 5 trials"  # complete and pruned; not the failed one
    assert (curves.get_xlabel(), curves.get_ylabel()) == ("training minutes", "dev WER (%)")
    assert (order.get_xlabel(), order.get_ylabel()) == ("trial", "dev WER (%)")


def test_each_trials_curve_is_its_wer_per_epoch_against_its_minutes(study, tmp_path, saved):
    plot_study(study, str(tmp_path / "trials.png"))
    curves = saved[0].axes[0]
    lines = [(list(line.get_xdata()), list(line.get_ydata()), line) for line in curves.get_lines()]
    assert [(x, y) for x, y, _ in lines] == [
        ([0.5, 1.0, 1.6], [60.0, 41.0, 38.0]),
        ([0.4, 0.9], [70.0, 66.0]),
        ([0.6, 1.1, 1.7], [55.0, 44.0, 40.0]),
        ([0.5, 1.0, 1.5, 2.1], [50.0, 35.0, 31.0, 33.0]),
        ([0.5, 1.0, 1.4], [64.0, 52.0, 58.0]),  # minutes of epochs it reported, not the one after
    ]
    styles = [(line.get_linestyle(), line.get_label()) for _, _, line in lines]
    assert [s for s, _ in styles] == ["-", "--", "-", "-", "--"]  # pruned: dashed
    best = lines[3][2]
    assert best.get_label() == "best: trial 3" and best.get_linewidth() == 2.5
    assert to_hex(best.get_color()) == "#000000"
    assert [t.get_text() for t in curves.get_legend().get_texts()] == ["best: trial 3"]


def test_the_order_panel_shows_objectives_pruned_bests_and_the_best_so_far(study, tmp_path, saved):
    plot_study(study, str(tmp_path / "trials.png"))
    order = saved[0].axes[1]
    complete, pruned = (c.get_offsets().tolist() for c in order.collections)
    assert complete == [[0, 38.0], [2, 40.0], [3, 31.0]]
    assert pruned == [[1, 66.0], [5, 52.0]]  # their best epoch, not their last report (58)
    (step,) = order.get_lines()
    assert list(step.get_xdata()) == [0, 2, 3] and list(step.get_ydata()) == [38.0, 38.0, 31.0]
    assert step.get_drawstyle() == "steps-post"
    assert [t.get_text() for t in order.get_legend().get_texts()] == ["complete", "pruned (best epoch)",
                                                                     "best so far"]


def test_another_objective_leaves_out_the_pruned_trials_and_names_the_axis(study, tmp_path, saved):
    """With target_wer the values are minutes to the target: a pruned trial's WER is not comparable."""
    plot_study(study, str(tmp_path / "trials.png"), title="minutes to 40% WER", objective="minutes to target")
    read_png(tmp_path / "trials.png")
    figure = saved[0]
    order = figure.axes[1]
    assert order.get_ylabel() == "minutes to target" and figure.get_suptitle() == "minutes to 40% WER"
    assert [c.get_offsets().tolist() for c in order.collections] == [[[0, 38.0], [2, 40.0], [3, 31.0]]]


def test_a_study_of_pruned_trials_alone_is_drawn_without_a_best(tmp_path, saved):
    study = optuna.create_study(study_name="all-pruned")
    for wers in ([80.0, 75.0], [90.0]):
        study.add_trial(trial(TrialState.PRUNED, wers, [1.0, 2.0]))
    plot_study(study, str(tmp_path / "pruned.png"))
    read_png(tmp_path / "pruned.png")
    curves, order = saved[0].axes
    assert curves.get_legend() is None
    assert all(line.get_linestyle() == "--" for line in curves.get_lines()) and len(curves.get_lines()) == 2
    assert order.collections[0].get_offsets().shape[0] == 0  # no complete trial
    assert order.collections[1].get_offsets().tolist() == [[0, 75.0], [1, 90.0]]


def test_different_studies_give_different_images(study, tmp_path):
    plot_study(study, str(tmp_path / "a.png"))
    study.add_trial(trial(TrialState.COMPLETE, [45.0, 20.0], [0.3, 0.7], value=20.0))
    plot_study(study, str(tmp_path / "b.png"))
    a, b = read_png(tmp_path / "a.png"), read_png(tmp_path / "b.png")
    assert a.shape == b.shape and not np.array_equal(a, b)
