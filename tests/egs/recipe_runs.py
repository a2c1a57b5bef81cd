"""A recipe run as a user runs it, for the end-to-end recipe tests (tests/egs/test_*_recipe.py): egs/<name>
copied as a user starts a new corpus, run.sh run in it, and its %WER lines read."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def copy_recipe(name: str, dest: Path) -> Path:
    """A copy of egs/<name> as a user makes one for a new corpus: its scripts (run.sh, an4's tune.sh), conf/ and
    local/ copied, the shared path.sh, utils and steps linked."""
    recipe = dest / name
    recipe.mkdir()
    for script in (ROOT / "egs" / name).glob("*.sh"):
        if script.name != "path.sh":
            shutil.copy(script, recipe / script.name)
    for folder in ("conf", "local"):
        shutil.copytree(ROOT / "egs" / name / folder, recipe / folder)
    for link, target in (("path.sh", ROOT / "path.sh"), ("utils", ROOT / "utils"), ("steps", ROOT / "steps")):
        os.symlink(target, recipe / link)
    return recipe


def recipe_environment() -> dict[str, str]:
    """The environment a user runs a recipe in with the project's environment active (as the tests' own: path.sh
    changes nothing then, and the tests' `python3`, first on PATH, starts each Python tool; tests/tool_runs.py)."""
    return {**os.environ, "VIRTUAL_ENV": sys.prefix}


def run_recipe(recipe: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["./run.sh", *args], cwd=recipe, capture_output=True, text=True, env=recipe_environment())


def wer_of(line: str) -> float:
    return float(re.search(r"%WER ([0-9.]+) \[", line).group(1))


def words_in(text_file: Path) -> int:
    return sum(len(line.split()) - 1 for line in text_file.read_text().splitlines())
