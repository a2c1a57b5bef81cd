"""A slow, obviously correct transducer loss: plain Python loops over every lattice cell, float64.

Gradients come from autograd through these loops. Used only as the oracle in tests; also random joiner
inputs, and the joiner's logits built whole, which the fused and pruned losses are compared against.
"""

import math

import torch


def logaddexp(a, b):
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    return torch.logaddexp(a, b)


def reference_loss(logits, targets, logit_lengths, target_lengths, blank=0, one_sym_per_frame=False,
                   from_log_softmax=False):
    """Per-utterance losses (B,) for padded logits (B, T, U+1, V)."""
    log_probs = logits.double() if from_log_softmax else torch.log_softmax(logits.double(), dim=-1)
    losses = []
    for b in range(logits.shape[0]):
        T, U = int(logit_lengths[b]), int(target_lengths[b])
        y = [int(s) for s in targets[b, :U]]
        lp = log_probs[b]
        alpha = {(0, 0): torch.zeros((), dtype=torch.float64)}
        for t in range(T + 1):
            for u in range(U + 1):
                if (t, u) == (0, 0):
                    continue
                total = -math.inf
                if t > 0 and (t - 1, u) in alpha:  # a blank in frame t-1
                    total = logaddexp(total, alpha[t - 1, u] + lp[t - 1, u, blank])
                if u > 0:
                    src = (t - 1, u - 1) if one_sym_per_frame else (t, u - 1)
                    if src in alpha and src[0] < T:
                        total = logaddexp(total, alpha[src] + lp[src[0], u - 1, y[u - 1]])
                if not (isinstance(total, float) and total == -math.inf):
                    alpha[t, u] = total
        losses.append(-alpha[T, U] if (T, U) in alpha else torch.tensor(math.inf, dtype=torch.float64))
    return torch.stack(losses)


def joiner_inputs(B, T, U, H, V, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    enc = torch.randn(B, T, H, generator=g, dtype=dtype).requires_grad_(True)
    pred = torch.randn(B, U + 1, H, generator=g, dtype=dtype).requires_grad_(True)
    weight = (torch.randn(V, H, generator=g, dtype=dtype) / H**0.5).requires_grad_(True)
    bias = torch.randn(V, generator=g, dtype=dtype).requires_grad_(True)
    T_b = torch.randint(1, T + 1, (B,), generator=g)
    U_b = torch.randint(0, U + 1, (B,), generator=g)
    T_b[0], U_b[0] = T, U
    targets = torch.randint(1, V, (B, U), generator=g)
    return enc, pred, weight, bias, targets, T_b, U_b


def joiner_logits(enc, pred, weight, bias, activation="tanh"):
    hidden = enc[:, :, None] + pred[:, None]
    hidden = torch.tanh(hidden) if activation == "tanh" else torch.relu(hidden)
    return torch.nn.functional.linear(hidden, weight, bias)
