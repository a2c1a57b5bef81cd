"""Every command-line tool of steps/, egs/*/local/, benchmarks/ and tools/ answers --help with a usage and exits 0."""

import os
import sys

import pytest

from conftest import ROOT, run_tool

TOOLS = sorted(str(p.relative_to(ROOT)) for folder in ("steps", "egs/*/local", "benchmarks", "tools")
               for p in ROOT.glob(f"{folder}/**/*") if p.is_file() and os.access(p, os.X_OK)
               and p.suffix in (".py", ".sh") and not any(part.startswith("venv") for part in p.parts))


@pytest.mark.parametrize("tool", TOOLS)
def test_tool_help(tool):
    path = ROOT / tool
    command = [sys.executable, path] if path.suffix == ".py" else [path]
    out = run_tool(*command, "--help")
    assert out.returncode == 0, out.stderr
    assert "usage" in out.stdout.lower(), out.stdout[:300]


def test_recipes_help():
    recipes = sorted(p.parent.name for p in ROOT.glob("egs/*/run.sh"))
    assert {"yesno", "fsdd", "librispeech", "an4", "speechocean762", "TEMPLATE"} <= set(recipes)
    for recipe in recipes:
        out = run_tool("bash", "-c", f"cd {ROOT}/egs/{recipe} && ./run.sh --help")
        assert out.returncode == 0 and "Usage: ./run.sh" in out.stdout, (recipe, out.stderr)
    out = run_tool("bash", "-c", f"cd {ROOT}/egs/an4 && ./tune.sh --help")
    assert out.returncode == 0 and "Usage: ./tune.sh" in out.stdout, out.stderr
