#!/usr/bin/env python3
"""Names each 'name==version' pin of the requirement files that this Python's environment does not have installed
at that version, a line each ('<name>: <installed version or not installed>, pinned <version>'); exit status 1
if any, else 0. tools/install.sh asks before it calls a venv up to date: its stamp says which files the venv was
built from, not that nothing was uninstalled or upgraded in it since. Reads package metadata only (no imports:
torch's takes seconds)."""

import argparse
import importlib.metadata
import re
import sys

PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s;#]+)")


def pins(path: str) -> list[tuple[str, str]]:
    with open(path, encoding="utf-8") as lines:
        return [(match.group(1), match.group(3)) for match in map(PIN.match, lines) if match]


def unmet(paths: list[str]) -> list[str]:
    problems = []
    for name, version in dict(pin for path in paths for pin in pins(path)).items():  # a pin in two files: once
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = "not installed"
        if installed.split("+")[0] != version:  # a local build label (2.13.0+cpu) meets the pin, as for pip
            problems.append(f"{name}: {installed}, pinned {version}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example: tools/venv/bin/python tools/unmet_pins.py "
                                            "tools/requirements.txt tools/constraints.txt")
    parser.add_argument("files", nargs="+", help="requirement files ('name==version' lines)")
    problems = unmet(parser.parse_args().files)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
