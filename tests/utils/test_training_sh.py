"""utils/training.sh: a recipe's --seeds, the same model trained with several seeds and the best on dev kept."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from stopping_recipes import stop_once_logged

STUBS = """
train_wanted() { [[ " ${TRAINED:-} " != *" $(basename "$3") "* ]]; }  # $TRAINED: the models already trained
train_model() { echo "train $3 seed[${6:-}] from[$5] threads[${OMP_NUM_THREADS:-all}]" >> "$TRAINED_LOG"; }
average_stage() { echo "average $2 $3"; }
model_tag_of() { echo avg2-epoch-3; }
decode_stages() {  # the dev WER of each model, from $WERS (name=wer ...)
  local wer
  echo "decode $2 $3 $5 [$6]"
  wer=$(tr ' ' '\\n' <<< "$WERS" | sed -n "s|^$(basename "$2")=||p")
  mkdir -p "$2/decode-$6-$5-$3"
  echo "%WER $wer [ 1 / 10, 0 ins, 0 del, 1 sub ]" > "$2/decode-$6-$5-$3/wer"
}
"""


def untouched_environment() -> dict[str, str]:
    """This process's environment without OMP_NUM_THREADS (the test runner sets it), which seed_stages sets itself."""
    return {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}


def sourced(script: str, **env: str) -> subprocess.CompletedProcess:
    """SCRIPT run by bash in the repo with the recipe helpers seed_stages needs sourced, as run.sh does."""
    env = dict(untouched_environment(), PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}", **env)
    helpers = ". utils/stages.sh; . utils/decoding.sh; . utils/training.sh"
    return subprocess.run(["bash", "-c", f"set -euo pipefail; {helpers}\n{script}"], cwd=ROOT, capture_output=True,
                          text=True, env=env)


def run_seed_stages(tmp_path, seeds, wers: str, stop_stage: int = 100, **env: str) -> subprocess.CompletedProcess:
    return sourced(f'stage=0 stop_stage={stop_stage}\n{STUBS}\nexp={tmp_path}/m; seed_stages 4 5 6 conf/t.yaml '
                   f'"$exp" data/lang init.pt {seeds} 2 modified_beam_lm\n'
                   'echo "others=${other_seeds[*]}"; echo "exp=$exp"', WERS=wers, **env)


def chosen(tmp_path, seeds: int, wers: str, stop_stage: int = 100, trained: str = ""):
    """The steps seed_stages took (the trainings first, sorted: they may run at once) and the exp it chose."""
    record = tmp_path / "trained.log"
    record.unlink(missing_ok=True)
    out = run_seed_stages(tmp_path, seeds, wers, stop_stage, TRAINED=trained, TRAINED_LOG=str(record))
    assert out.returncode == 0, out.stderr
    trainings = sorted(record.read_text().splitlines()) if record.exists() else []
    lines = [line.replace(str(tmp_path) + "/", "") for line in trainings + out.stdout.splitlines()
             if "trainings" not in line and not line.startswith("others=")]
    return lines[:-1], lines[-1].removeprefix("exp=")


