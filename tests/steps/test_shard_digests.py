"""Shards known by their content: make_shards records each shard's SHA-256 beside them (SHA256SUMS, which
sha256sum -c checks), and a data list's fingerprint, which a training compares to resume, follows that content,
not where the shards lie or when they were touched."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, run_tool
from rnnt.data.list_fingerprint import list_fingerprint
from rnnt.data.shard_digests import DIGESTS, read_digests, shard_digest
from rnnt.training import checkpoint
from rnnt.training.config_change import changes_to_restart
from rnnt.training.experiment import load_experiment
from test_shards_units import piped_through_tools, prep, table
from yesno_training import CONFIG, config_file, train_args

STEPS = ROOT / "steps"


def sha256sum_check(shard_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sha256sum", "-c", DIGESTS], cwd=shard_dir, capture_output=True, text=True)


def copied(shard_dir: Path, to: Path) -> Path:
    """shard_dir copied to `to` as a job copies it to a node's disk (cp without -p: every file a new time), and a
    list there naming the copies."""
    subprocess.run(["cp", "-r", str(shard_dir), str(to / "shards")], check=True)
    names = sorted(name for name in os.listdir(to / "shards") if name.endswith(".tar"))
    (to / "data.list").write_text("".join(f"{to / 'shards' / name}\n" for name in names))
    return to / "data.list"


def test_sha256sum_checks_the_shards_and_a_copy_elsewhere_or_touched_is_the_same_data(test_data, tmp_path):
    data = prep("librispeech", test_data, tmp_path)
    make = [sys.executable, STEPS / "make_shards.py", "--utts-per-shard", "2", data, tmp_path / "sh",
            tmp_path / "data.list"]
    assert run_tool(*make).returncode == 0
    shards = (tmp_path / "data.list").read_text().split()
    check = sha256sum_check(tmp_path / "sh")
    assert check.returncode == 0 and check.stdout.count(": OK") == len(shards) == 3, check.stdout + check.stderr
    before = list_fingerprint(str(tmp_path / "data.list"))
    (tmp_path / "node").mkdir()
    moved = copied(tmp_path / "sh", tmp_path / "node")
    assert list_fingerprint(str(moved)) == before
    os.utime(shards[0], ns=(1, 1))
    assert list_fingerprint(str(tmp_path / "data.list")) == before
    # by path, size and time (the fingerprint of before), the copy is other data
    assert list_fingerprint(str(moved), by_content=False) != list_fingerprint(str(tmp_path / "data.list"),
                                                                            by_content=False)
    # a transcript changed and the shards made again: the shard that holds it is other data
    text = table(data / "text")
    first = sorted(text)[0]
    (data / "text").write_text("".join(f"{k} {'CHANGED' if k == first else v}\n" for k, v in sorted(text.items())))
    digests = read_digests(str(tmp_path / "sh"))
    assert run_tool(*make[:2], "--replace", *make[2:]).returncode == 0
    again = read_digests(str(tmp_path / "sh"))
    assert [name for name in sorted(again) if again[name] != digests[name]] == ["shards_000000.tar"]
    assert list_fingerprint(str(tmp_path / "data.list")) != before
    # shards no SHA256SUMS lists (written before digests were kept) are known by path, size and time
    (tmp_path / "node" / "shards" / DIGESTS).unlink()
    assert list_fingerprint(str(moved)) == list_fingerprint(str(moved), by_content=False)


def test_a_shard_emptied_or_cut_short_since_is_written_again(test_data, tmp_path):
    """A shard there counted as complete whatever it held: emptied or cut short (a copy that failed), its
    utterances were lost to every training after, and SHA256SUMS kept the digest of before."""
    data = prep("librispeech", test_data, tmp_path)
    make = [sys.executable, STEPS / "make_shards.py", "--utts-per-shard", "2", data, tmp_path / "sh",
            tmp_path / "data.list"]
    assert run_tool(*make).returncode == 0
    shards = sorted((tmp_path / "sh").glob("*.tar"))
    whole = [shard.read_bytes() for shard in shards]
    shards[1].write_bytes(b"")
    shards[2].write_bytes(whole[2][:len(whole[2]) // 2])
    again = run_tool(*make)
    assert again.returncode == 0 and "3 shards (1 already complete); this run wrote 3 utterances" in again.stdout
    for shard in shards[1:]:
        assert f"{shard}: not the shard written there (its SHA-256 is not the one SHA256SUMS records)" in again.stderr
    assert [shard.read_bytes() for shard in shards] == whole
    check = sha256sum_check(tmp_path / "sh")
    assert check.returncode == 0 and check.stdout.count(": OK") == 3, check.stdout + check.stderr
    # a SHA256SUMS of sha256sum -b ('<hex> *<name>', upper case from elsewhere) was no digest at all: a shard
    # damaged since was taken as whole and its damaged digest recorded
    binary = subprocess.run(["sha256sum", "-b", *[shard.name for shard in shards]], cwd=tmp_path / "sh",
                            capture_output=True, text=True, check=True).stdout
    (tmp_path / "sh" / DIGESTS).write_text(binary.replace(binary[:64], binary[:64].upper(), 1))
    assert read_digests(str(tmp_path / "sh")) == {shard.name: shard_digest(str(shard)) for shard in shards}
    shards[1].write_bytes(whole[1][:len(whole[1]) // 2])
    again = run_tool(*make)
    assert again.returncode == 0 and f"{shards[1]}: not the shard written there" in again.stderr, again.stderr
    assert [shard.read_bytes() for shard in shards] == whole


KILLER = """#!/bin/sh
# kills the make_shards.py that ran it (through sh -c): a run stopped after it wrote a shard again, before it
# recorded the shards
p=$PPID
[ "$(cat /proc/$p/comm)" != sh ] || p=$(cut -d' ' -f4 /proc/$p/stat)
kill -9 "$p"
"""


def test_a_run_killed_after_writing_a_shard_again_leaves_no_digest_of_the_old_one(test_data, tmp_path):
    """The shards that left an utterance out (its wav.scp tool not installed yet) are written again by the next
    run: their lines leave SHA256SUMS before, so a run killed after one is renamed lists no stale digest."""
    _, _, tools, run = piped_through_tools(test_data, tmp_path, {0: "mytool", 2: "killer"})  # shards 0 and 1
    assert run().returncode == 0
    assert sorted(read_digests(str(tmp_path / "sh"))) == [f"shards_00000{i}.tar" for i in range(3)]
    (tools / "mytool").write_text('#!/bin/sh\ncat "$1"\n')
    (tools / "killer").write_text(KILLER)
    for tool in ("mytool", "killer"):
        (tools / tool).chmod(0o755)
    out = run()
    assert out.returncode in (-9, 137), out.stderr
    assert not Path(f"{tmp_path}/sh/shards_000000.tar.skipped").exists()  # written again, whole
    assert sorted(read_digests(str(tmp_path / "sh"))) == ["shards_000002.tar"]
    check = sha256sum_check(tmp_path / "sh")
    assert check.returncode == 0, check.stdout + check.stderr
    (tools / "killer").write_text('#!/bin/sh\ncat "$1"\n')
    assert run().returncode == 0
    check = sha256sum_check(tmp_path / "sh")
    assert check.returncode == 0 and check.stdout.count(": OK") == 3, check.stdout + check.stderr


def test_a_training_resumes_on_its_shards_copied_elsewhere(yesno, tmp_path):
    """A job that copies the shards to its node's disk and trains from a list there resumes the experiment
    (its shards were other data by their paths and times: the training started over)."""
    exp = tmp_path / "exp"
    assert run_tool(*train_args(yesno, exp, config_file(tmp_path, epochs=1))).returncode == 0
    moved = copied(yesno / "shards", tmp_path)
    args = train_args(yesno, exp, config_file(tmp_path, epochs=2))
    args[args.index("--train-list") + 1] = str(moved)
    out = run_tool(*args, "--resume")
    assert out.returncode == 0 and "set aside" not in out.stderr, out.stderr[-2000:]
    assert "resumed from" in (exp / "train.log").read_text()
    assert checkpoint.load_meta(str(exp / "epoch-2.pt"))["train_data"] == list_fingerprint(str(yesno / "train.list"))


def test_a_checkpoint_of_the_fingerprint_before_digests_resumes_on_the_same_shards(yesno):
    """Checkpoints written before shards were known by content hold the list's fingerprint by paths, sizes and
    times: the same shards resume (the newer value would have taken them for other data)."""
    experiment = load_experiment(str(CONFIG))
    experiment = dataclasses.replace(experiment, paths=dataclasses.replace(experiment.paths,
                                                                           train_list=str(yesno / "train.list")))
    now = list_fingerprint(experiment.paths.train_list)
    before = list_fingerprint(experiment.paths.train_list, by_content=False)
    assert now != before
    assert changes_to_restart(experiment, experiment, {"epoch": 1, "train_data": before}, now) == []
    assert [c.key for c in changes_to_restart(experiment, experiment, {"epoch": 1, "train_data": "other"}, now)] == [
        "the training data"]


def test_a_run_killed_before_it_wrote_a_damaged_shard_again_leaves_no_damaged_shard_to_take_as_whole(test_data,
                                                                                                      tmp_path):
    """A shard cut short since is written again; its SHA256SUMS line goes first. A run killed before the new one was
    renamed in left the damaged shard under its name and unlisted: the next run took it for a shard from before
    digests were kept, whole, and recorded the damaged shard's SHA-256."""
    _, _, tools, run = piped_through_tools(test_data, tmp_path, {2: "killer"})  # the first of shard 1
    (tools / "killer").write_text('#!/bin/sh\ncat "$1"\n')
    (tools / "killer").chmod(0o755)
    assert run().returncode == 0
    damaged = tmp_path / "sh" / "shards_000001.tar"
    whole = damaged.read_bytes()
    damaged.write_bytes(whole[:len(whole) // 2])
    (tools / "killer").write_text(KILLER)
    assert run().returncode in (-9, 137)
    assert not damaged.exists() and sorted(read_digests(str(tmp_path / "sh"))) == ["shards_000000.tar",
                                                                                  "shards_000002.tar"]
    (tools / "killer").write_text('#!/bin/sh\ncat "$1"\n')
    out = run()
    assert out.returncode == 0 and "this run wrote 2 utterances" in out.stdout, out.stdout + out.stderr
    assert damaged.read_bytes() == whole and sha256sum_check(tmp_path / "sh").stdout.count(": OK") == 3
