"""rnnt.model.rotary_attention.SelfAttention: training on the CPU with attention dropout, the weights it drops are
rnnt.model.dropout's mask over softmax(q k^T / sqrt(d)) of the allowed keys, as written out here in float64;
without dropout, and in evaluation, it is torch's kernel and drops nothing."""

import math

import pytest
import torch

from rnnt.model.dropout import RESOLUTION, keep_scale_mask
from rnnt.model.rotary_attention import SelfAttention, allowed_keys, rotate, rotation

DIM, HEADS, FRAMES = 16, 2, 11


def batch():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, FRAMES, DIM, generator=g)
    valid = torch.arange(FRAMES)[None, :] < torch.tensor([11, 7, 1])[:, None]
    return x, valid


def written_out(attention: SelfAttention, x, allowed, cos_sin, keep=None):
    """The attention in float64 from its parameters, each weight scaled by keep (B, heads, T, T) when given."""
    qkv = torch.nn.functional.linear(x.double(), attention.qkv.weight.double(), attention.qkv.bias.double())
    q, k, v = (attention.split_heads(part) for part in qkv.chunk(3, dim=-1))
    cos_sin = tuple(part.double() for part in cos_sin)
    scores = rotate(q, cos_sin) @ rotate(k, cos_sin).transpose(2, 3) / math.sqrt(DIM // HEADS)
    weights = torch.softmax(scores.masked_fill(~allowed[:, None], -math.inf), dim=-1)
    attended = (weights if keep is None else weights * keep.double()) @ v
    B, T = x.shape[:2]
    return torch.nn.functional.linear(attended.transpose(1, 2).reshape(B, T, DIM), attention.out.weight.double(),
                                      attention.out.bias.double())


@pytest.mark.parametrize("chunk_frames", [0, 3])
def test_training_on_the_cpu_drops_the_weights_the_dropout_mask_draws(chunk_frames):
    torch.manual_seed(1)
    attention = SelfAttention(DIM, HEADS, dropout=0.3).train()
    x, valid = batch()
    allowed = allowed_keys(valid, chunk_frames, 1 if chunk_frames else 0)
    cos_sin = rotation(FRAMES, DIM // HEADS, x.device)
    torch.manual_seed(7)
    out = attention(x, allowed, cos_sin)
    torch.manual_seed(7)
    keep = keep_scale_mask(torch.Size((3, HEADS, FRAMES, FRAMES)), round(0.3 * RESOLUTION), torch.float32)
    assert 0 < int((keep == 0).sum()) < keep.numel() // 2  # some weights are dropped, most are kept
    torch.testing.assert_close(out.double(), written_out(attention, x, allowed, cos_sin, keep), atol=1e-5, rtol=1e-5)
    out.square().sum().backward()  # it trains: every parameter gets a gradient
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in attention.parameters())


@pytest.mark.parametrize("dropout, training", [(0.3, False), (0.0, True)])
def test_without_dropout_nothing_is_dropped(dropout, training):
    torch.manual_seed(1)
    attention = SelfAttention(DIM, HEADS, dropout=dropout).train(training)
    x, valid = batch()
    allowed, cos_sin = allowed_keys(valid), rotation(FRAMES, DIM // HEADS, x.device)
    torch.testing.assert_close(attention(x, allowed, cos_sin).double(), written_out(attention, x, allowed, cos_sin),
                               atol=1e-5, rtol=1e-5)


def test_the_angles_of_a_long_utterance_are_exact_to_float32():
    """Frame 20000 (200 s of 10 ms frames stacked by 1): in float32 its angles of about 2e4 radians were off by
    1e-3 and more, and the whole utterance's attention drifted from a stream's, whose positions are within its
    window; brought within one turn in float64, they are within float32's rounding of a turn (6e-8 x 2 pi)."""
    head_dim, frames = 64, 20001
    cos, sin = rotation(frames, head_dim, torch.device("cpu"))
    assert cos.dtype == sin.dtype == torch.float32 and cos.shape == (frames, head_dim // 2)
    for t in (0, 1, 777, 8000, 20000):
        for i in range(head_dim // 2):
            angle = t * 10000.0 ** (-i / (head_dim // 2))
            assert cos[t, i].item() == pytest.approx(math.cos(angle), abs=1e-6)
            assert sin[t, i].item() == pytest.approx(math.sin(angle), abs=1e-6)
