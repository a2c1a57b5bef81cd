"""A recipe stopped as `kill PID` stops it, once its stages are under way: the tests of utils/stages.sh's trap."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path


def stop_once_logged(recipe: subprocess.Popen, logs: list[Path], line: str, timeout: float = 30) -> tuple[str, str]:
    """Waits until every log holds `line` (the recipe still running), sends SIGTERM to the recipe's shell
    alone, and returns its stdout and stderr once it has ended."""
    deadline = time.monotonic() + timeout
    while not all(log.exists() and line in log.read_text().splitlines() for log in logs):
        assert time.monotonic() < deadline and recipe.poll() is None, f"{line!r} never reached every log"
        time.sleep(0.05)
    recipe.send_signal(signal.SIGTERM)
    return recipe.communicate(timeout=timeout)
