"""Progress bars go to a terminal, never into a log (rnnt.progress_bar), and training's log lines say
its pace instead (rnnt.training.progress)."""

from rnnt import progress_bar
from rnnt.training.distributed import World
from rnnt.training.progress import Progress


def test_no_bar_where_no_one_watches(capsys, monkeypatch):
    monkeypatch.delenv("RNNT_TERMINAL", raising=False)
    assert list(progress_bar.progress(range(3), desc="work")) == [0, 1, 2]  # stderr is captured: no terminal
    assert capsys.readouterr().err == ""


def test_a_recipe_stage_draws_its_bar_on_the_terminal_it_names_not_in_its_log(capsys, monkeypatch, tmp_path):
    terminal = tmp_path / "tty"
    terminal.touch()
    monkeypatch.setenv("RNNT_TERMINAL", str(terminal))
    for _ in progress_bar.progress(range(3), desc="work"):
        pass
    assert capsys.readouterr().err == ""
    assert "work: 100%" in terminal.read_text() and "3/3" in terminal.read_text()
    monkeypatch.setenv("RNNT_TERMINAL", str(tmp_path / "no" / "such" / "tty"))
    assert progress_bar.bar_stream() is None  # a detached job: no bar, no error


def test_training_log_lines_give_the_rate_and_the_time_left(monkeypatch, tmp_path):
    clock = iter(range(0, 1000, 2))  # every call of time.time() advances 2 s
    monkeypatch.setattr("rnnt.training.progress.time.time", lambda: next(clock))
    progress = Progress(str(tmp_path), World(rank=1, size=2), log_every=1, epochs=3)  # rank 1: no TensorBoard
    progress.start_epoch(0, 0)
    for _ in range(10):
        progress.batch_done(1.0)
    assert "s left" not in progress.pace()  # the first epoch's length is not known yet
    progress.end_epoch()
    progress.start_epoch(1, 0)
    for _ in range(4):
        progress.batch_done(1.0)
    pace = progress.pace()  # 4 batches in 2 s: 2 batches/s; 6 left in this epoch, 10 in the next
    assert pace == "2.00 batches/s, 2 s into epoch 2, 3 s left in the epoch, 0.1 min left in the training"
    progress.end_epoch()


def test_a_bar_switched_off_stays_off(monkeypatch, tmp_path):
    terminal = tmp_path / "tty"
    terminal.touch()
    monkeypatch.setenv("RNNT_TERMINAL", str(terminal))
    assert list(progress_bar.progress(range(2), disable=True)) == [0, 1]
    assert terminal.read_text() == ""
