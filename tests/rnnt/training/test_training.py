"""Training on real yesno audio: overfitting, exact resume after SIGKILL, torchrun with three CPU ranks, and
their exact resume."""

import io
import os
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
import torch
import yaml

from conftest import ROOT, TORCHRUN, run_tool
from rnnt.cpu_isa import bf16_lstm_problem
from rnnt.data.config import data_config
from rnnt.data.pipeline import Pipeline
from rnnt.data.tokenizer import Tokenizer
from rnnt.training import checkpoint
from rnnt.training.experiment import load_experiment
from yesno_training import CONFIG, config_file, train_args


def test_overfits_a_handful_of_real_utterances(yesno):
    """Three real utterances (24 words) are learnt to a per-token loss under 0.03 within 150 steps
    (about 90 on this machine)."""
    from rnnt.model.transducer import Transducer

    experiment = load_experiment(str(CONFIG))
    torch.manual_seed(0)
    tokenizer = Tokenizer(str(yesno / "lang"))
    data = {**yaml.safe_load(CONFIG.read_text())["data"], "batch": {"type": "static", "batch_size": 3}}
    batch = next(Pipeline(str(yesno / "train.list"), data_config(data), tokenizer, train=False).batches())
    model = Transducer(experiment.model, tokenizer.vocab_size)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
    losses = []
    for _ in range(150):
        loss = model(batch["feats"], batch["feat_lens"], batch["tokens"], batch["token_lens"])["loss"]
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(float(loss.detach()) / float(batch["token_lens"].float().mean()))
        if losses[-1] < 0.03:
            break
    assert losses[0] > 10 and losses[-1] < 0.03, losses[::10]


def final_parameters(exp_dir: Path) -> dict:
    return checkpoint.load(checkpoint.latest(str(exp_dir)))["model"]


