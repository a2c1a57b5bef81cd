"""The tests' fork server: imports torch once, then starts each Python tool it is asked for as a fork of itself,
run as `python TOOL ARGS` runs it (tests/tool_runs.py is its client).

A request is one JSON line on standard input: the tool's argv, working directory, environment and the files
for its standard input, output and error. The answer is two JSON lines on standard output: the child's pid
when it starts, its exit status (subprocess's returncode: negative for a signal) when it ends.
"""

import atexit
import json
import os
import runpy
import sys
import threading
import traceback

import torch  # noqa: F401  what every tool imports first: 2.5-4 s on a slow CPU, paid here once

STREAMS = ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
           (2, "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC))


def exit_code(code) -> int:
    """The status a SystemExit with this code gives, as the interpreter turns it into one."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_as_main(request: dict, answers: int) -> None:
    """In the child: becomes `python TOOL ARGS` in the request's directory and environment, and exits with its
    status after the interpreter's own ending (non-daemon threads joined, atexit functions, streams flushed)."""
    os.close(answers)
    for fd, name, flags in STREAMS:
        opened = os.open(request[name], flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(0, closefd=False)  # not the server's buffered reader of requests
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tool = request["argv"][0]
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(os.path.realpath(tool))
    try:
        runpy.run_path(tool, run_name="__main__")
        code = 0
    except SystemExit as end:
        code = exit_code(end.code)
    except BaseException as error:
        frames = error.__traceback__
        while frames is not None and frames.tb_frame.f_code.co_filename != tool:
            frames = frames.tb_next  # the traceback from the tool's own frame on, as the interpreter prints it
        traceback.print_exception(type(error), error, frames or error.__traceback__)
        code = 1
    try:
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve() -> None:
    answers = os.dup(1)
    for line in sys.stdin.buffer:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                run_as_main(request, answers)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(1)  # the child never returns to this loop, whatever failed before the tool ran
        os.write(answers, (json.dumps({"pid": pid}) + "\n").encode())
        _, status = os.waitpid(pid, 0)
        os.write(answers, (json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n").encode())


if __name__ == "__main__":
    serve()
