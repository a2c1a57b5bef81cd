#!/usr/bin/env python3
"""A hotwords file of the names AN4's speakers spell: every run of three or more single letters in the
transcripts of the data dirs named (M O R E W O O D), once each, then --distractors names drawn (seeded) from
those of --distractors-from that the others lack, as a contact list holds names nobody says. A biasing list as
contextual biasing is measured with: it holds the names said, so a decode with it measures how well a name known
beforehand is recognised (choose --hotwords-score on dev), not what a decode without one can reach.
"""

import os
import random

from rnnt.cli import ToolError, at_least, run_tool, tool_parser
from rnnt.datadir.table import read_table

LEAST_LETTERS = 3


def spelled_names(text_path: str) -> list[str]:
    """The runs of LEAST_LETTERS or more single-letter words in a Kaldi text file, in order."""
    names = []
    for line in read_table(text_path).values():
        run: list[str] = []
        for word in line.value.split() + [""]:
            if len(word) == 1 and word.isalpha():
                run.append(word)
                continue
            if len(run) >= LEAST_LETTERS:
                names.append(" ".join(run))
            run = []
    return names


def main() -> str:
    parser = tool_parser(__doc__, "local/spelled_names.py --distractors-from data/train data/dev data/test names.txt")
    parser.add_argument("--distractors", type=at_least(0), default=100, help="names nobody says (default 100)")
    parser.add_argument("--distractors-from", help="a data dir whose names the distractors are drawn from")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("data_dirs", nargs="+", help="the data dirs whose names are said")
    parser.add_argument("output")
    args = parser.parse_args()
    try:
        said = list(dict.fromkeys(name for d in args.data_dirs for name in spelled_names(os.path.join(d, "text"))))
        others = [] if not args.distractors_from else sorted(
            set(spelled_names(os.path.join(args.distractors_from, "text"))) - set(said))
    except (OSError, ValueError) as error:
        raise ToolError(str(error)) from error
    distractors = random.Random(args.seed).sample(others, min(args.distractors, len(others)))
    with open(args.output, "w", encoding="utf-8") as f:
        f.writelines(name + "\n" for name in said + distractors)
    return (f"{args.output}: {len(said)} names spelt in {', '.join(args.data_dirs)} and {len(distractors)} "
            f"distractors{f' from {args.distractors_from}' if args.distractors_from else ''}")


if __name__ == "__main__":
    run_tool(main)
