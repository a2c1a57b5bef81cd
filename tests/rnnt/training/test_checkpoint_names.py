"""Model tags and checkpoint names, from Python and from the command line utils/decoding.sh uses."""

import logging
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from rnnt.training.checkpoint_names import averaged_epochs, checkpoint_path, model_tag, numbered, parse_tag


@pytest.fixture
def exp(tmp_path):
    for epoch in (1, 2, 3, 9, 10, 11):  # numbers sort as numbers: epoch-10 after epoch-9
        (tmp_path / f"epoch-{epoch}.pt").write_bytes(b"")
    (tmp_path / "epoch-x.pt").write_bytes(b"")  # not a checkpoint name
    return tmp_path


def test_tags_name_the_newest_epoch_and_how_many_are_averaged(exp, tmp_path_factory):
    assert [p.rsplit("/", 1)[1] for p in numbered(str(exp), "epoch")] == [
        "epoch-1.pt", "epoch-2.pt", "epoch-3.pt", "epoch-9.pt", "epoch-10.pt", "epoch-11.pt"]
    assert model_tag(str(exp), 5) == "avg5-epoch-11"
    assert model_tag(str(exp), 20) == "avg6-epoch-11"  # fewer epochs than asked: all of them
    assert model_tag(str(exp), 0) == "epoch-11"
    assert model_tag(str(tmp_path_factory.mktemp("empty")), 5) == ""
    assert numbered(str(exp / "missing"), "epoch") == []
    assert checkpoint_path(str(exp), "avg5-epoch-11") == f"{exp}/avg-5.pt"
    assert checkpoint_path(str(exp), "epoch-9") == f"{exp}/epoch-9.pt"
    assert [p.rsplit("/", 1)[1] for p in averaged_epochs(str(exp), "avg3-epoch-10")] == [
        "epoch-3.pt", "epoch-9.pt", "epoch-10.pt"]
    assert averaged_epochs(str(exp), "epoch-10") == []
    assert parse_tag("avg12-epoch-300") == (12, 300)
    for bad in ("avg5", "epoch-", "avg-5-epoch-3", "epoch-3.pt"):
        with pytest.raises(ValueError, match="not a model tag"):
            parse_tag(bad)


def test_the_command_line_gives_the_same_answers(exp):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "rnnt.training.checkpoint_names", *args], capture_output=True,
                              text=True, cwd=ROOT)

    assert run("tag", str(exp), "5").stdout == "avg5-epoch-11\n"
    assert run("path", str(exp), "avg5-epoch-11").stdout == f"{exp}/avg-5.pt\n"
    assert run("averaged", str(exp), "avg2-epoch-11").stdout.split() == [f"{exp}/epoch-10.pt", f"{exp}/epoch-11.pt"]
    pointed = run("point", str(exp), "avg5-epoch-11")  # printed the averaged epochs in every average stage's log
    assert pointed.returncode == 0 and (pointed.stdout, pointed.stderr) == ("", "")
    assert os.readlink(exp / "model.pt") == "avg-5.pt"
    bad = run("path", str(exp), "latest")
    assert bad.returncode == 1 and "'latest' is not a model tag" in bad.stderr
    assert run("--help").returncode == 0 and run("tag").returncode == 2


def test_decoding_takes_the_average_unless_training_went_past_it(tmp_path):
    """avg-5.pt of epochs up to 25, then 2 more epochs decoded with --average 0: transcription and export by
    default take epoch-27.pt (they took the stale average), and a fresh average of the newest again."""
    import torch

    from rnnt.training import checkpoint

    for name, step in (("epoch-25.pt", 250), ("avg-5.pt", 250)):
        torch.save({"model": {}, "meta": {"step": step, "epoch": 25}}, tmp_path / name)
    assert checkpoint.for_decoding(str(tmp_path)) == str(tmp_path / "avg-5.pt")
    torch.save({"model": {}, "meta": {"step": 270, "epoch": 27}}, tmp_path / "epoch-27.pt")
    assert checkpoint.for_decoding(str(tmp_path)) == str(tmp_path / "epoch-27.pt")
    torch.save({"model": {}, "meta": {"step": 270, "epoch": 27}}, tmp_path / "avg-3.pt")
    assert checkpoint.for_decoding(str(tmp_path)) == str(tmp_path / "avg-3.pt")


