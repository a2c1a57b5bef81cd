"""benchmarks/loss.py's steps: the loss alone (its column against torchaudio's) computes the same loss and the same
gradient of the logits as the whole step, the joiner left out; a method that makes its logits inside is refused."""

import os
import sys

import pytest
import torch

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import loss as benchmark  # noqa: E402  benchmarks/loss.py


@pytest.mark.parametrize("method", ["padded", "packed"])
def test_the_loss_alone_is_the_whole_steps_loss_of_logits_made_once(method, monkeypatch):
    seen = []
    import rnnt.loss

    real = rnnt.loss.transducer_loss

    def kept(logits, *args, **kwargs):  # the logits the whole step's loss is given, and their gradient
        if logits.requires_grad and not logits.is_leaf:
            logits.retain_grad()
        seen.append(logits)
        return real(logits, *args, **kwargs)

    monkeypatch.setattr(rnnt.loss, "transducer_loss", kept)
    whole, alone = benchmark.make_step(method, 2, 6, 3, 5), benchmark.make_step(method, 2, 6, 3, 5, loss_only=True)
    assert whole() == pytest.approx(alone(), rel=1e-6)
    assert alone() == pytest.approx(whole(), rel=1e-6)  # and again: the leaf kept as it was
    whole_logits, alone_logits = seen[-1], seen[-2]
    assert alone_logits.is_leaf and not whole_logits.is_leaf and alone_logits is seen[1]
    assert torch.allclose(alone_logits.detach(), whole_logits.detach()) and torch.allclose(alone_logits.grad,
                                                                                             whole_logits.grad)
    with pytest.raises(ValueError, match="fused: no loss alone"):
        benchmark.make_step("fused", 2, 6, 3, 5, loss_only=True)


def test_a_peer_venv_that_cannot_import_torchaudio_leaves_its_rows_out(tmp_path):
    """make_torchaudio_venv.sh offline left a venv without torch: its rows ran, failed, and run_all.sh stopped
    there, the benchmarks after loss.py never run."""
    import subprocess

    peer = tmp_path / "python"
    peer.write_text("#!/bin/sh\nexit 1\n")
    peer.chmod(0o755)
    out = subprocess.run([sys.executable, "benchmarks/loss.py", "--methods", "torchaudio", "--shapes",
                          "B8-T200-U50-V500", "--runs", "1", "--torchaudio-python", str(peer)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"{peer} cannot import torch and torchaudio: its rows are left out" in out.stderr


def test_a_peer_venv_whose_build_failed_is_removed(tmp_path):
    """Offline (no package index), the build's venv is removed rather than left without torch as a peer."""
    import shutil
    import subprocess

    script = shutil.copy(ROOT / "benchmarks" / "make_torchaudio_venv.sh", tmp_path)  # it builds beside itself
    env = {**os.environ, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0", "PIP_TIMEOUT": "1"}
    out = subprocess.run(["bash", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 1 and f"the build failed: {tmp_path / 'venv-torchaudio'} removed" in out.stderr
    assert not (tmp_path / "venv-torchaudio").exists()
