#!/usr/bin/env python3
"""One line saying where a benchmark ran, printed before its table: the CPU's model and the cores this process
may use, the GPU's name where one is measured, torch's version and threads, the commit and the date. Tables
without it could not be told apart once the machine changed (RESULTS.md has rows from an Intel Xeon and an
AMD EPYC).

Usage: python3 benchmarks/machine.py [DEVICE]   prints it (benchmarks/run_all.sh's header)
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys

from rnnt.cpu_isa import cpu_facts


def commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=os.path.dirname(os.path.abspath(__file__)))
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10, cwd=os.path.dirname(os.path.abspath(__file__))).stdout
        return out.stdout.strip() + (" (with changes)" if dirty.strip() else "") if out.returncode == 0 else "no git"
    except (OSError, subprocess.TimeoutExpired):
        return "no git"


def machine_line(device: str = "cpu", threads: int | None = None) -> str:
    """threads: those the table's rows run with, where not this process's (workers of their own)."""
    import torch

    where = f"{cpu_facts()[0] or 'unknown CPU'}, {len(os.sched_getaffinity(0))} cores"
    if device.startswith("cuda") and torch.cuda.is_available():
        where = f"{torch.cuda.get_device_name(torch.device(device))}; host {where}"
    threads = threads or torch.get_num_threads()
    return (f"Machine: {where}; torch {torch.__version__}, {threads} threads; commit {commit()}; "
            f"{datetime.date.today().isoformat()}")


if __name__ == "__main__":
    if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
        print(__doc__.split("\n\n")[1].strip())
        sys.exit(0)
    print(machine_line(sys.argv[1] if len(sys.argv) > 1 else "cpu"))
