"""What the rest of the package needs of an encoder, whatever its kind (rnnt.model.encoders lists the kinds).

A kind is two classes in one file:
  its config, a frozen dataclass whose first field is `kind: str = "<name>"` and which has
      input_dim            features a frame in (data.stack x data.features.num_mel_bins);
      time_reduction       input frames per output frame;
      output_frames(n)     output frames for n input frames, as forward() computes them;
      time_reduction_text  how the reduction comes about, in config keys (for messages);
      problems()           what is wrong with the values, each as a sentence naming the key (empty: none);
      build()              the encoder module;
  its module, an EncoderInterface.
"""

from __future__ import annotations

import torch


class EncoderInterface(torch.nn.Module):
    """feats (B, T, input_dim) padded and their lengths -> (B, T', output_dim) and the new lengths; frames
    past a sequence's new length are garbage (every consumer masks by length), and a sequence's frames do
    not depend on the batch it is in. An encoder that can run chunk by chunk (no stream_refusal) also has
    initial_state(batch, device), stream(feats, *state) -> (out, *state), stream_overlap and stream_chunk
    (rnnt.streaming)."""

    output_dim: int
    stream_overlap: int = 0  # input frames a chunk reads again from the chunk before it
    stream_chunk: int = 1  # output frames a stream encodes as one: its chunks are whole multiples (but the last)

    @property
    def stream_refusal(self) -> str:
        """Why the encoder cannot run chunk by chunk; empty when it can."""
        return f"the {type(self).__name__} has no streaming mode"

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError


def valid_frames(lengths: torch.Tensor, frames: int) -> torch.Tensor:
    """(B, frames) bool: True where a frame is within its sequence's length."""
    return torch.arange(frames, device=lengths.device)[None, :] < lengths[:, None]
