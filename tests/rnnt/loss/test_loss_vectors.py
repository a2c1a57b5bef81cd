"""Published fixed vectors: warp-transducer's examples, as also used by torchaudio and k2."""

import pytest
import torch

from rnnt.loss import transducer_loss

SMALL_LOGITS = [
    [[0.1, 0.6, 0.1, 0.1, 0.1], [0.1, 0.1, 0.6, 0.1, 0.1], [0.1, 0.1, 0.2, 0.8, 0.1]],
    [[0.1, 0.6, 0.1, 0.1, 0.1], [0.1, 0.1, 0.2, 0.1, 0.1], [0.7, 0.1, 0.2, 0.1, 0.1]],
]
SMALL_GRAD_BLANK_0 = [
    [[-0.13116688, -0.3999269, 0.17703125, 0.17703125, 0.17703125],
     [-0.18572757, 0.12247056, -0.18168412, 0.12247056, 0.12247056],
     [-0.32091254, 0.06269141, 0.06928472, 0.12624499, 0.06269141]],
    [[0.05456069, -0.21824276, 0.05456069, 0.05456069, 0.05456069],
     [0.12073959, 0.12073959, -0.48295835, 0.12073959, 0.12073959],
     [-0.6925882, 0.16871116, 0.18645467, 0.16871116, 0.16871116]],
]
# Gradient w.r.t. the log-probabilities (warp-transducer's own test feeds log_softmax outputs).
SMALL_GRAD_LOG_PROBS = [
    [[-0.308198071906, -0.6918019280939998, 0.0, 0.0, 0.0],
     [-0.308198071906, 0.0, -0.3836038561880001, 0.0, 0.0],
     [-0.3836038561880001, 0.0, 0.0, 0.0, 0.0]],
    [[0.0, -0.308198071906, 0.0, 0.0, 0.0],
     [0.0, 0.0, -0.6163961438119995, 0.0, 0.0],
     [-0.9999999999999991, 0.0, 0.0, 0.0, 0.0]],
]
SMALL_GRAD_BLANK_LAST = [
    0.17703132, -0.39992708, 0.17703132, 0.17703132, -0.13116692, 0.12247062, 0.12247062, -0.181684,
    0.12247062, -0.1857276, 0.06269141, 0.06269141, 0.06928471, 0.12624498, -0.32091248, 0.05456069,
    -0.2182428, 0.05456069, 0.05456069, 0.05456069, 0.12073967, 0.12073967, -0.48295838, 0.12073967,
    0.12073967, 0.30741188, 0.16871123, 0.18645471, 0.16871123, -0.83128875,
]
BIG_LOGITS = [
    0.065357, 0.787530, 0.081592, 0.529716, 0.750675, 0.754135, 0.609764, 0.868140, 0.622532, 0.668522,
    0.858039, 0.164539, 0.989780, 0.944298, 0.603168, 0.946783, 0.666203, 0.286882, 0.094184, 0.366674,
    0.736168, 0.166680, 0.714154, 0.399400, 0.535982, 0.291821, 0.612642, 0.324241, 0.800764, 0.524106,
    0.779195, 0.183314, 0.113745, 0.240222, 0.339470, 0.134160, 0.505562, 0.051597, 0.640290, 0.430733,
    0.829473, 0.177467, 0.320700, 0.042883, 0.302803, 0.675178, 0.569537, 0.558474, 0.083132, 0.060165,
    0.107958, 0.748615, 0.943918, 0.486356, 0.418199, 0.652408, 0.024243, 0.134582, 0.366342, 0.295830,
    0.923670, 0.689929, 0.741898, 0.250005, 0.603430, 0.987289, 0.592606, 0.884672, 0.543450, 0.660770,
    0.377128, 0.358021,
]
BIG_GRAD = [
    -0.186844, -0.062555, 0.249399, -0.203377, 0.202399, 0.000977, -0.141016, 0.079123, 0.061893,
    -0.011552, -0.081280, 0.092832, -0.154257, 0.229433, -0.075176, -0.246593, 0.146405, 0.100188,
    -0.012918, -0.061593, 0.074512, -0.055986, 0.219831, -0.163845, -0.497627, 0.209240, 0.288387,
    0.013605, -0.030220, 0.016615, 0.113925, 0.062781, -0.176706, -0.667078, 0.367659, 0.299419,
    -0.356344, -0.055347, 0.411691, -0.096922, 0.029459, 0.067463, -0.063518, 0.027654, 0.035863,
    -0.154499, -0.073942, 0.228441, -0.166790, -0.000088, 0.166878, -0.172370, 0.105565, 0.066804,
    0.023875, -0.118256, 0.094381, -0.104707, -0.108934, 0.213642, -0.369844, 0.180118, 0.189726,
    0.025714, -0.079462, 0.053748, 0.122328, -0.238789, 0.116460, -0.598687, 0.302203, 0.296484,
]


def run(logits, targets, lengths, label_lengths, **kwargs):
    logits = logits.clone().requires_grad_(True)
    costs = transducer_loss(logits, targets, lengths, label_lengths, reduction="none", **kwargs)
    costs.sum().backward()
    return costs.detach(), logits.grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_small_blank_0(dtype):
    costs, grad = run(torch.tensor([SMALL_LOGITS], dtype=dtype), torch.tensor([[1, 2]]), torch.tensor([2]),
                      torch.tensor([2]), blank=0)
    assert costs.tolist() == pytest.approx([4.495666], rel=1e-6)
    torch.testing.assert_close(grad, torch.tensor([SMALL_GRAD_BLANK_0], dtype=dtype), atol=1e-6, rtol=0)


def test_small_blank_last():
    costs, grad = run(torch.tensor([SMALL_LOGITS]), torch.tensor([[1, 2]], dtype=torch.int32),
                      torch.tensor([2], dtype=torch.int32), torch.tensor([2], dtype=torch.int32), blank=-1)
    assert costs.tolist() == pytest.approx([5.09566688538], rel=1e-6)
    torch.testing.assert_close(grad, torch.tensor(SMALL_GRAD_BLANK_LAST).reshape(1, 2, 3, 5), atol=1e-6, rtol=0)


def test_small_from_log_softmax_gradient_is_minus_arc_posteriors():
    log_probs = torch.log_softmax(torch.tensor([SMALL_LOGITS], dtype=torch.float64), dim=-1)
    costs, grad = run(log_probs, torch.tensor([[1, 2]]), torch.tensor([2]), torch.tensor([2]), from_log_softmax=True)
    assert costs.tolist() == pytest.approx([4.495666], rel=1e-6)
    torch.testing.assert_close(grad, torch.tensor([SMALL_GRAD_LOG_PROBS], dtype=torch.float64), atol=1e-9, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_big_batch_of_two(dtype):
    logits = torch.tensor(BIG_LOGITS, dtype=dtype).reshape(2, 4, 3, 3)
    costs, grad = run(logits, torch.tensor([[1, 2], [1, 1]]), torch.tensor([4, 4]), torch.tensor([2, 2]), blank=0)
    torch.testing.assert_close(costs, torch.tensor([4.2806528590890736, 3.9384369822503591], dtype=dtype))
    torch.testing.assert_close(grad, torch.tensor(BIG_GRAD, dtype=dtype).reshape(2, 4, 3, 3), atol=1e-6, rtol=0)
