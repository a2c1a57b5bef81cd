"""rnnt.model: StackTime, encoder, prediction network, joiner, the transducer and its losses."""

import dataclasses
import re

import pytest
import torch

from rnnt.model.joiner import JoinerConfig
from rnnt.model.lstm_encoder import LSTMEncoder, LSTMEncoderConfig
from rnnt.model.predictor import PredictorConfig, build_predictor
from rnnt.model.stack_time import StackTime
from rnnt.model.transducer import LossConfig, ModelConfig, Transducer
from conftest import TRITON_DEVICE

TINY = ModelConfig(
    encoder=LSTMEncoderConfig(input_dim=12, hidden=16, pre_layers=1, post_layers=1, stack_time=2, dropout=0.0),
    predictor=PredictorConfig(embed_dim=8, hidden=8, layers=1, dropout=0.0),
    joiner=JoinerConfig(hidden=16, activation="tanh"),
)


def batch(seed=0, B=3, T=21, U=4, V=7):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(B, T, 12, generator=g)
    feat_lens = torch.tensor([T, T - 5, 9])[:B]
    tokens = torch.randint(1, V, (B, U), generator=g)
    token_lens = torch.tensor([U, 2, 0])[:B]
    return feats, feat_lens, tokens, token_lens


def test_stack_time_shapes_lengths_and_content():
    x = torch.arange(2 * 7 * 3, dtype=torch.float32).reshape(2, 7, 3)
    out, lengths = StackTime(3)(x, torch.tensor([7, 4]))
    assert out.shape == (2, 3, 9) and lengths.tolist() == [3, 2]
    assert torch.equal(out[0, 1], x[0, 3:6].reshape(-1))
    assert torch.equal(out[0, 2], torch.cat([x[0, 6], torch.zeros(6)]))
    with pytest.raises(ValueError):
        StackTime(0)


@pytest.mark.parametrize("norm,bidirectional", [("none", False), ("layer", False), ("layer", True)])
def test_encoder_shapes_and_padding_independence(norm, bidirectional):
    torch.manual_seed(0)
    encoder = LSTMEncoder(dataclasses.replace(TINY.encoder, norm=norm, input_batch_norm=True, stack_time=3,
                                              bidirectional=bidirectional)).eval()
    feats, feat_lens, _, _ = batch()
    out, lengths = encoder(feats, feat_lens)
    assert out.shape == (3, 7, 32 if bidirectional else 16) and lengths.tolist() == [7, 6, 3]
    assert encoder.output_dim == out.shape[-1]
    # An utterance's output does not depend on the padding beside it (lengths 21, 16 and 9: StackTime 3
    # joins the last real frames of the first two with padding).
    for b, (n, m) in enumerate(zip(feat_lens.tolist(), lengths.tolist())):
        alone, _ = encoder(feats[b:b + 1, :n], feat_lens[b:b + 1])
        torch.testing.assert_close(alone[0], out[b, :m], atol=1e-5, rtol=1e-5)


def test_bidirectional_layer_reads_each_sequence_backwards_over_its_length():
    """The backward direction at frame t has read frames t..length-1 of its own sequence: equal to an
    LSTM over the flipped sequence alone, whatever padding sits beside it."""
    from rnnt.model.lstm_encoder import BidirectionalLSTM

    torch.manual_seed(0)
    lstm = BidirectionalLSTM(4, 5).eval()
    x, lengths = torch.randn(2, 6, 4), torch.tensor([6, 3])
    x[1, 3:] = 100.0  # padding that must not leak in
    out = lstm(x, lengths)
    for b, n in enumerate(lengths.tolist()):
        ahead, _ = lstm.forwards(x[b:b + 1, :n])
        behind, _ = lstm.backwards(x[b:b + 1, :n].flip(1))
        torch.testing.assert_close(out[b, :n], torch.cat([ahead[0], behind[0].flip(0)], dim=-1))