def threads_each(seeds: int) -> str:
    """OMP_NUM_THREADS for each of `seeds` trainings at once: the cores (as nproc counts them) shared."""
    return str(max(1, len(os.sched_getaffinity(0)) // seeds))


def test_one_seed_trains_the_model_alone(tmp_path):
    steps, exp = chosen(tmp_path, 1, "")
    assert steps == ["train m seed[] from[init.pt] threads[all]"] and exp == "m"


def test_several_seeds_train_one_model_each_and_dev_chooses(tmp_path):
    steps, exp = chosen(tmp_path, 3, "m=6.70 m_seed1=5.53 m_seed2=9.05")
    threads = threads_each(3)  # the three at once, each on its share of the cores
    assert steps[:3] == [f"train m seed[] from[init.pt] threads[{threads}]",
                         f"train m_seed1 seed[1] from[init.pt] threads[{threads}]",
                         f"train m_seed2 seed[2] from[init.pt] threads[{threads}]"]
    assert steps[3:9] == [f"average {name} 2" for name in ("m", "m_seed1", "m_seed2")] + [
        f"decode {name} avg2-epoch-3 modified_beam_lm [dev]" for name in ("m", "m_seed1", "m_seed2")]
    assert exp == "m_seed1" and "m_seed1 is the best on dev (modified_beam_lm, %WER: m 6.70 m_seed1 5.53 m_seed2 " \
        "9.05)" in steps[9]
    assert chosen(tmp_path, 2, "m=6.37 m_seed1=6.37")[1] == "m"  # a tie: the first
    # the seeds not chosen, for --combine default (utils/combination.sh), in their order
    out = run_seed_stages(tmp_path, 3, "m=6.70 m_seed1=5.53 m_seed2=9.05", TRAINED="m m_seed1 m_seed2")
    assert f"others={tmp_path}/m {tmp_path}/m_seed2\n" in out.stdout, out.stdout
    assert chosen(tmp_path, 2, "m=10.2 m_seed1=9.8")[1] == "m_seed1"  # compared as numbers, not as text


def test_without_the_decoding_stage_nothing_is_chosen_and_every_seed_is_averaged(tmp_path):
    """--stop-stage 5 averages every seed, not only the base model: a later --stage 6 finds them all."""
    steps, exp = chosen(tmp_path, 2, "m=6.70 m_seed1=5.53", stop_stage=5)
    threads = threads_each(2)
    assert steps == [f"train m seed[] from[init.pt] threads[{threads}]",
                     f"train m_seed1 seed[1] from[init.pt] threads[{threads}]",
                     "average m 2", "average m_seed1 2"] and exp == "m"
    steps, exp = chosen(tmp_path, 2, "m=6.70 m_seed1=5.53", stop_stage=4)
    assert len(steps) == 2 and exp == "m"


def test_a_seed_trained_before_is_not_trained_again_and_one_left_gets_every_core(tmp_path):
    steps, exp = chosen(tmp_path, 2, "m=6.70 m_seed1=5.53", trained="m")
    assert [step for step in steps if "train" in step] == ["train m_seed1 seed[1] from[init.pt] threads[all]"]
    assert exp == "m_seed1"


def test_the_init_model_and_its_companion_train_at_once_and_are_averaged(tmp_path):
    """init_model_stage with a companion (run.sh's --companion-config): both trainings wanted run at once,
    each on its share of the cores; both are averaged (each by its own count); init_checkpoint is the init
    model's average. A companion trained before leaves the init model every core; none, the same."""
    record = tmp_path / "trained.log"
    script = (f"stage=0 stop_stage=100\n{STUBS}\ninit_model_stage 4 d.yaml exp/d lang 5 $COMPANION exp/c 10\n"
              'echo "init=$init_checkpoint"')
    for trained, companion, trainings in (
            ("", "c.yaml", [f"train exp/c seed[] from[] threads[{threads_each(2)}]",
                            f"train exp/d seed[] from[] threads[{threads_each(2)}]"]),
            ("c", "c.yaml", ["train exp/d seed[] from[] threads[all]"]),
            ("", "''", ["train exp/d seed[] from[] threads[all]"])):
        record.unlink(missing_ok=True)
        out = sourced(script.replace("$COMPANION", companion), TRAINED=trained, TRAINED_LOG=str(record))
        assert out.returncode == 0, out.stderr
        assert sorted(record.read_text().splitlines()) == trainings
        averages = [line for line in out.stdout.splitlines() if line.startswith("average")]
        assert averages == (["average exp/c 10"] if companion == "c.yaml" else []) + ["average exp/d 5"]
        assert out.stdout.splitlines()[-1] == "init=exp/d/avg-2.pt"
        assert ("its companion c.yaml into exp/c" in out.stdout) == (companion == "c.yaml")


def test_out_of_the_runs_stages_the_init_model_is_only_named(tmp_path):
    """--stage 5 or --stop-stage 3: nothing trained or averaged, but init_checkpoint names the model trained
    before, so that the transducer's train stage reads its inputs as its run did (without it, every such run
    called the trained model out of date: 'stage 4 (train) has other inputs now')."""
    record = tmp_path / "trained.log"
    for stages in ("stage=5 stop_stage=100", "stage=0 stop_stage=3"):
        out = sourced(f"{stages}\n{STUBS}\ninit_model_stage 4 d.yaml exp/d lang 5 c.yaml exp/c 10\n"
                      'echo "init=$init_checkpoint"', TRAINED="", TRAINED_LOG=str(record))
        assert out.returncode == 0, out.stderr
        assert not record.exists() and "average" not in out.stdout and "first d.yaml" not in out.stdout
        assert out.stdout.splitlines()[-1] == "init=exp/d/avg-2.pt"
    # but both models' stages are asked about, so that a config of theirs edited since marks the results printed
    # as from before the changes (only the main model's edits did)
    out = sourced(f"stage=5 stop_stage=100\n{STUBS}\n"
                  'train_wanted() { echo "asked $2 $3" >> "$TRAINED_LOG"; false; }\n'
                  "init_model_stage 4 d.yaml exp/d lang 5 c.yaml exp/c 10", TRAINED_LOG=str(record))
    assert out.returncode == 0 and record.read_text().splitlines() == ["asked d.yaml exp/d", "asked c.yaml exp/c"]


def test_a_seed_without_its_dev_decode_stops_with_a_message(tmp_path):
    out = sourced("train_wanted() { false; }; average_stage() { :; }; decode_stages() { :; }\n"
                  "model_tag_of() { echo epoch-3; }\n"
                  f"stage=7 stop_stage=100; seed_stages 4 5 6 c.yaml {tmp_path}/m lang '' 2 0 greedy")
    assert out.returncode == 1 and f"{tmp_path}/m/decode-dev-greedy-epoch-3/wer missing: run stage 6" in out.stderr


def test_a_wrong_number_of_seeds_stops_before_training(tmp_path):
    for seeds in ("0", "two", "-1"):
        out = run_seed_stages(tmp_path, seeds, "")
        assert out.returncode == 1 and f"--seeds takes a number of 1 or more, got '{seeds}'" in out.stderr
        assert "train" not in out.stdout


FAKE_TRAIN = """#!/usr/bin/env python3
import os, signal, sys, time
exp = sys.argv[sys.argv.index("--exp-dir") + 1]
seed = sys.argv[sys.argv.index("--seed") + 1] if "--seed" in sys.argv else "config"
def stop(*_):
    say("saving at step", step)
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
def say(*words):  # one write: the ranks of a torchrun share the log
    print(" ".join(map(str, words)) + "\\n", end="", flush=True)
say("threads", os.environ.get("OMP_NUM_THREADS", "all"), "started", time.time(), "rank", os.environ.get("RANK", "-"),
    "of", os.environ.get("WORLD_SIZE", "-"), "args", *sys.argv[1:])
os.makedirs(exp, exist_ok=True)
open(os.path.join(exp, "config.yaml"), "w").close()  # as steps/train.py writes it first: an output of the stage
for step in range(int(os.environ["STEPS"])):
    print(f"step {step}\\n", end="", flush=True)  # one write: the SIGTERM handler's line never lands inside it
    time.sleep(0.05)
say("ended", time.time())
open(os.path.join(exp, "epoch-1.pt"), "w").close()  # an epoch's checkpoint: what the stage leaves to decode
sys.exit(3 if seed == os.environ.get("FAILING_SEED") else 0)
"""


def recipe_with_fake_trainer(tmp_path, steps: int, failing_seed: str = "", options: str = "") -> subprocess.Popen:
    """seed_stages with 2 seeds up to training, in a recipe dir whose steps/train.py is FAKE_TRAIN; OPTIONS set
    run.sh's variables first (ngpu=0 cpu_ranks=2)."""
    (tmp_path / "steps").mkdir()
    (tmp_path / "c.yaml").write_text("train: {}\n")  # read as a real one: the stage's inputs
    for name, text in (("train.py", FAKE_TRAIN), ("plot_training.py", "#!/bin/sh\n")):
        (tmp_path / "steps" / name).write_text(text)
        (tmp_path / "steps" / name).chmod(0o755)
    script = (f". {ROOT}/utils/stages.sh; . {ROOT}/utils/decoding.sh; . {ROOT}/utils/training.sh\n"
              f"{options}\nstage=0 stop_stage=4; seed_stages 4 5 6 c.yaml exp/m lang '' 2 0 greedy; echo never stopped")
    env = dict(untouched_environment(), STEPS=str(steps), FAILING_SEED=failing_seed,
               PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")  # torchrun
    return subprocess.Popen(["bash", "-c", f"set -euo pipefail; {script}"], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def training_log(tmp_path, name: str) -> list[str]:
    path = tmp_path / "exp" / name / "log" / "4.train.log"
    return path.read_text().splitlines() if path.exists() else []


def test_seeds_train_at_once_each_on_its_share_of_the_cores_their_output_in_their_logs(tmp_path):
    recipe = recipe_with_fake_trainer(tmp_path, steps=20)
    out, err = recipe.communicate(timeout=60)
    assert recipe.returncode == 0, err
    spans = {}
    for name in ("m", "m_seed1"):
        log = training_log(tmp_path, name)
        threads, started = log[2].split()[1], float(log[2].split()[3])
        assert threads == threads_each(2) and "step 19" in log
        spans[name] = started, float(next(line for line in log if line.startswith("ended")).split()[1])
        assert (tmp_path / "exp" / name / ".stages" / "4.train.done").exists()
    assert spans["m"][0] < spans["m_seed1"][1] and spans["m_seed1"][0] < spans["m"][1]  # at the same time
    assert "2 trainings at once" in out and "step 3" not in out  # the terminal gets a line, the logs the rest


def test_a_failing_seed_fails_the_stage_and_the_other_still_finishes(tmp_path):
    recipe = recipe_with_fake_trainer(tmp_path, steps=5, failing_seed="1")
    out, err = recipe.communicate(timeout=60)
    assert recipe.returncode != 0 and "never stopped" not in out
    assert "failed with status 3; its log: exp/m_seed1/log/4.train.log" in err
    assert (tmp_path / "exp" / "m" / ".stages" / "4.train.done").exists()
    assert not (tmp_path / "exp" / "m_seed1" / ".stages" / "4.train.done").exists()


def test_stopping_the_recipe_stops_every_training_running_at_once(tmp_path):
    recipe = recipe_with_fake_trainer(tmp_path, steps=600)
    logs = [tmp_path / "exp" / name / "log" / "4.train.log" for name in ("m", "m_seed1")]
    out, err = stop_once_logged(recipe, logs, "step 3")
    assert recipe.returncode == 143 and "never stopped" not in out
    assert "SIGTERM passed on to the stages running at once" in err
    for name in ("m", "m_seed1"):
        log = training_log(tmp_path, name)
        assert log[-2].startswith("saving at step") and log[-1].startswith("# stopped")
    pids = subprocess.run(["pgrep", "-f", f"{tmp_path}|steps/train.py --config c.yaml"], capture_output=True,
                          text=True).stdout.split()
    assert [pid for pid in pids if of_this_test(pid, tmp_path)] == []  # nothing left behind


def of_this_test(pid: str, tmp_path) -> bool:
    """Whether a process runs in or names tmp_path (other tests' fake trainings may run beside this one)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return str(tmp_path) in os.path.realpath(f"/proc/{pid}/cwd") + f.read().decode(errors="replace")
    except OSError:  # ended since
        return False


@pytest.mark.slow  # trainings of their own (8-11 s); CI runs it
def test_the_training_stage_runs_again_when_its_lexicon_changed_under_the_same_phones(tmp_path):
    """A phone lang dir's lexicon maps words to the units: changed, it trains other targets, so the training
    stage is out of date though units.txt is the same (steps/train.py --resume then sets the experiment aside)."""
    lang, exp = tmp_path / "lang", tmp_path / "exp"
    lang.mkdir()
    (lang / "units.txt").write_text("<blank> 0\n<unk> 1\ne 2\n")
    (lang / "units.json").write_text('{"type": "phone", "lexicon": "lexicon.txt"}')
    (lang / "lexicon.txt").write_text("NO n o\n")
    config = tmp_path / "c.yaml"
    config.write_text("train: {}\n")
    script = (f"stage=0 stop_stage=100; if train_wanted 4 {config} {exp} {lang}; then stage_done 4 train {exp}; fi; "
              f"train_wanted 4 {config} {exp} {lang} || echo skipped")
    out = sourced(script)
    assert out.returncode == 0 and out.stdout.rstrip().endswith("skipped"), out.stdout + out.stderr
    (lang / "lexicon.txt").write_text("NO o n\n")
    out = sourced(f"stage=0 stop_stage=100; train_wanted 4 {config} {exp} {lang} || echo skipped")
    assert "stage 4 (train): its inputs changed since it was done (what changed: " in out.stdout, out.stdout


@pytest.mark.slow
def test_the_training_stage_runs_again_when_a_file_its_config_names_changed(tmp_path):
    """train.init_from's checkpoint trained again, or data.features.cmvn's statistics computed again: the config's
    text is the same, so the stage was skipped and the old model decoded (steps/train.py sees both, but only when
    the stage runs)."""
    lang, exp = tmp_path / "lang", tmp_path / "exp"
    lang.mkdir()
    (lang / "units.txt").write_text("<blank> 0\n<unk> 1\ne 2\n")
    (lang / "units.json").write_text('{"type": "char"}')
    (tmp_path / "init.pt").write_bytes(b"first")
    (tmp_path / "cmvn.json").write_text("{}")
    config = tmp_path / "c.yaml"
    config.write_text(f"train: {{init_from: {tmp_path / 'init.pt'}}}\n"
                      f"data: {{features: {{cmvn: {tmp_path / 'cmvn.json'}}}}}\n")
    check = f"stage=0 stop_stage=100; train_wanted 4 {config} {exp} {lang} || echo skipped"
    out = sourced(f"stage=0 stop_stage=100; if train_wanted 4 {config} {exp} {lang}; then stage_done 4 train {exp}; "
                  f"fi; {check}")
    assert out.returncode == 0 and out.stdout.rstrip().endswith("skipped"), out.stdout + out.stderr
    for named, content in (("init.pt", b"trained again"), ("cmvn.json", b'{"mean": []}')):
        (tmp_path / named).write_bytes(content)
        out = sourced(f"{check.replace(' || echo skipped', '')} && stage_done 4 train {exp}")
        assert f"what changed: {tmp_path / named}: its content" in out.stdout, out.stdout + out.stderr
        assert sourced(check).stdout.rstrip().endswith("skipped")
    # the recipe's own INIT (run.sh's --init-exp) overrides train.init_from: the config's checkpoint is not an input
    (tmp_path / "own.pt").write_bytes(b"own")
    with_init = check.replace(f"{lang} ||", f"{lang} {tmp_path / 'own.pt'} ||")
    sourced(f"{with_init.replace(' || echo skipped', '')} && stage_done 4 train {exp}")
    (tmp_path / "init.pt").write_bytes(b"trained a third time")
    assert sourced(with_init).stdout.rstrip().endswith("skipped")
    # a Kaldi matrix's statistics, then steps/compute_cmvn_stats.py's JSON beside it, which read_cmvn reads instead
    (tmp_path / "cmvn.ark").write_text("[ 1 2 3 ]")
    config.write_text(f"data: {{features: {{cmvn: {tmp_path / 'cmvn.ark'}}}}}\n")
    sourced(f"{check.replace(' || echo skipped', '')} && stage_done 4 train {exp}")
    assert sourced(check).stdout.rstrip().endswith("skipped")
    (tmp_path / "cmvn.ark.json").write_text('{"mean": [0], "std": [1]}')
    out = sourced(check)
    assert f"what changed: {tmp_path / 'cmvn.ark.json'}: its content" in out.stdout, out.stdout + out.stderr


def training_command(**variables: str) -> list[str]:
    """utils/training.sh's training_command, with run.sh's VARIABLES set (ngpu, cpu_ranks, nnodes, ...)."""
    settings = " ".join(f"{name}={value}" for name, value in variables.items())
    out = sourced(f"{settings}\ntraining_command")
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_training_command_for_gpus_cpu_ranks_and_nodes():
    assert training_command() == ["steps/train.py"]  # the config's train.device: auto, a GPU where there is one
    assert training_command(ngpu="0") == ["steps/train.py", "--device", "cpu"]
    assert training_command(ngpu="1") == ["steps/train.py", "--device", "cuda"]
    threads = str(max(1, len(os.sched_getaffinity(0)) // 2))  # nproc's cores shared: torchrun would give each one
    waits = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT=600"  # for a rank's SIGTERM to reach its checkpoint, not torchrun's 30 s
    assert training_command(ngpu="0", cpu_ranks="2") == [
        "env", f"OMP_NUM_THREADS={threads}", waits, "torchrun", "--standalone", "--nproc_per_node=2",
        "steps/train.py", "--device", "cpu"]
    assert training_command(ngpu="8")[1:] == [
        "OMP_NUM_THREADS=1", waits, "torchrun", "--standalone", "--nproc_per_node=8", "steps/train.py", "--device",
        "cuda"]
    assert training_command(ngpu="0", cpu_ranks="2", OMP_NUM_THREADS="3")[1] == "OMP_NUM_THREADS=3"  # as given
    assert training_command(ngpu="2", nnodes="2", node_rank="1", master_addr="head", master_port="29500")[3:] == [
        "torchrun", "--nnodes=2", "--node_rank=1", "--master_addr=head", "--master_port=29500",
        "--nproc_per_node=2", "steps/train.py", "--device", "cuda"]


def test_gpus_this_machine_lacks_and_cpu_ranks_beside_a_gpu_are_refused_at_the_start():
    def checked(settings: str) -> subprocess.CompletedProcess:
        return sourced(f"{settings}\ncheck_training_processes; echo checked", CUDA_VISIBLE_DEVICES="")

    for settings, message in (("ngpu=two", "--ngpu two: a number of GPUs (0: the CPU)"),
                              ("ngpu=08", "--ngpu 08: a number of GPUs"),  # bash's arithmetic: octal, and no 8
                              ("ngpu=1", "--ngpu 1: torch sees 0 GPU(s) here (CUDA_VISIBLE_DEVICES= ); --ngpu 0 "
                                         "trains on the CPU"),
                              ("cpu_ranks=2", "--cpu-ranks 2 trains on the CPU: give --ngpu 0 with it"),
                              ("ngpu=0 cpu_ranks=0", "--cpu-ranks 0: a number of training processes, 1 or more"),
                              # a node 1 with --nnodes left out trained alone into node 0's experiment
                              ("nnodes=1 node_rank=1", "--nnodes 1 --node-rank 1: the nodes are 1 or more, each "
                                                       "node's rank 0 to nnodes - 1"),
                              ("nnodes=2 node_rank=abc", "--nnodes 2 --node-rank abc: the nodes are"),
                              ("nnodes=0", "--nnodes 0 --node-rank 0: the nodes are")):
        out = checked(settings)
        assert out.returncode == 1 and message in out.stderr and "checked" not in out.stdout, (settings, out.stderr)
    for settings in ("", "ngpu=0", "ngpu=0 cpu_ranks=2", "nnodes=2 node_rank=1 master_addr=head"):
        assert checked(settings).stdout == "checked\n" and checked(settings).stderr == ""
    assert "--master-addr is localhost" in checked("nnodes=2 node_rank=0").stderr


@pytest.mark.slow  # trainings of their own (8-11 s); CI runs it
def test_seeds_on_cpu_ranks_train_one_after_another_each_through_torchrun(tmp_path):
    """--ngpu 0 --cpu-ranks 2 --seeds 2: each seed's training is 2 processes (the real torchrun, each rank told
    its rank) on half the cores each; the seeds one after another, not four processes at once."""
    recipe = recipe_with_fake_trainer(tmp_path, steps=10, options="ngpu=0 cpu_ranks=2")
    out, err = recipe.communicate(timeout=120)
    assert recipe.returncode == 0, err
    spans = {}
    for name in ("m", "m_seed1"):
        starts = [line.split() for line in training_log(tmp_path, name) if line.startswith("threads ")]
        assert sorted(fields[5] + " of " + fields[7] for fields in starts) == ["0 of 2", "1 of 2"]
        assert all(fields[1] == threads_each(2) and "--device cpu" in " ".join(fields) for fields in starts)
        ends = [float(line.split()[1]) for line in training_log(tmp_path, name) if line.startswith("ended")]
        spans[name] = min(float(fields[3]) for fields in starts), max(ends)
        assert (tmp_path / "exp" / name / ".stages" / "4.train.done").exists()
    assert spans["m"][1] < spans["m_seed1"][0]  # one after another
    assert "trainings at once" not in out


@pytest.mark.slow  # trainings of their own (8-11 s); CI runs it
def test_stopping_the_recipe_stops_every_rank_of_a_torchrun_training(tmp_path):
    recipe = recipe_with_fake_trainer(tmp_path, steps=600, options="ngpu=0 cpu_ranks=2")
    out, err = stop_once_logged(recipe, [tmp_path / "exp" / "m" / "log" / "4.train.log"], "step 3")
    assert recipe.returncode == 143 and "never stopped" not in out, err
    log = training_log(tmp_path, "m")
    assert sum(line.startswith("saving at step") for line in log) == 2, log[-8:]  # each rank saved
    assert training_log(tmp_path, "m_seed1") == []  # the second seed never started
    pids = subprocess.run(["pgrep", "-f", "steps/train.py --device cpu --config c.yaml"], capture_output=True,
                          text=True).stdout.split()
    assert [pid for pid in pids if of_this_test(pid, tmp_path)] == []  # nothing left behind


def test_the_training_stage_runs_again_when_the_resolved_config_changed_under_the_same_text(tmp_path):
    """A default an upgrade changed: the config's text is the same, so the stage read as done before, while
    steps/train.py --resume would set the experiment aside. A marker from before the resolved config was an input
    is taken as done once (an upgrade alone trains nothing again), then holds it."""
    lang, exp = tmp_path / "lang", tmp_path / "exp"
    lang.mkdir()
    (lang / "units.txt").write_text("<blank> 0\n<unk> 1\ne 2\n")
    (lang / "units.json").write_text('{"type": "char"}')
    config = tmp_path / "c.yaml"
    config.write_text("train: {epochs: 3}\n")
    wanted = f"train_wanted 4 {config} {exp} {lang}"
    before = ("resolved_config() { :; }; train_wanted() { stage_wanted \"$1\" train \"$3\" -- \"$2\" "
              "data/train/shards data/dev/shards $(unit_files \"$4\"); }; ")  # the inputs a recipe of before named
    out = sourced(f"stage=0 stop_stage=100; {before}if {wanted}; then stage_done 4 train {exp}; fi")
    assert out.returncode == 0 and "stage 4 (train)" in out.stdout, out.stdout + out.stderr
    out = sourced(f"stage=0 stop_stage=100; {wanted} || echo skipped")
    assert out.returncode == 0 and out.stdout.rstrip().endswith("skipped"), out.stdout + out.stderr
    assert "\tresolved-config " in (exp / ".stages" / "4.train.done").read_text()  # rewritten with it
    other_default = "resolved_config() { echo resolved-config 0123456789abcdef; }; "
    out = sourced(f"stage=0 stop_stage=100; {other_default}{wanted} || echo skipped")
    assert "its inputs changed since it was done (what changed: 'resolved-config " in out.stdout, out.stdout
    assert not out.stdout.rstrip().endswith("skipped")
