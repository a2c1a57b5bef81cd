"""rnnt.model.feature_frontend.FeatureFrontEnd: on a padded batch of real LibriSpeech fbank, each sequence
comes out exactly as the data pipeline makes it alone (rnnt.data.stages.features_of: CMVN, then stacking
with zeros after the end), whatever sits in the padding, for stacks shorter, equal to and longer than
the subsampling; a small case by hand; and a traced module that is right for other lengths than traced."""

import pytest
import torch

from conftest import librispeech_utterances
from rnnt.data.audio import load_audio, to_mono
from rnnt.data.config import DataConfig
from rnnt.data.stages import features_of
from rnnt.model.feature_frontend import FeatureFrontEnd

# seconds of each utterance: ragged lengths, and frame counts that fall on and off the subsampling
SECONDS = (1.23, 2.0, 0.57)


@pytest.fixture(scope="module")
def utterances(test_data):
    """(key, mono waveform, sample rate) of the first seconds of three LibriSpeech samples."""
    out = []
    for (utt, flac, _), seconds in zip(librispeech_utterances(test_data), SECONDS):
        waveform, rate = load_audio(flac, 0.0, seconds)
        out.append({"key": utt, "waveform": to_mono(waveform), "sample_rate": rate})
    return out


def pipeline(record, stack, subsample, cmvn) -> torch.Tensor:
    return features_of(record, DataConfig(stack=stack, subsample=subsample), cmvn, train=False, seed=0, epoch=0)


@pytest.fixture(scope="module")
def fbanks(utterances):
    return [pipeline(record, 1, 1, None) for record in utterances]


@pytest.fixture(scope="module")
def cmvn(fbanks):
    frames = torch.cat(fbanks)
    return frames.mean(dim=0), frames.std(dim=0)


def padded(fbanks, fill: float) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(f) for f in fbanks])
    batch = torch.full((len(fbanks), int(lengths.max()) + 2, fbanks[0].shape[1]), fill)  # longer than the longest
    for b, f in enumerate(fbanks):
        batch[b, :len(f)] = f
    return batch, lengths


@pytest.mark.parametrize("stack,subsample", [(3, 3), (4, 3), (2, 3), (5, 2), (1, 1)])
@pytest.mark.parametrize("with_cmvn", [True, False])
def test_each_sequence_is_what_the_pipeline_makes_of_it_alone(utterances, fbanks, cmvn, stack, subsample, with_cmvn):
    cmvn = cmvn if with_cmvn else None
    frontend = FeatureFrontEnd(stack, subsample, cmvn)
    feats, lengths = padded(fbanks, fill=1e4)  # what is past a length must not leak into the stacks
    out, out_lengths = frontend(feats, lengths)
    assert out.shape == (3, -(-feats.shape[1] // subsample), stack * 80)
    for b, record in enumerate(utterances):
        expected = pipeline(record, stack, subsample, cmvn)
        assert out_lengths[b] == len(expected) == -(-len(fbanks[b]) // subsample)
        torch.testing.assert_close(out[b, :len(expected)], expected, rtol=0, atol=0)


def test_a_short_sequence_by_hand():
    feats = torch.arange(1.0, 8.0).reshape(1, 7, 1)  # frames 1 .. 7; the last two are padding
    out, lengths = FeatureFrontEnd(stack=3, subsample=2)(feats, torch.tensor([5]))
    assert lengths.tolist() == [3]
    assert out[0].tolist() == [[1, 2, 3], [3, 4, 5], [5, 0, 0], [0, 0, 0]]


def test_cmvn_normalises_before_the_padding_is_zeroed():
    cmvn = (torch.tensor([1.0, 10.0]), torch.tensor([2.0, 5.0]))
    feats = torch.tensor([[[3.0, 20.0], [5.0, 0.0], [99.0, 99.0]]])
    out, lengths = FeatureFrontEnd(stack=2, subsample=2, cmvn=cmvn)(feats, torch.tensor([2]))
    assert lengths.tolist() == [1]
    assert out[0].tolist() == [[1.0, 2.0, 2.0, -2.0], [0.0, 0.0, 0.0, 0.0]]


def test_the_cmvn_statistics_are_buffers_saved_with_the_model():
    mean, std = torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([3.0, 4.0], dtype=torch.float64)
    frontend = FeatureFrontEnd(3, 3, (mean, std))
    state = frontend.state_dict()
    assert sorted(state) == ["mean", "std"] and state["mean"].dtype == torch.float32
    assert state["mean"].tolist() == [1.0, 2.0] and state["std"].tolist() == [3.0, 4.0]
    mean[0] = 100.0  # a copy: changing the caller's statistics later does not change the model
    assert frontend.mean[0] == 1.0
    assert FeatureFrontEnd(3, 3).state_dict() == {}


@pytest.mark.filterwarnings("ignore:`torch.jit.trace:DeprecationWarning")  # the tracer torch.onnx.export uses
def test_a_traced_frontend_handles_other_lengths_than_it_was_traced_with(fbanks, cmvn):
    frontend = FeatureFrontEnd(3, 3, cmvn)
    short = [f[:10] for f in fbanks]
    traced = torch.jit.trace(frontend, padded(short, fill=0.0))
    feats, lengths = padded(fbanks, fill=7.0)
    for got, expected in zip(traced(feats, lengths), frontend(feats, lengths)):
        assert torch.equal(got, expected)
