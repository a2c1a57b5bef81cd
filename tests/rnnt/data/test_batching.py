"""rnnt.data.batching: the shuffle and sort buffers, static and dynamic batches, and padding, each alone and
chained as the pipeline chains them; no utterance is ever lost or repeated."""

import random

import pytest
import torch

from rnnt.data import batching


def utterances(n: int, seed: int = 0) -> list[dict]:
    """n records with lengths spread as in speech corpora (0.5 to 20 s of 10 ms frames, stacked by 3)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        frames = rng.randint(50, 2000)
        out.append({"key": f"utt{i:04d}", "num_frames": frames, "input_frames": -(-frames // 3)})
    return out


def keys(records) -> list[str]:
    return [r["key"] for r in records]


# --- shuffle buffer ------------------------------------------------------------------------------------

def test_shuffle_buffer_is_a_seeded_permutation():
    items = [{"i": i} for i in range(100)]
    a = [r["i"] for r in batching.shuffle_buffer(items, 10, random.Random(1))]
    b = [r["i"] for r in batching.shuffle_buffer(items, 10, random.Random(1))]
    assert a == b and sorted(a) == list(range(100)) and a != list(range(100))
    c = [r["i"] for r in batching.shuffle_buffer(items, 10, random.Random(2))]
    assert sorted(c) == list(range(100)) and c != a  # another seed, another order


@pytest.mark.parametrize("size", [0, 1])
def test_a_shuffle_buffer_of_zero_or_one_leaves_the_order(size):
    items = utterances(20)
    out = list(batching.shuffle_buffer(items, size, random.Random(0)))
    assert out == items and all(a is b for a, b in zip(out, items))


def test_the_shuffle_buffer_reads_at_most_its_size_ahead():
    """Output k can only be a record among the first k + size: memory stays at one window, however long the
    list; and the first record comes out as soon as the window is full, not at the end of the list."""
    consumed = []

    def source():
        for record in utterances(300):
            consumed.append(record["key"])
            yield record

    size = 16
    shuffled = batching.shuffle_buffer(source(), size, random.Random(3))
    first = next(shuffled)
    assert len(consumed) == size and first["key"] in consumed
    out = [first, *shuffled]
    indices = [int(r["key"][3:]) for r in out]
    assert sorted(indices) == list(range(300))
    assert all(index <= k + size - 1 for k, index in enumerate(indices))
    assert max(abs(index - k) for k, index in enumerate(indices)) > size // 2  # records really moved


# --- sort buffer ---------------------------------------------------------------------------------------

def test_sort_buffer_alternates_direction():
    items = [{"num_frames": n} for n in [5, 1, 4, 2, 9, 7, 8, 6, 3]]
    out = [r["num_frames"] for r in batching.sort_buffer(items, 4)]
    assert out == [1, 2, 4, 5, 9, 8, 7, 6, 3]


def test_each_window_is_sorted_and_the_last_partial_one_in_the_direction_due():
    items = utterances(110)
    out = list(batching.sort_buffer(items, 25))
    assert sorted(keys(out)) == sorted(keys(items))
    for w, start in enumerate(range(0, 110, 25)):
        window = out[start:start + 25]
        assert sorted(keys(window)) == sorted(keys(items[start:start + 25]))
        frames = [r["num_frames"] for r in window]
        assert frames == sorted(frames, reverse=w % 2 == 1), w  # 4 whole windows, then 10 ascending again


@pytest.mark.parametrize("size", [0, 1])
def test_a_sort_buffer_of_zero_or_one_leaves_the_order(size):
    items = utterances(20)
    assert list(batching.sort_buffer(items, size)) == items


def test_a_sort_buffer_larger_than_the_list_sorts_it_all():
    items = utterances(30)
    out = list(batching.sort_buffer(items, 1000))
    assert [r["num_frames"] for r in out] == sorted(r["num_frames"] for r in items)


# --- batches -------------------------------------------------------------------------------------------

def test_batchers_respect_their_limits():
    items = [{"input_frames": n} for n in [10, 20, 30, 40, 50, 60]]
    assert [len(b) for b in batching.static_batches(items, 4)] == [4, 2]
    dynamic = list(batching.dynamic_batches(items, max_frames=100, max_batch_size=3))
    assert all(max(r["input_frames"] for r in b) * len(b) <= 100 or len(b) == 1 for b in dynamic)
    assert [len(b) for b in dynamic] == [3, 2, 1]


@pytest.mark.parametrize("n,size,expected", [(12, 4, [4, 4, 4]), (13, 4, [4, 4, 4, 1]), (3, 10, [3]), (0, 4, [])])
def test_static_batches_keep_the_order_and_end_with_what_is_left(n, size, expected):
    items = utterances(n)
    batches = list(batching.static_batches(items, size))
    assert [len(b) for b in batches] == expected
    assert [r for b in batches for r in b] == items


@pytest.mark.parametrize("max_frames,max_batch_size", [(4000, 1000), (4000, 5), (500, 1000), (100_000, 64)])
def test_dynamic_batches_are_as_full_as_their_limits_allow(max_frames, max_batch_size):
    """Every batch's padded size (longest x count) is within max_frames unless it is one utterance longer
    than that (kept, never dropped), at most max_batch_size utterances, and full: the next utterance would
    have broken a limit. Together the batches are the records in their order."""
    items = list(batching.sort_buffer(utterances(400, seed=1), 100))
    batches = list(batching.dynamic_batches(items, max_frames, max_batch_size))
    assert [r for b in batches for r in b] == items
    for b, nxt in zip(batches, batches[1:] + [None]):
        padded = max(r["input_frames"] for r in b) * len(b)
        assert padded <= max_frames or len(b) == 1
        assert len(b) <= max_batch_size
        if nxt is not None:
            grown = max(r["input_frames"] for r in b + nxt[:1]) * (len(b) + 1)
            assert grown > max_frames or len(b) == max_batch_size
    if max_frames == 500:
        assert any(b[0]["input_frames"] > 500 for b in batches if len(b) == 1)  # the longest ones alone


def test_dynamic_batches_of_sorted_records_hold_more_utterances():
    """What the sort buffer is for: similar lengths together pad less, so the same frame budget takes more
    utterances a batch."""
    items = utterances(400, seed=2)
    unsorted = list(batching.dynamic_batches(items, 6000, 1000))
    ordered = list(batching.dynamic_batches(batching.sort_buffer(items, 400), 6000, 1000))
    assert len(ordered) < 0.8 * len(unsorted)


def test_the_chain_loses_and_repeats_no_utterance():
    items = utterances(777, seed=4)
    records = batching.shuffle_buffer(iter(items), 100, random.Random(7))
    records = batching.sort_buffer(records, 64)
    dynamic = list(batching.dynamic_batches(records, max_frames=5000, max_batch_size=16))
    assert sorted(keys(r for b in dynamic for r in b)) == keys(items)
    static = list(batching.static_batches(batching.sort_buffer(items, 64), 16))
    assert sorted(keys(r for b in static for r in b)) == keys(items)


# --- padding -------------------------------------------------------------------------------------------

def test_pad_batch():
    batch = batching.pad_batch(["a", "b"], [torch.ones(3, 2), torch.ones(5, 2)], [[4, 5], [6]])
    assert batch["feats"].shape == (2, 5, 2) and batch["feats"][0, 3:].abs().sum() == 0
    assert batch["feat_lens"].tolist() == [3, 5] and batch["token_lens"].tolist() == [2, 1]
    assert batch["tokens"].tolist() == [[4, 5], [6, 0]]


def test_pad_batch_copies_every_frame_and_keeps_keys_texts_and_dtype():
    generator = torch.Generator().manual_seed(0)
    feats = [torch.randn(n, 240, generator=generator).to(torch.float16) for n in (7, 2, 11)]
    batch = batching.pad_batch(["x", "y", "z"], feats, [[3], [5, 6, 7], [2, 2]], ["A", "B C", "D"])
    assert batch["keys"] == ["x", "y", "z"] and batch["texts"] == ["A", "B C", "D"]
    assert batch["feats"].dtype == torch.float16 and batch["feats"].shape == (3, 11, 240)
    for i, f in enumerate(feats):
        assert torch.equal(batch["feats"][i, :len(f)], f) and not batch["feats"][i, len(f):].any()
    assert batch["tokens"].dtype == torch.long and batch["tokens"].tolist() == [[3, 0, 0], [5, 6, 7], [2, 2, 0]]
    assert batch["feat_lens"].dtype == torch.long and batch["feat_lens"].tolist() == [7, 2, 11]


def test_a_batch_of_empty_transcripts_has_one_padding_column():
    batch = batching.pad_batch(["a", "b"], [torch.ones(4, 3), torch.ones(2, 3)], [[], []])
    assert batch["texts"] == [] and batch["tokens"].tolist() == [[0], [0]] and batch["token_lens"].tolist() == [0, 0]
