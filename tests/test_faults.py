"""Faults injected into real data and runs: each is named by file, nothing good is lost, and a rerun
completes. (SIGKILL mid-epoch: tests/rnnt/training/test_training.py resumes a killed run to the same parameters.)"""

import io
import logging
import signal
import subprocess
import sys
import tarfile
import time

import numpy as np
import pytest
import soundfile

from conftest import ROOT, run_tool
from rnnt.data.config import data_config
from rnnt.data.pipeline import Pipeline
from rnnt.data.sources import records
from rnnt.data.tokenizer import Tokenizer

STEPS = ROOT / "steps"


def fsdd_train(test_data, tmp_path):
    data = tmp_path / "data"
    out = run_tool(sys.executable, ROOT / "egs" / "fsdd" / "local" / "data_prep.py", test_data / "fsdd" / "recordings",
                   data)
    assert out.returncode == 0, out.stderr
    return data / "train"


def shard_keys(list_path):
    return [r["key"] for r in records(str(list_path))]


def test_make_shards_killed_midway_then_rerun_is_complete(test_data, tmp_path):
    train = fsdd_train(test_data, tmp_path)
    shards, data_list = tmp_path / "shards", tmp_path / "train.list"
    command = [sys.executable, str(STEPS / "make_shards.py"), "--nj", "1", "--utts-per-shard", "100", train, shards,
               data_list]
    proc = subprocess.Popen([str(c) for c in command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while len(list(shards.glob("*.tar"))) < 3 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "make_shards ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    complete = sorted(shards.glob("*.tar"))
    assert complete and len(complete) < 27 and not data_list.exists()
    for shard in complete:  # never a truncated shard under its name
        assert len(shard_keys_of(shard)) == 100
    out = run_tool(*command)
    assert out.returncode == 0 and f"26 shards ({len(complete)} already complete)" in out.stdout, out.stderr
    keys = shard_keys(data_list)
    expected = [line.split()[0] for line in (train / "text").read_text().splitlines()]
    assert sorted(keys) == sorted(expected) and len(keys) == len(set(keys)) == 2520
    assert not list(shards.glob("*.tmp"))


def rewrite_shard(path, change):
    """The shard with change(name, payload) -> payload applied to each member."""
    members = []
    with tarfile.open(path) as tar:
        for member in tar:
            members.append((member.name, change(member.name, tar.extractfile(member).read())))
    with tarfile.open(path, "w") as tar:
        for name, payload in members:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))


