"""The command line of every tool: one parser shape, so that --help reads the same everywhere."""

from __future__ import annotations

import argparse


def tool_parser(doc: str, example: str | None = None) -> argparse.ArgumentParser:
    """An argument parser whose --help prints the tool's docstring as written, then 'example: EXAMPLE'."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog=f"example: {example}" if example else None)
