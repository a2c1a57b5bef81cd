"""utils/stages.sh: markers that record their inputs and outputs, as the recipes use them."""

import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import time

import pytest

from conftest import ROOT
from stopping_recipes import stop_once_logged

SCRIPT = """set -euo pipefail
stage=${1:-0}; stop_stage=100
. "$ROOT/utils/stages.sh"
if stage_wanted 1 prepare -- input.txt "$OPTION" ${MORE:-} ${LATER:+++} ${LATER:-}; then
  cp input.txt prepared.txt; echo ran 1 >> ran.log
  [ -n "${FAIL:-}" ] && exit 3
  stage_done 1 prepare -- prepared.txt
fi
if stage_wanted 2 use exp -- prepared.txt; then
  echo ran 2 >> ran.log; stage_done 2 use exp
fi
"""


def run(tmp_path, *args, **env):
    result = subprocess.run(["bash", "-c", SCRIPT, "stages", *args], cwd=tmp_path, capture_output=True, text=True,
                            env={"ROOT": str(ROOT), "PATH": "/usr/bin:/bin", "OPTION": "a", **env})
    ran = (tmp_path / "ran.log").read_text().split("\n") if (tmp_path / "ran.log").exists() else []
    (tmp_path / "ran.log").unlink(missing_ok=True)
    return result, [line for line in ran if line]


def test_a_stage_reruns_when_its_inputs_change_and_so_do_the_stages_after_it(tmp_path):
    (tmp_path / "input.txt").write_text("one\n")
    assert run(tmp_path)[1] == ["ran 1", "ran 2"]
    out, ran = run(tmp_path)  # nothing changed: both skipped
    assert ran == [] and out.stdout.count("done before; skipped") == 2
    (tmp_path / "input.txt").write_text("two\n")  # new content: stage 1, then stage 2 whose input it rewrote
    out, ran = run(tmp_path)
    assert ran == ["ran 1", "ran 2"]
    assert ("stage 1 (prepare): its inputs changed since it was done (what changed: input.txt: its content); "
            "running it again") in out.stdout  # which one, not only that one did
    out, ran = run(tmp_path, OPTION="b")  # another option value is another input
    assert ran == ["ran 1"]  # prepared.txt came out the same: stage 2's inputs did not change
    assert "stage 1 (prepare): its inputs changed since it was done (what changed: 'a' now 'b'); run" in out.stdout
    assert (tmp_path / "exp" / ".stages" / "2.use.done").is_file()


def test_an_input_a_newer_recipe_adds_to_a_stage_is_taken_as_it_is_once_then_followed(tmp_path):
    """A stage given a new input (a recipe's data stage its local/ scripts) ran again on the first run after an
    upgrade, and with it every stage after it: data prepared again, shards written again, training set aside.
    Inputs named after ++ are those a newer recipe added: a marker recording exactly the others, as they are now,
    is rewritten with them. Any other input added (an option: a grid of weights) runs the stage again."""
    (tmp_path / "input.txt").write_text("one\n")
    (tmp_path / "script.py").write_text("print(1)\n")
    assert run(tmp_path)[1] == ["ran 1", "ran 2"]
    out, ran = run(tmp_path, LATER="script.py")
    assert ran == [] and out.stdout.count("done before; skipped") == 2, out.stdout + out.stderr
    marker = (tmp_path / "exp" / ".stages" / "1.prepare.done").read_text().splitlines()
    assert [line.split("\t")[1] for line in marker[1:4]] == ["input.txt", "a", "script.py"]
    assert marker[4].startswith("output prepared.txt\t")
    assert run(tmp_path, LATER="script.py")[1] == []
    (tmp_path / "script.py").write_text("print(2)\n")  # now it is followed: edited, the stage runs again
    out, ran = run(tmp_path, LATER="script.py")
    assert ran == ["ran 1"] and "(what changed: script.py: its content)" in out.stdout
    assert run(tmp_path, LATER="script.py", MORE="--weights")[1] == ["ran 1"]  # not after ++: a change
    # markers of before input lines were kept (their fingerprint alone), and of an order of the inputs since changed
    marker_path = tmp_path / "exp" / ".stages" / "1.prepare.done"
    for earlier in ("fingerprint alone", "inputs in another order"):
        assert run(tmp_path, MORE="--weights")[1] == ["ran 1"]
        lines = marker_path.read_text().splitlines()
        inputs = [line for line in lines if line.startswith("input ")]
        kept = [] if earlier == "fingerprint alone" else inputs[::-1]
        marker_path.write_text("\n".join([lines[0], *kept, *lines[1 + len(inputs):]]) + "\n")
        out, ran = run(tmp_path, LATER="script.py", MORE="--weights")
        assert ran == [] and "stage 1 (prepare): done before" in out.stdout, (earlier, out.stdout)
    # a second input added after ++ to a marker that records the first (a recipe's data stage given the corpus's
    # place after its local/ scripts): taken too, not only a marker of the inputs before ++ (the data of every
    # recipe was prepared again); one recorded and removed since, or recorded and changed, runs the stage again
    out, ran = run(tmp_path, LATER="script.py place", MORE="--weights")
    assert ran == [] and "stage 1 (prepare): done before" in out.stdout, out.stdout
    assert [line.split("\t")[1] for line in marker_path.read_text().splitlines()[1:6]] == [
        "input.txt", "a", "--weights", "script.py", "place"]
    (tmp_path / "script.py").write_text("print(3)\n")
    assert run(tmp_path, LATER="script.py place other", MORE="--weights")[1] == ["ran 1"]
    assert run(tmp_path, LATER="place", MORE="--weights")[1] == ["ran 1"]
    (tmp_path / "input.txt").write_text("two\n")  # a recorded input changed as well as one added: run again
    assert run(tmp_path, LATER="script.py other.txt", MORE="--weights")[1] == ["ran 1", "ran 2"]


