"""The Python of the project passes pyflakes' rules (ruff's F): no undefined name, unused import or
variable, or shadowed import; the kind of slip a renamed variable leaves behind and only a rare code
path would reach."""

import subprocess
import sys

from conftest import ROOT


def test_no_undefined_names_or_unused_imports():
    folders = ["rnnt", "steps", "utils", "tests", "benchmarks", "egs"]
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "F", *folders],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