def test_input_batch_norm_uses_real_frames_only():
    encoder = LSTMEncoder(dataclasses.replace(TINY.encoder, input_batch_norm=True)).train()
    feats, feat_lens, _, _ = batch()
    padded = feats.clone()
    for b, n in enumerate(feat_lens.tolist()):
        padded[b, n:] = 1000.0  # garbage in the padding must not move the statistics
    encoder(padded, feat_lens)
    valid = torch.cat([feats[b, :n] for b, n in enumerate(feat_lens.tolist())])
    torch.testing.assert_close(encoder.input_norm.running_mean, 0.1 * valid.mean(0), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["lstm", "stateless"])
def test_predictor_step_matches_forward(kind):
    torch.manual_seed(1)
    predictor = build_predictor(dataclasses.replace(TINY.predictor, kind=kind, context=3), vocab_size=7).eval()
    tokens = torch.tensor([[3, 1, 5, 2], [4, 4, 6, 1]])
    full = predictor(tokens)
    assert full.shape == (2, 5, predictor.output_dim)
    state = predictor.initial_state(2, torch.device("cpu"))
    out, state = predictor.step(torch.zeros(2, dtype=torch.long), state)
    steps = [out]
    for u in range(4):
        out, state = predictor.step(tokens[:, u], state)
        steps.append(out)
    torch.testing.assert_close(torch.stack(steps, dim=1), full, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("kind", ["lstm", "stateless"])
def test_predictor_states_unstack_select_and_stack_alike(kind):
    """A batched state cut into one state a sequence (the searches' hypotheses) gives what select_state gives,
    and stacking them back gives the batch: the next step from it is the batch's own."""
    torch.manual_seed(2)
    predictor = build_predictor(dataclasses.replace(TINY.predictor, kind=kind, context=3), vocab_size=7).eval()
    state = predictor.initial_state(3, torch.device("cpu"))
    for tokens in ([1, 2, 3], [4, 0, 6], [5, 5, 2]):
        _, state = predictor.step(torch.tensor(tokens), state)
    flat = lambda s: torch.cat([x.flatten() for x in s]) if isinstance(s, tuple) else s.flatten()  # noqa: E731
    singles = predictor.unstack_states(state)
    assert len(singles) == 3
    for b, single in enumerate(singles):
        assert torch.equal(flat(single), flat(predictor.select_state(state, torch.tensor([b]))))
    again = predictor.stack_states(singles[::-1])
    assert torch.equal(flat(again), flat(predictor.select_state(state, torch.tensor([2, 1, 0]))))
    next_tokens = torch.tensor([3, 3, 1])
    torch.testing.assert_close(predictor.step(next_tokens, predictor.stack_states(singles))[0],
                               predictor.step(next_tokens, state)[0], atol=0, rtol=0)


def test_mlperf_init_follows_the_reference_code():
    """The reference's rules (mlcommons/training rnn_speech_recognition common/rnn.py, weights_init_scale
    0.5 from its train.py) applied by hand to the same default init: forget bias_ih 1.0 then halved,
    forget bias_hh times 0.0, everything else of every LSTM halved; nothing else changed."""
    torch.manual_seed(2)
    plain = Transducer(TINY, vocab_size=7)
    torch.manual_seed(2)
    mlperf = Transducer(dataclasses.replace(TINY, mlperf_init=True), vocab_size=7)
    mlperf_params = dict(mlperf.named_parameters())
    lstms = 0
    for module_name, module in plain.named_modules():
        if not isinstance(module, torch.nn.LSTM):
            continue
        for name, param in module.named_parameters():
            want = param.detach().clone()
            h = want.shape[0] // 4
            if name.startswith("bias_ih"):
                want[h:2 * h] = 1.0
            elif name.startswith("bias_hh"):
                want[h:2 * h] *= 0.0
            torch.testing.assert_close(mlperf_params[f"{module_name}.{name}"], want * 0.5)
            lstms += 1
    assert lstms == 4 * (TINY.encoder.pre_layers + TINY.encoder.post_layers + TINY.predictor.layers)
    torch.testing.assert_close(mlperf.joiner.output.weight, plain.joiner.output.weight)
    torch.testing.assert_close(mlperf.predictor.embedding.weight, plain.predictor.embedding.weight)


def test_joiner_dropout_in_training_only_and_refused_with_the_fused_loss():
    config = dataclasses.replace(TINY, joiner=dataclasses.replace(TINY.joiner, dropout=0.5))
    model = Transducer(config, vocab_size=7)
    enc, pred = torch.randn(3, 1, 1, TINY.joiner.hidden), torch.randn(3, 1, 1, TINY.joiner.hidden)
    assert not torch.equal(model.joiner(enc, pred), model.joiner(enc, pred))
    model.eval()
    assert torch.equal(model.joiner(enc, pred), model.joiner(enc, pred))
    with pytest.raises(ValueError, match="fused loss"):
        Transducer(dataclasses.replace(config, loss=LossConfig(type="fused")), vocab_size=7)


def test_full_fused_and_wide_pruned_losses_agree():
    torch.manual_seed(3)
    losses, grads = {}, {}
    for kind in ("full", "fused", "pruned"):
        torch.manual_seed(3)
        config = dataclasses.replace(TINY, loss=LossConfig(type=kind, s_range=5, simple_scale=0.0))
        model = Transducer(config, vocab_size=7).double()
        feats, feat_lens, tokens, token_lens = batch()
        out = model(feats.double(), feat_lens, tokens, token_lens)
        out["transducer"].backward()
        losses[kind] = out["transducer"].detach()
        grads[kind] = model.joiner.output.weight.grad.clone()
    torch.testing.assert_close(losses["fused"], losses["full"])
    torch.testing.assert_close(losses["pruned"], losses["full"])  # s_range 5 >= U + 1
    torch.testing.assert_close(grads["fused"], grads["full"])
    torch.testing.assert_close(grads["pruned"], grads["full"])


@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")  # the interpreter's log(0)
def test_the_fused_loss_takes_its_kernels_when_the_config_asks(monkeypatch):
    """loss: {type: fused, backend: triton, fused_kernels: true} runs the Triton kernels that hold no logits
    (the default, the blocks), with the full loss's value and gradients."""
    pytest.importorskip("triton")
    from rnnt.loss import joint_triton

    calls = []
    stats = joint_triton.joint_stats
    monkeypatch.setattr(joint_triton, "joint_stats", lambda *a: calls.append(1) or stats(*a))
    results = {}
    device = TRITON_DEVICE
    for name, loss in [("full", LossConfig()), ("blocks", LossConfig(type="fused", backend="triton")),
                       ("kernels", LossConfig(type="fused", backend="triton", fused_kernels=True))]:
        torch.manual_seed(3)
        model = Transducer(dataclasses.replace(TINY, loss=loss), vocab_size=7).to(device)
        out = model(*(x.to(device) for x in batch()))
        out["transducer"].backward()
        results[name] = (out["transducer"].detach(), model.joiner.output.weight.grad)
        assert len(calls) == (name == "kernels")
    for name in ("blocks", "kernels"):
        torch.testing.assert_close(results[name], results["full"], rtol=1e-5, atol=1e-5)


def test_ctc_head_adds_its_weighted_loss():
    torch.manual_seed(4)
    model = Transducer(dataclasses.replace(TINY, loss=LossConfig(ctc_weight=0.3)), vocab_size=7)
    out = model(*batch())
    torch.testing.assert_close(out["loss"], out["transducer"] + 0.3 * out["ctc"])
    assert out["ctc"] > 0


def test_bad_model_settings():
    with pytest.raises(ValueError, match="loss.type"):
        Transducer(dataclasses.replace(TINY, loss=LossConfig(type="attention")), vocab_size=7)
    with pytest.raises(ValueError, match="encoder.norm"):
        LSTMEncoder(dataclasses.replace(TINY.encoder, norm="batch"))
    with pytest.raises(ValueError, match="predictor.kind"):
        build_predictor(dataclasses.replace(TINY.predictor, kind="gru"), vocab_size=7)


def test_sizes_of_nothing_and_dropouts_outside_0_to_1_are_refused_at_the_configs_loading():
    """A stateless predictor of context 0 built, then failed in its first forward pass (oneDNN's 'could not create
    a primitive descriptor'); a joiner of hidden 0 trained with logits that were its output bias whatever the
    audio; a dropout of 1.5 reached torch."""
    from rnnt.model.conformer import ConformerConfig
    from rnnt.model.transducer import check_model_config

    cases = {"model.predictor.context must be at least 1, got 0":
             dataclasses.replace(TINY, predictor=PredictorConfig(kind="stateless", context=0)),
             "model.predictor.layers must be at least 1, got 0":
             dataclasses.replace(TINY, predictor=dataclasses.replace(TINY.predictor, layers=0)),
             "model.predictor.embed_dropout is a dropout rate, from 0 up to (not including) 1, got 1.0":
             dataclasses.replace(TINY, predictor=dataclasses.replace(TINY.predictor, embed_dropout=1.0)),
             "model.joiner.hidden must be at least 1, got 0":
             dataclasses.replace(TINY, joiner=dataclasses.replace(TINY.joiner, hidden=0)),
             "model.joiner.dropout is a dropout rate, from 0 up to (not including) 1, got -0.1":
             dataclasses.replace(TINY, joiner=dataclasses.replace(TINY.joiner, dropout=-0.1))}
    for message, config in cases.items():
        with pytest.raises(ValueError, match=re.escape(message)):
            check_model_config(config)
    check_model_config(dataclasses.replace(TINY, predictor=dataclasses.replace(TINY.predictor, embed_dropout=0.0)))
    assert "model.encoder.dropout is a dropout rate, from 0 up to (not including) 1, got 1.5" in \
        dataclasses.replace(TINY.encoder, dropout=1.5).problems()
    assert "model.encoder.conv_channels must be at least 0, got -4" in \
        dataclasses.replace(TINY.encoder, conv_channels=-4).problems()  # a torch RuntimeError building the model
    assert "model.encoder.dim must be at least 1, got 0" in ConformerConfig(dim=0, heads=1).problems()
    assert {"model.encoder.ff_mult must be at least 1, got 0", "model.encoder.layers must be at least 0, got -1"} <= \
        set(ConformerConfig(ff_mult=0, layers=-1).problems())


def test_the_embedding_dropout_is_its_own_where_set():
    """The MLPerf reference drops nothing of the label embeddings (mlperf.yaml: embed_dropout 0), only between
    and after its LSTM layers."""
    tokens = torch.tensor([[1, 2, 3, 4]])
    for embed_dropout, dropped in ((0.0, False), (None, True)):  # a stateless predictor: its embeddings alone
        config = PredictorConfig(kind="stateless", embed_dim=16, dropout=0.9, embed_dropout=embed_dropout)
        predictor = build_predictor(config, vocab_size=7).train()
        torch.manual_seed(0)
        first = predictor(tokens)
        assert torch.equal(first, predictor(tokens)) != dropped  # two training passes: dropped, they differ


def recipe_yamls(searches: bool) -> list[str]:
    """egs/*/conf/*.yaml: the experiment configs, or the hyper-parameter searches (a `space` section)."""
    import yaml

    from conftest import ROOT

    return sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("egs/*/conf/*.yaml")
                  if ("space" in (yaml.safe_load(p.read_text()) or {})) == searches)


