"""benchmarks/gpu_check.sh runs once, unattended, on a lent GPU machine whose image has the project's torch, Triton
and PyYAML but not every package tools/install.sh gives (tests/gpu_image.py): each part must start there. Before,
benchmarks/train_step.py failed at import (rnnt.training.experiment read the noise config through rnnt.data.noise,
which imports soundfile), a rare GPU run's part lost."""

import subprocess
import sys

import pytest

from conftest import ROOT
from gpu_image import blocked_environment

GPU_CHECK_SCRIPTS = ("loss.py", "launches.py", "train_step.py", "fused_chunks.py", "lattice.py")


@pytest.mark.parametrize("script", GPU_CHECK_SCRIPTS)
def test_each_script_the_gpu_check_runs_starts_without_the_packages_the_image_lacks(script, tmp_path):
    assert f"benchmarks/{script}" in (ROOT / "benchmarks" / "gpu_check.sh").read_text()
    out = subprocess.run([sys.executable, f"benchmarks/{script}", "--help"], cwd=ROOT, capture_output=True, text=True,
                         env=blocked_environment(tmp_path / "blocked"), timeout=120)
    assert out.returncode == 0 and "usage:" in out.stdout, out.stderr[-2000:]


def test_the_gpu_checks_tests_are_collected_without_them(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                          "tests/rnnt/loss", "tests/rnnt/test_host_reads.py"], cwd=ROOT, capture_output=True,
                         text=True, env=blocked_environment(tmp_path / "blocked"), timeout=300)
    assert out.returncode == 0 and " tests collected" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
