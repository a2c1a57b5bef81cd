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