def test_a_stage_whose_output_is_gone_runs_again(tmp_path):
    (tmp_path / "input.txt").write_text("one\n")
    run(tmp_path)
    (tmp_path / "prepared.txt").unlink()  # the inputs as they were, the output deleted
    out, ran = run(tmp_path)
    assert ran == ["ran 1"] and "stage 1 (prepare): its output prepared.txt is gone or changed; running" in out.stdout
    digest = hashlib.sha256(b"one\n").hexdigest()
    marker = (tmp_path / "exp" / ".stages" / "1.prepare.done").read_text().splitlines()
    assert [line.split("\t")[1] for line in marker[1:3]] == ["input.txt", "a"]  # each input, its digest first
    assert marker[1].startswith("input ") and marker[3:] == [f"output prepared.txt\t{digest}"]
    assert run(tmp_path)[1] == []
    (tmp_path / "prepared.txt").write_text("another run's\n")  # rewritten by something else (another LM's weights)
    out, ran = run(tmp_path)
    assert ran == ["ran 1"] and "its output prepared.txt is gone or changed" in out.stdout


DATA_LIST_SCRIPT = """set -euo pipefail
stage=0; stop_stage=100
. "$ROOT/utils/stages.sh"
if stage_wanted 1 shards -- input.txt; then
  echo ran 1 >> ran.log; stage_done 1 shards -- data.list
fi
if stage_wanted 2 decode -- data.list; then
  echo ran 2 >> ran.log; stage_done 2 decode
fi
"""


def test_a_data_list_is_an_input_with_its_shards_and_an_output_with_them(tmp_path):
    """A shard rewritten under the same name (the list's lines the same) reruns the stage reading the list; a
    shard deleted reruns the stage that wrote the list."""
    env = {"ROOT": str(ROOT), "PATH": f"{ROOT / 'tools' / 'venv' / 'bin'}:/usr/bin:/bin"}
    (tmp_path / "input.txt").write_text("one\n")
    (tmp_path / "a.tar").write_bytes(b"a" * 10)
    (tmp_path / "data.list").write_text(f"{tmp_path / 'a.tar'}\n")

    def ran():
        subprocess.run(["bash", "-c", DATA_LIST_SCRIPT], cwd=tmp_path, env=env, check=True, capture_output=True)
        lines = (tmp_path / "ran.log").read_text().split() if (tmp_path / "ran.log").exists() else []
        (tmp_path / "ran.log").unlink(missing_ok=True)
        return lines

    assert ran() == ["ran", "1", "ran", "2"] and ran() == []
    (tmp_path / "a.tar").write_bytes(b"b" * 11)  # new audio in the shard
    assert ran() == ["ran", "2"]
    (tmp_path / "a.tar").unlink()
    (tmp_path / "data.list").touch()
    assert ran()[:2] == ["ran", "1"]
    # a recipe folder copied with its data/: its list names the first folder's shards (absolute paths), which
    # the copy would train on; the stage that wrote the list runs again (and writes the copy's own)
    (tmp_path / "a.tar").write_bytes(b"a")
    ran()
    assert ran() == []
    shutil.copytree(tmp_path, tmp_path.parent / f"{tmp_path.name}-copy", symlinks=True)
    cwd = tmp_path
    tmp_path = tmp_path.parent / f"{cwd.name}-copy"
    assert ran()[:2] == ["ran", "1"]
    tmp_path = cwd
    assert ran() == []  # the first folder's list names its own shards
    # its shards in a folder linked to another disk: still its own (resolved, the link's target is elsewhere)
    elsewhere = tmp_path.parent / f"{tmp_path.name}-disk"
    elsewhere.mkdir()
    (elsewhere / "a.tar").write_bytes(b"a")
    (tmp_path / "shards").symlink_to(elsewhere)
    (tmp_path / "data.list").write_text(f"{tmp_path / 'shards' / 'a.tar'}\n")
    ran()
    assert ran() == []