@pytest.mark.parametrize("search", recipe_yamls(searches=True))
def test_every_recipe_search_loads(search, tmp_path):
    from conftest import ROOT
    from rnnt.config import to_dict
    from rnnt.training.experiment import load_experiment
    from rnnt.tuning.space import load_search

    (tmp_path / "empty.yaml").write_text("")
    assert load_search(str(ROOT / search), to_dict(load_experiment(str(tmp_path / "empty.yaml")))).space


@pytest.mark.parametrize("config", recipe_yamls(searches=False))
def test_every_recipe_config_loads_and_builds_with_our_dropout(config):
    from conftest import ROOT
    from rnnt.model.dropout import Dropout
    from rnnt.training.experiment import load_experiment

    experiment = load_experiment(str(ROOT / config))
    model = Transducer(experiment.model, vocab_size=1024 if "mlperf" in config else 100)
    assert sum(p.numel() for p in model.parameters()) > 0
    if "mlperf" in config:
        assert 48e6 < sum(p.numel() for p in model.parameters()) < 50e6  # the reference's ~49 M
    assert all(type(module) is Dropout for module in model.modules() if isinstance(module, torch.nn.Dropout))


@pytest.mark.parametrize("conv_channels,conv_layers,stack_time", [(0, 2, 1), (0, 2, 3), (8, 2, 1), (8, 3, 2)])
def test_time_reduction_is_what_the_encoder_does_to_the_frame_rate(conv_channels, conv_layers, stack_time):
    """Word times (rnnt.transcriber) put encoder frame t at input frame t * time_reduction."""
    config = LSTMEncoderConfig(input_dim=80, hidden=16, pre_layers=1, post_layers=1, stack_time=stack_time,
                              conv_channels=conv_channels, conv_layers=conv_layers)
    encoder = LSTMEncoder(config).eval()
    with torch.no_grad():
        _, lengths = encoder(torch.randn(1, 1200, 80), torch.tensor([1200]))
    assert abs(int(lengths[0]) * config.time_reduction - 1200) < config.time_reduction * 2


