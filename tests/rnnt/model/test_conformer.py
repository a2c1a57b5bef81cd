"""rnnt.model.conformer: a sequence's output is its own (not its batch's, in evaluation and in training),
attention scores depend on the distance between frames alone, lengths are the config's, and a transducer
over it loads from YAML by kind and learns. A streaming Conformer (chunk_frames) reads nothing past its chunk,
and streamed chunk by chunk gives the whole utterance's output."""

import dataclasses

import pytest
import torch
import yaml

from rnnt.model.conformer import ConformerConfig, ConformerEncoder
from rnnt.model.rotary_attention import rotate, rotation
from rnnt.model.joiner import JoinerConfig
from rnnt.model.predictor import PredictorConfig
from rnnt.model.transducer import LossConfig, ModelConfig, Transducer
from rnnt.training.experiment import load_experiment

SMALL = ConformerConfig(input_dim=20, input_batch_norm=True, conv_channels=4, conv_layers=2, dim=16, layers=2,
                        heads=2, ff_mult=2, kernel_size=5, dropout=0.0)
STREAMING = dataclasses.replace(SMALL, chunk_frames=3, left_chunks=2)


def ragged(seed=0, lengths=(37, 20, 9), frames=None):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(len(lengths), frames or max(lengths), SMALL.input_dim, generator=g)
    return feats, torch.tensor(lengths)


