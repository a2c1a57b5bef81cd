"""rnnt.export.graphs in PyTorch (no ONNX export) on real LibriSpeech fbank with a small seeded model:
the offline encoder equals the pipeline's features through the model's encoder and projection, per
utterance of a padded batch; the streaming encoder, chunk by chunk from a zero state, equals the offline
one; the decoder reads -1 as the blank start symbol and equals the prediction network's output at each
label position; the joiner is the model's joint network on the two projections."""

import pytest
import torch

from conftest import librispeech_utterances
from rnnt.data.audio import load_audio, to_mono
from rnnt.data.config import DataConfig
from rnnt.data.stages import features_of
from rnnt.export.graphs import Decoder, Joiner, OfflineEncoder
from rnnt.export.streaming_encoders import StreamingConformer, StreamingLSTM
from rnnt.model.conformer import ConformerConfig
from rnnt.model.feature_frontend import FeatureFrontEnd
from rnnt.model.joiner import JoinerConfig
from rnnt.model.lstm_encoder import LSTMEncoderConfig
from rnnt.model.predictor import PredictorConfig
from rnnt.model.transducer import ModelConfig, Transducer

STACK = SUBSAMPLE = 3
STACK_TIME = 2
VOCAB = 7


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = ModelConfig(
        encoder=LSTMEncoderConfig(input_dim=STACK * 80, hidden=16, pre_layers=1, post_layers=1, stack_time=STACK_TIME,
                                  dropout=0.0),
        predictor=PredictorConfig(kind="stateless", embed_dim=8, context=2, dropout=0.0),
        joiner=JoinerConfig(hidden=12, activation="tanh"),
    )
    return Transducer(config, vocab_size=VOCAB).eval()


@pytest.fixture(scope="module")
def records(test_data):
    out = []
    for (utt, flac, _), seconds in zip(librispeech_utterances(test_data), (1.5, 0.93, 2.2)):
        waveform, rate = load_audio(flac, 0.0, seconds)
        out.append({"key": utt, "waveform": to_mono(waveform), "sample_rate": rate})
    return out


def features(record, stack=1, subsample=1, cmvn=None) -> torch.Tensor:
    return features_of(record, DataConfig(stack=stack, subsample=subsample), cmvn, train=False, seed=0, epoch=0)


@pytest.fixture(scope="module")
def cmvn(records):
    frames = torch.cat([features(r) for r in records])
    return frames.mean(dim=0), frames.std(dim=0)


