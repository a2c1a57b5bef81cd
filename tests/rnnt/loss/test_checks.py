"""rnnt.loss.checks, called directly: every bad argument is refused with the exact message that names it (dtypes,
shapes, batch sizes, lengths and the dimension they overrun, blank, targets, packed rows, devices), the limits
themselves pass (length == size, target_length == logit_length, blank -V), padding past target_lengths is never
read, packed rows are counted in 64 bits, and off the CPU a check never reads the device: it hands the condition
and its short message to torch._assert_async."""

import re

import numpy as np
import pytest
import torch

from rnnt import host_reads
from rnnt.loss import checks
from rnnt.loss.checks import (check_inside, check_lengths, check_logits, check_one_symbol_per_frame, check_reduction,
                              check_symbols, check_values, require)

TARGETS = torch.tensor([[1, 2, 3], [4, 1, 0]])


def refused(error, message, check, *args, **kwargs):
    with pytest.raises(error, match=re.escape(message) + "$"):
        check(*args, **kwargs)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_reductions_accepted(reduction):
    assert check_reduction(reduction) is None


def test_an_unknown_reduction_is_named_with_the_choices():
    refused(ValueError, "reduction must be one of ('mean', 'sum', 'none'), got 'avg'", check_reduction, "avg")


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_lengths_give_the_batch_size(dtype):
    assert check_lengths(TARGETS.to(dtype), torch.tensor([5, 1], dtype=dtype), torch.tensor([3, 0]), batch=2) == 2
    assert check_lengths(torch.zeros(3, 0, dtype=dtype), torch.tensor([1, 2, 3]), torch.zeros(3, dtype=dtype)) == 3


def test_lengths_dtypes_are_named():
    refused(TypeError, "targets, logit_lengths and target_lengths must be int32 or int64, got torch.float32, "
            "torch.int64, torch.int16", check_lengths, TARGETS.float(), torch.tensor([3, 3]),
            torch.tensor([2, 2], dtype=torch.int16))


def test_lengths_shapes_are_named():
    refused(ValueError, "expected targets (B, U), logit_lengths (B,), target_lengths (B,); got shapes (6,), (2,), "
            "(2, 1)", check_lengths, TARGETS.flatten(), torch.tensor([3, 3]), torch.tensor([[2], [2]]))


def test_batch_sizes_that_differ_are_listed():
    refused(ValueError, "batch sizes differ: targets 2, logit_lengths 3, target_lengths 2", check_lengths, TARGETS,
            torch.tensor([3, 3, 3]), torch.tensor([2, 2]))
    refused(ValueError, "batch sizes differ: targets 2, logit_lengths 2, target_lengths 2, logits 5", check_lengths,
            TARGETS, torch.tensor([3, 3]), torch.tensor([2, 2]), batch=5)
    refused(ValueError, "batch sizes differ: targets 2, logit_lengths 2, target_lengths 2, logits 0", check_lengths,
            TARGETS, torch.tensor([3, 3]), torch.tensor([2, 2]), batch=0)  # logits of an empty batch


def test_an_empty_batch_is_refused():
    refused(ValueError, "empty batch", check_lengths, torch.zeros(0, 2, dtype=torch.long),
            torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long))


def test_bad_lengths_are_listed():
    refused(ValueError, "logit_lengths must be >= 1, got [3, 0]", check_values, TARGETS, torch.tensor([3, 0]),
            torch.tensor([2, 2]), 5, 0, None)
    refused(ValueError, "target_lengths must be >= 0, got [2, -1]", check_values, TARGETS, torch.tensor([3, 3]),
            torch.tensor([2, -1]), 5, 0, None)
    refused(ValueError, "target_lengths max 4 exceeds targets.shape[1] = 3", check_values, TARGETS,
            torch.tensor([3, 3]), torch.tensor([4, 2]), 5, 0, None)
    refused(ValueError, "logit_lengths max 4 exceeds logits.shape[1] = 3", check_values, TARGETS,
            torch.tensor([3, 4]), torch.tensor([2, 2]), 5, 0, (3, "logits.shape[1]"))


def test_a_length_may_fill_its_dimension_but_not_overrun_it():
    check_inside(torch.tensor([2, 7]), "logit_lengths", 7, "logits.shape[1]")
    check_inside(torch.tensor([2, 6]), "target_lengths", 7, "logits.shape[2]", extra=1)
    refused(ValueError, "logit_lengths max 8 exceeds logits.shape[1] = 7", check_inside, torch.tensor([8, 2]),
            "logit_lengths", 7, "logits.shape[1]")
    refused(ValueError, "target_lengths max 7 needs logits.shape[2] >= 8, got 7", check_inside, torch.tensor([2, 7]),
            "target_lengths", 7, "logits.shape[2]", extra=1)


