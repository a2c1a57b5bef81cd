#!/usr/bin/env python3
"""Prepare the Free Spoken Digit Dataset as data dirs train, dev and test.

Files are {digit}_{speaker}_{index}.wav; the transcript is the digit's word (ZERO .. NINE). The usual
split: recordings with index 0-4 test, the rest train; of those, 5-7 are held out as dev (every speaker's: the
validation and any choice are made there, never on test). Utterance ids are <speaker>-<digit>-<index>.
"""

import glob
import os
import sys

from rnnt.cli import at_least
from rnnt.prep.data_dir_writer import Report, Utterance, data_prep_parser, write_data_dirs

DIGITS = ["ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE"]


def main() -> int:
    parser = data_prep_parser(__doc__, ("recordings_dir", "the fsdd recordings/ folder"),
                              ("data_root", "writes <data_root>/train, <data_root>/dev and <data_root>/test"))
    parser.add_argument("--test-max-index", type=at_least(0), default=4,
                        help="indices 0..N are the test split (default 4)")
    parser.add_argument("--dev-max-index", type=at_least(0), default=7,
                        help="indices after the test split's up to N are the dev split (default 7)")
    args = parser.parse_args()
    report = Report("fsdd data_prep")
    if args.dev_max_index <= args.test_max_index:
        parser.error("--dev-max-index must be above --test-max-index")
    splits: dict[str, list[Utterance]] = {"train": [], "dev": [], "test": []}
    recordings = sorted(glob.glob(os.path.join(glob.escape(args.recordings_dir), "*.wav")))
    if not recordings:  # the dataset's own folder given, not its recordings/: "no usable utterances (nothing skipped)"
        print(f"data_prep.py: no .wav files in {args.recordings_dir}: give FSDD's recordings/ folder "
              "({digit}_{speaker}_{index}.wav)", file=sys.stderr)
        return 1
    for path in recordings:
        parts = os.path.basename(path)[: -len(".wav")].split("_")
        if len(parts) != 3 or not parts[0].isdigit() or len(parts[0]) != 1 or not parts[2].isdigit():
            report.skip("file name is not {digit}_{speaker}_{index}", path)
            continue
        digit, speaker, index = parts
        split = ("test" if int(index) <= args.test_max_index else "dev" if int(index) <= args.dev_max_index
                 else "train")
        splits[split].append(Utterance(f"{speaker}-{digit}-{int(index):02d}", speaker, path, DIGITS[int(digit)]))
    return write_data_dirs({os.path.join(args.data_root, split): utts for split, utts in splits.items()}, report)


if __name__ == "__main__":
    sys.exit(main())
