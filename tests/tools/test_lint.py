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


def test_shell_lines_stay_within_the_line_length():
    """The shell scripts (recipes, utils/, tools/, benchmarks/, CI) keep Python's 120 characters a line."""
    scripts = [ROOT / ".ci" / "run", *ROOT.glob("*.sh"), *(ROOT / "egs").glob("*/*.sh"),
               *[path for folder in ("utils", "tools", "benchmarks") for path in (ROOT / folder).glob("*.sh")]]
    assert len(scripts) > 20, scripts  # run.sh of every recipe, utils/*.sh, tools/install.sh, ...
    too_long = [f"{path.relative_to(ROOT)}:{number}: {len(line)} characters" for path in scripts
                for number, line in enumerate(path.read_text().splitlines(), 1) if len(line) > 120]
    assert not too_long, too_long


MAX_FUNCTION_LINES = 50
MAX_FILE_LINES = 300


def test_functions_and_files_stay_small():
    """In rnnt/ and steps/ no function is over 50 lines and no file over 300 (docstrings and comments
    count): a longer one is a sign that it does more than one thing."""
    import ast

    too_long = []
    for path in sorted([*(ROOT / "rnnt").rglob("*.py"), *(ROOT / "steps").glob("*.py")]):
        source = path.read_text()
        where = path.relative_to(ROOT)
        if source.count("\n") > MAX_FILE_LINES:
            too_long.append(f"{where}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{where}:{node.lineno}: {node.name} is {lines} lines")
    assert not too_long, too_long


def test_a_script_with_a_shebang_is_executable():
    """A file whose first line names its interpreter runs as ./name (its usage lines say so), so it is executable,
    as git checks it out (100755). Nine benchmarks had the line and not the mode."""
    import os

    listed = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()
    assert len(listed) > 100, "not a git checkout"
    not_executable = []
    for path in listed:
        if (ROOT / path).is_file() and not os.access(ROOT / path, os.X_OK):
            with open(ROOT / path, "rb") as f:
                if f.read(2) == b"#!":
                    not_executable.append(path)
    assert not not_executable, not_executable
