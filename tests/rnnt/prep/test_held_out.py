"""rnnt.prep.held_out: dev and test sets held out of one list, whole speakers where they fit."""

import pytest

from rnnt.prep.data_dir_writer import Utterance
from rnnt.prep.held_out import hold_out


def corpus(utterances_per_speaker: list[int]) -> list[Utterance]:
    return [Utterance(f"s{k:02d}-{i:03d}", f"s{k:02d}", f"/audio/{k}/{i}.wav", "WORDS")
            for k, count in enumerate(utterances_per_speaker) for i in range(count)]


def test_whole_speakers_when_each_holds_at_most_half_the_size():
    utterances = corpus([5] * 20)
    kept, held, how = hold_out(utterances, 10, seed=3)
    assert len(held) == 10 and how == "10 utterances of 2 whole speakers, seed 3"
    assert not {u.speaker for u in kept} & {u.speaker for u in held}
    assert sorted(kept + held, key=lambda u: u.utt_id) == utterances
    assert hold_out(utterances, 10, seed=3)[1] == held and hold_out(utterances, 10, seed=4)[1] != held


def test_half_the_size_is_the_boundary():
    """Speakers of 5 utterances each: at size 10 a speaker holds half of it (whole speakers); at size 9, more
    than half (utterances at random)."""
    assert "whole speakers" in hold_out(corpus([5] * 6), 10)[2]
    assert hold_out(corpus([7] * 6), 10)[2].startswith("10 utterances at random (too few speakers for whole ones")
    assert hold_out(corpus([5] * 6), 9)[2].startswith("9 utterances at random")


def test_utterances_at_random_when_a_speaker_is_too_big_and_never_all():
    kept, held, how = hold_out(corpus([40, 5, 5]), 10)
    assert len(held) == 10 and how.startswith("10 utterances at random (too few speakers for whole ones: one holds 40")
    kept, held, _ = hold_out(corpus([1] * 4), 3)  # each recording its own speaker
    assert len(held) == 3 and len(kept) == 1
    kept, held, _ = hold_out(corpus([2, 2]), 1)
    assert len(held) == 1 and len(kept) == 3
    assert hold_out(corpus([3]), 0) == (corpus([3]), [], "none held out")
    with pytest.raises(ValueError, match="cannot hold out 3 of 3 utterances"):
        hold_out(corpus([3]), 3)


def test_whole_speakers_never_take_the_last_one():
    kept, held, how = hold_out(corpus([2, 2, 2]), 5)  # a third speaker would leave nothing to train on
    assert len(held) == 4 and len(kept) == 2 and how == "4 utterances of 2 whole speakers, seed 0"


@pytest.mark.parametrize("per_speaker, size", [([1] * 200, 20), ([2] * 60, 6), ([40, 5, 5] * 20, 60)])
def test_an_edited_corpus_keeps_its_held_out_set_but_at_its_edge(per_speaker, size):
    """A recording or speaker added or removed: a seeded shuffle of the sorted names redrew the set (7 of 12
    test utterances stayed, 4 of the old ones went to train: a model trained before scored on its own training
    data). Now each name keeps its place in the order: the set changes by what was edited and the one or two
    names at its edge, for each of 20 edits."""
    utterances = corpus(per_speaker)
    _, held, _ = hold_out(utterances, size)
    for edit in range(20):
        added = [Utterance(f"a{edit:02d}-000", f"a{edit:02d}", "/audio/new.wav", "WORDS")]
        for edited in (utterances + added, utterances[:edit] + utterances[edit + 1:]):
            _, now, _ = hold_out(edited, size)
            edited_names = {f"a{edit:02d}-000", utterances[edit].utt_id, f"a{edit:02d}", utterances[edit].speaker}
            for name in (lambda u: u.speaker, lambda u: u.utt_id):  # whole speakers, utterances
                moved = {name(u) for u in held} ^ {name(u) for u in now}
                assert len(moved - edited_names) <= 2, moved