def test_require_on_the_cpu_raises_the_detailed_message_only_when_false():
    require(torch.tensor(True), "short", lambda: pytest.fail("built a message for a condition that holds"))
    refused(ValueError, "long, with values", require, torch.tensor(False), "short", lambda: "long, with values")
    refused(ValueError, "short", require, torch.tensor(False), "short")


def test_off_the_cpu_a_check_hands_its_condition_to_the_device(monkeypatch):
    """The host neither reads the condition nor builds the detailed message (both would wait for the device)."""
    asserted = []
    monkeypatch.setattr(host_reads, "free", lambda device: False)
    # a device Triton does not run on
    monkeypatch.setattr(checks, "bookkeeping_in_triton", lambda device, backend="auto": False)
    monkeypatch.setattr(torch, "_assert_async", lambda condition, message: asserted.append((condition, message)))
    condition = torch.tensor(False)
    require(condition, "logit_lengths must be >= 1", lambda: pytest.fail("read the device"))
    assert asserted == [(condition, "logit_lengths must be >= 1")]
    asserted.clear()
    check_values(TARGETS, torch.tensor([3, 0]), torch.tensor([2, 9]), 5, 0, None)  # nothing raised on the host
    assert [message for _, message in asserted] == ["logit_lengths must be >= 1", "target_lengths must be >= 0",
                                                    "target_lengths exceed targets.shape[1] = 3",
                                                    "targets must lie in [0, 5)",
                                                    "the blank symbol 0 appears inside the targets"]
    assert [bool(condition) for condition, _ in asserted] == [False, True, False, True, False]


@pytest.fixture
def kernel_asserts(monkeypatch, device_asserts):
    """The GPU's path on the CPU: the check kernel in Triton's interpreter, its asserts on (conftest.py)."""
    pytest.importorskip("triton")
    if torch.cuda.is_available():
        pytest.skip("Triton runs CPU tensors in its interpreter only, off where CUDA is")
    monkeypatch.setattr(host_reads, "free", lambda device: False)
    assert checks.bookkeeping_in_triton(torch.device("cpu")), "tests run Triton in its interpreter (conftest.py)"
    monkeypatch.setattr(torch, "_assert_async", lambda *args: pytest.fail("a PyTorch check: not one launch"))


BAD_VALUES = [  # (targets, logit_lengths, target_lengths, one_sym_per_frame), the kernel's message
    ((TARGETS, [3, 0], [2, 2], False), "logit_lengths must be >= 1"),
    ((TARGETS, [3, 3], [2, -1], False), "target_lengths must be >= 0"),
    ((TARGETS, [3, 3], [4, 2], False), "target_lengths exceed targets.shape[1]"),
    ((TARGETS, [5, 3], [2, 2], False), "logit_lengths exceed logits.shape[1]"),
    ((torch.tensor([[1, 2, 3, 4]] * 2), [3, 3], [4, 2], False), "target_lengths + 1 exceed logits.shape[2]"),
    ((TARGETS, [3, 1], [2, 2], True), "one_sym_per_frame needs target_length <= logit_length"),
    ((torch.tensor([[1, 2, 5], [4, 1, 1]]), [3, 3], [3, 2], False), "targets must lie in [0, 5)"),
    ((torch.tensor([[1, 2, 3], [4, -1, 1]]), [3, 3], [3, 2], False), "targets must lie in [0, 5)"),
    ((TARGETS, [3, 3], [2, 3], False), "the blank symbol 0 appears inside the targets"),
]


@pytest.mark.parametrize("values,message", BAD_VALUES)
def test_off_the_cpu_one_kernel_checks_every_value_with_its_own_message(kernel_asserts, monkeypatch, values,
                                                                        message):
    from triton.runtime.errors import InterpreterError

    targets, logit_lengths, target_lengths, one_sym = values
    args = (targets, torch.tensor(logit_lengths), torch.tensor(target_lengths), 5, 0, (4, "logits.shape[1]"),
            (4, "logits.shape[2]"), one_sym)
    with pytest.raises(InterpreterError, match=re.escape(f"AssertionError('{message}')")):
        check_values(*args)
    monkeypatch.setattr(host_reads, "free", lambda device: True)
    with pytest.raises(ValueError):  # where the host reads for free, the same values are refused in PyTorch
        check_values(*args)


