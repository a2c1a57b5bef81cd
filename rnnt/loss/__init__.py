"""Transducer losses in PyTorch on CPU and CUDA, their lattice passes in Triton kernels on CUDA
(rnnt.loss.lattice_triton: backend "auto", "torch" or "triton").

- transducer_loss / TransducerLoss: full loss on padded (B, T, U+1, V) or packed (sum T_b*(U_b+1), V)
  logits, gradient formed directly (no log-softmax tensor kept); modified one-symbol-per-frame variant.
- fused_joiner_loss: the joiner's output layer and the loss in one function, logits never materialised.
- simple_loss, prune_ranges, prune, pruned_loss: pruned training on a band of s_range symbols per frame.
Each takes its lattice as one value, rnnt.loss.options.LatticeOptions (one symbol per frame or not; fastemit_lambda,
delay_penalty and self_alignment, which move emissions earlier, rnnt.loss.emission_timing; the backend), given as
`options=` or as keywords.
"""

from rnnt.loss.fused_joiner import fused_joiner_loss
from rnnt.loss.lattice import lattice_posteriors
from rnnt.loss.logits_loss import TransducerLoss, transducer_loss
from rnnt.loss.options import LatticeOptions
from rnnt.loss.packing import pack_joiner_input
from rnnt.loss.pruned import prune, prune_ranges, pruned_loss, simple_loss

__all__ = [
    "LatticeOptions",
    "TransducerLoss",
    "fused_joiner_loss",
    "lattice_posteriors",
    "pack_joiner_input",
    "prune",
    "prune_ranges",
    "pruned_loss",
    "simple_loss",
    "transducer_loss",
]
