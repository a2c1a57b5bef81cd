"""rnnt.export.sherpa_onnx called directly on small seeded models: which models it refuses and why (every
reason at once), tokens.txt for each unit type, the files, graph metadata and recognizer arguments it
writes (offline and streaming), loaded by the real sherpa-onnx and decoding a real utterance as our
greedy search does, nothing written for a refused model, and the onnxruntime check that catches a graph
that differs from its module. The tool around it, int8 and many utterances in sherpa-onnx are
tests/rnnt/export/test_deploy.py's."""

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
import sherpa_onnx
import soundfile
import torch
import yaml

from conftest import librispeech_utterances
from rnnt.data.features import fbank
from rnnt.data.stacking import stack_frames
from rnnt.data.tokenizer import SPACE, Tokenizer
from rnnt.export.runtime import tokens_digest
from rnnt.export.sherpa_onnx import (AUTHOR, ExportOptions, NotExportable, _export, _quantize, _verify, export,
                                     refusals, tokens_txt)
from rnnt.model.transducer import Transducer
from rnnt.search import greedy_search
from rnnt.training import checkpoint
from rnnt.training.experiment import load_experiment, save_experiment
from rnnt.transcriber import load_model

LSTM = {"input_dim": 240, "hidden": 32, "pre_layers": 1, "post_layers": 1, "stack_time": 2, "input_batch_norm": True}
CONFORMER = {"kind": "conformer", "input_dim": 240, "input_batch_norm": True, "conv_channels": 4, "dim": 16,
             "layers": 1, "heads": 2, "kernel_size": 7}
FILES = ["decoder.onnx", "decoding.json", "encoder.onnx", "joiner.onnx", "sherpa-onnx.json", "tokens.txt"]


@pytest.fixture(scope="module")
def langs(tmp_path_factory, test_data):
    """Char, word and phone lang dirs of the LibriSpeech samples' transcripts, written as build_units.py
    writes them (the word units listed out of id order: tokens.txt is in id order)."""
    root = tmp_path_factory.mktemp("langs")
    texts = [text for _, _, text in librispeech_utterances(test_data)]
    words = sorted({w for t in texts for w in t.split()})
    chars = sorted({c for t in texts for c in t if c != " "})
    inventories = {"char": [SPACE, *chars], "word": words,
                   "phone": sorted({SPACE, *{c for w in words for c in w}})}
    out = {}
    for kind, units in inventories.items():
        lang = out[kind] = root / kind
        lang.mkdir()
        lines = [f"{s} {i}" for i, s in enumerate(["<blank>", "<unk>", *units])]
        if kind == "word":
            lines = lines[:2] + lines[2:][::-1]
        (lang / "units.txt").write_text("\n".join(lines) + "\n")
        config = {"type": kind}
        if kind == "phone":  # a lexicon spelling each word with its letters as phones
            (lang / "lexicon.txt").write_text("".join(f"{w} {' '.join(w)}\n" for w in words))
            config["lexicon"] = "lexicon.txt"
        (lang / "units.json").write_text(json.dumps(config))
    return out


def experiment_and_model(path, lang, encoder=None, predictor=None, features="sherpa_onnx", loss=None,
                         subsample=3, tail_silence=0.0, stack=3):
    path.mkdir(parents=True, exist_ok=True)
    encoder = encoder if (encoder or {}).get("kind") == "conformer" else {**LSTM, **(encoder or {})}
    values = {"model": {"encoder": encoder,
                        "predictor": {"kind": "stateless", "embed_dim": 16, "context": 2, **(predictor or {})},
                        "joiner": {"hidden": 24, "activation": "tanh"},
                        "loss": {"type": "full", "one_sym_per_frame": True, **(loss or {})}},
              "data": {"features": {"preset": features, "num_mel_bins": 80}, "stack": stack, "subsample": subsample,
                       "tail_silence": tail_silence},
              "paths": {"lang_dir": str(lang)}}
    (path / "input.yaml").write_text(yaml.safe_dump(values))
    experiment = load_experiment(str(path / "input.yaml"))
    tokenizer = Tokenizer(str(lang))
    torch.manual_seed(3)
    return experiment, Transducer(experiment.model, tokenizer.vocab_size).eval(), tokenizer


