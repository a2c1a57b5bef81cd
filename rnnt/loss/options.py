"""What every exact transducer loss takes about its lattice, as one frozen value passed down: which lattice
(one symbol per frame or not), the emission regularisers (rnnt.loss.emission_timing) and where the lattice
passes run. A model's `loss:` config is one (rnnt.model.transducer.LossConfig extends it), so the model
hands its config to the losses whole; a direct caller gives the fields it sets as keywords
(`transducer_loss(..., one_sym_per_frame=True)`), or a LatticeOptions as `options=` with keywords that
change it. A new regulariser is a field here and a function in emission_timing.py."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rnnt.loss.emission_timing import check_emission_timing
from rnnt.loss.lattice_triton import check_backend


@dataclass(frozen=True)
class LatticeOptions:
    one_sym_per_frame: bool = False  # modified transducer: a label also ends its frame (one symbol a frame)
    fastemit_lambda: float = 0.0  # FastEmit: label arcs weigh 1 + lambda in the gradient (earlier emissions)
    delay_penalty: float = 0.0  # labels at frame t score delay_penalty * ((T - 1) / 2 - t) more (earlier emissions)
    self_alignment: float = 0.0  # weight of -log P of the best alignment's labels a frame earlier (earlier emissions)
    backend: str = "auto"  # lattice and logits passes: torch, triton (kernels), auto (triton on CUDA 8.0+ if installed)

    def check(self) -> None:
        if not isinstance(self.one_sym_per_frame, bool):  # "no" chose the one-symbol lattice, being true
            raise TypeError(f"one_sym_per_frame must be True or False, got {self.one_sym_per_frame!r}")
        for name in ("fastemit_lambda", "delay_penalty", "self_alignment"):  # True: a weight of 1
            if isinstance(getattr(self, name), (bool, str)):
                raise TypeError(f"{name} must be a number, got {getattr(self, name)!r}")
        check_emission_timing(self.fastemit_lambda, self.delay_penalty, self.self_alignment)
        check_backend(self.backend)


def lattice_options(options: LatticeOptions | None, **fields) -> LatticeOptions:
    """options (None: the defaults) with the given fields changed, checked; an unknown field is a TypeError."""
    options = dataclasses.replace(options or LatticeOptions(), **fields) if fields else options or LatticeOptions()
    options.check()
    return options
