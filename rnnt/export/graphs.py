"""The three graphs of a transducer as sherpa-onnx runs them, as modules to export.

  encoder: fbank frames (N, T, bins) and their lengths -> the joiner's projection of the encoder output
           (N, T', J) and the new lengths; the front end between fbank and the encoder (global CMVN, frame
           stacking) is inside. Streaming encoders: rnnt.export.streaming_encoders.
  decoder: the last `context` labels (N, context) -> the joiner's projection of the prediction network's
           output (N, J). sherpa-onnx may pass -1 for "no label yet": it counts as blank, the start symbol.
  joiner:  two projections (N, J), (N, J) -> logits (N, vocab).
"""

from __future__ import annotations

import torch

from rnnt.model.conv_frontend import Conv2dSubsampling
from rnnt.model.feature_frontend import FeatureFrontEnd
from rnnt.model.transducer import Transducer


class OfflineEncoder(torch.nn.Module):
    """The encoder's features padded with the frames a conv front end's first output frame reads: its own padding
    of a batch too short for that frame is a Python branch, which the trace leaves out (onnxruntime then refused
    a clip of a few frames, and of none: sherpa-onnx's apps crash on an exception). The padding adds frames past
    every length: the lengths keep them out."""

    def __init__(self, model: Transducer, frontend: FeatureFrontEnd):
        super().__init__()
        self.frontend, self.encoder, self.enc_proj = frontend, model.encoder, model.joiner.enc_proj
        convs = [m for m in model.encoder.modules() if isinstance(m, Conv2dSubsampling)]
        self.pad_frames = convs[0].stride + convs[0].overlap if convs else 0

    def forward(self, x: torch.Tensor, x_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        feats, lengths = self.frontend(x, x_lens)
        if self.pad_frames:  # fixed at export: traced
            feats = torch.nn.functional.pad(feats, (0, 0, 0, self.pad_frames))
        enc, enc_lens = self.encoder(feats, lengths)
        return self.enc_proj(enc), enc_lens


class Decoder(torch.nn.Module):
    def __init__(self, model: Transducer):
        super().__init__()
        self.predictor, self.pred_proj = model.predictor, model.joiner.pred_proj

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return self.pred_proj(self.predictor.from_history(y.clamp(min=self.predictor.blank)))


class Joiner(torch.nn.Module):
    def __init__(self, model: Transducer):
        super().__init__()
        self.joiner = model.joiner

    def forward(self, encoder_out: torch.Tensor, decoder_out: torch.Tensor) -> torch.Tensor:
        return self.joiner(encoder_out, decoder_out)