def make_experiment(path, lang, **changes):
    """An experiment dir of two checkpoints, epoch-1.pt and epoch-2.pt (more steps: the default), of
    different seeded weights; <unk> never wins (sherpa-onnx takes a winning <unk> for no symbol)."""
    experiment, model, _ = experiment_and_model(path, lang, **changes)
    save_experiment(experiment, str(path / "config.yaml"))
    for epoch in (1, 2):
        if model.encoder.input_norm is not None:  # statistics near those of log-mel energies
            model.encoder.input_norm.running_mean.uniform_(-8.0, 0.0)
            model.encoder.input_norm.running_var.uniform_(4.0, 9.0)
        if model.joiner is not None:
            with torch.no_grad():
                model.joiner.output.bias[1] = -100.0
        checkpoint.save(str(path / f"epoch-{epoch}.pt"),
                        {"model": model.state_dict(), "meta": {"step": 10 * epoch, "epoch": epoch}})
        torch.nn.init.normal_(model.joiner.output.weight)
    return path


def metadata(path) -> dict:
    return {p.key: p.value for p in onnx.load(str(path)).metadata_props}


def io_shapes(path) -> dict:
    graph = onnx.load(str(path)).graph
    return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in [*graph.input, *graph.output]}


def streamed_silence(args: dict) -> str:
    """What sherpa-onnx's streaming recognizer of these from_transducer arguments makes of a second of silence."""
    recognizer = sherpa_onnx.OnlineRecognizer.from_transducer(**args)
    stream = recognizer.create_stream()
    stream.accept_waveform(16000, torch.zeros(16000).numpy())
    stream.input_finished()
    while recognizer.is_ready(stream):
        recognizer.decode_stream(stream)
    return recognizer.get_result(stream)



def silence_to_an_endpoint(args: dict) -> tuple[str, float]:
    """(the transcript, the seconds fed) when sherpa-onnx's streaming recognizer of these from_transducer arguments,
    its endpoint rules on, fed silence 0.1 s at a time, ends the utterance (at most 5 s)."""
    recognizer = sherpa_onnx.OnlineRecognizer.from_transducer(**args, enable_endpoint_detection=True)
    stream, fed = recognizer.create_stream(), 0
    while not recognizer.is_endpoint(stream) and fed < 50:
        stream.accept_waveform(16000, torch.zeros(1600).numpy())
        fed += 1
        while recognizer.is_ready(stream):
            recognizer.decode_stream(stream)
    return recognizer.get_result(stream), fed / 10

# --- what is refused --------------------------------------------------------------------------------

@pytest.mark.parametrize("lang,change,options,reasons", [
    ("char", {}, ExportOptions(), []),
    ("word", {}, ExportOptions(streaming=True, chunk_frames=6), []),
    ("char", {"encoder": {"bidirectional": True}}, ExportOptions(), []),  # offline runs any encoder
    ("char", {"encoder": CONFORMER}, ExportOptions(), []),
    ("phone", {}, ExportOptions(), ["phone units: sherpa-onnx would print phones, not words"]),
    ("char", {"loss": {"type": "ctc", "one_sym_per_frame": False}}, ExportOptions(),
     ["a CTC model (loss.type: ctc) has no prediction and joint network"]),
    ("char", {"predictor": {"kind": "lstm", "hidden": 16, "layers": 1}}, ExportOptions(),
     ["predictor.kind is lstm: sherpa-onnx runs a stateless prediction network"]),
    ("char", {"loss": {"one_sym_per_frame": False}}, ExportOptions(),  # sherpa-onnx would decode it otherwise
     ["loss.one_sym_per_frame is false: sherpa-onnx's search emits at most one symbol a frame"]),
    ("char", {"features": "kaldi"}, ExportOptions(), ["data.features.preset is kaldi: sherpa-onnx computes its own"]),
    ("char", {"encoder": {"bidirectional": True}}, ExportOptions(streaming=True, chunk_frames=6),
     ["a bidirectional encoder reads every utterance backwards too: it cannot stream"]),
    ("char", {"subsample": 1}, ExportOptions(streaming=True, chunk_frames=5),
     ["data.stack 3 != data.subsample 1: overlapping stacked frames cannot stream",
      "--chunk-frames 5 is not a multiple of 2"]),
    ("char", {"encoder": CONFORMER}, ExportOptions(streaming=True, chunk_frames=12),  # 3 x its strides 2 x 2
     ["an offline Conformer (model.encoder.chunk_frames 0) attends to every frame"]),
    ("char", {"encoder": {**CONFORMER, "chunk_frames": 2}}, ExportOptions(streaming=True, chunk_frames=48), []),
    ("char", {"encoder": {**CONFORMER, "chunk_frames": 2}}, ExportOptions(streaming=True, chunk_frames=12),
     ["--chunk-frames 12 is not a multiple of 24 (stacking x the conv front end's strides x StackTime, x a "
      "Conformer's chunk_frames)"]),
    ("char", {"encoder": {"pre_layers": 0, "post_layers": 0}}, ExportOptions(streaming=True, chunk_frames=6),
     ["the encoder has no LSTM layers: sherpa-onnx streams an LSTM transducer"]),
    ("char", {}, ExportOptions(streaming=True, chunk_frames=10),
     ["--chunk-frames 10 is not a multiple of 6 (stacking x the conv front end's strides x StackTime, x a "
      "Conformer's chunk_frames)"]),
    ("char", {}, ExportOptions(streaming=True, chunk_frames=-6), ["--chunk-frames -6 is negative"]),
    ("phone", {"features": "kaldi", "predictor": {"kind": "lstm", "hidden": 16, "layers": 1}},
     ExportOptions(streaming=True, chunk_frames=9),
     ["phone units", "predictor.kind is lstm", "data.features.preset is kaldi", "--chunk-frames 9"]),
])
def test_refusals_name_every_reason(tmp_path, langs, lang, change, options, reasons):
    experiment, model, tokenizer = experiment_and_model(tmp_path, langs[lang], **change)
    why = refusals(experiment, model, tokenizer, options)
    assert len(why) == len(reasons) and all(w.startswith(r) for w, r in zip(why, reasons)), why


