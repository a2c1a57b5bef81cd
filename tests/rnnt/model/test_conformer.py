"""rnnt.model.conformer: a sequence's output is its own (not its batch's, in evaluation and in training),
attention scores depend on the distance between frames alone, lengths are the config's, and a transducer
over it loads from YAML by kind and learns."""

import dataclasses

import pytest
import torch
import yaml

from rnnt.model.conformer import ConformerConfig, ConformerEncoder, rotate, rotation
from rnnt.model.joiner import JoinerConfig
from rnnt.model.predictor import PredictorConfig
from rnnt.model.transducer import LossConfig, ModelConfig, Transducer
from rnnt.training.experiment import load_experiment

SMALL = ConformerConfig(input_dim=20, input_batch_norm=True, conv_channels=4, conv_layers=2, dim=16, layers=2,
                        heads=2, ff_mult=2, kernel_size=5, dropout=0.0)


def ragged(seed=0, lengths=(37, 20, 9), frames=None):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(len(lengths), frames or max(lengths), SMALL.input_dim, generator=g)
    return feats, torch.tensor(lengths)


def test_output_in_a_batch_is_the_output_alone():
    torch.manual_seed(0)
    encoder = ConformerEncoder(SMALL).eval()
    feats, lengths = ragged()
    feats[1, 20:] = 50.0  # padding that must not leak in
    out, out_lens = encoder(feats, lengths)
    assert out.shape[-1] == encoder.output_dim == 16
    assert out_lens.tolist() == [SMALL.output_frames(n) for n in lengths.tolist()] == [8, 4, 1]
    for b, n in enumerate(lengths.tolist()):
        alone, _ = encoder(feats[b:b + 1, :n], lengths[b:b + 1])
        torch.testing.assert_close(alone[0], out[b, :out_lens[b]], atol=1e-5, rtol=1e-5)


def test_training_statistics_ignore_padding():
    """In training (dropout 0) more padding, full of garbage, changes neither the outputs nor BatchNorm's
    running statistics."""
    feats, lengths = ragged(frames=37)
    wider = torch.cat([feats, torch.full((3, 30, SMALL.input_dim), 1e3)], dim=1)
    outputs, stats = [], []
    for batch in (feats, wider):
        torch.manual_seed(0)
        encoder = ConformerEncoder(SMALL).train()
        out, out_lens = encoder(batch, lengths)
        outputs.append([out[b, :n] for b, n in enumerate(out_lens.tolist())])
        stats.append([m.running_mean.clone() for m in encoder.modules() if isinstance(m, torch.nn.BatchNorm1d)])
    for a, b in zip(*outputs):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert len(stats[0]) == 1 + SMALL.layers
    for a, b in zip(*stats):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_rotated_scores_depend_on_the_distance_alone():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 8, generator=g), torch.randn(2, 8, generator=g)
    frames = torch.zeros(1, 1, 20, 8)

    def score(t, s):  # q at frame t, k at frame s
        at_t, at_s = frames.clone(), frames.clone()
        at_t[0, 0, t], at_s[0, 0, s] = q[0], k[0]
        cos_sin = rotation(20, 8, frames.device)
        return float(rotate(at_t, cos_sin)[0, 0, t] @ rotate(at_s, cos_sin)[0, 0, s])

    assert score(3, 7) == pytest.approx(score(10, 14), rel=1e-5) != pytest.approx(score(3, 8), rel=1e-3)
    assert score(0, 0) == pytest.approx(float(q[0] @ k[0]), rel=1e-5)  # frame 0 is not turned


def test_bad_settings_are_named():
    assert "model.encoder.dim 18 must be a multiple of 2 x model.encoder.heads 2" in \
        ConformerConfig(dim=18, heads=2).problems()[0]
    assert ConformerConfig(heads=0).problems() == ["model.encoder.heads must be at least 1, got 0"]
    assert "kernel_size must be odd" in ConformerConfig(kernel_size=4).problems()[0]
    with pytest.raises(ValueError, match="conv_layers 3 strided convolutions need a wider input"):
        ConformerEncoder(ConformerConfig(input_dim=6, conv_layers=3))
    assert ConformerConfig(attention_dropout=1.0).problems() == [
        "model.encoder.attention_dropout is a dropout rate, from 0 up to (not including) 1, got 1.0"]


def test_attention_dropout_is_dropouts_rate_unless_set():
    rates = {(dropout, attention): {block.attention.dropout for block in ConformerEncoder(dataclasses.replace(
        SMALL, dropout=dropout, attention_dropout=attention)).blocks} for dropout in (0.0, 0.2) for attention in
        (None, 0.0, 0.3)}
    assert rates == {(0.0, None): {0.0}, (0.0, 0.0): {0.0}, (0.0, 0.3): {0.3},
                     (0.2, None): {0.2}, (0.2, 0.0): {0.0}, (0.2, 0.3): {0.3}}


@pytest.mark.parametrize("attention_dropout, random", [(None, False), (0.3, True), (0.0, False)])
def test_attention_dropout_alone_drops_attention_weights(attention_dropout, random):
    """With dropout 0 two training forwards of the same batch differ when attention_dropout is above 0."""
    config = dataclasses.replace(SMALL, attention_dropout=attention_dropout)
    torch.manual_seed(0)
    encoder = ConformerEncoder(config).train()
    feats, lengths = ragged()
    first, second = (encoder(feats, lengths)[0] for _ in range(2))
    assert (not torch.allclose(first, second)) == random


def test_kind_picks_the_encoder_from_yaml(tmp_path):
    path = tmp_path / "conformer.yaml"
    path.write_text(yaml.safe_dump({"model": {"encoder": {"kind": "conformer", "dim": 32, "heads": 4}}}))
    experiment = load_experiment(str(path))
    assert experiment.model.encoder == ConformerConfig(dim=32, heads=4)
    assert isinstance(Transducer(experiment.model, vocab_size=10).encoder, ConformerEncoder)
    path.write_text(yaml.safe_dump({"model": {"encoder": {"kind": "conformer", "hidden": 32}}}))
    with pytest.raises(ValueError, match=r"model.encoder: unknown keys \['hidden'\]"):
        load_experiment(str(path))
    path.write_text(yaml.safe_dump({"model": {"encoder": {"kind": "transformer"}}}))
    with pytest.raises(ValueError, match=r"model.encoder.kind: unknown kind 'transformer'; known kinds are "
                                         r"\['conformer', 'lstm'\]"):
        load_experiment(str(path))


def test_a_conformer_transducer_learns_a_batch():
    torch.manual_seed(0)
    config = ModelConfig(encoder=dataclasses.replace(SMALL, dropout=0.1), joiner=JoinerConfig(hidden=16),
                         predictor=PredictorConfig(kind="stateless", embed_dim=16, dropout=0.0),
                         loss=LossConfig(type="pruned", s_range=3, ctc_weight=0.5))
    model = Transducer(config, vocab_size=6)
    feats, lengths = ragged()
    tokens, token_lens = torch.tensor([[1, 2, 3], [4, 5, 0], [2, 0, 0]]), torch.tensor([3, 2, 1])
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(60):
        loss = model(feats, lengths, tokens, token_lens)["loss"]
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < 0.3 * losses[0]
