"""The LSTM encoder (kind lstm): [BatchNorm] -> [conv front end] -> LSTM x N -> StackTime -> LSTM x M -> output, as the
MLPerf RNN-T encoder (no conv front end) or DeepSpeech 2-like (a strided 2-D conv front end, bidirectional).

With norm="layer" every LSTM layer's output is layer-normalised (the LSTM cells themselves stay the
fused library kernels); dropout applies between layers. With bidirectional, each layer also reads
every sequence backwards (an offline model: it cannot stream), and its output is both directions side
by side.

The LSTMs run over the padded batch as it is: a unidirectional LSTM's output at a frame t < length
never depends on the padding after it, so packing would change nothing that is used, and on CPU a
packed batch of unequal lengths leaves the fused kernel for a path about 8x slower.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rnnt.model.conv_frontend import Conv2dSubsampling, conv_output_frames, conv_problems
from rnnt.model.dropout import Dropout
from rnnt.model.encoder_interface import EncoderInterface, valid_frames
from rnnt.model.masked_batch_norm import MaskedBatchNorm
from rnnt.model.stack_time import StackTime
from rnnt.model.value_checks import dropout_problems, size_problems


@dataclass(frozen=True)
class LSTMEncoderConfig:
    """The LSTM encoder's shape: input_dim features a frame in; `pre_layers` LSTM layers of `hidden` units,
    then StackTime by `stack_time`, then `post_layers` more (see rnnt/model/lstm_encoder.py's docstring)."""

    kind: str = "lstm"  # the encoder: lstm (this section) or conformer (rnnt.model.encoders)
    input_dim: int = 80  # features per input frame: data.stack * data.features.num_mel_bins (checked on load)
    hidden: int = 1024  # units of each LSTM layer (per direction when bidirectional)
    pre_layers: int = 2  # LSTM layers before StackTime
    post_layers: int = 3  # LSTM layers after StackTime
    stack_time: int = 2  # StackTime: frames joined into one between the two stacks (1: none)
    input_batch_norm: bool = False  # BatchNorm of the input features (training: of the valid frames)
    norm: str = "none"  # normalisation of every LSTM layer's output: none or layer
    dropout: float = 0.1  # after every LSTM layer
    bidirectional: bool = False  # each layer also reads backwards: an offline model, it cannot stream
    conv_channels: int = 0  # > 0: a 2-D conv front end (rnnt.model.conv_frontend) with these channels
    conv_layers: int = 2  # 3x3 convolutions of stride 2 in the conv front end (with conv_channels > 0)

    @property
    def time_reduction(self) -> int:
        """Input frames per output frame: the conv front end's strides (2 a layer) times StackTime."""
        return (2 ** self.conv_layers if self.conv_channels else 1) * self.stack_time

    def output_frames(self, input_frames: int) -> int:
        """The encoder's output frames for an utterance of input_frames feature frames (after data.stack)."""
        return -(-conv_output_frames(input_frames, self.conv_layers if self.conv_channels else 0) // self.stack_time)

    @property
    def time_reduction_text(self) -> str:
        conv = f"{2 ** self.conv_layers} (model.encoder.conv_layers {self.conv_layers}) x "
        conv = conv if self.conv_channels else ""
        return f"{conv}model.encoder.stack_time {self.stack_time}"

    def problems(self) -> list[str]:
        found = conv_problems(self.input_dim, self.conv_layers) if self.conv_channels else []
        if self.stack_time < 1:
            found.append(f"model.encoder.stack_time must be at least 1, got {self.stack_time}")
        if self.norm not in ("none", "layer"):
            found.append(f"model.encoder.norm must be none or layer, got '{self.norm}'")
        return found + size_problems("encoder", hidden=self.hidden) + \
            size_problems("encoder", minimum=0, pre_layers=self.pre_layers, post_layers=self.post_layers,
                          conv_channels=self.conv_channels) + \
            dropout_problems("encoder", dropout=self.dropout)

    def build(self) -> LSTMEncoder:
        return LSTMEncoder(self)


def reverse_within_lengths(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Each sequence of x (B, T, D) in reverse order over its own length; padding stays at the end."""
    t = torch.arange(x.shape[1], device=x.device)[None, :]
    lengths = lengths.to(x.device)[:, None]
    index = torch.where(t < lengths, lengths - 1 - t, t)
    return x.gather(1, index[..., None].expand_as(x))


class BidirectionalLSTM(torch.nn.Module):
    """One LSTM forwards and one over each sequence reversed within its length, so that padding never
    reaches a real frame and both run the fused kernel on the padded batch."""

    def __init__(self, input_dim: int, hidden: int):
        super().__init__()
        self.forwards = torch.nn.LSTM(input_dim, hidden, batch_first=True)
        self.backwards = torch.nn.LSTM(input_dim, hidden, batch_first=True)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        ahead, _ = self.forwards(x)
        behind, _ = self.backwards(reverse_within_lengths(x, lengths))
        return torch.cat([ahead, reverse_within_lengths(behind, lengths)], dim=-1)


class LSTMStack(torch.nn.Module):
    """Single-layer LSTMs in a row (bidirectional or not), each optionally followed by LayerNorm, with
    dropout between."""

    def __init__(self, input_dim: int, hidden: int, layers: int, norm: str, dropout: float,
                 bidirectional: bool = False):
        super().__init__()
        self.bidirectional = bidirectional
        width = 2 * hidden if bidirectional else hidden
        self.output_dim = width if layers else input_dim  # no layers: the input passes through
        self.lstms = torch.nn.ModuleList(
            BidirectionalLSTM(input_dim if i == 0 else width, hidden) if bidirectional
            else torch.nn.LSTM(input_dim if i == 0 else width, hidden, batch_first=True) for i in range(layers))
        self.norms = torch.nn.ModuleList(
            torch.nn.LayerNorm(width) if norm == "layer" else torch.nn.Identity() for _ in range(layers))
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """x (B, T, input_dim) padded -> (B, T, output_dim); frames past a sequence's length are garbage."""
        for lstm, norm in zip(self.lstms, self.norms):
            x = lstm(x, lengths) if self.bidirectional else lstm(x)[0]
            x = self.dropout(norm(x))
        return x

    def stream(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        """The next frames x (B, T, input_dim) of unpadded sequences, from the states (h, c) the previous
        frames left, each (layers, B, hidden) -> (B, T, output_dim) and the new (h, c). With no layers x
        and the (empty) states pass through."""
        if not self.lstms:
            return x, h, c
        new_h, new_c = [], []
        for i, (lstm, norm) in enumerate(zip(self.lstms, self.norms)):
            x, (h_i, c_i) = lstm(x, (h[i:i + 1], c[i:i + 1]))
            x = self.dropout(norm(x))
            new_h.append(h_i)
            new_c.append(c_i)
        return x, torch.cat(new_h), torch.cat(new_c)


class LSTMEncoder(EncoderInterface):
    def __init__(self, config: LSTMEncoderConfig):
        super().__init__()
        if config.problems():
            raise ValueError("; ".join(config.problems()))
        self.config = config
        self.input_norm = MaskedBatchNorm(config.input_dim) if config.input_batch_norm else None
        self.frontend = (Conv2dSubsampling(config.input_dim, config.conv_channels, config.conv_layers)
                         if config.conv_channels else None)
        lstm_input = self.frontend.output_dim if self.frontend else config.input_dim
        self.pre = LSTMStack(lstm_input, config.hidden, config.pre_layers, config.norm, config.dropout,
                             config.bidirectional)
        self.stack = StackTime(config.stack_time)
        post_input = self.pre.output_dim * config.stack_time
        self.post = LSTMStack(post_input, config.hidden, config.post_layers, config.norm, config.dropout,
                              config.bidirectional)

    @property
    def output_dim(self) -> int:
        return self.post.output_dim

    @property
    def stream_refusal(self) -> str:
        return "a bidirectional encoder reads every utterance backwards too: it cannot stream" \
            if self.config.bidirectional else ""

    @property
    def stream_overlap(self) -> int:
        """Input frames of a chunk that the next chunk reads again: the conv front end's overlap, or 0."""
        return self.frontend.overlap if self.frontend is not None else 0

    @property
    def layers(self) -> int:
        return self.config.pre_layers + self.config.post_layers

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """feats (B, T, input_dim) -> (B, T', output_dim), with T' about T / time_reduction; output frames
        past a sequence's new length are not zeroed (every consumer masks by length)."""
        lengths = lengths.to(feats.device)
        valid = valid_frames(lengths, feats.shape[1])
        feats = self.input_norm(feats, valid) if self.input_norm is not None else feats
        if self.frontend is not None:  # padding is zero here, as when a sequence is alone
            feats, lengths = self.frontend(feats.masked_fill(~valid[..., None], 0.0), lengths)
            valid = valid_frames(lengths, feats.shape[1])
        # StackTime joins a sequence's last frames with the ones after its length: zeros, as when alone.
        x, stacked_lengths = self.stack(self.pre(feats, lengths).masked_fill(~valid[..., None], 0.0), lengths)
        return self.post(x, stacked_lengths), stacked_lengths

    def initial_state(self, batch: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """The streaming state before any audio: (h, c), each (pre_layers + post_layers, batch, hidden)."""
        zeros = torch.zeros(self.layers, batch, self.config.hidden, device=device)
        return zeros, zeros.clone()

    def stream(self, feats: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        """The next input frames of unpadded sequences (B, T, input_dim) and the state the frames before
        left -> (B, T', output_dim) and the new state. Chunks of whole multiples of time_reduction new
        frames, then any last one, give what forward() gives for the whole sequence. With a conv front end
        a chunk also holds, before its new frames, the last stream_overlap frames of the one before (the
        first chunk starts at frame 0 and holds stream_overlap more), and a chunk too short for one output
        frame gives none and leaves the state as it was. The encoder must be in eval mode."""
        if self.stream_refusal:
            raise ValueError(self.stream_refusal)
        feats = self.input_norm(feats) if self.input_norm is not None else feats
        if self.frontend is not None:
            if feats.shape[1] < self.frontend.stride + self.frontend.overlap:
                return feats.new_zeros(feats.shape[0], 0, self.output_dim), h, c
            lengths = torch.full((feats.shape[0],), feats.shape[1], dtype=torch.long, device=feats.device)
            feats, _ = self.frontend(feats, lengths)
        pre = self.config.pre_layers
        x, h_pre, c_pre = self.pre.stream(feats, h[:pre], c[:pre])
        x, _ = self.stack(x, torch.zeros(1, dtype=torch.long))  # lengths: all frames are real here
        x, h_post, c_post = self.post.stream(x, h[pre:], c[pre:])
        return x, torch.cat([h_pre, h_post]), torch.cat([c_pre, c_post])
