"""rnnt.training.accumulation: a gradient group counts its micro-batches and whether one was synced until
taken or dropped; skipped batches are counted per reason, stop training at the limit in a row (and only
in a row), survive a checkpoint's meta, and an out-of-memory error is told from other runtime errors."""

import pytest
import torch

from rnnt.training.accumulation import REASONS, BadBatches, GradientGroup, is_out_of_memory
from rnnt.training.stop import StopTraining


def test_a_group_counts_its_batches_and_is_synced_if_any_one_was():
    group = GradientGroup()
    group.add(synced=False)
    assert (group.kept, group.synced) == (1, False)
    group.add(synced=True)
    group.add(synced=False)  # a later unsynced batch does not undo the sync
    assert (group.kept, group.synced) == (3, True)


def test_take_hands_over_the_group_and_starts_an_empty_one():
    group = GradientGroup()
    for synced in (False, False, True):
        group.add(synced)
    taken = group.take()
    assert (taken.kept, taken.synced) == (3, True)
    assert (group.kept, group.synced) == (0, False)
    group.add(synced=False)  # the taken group is a copy: the new one does not change it
    assert (taken.kept, taken.synced, group.kept) == (3, True, 1)


def test_drop_forgets_the_group():
    group = GradientGroup()
    group.add(synced=True)
    group.add(synced=True)
    group.drop()
    assert group == GradientGroup()
    assert group.take() == GradientGroup(0, False)


def test_skipped_batches_are_counted_per_reason_and_in_a_row():
    bad = BadBatches(limit=10)
    for reason in ("non-finite loss", "out of memory", "non-finite loss"):
        bad.skip(reason)
    assert bad.counts == {"non-finite loss": 2, "non-finite gradient": 0, "out of memory": 1}
    assert bad.in_row == 3
    assert bad.summary() == "skipped 2 non-finite loss, 0 non-finite gradient, 1 out of memory"


def test_the_limit_in_a_row_stops_training_with_what_to_do():
    bad = BadBatches(limit=3)
    bad.skip("non-finite gradient")
    bad.skip("non-finite gradient")
    with pytest.raises(StopTraining, match=r"^3 batches in a row had a non-finite loss .*raise train\.max_bad_steps$"):
        bad.skip("non-finite loss")
    assert bad.counts["non-finite loss"] == 1  # counted before stopping


def test_an_optimiser_step_ends_the_row_but_not_the_counts():
    bad = BadBatches(limit=2)
    for _ in range(5):  # 5 bad batches, never 2 in a row
        bad.skip("out of memory")
        bad.step_taken()
    assert bad.in_row == 0 and bad.counts["out of memory"] == 5


def test_an_unknown_reason_is_refused():
    with pytest.raises(KeyError):
        BadBatches(limit=5).skip("nan")


def test_meta_round_trips_through_a_checkpoint():
    bad = BadBatches(limit=10)
    for reason in ("non-finite loss", "non-finite gradient", "non-finite gradient", "out of memory"):
        bad.skip(reason)
    meta = bad.meta()
    assert meta == {"bad_in_row": 4, "skipped non-finite loss": 1, "skipped non-finite gradient": 2,
                    "skipped out of memory": 1}
    resumed = BadBatches(limit=10)
    resumed.load_meta({**meta, "step": 120, "epoch": 3})  # the rest of a checkpoint's meta is ignored
    assert (resumed.in_row, resumed.counts) == (4, bad.counts)
    assert resumed.summary() == bad.summary()


def test_meta_without_a_reason_counts_it_as_zero():
    """A checkpoint written before a reason existed resumes with that reason at 0."""
    bad = BadBatches(limit=10)
    bad.load_meta({"bad_in_row": 1, "skipped non-finite loss": 7})
    assert bad.counts == {"non-finite loss": 7, "non-finite gradient": 0, "out of memory": 0}
    assert list(bad.counts) == list(REASONS)


def test_out_of_memory_is_told_from_other_errors():
    assert is_out_of_memory(torch.OutOfMemoryError("Tried to allocate 2.00 GiB"))  # by its type
    # a plain RuntimeError that says so (as errors raised inside cuDNN or NCCL calls do)
    assert is_out_of_memory(RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR: out of memory"))
    assert not is_out_of_memory(RuntimeError("CUDA error: device-side assert triggered"))
    with pytest.raises(RuntimeError) as host:  # the host's failed allocation, as torch on the CPU words it
        torch.empty(2**62, dtype=torch.uint8)
    assert is_out_of_memory(host.value), str(host.value)
    assert not is_out_of_memory(ValueError("logit_lengths must be >= 1"))