def test_tokens_txt_is_in_id_order_and_marks_word_starts(langs):
    char, word = Tokenizer(str(langs["char"])), Tokenizer(str(langs["word"]))
    assert tokens_txt(char) == [f"{s} {i}" for s, i in sorted(char.units.items(), key=lambda u: u[1])]
    assert tokens_txt(char)[:3] == ["<blank> 0", "<unk> 1", f"{SPACE} 2"]
    lines = tokens_txt(word)
    assert [int(line.split()[1]) for line in lines] == list(range(word.vocab_size))
    assert lines[:2] == ["<blank> 0", "<unk> 1"]  # not words: no mark
    assert all(line.split()[0] == SPACE + word.symbols[i] for i, line in enumerate(lines) if i > 1)
    assert f"{SPACE}HE {word.units['HE']}" in lines


# --- what is written ---------------------------------------------------------------------------------

def test_an_offline_export_is_what_sherpa_onnx_loads(tmp_path, langs, test_data, monkeypatch):
    exp = make_experiment(tmp_path / "exp", langs["char"], tail_silence=0.2)
    out = tmp_path / "onnx"
    result = export(str(exp), str(out))
    assert sorted(os.listdir(out)) == FILES
    args = json.loads((out / "sherpa-onnx.json").read_text())
    assert args == result["args"] == {"encoder": "encoder.onnx", "decoder": "decoder.onnx", "joiner": "joiner.onnx",
                                      "tokens": "tokens.txt", "sample_rate": 16000, "feature_dim": 80,
                                      "dither": 0.0, "decoding_method": "greedy_search",
                                      "modeling_unit": "cjkchar"}  # how it spells hotwords: characters
    assert json.loads((out / "decoding.json").read_text()) == {"tail_silence": 0.2, "unit_type": "char",
                                                               "encoder_frame_seconds": pytest.approx(0.06)}
    assert result["checkpoint"] == str(exp / "epoch-2.pt") and result["options"] == ExportOptions()
    assert set(result["checked"]) == {"encoder", "decoder", "joiner"}
    assert all(0 <= worst <= 1e-4 for worst in result["checked"].values())
    vocab = Tokenizer(str(langs["char"])).vocab_size
    for name in ("encoder", "decoder", "joiner"):
        assert metadata(out / f"{name}.onnx") == {"model_author": AUTHOR, "vocab_size": str(vocab),
                                                   "context_size": "2", "joiner_dim": "24", "sample_rate": "16000",
                                                   "feature_dim": "80", "checkpoint": "epoch-2.pt",
                                                   "tokens_sha256": tokens_digest((out / "tokens.txt").read_text()
                                                                                  .splitlines()),
                                                   **({"model_type": "conformer"} if name == "encoder" else {})}
    # loaded as sherpa-onnx's C++ tools and bindings load it, the kind of model read from the encoder (without
    # model_type there, the process exits: in a process of its own)
    load = ("import json, sherpa_onnx; args = json.load(open('sherpa-onnx.json')); "
            "sherpa_onnx.OfflineRecognizer.from_transducer(**args, model_type=''); print('loaded')")
    loaded = subprocess.run([sys.executable, "-c", load], cwd=out, capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0 and loaded.stdout.strip() == "loaded", loaded.stderr[-2000:]
    assert io_shapes(out / "encoder.onnx") == {"x": ["N", "T", 80], "x_lens": ["N"],
                                               "encoder_out": ["N", "T_out", 24], "encoder_out_lens": ["N"]}
    assert io_shapes(out / "decoder.onnx") == {"y": ["N", 2], "decoder_out": ["N", 24]}
    assert io_shapes(out / "joiner.onnx") == {"encoder_out": ["N", 24], "decoder_out": ["N", 24],
                                              "logit": ["N", vocab]}
    assert (out / "tokens.txt").read_text(encoding="utf-8").splitlines() == tokens_txt(
        Tokenizer(str(langs["char"])))

    # sherpa-onnx loads the dir as written and decodes a real utterance as our greedy search does
    _, flac, _ = sorted(librispeech_utterances(test_data), key=lambda row: soundfile.info(row[1]).duration)[0]
    samples, rate = soundfile.read(flac, dtype="float32")
    monkeypatch.chdir(out)
    recognizer = sherpa_onnx.OfflineRecognizer.from_transducer(**args)
    stream = recognizer.create_stream()
    stream.accept_waveform(rate, samples)
    recognizer.decode_stream(stream)
    ids = {line.split()[0]: int(line.split()[1]) for line in tokens_txt(Tokenizer(str(langs["char"])))}
    theirs = [ids[piece.replace(" ", SPACE)] for piece in stream.result.tokens]
    _, model, _, _ = load_model(str(exp))
    stacked = stack_frames(fbank(torch.from_numpy(samples), rate, "sherpa_onnx"), 3, 3)
    with torch.no_grad():
        enc, lengths = model.encode(stacked[None], torch.tensor([stacked.shape[0]]))
    ours = greedy_search(model, enc, lengths)[0].tokens
    assert len(ours) > 5 and theirs == ours


def test_a_streaming_export_is_an_lstm_transducer_of_whole_chunks(tmp_path, langs, monkeypatch):
    """Without chunk_frames: 4 fbank frames rounded up to whole encoder frames, 6 (stacking 3 x StackTime
    2); the checkpoint asked for, not the default."""
    exp = make_experiment(tmp_path / "exp", langs["word"])
    out = tmp_path / "onnx"
    result = export(str(exp), str(out), checkpoint=str(exp / "epoch-1.pt"), options=ExportOptions(streaming=True))
    assert result["options"] == ExportOptions(streaming=True, chunk_frames=6)
    assert sorted(os.listdir(out)) == FILES
    args = json.loads((out / "sherpa-onnx.json").read_text())
    assert args == {"encoder": "encoder.onnx", "decoder": "decoder.onnx", "joiner": "joiner.onnx",
                    "tokens": "tokens.txt", "sample_rate": 16000, "feature_dim": 80, "dither": 0.0,
                    "decoding_method": "greedy_search", "model_type": "lstm", "low_freq": 20.0, "high_freq": -400.0,
                    "normalize_samples": True, "snip_edges": False, "temperature_scale": 1.0,
                    "rule1_min_trailing_silence": 1.6, "rule2_min_trailing_silence": 0.8}  # 2.4 and 1.2 s of 60 ms
    assert json.loads((out / "decoding.json").read_text()) == {"tail_silence": 0.0, "window_frames": 6,
                                                               "encoder_frame_seconds": pytest.approx(0.06),
                                                               "unit_type": "word"}
    meta = metadata(out / "encoder.onnx")
    assert {k: meta[k] for k in ("model_type", "T", "decode_chunk_len", "num_encoder_layers", "rnn_hidden_size",
                                 "d_model", "checkpoint")} == {
        "model_type": "lstm", "T": "6", "decode_chunk_len": "6", "num_encoder_layers": "2", "rnn_hidden_size": "32",
        "d_model": "32", "checkpoint": "epoch-1.pt"}
    assert metadata(out / "decoder.onnx")["checkpoint"] == "epoch-1.pt"
    shapes = io_shapes(out / "encoder.onnx")  # a window of T frames, h and c of (layers, N, hidden)
    assert {k: shapes[k] for k in ("x", "h", "c", "next_h", "next_c")} == {
        "x": ["N", 6, 80], "h": [2, "N", 32], "c": [2, "N", 32], "next_h": [2, "N", 32], "next_c": [2, "N", 32]}
    assert shapes["encoder_out"][0] == "N" and shapes["encoder_out"][2] == 24
    monkeypatch.chdir(out)
    assert isinstance(streamed_silence(args), str)
    # its endpoint rules as written: 1.2 s of audio after the last word, where sherpa-onnx counts a blank as 40 ms
    # (at 60 ms a frame, 1.8 s). With no word at all the same rule ends it (of a model whose blank always wins):
    # sherpa-onnx takes an utterance longer than its counted silence for one with a word, and only a model of
    # 40 ms frames has rule 1's 2.4 s there
    state = checkpoint.load(str(exp / "epoch-1.pt"))
    state["model"]["joiner.output.bias"][0] = 1000.0
    checkpoint.save(str(exp / "epoch-1.pt"), state)
    export(str(exp), str(out), checkpoint=str(exp / "epoch-1.pt"), options=ExportOptions(streaming=True))
    transcript, seconds = silence_to_an_endpoint(args)
    assert transcript == "" and 1.2 <= seconds <= 1.2 + 0.1 + 0.06 * 6


def test_a_streaming_export_of_frames_under_40_ms_ends_an_utterance_after_1_2_s_too(tmp_path, langs, monkeypatch):
    """20 ms frames (no subsampling, the LSTM's StackTime 2): sherpa-onnx counts each trailing blank as 40 ms, twice
    the silence there is, and its rule 2 holds only while the utterance is longer than that count: after under
    1.2 s of speech it never held, and the utterance ended at rule 1's 2.4 s. Rule 1 takes rule 2's silence: in
    sherpa-onnx, silence alone ends at 1.2 s, as over 40 ms a frame."""
    exp = make_experiment(tmp_path / "exp", langs["word"], encoder={"input_dim": 80}, stack=1, subsample=1)
    out = tmp_path / "onnx"
    export(str(exp), str(out), options=ExportOptions(streaming=True))
    args = json.loads((out / "sherpa-onnx.json").read_text())
    assert json.loads((out / "decoding.json").read_text())["encoder_frame_seconds"] == pytest.approx(0.02)
    assert (args["rule1_min_trailing_silence"], args["rule2_min_trailing_silence"]) == (2.4, 2.4)
    state = checkpoint.load(str(exp / "epoch-2.pt"))
    state["model"]["joiner.output.bias"][0] = 1000.0  # the blank always wins
    checkpoint.save(str(exp / "epoch-2.pt"), state)
    export(str(exp), str(out), options=ExportOptions(streaming=True))
    monkeypatch.chdir(out)
    transcript, seconds = silence_to_an_endpoint(args)
    assert transcript == "" and 1.2 <= seconds <= 1.2 + 0.1 + 0.02 * 8


def test_a_streaming_conformer_export_is_sherpa_onnxs_conformer_transducer(tmp_path, langs, monkeypatch):
    """sherpa-onnx's streaming Conformer: its metadata, the attention cache (layers, left_context, N, dim: the keys,
    then the values, of the 6 frames before a chunk) and the convolution cache (layers, kernel - 1, N, dim) it
    starts as zeros, processed_frames (N,); a window of one attention chunk (2 encoder frames of 12 fbank frames)
    and the conv front end's overlap (3 stacked frames)."""
    exp = make_experiment(tmp_path / "exp", langs["char"], encoder={**CONFORMER, "chunk_frames": 2, "left_chunks": 3})
    out = tmp_path / "onnx"
    result = export(str(exp), str(out), options=ExportOptions(streaming=True))
    assert result["options"] == ExportOptions(streaming=True, chunk_frames=24)
    meta = metadata(out / "encoder.onnx")
    assert {k: meta[k] for k in ("model_type", "T", "decode_chunk_len", "num_encoder_layers", "left_context",
                                 "encoder_dim", "cnn_module_kernel", "pad_length")} == {
        "model_type": "conformer", "T": "33", "decode_chunk_len": "24", "num_encoder_layers": "1",
        "left_context": "12", "encoder_dim": "16", "cnn_module_kernel": "7", "pad_length": "9"}
    shapes = io_shapes(out / "encoder.onnx")
    assert {k: shapes[k] for k in ("x", "attn_cache", "cnn_cache", "processed_frames")} == {
        "x": ["N", 33, 80], "attn_cache": [1, 12, "N", 16], "cnn_cache": [1, 6, "N", 16], "processed_frames": ["N"]}
    # the next caches' frames are a slice the graph computes (the export checked them, 12 and 6, in onnxruntime)
    assert [[shapes[k][0], *shapes[k][2:]] for k in ("next_attn_cache", "next_cnn_cache")] == [[1, "N", 16]] * 2
    args = json.loads((out / "sherpa-onnx.json").read_text())
    assert args["model_type"] == "conformer"
    # after an endpoint sherpa-onnx counts processed_frames from 0 and keeps the caches: a window then is a new
    # stream's, whatever the caches hold (the convolution's was read as the last utterance's frames)
    import onnxruntime

    session = onnxruntime.InferenceSession(str(out / "encoder.onnx"))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 33, 80), dtype=np.float32)
    caches = {"attn_cache": rng.standard_normal((1, 12, 1, 16), dtype=np.float32),
              "cnn_cache": rng.standard_normal((1, 6, 1, 16), dtype=np.float32)}
    zeros = {name: np.zeros_like(cache) for name, cache in caches.items()}

    def encoded(state, processed):
        return session.run(["encoder_out"], {"x": x, **state, "processed_frames": np.array([processed])})[0]
    np.testing.assert_array_equal(encoded(caches, 0), encoded(zeros, 0))
    assert not np.allclose(encoded(caches, 24), encoded(zeros, 24))
    monkeypatch.chdir(out)
    assert isinstance(streamed_silence(args), str)


