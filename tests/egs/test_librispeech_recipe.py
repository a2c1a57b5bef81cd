"""egs/librispeech: every stage on the LibriSpeech samples with the tiny configuration."""

import re
from pathlib import Path

import pytest
from conftest import ROOT, run_tool
from recipe_runs import copy_recipe, run_recipe

pytestmark = pytest.mark.slow


def test_librispeech_every_stage_on_the_samples(test_data, tmp_path):
    recipe = copy_recipe("librispeech", tmp_path)
    args = ("--corpus-dir", str(test_data / "librispeech_samples" / "LibriSpeech"), "--train-sets", "dev-clean",
            "--valid-set", "test-clean", "--test-sets", "test-clean", "--train-config", "conf/tiny.yaml",
            "--exp", "exp/tiny", "--vocab-size", "40", "--ngpu", "0", "--nj", "2")
    out = run_recipe(recipe, *args, "--average", "2")
    assert out.returncode == 0, out.stderr[-3000:]
    for data_dir in ("dev_clean", "test_clean"):
        valid = run_tool(ROOT / "utils" / "validate_data_dir.sh", "--no-feats", recipe / "data" / data_dir)
        assert valid.returncode == 0, valid.stderr
    assert (recipe / "data" / "dev_clean" / "spk2gender").is_file()
    for data_dir in ("dev_clean", "test_clean"):
        shards = (recipe / "data" / data_dir / "data.list").read_text().split()
        assert shards and all(Path(s).is_file() for s in shards)
    lang = recipe / "data" / "dev_clean" / "lang_bpe40"  # units of the training data, kept in its dir
    assert (lang / "bpe.model").is_file() and (lang / "units.txt").read_text().startswith("<blank> 0\n<unk> 1\n")
    words = sum(len(line.split()) - 1 for trans in (test_data / "librispeech_samples" / "LibriSpeech" / "test-clean")
                .glob("*/*/*.trans.txt") for line in trans.read_text().splitlines())
    exp = recipe / "exp" / "tiny"
    assert (exp / "config.yaml").is_file() and (exp / "epoch-2.pt").is_file() and (exp / "avg-2.pt").is_file()
    assert (exp / "lang" / "bpe.model").read_bytes() == (lang / "bpe.model").read_bytes()
    for method in ("greedy", "modified_beam"):
        wer = (exp / f"decode-test_clean-{method}-avg2-epoch-2" / "wer").read_text()
        assert re.match(rf"%WER [0-9.]+ \[ \d+ / {words}, \d+ ins, \d+ del, \d+ sub \]", wer), wer
        assert f"librispeech test-clean {method} (tiny avg2-epoch-2): {wer.strip()}" in out.stdout
    averaged = (exp / "decode-test_clean-greedy-avg2-epoch-2" / "wer").read_text()
    # A second node run again as node 0 was: its training is node 0's, done before (before: stage 4 forced, it
    # trained alone and waited for node 0 at torchrun's rendezvous, 10 minutes, then failed); a node rank past
    # --nnodes is refused
    node = run_recipe(recipe, *args, "--average", "2", "--nnodes", "2", "--node-rank", "1", "--master-addr", "head")
    assert node.returncode == 0 and node.stdout.rstrip().endswith(
        "run.sh: node 1: node 0's training of exp/tiny is done before with these inputs: nothing to train"), \
        node.stdout[-2000:] + node.stderr[-2000:]
    assert "stage 1" not in node.stdout and not (exp / "log" / "4.train-node1.log").exists()
    lost = run_recipe(recipe, *args, "--node-rank", "1")
    assert lost.returncode == 1 and "--nnodes 1 --node-rank 1: the nodes are 1 or more" in lost.stderr
    # Decoding an average that stage 5 has not made (here of 1 epoch) is refused, not done on avg-1.pt's absence
    # or on a stale one.
    stale = run_recipe(recipe, *args, "--average", "1", "--stage", "6")
    assert stale.returncode == 1 and "run stage 5 first" in stale.stderr, stale.stderr[-3000:]
    # Without averaging the last epoch is decoded: new decode stages beside the average's, the rest done before.
    last = run_recipe(recipe, *args, "--average", "0")
    assert last.returncode == 0, last.stderr[-3000:]
    assert "stage 6 (decode-test_clean-greedy-epoch-2)\n" in last.stdout
    assert "checkpoint epoch-2.pt" in last.stdout + last.stderr
    # data (dev-clean, test-clean), shards (dev_clean, test_clean), units, train
    assert last.stdout.count("done before; skipped") == 6, last.stdout
    assert (exp / "decode-test_clean-greedy-epoch-2" / "wer").is_file()
    assert (exp / "decode-test_clean-greedy-avg2-epoch-2" / "wer").read_text() == averaged
    # Other units: a new lang dir and a new experiment trained with them; the first keeps its own. Trained by two
    # processes on the CPU (torchrun's DDP), each rank its part of the shards.
    units = run_recipe(recipe, *args, "--vocab-size", "30", "--exp", "exp/tiny30", "--stop-stage", "4",
                       "--cpu-ranks", "2")
    assert units.returncode == 0, units.stderr[-3000:]
    assert "world size 2 on cpu" in (recipe / "exp" / "tiny30" / "log" / "4.train.log").read_text()
    assert "stage 3 (units-dev_clean-bpe30)" in units.stdout
    assert len((recipe / "exp" / "tiny30" / "lang" / "units.txt").read_text().splitlines()) == 30
    assert len((exp / "lang" / "units.txt").read_text().splitlines()) == 40
    # Several training subsets: combined into a data dir named after them, with shards and units of its own.
    both = list(args)
    both[both.index("--train-sets") + 1] = "test-clean dev-clean"
    combined = run_recipe(recipe, *both, "--stop-stage", "3")
    assert combined.returncode == 0, combined.stderr[-3000:]
    train = recipe / "data" / "train_dev_clean+test_clean"
    assert run_tool(ROOT / "utils" / "validate_data_dir.sh", "--no-feats", train).returncode == 0
    assert len((train / "text").read_text().splitlines()) == sum(
        len((recipe / "data" / d / "text").read_text().splitlines()) for d in ("dev_clean", "test_clean"))
    assert (train / "data.list").is_file() and (train / "lang_bpe40" / "units.txt").is_file()