def test_the_kernel_passes_the_limits_and_reads_nothing_past_the_lengths(kernel_asserts):
    targets = torch.tensor([[1, 2, 3, 4], [4, 99, 0, -7], [1, 1, 1, 1]], dtype=torch.int32)  # past: bad, unread
    lengths = dict(logit_lengths=torch.tensor([4, 1, 4], dtype=torch.int32), target_lengths=torch.tensor([4, 1, 3]))
    assert check_values(targets, *lengths.values(), 5, -5, (4, "logits.shape[1]"), (5, "logits.shape[2]"),
                        True) == 0
    assert check_values(targets[:, :0], torch.tensor([1, 1, 1]), torch.tensor([0, 0, 0]), 5, -1, None) == 4
    strided = torch.tensor([[1, 0, 3, 0], [4, 0, 0, 0], [0, 0, 0, 0]])[:, ::2]  # read past a blank each step
    assert check_values(strided, torch.tensor([1, 1, 1]), torch.tensor([2, 1, 0]), 5, 0, None) == 0


def test_off_the_cpu_the_device_raises_the_short_message(monkeypatch):
    """(torch._assert_async fails at once on the CPU; on a GPU at the next synchronisation.)"""
    monkeypatch.setattr(host_reads, "free", lambda device: False)
    with pytest.raises(RuntimeError, match=re.escape("packed logits need sum(T_b * (U_b + 1)) rows, got 12") + "$"):
        check_logits(torch.zeros(12, 5), LENGTHS["targets"], LENGTHS["logit_lengths"], LENGTHS["target_lengths"], 0,
                     False)
    with pytest.raises(RuntimeError, match="^one_sym_per_frame needs target_length <= logit_length$"):
        check_one_symbol_per_frame(torch.tensor([3, 2]), torch.tensor([3, 3]))


@pytest.mark.parametrize("blank,vocab,normalised", [(0, 5, 0), (4, 5, 4), (-1, 5, 4), (-5, 5, 0), (-2, 7, 5)])
def test_blank_is_normalised(blank, vocab, normalised):
    targets = torch.tensor([[1, 2], [3, 1]]) if normalised == 0 else torch.tensor([[0, 1], [2, 3]])
    assert check_symbols(targets, torch.tensor([2, 2]), blank, vocab) == normalised


@pytest.mark.parametrize("blank", [5, 6, -6])
def test_blank_out_of_range_is_named(blank):
    refused(ValueError, f"blank {blank} is out of range for a vocabulary of 5", check_symbols, TARGETS,
            torch.tensor([3, 2]), blank, 5)


@pytest.mark.parametrize("blank", [np.int64(4), torch.tensor(4), torch.tensor(-1)])
def test_a_numpy_or_tensor_blank_is_taken_as_its_int(blank):
    """The torch backend took them; Triton's kernels refused a numpy integer, and a 0-d tensor as a pointer."""
    normalised = check_symbols(torch.tensor([[1, 2]]), torch.tensor([2]), blank, 5)
    assert normalised == 4 and type(normalised) is int


@pytest.mark.parametrize("blank", [1.5, torch.tensor(1.0), "0"])
def test_a_blank_that_is_no_whole_number_is_refused_by_name(blank):
    with pytest.raises(TypeError, match=r"^blank must be a whole number \(a symbol's index\), got "):
        check_symbols(TARGETS, torch.tensor([3, 2]), blank, 5)


def test_targets_past_their_lengths_are_not_read():
    targets = torch.tensor([[1, 99, -7], [0, 4, 4]])  # past the lengths: out of range, and the blank 0 at [1, 0]
    assert check_symbols(targets, torch.tensor([1, 0]), 0, 5) == 0
    assert check_symbols(torch.zeros(2, 0, dtype=torch.long), torch.tensor([0, 0]), -1, 5) == 4


def test_targets_out_of_the_vocabulary_name_the_range_used():
    refused(ValueError, "targets must lie in [0, 5), got values from 1 to 99", check_symbols,
            torch.tensor([[1, 99, -7], [2, 4, 4]]), torch.tensor([2, 3]), 0, 5)
    refused(ValueError, "targets must lie in [0, 5), got values from -7 to 99", check_symbols,
            torch.tensor([[1, 99, -7], [2, 4, 4]]), torch.tensor([3, 3]), 0, 5)


def test_the_blank_inside_the_targets_names_the_first_utterance_holding_it():
    targets = torch.tensor([[1, 2, 3], [1, 4, 2], [3, 4, 4], [4, 3, 4]])  # 4 at [1, 1] is past its length
    refused(ValueError, "the blank symbol 4 appears inside the targets of utterance 2", check_symbols, targets,
            torch.tensor([3, 1, 3, 1]), -1, 5)


