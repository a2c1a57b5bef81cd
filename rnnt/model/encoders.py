"""The encoder kinds, by the name `model.encoder.kind` gives them. A new kind is one file (its config and
module, as rnnt.model.encoder_interface describes) and one line here."""

from __future__ import annotations

from typing import Union

from rnnt.model.conformer import ConformerConfig
from rnnt.model.encoder_interface import EncoderInterface
from rnnt.model.lstm_encoder import LSTMEncoderConfig

ENCODERS = {
    "lstm": LSTMEncoderConfig,  # LSTMs, with StackTime, or under DeepSpeech 2's conv front end
    "conformer": ConformerConfig,  # Gulati et al. 2020
}

# model.encoder's type: a tagged union (rnnt.config), the first kind the default
EncoderConfig = Union[tuple(ENCODERS.values())]  # noqa: UP007 (built from the registry)


def build_encoder(config) -> EncoderInterface:
    return config.build()