def test_an_explicit_stage_reruns_from_there_and_an_interrupted_stage_reruns(tmp_path):
    (tmp_path / "input.txt").write_text("one\n")
    run(tmp_path)
    assert run(tmp_path, "2")[1] == ["ran 2"]  # --stage 2, as in Kaldi: stage 2 and on run again
    (tmp_path / "input.txt").write_text("two\n")
    out, ran = run(tmp_path, FAIL="1")  # killed inside stage 1: no marker, stage 2 never reached
    assert out.returncode == 3 and ran == ["ran 1"]
    assert not (tmp_path / "exp" / ".stages" / "1.prepare.done").exists()
    assert run(tmp_path)[1] == ["ran 1", "ran 2"]


def test_a_stage_logs_each_command_line_output_and_status_and_a_rerun_starts_its_log_anew(tmp_path):
    script = """set -euo pipefail
stage=0; stop_stage=100
. "$ROOT/utils/stages.sh"
if stage_wanted 3 count exp -- "$N"; then
  log=$(stage_log 3 count exp)
  logged "$log" seq "$N"
  logged "$log" bash -c 'echo to stderr >&2; exit "$1"' fail "$STATUS"
  stage_done 3 count exp
fi
echo after
"""

    def run_script(n, status):
        return subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                              env={"ROOT": str(ROOT), "PATH": "/usr/bin:/bin", "N": n, "STATUS": status})

    log = tmp_path / "exp" / "log" / "3.count.log"
    out = run_script("3", "0")
    assert out.returncode == 0 and out.stdout.endswith("1\n2\n3\nto stderr\nafter\n")
    lines = log.read_text().splitlines()
    assert lines[0] == "# seq 3" and lines[2:5] == ["1", "2", "3"] and lines[5].endswith("with status 0")
    assert lines[6].startswith("# bash -c echo") and lines[6].endswith(" fail 0")  # quoted as bash reads it
    assert lines[8] == "to stderr" and lines[9].endswith("with status 0")
    out = run_script("2", "4")  # another input: the stage runs again, its log starts anew; the failure stops it
    assert out.returncode == 4 and "after" not in out.stdout
    assert "bash failed with status 4; its log: exp/log/3.count.log" in out.stderr
    lines = log.read_text().splitlines()
    assert lines[0] == "# seq 2" and lines[-1].endswith("with status 4") and len(lines) == 9
    assert not (tmp_path / "exp" / ".stages" / "3.count.done").exists()


STOPPABLE = """import signal, sys, time
def stop(*_):
    print("saving at step", step, flush=True)
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
for step in range(600):
    print(f"step {step}\\n", end="", flush=True)  # one write: the SIGTERM handler's line never lands inside it
    time.sleep(0.05)
"""


def test_stopping_a_recipe_passes_sigterm_on_to_its_running_command_and_waits_for_it(tmp_path):
    """`kill <run.sh>` stops the stage's command too (the trainer checkpoints on SIGTERM), not only the shell."""
    (tmp_path / "stoppable.py").write_text(STOPPABLE)
    script = """set -euo pipefail
stage=0; stop_stage=100
. "$ROOT/utils/stages.sh"
if stage_wanted 4 train exp; then
  logged "$(stage_log 4 train exp)" python3 stoppable.py
  stage_done 4 train exp
fi
echo never reached
"""
    recipe = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={"ROOT": str(ROOT), "PATH": "/usr/bin:/bin"})
    log = tmp_path / "exp" / "log" / "4.train.log"
    out, err = stop_once_logged(recipe, [log], "step 3")
    assert recipe.returncode == 143 and "never reached" not in out
    assert "stopped by SIGTERM: SIGTERM passed on to the running command" in err
    lines = log.read_text().splitlines()
    saved = [line for line in lines if line.startswith("saving at step")]
    assert len(saved) == 1 and lines.index(saved[0]) == len(lines) - 2  # its last words logged, then the status
    assert lines[-1].startswith("# stopped") and lines[-1].endswith("ended with status 143")
    assert not (tmp_path / "exp" / ".stages" / "4.train.done").exists()
    running = subprocess.run(["pgrep", "-f", "python3 stoppable.py"], capture_output=True, text=True).stdout
    assert running == ""  # nothing left behind


