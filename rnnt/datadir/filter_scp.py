"""Keeps (or, with --exclude, drops) the lines of a table whose key is in an id list: the lines of
<in.scp> whose field FIELD (default 1) is a first field of <id-list>, in the order of <in.scp>.

Run as `utils/filter_scp.py [--exclude] [-f FIELD] <id-list> <in.scp>`; '-' reads standard input.
"""

from __future__ import annotations

import sys

from rnnt.cli import tool_parser
from rnnt.datadir.table import read_table


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, "utils/filter_scp.py data/dev/utt2spk data/train/text", prog="filter_scp.py")
    parser.add_argument("--exclude", action="store_true", help="print the lines whose key is NOT in the list")
    parser.add_argument("-f", "--field", type=int, default=1, help="1-based field of in.scp to match (default 1)")
    parser.add_argument("id_list")
    parser.add_argument("scp", nargs="?", default="-")
    args = parser.parse_args(argv)
    try:
        ids = set(read_table(args.id_list))
        stream = sys.stdin if args.scp == "-" else open(args.scp, encoding="utf-8", errors="replace")
    except OSError as error:
        print(f"filter_scp.py: {error}", file=sys.stderr)
        return 1
    with stream:
        for line in stream:
            fields = line.split()
            if not fields:
                continue
            key = fields[args.field - 1] if len(fields) >= args.field else None
            if (key in ids) != args.exclude:
                sys.stdout.write(line if line.endswith("\n") else line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
