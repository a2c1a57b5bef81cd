"""rnnt.training.patience: the epochs since the best dev result, as a run and its resumes count them."""

from rnnt.training.patience import Patience


def test_a_better_epoch_starts_the_count_again_and_an_equal_one_does_not():
    patience = Patience(2, use_wer=True)
    ends = []
    for epoch, wer in enumerate([30.0, 25.0, 25.0, 24.0, 24.5, 24.0, 26.0], 1):
        patience.validated(epoch, {"valid_loss": 1.0, "valid_wer": wer})
        ends.append(patience.ends(epoch))
    assert ends == [False, False, False, False, False, True, True]
    assert patience.why(6) == ("no better dev WER in the 2 epochs since epoch 4 (24%): training ends "
                               "(train.patience 2)")


def test_the_best_is_kept_in_a_checkpoints_meta_and_another_metric_counts_anew():
    before = Patience(3, use_wer=True)
    before.validated(1, {"valid_loss": 2.0, "valid_wer": 40.0})
    before.validated(2, {"valid_loss": 1.5, "valid_wer": 41.0})
    resumed = Patience(3, use_wer=True)
    resumed.load_meta({"step": 12, **before.meta()})
    assert resumed.best == before.best and not resumed.ends(3) and resumed.ends(4)
    by_loss = Patience(3, use_wer=False)  # train.valid_wer switched off on a resume: the loss counts from now
    by_loss.load_meta(before.meta())
    assert not by_loss.ends(10)  # the WER's best does not end a run counting the loss
    by_loss.validated(3, {"valid_loss": 1.7})
    assert (by_loss.best.epoch, by_loss.best.metric) == (3, "valid_loss") and not by_loss.ends(5)
    assert Patience(0, use_wer=True).meta() == {} and not Patience(0, True).ends(100)


def test_a_dev_loss_that_is_not_finite_is_no_best_and_a_nan_best_kept_from_before_is_bettered():
    """NaN < anything is false: a first epoch's NaN stayed the best, and training ended patience epochs later while
    the dev loss fell."""
    patience = Patience(2, use_wer=False)
    for epoch, loss in enumerate([float("nan"), 40.0, float("inf"), 30.0], 1):
        patience.validated(epoch, {"valid_loss": loss})
    assert (patience.best.epoch, patience.best.value) == (4, 30.0) and not patience.ends(5)
    resumed = Patience(2, use_wer=False)
    resumed.load_meta({"best_valid": {"epoch": 1, "metric": "valid_loss", "value": float("nan")}})
    resumed.validated(2, {"valid_loss": 40.0})
    assert resumed.best.epoch == 2 and not resumed.ends(3)


def test_a_result_on_another_dev_set_is_the_best_then_whatever_the_value():
    """The dev list edited on a resume: epoch 1's WER on the first set is not compared with the second's (before,
    an easier first set kept epoch 1 the best, and training ended after epoch 3). A best kept before dev sets were
    recorded is taken to be of the same one."""
    patience = Patience(2, use_wer=True)
    patience.validated(1, {"valid_wer": 10.0, "valid_dev_set": "8-a1"})
    patience.validated(2, {"valid_wer": 30.0, "valid_dev_set": "9-b2"})
    patience.validated(3, {"valid_wer": 31.0, "valid_dev_set": "9-b2"})
    assert (patience.best.epoch, patience.best.dev_set) == (2, "9-b2") and not patience.ends(3)
    patience.validated(4, {"valid_wer": 32.0, "valid_dev_set": "9-b2"})
    assert patience.ends(4)
    resumed = Patience(2, use_wer=True)
    resumed.load_meta({"best_valid": {"epoch": 1, "metric": "valid_wer", "value": 10.0}})  # from before 12-02
    resumed.validated(2, {"valid_wer": 30.0, "valid_dev_set": "9-b2"})
    assert resumed.best.epoch == 1 and not resumed.ends(2) and resumed.ends(3)
