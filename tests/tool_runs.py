"""The tests' runs of the project's Python tools as forks of one server per test process that has imported
torch once (tests/tool_forkserver.py), instead of fresh interpreters that each pay 2.5-4 s to import it on
a slow CPU. Each run is still a process of its own: its argv, working directory, environment, standard
streams and exit status are those of `python TOOL ARGS` (its standard input the text given, else /dev/null).
RNNT_TESTS_FRESH_INTERPRETERS=1 turns the server off (every tool a fresh interpreter)."""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

SERVER = Path(__file__).with_name("tool_forkserver.py")
# read while torch is imported (or decided at its first use, before any tool runs): a tool started with other
# values than the server's gets a fresh interpreter. Inductor's, which torch.compile sets in the tests' process,
# are read when a tool imports it, after its environment is set.
IMPORT_TIME = ("OMP_", "MKL_", "KMP_", "GOMP_", "CUDA", "TORCH", "PYTORCH", "PYTHON", "LD_", "TRITON")


def import_time_environment(env: dict) -> dict:
    return {key: value for key, value in env.items()
            if key.startswith(IMPORT_TIME) and not key.startswith("TORCHINDUCTOR_")}


class ForkServer:
    def __init__(self):
        self.log = tempfile.NamedTemporaryFile(prefix="tool_forkserver.", suffix=".log", delete=False)
        self.process = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log)
        self.environment = import_time_environment(os.environ)
        self.lock = threading.Lock()
        atexit.register(self.close)

    def serves(self, env: dict) -> bool:
        return self.process.poll() is None and import_time_environment(env) == self.environment

    def answer(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the tests' fork server ended; its log: {Path(self.log.name).read_text()[-3000:]}")
        return json.loads(line)

    def run(self, argv: list[str], stdin: str | None, cwd: Path) -> subprocess.CompletedProcess:
        with self.lock, tempfile.TemporaryDirectory(prefix="tool_run.") as folder:
            folder = Path(folder)
            streams = {"stdin": os.devnull, "stdout": str(folder / "stdout"), "stderr": str(folder / "stderr")}
            if stdin is not None:
                streams["stdin"] = str(folder / "stdin")
                Path(streams["stdin"]).write_text(stdin)
            request = {"argv": argv[1:], "cwd": str(cwd), "env": dict(os.environ), **streams}
            pid = None
            try:
                self.process.stdin.write((json.dumps(request) + "\n").encode())
                self.process.stdin.flush()
                pid = self.answer()["pid"]
                returncode = self.answer()["returncode"]
            except BaseException:  # a test's timeout, say: the tool and the server go (the next run starts one)
                self.abandon(pid)
                raise
            encoding = locale.getpreferredencoding(False)
            out, err = (Path(streams[name]).read_text(encoding=encoding) for name in ("stdout", "stderr"))
        return subprocess.CompletedProcess(argv, returncode, out, err)

    def abandon(self, pid: int | None) -> None:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.kill()
        self.process.wait()

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


_server: ForkServer | None = None


def run_python_tool(argv: list[str], stdin: str | None, cwd: Path) -> subprocess.CompletedProcess | None:
    """`python TOOL ARGS` (argv[0] this interpreter, argv[1] a .py file) run by the fork server; None where it
    cannot serve the run (turned off, or an environment torch's import would have read differently)."""
    global _server
    if os.environ.get("RNNT_TESTS_FRESH_INTERPRETERS") == "1":
        return None
    if _server is None or not _server.serves(os.environ):
        if _server is not None and _server.process.poll() is None:
            return None  # the environment differs from the server's
        _server = ForkServer()
    return _server.run(argv, stdin, cwd)