@pytest.mark.parametrize("how", ["ctrl_c", "ctrl_c_through_tee", "hangup"])
def test_ctrl_c_or_a_hangup_stops_the_command_and_its_last_words_reach_the_log(tmp_path, how):
    """Ctrl-C signals the terminal's whole process group: the tee writing the stage's log must outlive it, or
    what the command prints while it stops (the trainer's last checkpoint) is lost, and its print fails. Run as
    `./run.sh 2>&1 | tee`, the same Ctrl-C stops that tee: the shell, writing to it, passes SIGTERM on first
    (it died of SIGPIPE, the training left running on its own). A hangup (the terminal closed) reaches the
    command too: it ignores it and stops on the shell's SIGTERM (it died at once, no checkpoint)."""
    (tmp_path / "stoppable.py").write_text(STOPPABLE)
    script = """set -euo pipefail
stage=0; stop_stage=100
. "$ROOT/utils/stages.sh"
logged "$(stage_log 4 train exp)" python3 stoppable.py
"""
    command = ["bash", "-c", f"bash -c {shlex.quote(script)} 2>&1 | tee run.out" if how == "ctrl_c_through_tee"
               else script]
    # SIGINT and SIGHUP as a terminal's shell leaves them to a command it runs: where the tests themselves were
    # started in the background of a shell without job control (nohup ... &), SIGINT comes ignored (and SIGHUP,
    # nohup's), and a shell cannot trap a signal ignored on entry
    recipe = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={"ROOT": str(ROOT), "PATH": "/usr/bin:/bin"}, start_new_session=True,
                              preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGINT,
                                                                                            signal.SIGHUP)])
    log = tmp_path / "exp" / "log" / "4.train.log"
    deadline = time.monotonic() + 30
    while not (log.exists() and "step 3" in log.read_text().splitlines()):
        assert time.monotonic() < deadline and recipe.poll() is None
        time.sleep(0.05)
    # as a terminal's Ctrl-C or hangup: the shell, the command and the tees
    os.killpg(recipe.pid, signal.SIGHUP if how == "hangup" else signal.SIGINT)
    _, err = recipe.communicate(timeout=30)
    came = {"ctrl_c": "Ctrl-C (SIGINT)", "hangup": "a hangup (SIGHUP)"}.get(how)  # (it said SIGTERM of each)
    assert came is None or f"stopped by {came}: SIGTERM passed on to the running command" in err, err
    lines = log.read_text().splitlines()
    assert any(line.startswith("saving at step") for line in lines), lines[-4:]
    assert lines[-1].startswith("# stopped") and lines[-1].endswith("ended with status 143"), lines[-4:]
    # as a shell killed by the signal would end (128 + its number), the command's own status 143 in the log
    assert how == "ctrl_c_through_tee" or recipe.returncode == {"ctrl_c": 130, "hangup": 129}[how]
    running = subprocess.run(["pgrep", "-f", "python3 stoppable.py"], capture_output=True, text=True).stdout
    assert running == ""