def test_a_refused_model_is_not_exported_and_nothing_is_written(tmp_path, langs):
    exp = make_experiment(tmp_path / "exp", langs["phone"], features="kaldi")
    with pytest.raises(NotExportable) as refused:
        export(str(exp), str(tmp_path / "onnx"), options=ExportOptions(streaming=True, chunk_frames=5))
    message = str(refused.value)
    assert message.startswith(f"{exp}: cannot export for sherpa-onnx:\n  phone units")
    assert "\n  data.features.preset is kaldi" in message and "\n  --chunk-frames 5 is not a multiple of 6" in message
    assert not (tmp_path / "onnx").exists()


# --- the checks and int8 -------------------------------------------------------------------------------

def test_the_onnxruntime_check_catches_a_graph_that_is_not_its_module(tmp_path):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    path = str(tmp_path / "net.onnx")
    _export(module, (torch.randn(1, 8),), path, ["x"], ["y"], {"x": {0: "N"}, "y": {0: "N"}}, {"vocab_size": 4})
    assert metadata(path) == {"model_author": AUTHOR, "vocab_size": "4"}
    cases = [{"x": torch.randn(5, 8)}, {"x": torch.randn(2, 8)}]
    assert _verify(module, path, cases) <= 1e-6
    changed = torch.nn.Sequential(*module)
    changed[2] = torch.nn.Linear(16, 4)
    with pytest.raises(RuntimeError, match=r"net\.onnx: onnxruntime differs from PyTorch by .* \(> 0\.0001\)"):
        _verify(changed, path, cases)
    wider = torch.nn.Sequential(module[0], module[1], torch.nn.Linear(16, 5))
    with pytest.raises(RuntimeError, match=r"onnxruntime gives shape \(5, 4\), PyTorch \(5, 5\)"):
        _verify(wider, path, cases)


