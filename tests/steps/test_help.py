"""Every command-line tool of steps/, egs/*/local/, benchmarks/ and tools/ answers --help with a usage and exits 0;
those of steps/ with an example too."""

import json
import os
import sys

import pytest

from conftest import ROOT, run_tool

# the tools are the folders' own files (a glob into tools/ would walk the whole venv)
TOOLS = sorted(str(p.relative_to(ROOT)) for folder in ("steps", "egs/*/local", "benchmarks", "tools")
               for p in ROOT.glob(f"{folder}/*") if p.is_file() and os.access(p, os.X_OK)
               and p.suffix in (".py", ".sh"))

# Each Python tool run as `python TOOL --help` runs it (its own folder first on sys.path, as the interpreter puts
# it), in one process for all of them: one import of torch instead of one a tool (3-4 s each on a slow CPU).
RUN_EACH_AS_MAIN = """
import contextlib, io, json, os, runpy, sys, traceback
answers = {}
for tool in sys.argv[1:]:
    sys.argv, sys.path[0], out = [tool, "--help"], os.path.dirname(tool), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_path(tool, run_name="__main__")
        except SystemExit as end:
            code = end.code if isinstance(end.code, int) else (0 if end.code is None else 1)
        except Exception:
            code = 1
            print(traceback.format_exc())
    answers[tool] = [code, out.getvalue()]
print(json.dumps(answers))
"""


@pytest.fixture(scope="module")
def python_help() -> dict:
    tools = [str(ROOT / tool) for tool in TOOLS if tool.endswith(".py")]
    out = run_tool(sys.executable, "-c", RUN_EACH_AS_MAIN, *tools)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("tool", TOOLS)
def test_tool_help(tool, python_help):
    if tool.endswith(".py"):
        code, stdout = python_help[str(ROOT / tool)]
        assert code == 0, stdout[-300:]
    else:
        out = run_tool(ROOT / tool, "--help")
        code, stdout = out.returncode, out.stdout
        assert code == 0, out.stderr
    assert "usage" in stdout.lower(), stdout[:300]
    if tool.startswith("steps/"):  # steps/README.md: the docstring and an example
        assert f"\nexample: {tool}" in stdout, stdout[-300:]


def test_recipes_help():
    recipes = sorted(p.parent.name for p in ROOT.glob("egs/*/run.sh"))
    assert {"yesno", "fsdd", "librispeech", "an4", "speechocean762", "TEMPLATE"} <= set(recipes)
    for recipe in recipes:
        out = run_tool("bash", "-c", f"cd {ROOT}/egs/{recipe} && ./run.sh --help")
        assert out.returncode == 0 and "Usage: ./run.sh" in out.stdout, (recipe, out.stderr)
    out = run_tool("bash", "-c", f"cd {ROOT}/egs/an4 && ./tune.sh --help")
    assert out.returncode == 0 and "Usage: ./tune.sh" in out.stdout, out.stderr
    # a stray word: the options after it were dropped, and the search ran into exp/tune
    out = run_tool("bash", "-c", f"cd {ROOT}/egs/an4 && ./tune.sh --trials 1 typo --exp exp/other")
    assert (out.returncode, out.stderr) == (1, "tune.sh: unexpected argument 'typo': options are --name value\n")


def modules_the_scripts_run() -> list[str]:
    """The project's modules the shell scripts (recipes, utils/, tools/, benchmarks/, CI) run as python3 -m."""
    import re

    scripts = [ROOT / ".ci" / "run", *[p for folder in ("utils", "tools", "benchmarks", "egs/*")
                                       for p in ROOT.glob(f"{folder}/*.sh")]]
    return sorted({m for path in scripts for m in re.findall(r"python3 -m (rnnt[\w.]*)", path.read_text())})


@pytest.mark.parametrize("module", modules_the_scripts_run())
def test_every_module_a_script_runs_answers_help(module):
    """list_fingerprint and config_inputs printed their usage on standard error and exited 2; search_methods read
    --help as a config's name and failed."""
    out = run_tool(sys.executable, "-m", module, "--help")
    assert out.returncode == 0 and "usage" in out.stdout.lower() and module in out.stdout, out.stdout + out.stderr


def test_the_modules_the_scripts_run_are_found():
    assert {"rnnt.data.list_fingerprint", "rnnt.training.config_inputs", "rnnt.search_methods"} <= \
        set(modules_the_scripts_run())
