"""rnnt.model.depthwise_conv: over (B, T, C) frames it is the Conv1d it is given, centred or causal, values and
gradients; under bfloat16 autocast an utterance of a length at which oneDNN's channels-last kernel stalls
(minutes to build) is convolved at once."""

import pytest
import torch

from rnnt.model.depthwise_conv import depthwise_over_time


def conv1d_over_time(conv, frames, history=0):
    padded = torch.nn.functional.pad(frames, (0, 0, history, 0))
    return conv(padded.transpose(1, 2)).transpose(1, 2)


@pytest.mark.parametrize("causal", [False, True])
def test_float32_gives_the_conv1ds_values_and_gradients(causal):
    torch.manual_seed(0)
    channels, kernel = 24, 7
    conv = torch.nn.Conv1d(channels, channels, kernel, padding=0 if causal else kernel // 2, groups=channels)
    history = kernel - 1 if causal else 0
    frames = torch.randn(3, 40, channels, requires_grad=True)
    weights = torch.randn(3, 40, channels)
    results = []
    for run in (depthwise_over_time, conv1d_over_time):
        out = run(conv, frames, history)
        results.append((out, *torch.autograd.grad((out * weights).sum(), [frames, conv.weight, conv.bias])))
    assert results[0][0].shape == (3, 40, channels) and results[0][0].is_contiguous()
    for ours, theirs in zip(*results):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


@pytest.mark.timeout(120, method="thread")  # a stall is in C++: the signal method would never fire
@pytest.mark.parametrize("frames", [86, 128])
def test_one_utterance_under_bfloat16_autocast_does_not_stall(frames):
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(144, 144, 15, padding=7, groups=144)
    x = torch.randn(1, frames, 144)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the stall is oneDNN's with more than one thread (the tests run one)
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            out, expected = depthwise_over_time(conv, x), conv1d_over_time(conv, x)
    finally:
        torch.set_num_threads(threads)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, expected)
