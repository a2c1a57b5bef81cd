"""Rules for the values of data-dir files that hold numbers; shared by validation and repair."""

from __future__ import annotations

import math


def is_positive_number(value: str) -> bool:
    if "_" in value or not value.isascii():  # Python's float reads "1_000" and Arabic-Indic digits; awk does not
        return False
    try:
        number = float(value)
    except ValueError:
        return False
    return math.isfinite(number) and number > 0


def is_positive_whole_number(value: str) -> bool:
    """A count as Kaldi's validator takes one: a positive number with nothing after the point ("200", "200.0")."""
    return is_positive_number(value) and float(value).is_integer()


def is_warp_factor(value: str) -> bool:
    try:
        return 0.5 < float(value) < 1.5
    except ValueError:
        return False


def segment_problem(start: str, end: str) -> str | None:
    """None for valid times (0 <= start < end, or end -1 meaning the end of the recording). Kaldi's validator
    differs twice: it refuses end -1 (here combine_data writes it and the pipeline reads it to the end) and
    accepts a negative start (a bug: no audio comes before 0)."""
    try:
        t0, t1 = float(start), float(end)
    except ValueError:
        return f"start '{start}' or end '{end}' is not a number"
    if not (math.isfinite(t0) and math.isfinite(t1)) or t0 < 0 or not (t1 > t0 or t1 == -1):
        return f"bad segment times {start}..{end}"
    return None


# name -> (check of the fields after the key, what a valid value is)
VALUE_RULES = {
    "utt2dur": (lambda f: is_positive_number(f[0]), "a positive number"),
    "reco2dur": (lambda f: is_positive_number(f[0]), "a positive number"),
    "utt2num_frames": (lambda f: is_positive_whole_number(f[0]), "a positive whole number"),
    "segments": (lambda f: segment_problem(f[1], f[2]) is None, "0 <= start < end"),
    "utt2warp": (lambda f: is_warp_factor(f[0]), "a warp factor between 0.5 and 1.5"),
    "spk2warp": (lambda f: is_warp_factor(f[0]), "a warp factor between 0.5 and 1.5"),
}
