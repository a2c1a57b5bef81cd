"""The Conformer encoder (kind conformer; Gulati et al. 2020, "Conformer: Convolution-augmented Transformer
for Speech Recognition"): [BatchNorm] -> a 2-D conv front end striding 2 per layer (rnnt.model.conv_frontend)
-> a linear map to `dim` -> `layers` Conformer blocks, each

    x = x + 1/2 FeedForward(x)               LayerNorm, Linear dim -> ff_mult * dim, SiLU, Linear back
    x = x + SelfAttention(LayerNorm(x))      multi-head, relative positions by rotation (below)
    x = x + Convolution(x)                   LayerNorm, pointwise conv to 2 dim, GLU, depthwise conv of
                                             kernel_size frames, BatchNorm, SiLU, pointwise conv
    x = x + 1/2 FeedForward(x)
    x = LayerNorm(x)

with dropout at the end of every residual branch and on the attention weights (attention_dropout: on the
CPU a step of egs/an4's Conformer takes 7% less time without the latter, as scaled_dot_product_attention then
takes a faster path). The paper's relative positions are Transformer-XL's
(sinusoidal position embeddings with learnt biases); here queries and keys are rotated by their positions
instead (RoFormer, Su et al. 2021), which makes every attention score depend on the distance between the
frames alone, with no parameters. Attention never reads a padded frame, the depthwise convolution sees
padding as zeros and BatchNorm's training statistics skip it: a sequence's output does not depend on its
padding, nor in eval on the other sequences of its batch (in training BatchNorm uses the batch's statistics).
Full context both ways: an offline encoder, it cannot stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rnnt.model.conv_frontend import Conv2dSubsampling, conv_output_frames, conv_problems
from rnnt.model.dropout import Dropout
from rnnt.model.encoder_interface import EncoderInterface, valid_frames
from rnnt.model.masked_batch_norm import MaskedBatchNorm
from rnnt.model.value_checks import dropout_problems, size_problems


@dataclass(frozen=True)
class ConformerConfig:
    """The Conformer encoder's shape (see rnnt/model/conformer.py's docstring): the conv front end, then
    `layers` blocks of width `dim`."""

    kind: str = "conformer"  # the encoder: conformer (this section) or lstm (rnnt.model.encoders)
    input_dim: int = 80  # features per input frame: data.stack * data.features.num_mel_bins (checked on load)
    input_batch_norm: bool = False  # BatchNorm of the input features (training: of the valid frames)
    conv_channels: int = 64  # channels of the 2-D conv front end's 3x3 convolutions
    conv_layers: int = 2  # its convolutions, each striding 2 in time and frequency (time reduced 2^conv_layers)
    dim: int = 144  # width of every block (Conformer S: 144, M: 256, L: 512)
    layers: int = 16  # Conformer blocks (S and M: 16, L: 17)
    heads: int = 4  # attention heads (dim must divide by heads, dim / heads by 2)
    ff_mult: int = 4  # the feed-forward modules' inner width, in multiples of dim
    kernel_size: int = 31  # frames the depthwise convolution sees (odd)
    dropout: float = 0.1  # at the end of every residual branch and after the front end
    attention_dropout: float | None = None  # on the attention weights; null: dropout's (0: faster, see RESULTS)

    @property
    def time_reduction(self) -> int:
        """Input frames per output frame: the conv front end's strides."""
        return 2 ** self.conv_layers

    def output_frames(self, input_frames: int) -> int:
        """The encoder's output frames for an utterance of input_frames feature frames (after data.stack)."""
        return conv_output_frames(input_frames, self.conv_layers)

    @property
    def time_reduction_text(self) -> str:
        return f"{self.time_reduction} (model.encoder.conv_layers {self.conv_layers})"

    def problems(self) -> list[str]:
        found = conv_problems(self.input_dim, self.conv_layers)
        if self.heads < 1:
            found.append(f"model.encoder.heads must be at least 1, got {self.heads}")
        elif self.dim % self.heads or (self.dim // self.heads) % 2:
            found.append(f"model.encoder.dim {self.dim} must be a multiple of 2 x model.encoder.heads {self.heads}: "
                         "each head's queries and keys are rotated in pairs of channels")
        if self.kernel_size < 1 or self.kernel_size % 2 == 0:
            found.append(f"model.encoder.kernel_size must be odd (centred on its frame), got {self.kernel_size}")
        sizes = size_problems("encoder", dim=self.dim, conv_channels=self.conv_channels, ff_mult=self.ff_mult)
        layers = size_problems("encoder", minimum=0, layers=self.layers)
        rates = dropout_problems("encoder", dropout=self.dropout, attention_dropout=self.attention_dropout)
        return found + sizes + layers + rates

    @property
    def attention_dropout_rate(self) -> float:
        return self.dropout if self.attention_dropout is None else self.attention_dropout

    def build(self) -> ConformerEncoder:
        return ConformerEncoder(self)


def rotation(frames: int, head_dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (frames, head_dim / 2) of the angle t / 10000^(2i / head_dim) of channel pair i at frame t:
    computed once a forward and shared by every block."""
    half = head_dim // 2
    frequencies = 10000.0 ** (-torch.arange(half, device=device, dtype=torch.float32) / half)
    angles = torch.arange(frames, device=device, dtype=torch.float32)[:, None] * frequencies[None, :]
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos_sin: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Queries or keys (B, heads, T, head_dim) rotated by their positions: channel pair i of frame t
    (channels i and i + head_dim / 2) turned by the angle of rotation(T, head_dim)."""
    cos, sin = (part.to(x.dtype) for part in cos_sin)
    half = x.shape[3] // 2
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


class SelfAttention(torch.nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, valid: torch.Tensor, cos_sin: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """x (B, T, dim) -> (B, T, dim), each frame attending to the valid frames of its sequence; cos_sin:
        rotation(T, dim / heads)."""
        B, T, dim = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        keys = valid.clone()
        keys[:, 0] = True  # a sequence of no frames still attends somewhere (its output is padding anyway)
        attended = torch.nn.functional.scaled_dot_product_attention(
            rotate(q, cos_sin), rotate(k, cos_sin), v, attn_mask=keys[:, None, None, :],
            dropout_p=self.dropout if self.training else 0.0)
        return self.out(attended.transpose(1, 2).reshape(B, T, dim))


class FeedForward(torch.nn.Sequential):
    def __init__(self, dim: int, ff_mult: int, dropout: float):
        super().__init__(torch.nn.LayerNorm(dim), torch.nn.Linear(dim, ff_mult * dim), torch.nn.SiLU(),
                         Dropout(dropout), torch.nn.Linear(ff_mult * dim, dim), Dropout(dropout))


class ConvolutionModule(torch.nn.Module):
    def __init__(self, dim: int, kernel_size: int, dropout: float):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.pointwise_in = torch.nn.Linear(dim, 2 * dim)
        self.depthwise = torch.nn.Conv1d(dim, dim, kernel_size, padding=kernel_size // 2, groups=dim)
        self.batch_norm = MaskedBatchNorm(dim)
        self.pointwise_out = torch.nn.Linear(dim, dim)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.glu(self.pointwise_in(self.norm(x)), dim=-1).masked_fill(~valid[..., None], 0.0)
        y = self.depthwise(y.transpose(1, 2)).transpose(1, 2)
        return self.dropout(self.pointwise_out(torch.nn.functional.silu(self.batch_norm(y, valid))))


class ConformerBlock(torch.nn.Module):
    def __init__(self, config: ConformerConfig):
        super().__init__()
        dim = config.dim
        self.ff_in = FeedForward(dim, config.ff_mult, config.dropout)
        self.attention_norm = torch.nn.LayerNorm(dim)
        self.attention = SelfAttention(dim, config.heads, config.attention_dropout_rate)
        self.conv = ConvolutionModule(dim, config.kernel_size, config.dropout)
        self.ff_out = FeedForward(dim, config.ff_mult, config.dropout)
        self.norm = torch.nn.LayerNorm(dim)
        self.dropout = Dropout(config.dropout)

    def forward(self, x: torch.Tensor, valid: torch.Tensor, cos_sin: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x = x + 0.5 * self.ff_in(x)
        x = x + self.dropout(self.attention(self.attention_norm(x), valid, cos_sin))
        x = x + self.conv(x, valid)
        return self.norm(x + 0.5 * self.ff_out(x))


class ConformerEncoder(EncoderInterface):
    def __init__(self, config: ConformerConfig):
        super().__init__()
        if config.problems():
            raise ValueError("; ".join(config.problems()))
        self.config, self.output_dim = config, config.dim
        self.input_norm = MaskedBatchNorm(config.input_dim) if config.input_batch_norm else None
        self.frontend = Conv2dSubsampling(config.input_dim, config.conv_channels, config.conv_layers)
        self.project = torch.nn.Linear(self.frontend.output_dim, config.dim)
        self.dropout = Dropout(config.dropout)
        self.blocks = torch.nn.ModuleList(ConformerBlock(config) for _ in range(config.layers))

    @property
    def stream_refusal(self) -> str:
        return "a Conformer encoder attends to every frame of the utterance, those ahead too: it cannot stream"

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = lengths.to(feats.device)
        valid = valid_frames(lengths, feats.shape[1])
        feats = self.input_norm(feats, valid) if self.input_norm is not None else feats
        x, lengths = self.frontend(feats.masked_fill(~valid[..., None], 0.0), lengths)
        valid = valid_frames(lengths, x.shape[1])
        x = self.dropout(self.project(x))
        cos_sin = rotation(x.shape[1], self.config.dim // self.config.heads, x.device)
        for block in self.blocks:
            x = block(x, valid, cos_sin)
        return x, lengths
