"""benchmarks/train_step.py (which benchmarks/gpu_check.sh runs on a lent GPU) runs every configuration in both
precisions and its StackTime comparison, at a quick size: 1 s utterances (their tokens as many a second), a small
matmul peak; without the packages the GPU machine's image lacks, as it runs there."""

import subprocess
import sys

import pytest

from conftest import ROOT
from gpu_image import blocked_environment


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.mark.slow
def test_every_configuration_in_both_precisions_and_the_stack_time_table(tmp_path):
    out = subprocess.run([sys.executable, "benchmarks/train_step.py", "--runs", "1", "--seconds", "1", "--peak-sizes",
                          "256"], cwd=ROOT, capture_output=True, text=True, env=blocked_environment(tmp_path / "b"))
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [cells(line) for line in out.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    steps = [row for row in rows if len(row) == 8 and row[0] != "config"]
    names = {row[0] for row in steps if "StackTime" not in row[0]}
    assert len(names) == 7 and {(name, precision) for name in names for precision in ("fp32", "bf16")} == \
        {(row[0], row[1]) for row in steps if "StackTime" not in row[0]}
    for row in steps:
        assert float(row[3]) > 0 and float(row[5]) > 0 and row[6].count("%") == 3
        assert row[7] == "n/a" if "Conformer" in row[0] else row[7].endswith("%"), row
    stack_time = [row for row in rows if len(row) == 9 and row[0] != "config"]
    assert [row[0] for row in stack_time] == ["small (full loss)", "mlperf (full loss)"]
    assert all(row[6].endswith("x") and float(row[6][:-1]) > 0 for row in stack_time)
