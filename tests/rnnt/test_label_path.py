"""Label paths (rnnt.label_path): equal exactly when their labels are, whatever their frames, their route or
their hashes; and the host-side searches spell labels out only for the hypotheses they return."""

import itertools
import random
import sys

import pytest
import torch

from rnnt import label_path
from rnnt.ctc_search import ctc_prefix_beam_search
from rnnt.label_path import LabelPath
from rnnt.lm.fusion import NgramScorer, ShallowFusion
from rnnt.lm.kneser_ney import estimate
from rnnt.modified_beam_search_lm import modified_beam_search_lm
from rnnt.search import beam_search
from search_reference import encoder_output, random_model


def path_of(labels, frames=None) -> LabelPath:
    path = LabelPath()
    for label, frame in zip(labels, frames or range(len(labels))):
        path = path.extended(label, frame)
    return path


def test_paths_of_the_same_labels_are_equal_whatever_their_frames_or_route():
    common = path_of([3, 1])
    one, other = common.extended(4, 7), path_of([3, 1, 4], [0, 5, 9])
    assert one == other and hash(one) == hash(other) and len(one) == 3
    assert {one: "first"}[other] == "first"
    assert one.tokens() == [3, 1, 4] and one.frames() == [0, 1, 7] and other.frames() == [0, 5, 9]
    assert one.last(2) == (1, 4) and one.last(5) == (3, 1, 4) and LabelPath().last(2) == ()
    assert one != common and one != path_of([3, 1, 5]) and path_of([1, 3, 4]) != one and LabelPath() == LabelPath()
    assert path_of(["WE", "SAW"]) == LabelPath().extended("WE").extended("SAW")  # words as labels


def test_equal_hashes_of_different_labels_are_told_apart(monkeypatch):
    monkeypatch.setattr(label_path, "HASH_MODULUS", 7)  # every path hashes to one of 7 values
    sequences = list(itertools.product(range(4), repeat=3))
    paths = {path_of(labels): labels for labels in sequences}
    assert len(paths) == len(sequences) and len({hash(p) for p in paths}) <= 7
    for labels in sequences:  # each found by a path built apart, from another route
        assert paths[LabelPath().extended(labels[0], 9).extended(labels[1], 9).extended(labels[2], 9)] == labels


def test_a_path_of_300000_labels_is_compared_spelt_and_freed():
    one, other = path_of([1] * 3 * 10**5), path_of([1] * 3 * 10**5)
    assert one == other and one != other.extended(2, 0)
    assert len(one.tokens()) == 3 * 10**5 and sys.getrecursionlimit() < 3 * 10**5
    del one, other  # freeing the chain does not recurse its length deep


@pytest.fixture
def spelling_counter(monkeypatch):
    calls = []
    nodes = LabelPath._nodes
    monkeypatch.setattr(LabelPath, "_nodes", lambda self: calls.append(self) or nodes(self))
    return calls


@pytest.mark.parametrize("search", ["beam", "beam_lm", "modified_beam_lm", "ctc_prefix", "ctc_prefix_lm"])
def test_the_searches_spell_out_labels_only_for_the_hypotheses_they_return(search, spelling_counter):
    vocab = 12
    units = [f"u{i}" for i in range(1, vocab)]
    rng = random.Random(0)
    lm = NgramScorer(estimate([[rng.choice(units) for _ in range(12)] for _ in range(50)], 3, units),
                     dict(enumerate(["<blank>"] + units)), "test")
    fusion = ShallowFusion(lm, 0.3) if search.endswith("_lm") else None
    model = random_model(0, "stateless", search == "modified_beam_lm", vocab_size=vocab, ctc_weight=0.3)
    with torch.no_grad():
        model.joiner.output.bias[model.blank] = -1.0  # labels in many frames
    frames = 200
    enc = encoder_output(0, model, frames)
    if search.startswith("ctc"):
        hyps = ctc_prefix_beam_search(model, enc[0], frames, 4, fusion)
    elif search == "modified_beam_lm":
        hyps = modified_beam_search_lm(model, enc, torch.tensor([frames]), 4, fusion)[0]
    else:
        hyps = beam_search(model, enc[0], frames, 4, fusion=fusion)
    assert len(hyps) == 4 and len(hyps[0].tokens) >= 10
    assert len(spelling_counter) == 2 * len(hyps)  # its labels and its frames, each once
