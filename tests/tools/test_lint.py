"""The Python of the project passes pyflakes' rules (ruff's F): no undefined name, unused import or
variable, or shadowed import; the kind of slip a renamed variable leaves behind and only a rare code
path would reach. And no line is longer than pyproject.toml's line-length (ruff's E501: 120)."""

import subprocess
import sys

from conftest import ROOT


def test_no_undefined_names_unused_imports_or_long_lines():
    folders = ["rnnt", "steps", "utils", "tests", "benchmarks", "egs"]
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "F,E501", *folders],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
