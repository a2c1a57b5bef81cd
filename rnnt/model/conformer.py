"""The Conformer encoder (kind conformer; Gulati et al. 2020, "Conformer: Convolution-augmented Transformer
for Speech Recognition"): [BatchNorm] -> a 2-D conv front end striding 2 per layer (rnnt.model.conv_frontend)
-> a linear map to `dim` -> `layers` Conformer blocks, each

    x = x + 1/2 FeedForward(x)               LayerNorm, Linear dim -> ff_mult * dim, SiLU, Linear back
    x = x + SelfAttention(LayerNorm(x))      multi-head, relative positions by rotation (rnnt.model.rotary_attention)
    x = x + Convolution(x)                   LayerNorm, pointwise conv to 2 dim, GLU, depthwise conv of
                                             kernel_size frames, BatchNorm, SiLU, pointwise conv
    x = x + 1/2 FeedForward(x)
    x = LayerNorm(x)

with dropout at the end of every residual branch and on the attention weights (attention_dropout: on the
CPU a step of egs/an4's Conformer takes 7% less time without the latter, as scaled_dot_product_attention then
takes a faster path). The paper's relative positions are Transformer-XL's (sinusoidal position embeddings with
learnt biases); here queries and keys are rotated by their positions instead (RoFormer), which makes every
attention score depend on the distance between the frames alone, with no parameters. Attention never reads a
padded frame, the depthwise convolution sees padding as zeros and BatchNorm's training statistics skip it: a
sequence's output does not depend on its padding, nor in eval on the other sequences of its batch (in
training BatchNorm uses the batch's statistics).

Offline (chunk_frames 0) every frame attends to the whole utterance, and the depthwise convolution is centred
on its frame. Streaming (chunk_frames C > 0, as WeNet's U2 and icefall's streaming Conformer), the output
frames are cut into chunks of C from the first: a frame attends to its own chunk and to the left_chunks chunks
before it, and the depthwise convolution reads kernel_size frames up to its own (causal). Nothing reads past
the chunk, so a stream gives, chunk by chunk, what the whole utterance gives (stream()): its state is the
attention keys and values of the last left_chunks x C frames and the convolution inputs of the last
kernel_size - 1 of every block, so that a chunk projects its own frames alone; it is also the state of
sherpa-onnx's streaming Conformer (rnnt.export.streaming_encoders). The latency is a chunk (C x 40 ms with two
front-end convolutions) plus the front end's overlap. dynamic_chunks trains it in chunks of random sizes, or
whole (attention_span), and it runs in chunk_frames all the same.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from rnnt.model.conv_frontend import Conv2dSubsampling, conv_output_frames, conv_problems
from rnnt.model.depthwise_conv import depthwise_over_time
from rnnt.model.dropout import Dropout
from rnnt.model.encoder_interface import EncoderInterface, valid_frames
from rnnt.model.masked_batch_norm import MaskedBatchNorm
from rnnt.model.rotary_attention import ChunkedKeys, SelfAttention, keys_allowed, rotation
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
    chunk_frames: int = 0  # streaming: attention in chunks of this many output frames, causal conv (0: offline)
    left_chunks: int = 4  # streaming: the chunks before its own that a frame attends to (at least 1)
    dynamic_chunks: int = 0  # training a streaming one: chunks of 1 to this many frames, or whole (0: chunk_frames)
    dynamic_whole: bool = True  # dynamic_chunks: the whole utterance one batch in two (WeNet's); false: chunks alone

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
        if self.chunk_frames < 0:
            found.append(f"model.encoder.chunk_frames must be 0 (offline) or more, got {self.chunk_frames}")
        elif self.chunk_frames and self.left_chunks < 1:
            found.append(f"model.encoder.left_chunks must be at least 1 with chunk_frames, got {self.left_chunks}")
        if self.dynamic_chunks < 0 or (self.dynamic_chunks and not self.chunk_frames):
            found.append(f"model.encoder.dynamic_chunks {self.dynamic_chunks}: it trains a streaming Conformer "
                         "(chunk_frames above 0) in chunks of 1 to that many frames; 0 turns it off")
        sizes = size_problems("encoder", dim=self.dim, conv_channels=self.conv_channels, ff_mult=self.ff_mult)
        layers = size_problems("encoder", minimum=0, layers=self.layers)
        rates = dropout_problems("encoder", dropout=self.dropout, attention_dropout=self.attention_dropout)
        return found + sizes + layers + rates

    @property
    def attention_dropout_rate(self) -> float:
        return self.dropout if self.attention_dropout is None else self.attention_dropout

    def build(self) -> ConformerEncoder:
        return ConformerEncoder(self)


class FeedForward(torch.nn.Sequential):
    def __init__(self, dim: int, ff_mult: int, dropout: float):
        super().__init__(torch.nn.LayerNorm(dim), torch.nn.Linear(dim, ff_mult * dim), torch.nn.SiLU(),
                         Dropout(dropout), torch.nn.Linear(ff_mult * dim, dim), Dropout(dropout))


class ConvolutionModule(torch.nn.Module):
    def __init__(self, dim: int, kernel_size: int, dropout: float, causal: bool):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.pointwise_in = torch.nn.Linear(dim, 2 * dim)
        self.history = kernel_size - 1 if causal else 0  # frames before the first that it pads (a stream: caches)
        self.depthwise = torch.nn.Conv1d(dim, dim, kernel_size, padding=0 if causal else kernel_size // 2,
                                         groups=dim)
        self.batch_norm = MaskedBatchNorm(dim)
        self.pointwise_out = torch.nn.Linear(dim, dim)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.glu(self.pointwise_in(self.norm(x)), dim=-1).masked_fill(~valid[..., None], 0.0)
        y = depthwise_over_time(self.depthwise, y, self.history)
        return self.dropout(self.pointwise_out(torch.nn.functional.silu(self.batch_norm(y, valid))))

    def stream(self, x: torch.Tensor, cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A chunk (B, C, dim) and the depthwise convolution's inputs of the kernel_size - 1 frames before it
        (B, kernel_size - 1, dim; zeros before the first frame) -> the chunk's output and the new cache."""
        window = torch.cat([cache, torch.nn.functional.glu(self.pointwise_in(self.norm(x)), dim=-1)], dim=1)
        y = depthwise_over_time(self.depthwise, window)
        out = self.pointwise_out(torch.nn.functional.silu(self.batch_norm(y)))
        return out, window[:, window.shape[1] - self.history:]


