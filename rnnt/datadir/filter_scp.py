"""Keeps (or, with --exclude, drops) the lines of a table whose key is in an id list: the lines of
<in.scp> whose field FIELD (default 1) is a first field of <id-list>, in the order of <in.scp>. A line
without that field is named on standard error (file and line) and left out, kept or not, and counted.

Run as `utils/filter_scp.py [--exclude] [-f FIELD] <id-list> <in.scp>`; '-' reads standard input.
"""

from __future__ import annotations

import sys

from rnnt.cli import error_line, tool_parser
from rnnt.datadir.table import kaldi_fields, keep_bytes_on_standard_streams, open_keeping_bytes, read_ids


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, "utils/filter_scp.py data/dev/utt2spk data/train/text", prog="filter_scp.py")
    parser.add_argument("--exclude", action="store_true", help="print the lines whose key is NOT in the list")
    parser.add_argument("-f", "--field", type=int, default=1, help="1-based field of in.scp to match (default 1)")
    parser.add_argument("id_list")
    parser.add_argument("scp", nargs="?", default="-")
    args = parser.parse_args(argv)
    if args.field < 1:
        parser.error(f"-f {args.field}: fields are numbered from 1")
    if args.id_list == "-" == args.scp:
        parser.error("the id list and in.scp cannot both be standard input ('-')")
    try:
        ids = read_ids(args.id_list)
        keep_bytes_on_standard_streams()
        stream = open_keeping_bytes(args.scp)
    except OSError as error:
        print(f"filter_scp.py: {error_line(error)}", file=sys.stderr)
        return 1
    short = 0
    with stream:
        for number, line in enumerate(stream, 1):
            fields = kaldi_fields(line)
            if not fields:
                continue
            if len(fields) < args.field:  # neither in nor out of the list: skipped, named and counted
                print(f"filter_scp.py: {args.scp}:{number}: {len(fields)} fields, no field {args.field}; skipped",
                      file=sys.stderr)
                short += 1
                continue
            if (fields[args.field - 1] in ids) != args.exclude:
                sys.stdout.write(line if line.endswith("\n") else line + "\n")
    if short:
        print(f"filter_scp.py: {short} line(s) of {args.scp} without field {args.field} skipped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