def test_a_word_left_over_or_a_stage_not_a_number_is_refused(tmp_path):
    """parse_options.sh stops at the first word that is not an option: an unquoted list (--methods greedy beam)
    would have dropped the rest silently; --stage abc skipped every stage and ended 0, as --stage after --stop-stage
    did, and a --stage past every stage."""
    script = ('stage=$1; stop_stage=100; shift; . "$ROOT/utils/stages.sh"; check_run_arguments "$@"; '
              'for n in 0 1 2 3; do if stage_wanted $n s$n; then stage_done $n s$n; fi; done; echo fine')
    def run_with(*args):
        return subprocess.run(["bash", "-c", script, "run.sh", *args], capture_output=True, text=True,
                              env={"ROOT": str(ROOT), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    def lines(out):  # without the times stages start at
        return [line.split(" ", 1)[-1] for line in out.stdout.splitlines()]
    assert lines(run_with("2")) == ["stage 2 (s2)", "stage 3 (s3)", "fine"]
    out = run_with("2", "beam", "--stop-stage", "1")
    assert out.returncode == 1 and "run.sh: unexpected argument 'beam': options are --name value" in out.stderr
    out = run_with("abc")
    assert out.returncode == 1 and out.stderr == "run.sh: --stage abc: not a stage number\n"
    out = subprocess.run(["bash", "-c", f"exp=; {script}", "run.sh", "2"], capture_output=True, text=True,
                         env={"ROOT": str(ROOT), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)  # --exp= (an empty one)
    assert out.returncode == 1 and out.stderr == "run.sh: --exp is empty: give the experiment dir (e.g. exp/tiny)\n"
    out = run_with("101")  # after --stop-stage (100 here): nothing ran, and the last run's result was printed
    assert out.returncode == 1 and out.stderr == "run.sh: --stop-stage 100 is before --stage 101: no stage to run\n"
    assert lines(run_with("3")) == ["stage 3 (s3)", "fine"]
    out = run_with("4")  # past the last stage (a typo, or a stage an option turns on): nothing ran, not a success
    assert out.returncode == 1 and out.stdout == "fine\n", out  # stages 0-3 not run
    assert out.stderr.startswith("run.sh: --stage 4: this run has no stage 4 or later (its last is 3;"), out.stderr
    script = script.replace("for n in 0 1 2 3", "for n in 1 2 3").replace("stop_stage=100", "stop_stage=$STOP")
    out = subprocess.run(["bash", "-c", script, "run.sh", "0"], capture_output=True, text=True, cwd=tmp_path,
                         env={"ROOT": str(ROOT), "PATH": "/usr/bin:/bin", "STOP": "0"})  # before every stage
    assert out.returncode == 1 and out.stdout == "fine\n", out
    assert out.stderr == "run.sh: --stop-stage 0: this run has no stage 0 or before (its first is 1); nothing ran\n"


def test_a_search_is_refused_while_a_run_is_under_way_in_its_recipe_dir(tmp_path):
    """egs/an4/tune.sh beside a run.sh: a run preparing the data again rewrote the lists the trials read."""
    recipe = tmp_path / "an4"
    recipe.mkdir()
    shutil.copy(ROOT / "egs" / "an4" / "tune.sh", recipe)
    for name in ("path.sh", "utils", "steps"):
        (recipe / name).symlink_to(ROOT / name)
    script = 'stage=0; stop_stage=100; . utils/stages.sh; check_run_arguments; echo started; sleep 30 & wait'
    run = subprocess.Popen(["bash", "-c", script, "run.sh"], stdout=subprocess.PIPE, text=True, cwd=recipe,
                           start_new_session=True)
    try:
        assert run.stdout.readline() == "started\n"
        tune = subprocess.run(["./tune.sh"], capture_output=True, text=True, cwd=recipe)
        assert tune.returncode == 1 and f"tune.sh: another run is under way in {recipe} (pid {run.pid}" in tune.stderr
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    tune = subprocess.run(["./tune.sh"], capture_output=True, text=True, cwd=recipe)  # alone: on to its own checks
    assert tune.returncode == 1 and "tune.sh: data/train/data.list is missing" in tune.stderr, tune.stderr


def test_a_second_run_in_the_same_dir_is_refused_while_the_first_or_a_command_it_started_runs(tmp_path):
    """Two run.sh in one recipe dir would train into one exp: the second stops at once, naming the first; once the
    first and what it started have ended, a run goes ahead."""
    script = ('stage=0; stop_stage=100; . "$ROOT/utils/stages.sh"; check_run_arguments; echo started; '
              'sleep 30 & wait')
    env = {"ROOT": str(ROOT), "PATH": "/usr/bin:/bin"}
    first = subprocess.Popen(["bash", "-c", script, "run.sh"], stdout=subprocess.PIPE, text=True, env=env,
                             cwd=tmp_path, start_new_session=True)
    assert first.stdout.readline() == "started\n"
    second = subprocess.run(["bash", "-c", script, "run.sh"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert second.returncode == 1 and second.stdout == "", second.stdout
    assert second.stderr.startswith(f"run.sh: another run is under way in {tmp_path} (pid {first.pid}, "), second.stderr
    os.kill(first.pid, signal.SIGKILL)  # the shell killed; the sleep it started holds the lock on
    first.wait()
    held = subprocess.run(["bash", "-c", script, "run.sh"], capture_output=True, text=True, env=env, cwd=tmp_path)
    # said as it is: the run is gone (its pid named it, with 'kill it'), the command holding the lock named
    assert held.returncode == 1 and (f"run.sh: a run in {tmp_path} was killed (pid {first.pid} is gone), and "
                                     "commands it started still run, holding .run.lock: ") in held.stderr, held.stderr
    assert "(sleep 30 )" in held.stderr, held.stderr
    os.killpg(first.pid, signal.SIGKILL)
    quick = script.replace("sleep 30 & wait", "echo done")
    deadline = time.time() + 10
    while True:  # the sleep dies a moment after the signal
        after = subprocess.run(["bash", "-c", quick, "run.sh"], capture_output=True, text=True, env=env, cwd=tmp_path)
        if after.returncode == 0 or time.time() > deadline:
            break
        time.sleep(0.1)
    assert after.returncode == 0 and after.stdout == "started\ndone\n", after.stderr


def test_another_node_of_a_training_runs_beside_node_0_in_the_same_folder(tmp_path):
    """egs/librispeech --nnodes 2: the nodes share the recipe folder (docs/training.md), and node 1 was refused by
    node 0's .run.lock while node 0's torchrun waited for it; a node takes a lock of its own, and two runs of one
    node are still refused."""
    script = ('stage=0; stop_stage=100; node_rank=$NODE; . "$ROOT/utils/stages.sh"; check_run_arguments; '
              'echo started; sleep 30 & wait')
    env = {"ROOT": str(ROOT), "PATH": "/usr/bin:/bin"}
    first = subprocess.Popen(["bash", "-c", script, "run.sh"], stdout=subprocess.PIPE, text=True,
                             env={**env, "NODE": "0"}, cwd=tmp_path, start_new_session=True)
    try:
        assert first.stdout.readline() == "started\n"
        quick = script.replace("sleep 30 & wait", "echo done")
        node1 = subprocess.run(["bash", "-c", quick, "run.sh"], capture_output=True, text=True,
                               env={**env, "NODE": "1"}, cwd=tmp_path)
        assert node1.returncode == 0 and node1.stdout == "started\ndone\n", node1.stderr
        again = subprocess.run(["bash", "-c", quick, "run.sh"], capture_output=True, text=True,
                               env={**env, "NODE": "0"}, cwd=tmp_path)
        assert again.returncode == 1 and "holding .run.lock)" in again.stderr, again.stderr
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()


def test_a_marker_that_cannot_be_written_stops_the_run_rather_than_skipping_its_stage(tmp_path):
    """A stage name longer than a file name can be (a combination of many systems): stage_wanted's marker write
    failed inside the caller's if, and the stage was skipped with the run ending well."""
    name = "x" * 300
    script = (f'stage=0; stop_stage=100; . "$ROOT/utils/stages.sh"; '
              f'if stage_wanted 9 {name}; then echo ran; else echo skipped; fi; echo after')
    out = subprocess.run(["bash", "-c", script, "run.sh"], capture_output=True, text=True,
                         env={"ROOT": str(ROOT), "PATH": os.environ["PATH"]}, cwd=tmp_path)
    assert out.returncode == 1 and "skipped" not in out.stdout and "after" not in out.stdout, out.stdout
    assert "File name too long" in out.stderr, out.stderr


def test_an_explicit_stage_runs_a_stage_once_in_a_run(tmp_path):
    """--stage N runs its stages again whatever their markers say, but a stage asked for twice in one run (a seed's
    dev decode, asked again for the seed chosen) runs once, its inputs the same."""
    script = """set -euo pipefail
stage=1; stop_stage=100
. "$ROOT/utils/stages.sh"
for _ in 1 2; do
  if stage_wanted 1 prepare -- input.txt; then echo ran >> ran.log; cp input.txt out.txt; stage_done 1 prepare; fi
done
"""
    (tmp_path / "input.txt").write_text("one\n")
    for _ in range(2):  # each run: once
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path,
                             env={"ROOT": str(ROOT), "PATH": "/usr/bin:/bin"})
        assert out.returncode == 0, out.stderr
        assert (tmp_path / "ran.log").read_text() == "ran\n" and "done before; skipped" in out.stdout
        (tmp_path / "ran.log").unlink()


def test_a_marker_written_before_data_lists_counted_their_shards_is_taken_once_and_rewritten(tmp_path):
    """A marker of the fingerprint before (a data list by its own bytes): the stage is done, not run again
    after an update, and its marker holds the new fingerprint from then on; where python3 cannot read a list
    the recipe stops, naming it (a stage would otherwise be skipped or run on an empty fingerprint)."""
    env = {"ROOT": str(ROOT), "PATH": f"{ROOT / 'tools' / 'venv' / 'bin'}:/usr/bin:/bin"}
    (tmp_path / "a.tar").write_bytes(b"a")
    (tmp_path / "data.list").write_text(f"{tmp_path / 'a.tar'}\n")
    (tmp_path / "input.txt").write_text("one\n")
    old_lines = "".join(f"{name} file {hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()}\n"
                        for name in ("input.txt", "data.list"))
    marks = tmp_path / "exp" / ".stages"
    marks.mkdir(parents=True)
    (marks / "2.decode.done").write_text(hashlib.sha256(old_lines.encode()).hexdigest() + "\n")
    script = """set -euo pipefail; stage=0 stop_stage=100; . "$ROOT/utils/stages.sh"
if stage_wanted 2 decode -- input.txt data.list; then echo ran; stage_done 2 decode; fi"""
    first = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert first.returncode == 0 and "done before; skipped" in first.stdout and "ran" not in first.stdout
    assert (marks / "2.decode.done").read_text().split("\n")[0] != hashlib.sha256(old_lines.encode()).hexdigest()
    again = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "done before; skipped" in again.stdout
    (tmp_path / "a.tar").write_bytes(b"b" * 3)  # new audio: the new fingerprint sees it, the old could not
    assert "ran" in subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                                   text=True).stdout
    no_rnnt = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                             env={"ROOT": str(ROOT), "PATH": "/usr/bin:/bin", "PYTHONPATH": "/nonexistent"})
    assert no_rnnt.returncode == 1 and "cannot fingerprint the data list data.list" in no_rnnt.stderr


def test_a_result_printed_by_a_run_that_left_out_a_changed_stage_says_so(tmp_path):
    """--stop-stage below training after a config edit: the old model's WER is printed with a note that the
    training left out has other inputs now (it was printed as if current)."""
    script = """set -euo pipefail; stage=0; stop_stage=${1:-100}; . "$ROOT/utils/stages.sh"; . "$ROOT/utils/decoding.sh"
if stage_wanted 4 train exp -- conf.yaml; then stage_done 4 train exp; fi
mkdir -p exp/decode-test-greedy-epoch-1
echo "%WER 5.00 [ 1 / 20, 0 ins, 0 del, 1 sub ]" > exp/decode-test-greedy-epoch-1/wer
decode_result "corpus: test" exp epoch-1 test greedy"""
    env = {"ROOT": str(ROOT), "PATH": "/usr/bin:/bin"}
    (tmp_path / "conf.yaml").write_text("lr: 0.003\n")
    run = lambda *args: subprocess.run(["bash", "-c", script, "x", *args], cwd=tmp_path, env=env,  # noqa: E731
                                       capture_output=True, text=True, check=True).stdout
    assert run().splitlines()[-1] == "corpus: test %WER 5.00 [ 1 / 20, 0 ins, 0 del, 1 sub ]"
    (tmp_path / "conf.yaml").write_text("lr: 0.002\n")
    assert run("3").splitlines()[-2:] == ["corpus: test %WER 5.00 [ 1 / 20, 0 ins, 0 del, 1 sub ]", (
        "  (from before your changes: stage 4 (train in exp) (what changed: conf.yaml: its content); left out by "
        "--stage/--stop-stage, has other inputs now)")]
    assert "from before your changes" not in run()  # run: the training's inputs are its marker's again
    # edited again, and the training stopped half way (its marker gone, the pending one left): the old model's
    # result is no more current than before
    (tmp_path / "conf.yaml").write_text("lr: 0.001\n")
    marks = tmp_path / "exp" / ".stages"
    (marks / "4.train.done").rename(marks / "4.train.done.pending")
    assert run("3").splitlines()[-1] == ("  (from before your changes: stage 4 (train in exp), stopped before it "
                                         "ended; left out by --stage/--stop-stage, has other inputs now)")



def test_an_input_spelled_another_way_is_the_same_input_and_a_marker_naming_its_path_is_taken_once(tmp_path):
    """A corpus dir given as DIR, DIR/ or through a link, a config as conf.yaml or ./conf.yaml: one input (the data
    stage ran again, and the shards and the training after it); a marker of before, whose fingerprint held each
    input's path, is done once and rewritten."""
    script = """set -euo pipefail; stage=0 stop_stage=100; . "$ROOT/utils/stages.sh"
if stage_wanted 1 data -- "$1" "$2"; then echo ran; stage_done 1 data; fi"""
    env = {"ROOT": str(ROOT), "PATH": "/usr/bin:/bin"}
    run = lambda *args: subprocess.run(["bash", "-c", script, "x", *args], cwd=tmp_path, env=env,  # noqa: E731
                                       capture_output=True, text=True, check=True).stdout
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.wav").write_bytes(b"RIFF")
    (tmp_path / "conf.yaml").write_text("lr: 0.003\n")
    (tmp_path / "link").symlink_to(tmp_path / "corpus")
    assert run("corpus", "conf.yaml").endswith("stage 1 (data)\nran\n")
    for spelling in (("corpus/", "./conf.yaml"), (str(tmp_path / "link"), str(tmp_path / "conf.yaml"))):
        assert "done before; skipped" in run(*spelling), spelling
    (tmp_path / "corpus" / "b.wav").write_bytes(b"RIFF")
    rerun = run("link/", "conf.yaml")  # new content, through any spelling
    assert rerun.endswith("its inputs changed since it was done (what changed: link/: its content); running it "
                          "again\nran\n")
    mark = tmp_path / "exp" / ".stages" / "1.data.done"
    named = subprocess.run(["bash", "-c", '. "$ROOT/utils/stages.sh"; stage_fingerprint --named corpus conf.yaml'],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.strip()
    now = mark.read_text()
    mark.write_text(named + "\n")  # as the stages.sh before this one wrote it
    assert named != now.strip() and "done before; skipped" in run("corpus", "conf.yaml")
    assert mark.read_text().split("\n")[0] == now.split("\n")[0]  # the fingerprint of now


def test_a_corpus_dir_given_once_is_the_corpus_dir_of_the_runs_after_it(tmp_path):
    """./run.sh --stage 6 without the --corpus-dir of the first run: the new-corpus recipe refused it, the others
    found the data stage's inputs changed (the download's path) and said the result was from before a change."""
    script = """set -euo pipefail; stage=0 stop_stage=100; . "$ROOT/utils/stages.sh"
corpus_dir=$(corpus_dir_of "$1"); echo "corpus: $corpus_dir"
if stage_wanted 1 data -- "${corpus_dir:-downloads/corpus}"; then stage_done 1 data; fi"""
    env = {"ROOT": str(ROOT), "PATH": "/usr/bin:/bin"}
    run = lambda given: subprocess.run(["bash", "-c", script, "run.sh", given], cwd=tmp_path, env=env,  # noqa: E731
                                       capture_output=True, text=True, check=True)
    assert run("").stdout.splitlines()[0] == "corpus: "  # none given ever: the recipe downloads
    (tmp_path / "mine").mkdir()
    assert run(str(tmp_path / "mine")).stdout.splitlines()[0] == f"corpus: {tmp_path / 'mine'}"
    again = run("")
    assert again.stdout.splitlines()[0] == f"corpus: {tmp_path / 'mine'}" and "done before; skipped" in again.stdout
    assert again.stderr == f"run.sh: --corpus-dir {tmp_path / 'mine'}, as given before (data/.corpus_dir)\n"
    assert run(str(tmp_path / "typo")).stdout.splitlines()[0] == f"corpus: {tmp_path / 'typo'}"  # as given,
    assert run("").stdout.splitlines()[0] == f"corpus: {tmp_path / 'mine'}"  # not kept over the one before
    (tmp_path / "mine").rmdir()  # gone since: not given
    assert run("").stdout.splitlines()[0] == "corpus: "


def test_an_option_given_before_is_forgotten_with_none(tmp_path):
    """Back to each recording its own speaker took deleting data/.speaker_regex by hand: an empty value is the one
    given before."""
    script = ('set -euo pipefail; . "$ROOT/utils/stages.sh"; has_group() { [[ $1 == *"("* ]]; }\n'
              'echo "regex: [$(given_before speaker-regex data/.speaker_regex "$1" has_group)]"')
    env = {"ROOT": str(ROOT), "PATH": "/usr/bin:/bin"}
    run = lambda given: subprocess.run(["bash", "-c", script, "run.sh", given], cwd=tmp_path, env=env,  # noqa: E731
                                       capture_output=True, text=True, check=True)
    assert run("^([^/]+)/").stdout == "regex: [^([^/]+)/]\n" and run("").stdout == "regex: [^([^/]+)/]\n"
    forgot = run("none")
    assert forgot.stdout == "regex: []\n" and not (tmp_path / "data" / ".speaker_regex").exists()
    assert forgot.stderr == "run.sh: --speaker-regex none: ^([^/]+)/, given before, forgotten\n"
    assert run("").stdout == "regex: []\n" and run("none").stderr == ""


def test_an_experiment_dir_given_with_a_trailing_slash_is_the_dir(tmp_path):
    """exp/t/ with --seeds 2 trained the second seed into exp/t/_seed1, inside the first seed's experiment (set
    aside with it when its config changed)."""
    script = ('stage=0 stop_stage=1 exp=exp/t// init_exp=$1 companion_exp=; . "$ROOT/utils/stages.sh"; '
              'check_run_arguments; echo "[$exp] [$init_exp] [$companion_exp] [${undefined_exp-unset}]"')
    for init, expected in (("exp/u/", "[exp/t] [exp/u] [] [unset]"), ("/", "")):  # / kept: it holds --exp
        out = subprocess.run(["bash", "-c", script, "run.sh", init], capture_output=True, text=True, cwd=tmp_path,
                             env={"ROOT": str(ROOT), "PATH": "/usr/bin:/bin"})
        assert out.stdout.strip() == expected, out.stderr
    assert out.stderr.startswith("run.sh: --init-exp /: it holds the run's stage markers (exp/.stages)")


def test_another_file_given_for_an_input_is_named_with_the_one_before(tmp_path):
    """--train-config conf/b.yaml after conf/a.yaml said 'conf/b.yaml: its content', as if a.yaml had been
    edited; an edited file, however spelt, or one renamed, still says its content."""
    script = """set -euo pipefail; stage=0 stop_stage=100; . "$ROOT/utils/stages.sh"
if stage_wanted 1 train -- "$1"; then stage_done 1 train; fi"""
    run = lambda given: subprocess.run(["bash", "-c", script, "run.sh", given], cwd=tmp_path, check=True,  # noqa: E731
                                       env={"ROOT": str(ROOT), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    (tmp_path / "a.yaml").write_text("lr: 1\n")
    (tmp_path / "b.yaml").write_text("lr: 2\n")
    run("a.yaml")
    assert "(what changed: 'a.yaml' now 'b.yaml'); running it again" in run("b.yaml").stdout
    (tmp_path / "b.yaml").write_text("lr: 3\n")
    assert "(what changed: ./b.yaml: its content)" in run("./b.yaml").stdout
    (tmp_path / "b.yaml").rename(tmp_path / "c.yaml")
    (tmp_path / "c.yaml").write_text("lr: 4\n")
    assert "(what changed: c.yaml: its content)" in run("c.yaml").stdout
