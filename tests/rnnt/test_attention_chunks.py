"""rnnt.attention_chunks: the options' values, what results decoded at other chunks are named by, and which models
can be run so (a streaming Conformer) and which are noted as outside what they learnt (one not trained with dynamic
chunks)."""

import argparse
import dataclasses

import pytest

from rnnt.attention_chunks import AttentionChunks, add_attention_options, attend_in, from_args
from rnnt.model.conformer import ConformerConfig
from rnnt.model.lstm_encoder import LSTMEncoderConfig
from rnnt.model.transducer import ModelConfig, Transducer

STREAMING = ConformerConfig(input_dim=20, conv_channels=4, dim=16, layers=1, heads=2, kernel_size=5, chunk_frames=4,
                            left_chunks=8)


def parsed(*options: str) -> AttentionChunks:
    parser = argparse.ArgumentParser()
    add_attention_options(parser)
    return from_args(parser, parser.parse_args(list(options)))


def test_options_and_names():
    assert parsed() == AttentionChunks() and AttentionChunks().name == ""
    assert parsed("--attention-chunk", "16") == AttentionChunks(16) and AttentionChunks(16).name == "chunk16"
    assert parsed("--attention-chunk", "whole") == AttentionChunks(0) and AttentionChunks(0).name == "whole"
    assert parsed("--attention-chunk", "2", "--left-chunks", "32").name == "chunk2-left32"
    assert parsed("--left-chunks", "16").name == "left16"
    for bad in (["--attention-chunk", "0"], ["--attention-chunk", "all"], ["--left-chunks", "0"],
                ["--attention-chunk", "whole", "--left-chunks", "2"]):
        with pytest.raises(SystemExit):
            parsed(*bad)


def model(encoder) -> Transducer:
    return Transducer(ModelConfig(encoder=encoder), 10)


@pytest.mark.parametrize("chunks,name", [(AttentionChunks(16), "chunk16"), (AttentionChunks(4, 16), "left16"),
                                         (AttentionChunks(4, 8), ""), (AttentionChunks(0), "whole"),
                                         (AttentionChunks(2, 32), "chunk2-left32")])
def test_a_result_is_named_by_what_differs_from_the_config(chunks, name):
    """The config's own chunk and left chunks are its plain results; a note only for a model that never learnt
    other chunks."""
    fixed, dynamic = model(STREAMING), model(dataclasses.replace(STREAMING, dynamic_chunks=16))
    assert attend_in(dynamic, chunks) == (name, "")
    named, note = attend_in(fixed, chunks)
    assert named == name and ("outside what it learnt" in note) == bool(name)
    frames, left = (4 if chunks.frames is None else chunks.frames), (8 if chunks.left is None else chunks.left)
    assert (fixed.encoder.config.chunk_frames, fixed.encoder.config.left_chunks) == (frames, left)


def test_a_dynamic_chunk_model_is_noted_outside_the_chunks_it_drew():
    """dynamic_chunks 4: chunks of 1 to 4 frames, and the whole utterance only with dynamic_whole; a larger chunk,
    or whole without it, went without the note."""
    drawn = model(dataclasses.replace(STREAMING, dynamic_chunks=4))
    assert attend_in(drawn, AttentionChunks(2, 32)) == ("chunk2-left32", "")
    assert attend_in(drawn, AttentionChunks(0)) == ("whole", "")
    name, note = attend_in(drawn, AttentionChunks(16))
    assert name == "chunk16" and note == ("attention in chunk16 while the model learnt chunks of 1 to 4 frames and "
                                          "the whole utterance: outside what it learnt")
    chunks_alone = model(dataclasses.replace(STREAMING, dynamic_chunks=4, dynamic_whole=False))
    assert attend_in(chunks_alone, AttentionChunks(0))[1].endswith("(no model.encoder.dynamic_whole): outside what "
                                                                   "it learnt")


def test_only_a_streaming_conformer_has_chunks_to_set():
    for encoder, what in ((LSTMEncoderConfig(input_dim=20, hidden=8), "an encoder of kind lstm"),
                          (dataclasses.replace(STREAMING, chunk_frames=0), "an offline Conformer")):
        with pytest.raises(ValueError, match=what):
            attend_in(model(encoder), AttentionChunks(2))
        assert attend_in(model(encoder), AttentionChunks()) == ("", "")
