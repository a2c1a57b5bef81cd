"""A run of a Python tool by the tests' fork server (tests/tool_forkserver.py), and, run as a script, the
`python3` that the recipes and scripts the tests run find first on PATH (conftest.py writes it): `python TOOL
ARGS` or `python -m MODULE ARGS` run as a fork of the server, with this process's standard streams, directory,
environment and ignored signals, the signals it gets passed on, and the tool's exit status as its own; any
other command line, or a run the server cannot take, runs in a fresh interpreter (exec). Standard library
only: the script starts in 40 ms (`python -I -S`)."""

import json
import os
import signal
import socket
import sys

SOCKET_VARIABLE = "RNNT_TESTS_FORKSERVER"  # the server's socket: set while the tests' server runs
# this script's `python3` (tool_runs.python_on_path): a forked tool's sys.executable, so that the tools a tool
# starts as `sys.executable TOOL` (tune.py's trials, torchrun's ranks) are forks of the server too
PYTHON_VARIABLE = "RNNT_TESTS_PYTHON"
# what the interpreter or torch reads at its start: a run in another environment gets a fresh interpreter.
# Inductor's, which torch.compile sets in the tests' process, are read when a tool imports it; PYTHONUNBUFFERED
# (path.sh sets it) the forked tool applies itself; of the locale, the encoding it gives the standard streams.
# torchrun's (TORCHELASTIC_*, TORCH_NCCL_*) are read as its ranks set up, not at the import.
IMPORT_TIME = ("OMP_", "MKL_", "KMP_", "GOMP_", "CUDA", "TORCH", "PYTORCH", "PYTHON", "LD_", "TRITON")
READ_LATER = ("TORCHINDUCTOR_", "TORCHELASTIC_", "TORCH_NCCL_")
APPLIED_BY_THE_TOOL = ("PYTHONUNBUFFERED",)
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def stream_encoding(env: dict) -> str:
    """The encoding the interpreter gives its streams under env's locale: UTF-8 for C and POSIX too (PEP 538,
    540), where path.sh's LC_ALL=C puts the recipes."""
    name = env.get("LC_ALL") or env.get("LC_CTYPE") or env.get("LANG") or "C"
    return "utf-8" if name in ("C", "POSIX") or name.lower().replace("-", "").endswith("utf8") else name


def import_time_environment(env: dict) -> dict:
    return {"stream encoding": stream_encoding(env), **{
        key: value for key, value in env.items() if key.startswith(IMPORT_TIME)
        and not key.startswith(READ_LATER) and key not in APPLIED_BY_THE_TOOL}}


def send_line(connection: socket.socket, message: dict, fds: list[int] = ()) -> None:
    data = (json.dumps(message) + "\n").encode()
    sent = socket.send_fds(connection, [data], list(fds)) if fds else 0
    connection.sendall(data[sent:])


class Lines:
    """The JSON lines of a connection, with the file descriptors sent with the first."""

    def __init__(self, connection: socket.socket, with_fds: int = 0):
        self.connection, self.buffer, self.fds = connection, b"", []
        if with_fds:
            self.buffer, self.fds, _, _ = socket.recv_fds(connection, 65536, with_fds)

    def next(self) -> dict | None:
        while b"\n" not in self.buffer:
            data = self.connection.recv(65536)
            if not data:
                return None
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


def receive_line(connection: socket.socket, with_fds: int) -> tuple[dict, list[int]]:
    lines = Lines(connection, with_fds)
    return lines.next(), lines.fds


def served_argv(args: list[str]) -> tuple[list[str] | None, dict]:
    """The command line after `python` as the server takes it (a script and its arguments, or -m MODULE and
    its), with the environment its interpreter options stand for (-u, as torchrun starts its ranks: unbuffered
    streams); None for one it does not take (other interpreter options, -c, a missing script)."""
    env = {}
    if args[:1] == ["-u"]:
        args, env = args[1:], {"PYTHONUNBUFFERED": "1"}
    if len(args) >= 2 and args[0] == "-m":
        return args, env
    if args and not args[0].startswith("-") and os.path.isfile(args[0]):
        return args, env
    return None, {}


def run_forked(argv: list[str], cwd: str, env: dict, fds: list[int], ignored: list[int],
               connection: socket.socket) -> int | None:
    """The tool's exit status from a connected server; None when it refuses the run. The connection stays
    open for signals (b"<number>\\n") until the status comes."""
    send_line(connection, {"argv": argv, "cwd": cwd, "env": env, "ignored": ignored}, fds)
    lines = Lines(connection)
    started = lines.next()
    if started is None or "pid" not in started:
        return None
    ended = lines.next()
    if ended is None:
        raise RuntimeError(f"the tests' fork server ended while running {argv}")
    return ended["returncode"]


def connected() -> socket.socket | None:
    path = os.environ.get(SOCKET_VARIABLE)
    if not path:
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError:
        connection.close()
        return None
    return connection


def end_as(returncode: int) -> None:
    """This process ends as the tool did: with its status, or by its signal."""
    if returncode < 0:
        if -returncode != signal.SIGKILL:  # (SIGKILL's own action cannot be set, nor needs to be)
            signal.signal(-returncode, signal.SIG_DFL)
        os.kill(os.getpid(), -returncode)
        returncode = 128 - returncode
    os._exit(returncode)


def main() -> None:
    args = sys.argv[1:]
    argv, options_env = served_argv(args)
    connection = connected() if argv else None
    if connection is not None:
        ignored = [number for number in FORWARDED if signal.getsignal(number) == signal.SIG_IGN]
        for number in set(FORWARDED) - set(ignored):
            signal.signal(number, lambda number, _: connection.sendall(b"%d\n" % number))
        returncode = run_forked(argv, os.getcwd(), {**os.environ, **options_env}, [0, 1, 2], ignored, connection)
        if returncode is not None:
            end_as(returncode)
        for number in FORWARDED:
            signal.signal(number, signal.SIG_IGN if number in ignored else signal.SIG_DFL)
    os.execv(sys.executable, [sys.executable, *args])


if __name__ == "__main__":
    main()
