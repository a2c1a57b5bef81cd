"""The RNN-T model: encoder, prediction network and joint network, trained with one of three losses.

  full:   the joiner's logits (B, T, U+1, V) are built and transducer_loss runs on them (the gradient
          is written over the logits, which nothing else reads);
  fused:  fused_joiner_loss, the logits never exist as a whole;
  pruned: simple_loss on additive am/lm projections picks a band of s_range symbols per frame; the
          joiner runs only inside it: loss = simple_scale * simple + pruned (after icefall's warm-up,
          pruned_scales).
An optional CTC head on the encoder adds ctc_weight * CTC loss.
  ctc:    the CTC head alone (DeepSpeech): no prediction or joint network; decoded with the CTC searches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from rnnt.loss import fused_joiner_loss, prune, prune_ranges, simple_loss, transducer_loss
from rnnt.loss.checks import check_host_lengths
from rnnt.loss.pruned import banded_loss
from rnnt.loss.options import LatticeOptions
from rnnt.model.encoders import EncoderConfig, build_encoder
from rnnt.model.joiner import Joiner, JoinerConfig
from rnnt.model.lstm_encoder import LSTMEncoderConfig
from rnnt.model.predictor import PredictorConfig, build_predictor

LOSSES = ("full", "fused", "pruned", "ctc")


@dataclass(frozen=True)
class LossConfig(LatticeOptions):
    """The loss: its type and the weights of its parts, and (inherited from rnnt.loss.options.LatticeOptions)
    the lattice every exact loss takes, so that the model hands this value to the losses whole."""

    type: str = "full"  # full, fused, pruned or ctc (see the module docstring)
    s_range: int = 5  # pruned: symbol positions per frame in the band the joiner runs on (>= 2)
    simple_scale: float = 0.5  # pruned: weight of the simple loss added to the pruned one (after the warm-up)
    warmup_steps: int = 0  # pruned: optimiser steps of icefall's warm-up (pruned_scales; 0: none)
    lm_only_scale: float = 0.0  # pruned: the predictor's own log-probs' share in the simple loss (k2; icefall 0.25)
    am_only_scale: float = 0.0  # pruned: the encoder's own log-probs' share in the simple loss (icefall 0)
    ctc_weight: float = 0.0  # > 0: a CTC head on the encoder, its loss added with this weight
    fused_kernels: bool = False  # fused on the Triton backend: kernels that hold no logits (MiBs; several x slower)

    @property
    def has_ctc_head(self) -> bool:
        return self.ctc_weight > 0 or self.type == "ctc"

    def units_per_frame(self) -> tuple[float, str, bool]:
        """The most units an encoder frame can carry in the training lattice, why, and whether a repeated unit
        takes a frame more (CTC's blank between them): an utterance with more has no path there (an infinite
        loss: its batch skipped, or for CTC zeroed), so the data filter drops it. A transducer's CTC head
        (ctc_weight) leaves it to the transducer: its CTC term is 0 where CTC has no path."""
        if self.type == "ctc":
            return 1.0, "CTC: a frame a unit and one between repeated units", True
        if self.one_sym_per_frame:
            return 1.0, "one symbol per frame", False
        if self.type == "pruned":
            return float(self.s_range - 1), f"the pruned loss's band of s_range {self.s_range}", False
        return math.inf, "", False


@dataclass(frozen=True)
class ModelConfig:
    encoder: EncoderConfig = field(default_factory=LSTMEncoderConfig)  # kind lstm or conformer (rnnt.model.encoders)
    predictor: PredictorConfig = field(default_factory=PredictorConfig)
    joiner: JoinerConfig = field(default_factory=JoinerConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    mlperf_init: bool = False  # the MLPerf reference's LSTM initialisation (see mlperf_init_)


def mlperf_init_(module: torch.nn.Module, forget_gate_bias: float = 1.0, hidden_hidden_bias_scale: float = 0.0,
                 weights_init_scale: float = 0.5) -> None:
    """The MLPerf reference code's LSTM initialisation (common/rnn.py, with its train.py's default
    weights_init_scale 0.5): PyTorch's default init; then in every LSTM the forget gate's bias_ih set to
    forget_gate_bias and its bias_hh scaled by hidden_hidden_bias_scale; then all the LSTM's weights and
    biases scaled by weights_init_scale. So the forget gate starts with a bias of 0.5 (its README says 1)."""
    for lstm in (m for m in module.modules() if isinstance(m, torch.nn.LSTM)):
        with torch.no_grad():
            for name, param in lstm.named_parameters():
                hidden = param.shape[0] // 4  # gates are ordered input, forget, cell, output
                if name.startswith("bias_ih"):
                    param[hidden:2 * hidden] = forget_gate_bias
                elif name.startswith("bias_hh"):
                    param[hidden:2 * hidden] *= hidden_hidden_bias_scale
            for param in lstm.parameters():
                param.mul_(weights_init_scale)


def pruned_scales(config: LossConfig, step: int | None) -> tuple[float, float]:
    """The weights of the simple and the pruned loss at a training step: over the warm-up the simple loss's
    falls linearly from 1 to simple_scale and the pruned loss's rises from 0.1 to 1 (icefall's schedule:
    the band is placed by a simple loss still learning); after it, or at step None (validation), the
    final ones."""
    if step is None or step >= config.warmup_steps:
        return config.simple_scale, 1.0
    done = step / config.warmup_steps
    return 1.0 - done * (1.0 - config.simple_scale), 0.1 + 0.9 * done


def check_pruned(config: LossConfig) -> None:
    if config.s_range < 2:  # (it failed at the first step, naming s_range, not its key)
        raise ValueError(f"model.loss.s_range must be at least 2 (a band needs room for a label arc), got "
                         f"{config.s_range}")
    if not 0 <= config.simple_scale < math.inf:
        raise ValueError(f"model.loss.simple_scale must be a finite weight, at least 0, got {config.simple_scale}")
    if config.warmup_steps < 0:
        raise ValueError(f"model.loss.warmup_steps must be >= 0, got {config.warmup_steps}")
    lm_only, am_only = config.lm_only_scale, config.am_only_scale
    if not (lm_only >= 0 and am_only >= 0 and lm_only + am_only <= 1):
        raise ValueError(f"model.loss.lm_only_scale and model.loss.am_only_scale must be >= 0 with a sum <= 1, got "
                         f"{config.lm_only_scale} and {config.am_only_scale}")


def check_model_config(config: ModelConfig) -> None:
    """A ValueError naming the key of a value no model can be built with: raised by a config's loading (which
    prefixes the file), not first by the model's construction in the middle of a run."""
    if config.loss.type not in LOSSES:
        raise ValueError(f"model.loss.type must be one of {LOSSES}, got '{config.loss.type}'")
    config.loss.check()
    check_pruned(config.loss)
    if not 0 <= config.loss.ctc_weight < math.inf:  # a negative one or NaN built no CTC head, saying nothing
        raise ValueError(f"model.loss.ctc_weight must be a finite weight, at least 0, got {config.loss.ctc_weight}")
    if config.loss.type == "fused" and config.joiner.dropout:
        raise ValueError("model.joiner.dropout needs the joiner's activations, which the fused loss never keeps: "
                         "use model.loss.type full or pruned, or model.joiner.dropout 0")
    if problems := config.predictor.problems() + config.joiner.problems():
        raise ValueError("; ".join(problems))


