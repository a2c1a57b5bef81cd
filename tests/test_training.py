"""Training on real yesno audio: overfitting, exact resume after SIGKILL, torchrun with two CPU ranks."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from conftest import ROOT, run_tool
from rnnt.data.config import data_config
from rnnt.data.pipeline import Pipeline
from rnnt.data.tokenizer import Tokenizer
from rnnt.training import checkpoint
from rnnt.training.experiment import load_experiment

CONFIG = ROOT / "egs" / "yesno" / "conf" / "tiny.yaml"


def config_file(tmp_path: Path, **train) -> Path:
    """The yesno recipe's config with batches of 5 (6 steps an epoch on its 30 training utterances)."""
    values = yaml.safe_load(CONFIG.read_text())
    values["data"]["batch"] = {"type": "static", "batch_size": 5}
    values["train"].update(train)
    path = tmp_path / "conf.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


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


def train_args(yesno, exp_dir, conf):
    return [sys.executable, str(ROOT / "steps" / "train.py"), "--config", str(conf), "--train-list",
            str(yesno / "train.list"), "--lang-dir", str(yesno / "lang"), "--exp-dir", str(exp_dir)]


def final_parameters(exp_dir: Path) -> dict:
    return checkpoint.load(checkpoint.latest(str(exp_dir)))["model"]


def test_killed_and_resumed_run_matches_an_uninterrupted_one(yesno, tmp_path):
    conf = config_file(tmp_path, epochs=4, checkpoint_every=2, keep_checkpoints=20, log_every=1,
                       schedule={"type": "mlperf", "warmup_steps": 5, "hold_steps": 5, "decay_steps": 5})
    straight = tmp_path / "straight"
    out = run_tool(*train_args(yesno, straight, conf))
    assert out.returncode == 0, out.stderr
    assert (straight / "config.yaml").is_file() and (straight / "train.log").is_file()
    assert "training done: 24 steps, 4 epochs" in (straight / "train.log").read_text()  # 30 utterances, batches of 5

    killed = tmp_path / "killed"
    proc = subprocess.Popen(train_args(yesno, killed, conf), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (killed / "step-10.pt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "training ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "epoch-4.pt").exists()
    out = run_tool(*train_args(yesno, killed, conf), "--resume")
    assert out.returncode == 0, out.stderr
    assert "resumed from" in (killed / "train.log").read_text()
    a, b = final_parameters(straight), final_parameters(killed)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_sigterm_saves_and_exits_cleanly(yesno, tmp_path):
    conf = config_file(tmp_path, epochs=1000)
    exp = tmp_path / "exp"
    proc = subprocess.Popen(train_args(yesno, exp, conf), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (exp / "epoch-2.pt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert "stopped on SIGTERM" in (exp / "train.log").read_text()
    meta = checkpoint.load_meta(checkpoint.latest(str(exp)))
    assert meta["step"] >= 6


def test_non_finite_losses_stop_training_with_a_clear_message(yesno, tmp_path):
    conf = config_file(tmp_path, epochs=2, max_bad_steps=2, optimizer={"type": "adamw", "lr": 1e30})
    out = run_tool(*train_args(yesno, tmp_path / "exp", conf))
    assert out.returncode == 1
    assert "batches in a row had a non-finite loss" in out.stderr


@pytest.mark.slow
def test_torchrun_two_cpu_ranks_disjoint_data_identical_parameters(yesno, tmp_path):
    conf = config_file(tmp_path, epochs=2)
    exp = tmp_path / "ddp"
    args = train_args(yesno, exp, conf)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"] + args[1:] + ["--log-keys"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    keys = [set((exp / f"keys-rank{r}.txt").read_text().splitlines()) for r in range(2)]
    assert keys[0] and keys[1] and not keys[0] & keys[1]
    assert "all 2 ranks hold identical parameters" in (exp / "train.log").read_text()


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
