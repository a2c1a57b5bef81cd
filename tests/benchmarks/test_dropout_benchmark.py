"""benchmarks/dropout.py runs and prints its two tables: every activation in both dtypes, both models' steps, each
with both dropouts timed."""

import sys

from conftest import run_tool


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_both_tables_time_both_dropouts_on_every_row():
    out = run_tool(sys.executable, "benchmarks/dropout.py", "--runs", "1", "--step-runs", "1", check=True)
    machine, blank, *lines = out.stdout.splitlines()
    assert machine.startswith("Machine: ") and blank == ""
    split = lines.index("")
    alone, steps = lines[2:split], lines[split + 3:]
    assert {(row[0], row[1]) for row in map(cells, alone)} == {
        (shape, dtype) for shape in ("Conformer feed-forward 8 x 150 x 576", "LSTM output 8 x 300 x 512",
                                     "MLPerf joiner 4 x 100 x 41 x 512") for dtype in ("float32", "bfloat16")}
    for row in map(cells, alone):
        assert float(row[3]) > 0 and float(row[4]) > 0 and row[5].endswith("x")
    assert [cells(line)[0] for line in steps] == ["egs/an4 Conformer", "egs/an4 default (LSTM)"]
    for row in map(cells, steps):
        assert float(row[1]) > 0 and float(row[2]) > 0 and row[3].endswith("x")