@pytest.mark.slow  # 15-25 s; CI runs it
def test_killed_and_resumed_run_matches_an_uninterrupted_one(yesno, tmp_path):
    """With everything that draws random numbers or carries state across steps: dropout, EMA, gradient
    accumulation whose last group in an epoch is short (8 batches of 4: groups of 3, 3, 2), a schedule."""
    conf = config_file(tmp_path, batch_size=4, dropout=0.2, epochs=4, accum_steps=3, ema_decay=0.9,
                       checkpoint_every=2, keep_checkpoints=20, keep_whole_epochs=3, log_every=1,
                       schedule={"type": "mlperf", "warmup_steps": 2, "hold_steps": 2, "decay_steps": 2})
    straight = tmp_path / "straight"
    out = run_tool(*train_args(yesno, straight, conf), "--log-keys")
    assert out.returncode == 0, out.stderr
    assert (straight / "config.yaml").is_file() and (straight / "train.log").is_file()
    assert "training done: 12 steps, 4 epochs" in (straight / "train.log").read_text()  # 3 steps an epoch

    again = run_tool(*train_args(yesno, straight, conf))  # a fresh run must not mix with the old one's checkpoints
    assert again.returncode == 1 and "already holds checkpoints" in again.stderr and "--resume" in again.stderr
    # the experiment keeps its units; resumed with other units, a copy of it is set aside and starts anew
    assert load_experiment(str(straight / "config.yaml")).paths.lang_dir == str(straight / "lang")
    other_lang, copied = tmp_path / "other_lang", tmp_path / "copied"
    shutil.copytree(yesno / "lang", other_lang)
    with open(other_lang / "units.txt", "a") as f:
        f.write("MAYBE 4\n")
    shutil.copytree(straight, copied)
    args = train_args(yesno, copied, conf)
    args[args.index("--lang-dir") + 1] = str(other_lang)
    other = run_tool(*args, "--resume")
    assert other.returncode == 0 and f"(the units: 'as trained ({copied / 'lang'})' -> 'other units.txt" in other.stderr
    assert (tmp_path / "copied.1" / "epoch-3.pt").is_file() and (copied / "lang" / "units.txt").read_text() == (
        other_lang / "units.txt").read_text()

    # the epochs before the newest 3 keep their weights alone, which averaging and decoding read
    slimmed, whole = checkpoint.load(str(straight / "epoch-1.pt")), checkpoint.load(str(straight / "epoch-2.pt"))
    assert sorted(slimmed) == ["ema", "meta", "model"] and slimmed["meta"]["slimmed"]
    assert {"optimizer", "scheduler", "rng"} <= whole.keys() and not whole["meta"].get("slimmed")
    assert (straight / "epoch-1.pt").stat().st_size < 0.6 * (straight / "epoch-2.pt").stat().st_size
    from_slimmed = tmp_path / "from_slimmed"
    from_slimmed.mkdir()
    shutil.copy(straight / "epoch-1.pt", from_slimmed)
    out = run_tool(*train_args(yesno, from_slimmed, conf), "--resume")
    assert out.returncode == 1 and "epoch-1.pt holds the weights alone" in out.stderr, out.stderr[-2000:]

    from_epoch = tmp_path / "from_epoch"  # resumed where an epoch ended, after its short group's step
    from_epoch.mkdir()
    shutil.copy(straight / "epoch-2.pt", from_epoch)
    out = run_tool(*train_args(yesno, from_epoch, conf), "--resume")
    assert out.returncode == 0, out.stderr

    killed = tmp_path / "killed"  # killed inside epoch 3: resumed from step-8.pt (batch 6 of 8)
    proc = subprocess.Popen(train_args(yesno, killed, conf) + ["--log-keys"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (killed / "step-8.pt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "training ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "epoch-4.pt").exists()
    with open(killed / "keys-rank0.txt", "a") as f:
        f.write("2 a_batch_the_kill_threw_away\n")  # trained after step-8.pt: trained again, listed once
    out = run_tool(*train_args(yesno, killed, conf), "--resume", "--log-keys")
    assert out.returncode == 0, out.stderr
    assert "resumed from" in (killed / "train.log").read_text()
    assert (killed / "keys-rank0.txt").read_text() == (straight / "keys-rank0.txt").read_text()
    utterances = len((yesno / "data" / "train_yesno" / "text").read_text().splitlines())
    assert len((straight / "keys-rank0.txt").read_text().splitlines()) == 4 * utterances  # each, each epoch
    a = checkpoint.load(checkpoint.latest(str(straight)))
    for resumed in from_epoch, killed:
        b = checkpoint.load(checkpoint.latest(str(resumed)))
        for part in "model", "ema":
            assert a[part].keys() == b[part].keys()
            for name in a[part]:
                assert torch.equal(a[part][name], b[part][name]), (resumed.name, part, name)
    assert not torch.equal(a["model"]["joiner.output.weight"], a["ema"]["joiner.output.weight"])


@pytest.mark.slow
def test_resumed_with_two_workers_at_any_batch_matches(yesno, tmp_path):
    """Two DataLoader workers with unequal parts (yesno's 3 shards: 2 and 1), so one runs out before the
    epoch ends; resumed from step checkpoints on both sides of that point, the run ends as one that
    was never stopped."""
    conf = config_file(tmp_path, batch_size=4, dropout=0.2, epochs=2, checkpoint_every=1, keep_checkpoints=40)
    values = yaml.safe_load(conf.read_text())
    values["data"]["num_workers"] = 2
    conf.write_text(yaml.safe_dump(values))
    straight = tmp_path / "straight"
    out = run_tool(*train_args(yesno, straight, conf), "--log-keys")
    assert out.returncode == 0, out.stderr[-2000:]
    meta = checkpoint.load(str(straight / "step-7.pt"))["meta"]
    # 7 batches delivered, 4 by the part of 2 shards, all 3 of the other: resumed here, the worker playing
    # the exhausted part is due first and has nothing, as in the uninterrupted run
    assert meta["batch"] == 7 and meta["loader_positions"][0]["counts"] == [4, 3], meta
    final = checkpoint.load(checkpoint.latest(str(straight)))["model"]
    for step in (6, 7):
        resumed = tmp_path / f"from_step_{step}"
        resumed.mkdir()
        shutil.copy(straight / f"step-{step}.pt", resumed)
        out = run_tool(*train_args(yesno, resumed, conf), "--resume")
        assert out.returncode == 0, out.stderr[-2000:]
        model = checkpoint.load(checkpoint.latest(str(resumed)))["model"]
        assert all(torch.equal(final[name], model[name]) for name in final), step


def training_with_workers(yesno, tmp_path, num_workers: int) -> tuple[subprocess.Popen, Path]:
    """A training of 15 steps an epoch (batches left when a signal comes) in a process group of its own, once its
    second epoch's DataLoader workers run."""
    conf = config_file(tmp_path, batch_size=2, epochs=1000)
    values = yaml.safe_load(conf.read_text())
    values["data"]["num_workers"] = num_workers
    conf.write_text(yaml.safe_dump(values))
    exp = tmp_path / "exp"
    proc = subprocess.Popen(train_args(yesno, exp, conf), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True,  # Ctrl-C's default: pytest run in the background ignores it
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.time() + 120
    while proc.poll() is None and time.time() < deadline and not (
            (exp / "epoch-1.pt").exists() and len(children.read_text().split()) >= num_workers):
        time.sleep(0.02)
    return proc, exp


@pytest.mark.parametrize("num_workers, sent_to", [(0, "group"), (2, "group"), (2, "each")])
def test_sigterm_saves_and_exits_cleanly(yesno, tmp_path, num_workers, sent_to):
    """Also sent to the DataLoader workers, to the process group as torchrun and kill -TERM -PGID send it, or to each
    process as Slurm, systemd and pkill -f do: the workers died of it and the run failed on its next batch, its
    position unsaved (they now leave the group and obey the training's SIGTERM alone)."""
    proc, exp = training_with_workers(yesno, tmp_path, num_workers)
    if sent_to == "group":
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        workers = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        for pid in [proc.pid, *map(int, workers)]:
            os.kill(pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 143  # not 0: a recipe must not mark the stage done
    assert "stopped on SIGTERM" in (exp / "train.log").read_text()
    meta = checkpoint.load_meta(checkpoint.latest(str(exp)))
    assert meta["step"] >= 6


def test_ctrl_c_stops_a_training_with_workers_where_it_saves(yesno, tmp_path):
    """A terminal's Ctrl-C (SIGINT to the group) stops it at the next optimiser step, saved (it ended at once in a
    traceback, the steps since the last checkpoint lost), its workers with it: a worker that kept the training's
    SIGTERM handler outlived the training's end, which waited for it for good."""
    proc, exp = training_with_workers(yesno, tmp_path, 2)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert "stopped on Ctrl-C (SIGINT)" in (exp / "train.log").read_text()
    assert checkpoint.load_meta(checkpoint.latest(str(exp)))["step"] >= 6


def test_a_second_ctrl_c_stops_at_once_and_an_ignored_one_stays_ignored():
    from rnnt.training.stop_signals import StopSignals

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, as a hand-run train.py has
    try:
        with StopSignals() as signals:
            assert signal.getsignal(signal.SIGINT) == signals.take
            signals.take(signal.SIGINT, None)
            assert (signals.received, signals.name, signals.exit_status) == (signal.SIGINT, "Ctrl-C (SIGINT)", 130)
            with pytest.raises(KeyboardInterrupt):
                signals.take(signal.SIGINT, None)
            signals.take(signal.SIGTERM, None)  # the first signal names the stop
            assert signals.exit_status == 130
        with StopSignals() as signals:  # a SIGTERM (kill, Slurm), then Ctrl-C twice: the second did nothing
            signals.take(signal.SIGTERM, None)
            signals.take(signal.SIGINT, None)
            with pytest.raises(KeyboardInterrupt):
                signals.take(signal.SIGINT, None)
            assert signals.name == "SIGTERM"
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert StopSignals().exit_status == 143  # a rank stopped by another rank's signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a recipe's stage runs it: stopped by SIGTERM
        with StopSignals() as signals:
            assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) == signals.take
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.slow  # trainings of their own; CI runs it
def test_a_second_training_of_a_running_experiment_is_refused_naming_the_first(yesno, tmp_path):
    """A requeued job or a forgotten terminal resumed from the running one's checkpoints, and both wrote the same."""
    proc, exp = training_with_workers(yesno, tmp_path, 0)
    (tmp_path / "other").mkdir()
    try:
        second = run_tool(*train_args(yesno, exp, config_file(tmp_path / "other", epochs=1)), "--resume")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    assert second.returncode == 1 and f"another training of {exp} is running ({tmp_path}/.exp.train.lock is held by " \
        f"process {proc.pid}); wait for it to end, or stop it" in second.stderr, second.stderr[-2000:]
    assert not list(tmp_path.glob("exp.*"))  # with another config, it set the running one's files aside
    from rnnt.training.stop import held_alone_or_stop

    with held_alone_or_stop(str(exp)):  # the lock went with its holder
        pass


def test_validation_inside_epochs_is_logged_and_leaves_the_training_as_it_was(yesno, tmp_path):
    """train.valid_every 4 over 2 epochs of 6 steps: validations at steps 4, 8 (in epoch 2) and 12 (and each epoch's
    end, step 12's result taken for epoch 2's: the same weights), in the log and tensorboard; the weights trained
    (EMA, dropout) equal those of the run without them."""
    valid = ("--valid-list", str(yesno / "test.list"))
    runs = {}
    for every in (0, 4):
        conf = config_file(tmp_path, epochs=2, valid_every=every, dropout=0.1, ema_decay=0.9)
        out = run_tool(*train_args(yesno, tmp_path / f"every{every}", conf), *valid)
        assert out.returncode == 0, out.stderr[-2000:]
        runs[every] = checkpoint.load(str(tmp_path / f"every{every}" / "epoch-2.pt"))
    log = (tmp_path / "every4" / "train.log").read_text()
    within = [line.split("] ")[1].split(":")[0] for line in log.splitlines()
              if " step " in line and "validation" in line]
    assert within == ["epoch 1 step 4 validation (EMA)", "epoch 2 step 8 validation (EMA)",
                      "epoch 2 step 12 validation (EMA)"], within
    assert "epoch 1 validation (EMA)" in log and "epoch 2 validation (EMA)" in log
    step_12, epoch_2 = (next(line.split(": ", 1)[1] for line in log.splitlines() if f"{what} validation" in line)
                        for what in ("epoch 2 step 12", "epoch 2"))
    assert step_12 == epoch_2
    assert runs[4]["meta"]["valid_loss"] == runs[0]["meta"]["valid_loss"]  # epoch 2's result as validated alone
    for part in ("model", "ema"):
        assert all(torch.equal(runs[0][part][name], runs[4][part][name]) for name in runs[0][part]), part


def test_training_ends_after_patience_epochs_without_a_better_dev_wer_and_a_resume_counts_on(yesno, tmp_path):
    """A model that cannot learn (lr 0, no batch norm: its dev WER the same every epoch) with train.patience 2 ends
    after epoch 3 of 10, the best epoch (1) in every checkpoint; resumed as it is, nothing more is trained, and
    resumed with patience 4 (a change a resume honours) it trains on to epoch 5. Resumed with patience 5 on another
    dev list, epoch 1's best on the first is not compared with the second's results: the first of those is the best
    then, and the run does not end after epoch 6; so is the first measured with data.tail_silence edited (its audio
    otherwise: a resume takes the edit, and the results were ranked together)."""
    def train(patience, *extra, epochs=10, tail_silence=0.0):
        conf = config_file(tmp_path, epochs=epochs, patience=patience, optimizer={"type": "adam", "lr": 0.0})
        values = yaml.safe_load(conf.read_text())
        values["model"]["encoder"]["input_batch_norm"] = False  # its running statistics would change the WER
        values["data"]["tail_silence"] = tail_silence
        conf.write_text(yaml.safe_dump(values))
        return run_tool(*train_args(yesno, exp, conf), *extra)

    exp = tmp_path / "exp"
    valid = ("--valid-list", str(yesno / "test.list"))
    out = train(2, *valid)
    assert out.returncode == 0, out.stderr[-2000:]
    log = (exp / "train.log").read_text()
    assert "no better dev WER in the 2 epochs since epoch 1 (" in log and "training ends (train.patience 2)" in log
    assert "the training ended at step 18, inside train.schedule.warmup_steps 50" in log  # 6 steps an epoch
    assert [Path(p).name for p in checkpoint.numbered(str(exp), "epoch")] == ["epoch-1.pt", "epoch-2.pt", "epoch-3.pt"]
    assert checkpoint.load_meta(str(exp / "epoch-3.pt"))["best_valid"]["epoch"] == 1
    again = train(2, *valid, "--resume")  # done: it says why, and trains nothing
    assert again.returncode == 0 and len(checkpoint.numbered(str(exp), "epoch")) == 3, again.stderr[-2000:]
    assert (exp / "train.log").read_text().count("training ends (train.patience 2)") == 2
    longer = train(4, *valid, "--resume")
    assert longer.returncode == 0, longer.stderr[-2000:]
    assert len(checkpoint.numbered(str(exp), "epoch")) == 5 and not (tmp_path / "exp.1").exists()
    assert "no better dev WER in the 4 epochs since epoch 1" in (exp / "train.log").read_text()
    other_dev = train(5, "--valid-list", str(yesno / "train.list"), "--resume", epochs=7)
    other_log = (exp / "train.log").read_text().split("resumed from")[-1]
    assert other_dev.returncode == 0, other_dev.stderr[-2000:]
    assert "the dev set is not the one epoch 1's best" in other_log and "training ends" not in other_log
    assert checkpoint.load_meta(str(exp / "epoch-6.pt"))["best_valid"]["epoch"] == 6  # before: ended after epoch 6
    assert len(checkpoint.numbered(str(exp), "epoch")) == 7
    silence = train(5, "--valid-list", str(yesno / "train.list"), "--resume", epochs=8, tail_silence=0.5)
    assert silence.returncode == 0, silence.stderr[-2000:]
    meta = checkpoint.load_meta(str(exp / "epoch-8.pt"))
    assert meta["best_valid"]["epoch"] == 8 and meta["valid_dev_set"].endswith("+0.5s")
    assert not (tmp_path / "exp.1").exists()
    refused = train(2)  # no dev list to count on
    assert refused.returncode == 1 and "train.patience 2 ends training after epochs without a better dev result: " \
        "give a dev list (--valid-list, paths.valid_list)" in refused.stderr


def test_an_edited_noise_list_trains_anew_and_one_none_of_which_reads_is_refused_first(yesno, test_data, tmp_path):
    """steps/train.py records the noise list's SHA-256: the same path with other recordings in it sets the
    experiment aside and trains anew (a resume would have mixed two noise sets in one model); a list none of
    whose recordings reads is refused before anything is set aside."""
    recordings = sorted((test_data / "fsdd" / "recordings").glob("*_theo_*.wav"))
    noise_list = tmp_path / "noise.scp"

    def train(first: int):
        noise_list.write_text("".join(f"n{n} {path}\n" for n, path in enumerate(recordings[first:first + 3])))
        conf = config_file(tmp_path, epochs=1)
        values = yaml.safe_load(conf.read_text())
        values["data"]["noise"] = {"wav_scp": str(noise_list), "prob": 1.0}
        conf.write_text(yaml.safe_dump(values))
        return run_tool(*train_args(yesno, tmp_path / "exp", conf), "--resume")

    assert train(0).returncode == 0
    saved = load_experiment(str(tmp_path / "exp" / "config.yaml")).data.noise
    assert saved.wav_scp == str(noise_list) and len(saved.wav_scp_sha256) == 64
    assert train(0).returncode == 0 and not (tmp_path / "exp.1").exists()  # the same list: nothing to do
    again = train(3)
    assert again.returncode == 0, again.stderr[-2000:]
    assert (tmp_path / "exp.1" / "epoch-1.pt").is_file() and (tmp_path / "exp" / "epoch-1.pt").is_file()
    assert "data.noise.wav_scp_sha256" in (tmp_path / "exp" / "train.log").read_text()
    noise_list.write_text(f"gone {tmp_path / 'gone.wav'}\n")
    conf = tmp_path / "conf.yaml"
    refused = run_tool(*train_args(yesno, tmp_path / "exp", conf), "--resume")
    assert refused.returncode == 1 and "no recording it lists can be read" in refused.stderr, refused.stderr[-2000:]
    assert (tmp_path / "exp" / "epoch-1.pt").is_file() and not (tmp_path / "exp.2").exists()  # nothing set aside


def test_a_checkpoint_that_cannot_be_written_is_one_logged_line_naming_it(yesno, tmp_path):
    """A full disk (here a file-size limit) under a checkpoint's save: two chained tracebacks ending in torch's zip
    writer's 'unexpected pos', and train.log ended at a step line, no reason given."""
    import resource

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))

    exp = tmp_path / "exp"
    out = subprocess.run(train_args(yesno, exp, config_file(tmp_path, epochs=1)), capture_output=True, text=True,
                         preexec_fn=limited, cwd=ROOT)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    said = f"cannot write {exp}/epoch-1.pt: File too large; free space (or make it writable), then rerun with --resume"
    assert said in out.stderr and said in (exp / "train.log").read_text(), out.stderr[-3000:]
    assert not list(exp.glob("*.pt")) and not list(exp.glob("*.tmp"))


@pytest.mark.slow  # trainings of their own; CI runs it
def test_a_resume_that_does_not_repeat_init_from_or_seed_goes_on_with_the_runs_own(yesno, tmp_path):
    """The stop message says 'rerun with --resume': done so, without the --init-from and --seed the run began with,
    the run was set aside as if its config had changed, and trained again from random weights."""
    base, tuned = tmp_path / "base", tmp_path / "tuned"
    assert run_tool(*train_args(yesno, base, config_file(tmp_path, epochs=1))).returncode == 0
    began = run_tool(*train_args(yesno, tuned, config_file(tmp_path, epochs=1)), "--init-from",
                     str(base / "epoch-1.pt"), "--seed", "3")
    assert began.returncode == 0, began.stderr[-2000:]
    resumed = run_tool(*train_args(yesno, tuned, config_file(tmp_path, epochs=2)), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert (tuned / "epoch-2.pt").is_file() and not list(tmp_path.glob("tuned.*")), resumed.stderr[-2000:]
    recorded = yaml.safe_load((tuned / "config.yaml").read_text())["train"]
    assert (recorded["init_from"], recorded["seed"]) == (str(base / "epoch-1.pt"), 3)
    # a seed the config gave, then deleted from it: the run's own no more (config.yaml's was taken back, the old
    # model resumed as unchanged and its WER reported as the new config's)
    seeded = tmp_path / "seeded"
    assert run_tool(*train_args(yesno, seeded, config_file(tmp_path, epochs=1, seed=3))).returncode == 0
    edited = run_tool(*train_args(yesno, seeded, config_file(tmp_path, epochs=1)), "--resume")
    assert edited.returncode == 0, edited.stderr[-2000:]
    assert list(tmp_path.glob("seeded.*")) and yaml.safe_load((seeded / "config.yaml").read_text())["train"]["seed"] \
        == 0, edited.stderr[-2000:]


@pytest.mark.slow  # trainings of their own; CI runs it
def test_a_resume_refused_leaves_no_config_of_its_own_to_set_the_next_one_aside(yesno, tmp_path):
    """A checkpoint copied into an empty dir, resumed with the config of another model: refused, but config.yaml and
    lang/ were written for that config first, and the next resume, with the right one, set the experiment aside as
    changed and trained from scratch."""
    base, copied = tmp_path / "base", tmp_path / "copied"
    assert run_tool(*train_args(yesno, base, config_file(tmp_path, epochs=1))).returncode == 0
    copied.mkdir()
    shutil.copy(base / "epoch-1.pt", copied)
    wrong = config_file(tmp_path, epochs=2)
    values = yaml.safe_load(wrong.read_text())
    values["model"]["joiner"]["hidden"] = 64
    wrong.write_text(yaml.safe_dump(values))
    refused = run_tool(*train_args(yesno, copied, wrong), "--resume")
    assert refused.returncode == 1 and not (copied / "config.yaml").exists() and not (copied / "lang").exists(), \
        refused.stderr[-2000:]
    resumed = run_tool(*train_args(yesno, copied, config_file(tmp_path, epochs=2)), "--resume")
    assert resumed.returncode == 0 and (copied / "epoch-2.pt").is_file(), resumed.stderr[-2000:]
    assert not list(tmp_path.glob("copied.*"))


def test_non_finite_losses_stop_training_with_a_clear_message(yesno, tmp_path):
    conf = config_file(tmp_path, epochs=2, max_bad_steps=2, optimizer={"type": "adamw", "lr": 1e30})
    out = run_tool(*train_args(yesno, tmp_path / "exp", conf))
    assert out.returncode == 1
    assert "batches in a row had a non-finite loss" in out.stderr


def test_fp16_on_the_cpu_is_refused_with_the_way_out(yesno, tmp_path):
    conf = config_file(tmp_path, epochs=1, precision="fp16")
    out = run_tool(*train_args(yesno, tmp_path / "exp", conf), "--device", "cpu")
    assert out.returncode == 1
    assert "fp16 needs a CUDA device" in out.stderr and "use precision: bf16" in out.stderr
    assert not (tmp_path / "exp" / "epoch-1.pt").exists()
    if not torch.cuda.is_available():  # an AttributeError from torch.cuda.set_device before
        out = run_tool(*train_args(yesno, tmp_path / "exp", config_file(tmp_path, epochs=1)), "--device", "cuda")
        assert out.returncode == 1 and out.stderr.startswith("train.py: ") and ": train.device cuda: " in out.stderr \
            and \
            out.stderr.endswith("; use auto or cpu\n"), out.stderr


def test_bf16_on_the_cpu_trains_or_is_refused_with_the_way_out(yesno, tmp_path):
    """A CPU whose oneDNN runs LSTMs in bfloat16 trains an epoch; one that cannot (AVX2 only) refuses before
    training, naming oneDNN's reason and fp32, and writes no checkpoint."""
    conf = config_file(tmp_path, epochs=1, precision="bf16")
    out = run_tool(*train_args(yesno, tmp_path / "exp", conf), "--device", "cpu")
    problem = bf16_lstm_problem()
    if problem is None:
        assert out.returncode == 0, out.stderr[-2000:]
        assert (tmp_path / "exp" / "epoch-1.pt").is_file()
    else:
        assert out.returncode == 1
        assert f"cannot run the model's LSTMs in bfloat16 (oneDNN: {problem}" in out.stderr, out.stderr[-2000:]
        assert "use precision: fp32" in out.stderr and not (tmp_path / "exp" / "epoch-1.pt").exists()


def test_bf16_on_a_cpu_whose_onednn_has_no_bf16_lstm_is_refused_before_training(yesno, tmp_path):
    """The refusal on a CPU without AVX-512 (this one's oneDNN runs bfloat16 LSTMs: its reason stood in for):
    train.py exits 1 naming oneDNN's reason and fp32, before training, and leaves no checkpoint."""
    reason = "could not create a primitive descriptor for the LSTM forward propagation primitive"
    without_bf16_lstm = ("import runpy, sys; import rnnt.cpu_isa as isa; "
                         f"isa.bf16_lstm_problem = lambda: {reason!r}; "
                         "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    conf = config_file(tmp_path, epochs=1, precision="bf16")
    out = run_tool(sys.executable, "-c", without_bf16_lstm, *train_args(yesno, tmp_path / "exp", conf)[1:],
                   "--device", "cpu")
    assert out.returncode == 1, out.stderr[-2000:]
    assert f"cannot run the model's LSTMs in bfloat16 (oneDNN: {reason}; it needs AVX-512); use precision: fp32 " \
        "here" in out.stderr, out.stderr[-2000:]
    assert not list((tmp_path / "exp").glob("*.pt"))


@pytest.mark.slow
def test_torchrun_three_cpu_ranks_uneven_shards_use_every_utterance_once(yesno, tmp_path):
    """30 utterances in shards of 7, 7, 7, 7 and 2 on 3 ranks: each takes a whole shard and a third of the
    other two, batches of 2 accumulated in threes (groups that DDP all-reduces, and a short last one the
    trainer averages itself). Every epoch trains on every utterance exactly once; the ranks that run out
    first wait with weight-0 batches; all ranks end with the same parameters, and nothing hangs. Each rank
    validates its part of the test list: the epoch's result is that of the whole list in one process."""
    shards = tmp_path / "shards"
    out = run_tool(sys.executable, ROOT / "steps" / "make_shards.py", "--utts-per-shard", "7",
                   yesno / "data" / "train_yesno", shards, tmp_path / "train.list")
    assert out.returncode == 0, out.stderr
    sizes = sorted(len(tarfile.open(p).getnames()) // 2 for p in (tmp_path / "train.list").read_text().split())
    assert sizes == [2, 7, 7, 7, 7]
    conf = config_file(tmp_path, batch_size=2, epochs=2, accum_steps=3)
    exp = tmp_path / "ddp"
    args = [a if a != str(yesno / "train.list") else str(tmp_path / "train.list") for a in train_args(yesno, exp, conf)]
    cmd = [*TORCHRUN, "--nproc_per_node=3"] + args[1:] + \
        ["--log-keys", "--valid-list", str(yesno / "test.list")]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    every = sorted(line.split(maxsplit=1)[0]
                   for line in (yesno / "data" / "train_yesno" / "text").read_text().splitlines())
    seen = [line.split() for r in range(3) for line in (exp / f"keys-rank{r}.txt").read_text().splitlines()]
    for epoch in (0, 1):
        assert sorted(key for e, key in seen if e == str(epoch)) == every
    log = (exp / "train.log").read_text()
    assert "all 3 ranks hold identical parameters" in log and "2 epochs" in log
    assert_validated_as_one_process(exp, yesno / "test.list", yesno / "lang")


@pytest.mark.slow
def test_a_resume_with_fewer_ranks_cuts_back_the_keys_files_of_the_ranks_it_lacks(yesno, tmp_path):
    """2 ranks stopped inside epoch 2, resumed by one process from epoch 1's end: rank 1's file kept the keys of
    the part of epoch 2 thrown away, which rank 0 trained again: the --log-keys check saw them twice."""
    exp = tmp_path / "exp"
    args = train_args(yesno, exp, config_file(tmp_path, epochs=2, max_steps=4)) + ["--log-keys"]  # 3 steps an epoch
    out = subprocess.run([*TORCHRUN, "--nproc_per_node=2"] + args[1:], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "1 " in (exp / "keys-rank1.txt").read_text()  # rank 1 listed keys of epoch 2 (1, counted from 0)
    out = run_tool(*train_args(yesno, exp, config_file(tmp_path, epochs=2)), "--log-keys", "--resume")
    assert out.returncode == 0 and "training done: 9 steps" in (exp / "train.log").read_text(), out.stderr[-2000:]
    every = sorted(line.split(maxsplit=1)[0]
                   for line in (yesno / "data" / "train_yesno" / "text").read_text().splitlines())
    seen = [line.split() for r in range(2) for line in (exp / f"keys-rank{r}.txt").read_text().splitlines()]
    for epoch in ("0", "1"):
        assert sorted(key for e, key in seen if e == epoch) == every, epoch


@pytest.mark.slow
def test_torchrun_resumed_where_one_rank_ran_out_ends_as_the_uninterrupted_run(yesno, tmp_path):
    """Shards of 7, 7, 7, 7 and 2 give the 3 ranks 7, 6 and 3 batches of 2 an epoch. The checkpoint of step 5
    holds each rank's own position (5, 5 and 3 batches given: the third rank is out, padding with weight 0);
    resumed from it, each rank goes on from its own, the third pads with a batch it reads again, and the run
    ends with the uninterrupted run's weights. Before, every rank took the first rank's position: the third
    had nothing to pad with and the epoch ended for all, two steps early."""
    out = run_tool(sys.executable, ROOT / "steps" / "make_shards.py", "--utts-per-shard", "7",
                   yesno / "data" / "train_yesno", tmp_path / "shards", tmp_path / "train.list")
    assert out.returncode == 0, out.stderr
    conf = config_file(tmp_path, batch_size=2, epochs=2, checkpoint_every=1, keep_checkpoints=40)

    def torchrun(exp, *extra):
        args = [a if a != str(yesno / "train.list") else str(tmp_path / "train.list")
                for a in train_args(yesno, exp, conf)]
        cmd = [*TORCHRUN, "--nproc_per_node=3"] + args[1:]
        out = subprocess.run(cmd + list(extra), capture_output=True, text=True, cwd=ROOT, timeout=600,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert out.returncode == 0, out.stderr[-3000:]

    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    torchrun(straight)
    meta = checkpoint.load_meta(str(straight / "step-5.pt"))
    assert [p["counts"] for p in meta["loader_positions"]] == [[5], [5], [3]]
    resumed.mkdir()
    shutil.copy(straight / "step-5.pt", resumed)
    torchrun(resumed, "--resume")
    a, b = (checkpoint.load(checkpoint.latest(str(exp))) for exp in (straight, resumed))
    assert a["meta"]["step"] == b["meta"]["step"] == 14
    assert all(torch.equal(a["model"][name], b["model"][name]) for name in a["model"])


@pytest.mark.slow
def test_torchrun_a_rank_waiting_with_weight_0_leaves_the_step_the_mean_of_the_others_batches(yesno, tmp_path):
    """Five utterances on 2 ranks in batches of 1: the third step has one batch, rank 1 waits with weight 0.
    Every step's gradient is then the mean of the ranks' batches of weight 1, as one process's batches of 2
    (the list's same shuffled order: entries 0 and 1, 2 and 3, then 4 alone). Before, the third step's
    gradient was halved: DDP's average over the ranks counted the waiting rank's batch."""
    def conf(name, batch_size):
        path = config_file(tmp_path, batch_size=batch_size, epochs=1, grad_clip=1.0e6)
        values = yaml.safe_load(path.read_text())
        values["model"]["encoder"]["input_batch_norm"] = False  # a rank's statistics are not the batch's of 2
        values["data"]["shuffle_buffer"] = 0
        (tmp_path / name).write_text(yaml.safe_dump(values))
        return tmp_path / name

    def args(exp, batch_size):
        return [a if a != str(yesno / "train.list") else str(yesno / "five.list")
                for a in train_args(yesno, tmp_path / exp, conf(f"{exp}.yaml", batch_size))]

    out = subprocess.run([*TORCHRUN, "--nproc_per_node=2"] + args("ddp", 1)[1:], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    run_tool(*args("one", 2), check=True)
    ddp, one = (checkpoint.load(checkpoint.latest(str(tmp_path / exp))) for exp in ("ddp", "one"))
    assert ddp["meta"]["step"] == one["meta"]["step"] == 3
    for name, value in one["model"].items():
        torch.testing.assert_close(ddp["model"][name], value, atol=2e-5, rtol=1e-4, msg=name)


def test_torchrun_a_rank_with_no_usable_utterance_stops_every_rank_with_the_reason(yesno, tmp_path):
    """Two ranks, two shards: the training utterances, and a shard of six whose audio no decoder reads. The
    rank given the second has no batch; every rank stops in seconds with the one message (no hang at an
    all-reduce the other never reaches) and the data report names each unreadable file; no checkpoint."""
    out = run_tool(sys.executable, ROOT / "steps" / "make_shards.py", "--utts-per-shard", "30",
                   yesno / "data" / "train_yesno", tmp_path / "shards", tmp_path / "good.list")
    assert out.returncode == 0, out.stderr
    bad = tmp_path / "unreadable.tar"
    with tarfile.open(bad, "w") as tar:
        for i in range(6):
            for name, data in ((f"bad{i}.txt", b"YES NO"), (f"bad{i}.wav", b"RIFF, but no audio")):
                member = tarfile.TarInfo(name)
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
    train_list = tmp_path / "train.list"
    train_list.write_text((tmp_path / "good.list").read_text() + f"{bad}\n")
    exp = tmp_path / "ddp"
    args = [a if a != str(yesno / "train.list") else str(train_list)
            for a in train_args(yesno, exp, config_file(tmp_path, batch_size=2, epochs=1))]
    cmd = [*TORCHRUN, "--nproc_per_node=2"] + args[1:]
    start = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                         timeout=300)
    assert out.returncode != 0 and time.monotonic() - start < 120
    for rank in (0, 1):
        assert f"[rank {rank}] epoch 1: no usable utterance in {train_list} for one of 2 ranks" in out.stderr, \
            out.stderr[-3000:]
    assert all(f"skipped bad{i} from {bad}:bad{i}.wav: cannot decode audio" in out.stderr for i in range(6))
    assert not list(exp.glob("*.pt"))


def assert_validated_as_one_process(exp, valid_list, lang_dir):
    from rnnt.model.transducer import Transducer
    from rnnt.training.validation import validate

    saved = checkpoint.load(str(exp / "epoch-2.pt"))
    experiment = load_experiment(str(exp / "config.yaml"))
    tokenizer = Tokenizer(str(lang_dir))
    model = Transducer(experiment.model, tokenizer.vocab_size)
    model.load_state_dict(saved["model"])
    pipeline = Pipeline(str(valid_list), experiment.data, tokenizer, False, experiment.model.encoder.output_frames)
    whole = validate(model, pipeline.batches(), tokenizer, torch.device("cpu"))
    assert saved["meta"]["valid_utterances"] == whole["utterances"] == 30
    assert saved["meta"]["valid_loss"] == pytest.approx(whole["loss"], rel=1e-5)
    assert saved["meta"]["valid_wer"] == pytest.approx(whole["wer"])
    assert saved["meta"]["valid_dev_set"] == whole["dev_set"]  # the same set, whatever the ranks
    first = list(pipeline.batches())[:1]
    part = validate(model, first, tokenizer, torch.device("cpu"))["dev_set"]
    texts = first[0]["texts"]
    assert part != whole["dev_set"] and texts[0] != texts[1]
    first[0]["texts"] = [texts[1], texts[0], *texts[2:]]  # two transcripts swapped: another set
    assert validate(model, first, tokenizer, torch.device("cpu"))["dev_set"] != part


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_trains_on_cuda_in_each_precision(yesno, tmp_path, precision):
    conf = config_file(tmp_path, epochs=2, device="cuda", precision=precision)
    out = run_tool(*train_args(yesno, tmp_path / "exp", conf))
    assert out.returncode == 0, out.stderr
    log = (tmp_path / "exp" / "train.log").read_text()
    assert "training done: 12 steps, 2 epochs" in log
    params = final_parameters(tmp_path / "exp")
    assert all(torch.isfinite(p).all() for p in params.values() if p.is_floating_point())


def test_slimming_leaves_a_damaged_old_epoch_as_it_is(tmp_path, caplog):
    """An old epoch file that cannot be read is named in a warning and kept; the others are slimmed or
    kept whole as asked, and the training that saves goes on."""
    for n in (1, 2, 3):
        checkpoint.save(str(tmp_path / f"epoch-{n}.pt"), {"model": {"w": torch.full((4,), float(n))}, "ema": None,
                                                          "optimizer": {"m": torch.zeros(4)},
                                                          "meta": {"step": n, "epoch": n}})
    damaged = (tmp_path / "epoch-1.pt").read_bytes()[:100]
    (tmp_path / "epoch-1.pt").write_bytes(damaged)
    checkpoint.slim_old_epochs(str(tmp_path), 1)
    assert "epoch-1.pt: cannot be read" in caplog.text
    assert (tmp_path / "epoch-1.pt").read_bytes() == damaged
    slimmed, whole = checkpoint.load(str(tmp_path / "epoch-2.pt")), checkpoint.load(str(tmp_path / "epoch-3.pt"))
    assert "optimizer" not in slimmed and slimmed["meta"] == {"step": 2, "epoch": 2, "slimmed": True}
    assert torch.equal(slimmed["model"]["w"], torch.full((4,), 2.0)) and "optimizer" in whole
    assert checkpoint.latest(str(tmp_path)) == str(tmp_path / "epoch-3.pt")
    # the newest cut short: passed over for the one before it, and said (a resume went back without a word)
    (tmp_path / "step-4.pt").write_bytes((tmp_path / "epoch-3.pt").read_bytes()[:300])
    caplog.clear()
    assert checkpoint.latest(str(tmp_path)) == str(tmp_path / "epoch-3.pt")
    assert f"{tmp_path / 'step-4.pt'}: not a readable checkpoint (" in caplog.text and "; passed over" in caplog.text



def flip_a_weight_bit(path) -> None:
    """A bit of the checkpoint's first tensor flipped where it lies in the file (a disk or copy error)."""
    with zipfile.ZipFile(path) as archive:
        member = next(info for info in archive.infolist() if "/data/" in info.filename and info.file_size)
    data = bytearray(Path(path).read_bytes())
    name_length, extra_length = struct.unpack("<HH", data[member.header_offset + 26:member.header_offset + 30])
    data[member.header_offset + 30 + name_length + extra_length] ^= 1
    Path(path).write_bytes(data)


def test_a_checkpoint_whose_bytes_changed_is_refused_and_passed_over(tmp_path, caplog):
    """torch.load does not check the CRCs of a checkpoint's zip: a flipped bit in the weights loaded silently."""
    for n in (1, 2):
        checkpoint.save(str(tmp_path / f"epoch-{n}.pt"), {"model": {"w": torch.full((4,), float(n))},
                                                          "meta": {"step": n, "epoch": n}})
    newest = str(tmp_path / "epoch-2.pt")
    assert checkpoint.latest(str(tmp_path)) == newest and checkpoint.load(newest)["model"]["w"][0] == 2.0
    flip_a_weight_bit(newest)
    with pytest.raises(checkpoint.UnreadableCheckpoint, match=f"{newest}: damaged: .*data/0 fails its CRC-32"):
        checkpoint.load(newest)
    assert checkpoint.load_meta(newest)["step"] == 2  # its meta is whole: read without the weights
    assert checkpoint.latest(str(tmp_path)) == str(tmp_path / "epoch-1.pt")
    assert f"{newest}: damaged: " in caplog.text and "; passed over" in caplog.text
    flip_a_weight_bit(tmp_path / "epoch-1.pt")  # none sound: decoding names the newest, not 'no checkpoint'
    with pytest.raises(checkpoint.UnreadableCheckpoint, match=f"{newest}: damaged: "):
        checkpoint.for_decoding(str(tmp_path))

FAULT_ONCE_ON_RANK_1 = """
import sys, torch
from rnnt.training.experiment import load_experiment
from rnnt.training.trainer import Trainer
config, train_list, lang_dir, exp_dir, fault = sys.argv[1:]
trainer = Trainer(load_experiment(config, train_list=train_list, lang_dir=lang_dir), exp_dir)
print(f"rank {trainer.world.rank} draws {torch.rand(3).tolist()}", flush=True)  # dropout's random numbers
batch_loss, calls = trainer.batch_loss, [0]
def fault_once_on_rank_1(batch, sync):
    calls[0] += 1
    loss = batch_loss(batch, sync)  # the forward pass run through, as DDP's own part of it
    if trainer.world.rank == 1 and calls[0] == 2:
        if fault == "oom":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return loss * float("nan")
    return loss
trainer.batch_loss = fault_once_on_rank_1
sys.exit(trainer.run())
"""


@pytest.mark.parametrize("fault", ["nan", "oom"])
def test_torchrun_a_fault_on_one_rank_is_skipped_by_all_and_counted_in_the_checkpoint_and_the_summary(yesno, tmp_path,
                                                                                                     fault):
    """Every rank skips the batch together, a non-finite loss or one out of memory in the forward pass (under DDP
    an out-of-memory batch stopped the run, and every resume met it again); rank 0, whose loss was finite, counts
    it too, by its reason: its counts are the checkpoint's and the summary's. The ranks draw their own random
    numbers (dropout's masks were the same on every rank)."""
    script = tmp_path / "fault_once_on_rank_1.py"
    script.write_text(FAULT_ONCE_ON_RANK_1)
    exp = tmp_path / "ddp"
    cmd = [*TORCHRUN, "--nproc_per_node=2", str(script),
           str(config_file(tmp_path, epochs=1)), str(yesno / "train.list"), str(yesno / "lang"), str(exp), fault]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    reason = {"nan": "non-finite loss", "oom": "out of memory"}[fault]
    if fault == "nan":
        assert "[rank 1] non-finite loss (nan) on" in out.stderr
        assert "[rank 0] batch skipped with the other ranks: a non-finite loss on one of them" in out.stderr
    else:
        assert "[rank 1] out of memory in the forward pass of a batch of feats" in out.stderr
        assert "[rank 0] batch skipped with the other ranks: out of memory on one of them" in out.stderr
    assert checkpoint.load_meta(str(exp / "epoch-1.pt"))[f"skipped {reason}"] == 1
    counts = {"non-finite loss": 0, "non-finite gradient": 0, "out of memory": 0, reason: 1}
    assert "skipped " + ", ".join(f"{n} {r}" for r, n in counts.items()) in (exp / "train.log").read_text()
    draws = [line.split(" draws ")[1] for line in out.stdout.splitlines() if " draws " in line]
    assert len(draws) == 2 and draws[0] != draws[1]


STALE_OR_DIVERGED_RANK_1 = """
import sys, torch
from rnnt.training import checkpoint
from rnnt.training.experiment import load_experiment
from rnnt.training.trainer import Trainer
config, train_list, lang_dir, exp_dir, fault = sys.argv[1:]
trainer = Trainer(load_experiment(config, train_list=train_list, lang_dir=lang_dir), exp_dir, resume=True)
if trainer.world.rank == 1:
    if fault == "stale":  # a node whose view of the exp dir is stale: no checkpoint yet
        checkpoint.latest = lambda exp_dir: None
    else:
        save_position = trainer.save_position
        def diverge():
            with torch.no_grad():
                next(trainer.model.parameters()).add_(1.0)
            return save_position()
        trainer.save_position = diverge
sys.exit(trainer.run())
"""


def test_torchrun_resumes_every_rank_from_rank_0s_checkpoint_and_ranks_that_differ_fail(yesno, tmp_path):
    """A rank that sees no checkpoint (a stale network file system) resumes from rank 0's newest all the same (it
    started from scratch and the run ended 0, its ranks holding different models); ranks ending with different
    parameters end the run with status 1."""
    script = tmp_path / "stale_or_diverged.py"
    script.write_text(STALE_OR_DIVERGED_RANK_1)
    exp = tmp_path / "ddp"

    def torchrun(epochs, fault):
        cmd = [*TORCHRUN, "--nproc_per_node=2", str(script), str(config_file(tmp_path, epochs=epochs)),
               str(yesno / "train.list"), str(yesno / "lang"), str(exp), fault]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})

    out = torchrun(1, "stale")
    assert out.returncode == 0, out.stderr[-3000:]
    out = torchrun(2, "stale")
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"[rank 0] resumed from {exp / 'epoch-1.pt'}" in out.stderr
    assert "all 2 ranks hold identical parameters" in out.stderr and "training done: 6 steps, 2 epochs" in out.stderr
    out = torchrun(3, "diverged")
    assert out.returncode != 0
    assert "the ranks ended with different parameters (above): this training is not one model" in out.stderr
