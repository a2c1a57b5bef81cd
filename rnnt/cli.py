"""The command line of every tool: one parser shape, so that --help reads the same everywhere, and one
ending for the stage tools of steps/: a summary line on success, one line naming what failed otherwise."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import NoReturn


def tool_parser(doc: str, example: str | None = None, prog: str | None = None) -> argparse.ArgumentParser:
    """An argument parser whose --help prints the tool's docstring as written, then 'example: EXAMPLE'.
    prog: the name users run, where a shell wrapper runs the module (utils/fix_data_dir.sh)."""
    return argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog=f"example: {example}" if example else None)


def glued_values(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """argv with each of these options and the word after it joined as '--name=value': a value that starts with
    '-' (a suffix '-x', validation options '--no-wav') reads as Kaldi's parse_options.sh reads it."""
    glued: list[str] = []
    words = iter(argv)
    for word in words:
        glued.append(word if word not in options else f"{word}={next(words, '')}")
    return glued


class ToolError(Exception):
    """What stops a stage tool, in one line that names the file (and line) at fault: run_tool prints it."""


def run_tool(main: Callable[[], str]) -> NoReturn:
    """Runs a stage tool's main, which returns the tool's summary line: prints 'tool.py: SUMMARY' and exits
    0; when main raises ToolError, prints 'tool.py: MESSAGE' on standard error and exits 1."""
    name = os.path.basename(sys.argv[0])
    try:
        summary = main()
    except ToolError as error:
        print(f"{name}: {error}", file=sys.stderr)
        sys.exit(1)
    print(f"{name}: {summary}", flush=True)
    sys.exit(0)
