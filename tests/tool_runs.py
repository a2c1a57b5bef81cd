"""The tests' runs of the project's Python tools as forks of one server per test process that has imported
torch once (tests/tool_forkserver.py), instead of fresh interpreters that each pay 2.5-4 s to import it on
a slow CPU: the tests' own runs (run_python_tool) and, through the `python3` first on PATH (python_on_path),
every Python tool that the recipes and scripts under test start, and those that a forked tool starts as
`sys.executable TOOL` (tune.py's trials, torchrun's ranks). Each run is still a process of its own: its
argv, working directory, environment, standard streams, signals and exit status are those of `python TOOL
ARGS`. RNNT_TESTS_FRESH_INTERPRETERS=1 turns the server off (every tool a fresh interpreter)."""

from __future__ import annotations

import atexit
import locale
import os
import signal
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tool_client import FORWARDED, PYTHON_VARIABLE, SOCKET_VARIABLE, connected, run_forked

HERE = Path(__file__).parent


def fresh_interpreters() -> bool:
    return os.environ.get("RNNT_TESTS_FRESH_INTERPRETERS") == "1"


class ForkServer:
    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="tool_forkserver.")
        self.socket = os.path.join(self.folder, "socket")
        self.log = open(os.path.join(self.folder, "log"), "wb")
        self.process = subprocess.Popen([sys.executable, str(HERE / "tool_forkserver.py"), self.socket],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        if self.process.stdout.readline() != b"ready\n":
            raise RuntimeError(f"the tests' fork server did not start: {self.log_text()}")
        os.environ[SOCKET_VARIABLE] = self.socket
        atexit.register(self.close)

    def log_text(self) -> str:
        return Path(self.log.name).read_text(errors="replace")[-3000:]

    def run(self, argv: list[str], stdin: str | None, cwd: Path) -> subprocess.CompletedProcess | None:
        connection = connected()
        if connection is None:
            raise RuntimeError(f"the tests' fork server does not answer; its log: {self.log_text()}")
        with connection, tempfile.TemporaryDirectory(prefix="tool_run.") as folder:
            folder = Path(folder)
            if stdin is not None:
                (folder / "stdin").write_text(stdin)
            streams = [os.open(folder / "stdin" if stdin is not None else os.devnull, os.O_RDONLY)]
            streams += [os.open(folder / name, os.O_WRONLY | os.O_CREAT, 0o600) for name in ("stdout", "stderr")]
            ignored = [number for number in FORWARDED if signal.getsignal(number) == signal.SIG_IGN]
            try:  # a test cut off here (its timeout) closes the connection: the server kills the tool
                returncode = run_forked(argv[1:], str(cwd), dict(os.environ), streams, ignored, connection)
            finally:
                for fd in streams:
                    os.close(fd)
            if returncode is None:
                return None
            encoding = locale.getpreferredencoding(False)
            out, err = ((folder / name).read_text(encoding=encoding) for name in ("stdout", "stderr"))
        return subprocess.CompletedProcess(argv, returncode, out, err)

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.environ.pop(SOCKET_VARIABLE, None)
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_server: ForkServer | None = None


def fork_server() -> ForkServer | None:
    """The test process's server, started at the first call; None when turned off."""
    global _server
    if fresh_interpreters():
        return None
    if _server is None or _server.process.poll() is not None:
        _server = ForkServer()
    return _server


def run_python_tool(argv: list[str], stdin: str | None, cwd: Path) -> subprocess.CompletedProcess | None:
    """`python TOOL ARGS` (argv[0] this interpreter, argv[1] a .py file) run by the fork server; None where it
    cannot serve the run (turned off, or an environment torch's import would have read differently)."""
    server = fork_server()
    return server.run(argv, stdin, cwd) if server else None


def python_on_path(folder: Path) -> None:
    """`python3` and `python` in folder, first on this process's PATH: tests/tool_client.py, which runs a Python tool
    as a fork of the server (started here) and any other command line as this interpreter would."""
    if fork_server() is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("python3", "python"):
        shim = folder / name
        shim.write_text(f"#!/bin/sh\nexec '{sys.executable}' -I -S '{HERE / 'tool_client.py'}' \"$@\"\n")
        shim.chmod(0o755)
    os.environ["PATH"] = os.pathsep.join([str(folder), os.environ["PATH"]])
    os.environ[PYTHON_VARIABLE] = str(folder / "python3")

