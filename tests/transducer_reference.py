"""A slow, obviously correct transducer loss: plain Python loops over every lattice cell, float64.

Gradients come from autograd through these loops. Used only as the oracle in tests.
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
