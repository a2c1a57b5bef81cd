"""rnnt.model.encoders: every registered kind answers to its registry name in YAML, builds an
EncoderInterface whose output lengths are its config's output_frames, and names what it cannot do."""

import dataclasses

import pytest
import torch

from rnnt.config import kind_of
from rnnt.model.encoder_interface import EncoderInterface
from rnnt.model.encoders import ENCODERS, build_encoder

SMALL = {"lstm": dict(input_dim=16, hidden=8, pre_layers=1, post_layers=1, stack_time=2, input_batch_norm=True),
         "conformer": dict(input_dim=16, conv_channels=2, dim=8, layers=1, heads=2, kernel_size=3)}


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_each_kind_builds_an_encoder_of_the_interface(name):
    config = ENCODERS[name](**SMALL[name])
    assert kind_of(ENCODERS[name]) == name == config.kind
    assert config.problems() == []
    torch.manual_seed(0)
    encoder = build_encoder(config).eval()
    assert isinstance(encoder, EncoderInterface)
    frames = [40, 23, 9]
    out, lengths = encoder(torch.randn(3, 40, 16), torch.tensor(frames))
    assert out.shape[-1] == encoder.output_dim and lengths.tolist() == [config.output_frames(n) for n in frames]
    assert out.shape[1] == max(lengths.tolist())
    assert config.time_reduction * lengths[0] >= 40 - config.time_reduction * 2
    assert isinstance(encoder.stream_refusal, str)


def test_the_lstm_streams_unless_bidirectional_and_problems_name_their_keys():
    lstm = ENCODERS["lstm"](**SMALL["lstm"])
    assert build_encoder(lstm).stream_refusal == ""
    assert "bidirectional" in build_encoder(dataclasses.replace(lstm, bidirectional=True)).stream_refusal
    assert any("model.encoder.stack_time" in p for p in dataclasses.replace(lstm, stack_time=0).problems())
    for key, value, minimum in (("post_layers", -2, 0), ("pre_layers", -1, 0), ("hidden", 0, 1)):  # built, they
        assert f"model.encoder.{key} must be at least {minimum}, got {value}" in \
            dataclasses.replace(lstm, **{key: value}).problems()  # failed at the first step
    with pytest.raises(ValueError, match="model.encoder.norm must be none or layer"):
        build_encoder(dataclasses.replace(lstm, norm="batch"))