@pytest.mark.parametrize("config", [SMALL, STREAMING])
def test_output_in_a_batch_is_the_output_alone(config):
    torch.manual_seed(0)
    encoder = ConformerEncoder(config).eval()
    feats, lengths = ragged()
    feats[1, 20:] = 50.0  # padding that must not leak in
    out, out_lens = encoder(feats, lengths)
    assert out.shape[-1] == encoder.output_dim == 16
    assert out_lens.tolist() == [SMALL.output_frames(n) for n in lengths.tolist()] == [8, 4, 1]
    for b, n in enumerate(lengths.tolist()):
        alone, _ = encoder(feats[b:b + 1, :n], lengths[b:b + 1])
        torch.testing.assert_close(alone[0], out[b, :out_lens[b]], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("config", [SMALL, STREAMING])
def test_training_statistics_ignore_padding(config):
    """In training (dropout 0) more padding, full of garbage, changes neither the outputs nor BatchNorm's
    running statistics; a streaming Conformer's padded frames past a chunk of its own (which read no valid
    frame) leave every gradient finite."""
    feats, lengths = ragged(lengths=(80, 20, 9))  # 19, 4 and 1 output frames
    wider = torch.cat([feats, torch.full((3, 30, SMALL.input_dim), 1e3)], dim=1)
    outputs, stats = [], []
    for batch in (feats, wider):
        torch.manual_seed(0)
        encoder = ConformerEncoder(config).train()
        out, out_lens = encoder(batch, lengths)
        outputs.append([out[b, :n] for b, n in enumerate(out_lens.tolist())])
        stats.append([m.running_mean.clone() for m in encoder.modules() if isinstance(m, torch.nn.BatchNorm1d)])
        sum(o.sum() for o in outputs[-1]).backward()
        assert all(torch.isfinite(p.grad).all() for p in encoder.parameters() if p.grad is not None)
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
    assert ConformerConfig(chunk_frames=-1).problems() == [
        "model.encoder.chunk_frames must be 0 (offline) or more, got -1"]
    assert ConformerConfig(chunk_frames=4, left_chunks=0).problems() == [
        "model.encoder.left_chunks must be at least 1 with chunk_frames, got 0"]
    assert ConformerConfig(dynamic_chunks=8).problems() == [
        "model.encoder.dynamic_chunks 8: it trains a streaming Conformer (chunk_frames above 0) in chunks of 1 to "
        "that many frames; 0 turns it off"]
    assert "dynamic_chunks -1" in ConformerConfig(chunk_frames=4, dynamic_chunks=-1).problems()[0]
    with pytest.raises(ValueError, match="conv_layers 3 strided convolutions need a wider input"):
        ConformerEncoder(ConformerConfig(input_dim=6, conv_layers=3))
    assert ConformerConfig(attention_dropout=1.0).problems() == [
        "model.encoder.attention_dropout is a dropout rate, from 0 up to (not including) 1, got 1.0"]


def test_a_streaming_conformer_reads_nothing_past_its_chunk_and_an_offline_one_does():
    """Output frame t reads input frames up to 4t + 6 through the front end; with chunks of 3 output frames,
    changing the input from frame 4 x 12 + 3 on leaves output frames 0-11 (four chunks) as they were, and
    changes the next chunk's. An offline Conformer's first frames change too."""
    torch.manual_seed(0)
    feats, _ = ragged(lengths=(80,))
    later = feats.clone()
    later[:, 51:] = torch.randn(1, 29, SMALL.input_dim)
    for config, first_frames_kept in ((STREAMING, True), (SMALL, False)):
        encoder = ConformerEncoder(config).eval()
        with torch.no_grad():
            before, after = (encoder(x, torch.tensor([80]))[0] for x in (feats, later))
        assert torch.allclose(before[:, :12], after[:, :12], atol=1e-6) == first_frames_kept
        assert not torch.allclose(before[:, 12:15], after[:, 12:15], atol=1e-3)


@pytest.mark.parametrize("chunk_frames,left_chunks,layers", [(3, 2, 2), (1, 1, 2), (4, 3, 3), (2, 1, 0)])
def test_streamed_chunk_by_chunk_a_conformer_gives_the_whole_utterances_output(chunk_frames, left_chunks, layers):
    """Pieces of whole chunks (1 to 5 of them), each with the front end's overlap of the piece before, then what
    is left: forward() over the whole utterance, frame for frame, with BatchNorms' statistics not the identity;
    a piece too short for an output frame gives none (as the utterance's last frames give none)."""
    torch.manual_seed(0)
    config = dataclasses.replace(SMALL, chunk_frames=chunk_frames, left_chunks=left_chunks, layers=layers)
    encoder = ConformerEncoder(config).eval()
    for norm in (m for m in encoder.modules() if isinstance(m, torch.nn.BatchNorm1d)):
        norm.running_mean.uniform_(-1.0, 1.0)
        norm.running_var.uniform_(0.5, 2.0)
    unit, overlap = config.time_reduction * chunk_frames, encoder.stream_overlap
    assert (encoder.stream_chunk, overlap, encoder.stream_refusal) == (chunk_frames, 3, "")
    for length in (101, 103, 40, 7):
        feats = torch.randn(1, length, SMALL.input_dim)
        with torch.no_grad():
            whole, lengths = encoder(feats, torch.tensor([length]))
            state, pieces, start = encoder.initial_state(1), [], 0
            for chunks in (1, 3, 2, 5, 1, 4):
                end = min(start + chunks * unit, max(length - overlap, start))
                out, *state = encoder.stream(feats[:, start:end + overlap], *state)
                pieces.append(out)
                start = end
            out, *state = encoder.stream(feats[:, start:], *state)
        streamed = torch.cat(pieces + [out], dim=1)
        assert streamed.shape[1] == int(lengths[0]) and int(state[2]) == int(lengths[0])
        torch.testing.assert_close(streamed, whole, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("chunk_frames,left_chunks", [(3, 2), (4, 1), (5, 100)])
def test_a_long_utterance_attends_a_block_of_chunks_at_a_time_as_under_the_whole_mask(monkeypatch, chunk_frames,
                                                                                       left_chunks):
    """Decoded whole, a streaming Conformer built a (B, T, T) mask: 10 GB of it for 20 minutes (30000 frames),
    of which a frame reads (left_chunks + 1) chunks. Past two blocks of queries (QUERY_BLOCK, made 8 here) the
    attention runs a block at a time with no such mask, each valid frame's output the mask's, the padded ones
    finite (a NaN would spread through weights of 0); stretches of padding take whole blocks here."""
    import rnnt.model.rotary_attention as attention

    torch.manual_seed(0)
    encoder = ConformerEncoder(dataclasses.replace(SMALL, chunk_frames=chunk_frames, left_chunks=left_chunks)).eval()
    feats, lengths = ragged(1, (170, 120, 40))  # 42, 29 and 9 output frames
    with torch.no_grad():
        masked, out_lens = encoder(feats, lengths)
        monkeypatch.setattr(attention, "QUERY_BLOCK", 8)
        monkeypatch.setattr(attention, "allowed_keys", lambda *args: pytest.fail("a whole mask was built"))
        blocked, _ = encoder(feats, lengths)
    assert torch.isfinite(blocked).all()
    for b, n in enumerate(out_lens.tolist()):
        torch.testing.assert_close(blocked[b, :n], masked[b, :n], atol=1e-5, rtol=1e-5)


def test_dynamic_chunks_draw_a_span_a_training_batch_and_evaluation_runs_chunk_frames():
    """One draw in two the whole utterance, else chunks of 1 to dynamic_chunks frames with all the left context
    (without dynamic_whole, chunks alone); the same draws after the same seed (a resumed training's); evaluation in
    chunk_frames and left_chunks."""
    encoder = ConformerEncoder(dataclasses.replace(STREAMING, dynamic_chunks=5)).train()
    torch.manual_seed(0)
    spans = [encoder.attention_span(40) for _ in range(400)]
    assert set(spans) == {(0, 0), *((chunk, 40) for chunk in range(1, 6))}
    assert 150 < spans.count((0, 0)) < 250
    torch.manual_seed(0)
    assert [encoder.attention_span(40) for _ in range(400)] == spans
    chunks_alone = ConformerEncoder(dataclasses.replace(STREAMING, dynamic_chunks=5, dynamic_whole=False)).train()
    assert {chunks_alone.attention_span(40) for _ in range(100)} == {(chunk, 40) for chunk in range(1, 6)}
    assert encoder.eval().attention_span(40) == (3, 2)
    with torch.no_grad():  # trained so, it runs as one trained in chunk_frames alone
        feats, lengths = ragged()
        fixed = ConformerEncoder(STREAMING).eval()
        fixed.load_state_dict(encoder.state_dict())
        torch.testing.assert_close(encoder(feats, lengths)[0], fixed(feats, lengths)[0])


def test_attend_in_runs_a_streaming_conformer_as_one_built_with_those_chunks():
    """attend_in(1, 4) gives, in forward() and in a stream, what a Conformer built in chunks of 1 with 4 before
    gives with the same weights; attend_in(0, ...) the whole utterance's attention over the causal convolutions
    (one chunk longer than the utterance), which cannot stream. An offline Conformer has no chunks to set."""
    torch.manual_seed(0)
    feats, lengths = ragged()
    encoder = ConformerEncoder(STREAMING).eval()
    with torch.no_grad():
        for (chunk, left), built in (((1, 4), (1, 4)), ((0, 2), (1000, 1))):
            rebuilt = ConformerEncoder(dataclasses.replace(STREAMING, chunk_frames=built[0], left_chunks=built[1]))
            rebuilt.load_state_dict(encoder.state_dict())
            encoder.attend_in(chunk, left)
            torch.testing.assert_close(encoder(feats, lengths)[0], rebuilt.eval()(feats, lengths)[0])
        assert "--attention-chunk whole" in encoder.stream_refusal
        encoder.attend_in(1, 4)
        assert (encoder.stream_chunk, encoder.left_frames, encoder.stream_refusal) == (1, 4, "")
        one = feats[:1, :37]
        state, pieces = encoder.initial_state(1), []
        for start in range(0, 32, 8):  # four pieces of 2 chunks (8 input frames), each with the overlap of 3
            out, *state = encoder.stream(one[:, start:start + 11], *state)
            pieces.append(out)
        torch.testing.assert_close(torch.cat(pieces, dim=1), encoder(one, torch.tensor([37]))[0][:, :8])
    with pytest.raises(ValueError, match="offline Conformer .* has no attention chunks"):
        ConformerEncoder(SMALL).attend_in(2, 2)


def test_an_offline_conformer_refuses_to_stream():
    encoder = ConformerEncoder(SMALL).eval()
    assert "chunk_frames 0" in encoder.stream_refusal
    with pytest.raises(ValueError, match="cannot stream"):
        encoder.stream(torch.zeros(1, 20, SMALL.input_dim), *ConformerEncoder(STREAMING).initial_state(1))


def test_attention_dropout_is_dropouts_rate_unless_set():
    rates = {(dropout, attention): {block.attention.weight_dropout.p for block in ConformerEncoder(dataclasses.replace(
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
