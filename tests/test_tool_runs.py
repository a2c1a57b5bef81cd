"""The tests' fork server (tests/tool_runs.py) runs a Python tool as a fresh interpreter does: the same standard
output, standard error and exit status for each way a tool ends, its argv, working directory, environment and
standard input its own; through the `python3` first on PATH, its signals and its ending with the process
that started it too."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tool_runs import run_python_tool

ENDINGS = {
    "returns": "import sys\nprint('argv', sys.argv[1:], 'path0', sys.path[0])\n",
    "raises": "print('before')\nraise ValueError('boom')\n",
    "exits_with_a_message": "import sys\nsys.exit('a message')\n",
    "exits_with_a_status": "import sys\nsys.stdout.write('unflushed')\nsys.exit(3)\n",
    "killed": "import os, signal\nprint('before', flush=True)\nos.kill(os.getpid(), signal.SIGTERM)\n",
    "reads_stdin_cwd_and_environment": "import os, sys\nprint(sys.stdin.read().upper(), os.getcwd(), "
                                       "os.environ.get('RNNT_TOOL_RUNS_CHECK'))\n",
    "leaves_an_atexit_function_and_a_thread": "import atexit, threading, time\natexit.register(print, 'at exit')\n"
                                              "threading.Thread(target=lambda: (time.sleep(0.2), print('joined'))"
                                              ").start()\n",
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_a_forked_tool_ends_as_a_fresh_interpreter_does(ending, tmp_path, monkeypatch):
    tool = tmp_path / "tools" / f"{ending}.py"
    tool.parent.mkdir()
    tool.write_text(ENDINGS[ending])
    argv = [sys.executable, str(tool), "an argument", "-x"]
    monkeypatch.setenv("RNNT_TOOL_RUNS_CHECK", "set by the test")
    monkeypatch.delenv("RNNT_TESTS_FRESH_INTERPRETERS", raising=False)
    forked = run_python_tool(argv, "some input\n", tmp_path)
    fresh = subprocess.run(argv, input="some input\n", capture_output=True, text=True, cwd=tmp_path)
    assert forked is not None
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert fresh.stdout or fresh.stderr  # each ending says something: a server losing output would differ


def test_a_tool_started_with_other_threads_settings_gets_a_fresh_interpreter(tmp_path, monkeypatch):
    tool = tmp_path / "threads.py"
    tool.write_text("import os\nprint(os.getpid(), os.getppid())\n")
    first = run_python_tool([sys.executable, str(tool)], None, tmp_path)
    assert first is not None and int(first.stdout.split()[1]) != os.getpid()  # a child of the server
    monkeypatch.setenv("OMP_NUM_THREADS", "7")  # read when torch, imported in the server, first computes
    assert run_python_tool([sys.executable, str(tool)], None, tmp_path) is None


def test_the_tools_a_forked_tool_starts_with_its_python_are_forked_too(tmp_path, monkeypatch):
    """tune.py starts its trials as `sys.executable TOOL`, torchrun its ranks as `sys.executable -u TOOL`: a forked
    tool's sys.executable is the tests' python3, so they are forks of the server too (torch imported before they
    start), -u making their output unbuffered as it does a fresh interpreter's."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    child = tmp_path / "child.py"
    child.write_text("import os, sys\nprint('torch' in sys.modules, os.environ.get('PYTHONUNBUFFERED'), "
                     "sys.stdout.write_through)\n")
    parent = tmp_path / "parent.py"
    parent.write_text(f"import subprocess, sys\nfor options in ([], ['-u']):\n"
                      f"    subprocess.run([sys.executable, *options, {str(child)!r}], check=True)\n")
    out = run_python_tool([sys.executable, str(parent)], None, tmp_path)
    assert out is not None and out.stdout.splitlines() == ["True None False", "True 1 True"], out.stderr