class Transducer(torch.nn.Module):
    def __init__(self, config: ModelConfig, vocab_size: int, blank: int = 0):
        super().__init__()
        check_model_config(config)
        self.config, self.vocab_size, self.blank = config, vocab_size, blank
        self.encoder = build_encoder(config.encoder)
        self.predictor = self.joiner = None
        if config.loss.type != "ctc":
            self.predictor = build_predictor(config.predictor, vocab_size, blank)
            self.joiner = Joiner(config.joiner, self.encoder.output_dim, self.predictor.output_dim, vocab_size)
        if config.loss.type == "pruned":
            self.simple_am = torch.nn.Linear(self.encoder.output_dim, vocab_size)
            self.simple_lm = torch.nn.Linear(self.predictor.output_dim, vocab_size)
        self.ctc = torch.nn.Linear(self.encoder.output_dim, vocab_size) if config.loss.has_ctc_head else None
        if config.mlperf_init:
            mlperf_init_(self)

    def encode(self, feats: torch.Tensor, feat_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.encoder(feats, feat_lens)

    def forward(self, feats, feat_lens, tokens, token_lens, step: int | None = None,
                host_lengths: tuple[list[int], list[int]] | None = None) -> dict[str, torch.Tensor]:
        """Mean loss over the batch, and its parts, in float32; step: the training step (the pruned loss's
        warm-up), None outside training; host_lengths: feat_lens and token_lens as lists the host holds, which
        spare the losses that need lengths on the host (CTC's, the fused loss's blocks) reading the device's."""
        enc, enc_lens = self.encode(feats, feat_lens)
        if host_lengths is not None:
            host_lengths = ([self.config.encoder.output_frames(n) for n in host_lengths[0]], host_lengths[1])
            check_host_lengths(host_lengths, enc_lens, token_lens)  # on the CPU: the encoder's formula proved
        return self.loss(enc, enc_lens, tokens, token_lens, step, host_lengths)

    @property
    def is_transducer(self) -> bool:
        return self.joiner is not None

    def unit_layers(self) -> dict[str, torch.nn.Module]:
        """The layers with a row per unit, by name: those that output units, and the label embedding."""
        layers = {"ctc": self.ctc, "simple_am": getattr(self, "simple_am", None),
                  "simple_lm": getattr(self, "simple_lm", None)}
        if self.is_transducer:
            layers["joiner.output"] = self.joiner.output
            layers["predictor.embedding"] = getattr(self.predictor, "embedding", None)
        return {name: layer for name, layer in layers.items() if layer is not None}

    def ctc_loss(self, enc, enc_lens, tokens, token_lens, host_lengths=None) -> torch.Tensor:
        """CTC over the CTC head, summed over the batch and divided by its size (as the transducer loss).
        PyTorch's takes its lengths on the host: host_lengths (enc_lens, token_lens as lists) where given,
        else it reads the tensors (on a GPU a synchronisation)."""
        log_probs = torch.log_softmax(self.ctc(enc).float(), dim=-1).transpose(0, 1)
        enc_lens, token_lens = host_lengths or (enc_lens, token_lens)
        return torch.nn.functional.ctc_loss(log_probs, tokens, enc_lens, token_lens, blank=self.blank,
                                            reduction="sum", zero_infinity=True) / tokens.shape[0]

    def loss(self, enc, enc_lens, tokens, token_lens, step: int | None = None,
             host_lengths: tuple[list[int], list[int]] | None = None) -> dict[str, torch.Tensor]:
        """The configured loss from the encoder output: prediction network, joint network, transducer loss
        (and the weighted CTC loss); or the CTC loss alone. step as in forward; host_lengths: enc_lens and
        token_lens as lists the host holds."""
        loss_config = self.config.loss
        if not self.is_transducer:
            ctc = self.ctc_loss(enc, enc_lens, tokens, token_lens, host_lengths)
            return {"ctc": ctc, "loss": ctc}
        pred = self.predictor(tokens)
        enc_proj, pred_proj = self.joiner.enc_proj(enc), self.joiner.pred_proj(pred)
        if loss_config.type == "full":
            logits = self.joiner(enc_proj[:, :, None], pred_proj[:, None])
            parts = {"transducer": transducer_loss(logits, tokens, enc_lens, token_lens, self.blank,
                                                   reuse_logits_for_grad=True, options=loss_config)}
            loss = parts["transducer"].float()
        elif loss_config.type == "fused":
            parts = {"transducer": self.fused_loss(enc_proj, pred_proj, tokens, enc_lens, token_lens, loss_config,
                                                   kernels=loss_config.fused_kernels, host_lengths=host_lengths)}
            loss = parts["transducer"].float()
        else:
            parts = self.pruned_parts(enc, pred, enc_proj, pred_proj, enc_lens, tokens, token_lens)
            simple_scale, pruned_scale = pruned_scales(loss_config, step if self.training else None)
            loss = simple_scale * parts["simple"] + pruned_scale * parts["transducer"].float()
        if self.ctc is not None:
            parts["ctc"] = self.ctc_loss(enc, enc_lens, tokens, token_lens, host_lengths)
            loss = loss + loss_config.ctc_weight * parts["ctc"]
        parts["loss"] = loss
        return parts

    def fused_loss(self, enc_proj, pred_proj, tokens, enc_lens, token_lens, options: LatticeOptions, **kwargs):
        """The transducer loss with this model's joiner fused into it (rnnt.loss.fused_joiner_loss: its logits
        made block by block, never held whole), from the joiner's projections of both networks' outputs."""
        return fused_joiner_loss(enc_proj, pred_proj, self.joiner.output.weight, self.joiner.output.bias, tokens,
                                 enc_lens, token_lens, self.blank, activation=self.joiner.activation, options=options,
                                 **kwargs)

    def pruned_parts(self, enc, pred, enc_proj, pred_proj, enc_lens, tokens, token_lens):
        """The simple loss, which places a band of s_range symbols per frame, and the exact loss inside it."""
        loss_config = self.config.loss
        simple, (gamma_blank, gamma_label) = simple_loss(self.simple_am(enc), self.simple_lm(pred), tokens, enc_lens,
                                                         token_lens, self.blank, return_posteriors=True,
                                                         lm_only_scale=loss_config.lm_only_scale,
                                                         am_only_scale=loss_config.am_only_scale, options=loss_config)
        ranges = prune_ranges(gamma_blank, gamma_label, enc_lens, token_lens, loss_config.s_range, options=loss_config)
        enc_pruned, pred_pruned = prune(enc_proj, pred_proj, ranges)
        logits = self.joiner(enc_pruned, pred_pruned)
        # simple_loss checked tokens and lengths: the band's loss does not check them again
        pruned = banded_loss(logits, tokens, ranges, enc_lens, token_lens, self.blank, options=loss_config)
        return {"simple": simple.float(), "transducer": pruned}


def built_model(config, vocab_size: int) -> Transducer:
    """A Transducer of config; ValueError where its sizes are more than memory holds (model.encoder.hidden 1280000,
    a typo for 128, was torch's allocator's traceback)."""
    try:
        return Transducer(config, vocab_size)
    except (RuntimeError, MemoryError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"the model the config's model section describes cannot be built ({first[:200]}): a size "
                         "too large (model.encoder.hidden, model.predictor.embed_dim, ...)?") from None