@torch.no_grad()
def test_the_offline_encoder_is_the_pipeline_then_the_encoder_and_its_projection(model, records, cmvn):
    fbanks = [features(r) for r in records]
    lengths = torch.tensor([len(f) for f in fbanks])
    x = torch.zeros(len(fbanks), int(lengths.max()), 80)
    for b, f in enumerate(fbanks):
        x[b, :len(f)] = f
    out, out_lengths = OfflineEncoder(model, FeatureFrontEnd(STACK, SUBSAMPLE, cmvn))(x, lengths)
    assert out.shape[2] == 12
    for b, record in enumerate(records):
        feats = features(record, STACK, SUBSAMPLE, cmvn)  # the pipeline's input to the model
        enc, enc_lengths = model.encode(feats[None], torch.tensor([len(feats)]))
        expected = model.joiner.enc_proj(enc)[0]
        assert int(out_lengths[b]) == int(enc_lengths[0]) == -(-(-(-len(fbanks[b]) // SUBSAMPLE)) // STACK_TIME)
        torch.testing.assert_close(out[b, :len(expected)], expected, rtol=1e-5, atol=1e-6)


@torch.no_grad()
def test_the_streaming_encoder_chunk_by_chunk_equals_the_offline_one(model, records, cmvn):
    frontend = FeatureFrontEnd(STACK, SUBSAMPLE, cmvn)
    fbank = features(records[0])[None]
    whole, whole_lengths = OfflineEncoder(model, frontend)(fbank, torch.tensor([fbank.shape[1]]))
    streaming = StreamingLSTM(model, frontend)
    h, c = model.encoder.initial_state(1)
    assert h.shape == (2, 1, 16)
    chunk = 4 * STACK * STACK_TIME  # whole output frames per chunk; the last chunk takes what is left
    assert fbank.shape[1] % chunk != 0
    pieces = []
    for start in range(0, fbank.shape[1], chunk):
        out, h, c = streaming(fbank[:, start:start + chunk], h, c)
        pieces.append(out)
    streamed = torch.cat(pieces, dim=1)
    assert streamed.shape[1] == int(whole_lengths[0])
    torch.testing.assert_close(streamed, whole, rtol=1e-5, atol=1e-6)


@torch.no_grad()
def test_the_streaming_conformer_window_by_window_as_sherpa_onnx_feeds_it_equals_the_offline_encoder(records, cmvn):
    """Windows of T = chunk + overlap fbank frames that move on by chunk (two attention chunks of 3 encoder
    frames: 24 frames), with processed_frames counting the frames moved past: the offline encoder's output,
    frame for frame, over every window's frames; the attention cache (3 chunks) fills after the fourth."""
    torch.manual_seed(0)
    config = ModelConfig(
        encoder=ConformerConfig(input_dim=80, input_batch_norm=True, conv_channels=4, dim=16, layers=2, heads=2,
                                ff_mult=2, kernel_size=5, dropout=0.0, chunk_frames=3, left_chunks=3),
        predictor=PredictorConfig(kind="stateless", embed_dim=8, context=2, dropout=0.0),
        joiner=JoinerConfig(hidden=12, activation="tanh"))
    model = Transducer(config, vocab_size=VOCAB).eval()
    frontend = FeatureFrontEnd(1, 1, cmvn)
    fbank = features(records[2])[None]
    whole, _ = OfflineEncoder(model, frontend)(fbank, torch.tensor([fbank.shape[1]]))
    streaming, chunk, overlap = StreamingConformer(model, frontend, 4), 24, 3
    attention, conv, _ = model.encoder.initial_state(1)
    assert attention.shape == (2, 18, 1, 16) and conv.shape == (2, 4, 1, 16)
    pieces, processed = [], 0
    while processed + chunk + overlap <= fbank.shape[1]:
        out, attention, conv = streaming(fbank[:, processed:processed + chunk + overlap], attention, conv,
                                         torch.tensor([processed]))
        pieces.append(out)
        processed += chunk
    streamed = torch.cat(pieces, dim=1)
    assert len(pieces) > 5 and streamed.shape[1] == 6 * len(pieces) <= whole.shape[1]
    torch.testing.assert_close(streamed, whole[:, :streamed.shape[1]], rtol=1e-5, atol=1e-5)


@torch.no_grad()
def test_the_decoder_reads_minus_one_as_blank_and_matches_the_prediction_network(model):
    decoder = Decoder(model)
    tokens = torch.tensor([[3, 5, 2, 6]])
    # position u of the prediction network sees the last 2 of [blank, blank, labels before u]
    histories = torch.tensor([[-1, -1], [-1, 3], [3, 5], [5, 2], [2, 6]])
    expected = model.joiner.pred_proj(model.predictor(tokens))[0]
    torch.testing.assert_close(decoder(histories), expected, rtol=1e-6, atol=1e-7)
    blank = model.predictor.blank
    assert torch.equal(decoder(histories), decoder(histories.clamp(min=blank)))
    assert not torch.allclose(decoder(torch.tensor([[1, 3]])), decoder(torch.tensor([[-1, 3]])))


@torch.no_grad()
def test_the_joiner_is_the_joint_network_on_projected_inputs(model):
    g = torch.Generator().manual_seed(1)
    enc, dec = torch.randn(5, 12, generator=g), torch.randn(5, 12, generator=g)
    out = model.joiner.output
    expected = torch.tanh(enc + dec) @ out.weight.t() + out.bias
    logits = Joiner(model)(enc, dec)
    assert logits.shape == (5, VOCAB)
    torch.testing.assert_close(logits, expected, rtol=1e-6, atol=1e-6)
