"""Whether the host may read a tensor's values for free.

On the CPU it may. On an accelerator a read (a Python bool, int or float of a tensor, .tolist(), a
boolean index, .nonzero()) waits for every kernel queued before it: a host-device synchronisation that
empties the queue. Steps that run many times (a loss in every training step, a search's every frame)
never read there; they keep values on the device and read once at the end.
"""

from __future__ import annotations

import torch


def free(device: torch.device | str) -> bool:
    return torch.device(device).type == "cpu"