def test_int8_quantises_the_matrix_products_beside_the_float_graph(tmp_path):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 64))
    path = str(tmp_path / "joiner.onnx")
    _export(module, (torch.randn(1, 64),), path, ["x"], ["y"], {"x": {0: "N"}, "y": {0: "N"}}, {})
    quantised = _quantize(path)
    assert quantised == str(tmp_path / "joiner.int8.onnx") and os.path.isfile(path)
    ops = {node.op_type for node in onnx.load(quantised).graph.node}
    assert "MatMulInteger" in ops and "MatMul" not in ops and "Gemm" not in ops
    assert os.path.getsize(quantised) < os.path.getsize(path) / 3
    # close to the float module, not equal to it
    assert 1e-6 < _verify(module, quantised, [{"x": torch.randn(4, 64)}], tolerance=0.1) < 0.1


def test_a_broken_export_dir_is_named_by_its_file(tmp_path):
    from rnnt.export.runtime import load_recognizer, tail_seconds

    (tmp_path / "sherpa-onnx.json").write_text('{"encoder":\n')
    with pytest.raises(ValueError, match=rf"{tmp_path}/sherpa-onnx.json:2:1: not valid JSON"):
        load_recognizer(str(tmp_path), 1)
    (tmp_path / "sherpa-onnx.json").write_text('{"encoder": "encoder.onnx"}')
    with pytest.raises(ValueError, match=rf"{tmp_path}/sherpa-onnx.json: no decoder, joiner, tokens, sample_rate"):
        load_recognizer(str(tmp_path), 1)
    (tmp_path / "sherpa-onnx.json").write_text(json.dumps({"encoder": "e.onnx", "decoder": "d.onnx", "joiner": "j.onnx",
                                                           "tokens": "tokens.txt", "sample_rate": 16000}))
    for name in ("e.onnx", "d.onnx", "tokens.txt"):
        (tmp_path / name).write_text("")
    with pytest.raises(ValueError, match=rf"^{tmp_path}/j.onnx: no such file \({tmp_path}/sherpa-onnx.json names it "
                                         r"as the joiner\)"):  # sherpa-onnx's own: an AssertionError traceback
        load_recognizer(str(tmp_path), 1)
    (tmp_path / "decoding.json").write_text("[0.5]")
    with pytest.raises(ValueError, match=rf"{tmp_path}/decoding.json: expected a JSON object"):
        tail_seconds(str(tmp_path), False)


