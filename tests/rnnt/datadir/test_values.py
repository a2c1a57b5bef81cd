"""rnnt.datadir.values: each value rule on its edges, as Kaldi's validate_data_dir.sh draws them where it has one
(durations > 0, whole frame counts > 0, "200.0" among them, warp factors strictly between 0.5 and 1.5, segment
end > start) and never letting NaN or infinity through, nor what Python reads as a number and awk does not
("1_000", Arabic-Indic digits); segment times name what is wrong; VALUE_RULES gives each file its rule and reads
the fields after the key."""

import pytest

from rnnt.datadir.values import (VALUE_RULES, is_positive_number, is_positive_whole_number, is_warp_factor,
                                 segment_problem)


@pytest.mark.parametrize("value", ["1", "0.01", "2.345", "1e-3", "3E2", "+4", "007.5"])
def test_positive_numbers(value):
    assert is_positive_number(value)


@pytest.mark.parametrize("value", ["0", "0.0", "-0", "-1.5", "-1e-9", "nan", "inf", "-inf", "Infinity", "", "abc",
                                   "1.2.3", "0x10", "1,5", "1_000", "\u0663"])
def test_not_positive_numbers(value):
    assert not is_positive_number(value)


@pytest.mark.parametrize("value,expected", [("1", True), ("250", True), ("007", True), ("200.0", True), ("2e2", True),
                                            ("0", False), ("00", False), ("0.0", False), ("-3", False),
                                            ("3.12", False), ("", False), ("x", False), ("1_0", False),
                                            ("\u00b2", False), ("nan", False), ("inf", False)])
def test_positive_whole_numbers_as_kaldis_awk_reads_them(value, expected):
    assert is_positive_whole_number(value) is expected


@pytest.mark.parametrize("value,expected", [("1", True), ("0.51", True), ("1.49", True), ("0.5", False),
                                            ("1.5", False), ("0.4", False), ("2.0", False), ("nan", False),
                                            ("inf", False), ("fast", False)])
def test_warp_factors_lie_strictly_between_half_and_one_and_a_half(value, expected):
    assert is_warp_factor(value) is expected


@pytest.mark.parametrize("start,end", [("0", "1"), ("0.00", "0.01"), ("12.5", "13"), ("0", "-1"), ("3.2", "-1.0"),
                                       ("0", "1e2")])
def test_valid_segment_times(start, end):
    assert segment_problem(start, end) is None


@pytest.mark.parametrize("start,end", [("1", "1"), ("2.0", "1.5"), ("-0.1", "1"), ("0", "-2"), ("0", "-0.5"),
                                       ("nan", "1"), ("0", "nan"), ("0", "inf"), ("-inf", "1")])
def test_bad_segment_times_are_named(start, end):
    assert segment_problem(start, end) == f"bad segment times {start}..{end}"


def test_segment_times_that_are_not_numbers_are_named():
    assert segment_problem("0", "end") == "start '0' or end 'end' is not a number"
    assert segment_problem("1,5", "2") == "start '1,5' or end '2' is not a number"


@pytest.mark.parametrize("name,fields,valid", [
    ("utt2dur", ["3.12"], True), ("utt2dur", ["0"], False),
    ("reco2dur", ["600.0"], True), ("reco2dur", ["-1"], False),
    ("utt2num_frames", ["312"], True), ("utt2num_frames", ["3.12"], False),
    ("segments", ["rec1", "0.5", "2.0"], True), ("segments", ["rec1", "2.0", "0.5"], False),
    ("segments", ["rec1", "0", "-1"], True),
    ("utt2warp", ["1.1"], True), ("utt2warp", ["1.5"], False),
    ("spk2warp", ["0.9"], True), ("spk2warp", ["0.5"], False),
])
def test_each_file_gets_its_rule_on_the_fields_after_the_key(name, fields, valid):
    check, _ = VALUE_RULES[name]
    assert check(fields) is valid


def test_the_rules_cover_kaldis_numeric_files_and_say_what_is_valid():
    assert {name: what for name, (_, what) in VALUE_RULES.items()} == {
        "utt2dur": "a positive number", "reco2dur": "a positive number", "utt2num_frames": "a positive whole number",
        "segments": "0 <= start < end", "utt2warp": "a warp factor between 0.5 and 1.5",
        "spk2warp": "a warp factor between 0.5 and 1.5"}
