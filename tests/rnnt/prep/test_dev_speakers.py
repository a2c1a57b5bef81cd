"""rnnt.prep.dev_speakers.pick_dev_speakers: count speakers, half women (the odd one a woman) and half
others, at even steps through each sorted group; worked by hand, and on the real AN4 training speakers
as the AN4 recipe splits them; the same set whatever the order of the input."""

import random

import pytest

from rnnt.prep.dev_speakers import pick_dev_speakers

WOMEN = ["fa", "fb", "fc", "fd", "fe"]
MEN = ["ma", "mb", "mc", "md", "me", "mf"]


def an4_train_speakers(test_data) -> list[str]:
    """The speaker folders of an4_train.fileids (an4_clstk/<speaker>/<utterance>)."""
    fileids = (test_data / "an4" / "etc" / "an4_train.fileids").read_text().split()
    return sorted({fileid.split("/")[1] for fileid in fileids})


def test_five_of_five_women_and_six_men_by_hand():
    # women: 3 of 5 at k * 5 // 3 = 0, 1, 3; men: 2 of 6 at k * 6 // 2 = 0, 3
    assert pick_dev_speakers(WOMEN + MEN, set(WOMEN), 5) == {"fa", "fb", "fd", "ma", "md"}


def test_an_even_count_is_half_each_spread_over_the_group():
    # 2 of 5 women at 0, 2; 2 of 6 men at 0, 3
    assert pick_dev_speakers(WOMEN + MEN, set(WOMEN), 4) == {"fa", "fc", "ma", "md"}
    # 3 of 6 men at 0, 2, 4: every other one
    assert pick_dev_speakers(WOMEN + MEN, set(WOMEN), 6) & set(MEN) == {"ma", "mc", "me"}


def test_one_speaker_is_the_first_woman():
    assert pick_dev_speakers(MEN + WOMEN, set(WOMEN), 1) == {"fa"}


def test_zero_picks_nobody_and_every_speaker_or_more_is_refused():
    """Every speaker in dev left none to train on: the data prep said 'train: no usable utterances'."""
    assert pick_dev_speakers(WOMEN + MEN, set(WOMEN), 0) == set()
    assert len(pick_dev_speakers(WOMEN + MEN, set(WOMEN), 10)) == 10
    for count in (11, 40):
        with pytest.raises(ValueError, match=f"{count} dev speakers of the 11 training speakers leave none to train"):
            pick_dev_speakers(WOMEN + MEN, set(WOMEN), count)


def test_women_who_are_not_speakers_are_ignored():
    women = set(WOMEN) | {"fz", "fy"}  # e.g. the corpus's women, of whom some are only in the test set
    assert pick_dev_speakers(WOMEN + MEN, women, 5) == pick_dev_speakers(WOMEN + MEN, set(WOMEN), 5)


def test_the_input_order_does_not_change_the_pick():
    speakers = WOMEN + MEN
    expected = pick_dev_speakers(speakers, set(WOMEN), 7)
    for seed in range(5):
        shuffled = speakers[:]
        random.Random(seed).shuffle(shuffled)
        assert pick_dev_speakers(shuffled, set(WOMEN), 7) == expected


def test_an4_training_speakers_as_the_recipe_splits_them(test_data):
    speakers = an4_train_speakers(test_data)
    women = sorted(s for s in speakers if s.startswith("f"))
    men = sorted(s for s in speakers if not s.startswith("f"))
    assert len(women) >= 4 and len(men) >= 4 and len(speakers) == len(women) + len(men)
    picked = pick_dev_speakers(speakers, set(women), 8)
    assert len(picked) == 8
    for group in (women, men):
        positions = [i for i, speaker in enumerate(group) if speaker in picked]
        assert len(positions) == 4 and positions[0] == 0  # half each, from the group's first speaker
        steps = {b - a for a, b in zip(positions, positions[1:])}
        assert steps <= {len(group) // 4, -(-len(group) // 4)}, (group, positions)  # evenly spread


def test_a_short_group_is_made_up_by_the_other():
    women, men = ["fa", "fb"], [f"m{i:02d}" for i in range(20)]
    picked = pick_dev_speakers(women + men, set(women), 8)
    assert len(picked) == 8 and set(women) <= picked  # both women, and six men instead of four
    assert picked - set(women) == {"m00", "m03", "m06", "m10", "m13", "m16"}  # spread over the men
    assert len(pick_dev_speakers(men, set(), 5)) == 5  # no women at all
