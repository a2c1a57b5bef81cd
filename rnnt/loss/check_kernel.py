"""A Triton kernel that checks a loss's targets and lengths on the device in one launch, where PyTorch takes
about thirty (a reduction, a comparison and an assert for each condition; rnnt.loss.checks): on a GPU each is
a launch that the host pays for in every training step. A program per utterance asserts (tl.device_assert)
each condition with its own message; the first that fails stops the kernel, and the error comes at the next
synchronisation, as torch._assert_async's does. Compiled with debug on, without which Triton drops its
asserts. Imported only where the kernel runs (rnnt.loss.checks.check_values).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit(debug=True)
def check_kernel(targets, stride_b, stride_u, logit_lengths, target_lengths, width, frames, positions, vocab, blank,
                 CHECK_FRAMES: tl.constexpr, CHECK_POSITIONS: tl.constexpr, ONE_SYM: tl.constexpr, BLOCK: tl.constexpr,
                 FRAMES_MESSAGE: tl.constexpr, POSITIONS_MESSAGE: tl.constexpr, VOCAB_MESSAGE: tl.constexpr,
                 BLANK_MESSAGE: tl.constexpr):
    """Utterance b's lengths: logit_length >= 1 and at most frames with CHECK_FRAMES, target_length in
    [0, width] (the targets' own) and below positions (the logits' U+1) with CHECK_POSITIONS, at most
    logit_length with ONE_SYM; its targets up to its target_length in [0, vocab) and not the blank."""
    b = tl.program_id(0)
    T_b = tl.load(logit_lengths + b)
    U_b = tl.load(target_lengths + b)
    tl.device_assert(T_b >= 1, "logit_lengths must be >= 1")
    tl.device_assert(U_b >= 0, "target_lengths must be >= 0")
    tl.device_assert(U_b <= width, "target_lengths exceed targets.shape[1]")
    if CHECK_FRAMES:
        tl.device_assert(T_b <= frames, FRAMES_MESSAGE)
    if CHECK_POSITIONS:
        tl.device_assert(U_b < positions, POSITIONS_MESSAGE)
    if ONE_SYM:
        tl.device_assert(U_b <= T_b, "one_sym_per_frame needs target_length <= logit_length")
    for u0 in range(0, width, BLOCK):
        u = u0 + tl.arange(0, BLOCK)
        inside = u < U_b
        symbol = tl.load(targets + b.to(tl.int64) * stride_b + u * stride_u, mask=inside, other=0)
        tl.device_assert((symbol >= 0) & (symbol < vocab), VOCAB_MESSAGE, mask=inside)
        tl.device_assert(symbol != blank, BLANK_MESSAGE, mask=inside)
