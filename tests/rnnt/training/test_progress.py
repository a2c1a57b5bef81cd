"""rnnt.training.progress: where training's log goes (setup_logging) and the pace line."""

import logging

import pytest

from rnnt.training.distributed import World
from rnnt.training.progress import Progress, close_logging, setup_logging


@pytest.fixture(autouse=True)
def logging_closed_after():
    yield
    close_logging()
    assert not logging.getLogger("rnnt").handlers


def records_of(path) -> list[str]:
    return [line.split("] ", 1)[1] for line in path.read_text().splitlines()]


def test_the_package_log_reaches_train_log_and_the_callers_own_logging(tmp_path, caplog):
    setup_logging(str(tmp_path), World())
    with caplog.at_level(logging.INFO):
        logging.getLogger("rnnt.train").info("epoch 1 validation: loss 3.5")
        logging.getLogger("rnnt.data.sources").warning("shard 7: skipped a bad line")
        logging.getLogger("elsewhere").info("not the package's")
    assert records_of(tmp_path / "train.log") == ["epoch 1 validation: loss 3.5", "shard 7: skipped a bad line"]
    # The caller's handlers (pytest's capture here) are still there and still get the package's records.
    assert [r.getMessage() for r in caplog.records if r.name.startswith("rnnt")] == [
        "epoch 1 validation: loss 3.5", "shard 7: skipped a bad line"]
    assert "not the package's" in caplog.text


def test_a_second_trainer_closes_the_first_log_and_writes_its_own(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    setup_logging(str(first), World())
    logging.getLogger("rnnt.train").info("one")
    setup_logging(str(second), World())
    logging.getLogger("rnnt.train").info("two")
    assert records_of(first / "train.log") == ["one"] and records_of(second / "train.log") == ["two"]
    assert len([h for h in logging.getLogger("rnnt").handlers if isinstance(h, logging.FileHandler)]) == 1


def test_other_ranks_log_warnings_to_stderr_and_write_no_file(tmp_path, capsys):
    setup_logging(str(tmp_path), World(rank=1, size=2))
    logging.getLogger("rnnt.train").info("step 100: loss 2.0")
    logging.getLogger("rnnt.train").warning("rank 1: a batch skipped")
    assert not (tmp_path / "train.log").exists()
    err = capsys.readouterr().err
    assert "[rank 1] rank 1: a batch skipped" in err and "step 100" not in err


def test_the_pace_counts_batches_and_the_time_left_once_an_epoch_is_known(tmp_path):
    progress = Progress(str(tmp_path), World(rank=1, size=2), log_every=10, epochs=3)  # rank 1: no TensorBoard
    progress.start_epoch(0, 0)
    progress.batch_done(1.5)
    assert "batches/s, 0 s into epoch 1" in progress.pace() and "left" not in progress.pace()
    progress.epoch_batches = 100
    assert "s left in the epoch" in progress.pace() and "min left in the training" in progress.pace()


def test_only_the_reporting_rank_keeps_the_losses_it_reports(tmp_path):
    """Ranks other than the main one report nothing: they kept every batch's loss until the epoch ended."""
    other = Progress(str(tmp_path), World(rank=1, size=2), log_every=1, epochs=1)
    main = Progress(str(tmp_path), World(), log_every=1, epochs=1)
    for progress in (other, main):
        progress.start_epoch(0, 0)
        for _ in range(5):
            progress.batch_done(2.0)
    assert other.losses == [] and main.losses == [2.0] * 5
    main.step_done(0, 1, 1e-3, 1.0)
    assert main.losses == []
    for progress in (other, main):
        progress.end_epoch()
        progress.close()
