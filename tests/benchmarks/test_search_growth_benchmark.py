"""benchmarks/search_growth.py runs and prints its table: each host-side search timed at both lengths, the longer
finding more labels."""

import sys

from conftest import run_tool


def test_the_table_times_every_host_side_search_at_both_lengths():
    out = run_tool(sys.executable, "benchmarks/search_growth.py", "--frames", "40", "120", check=True)
    machine, blank, *lines = out.stdout.splitlines()
    assert machine.startswith("Machine: ") and blank == ""
    assert lines[0] == "| search | ms a frame at 40 frames (labels) | ms a frame at 120 frames (labels) | growth |"
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    assert [row[0] for row in rows] == ["beam 4 (Graves)", "beam 4 (Graves) + LM", "modified beam 4 + LM",
                                        "CTC prefix beam 4", "CTC prefix beam 4 + LM"]
    for row in rows:
        (short, short_labels), (long, long_labels) = (cell.rstrip(")").split(" (") for cell in row[1:3])
        assert float(short) > 0 and float(long) > 0 and int(long_labels) >= int(short_labels)
        assert row[3].endswith("x")