def test_bad_members_mid_epoch_are_named_and_the_rest_is_kept(test_data, tmp_path, caplog):
    """Shards of real LibriSpeech FLAC: one member truncated, one member's audio replaced by a float WAV
    with a NaN, and one shard cut off in the middle of a member. Every other utterance comes out."""
    d = tmp_path / "ls"
    out = run_tool(sys.executable, ROOT / "egs" / "librispeech" / "local" / "data_prep.py",
                   test_data / "librispeech_samples" / "LibriSpeech" / "dev-clean", d)
    assert out.returncode == 0, out.stderr
    more = run_tool(sys.executable, ROOT / "egs" / "librispeech" / "local" / "data_prep.py",
                    test_data / "librispeech_samples" / "LibriSpeech" / "test-clean", tmp_path / "ls2")
    assert more.returncode == 0, more.stderr
    lists = []
    for name, data_dir in (("a", d), ("b", tmp_path / "ls2")):
        out = run_tool(sys.executable, STEPS / "make_shards.py", "--utts-per-shard", "2", data_dir,
                       tmp_path / f"shards_{name}", tmp_path / f"{name}.list")
        assert out.returncode == 0, out.stderr
        lists += (tmp_path / f"{name}.list").read_text().split()
    assert len(lists) >= 3
    all_keys = [k for shard in lists for k in shard_keys_of(shard)]
    truncated_shard, nan_shard, cut_shard = lists[0], lists[1], lists[-1]
    truncated_key, nan_key = shard_keys_of(truncated_shard)[0], shard_keys_of(nan_shard)[-1]
    nan_audio = io.BytesIO()
    samples = np.zeros(16000, dtype=np.float32)
    samples[8000] = np.nan
    soundfile.write(nan_audio, samples, 16000, format="WAV", subtype="FLOAT")
    rewrite_shard(truncated_shard, lambda n, p: p[: len(p) // 2] if n == f"{truncated_key}.flac" else p)
    rewrite_shard(nan_shard, lambda n, p: nan_audio.getvalue() if n.startswith(nan_key + ".") and
                  not n.endswith(".txt") else p)
    cut_keys = shard_keys_of(cut_shard)
    with open(cut_shard, "r+b") as f:  # cut inside the last member: only the last utterance is lost
        f.truncate(f.seek(0, 2) - 3 * 512 - 1024 * 10)
    (tmp_path / "faulty.list").write_text("".join(f"{s}\n" for s in lists))
    config = data_config({"sample_rate": 16000, "features": {"preset": "kaldi", "num_mel_bins": 80},
                          "batch": {"type": "static", "batch_size": 3}})
    (tmp_path / "lang").mkdir()
    run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", "char", d, tmp_path / "lang", check=True)
    with caplog.at_level(logging.WARNING):
        got = [k for b in Pipeline(str(tmp_path / "faulty.list"), config, Tokenizer(str(tmp_path / "lang")),
                                   train=True).batches() for k in b["keys"]]
    warnings = caplog.text
    assert f"skipped {truncated_key} from {truncated_shard}:{truncated_key}.flac: cannot decode audio" in warnings
    assert f"skipped {nan_key} from {nan_shard}:{nan_key}." in warnings and "not finite" in warnings
    assert f"shard {cut_shard}: damaged after" in warnings
    lost = {truncated_key, nan_key, cut_keys[-1]}
    assert sorted(got) == sorted(k for k in all_keys if k not in lost)


def shard_keys_of(shard):
    with tarfile.open(shard) as tar:
        return list(dict.fromkeys(m.name.rpartition(".")[0] for m in tar))


# The real trainer, with torch.save cut short: half of epoch-2.pt's bytes reach the disk, then SIGKILL.
KILLED_WHILE_SAVING = """
import os, runpy, signal, sys
import torch
real_save = torch.save

def save_half_then_die(obj, f, *args, **kwargs):
    real_save(obj, f, *args, **kwargs)
    if getattr(f, "name", "").endswith("epoch-2.pt.tmp"):
        f.flush()
        os.ftruncate(f.fileno(), f.tell() // 2)
        os.kill(os.getpid(), signal.SIGKILL)

torch.save = save_half_then_die
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow  # 10 s; CI runs it
def test_killed_while_writing_a_checkpoint_then_resumed_equals_an_uninterrupted_run(yesno, tmp_path):
    import torch
    import yaml

    from rnnt.training import checkpoint

    values = yaml.safe_load((ROOT / "egs" / "yesno" / "conf" / "tiny.yaml").read_text())
    values["train"]["epochs"] = 3
    values["data"]["batch"] = {"type": "static", "batch_size": 10}
    conf = tmp_path / "conf.yaml"
    conf.write_text(yaml.safe_dump(values))

    def train(exp, *extra, prefix=()):
        return [*prefix, str(STEPS / "train.py"), "--config", str(conf), "--train-list", str(yesno / "train.list"),
                "--lang-dir", str(yesno / "lang"), "--exp-dir", str(exp), *extra]

    killed = tmp_path / "killed"
    out = subprocess.run(train(killed, prefix=(sys.executable, "-c", KILLED_WHILE_SAVING)), capture_output=True,
                         text=True, cwd=ROOT, timeout=600)
    assert out.returncode == -signal.SIGKILL, out.stderr[-2000:]
    partial = killed / "epoch-2.pt.tmp"
    assert partial.exists() and not (killed / "epoch-2.pt").exists()  # the cut file never took the name
    assert checkpoint.latest(str(killed)) == str(killed / "epoch-1.pt")
    out = run_tool(*train(killed, "--resume", prefix=(sys.executable,)))
    assert out.returncode == 0, out.stderr[-2000:]
    assert "resumed from" in (killed / "train.log").read_text() and (killed / "epoch-3.pt").exists()

    straight = tmp_path / "straight"
    out = run_tool(*train(straight, prefix=(sys.executable,)))
    assert out.returncode == 0, out.stderr[-2000:]
    a, b = (checkpoint.load(str(exp / "epoch-3.pt"))["model"] for exp in (straight, killed))
    assert a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)


# safe_extract in a child whose fourth member is cut halfway, then SIGKILL.
KILLED_WHILE_EXTRACTING = """
import os, signal, sys, tarfile
from rnnt.prep.extract import safe_extract
real_extract = tarfile.TarFile.extract
done = []

def extract_then_die(self, member, path="", **kwargs):
    if len(done) == 3 and member.isfile():
        data = self.extractfile(member).read()
        with open(os.path.join(path, member.name), "wb") as f:
            f.write(data[:len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    done.append(member.name)
    return real_extract(self, member, path, **kwargs)

tarfile.TarFile.extract = extract_then_die
safe_extract(sys.argv[1], sys.argv[2])
"""


def test_killed_while_extracting_then_rerun_extracts_every_member_whole(test_data, tmp_path):
    from rnnt.prep.extract import marker_path, safe_extract

    wavs = sorted((test_data / "waves_yesno").glob("*.wav"))[:8]
    archive = tmp_path / "waves_yesno.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for wav in wavs:
            tar.add(wav, arcname=f"waves_yesno/{wav.name}")
    dest = tmp_path / "corpus"
    out = subprocess.run([sys.executable, "-c", KILLED_WHILE_EXTRACTING, str(archive), str(dest)], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert out.returncode == -signal.SIGKILL, out.stderr[-2000:]
    left = sorted((dest / "waves_yesno").iterdir())
    assert [p.read_bytes() for p in left[:3]] == [w.read_bytes() for w in wavs[:3]]
    assert len(left) == 4 and left[3].stat().st_size == wavs[3].stat().st_size // 2  # the fourth cut halfway
    assert not (dest / f".{archive.name}.extracted").exists()
    assert safe_extract(str(archive), str(dest)) == "extracted"  # no marker: done again, whole
    assert [p.read_bytes() for p in sorted((dest / "waves_yesno").iterdir())] == [w.read_bytes() for w in wavs]
    assert open(marker_path(str(archive), str(dest))).read() == "8 members\n"
    assert safe_extract(str(archive), str(dest)) == "present"