@pytest.mark.parametrize("conv_channels,conv_layers,stack_time,pre_layers,post_layers",
                         [(0, 2, 2, 2, 1), (8, 2, 1, 2, 1), (8, 2, 2, 2, 1), (8, 3, 1, 2, 1), (8, 2, 1, 3, 0),
                          (0, 2, 2, 0, 2)])
def test_encoder_streamed_in_chunks_gives_the_whole_sequence_output(conv_channels, conv_layers, stack_time,
                                                                    pre_layers, post_layers):
    """Chunks of whole time_reduction groups, each starting with stream_overlap frames of the chunk
    before, then what is left: the output of forward() over the whole sequence, frame for frame. A last
    piece too short for the conv front end gives nothing, as the whole sequence's last frames give
    nothing there either. Either LSTM stack may be empty (DeepSpeech 2's encoder has no post layers)."""
    torch.manual_seed(0)
    config = LSTMEncoderConfig(input_dim=20, hidden=16, pre_layers=pre_layers, post_layers=post_layers,
                              stack_time=stack_time, conv_channels=conv_channels, conv_layers=conv_layers,
                              input_batch_norm=True, norm="layer", dropout=0.0)
    encoder = LSTMEncoder(config).eval()
    encoder.input_norm.running_mean.uniform_(-1.0, 1.0)
    assert encoder.stream_overlap == (2 ** conv_layers - 1 if conv_channels else 0)
    unit, overlap = config.time_reduction, encoder.stream_overlap
    for length in (101, 103, 96 + overlap):
        feats = torch.randn(1, length, 20)
        with torch.no_grad():
            whole, lengths = encoder(feats, torch.tensor([length]))
            state, pieces, start = encoder.initial_state(1), [], 0
            for groups in (1, 3, 2, 5, 1, 4, 100):  # the last takes what is left
                end = min(start + groups * unit, length - overlap) if groups < 100 else length
                out, *state = encoder.stream(feats[:, start:end + overlap if groups < 100 else end], *state)
                pieces.append(out)
                start = end
        streamed = torch.cat(pieces, dim=1)
        assert streamed.shape[1] == int(lengths[0]), (length, streamed.shape)
        torch.testing.assert_close(streamed, whole, atol=1e-5, rtol=1e-5)