def test_an_export_dir_whose_tokens_or_rate_are_not_its_graphs_is_refused(tmp_path, langs):
    """A tokens.txt short of a unit crashed sherpa-onnx mid-decoding (_Map_base::at); a sample_rate edited in
    sherpa-onnx.json decoded every utterance at the wrong rate, 99% WER in silence; an offline export's encoder
    copied into a streaming export aborted the process in sherpa-onnx's C++."""
    from rnnt.export.runtime import load_recognizer

    exp = make_experiment(tmp_path / "exp", langs["word"])
    out = tmp_path / "onnx"
    export(str(exp), str(out))
    assert load_recognizer(str(out), 1)[2] == 16000
    tokens = (out / "tokens.txt").read_text().splitlines()
    (out / "tokens.txt").write_text("\n".join(tokens[:-1]) + "\n")
    with pytest.raises(ValueError, match=f"^{out / 'tokens.txt'}: {len(tokens) - 1} units, but the model has "
                                         f"{len(tokens)}; export it again"):
        load_recognizer(str(out), 1)
    swapped = [f"{tokens[3].split()[0]} 2", f"{tokens[2].split()[0]} 3"]  # two words' ids swapped: all spelt wrong
    (out / "tokens.txt").write_text("\r\n".join(tokens[:2] + swapped + tokens[4:]) + "\r\n")
    with pytest.raises(ValueError, match=f"^{out / 'tokens.txt'}: not the units the model was exported with "
                                         r"\(another build's, or ids changed since\); export it again"):
        load_recognizer(str(out), 1)
    (out / "tokens.txt").write_text("\r\n".join(tokens).replace(" ", "\t") + "\r\n")  # an editor's: the same
    assert load_recognizer(str(out), 1)[2] == 16000
    (out / "tokens.txt").write_text("\n".join(tokens) + "\n")
    stream = tmp_path / "stream"
    export(str(exp), str(stream), options=ExportOptions(streaming=True))
    offline_encoder = (out / "encoder.onnx").read_bytes()
    (out / "encoder.onnx").write_bytes((stream / "encoder.onnx").read_bytes())
    (stream / "encoder.onnx").write_bytes(offline_encoder)
    for where, kind, into in ((stream, "an offline", "a streaming"), (out, "a streaming", "an offline")):
        with pytest.raises(ValueError, match=f"^{where / 'encoder.onnx'}: {kind} export's encoder, in {into} export "
                                             f"\\({where / 'sherpa-onnx.json'}\\); copy the export dir whole"):
            load_recognizer(str(where), 1)
    (out / "encoder.onnx").write_bytes(offline_encoder)
    args = json.loads((out / "sherpa-onnx.json").read_text())
    (out / "sherpa-onnx.json").write_text(json.dumps({**args, "sample_rate": 8000}))
    with pytest.raises(ValueError, match=f"^{out / 'sherpa-onnx.json'}: sample_rate 8000, but the model was "
                                         "exported at 16000 Hz"):
        load_recognizer(str(out), 1)
    (out / "sherpa-onnx.json").write_text(json.dumps(args))
    (out / "decoder.onnx").write_bytes((out / "decoder.onnx").read_bytes()[:100])
    with pytest.raises(ValueError, match=f"^{out / 'decoder.onnx'}: not an ONNX graph"):
        load_recognizer(str(out), 1)


