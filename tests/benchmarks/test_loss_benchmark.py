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
