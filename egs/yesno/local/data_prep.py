#!/usr/bin/env python3
"""Prepare Kaldi's yesno corpus as data dirs train_yesno and test_yesno.

Each file name spells its transcript (1 = YES, 0 = NO), e.g. 0_1_1_0_0_1_1_0.wav. As in Kaldi's
recipe the files are sorted, the first 30 train and the last 30 test. One speaker, 'yesno'.
"""

import glob
import os
import sys

from rnnt.prep.data_dir_writer import Report, Utterance, data_prep_parser, write_data_dirs

WORDS = {"0": "NO", "1": "YES"}
TRAIN_FILES = 30  # Kaldi's split: the first 30 sorted files train, the other 30 test


def main() -> int:
    parser = data_prep_parser(__doc__, ("waves_dir", "the folder of 60 .wav files (waves_yesno/)"),
                              ("data_root", "writes <data_root>/train_yesno and <data_root>/test_yesno"))
    args = parser.parse_args()
    report = Report("yesno data_prep")
    utterances = []
    for path in sorted(glob.glob(os.path.join(glob.escape(args.waves_dir), "*.wav"))):
        name = os.path.basename(path)[: -len(".wav")]
        digits = name.split("_")
        if not digits or any(d not in WORDS for d in digits):
            report.skip("file name is not a yes/no sequence", path)
            continue
        utterances.append(Utterance(f"yesno-{name}", "yesno", path, " ".join(WORDS[d] for d in digits)))
    if len(utterances) <= TRAIN_FILES:
        print(f"data_prep.py: {args.waves_dir}: found {len(utterances)} usable .wav files, need more than "
              f"{TRAIN_FILES}", file=sys.stderr)
        return 1
    return write_data_dirs({os.path.join(args.data_root, "train_yesno"): utterances[:TRAIN_FILES],
                            os.path.join(args.data_root, "test_yesno"): utterances[TRAIN_FILES:]}, report)


if __name__ == "__main__":
    sys.exit(main())