def test_decoding_takes_model_pt_the_model_the_results_name(tmp_path, caplog):
    """run.sh --average 1, then --average 2 with avg-2.pt current from before: its result lines named avg-2.pt,
    transcription took avg-1.pt, the newest file. model.pt (point) names the model decoded; a link whose file was
    removed is none; training past it is still taken."""
    import torch

    from rnnt.training import checkpoint

    for name, step in (("epoch-25.pt", 250), ("avg-2.pt", 250), ("avg-1.pt", 250)):
        torch.save({"model": {}, "meta": {"step": step, "epoch": 25}}, tmp_path / name)
    assert checkpoint.for_decoding(str(tmp_path)) == str(tmp_path / "avg-1.pt")
    out = subprocess.run([sys.executable, "-m", "rnnt.training.checkpoint_names", "point", str(tmp_path),
                          "avg2-epoch-25"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert os.readlink(tmp_path / "model.pt") == "avg-2.pt"
    assert checkpoint.for_decoding(str(tmp_path)) == str(tmp_path / "avg-2.pt")
    moved = tmp_path.rename(tmp_path.parent / "moved")  # a relative link: the experiment dir can move
    assert checkpoint.for_decoding(str(moved)) == str(moved / "avg-2.pt")
    torch.save({"model": {}, "meta": {"step": 270, "epoch": 27}}, moved / "epoch-27.pt")
    assert checkpoint.for_decoding(str(moved)) == str(moved / "epoch-27.pt")
    (moved / "epoch-27.pt").unlink()
    (moved / "avg-2.pt").unlink()
    with caplog.at_level(logging.WARNING):  # another model than the results named: it was taken in silence
        assert checkpoint.for_decoding(str(moved)) == str(moved / "avg-1.pt")
    assert f"{moved / 'model.pt'} links to avg-2.pt, which is gone; taking {moved / 'avg-1.pt'}" in caplog.text
    # a model.pt of one's own (no link) is taken, and never replaced by a link
    (moved / "model.pt").unlink()
    torch.save({"model": {}, "meta": {"step": 250, "epoch": 25}}, moved / "model.pt")
    out = subprocess.run([sys.executable, "-m", "rnnt.training.checkpoint_names", "point", str(moved),
                          "avg1-epoch-25"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and "model.pt is a file of its own, not a link: left as it is" in out.stderr
    assert not (moved / "model.pt").is_symlink() and checkpoint.for_decoding(str(moved)) == str(moved / "model.pt")


def test_an_experiment_whose_checkpoints_cannot_be_read_names_them_not_none(tmp_path):
    """A cut-short epoch-1.pt alone: decoding and export said 'no checkpoint', as of an experiment never trained."""
    from rnnt.training import checkpoint

    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        checkpoint.for_decoding(str(tmp_path))
    (tmp_path / "epoch-1.pt").write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(checkpoint.UnreadableCheckpoint, match=f"{tmp_path / 'epoch-1.pt'}: not a readable checkpoint"):
        checkpoint.for_decoding(str(tmp_path))


@pytest.mark.parametrize("content, why", [(b"", "an empty file (0 bytes)"),
                                          (b"hello\n", "not a file torch.save writes")])
def test_a_checkpoint_that_is_empty_or_not_torchs_says_so(tmp_path, content, why):
    """torch's own reasons: 'mmap can only be used with files saved with torch.save(...,
    _use_new_zipfile_serialization=True)' of an empty file, and '101' of a text file."""
    from rnnt.training import checkpoint

    path = tmp_path / "epoch-1.pt"
    path.write_bytes(content)
    for mmap in (False, True):
        with pytest.raises(checkpoint.UnreadableCheckpoint) as error:
            checkpoint.load(str(path), mmap=mmap)
        assert str(error.value) == f"{path}: not a readable checkpoint ({why})"


def test_an_experiment_dir_named_like_a_glob_pattern_holds_its_checkpoints(tmp_path):
    """'exp[a]' was read as a pattern: no checkpoints found, so --resume started again over them and a fresh
    run was not refused; 'exp*' found a sibling's."""
    for name in ("exp[a]", "exp*", "expb"):
        (tmp_path / name).mkdir()
    (tmp_path / "exp[a]" / "epoch-2.pt").write_bytes(b"")
    (tmp_path / "expb" / "epoch-7.pt").write_bytes(b"")
    assert numbered(str(tmp_path / "exp[a]"), "epoch") == [f"{tmp_path}/exp[a]/epoch-2.pt"]
    assert numbered(str(tmp_path / "exp*"), "epoch") == []
