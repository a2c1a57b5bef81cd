"""A 2-D convolutional front end that strides in time: the features as an image (time x frequency), `layers`
3x3 convolutions with ReLU, each with stride 2 in time and frequency and no padding, then the channels of every
frame flattened. T frames become about T / 2^layers. It is WeNet's and ESPnet's Conv2dSubsampling (4 with two
layers), not DeepSpeech 2's own front end (41x11 and 21x11 filters, batch norm, clipped ReLU): the recipes'
"DeepSpeech 2" configs are DeepSpeech 2-like, this front end under its bidirectional LSTMs."""

from __future__ import annotations

import torch


def conv_out_length(lengths):
    """Frames out of one 3x3 convolution striding 2 (no padding), for an int or a tensor of lengths:
    (lengths - 3) // 2 + 1, with a numerator that is never negative for a length of 1 or more (an ONNX graph's
    integer division rounds toward zero, PyTorch's down: a length of 2 gave 1 frame there, 0 here)."""
    return (lengths - 1) // 2


def conv_output_frames(frames: int, layers: int) -> int:
    """Frames out of `layers` convolutions for an utterance of `frames` input frames (0 when too short)."""
    for _ in range(layers):
        frames = max(conv_out_length(frames), 0)
    return frames


def conv_problems(input_dim: int, layers: int) -> list[str]:
    """What keeps a conv front end of `layers` convolutions from reading input_dim features (empty: nothing)."""
    if layers < 1 or conv_output_frames(input_dim, layers) < 1:
        return [f"model.encoder.conv_layers {layers} strided convolutions need a wider input than "
                f"model.encoder.input_dim {input_dim} (and at least one layer)"]
    return []


class Conv2dSubsampling(torch.nn.Module):
    def __init__(self, input_dim: int, channels: int, layers: int = 2):
        super().__init__()
        if layers < 1:
            raise ValueError(f"encoder.conv_layers must be >= 1 with a conv front end, got {layers}")
        self.layers = layers
        self.convs = torch.nn.ModuleList(
            torch.nn.Conv2d(1 if i == 0 else channels, channels, kernel_size=3, stride=2) for i in range(layers))
        freq = input_dim
        for _ in range(layers):
            freq = conv_out_length(freq)
        if freq < 1:
            raise ValueError(f"encoder.input_dim {input_dim} is too narrow for {layers} strided convolutions")
        self.output_dim = channels * freq

    @property
    def stride(self) -> int:
        """Input frames per output frame."""
        return 2 ** self.layers

    @property
    def overlap(self) -> int:
        """Input frames an output frame reads beyond its own stride: its receptive field, 2 * stride - 1
        frames, less the stride. A stream carries this many frames from one chunk into the next."""
        return self.stride - 1

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """feats (B, T, input_dim) -> (B, T', output_dim) and lengths T'; frames past T' are garbage. A batch
        shorter than one output frame's receptive field is padded to it: its lengths say 0 frames, as the same
        utterances say in a batch with a longer one (the convolutions would refuse so few frames)."""
        short = self.stride + self.overlap - feats.shape[1]
        if short > 0:
            feats = torch.nn.functional.pad(feats, (0, 0, 0, short))
        x = feats[:, None]  # (B, 1, T, F)
        for conv in self.convs:
            x = torch.relu(conv(x))
            lengths = conv_out_length(lengths)
        B, C, T, F = x.shape
        return x.permute(0, 2, 1, 3).reshape(B, T, C * F), lengths.clamp_min(0)
