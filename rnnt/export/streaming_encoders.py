"""The streaming encoder graphs of the two kinds sherpa-onnx streams, as it calls them: a window of T fbank
frames (N, T, bins) and the state -> the joiner's projection of the encoder output and the next state. The front
end between fbank and the encoder (global CMVN, frame stacking) is inside, and sherpa-onnx moves on by
decode_chunk_len frames a call (a conv front end reads the T - decode_chunk_len frames before it again).

  lstm:      h and c (layers, N, hidden); icefall's LSTM transducer's interface.
  conformer: the attention cache (layers, left_context, N, dim) of every block's attention keys, then values,
             of the left_context / 2 frames before a chunk (sherpa-onnx reads left_context as the cache's size
             alone, to start it as zeros), the convolution cache (layers, cnn_module_kernel - 1, N, dim) of its
             depthwise convolution's inputs, and processed_frames (N,), the fbank frames the stream had moved
             past before this window (sherpa-onnx's count, as its streaming Conformer takes it): which of the
             cached frames are real.

A graph is a StreamingGraph: the module, what to trace it with, its names, and its metadata beside the
model's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rnnt.model.feature_frontend import FeatureFrontEnd
from rnnt.model.transducer import Transducer


class StreamingEncoder(torch.nn.Module):
    """What both kinds share: the front end over a window of fbank frames, and the projection after the encoder."""

    def __init__(self, model: Transducer, frontend: FeatureFrontEnd):
        super().__init__()
        self.frontend, self.encoder, self.enc_proj = frontend, model.encoder, model.joiner.enc_proj

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.frontend(x, torch.full((x.shape[0],), x.shape[1], dtype=torch.long, device=x.device))[0]


class StreamingLSTM(StreamingEncoder):
    def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        enc, h, c = self.encoder.stream(self.features(x), h, c)
        return self.enc_proj(enc), h, c


class StreamingConformer(StreamingEncoder):
    def __init__(self, model: Transducer, frontend: FeatureFrontEnd, frame_unit: int):
        super().__init__(model, frontend)
        self.frame_unit = frame_unit  # fbank frames per encoder frame

    def forward(self, x: torch.Tensor, attn_cache: torch.Tensor, cnn_cache: torch.Tensor,
                processed_frames: torch.Tensor):
        # after an endpoint sherpa-onnx counts processed_frames from 0 again and keeps the caches: the attention
        # cache is masked by the count (none of its frames real), the convolution's zeroed here, so that the next
        # utterance starts as a new stream does (its convolutions saw the last one's frames)
        cnn_cache = cnn_cache * (processed_frames > 0).to(cnn_cache.dtype).reshape(1, 1, -1, 1)
        enc, attn_cache, cnn_cache, _ = self.encoder.stream(self.features(x), attn_cache, cnn_cache,
                                                            processed_frames // self.frame_unit)
        return self.enc_proj(enc), attn_cache, cnn_cache


@dataclass
class StreamingGraph:
    module: torch.nn.Module
    inputs: list[str]  # x, then the state
    outputs: list[str]  # encoder_out, then the next state
    state: tuple[torch.Tensor, ...]  # the inputs after x for one stream at its start, to trace the graph with
    batch_axes: tuple[int, ...]  # the batch axis of each of them
    metadata: dict  # model_type and what sherpa-onnx reads of this kind (beside T and decode_chunk_len)

    @property
    def dynamic(self) -> dict:
        names = zip(self.inputs[1:] + self.outputs[1:], self.batch_axes + self.batch_axes)
        return {"x": {0: "N"}, "encoder_out": {0: "N"}, **{name: {axis: "N"} for name, axis in names}}

    def random_state(self, processed: list[int]) -> list[torch.Tensor]:
        """The inputs after x for len(processed) streams, to check the graph with: random floats, and
        `processed` for an integer input (processed_frames)."""
        values = []
        for value, axis in zip(self.state, self.batch_axes):
            shape = list(value.shape)
            shape[axis] = len(processed)
            values.append(torch.tensor(processed) if value.dtype == torch.long else torch.randn(shape))
        return values


def streaming_graph(model: Transducer, frontend: FeatureFrontEnd, frame_unit: int, overlap: int) -> StreamingGraph:
    """The streaming graph of the model's encoder kind, lstm or conformer; frame_unit: fbank frames per encoder
    frame; overlap: the fbank frames a window reads again from the one before."""
    encoder, config = model.encoder, model.config.encoder
    if config.kind == "conformer":
        attention, conv, _ = encoder.initial_state(1)
        return StreamingGraph(StreamingConformer(model, frontend, frame_unit).eval(),
                              ["x", "attn_cache", "cnn_cache", "processed_frames"],
                              ["encoder_out", "next_attn_cache", "next_cnn_cache"],
                              (attention, conv, torch.zeros(1, dtype=torch.long)), (2, 2, 0),
                              {"model_type": "conformer", "num_encoder_layers": config.layers,
                               "left_context": 2 * encoder.left_frames, "encoder_dim": config.dim,
                               "cnn_module_kernel": config.kernel_size, "pad_length": overlap})
    if config.kind != "lstm":  # a new kind that streams: sherpa-onnx has a type of its own for each
        raise ValueError(f"sherpa-onnx streams LSTM and Conformer transducers, not a {config.kind} encoder")
    return StreamingGraph(StreamingLSTM(model, frontend).eval(), ["x", "h", "c"], ["encoder_out", "next_h", "next_c"],
                          encoder.initial_state(1), (1, 1),
                          {"model_type": "lstm", "num_encoder_layers": encoder.layers,
                           "rnn_hidden_size": config.hidden, "d_model": config.hidden})