def test_one_symbol_per_frame_allows_as_many_targets_as_frames():
    check_one_symbol_per_frame(torch.tensor([3, 2, 1]), torch.tensor([3, 0, 1]))
    refused(ValueError, "one_sym_per_frame needs target_length <= logit_length; utterance 1 has 3 targets for 2 "
            "frames", check_one_symbol_per_frame, torch.tensor([3, 2, 1]), torch.tensor([3, 3, 2]))


LENGTHS = dict(targets=torch.tensor([[1, 2], [3, 0]]), logit_lengths=torch.tensor([3, 2]),
               target_lengths=torch.tensor([2, 1]))


def logits_check(logits, blank=0, one_sym_per_frame=False, **override):
    args = {**LENGTHS, **override}
    return check_logits(logits, args["targets"], args["logit_lengths"], args["target_lengths"], blank,
                        one_sym_per_frame)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_padded_and_packed_logits_pass_and_give_the_blank(dtype):
    assert logits_check(torch.zeros(2, 3, 3, 5, dtype=dtype), blank=-1) == 4
    assert logits_check(torch.zeros(3 * 3 + 2 * 2, 5, dtype=dtype)) == 0  # sum T_b * (U_b + 1) rows
    assert logits_check(torch.zeros(2, 3, 3, 5, dtype=dtype), one_sym_per_frame=True) == 0


def test_logits_of_another_type_are_named():
    refused(TypeError, "logits must be a float16, bfloat16, float32 or float64 tensor, got <class 'list'>",
            logits_check, [[0.0] * 5] * 13)
    refused(TypeError, "logits must be a float16, bfloat16, float32 or float64 tensor, got torch.int64",
            logits_check, torch.zeros(13, 5, dtype=torch.long))


@pytest.mark.parametrize("name", ["targets", "logit_lengths", "target_lengths"])
def test_a_tensor_on_another_device_than_the_logits_is_named(name):
    refused(ValueError, f"{name} is on meta but logits are on cpu", logits_check, torch.zeros(2, 3, 3, 5),
            **{name: LENGTHS[name].to("meta")})


def test_padded_logits_too_small_or_of_another_batch_are_named():
    refused(ValueError, "logit_lengths max 3 exceeds logits.shape[1] = 2", logits_check, torch.zeros(2, 2, 3, 5))
    refused(ValueError, "target_lengths max 2 needs logits.shape[2] >= 3, got 2", logits_check,
            torch.zeros(2, 3, 2, 5))
    refused(ValueError, "batch sizes differ: targets 2, logit_lengths 2, target_lengths 2, logits 3", logits_check,
            torch.zeros(3, 3, 3, 5))


def test_packed_logits_of_another_row_count_are_named():
    refused(ValueError, "packed logits need sum(T_b * (U_b + 1)) = 13 rows, got 14", logits_check, torch.zeros(14, 5))


def test_packed_rows_are_counted_past_int32():
    """50000 frames x 50000 + 1 target positions: 2,500,050,000 rows, beyond int32, in a stride-0 view."""
    T, U = torch.tensor([50000], dtype=torch.int32), torch.tensor([49999], dtype=torch.int32)
    targets = torch.ones(1, 49999, dtype=torch.int32)
    logits = torch.zeros(1, 5).expand(50000 * 50000, 5)
    assert check_logits(logits, targets, T, U, 0, False) == 0
    refused(ValueError, f"packed logits need sum(T_b * (U_b + 1)) = {50000 * 50000} rows, got {50000 * 50000 - 1}",
            check_logits, logits[1:], targets, T, U, 0, False)


def test_logits_of_another_rank_are_named():
    refused(ValueError, "logits must be padded (B, T, U+1, V) or packed (sum T_b*(U_b+1), V); got shape (2, 3, 5)",
            logits_check, torch.zeros(2, 3, 5))


def test_one_symbol_per_frame_and_the_targets_are_checked_against_the_logits():
    refused(ValueError, "one_sym_per_frame needs target_length <= logit_length; utterance 0 has 2 targets for 1 "
            "frames", logits_check, torch.zeros(2, 3, 3, 5), one_sym_per_frame=True,
            logit_lengths=torch.tensor([1, 2]))
    refused(ValueError, "targets must lie in [0, 3), got values from 1 to 3", logits_check, torch.zeros(2, 3, 3, 3))