def test_sherpa_onnx_token_times_become_words_in_the_exports_own_frames():
    """sherpa-onnx times a token as its encoder frame x 40 ms; an export whose frames are 60 ms gets its words
    from frame index x 60 ms, a word ending a frame after its last unit and never after the audio: BPE pieces
    (a leading space starts a word), characters (a space alone only ends one) and words."""
    from rnnt.export.runtime import Recognised, words_with_times

    def stamps(frames):
        return [f * 0.04 * (1 + 1e-7) for f in frames]  # float32 times, as sherpa-onnx gives them

    bpe = Recognised(" HELLO THERE", [" HE", "LLO", " THE", "RE"], stamps([2, 3, 10, 12]))
    assert words_with_times(bpe, 0.06, 5.0) == [{"word": "HELLO", "start": 0.12, "end": 0.24},
                                                 {"word": "THERE", "start": 0.6, "end": 0.78}]
    chars = Recognised("AB C", ["A", "B", " ", "C"], stamps([1, 2, 3, 40]))
    assert words_with_times(chars, 0.06, 2.41) == [{"word": "AB", "start": 0.06, "end": 0.18},
                                                   {"word": "C", "start": 2.4, "end": 2.41}]
    past = Recognised("AB C", ["A", "B", " ", "C"], stamps([1, 2, 3, 50]))  # C emitted whole in the tail silence
    assert words_with_times(past, 0.06, 2.41)[1] == {"word": "C", "start": 2.4, "end": 2.41}  # the last frame's
    words = Recognised(" YES NO", [" YES", " NO"], stamps([5, 9]))
    assert [w["word"] for w in words_with_times(words, 0.03, 1.0)] == ["YES", "NO"]
    assert words_with_times(Recognised("", [], []), 0.06, 1.0) == []
    # BPE spells a word whose first letter has no piece of its own with the mark alone: the word starts there,
    # as ours does (it started at the letter, a frame or more late); a mark alone at the end spells nothing
    lone = Recognised("HE RE", [" HE", " ", "R", "E", " "], stamps([2, 10, 14, 15, 20]))
    assert words_with_times(lone, 0.06, 5.0, boundary_is_a_unit=False) == [
        {"word": "HE", "start": 0.12, "end": 0.18}, {"word": "RE", "start": 0.6, "end": 0.96}]


def test_the_runners_text_is_its_tokens_joined():
    """sherpa-onnx's own text takes out the space before a word that begins with an apostrophe ("IS 'D" came out
    "IS'D"): the WER and the count of transcripts identical to ours counted a difference in the tokens' spelling
    where the tokens were the same."""
    from types import SimpleNamespace

    from rnnt.export.runtime import recognise

    result = SimpleNamespace(text="IS'D", tokens=["I", "S", " ", "'", "D"], timestamps=[0.0, 0.04, 0.08, 0.12, 0.16])
    stream = SimpleNamespace(accept_waveform=lambda rate, samples: None, result=result)
    recognizer = SimpleNamespace(create_stream=lambda: stream, decode_stream=lambda s: None)
    recognised = recognise(recognizer, False, np.zeros(1600, dtype=np.float32), 16000, 0.1, 0.0)
    assert recognised.text == "IS 'D" and recognised.tokens == result.tokens