def test_a_run_cut_off_takes_its_tool_with_it(tmp_path):
    """A test stopped while its tool runs (its timeout, say) leaves no tool running, and the next run is
    served."""
    marker = tmp_path / "still running"
    tool = tmp_path / "slow.py"
    tool.write_text(f"import time\ntime.sleep(1.0)\nopen({str(marker)!r}, 'w').close()\n")
    quick = tmp_path / "quick.py"
    quick.write_text("print('quick')\n")

    def cut_off(signum, frame):
        raise TimeoutError

    assert run_python_tool([sys.executable, str(quick)], None, tmp_path).stdout == "quick\n"  # the server is up
    previous = signal.signal(signal.SIGALRM, cut_off)  # pytest-timeout's alarm, for these 0.3 s
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(TimeoutError):
            run_python_tool([sys.executable, str(tool)], None, tmp_path)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    after = run_python_tool([sys.executable, str(quick)], None, tmp_path)
    assert (after.returncode, after.stdout) == (0, "quick\n")
    time.sleep(1.2)
    assert not marker.exists()


SHELL_TOOL = """import os, signal, sys, time
print("parent", os.getppid(), "argv", sys.argv[1:], "input", sys.stdin.readline().strip(), flush=True)
print("SIGINT ignored", signal.getsignal(signal.SIGINT) == signal.SIG_IGN, flush=True)
if sys.argv[1:] == ["wait"]:
    signal.signal(signal.SIGTERM, lambda *_: (print("SIGTERM", flush=True), sys.exit(7)))
    open("started", "w").close()
    time.sleep(60)
sys.exit(3)
"""


def shell(script: str, cwd, **popen) -> subprocess.Popen:
    return subprocess.Popen(["bash", "-c", script], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **popen)


def wait_for(path, process) -> None:
    deadline = time.time() + 60
    while not path.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert path.exists(), process.communicate()


def test_python3_on_path_runs_a_tool_forked_with_its_pipes_status_and_signals(tmp_path):
    """A script's `python3 TOOL` (as a recipe's stages start them) is a fork of the server: its standard
    streams the shell's pipes, its exit status the shell's, the SIGTERM a recipe's stop sends reaching the tool's
    handler, and a background job's ignored SIGINT still ignored; `python3 -c`, and a tool started with other
    thread settings, run in a fresh interpreter, a process of the shell's own."""
    (tmp_path / "tool.py").write_text(SHELL_TOOL)
    run = shell("echo $$; echo hello | python3 tool.py x; echo status $?; python3 -c 'import os; print(os.getppid())'"
                "; OMP_NUM_THREADS=7 python3 tool.py < /dev/null | head -1", tmp_path,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # pytest run as a background job
    out, err = run.communicate()  # ignores SIGINT, and so would the shell and its tools
    shell_pid, forked, ignored, status, c, fresh = out.splitlines()
    assert forked.startswith("parent ") and forked.split()[1] != shell_pid, out + err  # a child of the server
    assert forked.endswith("argv ['x'] input hello") and ignored == "SIGINT ignored False", out + err
    assert status == "status 3" and c == shell_pid and fresh.split()[1] == shell_pid, out + err
    run = shell("python3 tool.py wait < /dev/null & tool=$!; while [ ! -e started ]; do sleep 0.05; done; "
                "kill -TERM $tool; wait $tool; echo status $?", tmp_path)
    out, err = run.communicate()
    assert out.splitlines()[1:] == ["SIGINT ignored True", "SIGTERM", "status 7"], out + err


def test_python3_on_path_killed_takes_its_forked_tool_with_it(tmp_path):
    (tmp_path / "tool.py").write_text(SHELL_TOOL)
    run = shell("python3 tool.py wait < /dev/null", tmp_path, start_new_session=True)
    wait_for(tmp_path / "started", run)
    tool = int(run.stdout.readline().split()[1])  # the tool's parent: the server's process for the run
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    deadline = time.time() + 10
    while time.time() < deadline and os.path.exists(f"/proc/{tool}"):
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{tool}")  # it has ended (with the tool, its child)
