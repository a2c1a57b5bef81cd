"""benchmarks/lattice.py runs and prints its table: both PyTorch schedules timed, and the one the cost model
picks (tests/rnnt/loss/test_lattice.py checks its choices)."""

import sys

from conftest import run_tool


def test_the_table_times_both_schedules_and_names_the_one_picked():
    out = run_tool(sys.executable, "benchmarks/lattice.py", "--runs", "1", "--shapes", "yesno", "FSDD", check=True)
    machine, blank, *lines = out.stdout.splitlines()
    assert machine.startswith("Machine: ") and " torch 2." in machine and "; commit " in machine and blank == ""
    assert lines[0].startswith("| batch | B, T, U | lattice | rows (ms) | steps (ms) |")
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    assert [(row[0], row[2], row[6]) for row in rows] == [
        ("yesno", "standard", "rows"), ("yesno", "one symbol per frame", "rows"),
        ("FSDD", "standard", "rows"), ("FSDD", "one symbol per frame", "rows")]
    assert all(float(row[3]) > 0 and float(row[4]) > 0 for row in rows)
