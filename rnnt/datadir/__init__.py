"""Kaldi data directories: reading, validating, fixing, splitting, subsetting, combining.

Standard library only, so the utils/ tools work before the virtual environment exists.
"""

from rnnt.datadir.table import Line, read_lines, read_table, write_table
from rnnt.datadir.speakers import spk2utt_to_utt2spk, utt2spk_to_spk2utt

__all__ = [
    "Line",
    "read_lines",
    "read_table",
    "write_table",
    "spk2utt_to_utt2spk",
    "utt2spk_to_spk2utt",
]
