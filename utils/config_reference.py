#!/usr/bin/env python3
"""Print the reference of every experiment config key (docs/config.md): its type, default and meaning,
generated from the config dataclasses (rnnt.config_reference). With --output, write it there instead.
"""

import sys

from rnnt.cli import cannot_write, run_tool, tool_parser
from rnnt.config_reference import render, sections


def main() -> str:
    parser = tool_parser(__doc__, example="utils/config_reference.py --output docs/config.md")
    parser.add_argument("--output", help="write the page to this file (default: standard output, the page alone)")
    args = parser.parse_args()
    found = sections()
    page = render(found)
    if not args.output:
        sys.stdout.write(page)
        sys.exit(0)  # no summary line after the page
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as error:
        raise cannot_write(args.output, "the page", error) from error
    return f"{args.output}: {sum(len(s.keys) for s in found)} keys in {len(found)} sections"


if __name__ == "__main__":
    run_tool(main)