class ConformerBlock(torch.nn.Module):
    def __init__(self, config: ConformerConfig):
        super().__init__()
        dim = config.dim
        self.ff_in = FeedForward(dim, config.ff_mult, config.dropout)
        self.attention_norm = torch.nn.LayerNorm(dim)
        self.attention = SelfAttention(dim, config.heads, config.attention_dropout_rate)
        self.conv = ConvolutionModule(dim, config.kernel_size, config.dropout, causal=config.chunk_frames > 0)
        self.ff_out = FeedForward(dim, config.ff_mult, config.dropout)
        self.norm = torch.nn.LayerNorm(dim)
        self.dropout = Dropout(config.dropout)

    def forward(self, x: torch.Tensor, valid: torch.Tensor, allowed: torch.Tensor | ChunkedKeys,
                cos_sin: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x = x + 0.5 * self.ff_in(x)
        x = x + self.dropout(self.attention(self.attention_norm(x), allowed, cos_sin))
        x = x + self.conv(x, valid)
        return self.norm(x + 0.5 * self.ff_out(x))

    def stream(self, x: torch.Tensor, attention_cache: torch.Tensor, cached: torch.Tensor, conv_cache: torch.Tensor,
               cos_sin: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A chunk (B, C, dim) and the caches of the frames before it (SelfAttention.stream,
        ConvolutionModule.stream) -> the chunk's output and the two caches after it."""
        x = x + 0.5 * self.ff_in(x)
        attended, attention_cache = self.attention.stream(self.attention_norm(x), attention_cache, cached, cos_sin)
        conv, conv_cache = self.conv.stream(x + attended, conv_cache)
        x = x + attended + conv
        return self.norm(x + 0.5 * self.ff_out(x)), attention_cache, conv_cache


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
        self.causal = config.chunk_frames > 0  # its convolutions, whatever attend_in sets later

    @property
    def stream_refusal(self) -> str:
        if self.config.chunk_frames:
            return ""
        which = "a streaming Conformer run in whole utterances (--attention-chunk whole)" if self.causal else \
            "an offline Conformer (model.encoder.chunk_frames 0)"
        return f"{which} attends to every frame, those ahead too: it cannot stream"

    def attend_in(self, chunk_frames: int, left_chunks: int) -> None:
        """From now on attention in chunks of chunk_frames output frames (0: the whole utterance) with left_chunks
        chunks before each, in forward() and stream() alike, the convolutions causal as trained: a streaming
        Conformer run at other chunks than its config's (rnnt.attention_chunks). An offline one is refused: its
        convolutions read ahead."""
        if not self.causal:
            raise ValueError("this is an offline Conformer (model.encoder.chunk_frames 0), which has no attention "
                             "chunks: its convolutions read frames ahead, so chunks would not make it stream")
        if chunk_frames < 0 or left_chunks < 1:
            raise ValueError(f"attention chunks of {chunk_frames} frames (0: whole) with {left_chunks} chunks before "
                             "each (at least 1)")
        self.config = dataclasses.replace(self.config, chunk_frames=chunk_frames, left_chunks=left_chunks)

    @property
    def stream_overlap(self) -> int:
        return self.frontend.overlap

    @property
    def stream_chunk(self) -> int:
        return self.config.chunk_frames or 1

    @property
    def left_frames(self) -> int:
        """The output frames before its chunk that a frame attends to: the attention cache of a stream."""
        return self.config.left_chunks * self.config.chunk_frames

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = lengths.to(feats.device)
        valid = valid_frames(lengths, feats.shape[1])
        feats = self.input_norm(feats, valid) if self.input_norm is not None else feats
        x, lengths = self.frontend(feats.masked_fill(~valid[..., None], 0.0), lengths)
        valid = valid_frames(lengths, x.shape[1])
        x = self.dropout(self.project(x))
        cos_sin = rotation(x.shape[1], self.config.dim // self.config.heads, x.device)
        whole = not self.training and not torch.onnx.is_in_onnx_export()  # (a traced graph keeps the mask)
        allowed = keys_allowed(valid, *self.attention_span(x.shape[1]), whole)
        for block in self.blocks:
            x = block(x, valid, allowed, cos_sin)
        return x, lengths

    def attention_span(self, frames: int) -> tuple[int, int]:
        """The chunk (0: none) and left chunks a forward of `frames` output frames attends in: the config's, but in
        training with dynamic_chunks a draw a batch (WeNet's dynamic chunk training), of the whole utterance one
        time in two, else of chunks of 1 to dynamic_chunks frames with all the left context: the model learns to
        run at any chunk size (a stream runs chunk_frames). Without dynamic_whole, chunks alone."""
        config = self.config
        if not (self.training and config.dynamic_chunks):
            return config.chunk_frames, config.left_chunks
        draws = (2 if config.dynamic_whole else 1) * config.dynamic_chunks
        draw = int(torch.randint(draws, (1,)))  # the CPU generator: a resume draws the same
        return (0, 0) if draw >= config.dynamic_chunks else (draw + 1, frames)

    def initial_state(self, batch: int, device: torch.device | str = "cpu"
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The streaming state before any audio: every block's attention cache (layers, 2 x left_frames, batch,
        dim: the keys, then the values, of the frames before a chunk), its convolution cache (layers,
        kernel_size - 1, batch, dim), and the output frames done (batch,)."""
        layers, dim = self.config.layers, self.config.dim
        return (torch.zeros(layers, 2 * self.left_frames, batch, dim, device=device),
                torch.zeros(layers, self.config.kernel_size - 1, batch, dim, device=device),
                torch.zeros(batch, dtype=torch.long, device=device))

    def stream(self, feats: torch.Tensor, attention_cache: torch.Tensor, conv_cache: torch.Tensor,
               done: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The next input frames of unpadded sequences (B, T, input_dim) and the state the frames before left
        (initial_state's) -> (B, T', dim) and the new state. Chunks of whole multiples of stream_chunk output
        frames (time_reduction x chunk_frames input frames), each with the stream_overlap frames before it (the
        first chunk: from frame 0, with stream_overlap more), then any last one, give what forward() gives for
        the whole sequence; a piece too short for an output frame gives none. The encoder must be in eval mode."""
        if self.stream_refusal:
            raise ValueError(self.stream_refusal)
        feats = self.input_norm(feats) if self.input_norm is not None else feats
        if feats.shape[1] < self.frontend.stride + self.frontend.overlap:
            return feats.new_zeros(feats.shape[0], 0, self.output_dim), attention_cache, conv_cache, done
        x, _ = self.frontend(feats, torch.full(feats.shape[:1], feats.shape[1], device=feats.device))
        x, chunks = self.project(x), []
        attention, conv = list(attention_cache.transpose(1, 2)), list(conv_cache.transpose(1, 2))  # (B, L, dim)
        left, head_dim = self.left_frames, self.config.dim // self.config.heads
        for start in range(0, x.shape[1], self.config.chunk_frames):
            chunk = x[:, start:start + self.config.chunk_frames]
            cached = torch.arange(left, device=x.device)[None, :] >= left - done[:, None]
            cos_sin = rotation(left + chunk.shape[1], head_dim, x.device)
            for i, block in enumerate(self.blocks):
                chunk, attention[i], conv[i] = block.stream(chunk, attention[i], cached, conv[i], cos_sin)
            chunks.append(chunk)
            done = done + chunk.shape[1]
        if self.blocks:  # (a Conformer of no blocks caches nothing: its empty caches go back as they came)
            attention_cache, conv_cache = torch.stack(attention).transpose(1, 2), torch.stack(conv).transpose(1, 2)
        return torch.cat(chunks, dim=1), attention_cache, conv_cache, done
