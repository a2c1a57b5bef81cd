#!/usr/bin/env python3
"""Prepare the Free Spoken Digit Dataset as data dirs train and test.

Files are {digit}_{speaker}_{index}.wav; the transcript is the digit's word (ZERO .. NINE). The usual
split: recordings with index 0-4 test, the rest train. Utterance ids are <speaker>-<digit>-<index>.
"""

import glob
import os
import sys

from rnnt.prep.data_dir_writer import Report, Utterance, data_prep_parser, write_data_dirs

DIGITS = ["ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE"]


def main() -> int:
    parser = data_prep_parser(__doc__, ("recordings_dir", "the fsdd recordings/ folder"),
                              ("data_root", "writes <data_root>/train and <data_root>/test"))
    parser.add_argument("--test-max-index", type=int, default=4, help="indices 0..N are the test split (default 4)")
    args = parser.parse_args()
    report = Report("fsdd data_prep")
    splits: dict[str, list[Utterance]] = {"train": [], "test": []}
    for path in sorted(glob.glob(os.path.join(args.recordings_dir, "*.wav"))):
        parts = os.path.basename(path)[: -len(".wav")].split("_")
        if len(parts) != 3 or not parts[0].isdigit() or len(parts[0]) != 1 or not parts[2].isdigit():
            report.skip("file name is not {digit}_{speaker}_{index}", path)
            continue
        digit, speaker, index = parts
        split = "test" if int(index) <= args.test_max_index else "train"
        splits[split].append(Utterance(f"{speaker}-{digit}-{int(index):02d}", speaker, path, DIGITS[int(digit)]))
    return write_data_dirs({os.path.join(args.data_root, split): utts for split, utts in splits.items()}, report)


if __name__ == "__main__":
    sys.exit(main())
