"""An exponential moving average of the model's weights, used for validation and saved with checkpoints."""

from __future__ import annotations

import contextlib

import torch


class EMA:
    def __init__(self, model: torch.nn.Module, decay: float):
        self.decay = decay
        self.shadow = {k: v.detach().clone() for k, v in model.state_dict().items()}

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        for key, value in model.state_dict().items():
            if value.dtype.is_floating_point:
                self.shadow[key].lerp_(value, 1 - self.decay)
            else:
                self.shadow[key].copy_(value)

    def state_dict(self) -> dict:
        return self.shadow

    def load_state_dict(self, state: dict) -> None:
        for key, value in state.items():
            self.shadow[key].copy_(value)

    @contextlib.contextmanager
    def applied(self, model: torch.nn.Module):
        """Temporarily puts the averaged weights into model."""
        saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(self.shadow)
        try:
            yield model
        finally:
            model.load_state_dict(saved)
