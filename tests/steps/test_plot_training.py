"""steps/plot_training.py on the log a real training run writes."""

import sys

import pytest

from conftest import ROOT, run_tool
from yesno_training import config_file, train_args


@pytest.mark.slow
def test_plots_loss_and_dev_wer_of_a_real_run(yesno, tmp_path):
    conf = config_file(tmp_path, epochs=2)
    exp = tmp_path / "exp"
    out = run_tool(*train_args(yesno, exp, conf), "--valid-list", yesno / "five.list")
    assert out.returncode == 0, out.stderr[-2000:]
    png = tmp_path / "plots" / "training.png"
    out = run_tool(sys.executable, ROOT / "steps" / "plot_training.py", png, exp, exp, "--labels", "a,b")
    assert out.returncode == 0, out.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    wers = [line.split("WER ")[1].split("%")[0] for line in (exp / "train.log").read_text().splitlines()
            if "validation" in line]
    assert len(wers) == 2 and f"a: best dev WER {min(float(w) for w in wers):.2f}%" in out.stdout
    missing = run_tool(sys.executable, ROOT / "steps" / "plot_training.py", png, tmp_path / "nothing")
    assert missing.returncode == 1 and "train.log: not found" in missing.stderr


def test_a_log_line_that_does_not_read_is_named_and_left_out(tmp_path):
    """`loss 1.2.3` or a date that is none was a ValueError traceback."""
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "train.log").write_text(
        "2026-11-30 06:00:00,000 [rank 0] epoch 1 step 10: loss 1.5, lr 0.001\n"
        "2026-11-30 06:00:10,000 [rank 0] epoch 1 step 20: loss 1.2.3, lr 0.001\n"
        "2026-13-30 06:00:20,000 [rank 0] epoch 1 step 30: loss 1.0, lr 0.001\n"
        "2026-11-30 06:00:30,000 [rank 0] epoch 1 validation: loss 0.9, WER 12.50%\n")
    png = tmp_path / "training.png"
    out = run_tool(sys.executable, ROOT / "steps" / "plot_training.py", png, exp)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert f"plot_training.py: {exp / 'train.log'}:2: could not convert string to float" in out.stderr
    assert f"plot_training.py: {exp / 'train.log'}:3: " in out.stderr and "best dev WER 12.50%" in out.stdout
    with open(exp / "train.log", "a") as f:  # a validation inside an epoch (train.valid_every) is a point too
        f.write("2026-11-30 06:00:40,000 [rank 0] epoch 2 step 40 validation (EMA): loss 0.8, WER 10.00% over 5\n")
    out = run_tool(sys.executable, ROOT / "steps" / "plot_training.py", png, exp)
    assert out.returncode == 0 and "best dev WER 10.00%" in out.stdout, out.stdout + out.stderr
    # an experiment without a log leaves the others plotted; an output named without .png is written as one,
    # and said so; another suffix is refused (matplotlib's ValueError, a traceback)
    out = run_tool(sys.executable, ROOT / "steps" / "plot_training.py", tmp_path / "plot", exp, tmp_path / "none")
    assert out.returncode == 0 and f"left out {tmp_path / 'none' / 'train.log'}: not found" in out.stderr
    assert out.stdout.startswith(f"plot_training.py: wrote {tmp_path / 'plot.png'}; ") and out.stdout.endswith(
        "; 1 of 2 experiments left out (named above)\n") and (tmp_path / "plot.png").is_file(), out.stdout
    out = run_tool(sys.executable, ROOT / "steps" / "plot_training.py", tmp_path / "plot.txt", exp)
    assert out.returncode == 2 and "the plot is a PNG; name it .png" in out.stderr and "Traceback" not in out.stderr
