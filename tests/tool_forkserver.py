"""The tests' fork server: imports torch once, then starts each Python tool it is asked for as a fork of itself,
run as `python TOOL ARGS` (or `python -m MODULE ARGS`) runs it. Its clients (tests/tool_client.py) are the
tests' own runs of tools (tests/tool_runs.py) and the `python3` that the recipes and scripts the tests run find
first on PATH (conftest.py): a recipe's every stage pays torch's import (2.5-4 s on a slow CPU) once.

`python tool_forkserver.py SOCKET` listens on the Unix socket SOCKET and prints "ready" when it does. A
connection is one run: the request (tool_client.py's) with the client's standard input, output and error
passed as file descriptors; a process forked for the connection answers with the tool's pid, passes on the
signals the client forwards, kills the tool when the client goes, and answers with the tool's exit status
(subprocess's returncode: negative for a signal). A request whose environment torch's import would have read
differently is refused: the client starts a fresh interpreter instead.
"""

import atexit
import contextlib
import io
import os
import runpy
import select
import signal
import socket
import sys
import threading
import traceback

import torch  # noqa: F401  what every tool imports first, paid here once
import torch._dynamo  # noqa: F401  what every training imports as it builds its optimizer (torch's): 3 s more

from tool_client import FORWARDED, PYTHON_VARIABLE, import_time_environment, receive_line, send_line

SERVED_ENVIRONMENT = import_time_environment(os.environ)


def exit_code(code) -> int:
    """The status a SystemExit with this code gives, as the interpreter turns it into one."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def standard_streams(unbuffered: bool) -> None:
    """sys.stdin, stdout and stderr on the fds 0-2 given, encoded and buffered as the interpreter sets them up at
    its start (a terminal's output by lines; none buffered under PYTHONUNBUFFERED)."""
    sys.stdin = open(0, closefd=False, encoding=sys.__stdin__.encoding, errors=sys.__stdin__.errors)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        original = getattr(sys, f"__{name}__")
        stream = io.TextIOWrapper(open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False),
                                  encoding=original.encoding, errors=original.errors,
                                  line_buffering=fd == 2 or os.isatty(fd), write_through=unbuffered)
        setattr(sys, name, stream)


def run_as_main(request: dict) -> int:
    """In the tool's process: `python TOOL ARGS` or `python -m MODULE ARGS` in the request's directory and
    environment; its exit status (a KeyboardInterrupt ends it by SIGINT, as the interpreter's does)."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for number in FORWARDED:  # as the client's interpreter found them: inherited ignored, else the defaults
        default = signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL
        signal.signal(number, signal.SIG_IGN if number in request["ignored"] else default)
    standard_streams(bool(request["env"].get("PYTHONUNBUFFERED")))
    sys.executable = request["env"].get(PYTHON_VARIABLE, sys.executable)
    argv = request["argv"]
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.realpath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
        return 0
    except SystemExit as end:
        return exit_code(end.code)
    except BaseException as error:
        frames = error.__traceback__
        while frames is not None and frames.tb_frame.f_code.co_filename != argv[0]:
            frames = frames.tb_next  # the traceback from the tool's own frame on, as the interpreter prints it
        traceback.print_exception(type(error), error, frames or error.__traceback__)
        return -signal.SIGINT if isinstance(error, KeyboardInterrupt) else 1


def become_tool(request: dict, fds: list[int]) -> None:
    """The forked tool: its streams, its run, the interpreter's own ending (threads joined, atexit functions,
    streams flushed), and its status; never returns."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        code = run_as_main(request)
        threading._shutdown()
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                if not stream.closed:  # a tool may close its output (json.tool does)
                    stream.flush()
            except OSError:  # a reader gone (a closed pipe): the interpreter's status for it
                code = code or 120
    except BaseException:
        traceback.print_exc()
    finally:
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code)


def serve_connection(connection: socket.socket) -> None:
    """In the process forked for one connection: the tool forked, the client's signals passed on, the tool
    killed if the client goes first, and its status answered."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    request, fds = receive_line(connection, with_fds=3)
    if import_time_environment(request["env"]) != SERVED_ENVIRONMENT:
        send_line(connection, {"refused": "an environment torch's import reads differently"})
        return
    pid = os.fork()
    if pid == 0:
        connection.close()
        become_tool(request, fds)
    for fd in fds:
        os.close(fd)
    send_line(connection, {"pid": pid})
    ended = os.pidfd_open(pid)
    while not select.select([ended, connection], [], [])[0].count(ended):
        signals = connection.recv(4096)
        if not signals:  # the client is gone (killed): so is its tool
            os.kill(pid, signal.SIGKILL)
            break
        for number in signals.split():  # each a number and a newline
            os.kill(pid, int(number))
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError):  # none to answer when the client is gone
        send_line(connection, {"returncode": os.waitstatus_to_exitcode(status)})


def end_with_the_tests() -> None:
    """The server ends when the test process that started it does (its standard input, a pipe, closes)."""
    sys.stdin.buffer.read()
    os._exit(0)


def serve(path: str) -> None:
    threading.Thread(target=end_with_the_tests, daemon=True).start()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # each connection's process reaped as it ends
    print("ready", flush=True)
    while True:
        connection, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            try:
                serve_connection(connection)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(0)
        connection.close()


if __name__ == "__main__":
    serve(sys.argv[1])
