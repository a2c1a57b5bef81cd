"""Deployment: ONNX export run in the real sherpa-onnx on real AN4 audio, streaming in Python, and long
recordings (streamed, or in segments).

The models are untrained (seeded): their outputs are arbitrary but fixed, so any difference between
sherpa-onnx and our greedy search, or between a stream and the whole utterance, shows in the tokens.
A trained model is exported and decoded in sherpa-onnx end to end by tests/egs/test_an4_recipe.py.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
import sherpa_onnx
import soundfile
import torch
import yaml

from conftest import PYTHON, ROOT, run_tool
from rnnt.attention_chunks import AttentionChunks, attend_in
from rnnt.data.features import fbank
from rnnt.data.stacking import stack_frames
from rnnt.data.tokenizer import Tokenizer
from rnnt.model.transducer import Transducer
from rnnt.search import greedy_search
from rnnt.segmenting import segments
from rnnt.training import checkpoint
from rnnt.training.experiment import load_experiment, save_experiment
from rnnt.transcriber import Transcriber

STEPS = ROOT / "steps"


@pytest.fixture(scope="module")
def an4_test(test_data, tmp_path_factory):
    """The first 12 AN4 test utterances (path, transcript), and BPE, unigram, word and phone lang dirs built from
    all 130 test transcripts."""
    etc = test_data / "an4" / "etc"
    texts = [line.rsplit(" (", 1)[0].strip() for line in (etc / "an4_test.transcription").read_text().splitlines()]
    ids = (etc / "an4_test.fileids").read_text().split()
    root = tmp_path_factory.mktemp("an4_units")
    (root / "data").mkdir()
    (root / "data" / "text").write_text("".join(f"u{i:03d} {t}\n" for i, t in enumerate(texts)))
    langs = {}
    langs["phone"] = root / "lang_phone"
    assert run_tool(sys.executable, STEPS / "build_lexicon.py", root / "data", langs["phone"]).returncode == 0
    for kind, size in (("bpe", "40"), ("unigram", "40"), ("word", "0"), ("phone", "0")):
        langs[kind] = root / f"lang_{kind}"
        out = run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", kind, "--vocab-size", size,
                       root / "data", langs[kind])
        assert out.returncode == 0, out.stderr
    audio = [(str(test_data / "an4" / "wav" / f"{i}.flac"), t) for i, t in zip(ids[:12], texts[:12])]
    return audio, langs


def make_experiment(path, lang, encoder=None, predictor=None, features="sherpa_onnx", loss=None, tail_silence=0.0,
                    stack=3, cmvn=None):
    """An experiment dir holding an untrained (seeded) model; its input batch norm is given statistics
    near those of log-mel energies, so that the LSTMs see inputs of a realistic scale. Its <unk> never
    wins: sherpa-onnx's greedy search takes a winning <unk> for no symbol, ours emits it (a trained
    model does not: no training transcript has it)."""
    path.mkdir(parents=True)
    lstm = {"input_dim": 240, "hidden": 64, "pre_layers": 1, "post_layers": 1, "stack_time": 2,
            "input_batch_norm": True, "norm": "layer"}
    encoder = encoder if (encoder or {}).get("kind") == "conformer" else {**lstm, **(encoder or {})}
    values = {"model": {"encoder": encoder,
                        "predictor": {"kind": "stateless", "embed_dim": 32, "context": 2, **(predictor or {})},
                        "joiner": {"hidden": 48, "activation": "tanh"},
                        "loss": {"type": "full", "one_sym_per_frame": True, **(loss or {})}},
              "data": {"features": {"preset": features, "num_mel_bins": 80, "cmvn": cmvn}, "stack": stack,
                       "subsample": stack,
                       "tail_silence": tail_silence},
              "paths": {"lang_dir": str(lang)}}
    (path / "input.yaml").write_text(yaml.safe_dump(values))
    experiment = load_experiment(str(path / "input.yaml"))
    save_experiment(experiment, str(path / "config.yaml"))
    torch.manual_seed(3)
    model = Transducer(experiment.model, Tokenizer(str(lang)).vocab_size)
    if model.encoder.input_norm is not None:
        model.encoder.input_norm.running_mean.uniform_(-8.0, 0.0)
        model.encoder.input_norm.running_var.uniform_(4.0, 9.0)
    if model.joiner is not None:
        with torch.no_grad():
            model.joiner.output.bias[1] = -100.0
    checkpoint.save(str(path / "epoch-1.pt"), {"model": model.state_dict(), "meta": {"step": 1, "epoch": 1}})
    return path


def export(exp, out, *options):
    result = run_tool(sys.executable, STEPS / "export_onnx.py", *options, exp, out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "onnxruntime matches PyTorch within" in result.stdout
    return result


def recognizer(onnx_dir, monkeypatch):
    """sherpa-onnx's recognizer from sherpa-onnx.json exactly as written (paths relative to the dir)."""
    args = json.loads((onnx_dir / "sherpa-onnx.json").read_text())
    monkeypatch.chdir(onnx_dir)
    kind = sherpa_onnx.OnlineRecognizer if "model_type" in args else sherpa_onnx.OfflineRecognizer
    return kind.from_transducer(**args)


def token_ids(onnx_dir, pieces: list[str]) -> list[int]:
    """sherpa-onnx's result tokens (pieces, the word-start mark shown as a space) as unit ids."""
    ids = {}
    for line in (onnx_dir / "tokens.txt").read_text(encoding="utf-8").splitlines():
        symbol, index = line.split()
        ids[symbol.replace("\u2581", " ")] = int(index)
    return [ids[piece] for piece in pieces]


def our_greedy(transcriber, feats: torch.Tensor):
    """Our greedy search's hypothesis: its tokens, and their posteriors (rnnt.confidence)."""
    data = transcriber.experiment.data
    stacked = stack_frames(feats, data.stack, data.subsample)
    with torch.no_grad():
        enc, lengths = transcriber.model.encode(stacked[None], torch.tensor([stacked.shape[0]]))
    return greedy_search(transcriber.model, enc, lengths)[0]


def assert_sherpa_onnx_gives(onnx_dir, tokens: list[str], log_probs: list[float], ours, path) -> None:
    """sherpa-onnx's result tokens are our hypothesis's, and the log-probabilities it gives them our posteriors'
    (the confidences of its words)."""
    assert token_ids(onnx_dir, tokens) == ours.tokens, path
    assert np.exp(log_probs).tolist() == pytest.approx(ours.unit_posteriors, abs=1e-4), path


# A Conformer (rnnt.model.conformer) over stacked frames: offline only, as sherpa-onnx runs any encoder graph.
CONFORMER = {"kind": "conformer", "input_dim": 240, "input_batch_norm": True, "conv_channels": 4, "dim": 32,
             "layers": 2, "heads": 2, "kernel_size": 7}


# A streaming Conformer over stacked frames: attention in chunks of 2 encoder frames (24 fbank frames: stacking 3
# x the conv front end's 4), 2 chunks of left context, a causal depthwise convolution.
STREAMING_CONFORMER = {**CONFORMER, "chunk_frames": 2, "left_chunks": 2}


@pytest.mark.parametrize("units,encoder", [("bpe", {}), ("word", {}), ("bpe", {"bidirectional": True}),
                                           ("bpe", CONFORMER), ("bpe", STREAMING_CONFORMER)])
def test_offline_export_decodes_in_sherpa_onnx_as_our_greedy_search(an4_test, tmp_path, monkeypatch, units, encoder):
    audio, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs[units], encoder=encoder)
    export(exp, tmp_path / "onnx")
    decoder_meta = {p.key: p.value for p in onnx.load(str(tmp_path / "onnx" / "decoder.onnx")).metadata_props}
    vocab_size = Tokenizer(str(langs[units])).vocab_size
    assert decoder_meta["context_size"] == "2" and decoder_meta["vocab_size"] == str(vocab_size)
    transcriber = Transcriber.from_exp_dir(str(exp))
    offline = recognizer(tmp_path / "onnx", monkeypatch)
    for path, _ in audio:
        samples, rate = soundfile.read(path, dtype="float32")
        stream = offline.create_stream()
        stream.accept_waveform(rate, samples)
        offline.decode_stream(stream)
        ours = transcriber.transcribe((torch.from_numpy(samples), rate))
        assert_sherpa_onnx_gives(tmp_path / "onnx", stream.result.tokens, stream.result.ys_log_probs,
                                 our_greedy(transcriber, fbank(torch.from_numpy(samples), rate, "sherpa_onnx")), path)
        assert " ".join(stream.result.text.split()) == ours.text, path


# A conv front end (DeepSpeech 2's, unidirectional) on unstacked fbank frames: 4 frames an encoder frame,
# each chunk reading the 3 frames before it again; its LSTMs all before StackTime, as in DeepSpeech 2.
CONV = {"input_dim": 80, "conv_channels": 8, "conv_layers": 2, "stack_time": 1, "pre_layers": 2, "post_layers": 0}


@pytest.mark.parametrize("encoder,stack,chunk,window", [({}, 3, 6, 6), (CONV, 1, 4, 7),
                                                        (STREAMING_CONFORMER, 3, 24, 33)])
def test_streaming_export_chunk_defaults_to_whole_encoder_frames_of_at_least_40_ms(an4_test, tmp_path, encoder,
                                                                                  stack, chunk, window):
    """Without --chunk-frames: 6 fbank frames for stacking 3 x StackTime 2, 4 for the conv front end's
    two strides of 2 (which reads 3 frames of the chunk before again), a streaming Conformer's attention chunk
    (which reads 9 again: 3 stacked frames). A model without a tail_silence is told of it."""
    _, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs["bpe"], encoder=encoder, stack=stack)
    result = export(exp, tmp_path / "onnx", "--streaming")
    meta = {p.key: p.value for p in onnx.load(str(tmp_path / "onnx" / "encoder.onnx")).metadata_props}
    assert (meta["decode_chunk_len"], meta["T"]) == (str(chunk), str(window))
    # its end in sherpa-onnx gets silence ours never does (a stream is fed at least 0.5 s)
    assert "the model's data.tail_silence is 0: a stream's end in sherpa-onnx" in result.stderr


@pytest.mark.parametrize("encoder,stack,chunk,window,kind,attention", [
    ({}, 3, 12, 12, "lstm", AttentionChunks()), pytest.param(CONV, 1, 12, 15, "lstm", AttentionChunks(),
                                                             marks=pytest.mark.slow),
    (STREAMING_CONFORMER, 3, 24, 33, "conformer", AttentionChunks()),
    (STREAMING_CONFORMER, 3, 12, 21, "conformer", AttentionChunks(1, 3))])
def test_streaming_export_decodes_in_sherpa_onnx_as_our_greedy_search(an4_test, tmp_path, monkeypatch, encoder,
                                                                        stack, chunk, window, kind, attention):
    """sherpa-onnx fed 0.1 s chunks encodes a window of T frames once more frames than that are there,
    then moves on by decode_chunk_len: its tokens are our greedy search's over the frames it encoded, exactly.
    Its streaming Conformer holds the attention and convolution caches of three streams' windows before, and
    of the stream's start (processed_frames 0) on; exported at other attention chunks than its config's
    (--attention-chunk, --left-chunks), it gives our search's at those."""
    audio, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs["bpe"], encoder=encoder, stack=stack)
    chunks = [] if attention.frames is None else ["--attention-chunk", str(attention.frames), "--left-chunks",
                                                  str(attention.left)]
    export(exp, tmp_path / "onnx", "--streaming", "--chunk-frames", str(chunk), *chunks)
    meta = {p.key: p.value for p in onnx.load(str(tmp_path / "onnx" / "encoder.onnx")).metadata_props}
    assert (meta["model_type"], meta["T"], meta["decode_chunk_len"], meta["num_encoder_layers"]) == (
        kind, str(window), str(chunk), "2")
    if kind == "conformer":  # the keys and values of the frames a chunk attends to before it, and its chunks
        assert (meta["left_context"], meta.get("attention_chunks")) == (
            ("8", None) if not chunks else (str(2 * attention.frames * attention.left), attention.name))
    overlap = window - chunk
    assert json.loads((tmp_path / "onnx" / "decoding.json").read_text())["window_frames"] == window
    transcriber = Transcriber.from_exp_dir(str(exp))
    attend_in(transcriber.model, attention)
    online = recognizer(tmp_path / "onnx", monkeypatch)
    for path, _ in audio:
        samples, rate = soundfile.read(path, dtype="float32")
        samples = np.concatenate([samples, np.zeros(rate // 2, dtype=np.float32)])
        stream = online.create_stream()
        for start in range(0, len(samples), rate // 10):
            stream.accept_waveform(rate, samples[start:start + rate // 10])
            while online.is_ready(stream):
                online.decode_stream(stream)
        stream.input_finished()
        while online.is_ready(stream):
            online.decode_stream(stream)
        feats = fbank(torch.from_numpy(samples), rate, "sherpa_onnx")
        encoded = (feats.shape[0] - 1 - overlap) // chunk * chunk + overlap
        result = online.get_result_all(stream)  # its log-probabilities at the export's temperature_scale 1
        assert_sherpa_onnx_gives(tmp_path / "onnx", result.tokens, result.ys_probs, our_greedy(transcriber,
                                                                                               feats[:encoded]), path)


def test_an_export_that_fails_its_check_leaves_the_earlier_export_as_it_was(an4_test, tmp_path, monkeypatch):
    """A graph onnxruntime ran otherwise than PyTorch was a RuntimeError's traceback, its encoder.onnx written over
    the earlier export's beside that export's other files (a mixed folder sherpa-onnx then ran, exit 0)."""
    import importlib.util

    _, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs["bpe"])
    export(exp, tmp_path / "onnx")
    before = {path.name: path.read_bytes() for path in (tmp_path / "onnx").iterdir()}
    spec = importlib.util.spec_from_file_location("export_onnx_tool", STEPS / "export_onnx.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)

    def failing(exp_dir, out_dir, checkpoint, options):
        os.makedirs(out_dir)
        (Path(out_dir) / "encoder.onnx").write_bytes(b"a graph that failed its check")
        raise RuntimeError(f"{out_dir}/encoder.onnx: onnxruntime differs from PyTorch by 1.68e-04 (> 0.0001)")

    monkeypatch.setattr(tool, "export", failing)
    monkeypatch.setattr(sys, "argv", ["export_onnx.py", str(exp), str(tmp_path / "onnx")])
    with pytest.raises(tool.ToolError, match="onnxruntime differs from PyTorch"):
        tool.main()
    assert {path.name: path.read_bytes() for path in (tmp_path / "onnx").iterdir()} == before
    assert not (tmp_path / "onnx.exporting").exists()


def test_the_tail_silence_goes_with_the_export(an4_test, tmp_path, monkeypatch):
    """data.tail_silence: our decoding appends it, the export writes it to decoding.json, and the runner
    feeds it to sherpa-onnx, so both decode the same samples and agree; the tail changes transcripts."""
    from rnnt.export.runtime import recognise, tail_seconds

    audio, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs["bpe"], tail_silence=0.3)
    export(exp, tmp_path / "onnx")
    decoding = json.loads((tmp_path / "onnx" / "decoding.json").read_text())
    assert decoding == {"tail_silence": 0.3, "encoder_frame_seconds": pytest.approx(0.06),  # 10 ms x 3 x 2
                        "unit_type": "bpe"}
    assert (tail_seconds(str(tmp_path / "onnx"), False), tail_seconds(str(tmp_path / "onnx"), True)) == (0.3, 0.5)
    # a stream's silence is the tail and the encoder's window of T frames, and one more: sherpa-onnx never
    # encodes the last 1 to T frames it is fed (with the larger of the two alone, it encoded 10 ms to 0.64 s)
    (tmp_path / "wide").mkdir()
    (tmp_path / "wide" / "decoding.json").write_text(json.dumps({"tail_silence": 0.3, "window_frames": 69}))
    assert (tail_seconds(str(tmp_path / "wide"), False), tail_seconds(str(tmp_path / "wide"), True)) == pytest.approx(
        (0.3, 1.0))
    # --tail-seconds replaces the model's silence, not the window a stream needs after it (--tail-seconds 0 left the
    # last 0.7 s of speech unencoded)
    assert (tail_seconds(str(tmp_path / "wide"), False, 0.0), tail_seconds(str(tmp_path / "wide"), True, 0.0)) == \
        pytest.approx((0.0, 0.7))
    for bad in ("abc", -5, None, 1e9):  # a float's ValueError that named no file; -5 taken as it was, 1e9 too
        (tmp_path / "wide" / "decoding.json").write_text(json.dumps({"tail_silence": bad}))
        with pytest.raises(ValueError, match="wide/decoding.json: tail_silence is seconds, 0 to 10, got "):
            tail_seconds(str(tmp_path / "wide"), False)
    (tmp_path / "one.list").write_text(json.dumps({"key": "a", "wav": str(audio[0][0]), "txt": "A"}) + "\n")
    (tmp_path / "taken").write_text("")  # the whole list was decoded before the traceback said so
    (tmp_path / "hotwords").write_text("A\n")
    for options in ([], ["--method", "modified_beam", "--hotwords", tmp_path / "hotwords"]):  # (with hotwords: an
        out = run_tool(sys.executable, STEPS / "decode_sherpa_onnx.py", *options, tmp_path / "onnx",  # Errno 17)
                       tmp_path / "one.list", tmp_path / "taken")
        assert out.returncode == 1 and f"{tmp_path / 'taken'}: exists and is not a folder" in out.stderr, out.stderr
    from rnnt.export.runtime import load_recognizer, recognizer_args

    with pytest.raises(ValueError, match=r"onnx/sherpa-onnx.json: .*unexpected keyword argument 'frobnicate'"):
        load_recognizer(str(tmp_path / "onnx"), 1, {**recognizer_args(str(tmp_path / "onnx")), "frobnicate": 1})
    transcriber = Transcriber.from_exp_dir(str(exp))
    offline, changed = recognizer(tmp_path / "onnx", monkeypatch), 0
    for path, _ in audio:
        samples, rate = soundfile.read(path, dtype="float32")
        ours = transcriber.transcribe((torch.from_numpy(samples), rate)).text
        assert " ".join(recognise(offline, False, samples, rate, 0.1, 0.3).text.split()) == ours, path
        changed += " ".join(recognise(offline, False, samples, rate, 0.1, 0.0).text.split()) != ours
    assert changed > 0
    # docs/deploy.md's application, as written, in the export dir: the tail fed, our transcript
    page = (ROOT / "docs" / "deploy.md").read_text()
    program = page.split("```python\n", 1)[1].split("```", 1)[0].replace('"a.wav"', repr(audio[0][0]))
    run = subprocess.run([sys.executable, "-c", program], cwd=tmp_path / "onnx", capture_output=True, text=True)
    samples, rate = soundfile.read(audio[0][0], dtype="float32")
    assert run.returncode == 0, run.stderr
    assert " ".join(run.stdout.split()) == transcriber.transcribe((torch.from_numpy(samples), rate)).text
    # a clip shorter than a frame gives frames with the tail after it: transcribed, streamed or not (--stream
    # refused it, the whole file not)
    soundfile.write(tmp_path / "short.wav", np.zeros(10, dtype=np.float32), 16000)
    whole, streamed = (run_tool(sys.executable, ROOT / "steps" / "transcribe.py", *how, exp, tmp_path / "short.wav")
                       for how in ([], ["--stream"]))
    assert whole.returncode == streamed.returncode == 0, whole.stderr + streamed.stderr
    assert whole.stdout == streamed.stdout.splitlines(keepends=True)[-1]


@pytest.mark.parametrize("encoder,stack", [({}, 3), (CONV, 1)])
def test_int8_export_runs_in_sherpa_onnx(an4_test, tmp_path, monkeypatch, encoder, stack):
    """The LSTMs' and matrix products' weights are int8 (a quarter of the size); a conv front end stays float."""
    audio, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs["bpe"], encoder={"hidden": 128, **encoder}, stack=stack)
    export(exp, tmp_path / "onnx", "--int8")
    ops = {node.op_type for node in onnx.load(str(tmp_path / "onnx" / "encoder.int8.onnx")).graph.node}
    assert "DynamicQuantizeLSTM" in ops and "LSTM" not in ops and "ConvInteger" not in ops
    assert ("Conv" in ops) == bool(encoder)
    args = json.loads((tmp_path / "onnx" / "sherpa-onnx.json").read_text())
    assert [args[k] for k in ("encoder", "decoder", "joiner")] == ["encoder.int8.onnx", "decoder.int8.onnx",
                                                                    "joiner.int8.onnx"]
    sizes = {name: (tmp_path / "onnx" / name).stat().st_size for name in ("encoder.int8.onnx", "encoder.onnx")}
    assert sizes["encoder.int8.onnx"] < sizes["encoder.onnx"] / 3
    offline = recognizer(tmp_path / "onnx", monkeypatch)
    samples, rate = soundfile.read(audio[0][0], dtype="float32")
    stream = offline.create_stream()
    stream.accept_waveform(rate, samples)
    offline.decode_stream(stream)
    assert stream.result.tokens  # an untrained model emits at every frame: the quantised graphs ran
    if not encoder:  # exported again without --int8: the earlier int8 graphs, the old model under the names people
        again = export(exp, tmp_path / "onnx")  # ship, stayed beside the new float ones
        int8 = [f"{graph}.int8.onnx" for graph in ("decoder", "encoder", "joiner")]
        assert f"removed from {tmp_path / 'onnx'} what an earlier export left that this one does not write: " \
            f"{' '.join(int8)}" in again.stderr, again.stderr
        assert not [name for name in int8 if (tmp_path / "onnx" / name).exists()]
        assert (tmp_path / "onnx" / "bpe.model").exists()  # written again: not taken for an earlier export's
        refused = run_tool(sys.executable, STEPS / "export_onnx.py", exp, tmp_path / "onnx" / "tokens.txt")
        assert (refused.returncode, refused.stderr) == (1, f"export_onnx.py: {tmp_path / 'onnx' / 'tokens.txt'}: "
                                                           "exists and is not a folder; give OUT_DIR a folder's name\n")


@pytest.mark.parametrize("lang,change,options,reason", [
    ("bpe", {"predictor": {"kind": "lstm", "hidden": 32, "layers": 1}}, [], "predictor.kind is lstm"),
    ("bpe", {"features": "kaldi"}, [], "data.features.preset is kaldi"),
    ("bpe", {"loss": {"type": "ctc", "one_sym_per_frame": False}}, [], "a CTC model"),
    ("bpe", {"encoder": {"bidirectional": True}}, ["--streaming"], "cannot stream"),
    ("bpe", {"encoder": CONFORMER}, ["--streaming"], "an offline Conformer (model.encoder.chunk_frames 0) attends"),
    ("bpe", {"encoder": STREAMING_CONFORMER}, ["--streaming", "--attention-chunk", "whole"],
     "a streaming Conformer run in whole utterances (--attention-chunk whole) attends to every frame"),
    ("bpe", {"encoder": CONFORMER}, ["--attention-chunk", "2"], "this is an offline Conformer"),
    ("bpe", {}, ["--left-chunks", "2"], "this is an encoder of kind lstm, which has none"),
    ("bpe", {}, ["--streaming", "--chunk-frames", "10"], "not a multiple of 6"),
    ("bpe", {"encoder": {"pre_layers": 0, "post_layers": 0}}, ["--streaming"], "the encoder has no LSTM layers"),
    ("phone", {}, [], "phone units"),
])
def test_export_refuses_what_sherpa_onnx_cannot_run(an4_test, tmp_path, lang, change, options, reason):
    _, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs[lang], **change)
    out = run_tool(sys.executable, STEPS / "export_onnx.py", *options, exp, tmp_path / "onnx")
    assert out.returncode == 1 and reason in out.stderr, out.stderr
    assert not (tmp_path / "onnx").exists()
    # known from the config and the unit type before any training (run.sh --deploy asks so)
    out = run_tool(sys.executable, STEPS / "export_onnx.py", "--check-config", exp / "input.yaml", "--unit-type",
                   lang, *options)
    assert out.returncode == 1 and reason in out.stderr, out.stderr


@pytest.mark.parametrize("streaming", [[], ["--streaming"]])
def test_the_recipes_deploy_configs_pass_the_check_and_their_default_configs_do_not(streaming):
    """conf/deploy.yaml of each recipe (and the AN4 test's short schedule) is what sherpa-onnx runs; the
    recipes' default transducers (the kaldi fbank preset; the template's LSTM prediction network) are not."""
    for config in ("egs/an4/conf/deploy.yaml", "egs/an4/conf/ci_from_ctc.yaml", "egs/TEMPLATE/conf/deploy.yaml",
                   "egs/speechocean762/conf/deploy.yaml", "egs/an4/conf/deploy_conformer.yaml"):
        out = run_tool(sys.executable, STEPS / "export_onnx.py", "--check-config", config, "--unit-type", "char",
                       *streaming)
        assert out.returncode == 0 and "exportable for sherpa-onnx" in out.stdout, out.stderr
    out = run_tool(sys.executable, STEPS / "export_onnx.py", "--check-config", "egs/an4/conf/deploy.yaml",
                   "--unit-type", "word", *streaming)  # word units (fsdd's) export as sherpa-onnx tokens
    assert out.returncode == 0 and "exportable for sherpa-onnx" in out.stdout, out.stderr
    for config, reason in (("egs/an4/conf/transducer_conv_pruned_from_ctc_20ep.yaml", "preset is kaldi"),
                           ("egs/TEMPLATE/conf/transducer.yaml", "predictor.kind is lstm")):
        out = run_tool(sys.executable, STEPS / "export_onnx.py", "--check-config", config, "--unit-type", "bpe",
                       *streaming)
        assert out.returncode == 1 and reason in out.stderr, out.stderr


def without_confidences(words: list[dict]) -> list[dict]:
    return [{key: value for key, value in word.items() if key != "confidence"} for word in words]


@pytest.mark.parametrize("tail_silence,encoder,stack", [
    (0.0, {}, 3), (0.3, {}, 3), pytest.param(0.3, CONV, 1, marks=pytest.mark.slow), (0.3, STREAMING_CONFORMER, 3),
    pytest.param(0.3, {**CONV, "input_dim": 240, "stack_time": 2}, 3, marks=pytest.mark.slow)])
def test_stream_gives_the_offline_result_chunk_by_chunk(an4_test, tmp_path, tail_silence, encoder, stack):
    """Transcriber.stream() fed chunks of random sizes: partial results only grow, and the final text
    and word times are those of transcribe() on the whole file (both followed by data.tail_silence)."""
    audio, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs["bpe"], encoder=encoder, features="kaldi",
                          tail_silence=tail_silence, stack=stack)
    transcriber = Transcriber.from_exp_dir(str(exp))
    generator = torch.Generator().manual_seed(0)
    for path, _ in audio[:6]:
        samples, rate = soundfile.read(path, dtype="float32")
        samples = torch.from_numpy(samples)
        stream, start, tokens = transcriber.stream(), 0, []
        while start < len(samples):
            size = int(torch.randint(50, 4000, (1,), generator=generator))
            stream.accept(samples[start:start + size])
            start += size
            assert stream.hypothesis.tokens[:len(tokens)] == tokens
            tokens = list(stream.hypothesis.tokens)
        final, offline = stream.finish(), transcriber.transcribe((samples, rate))
        assert final.final and (final.text, without_confidences(final.words)) == \
            (offline.text, without_confidences(offline.words)), path
        assert [w["confidence"] for w in final.words] == pytest.approx([w["confidence"] for w in offline.words],
                                                                       abs=2e-4)


def test_a_long_recording_streams_in_bounded_memory(an4_test, tmp_path):
    """Over a minute of speech (AN4 utterances end to end, twice) fed 0.1 s at a time: what the stream keeps
    stays under a chunk's worth, and the result, word times counted from the start, is the offline one."""
    audio, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs["bpe"])
    transcriber = Transcriber.from_exp_dir(str(exp))
    pieces = [torch.from_numpy(soundfile.read(path, dtype="float32")[0]) for path, _ in audio]
    long = torch.cat(pieces * 2)
    assert len(long) > 60 * 16000
    stream, kept = transcriber.stream(), 0
    for chunk in long.split(1600):
        stream.accept(chunk)
        kept = max(kept, stream.fbank.buffer.shape[0] + 160 * stream.pending.shape[0])
    final = stream.finish()
    assert kept < 2 * 1600
    assert final.words[-1]["end"] > 55 and (final.text, final.words) == (lambda t: (t.text, t.words))(
        transcriber.transcribe((long, 16000)))


def test_transcribe_streams_raw_pcm_from_stdin(an4_test, tmp_path):
    audio, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs["bpe"])
    path = audio[1][0]
    whole = run_tool(sys.executable, STEPS / "transcribe.py", exp, path)
    samples, _ = soundfile.read(path, dtype="int16")
    piped = subprocess.run([PYTHON, str(STEPS / "transcribe.py"), "--stream", "--chunk-seconds", "0.05",
                            str(exp), "-"], input=samples.tobytes(), capture_output=True, cwd=ROOT)
    piped.stdout, piped.stderr = piped.stdout.decode(), piped.stderr.decode()
    assert whole.returncode == 0 and piped.returncode == 0, piped.stderr
    lines = piped.stdout.splitlines()
    assert lines[-1] == "- " + whole.stdout.split(" ", 1)[1].rstrip("\n")
    assert any("[partial " in line for line in lines[:-1])
    refused = run_tool(sys.executable, STEPS / "transcribe.py", "--stream",
                       make_experiment(tmp_path / "bi", langs["bpe"], encoder={"bidirectional": True}), path)
    assert refused.returncode == 1 and "cannot stream" in refused.stderr
    # a file cut short crashed the tool, the files after it lost; an empty one streamed a transcript
    cut, empty = tmp_path / "cut.flac", tmp_path / "empty.wav"
    soundfile.write(cut, samples, 16000)
    cut.write_bytes(cut.read_bytes()[:5000])
    soundfile.write(empty, samples[:0], 16000)
    for options in (["--stream"], ["--segment-seconds", "2"]):
        out = run_tool(sys.executable, STEPS / "transcribe.py", *options, exp, cut, empty, path)
        assert out.returncode == 1 and out.stdout.splitlines()[-1].startswith(f"{path} "), out.stderr
        assert f"{cut}: cannot transcribe its audio (" in out.stderr and "1 of 3 files transcribed" in out.stderr
        assert f"{empty}: cannot transcribe its audio (no samples)" in out.stderr
    # a full disk under the transcripts: a traceback, or with --stream each file named as one whose audio failed
    for options in ([], ["--stream"], ["--segment-seconds", "2"]):
        with open("/dev/full", "w") as full:
            out = subprocess.run([PYTHON, str(STEPS / "transcribe.py"), *options, str(exp), path, path], stdout=full,
                                 stderr=subprocess.PIPE, text=True, cwd=ROOT)
        assert (out.returncode, out.stderr) == (1, "transcribe.py: cannot write the results to standard output: No "
                                                   "space left on device\n"), out.stderr


def test_transcribe_streams_a_wav_header_on_stdin_and_refuses_another_container(an4_test, tmp_path):
    """arecord writes WAV unless told -t raw: its 44-byte header was read as 22 loud samples; a FLAC piped in was
    decoded as noise, exit 0. A WAV stream is read past its header in its own format, as its file streams (another
    rate, 8 to 32-bit or float samples, several channels: refused before, arecord -f dat's among them); another
    container or coding is named."""
    audio, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs["bpe"])
    path = audio[1][0]
    samples, _ = soundfile.read(path, dtype="int16")

    def piped(data: bytes, *options: str):
        out = subprocess.run([PYTHON, str(STEPS / "transcribe.py"), "--stream", *options, str(exp), "-"], input=data,
                             capture_output=True, cwd=ROOT)
        return out.returncode, out.stdout.decode().splitlines(), out.stderr.decode()

    raw = piped(samples.tobytes())
    rows = [json.loads(line) for line in piped(samples.tobytes(), "--json")[1]]  # the last marked final, as a
    assert [row["final"] for row in rows] == [False] * (len(rows) - 1) + [True]  # consumer filtering on it reads
    tags = b"LIST" + (2000).to_bytes(4, "little") + b"INFO" + b"\x7f" * 1996  # a chunk after the data: 1000 loud
    stereo = np.stack([samples, samples // 2], axis=1)  # samples, where the data chunk's size was not read
    for name, data, rate, subtype in (("wav", samples, 16000, "PCM_16"), ("wav+tags", samples, 16000, "PCM_16"),
                                      ("8 kHz", samples[::2], 8000, "PCM_16"), ("dat", stereo, 48000, "PCM_16"),
                                      ("24-bit", stereo, 16000, "PCM_24"), ("float", samples, 22050, "FLOAT"),
                                      ("u8", samples, 16000, "PCM_U8"), ("32-bit", samples, 16000, "PCM_32"),
                                      ("flac", samples, 16000, "PCM_16"), ("mu-law", samples, 8000, "ULAW")):
        soundfile.write(tmp_path / "in.wav", data, rate, format="FLAC" if name == "flac" else "WAV", subtype=subtype)
        stream = (tmp_path / "in.wav").read_bytes()
        if name == "wav+tags":
            stream = stream[:4] + (len(stream) - 8 + len(tags)).to_bytes(4, "little") + stream[8:] + tags
        code, lines, err = piped(stream)
        if name == "flac":
            assert code == 1 and "-: cannot transcribe its audio (standard input holds a FLAC stream, not raw" in err
        elif name == "mu-law":
            assert code == 1 and "standard input is a WAV of coding 7, 8-bit, 1 channel(s) at 8000 Hz; --stream - " \
                                 "reads integer PCM of 8 to 32 bits or float samples" in err, err
        else:  # the final line of the same file streamed from its path; of the model's own PCM, the raw samples'
            from_file = run_tool(sys.executable, STEPS / "transcribe.py", "--stream", exp, tmp_path / "in.wav")
            text = lines[-1].partition(" ")[2] if lines else None
            assert code == 0 and text == from_file.stdout.splitlines()[-1].partition(" ")[2], (name, err)
            assert text == raw[1][-1].partition(" ")[2] or not name.startswith("wav")


def test_ctrl_c_on_a_live_stream_prints_the_transcript_so_far(an4_test, tmp_path):
    """Ctrl-C is how the arecord pipeline stops: it was a KeyboardInterrupt traceback, the final line never shown.
    The tool is started by the interpreter itself: the tests' fork server passes a signal on late under load, after
    the end of the audio (communicate closes stdin) and the final line, where a Ctrl-C was a traceback too."""
    audio, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs["bpe"])
    samples, _ = soundfile.read(audio[1][0], dtype="int16")
    # SIGINT as a terminal gives it: tests started in the background of a shell without job control (nohup ... &)
    # come with SIGINT ignored, and the transcriber then ran on to the end of its stream
    process = subprocess.Popen([sys.executable, str(STEPS / "transcribe.py"), "--stream", str(exp), "-"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    process.stdin.write(samples.tobytes())
    process.stdin.flush()  # the audio in, the pipe left open: a microphone's
    first = process.stdout.readline().decode()
    assert first.startswith("- [partial ")
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err.decode()
    last = out.decode().splitlines()[-1]
    assert last.startswith("- ") and "[partial " not in last and "[line " not in last
    assert b"Traceback" not in err


def decoded_by_both(exp, audio, tmp_path):
    """exp exported to tmp_path/onnx, a raw list of audio decoded by steps/decode.py (exp/decode-test-greedy) and by
    steps/decode_sherpa_onnx.py comparing with it (tmp_path/sherpa); the latter's run."""
    export(exp, tmp_path / "onnx")
    data_list = tmp_path / "test.list"
    data_list.write_text("".join(json.dumps({"key": f"utt{i}", "wav": p, "txt": t}) + "\n"
                                 for i, (p, t) in enumerate(audio)))
    ours = run_tool(sys.executable, STEPS / "decode.py", exp, data_list, "test")
    assert ours.returncode == 0, ours.stderr[-2000:]
    return run_tool(sys.executable, STEPS / "decode_sherpa_onnx.py", "--compare", exp / "decode-test-greedy",
                    tmp_path / "onnx", data_list, tmp_path / "sherpa")


def test_decoding_at_other_attention_chunks_is_decoding_a_model_configured_with_them(an4_test, tmp_path):
    """decode.py and transcribe.py --attention-chunk 1 --left-chunks 3 give what the same weights give under a
    config.yaml of those chunks, into a decode dir of their own, noting that a model trained in its chunks alone
    never learnt these; a model trained with dynamic chunks gets no such note. The config's own chunks are its
    plain results; a whole utterance's attention cannot stream."""
    audio, langs = an4_test
    data_list = tmp_path / "test.list"
    data_list.write_text("".join(json.dumps({"key": f"utt{i}", "wav": p, "txt": t}) + "\n"
                                 for i, (p, t) in enumerate(audio)))
    exp = make_experiment(tmp_path / "exp", langs["bpe"], encoder=STREAMING_CONFORMER)
    configured = make_experiment(tmp_path / "configured", langs["bpe"],
                                 encoder={**STREAMING_CONFORMER, "chunk_frames": 1, "left_chunks": 3})
    chunks = ["--attention-chunk", "1", "--left-chunks", "3"]
    for options, folder in ((chunks, "decode-test-greedy+chunk1-left3"), ([], "decode-test-greedy"),
                            (["--attention-chunk", "2", "--left-chunks", "2"], "decode-test-greedy")):
        out = run_tool(sys.executable, STEPS / "decode.py", *options, exp, data_list, "test")
        assert out.returncode == 0 and f"decode.py: {exp}/{folder}: %WER" in out.stdout, out.stderr[-2000:]
        assert ("outside what it learnt" in out.stderr) == (options == chunks), out.stderr
    assert run_tool(sys.executable, STEPS / "decode.py", configured, data_list, "test").returncode == 0
    hyps = {name: (folder / "hyp").read_text() for name, folder in (
        ("chunks", exp / "decode-test-greedy+chunk1-left3"), ("own", exp / "decode-test-greedy"),
        ("configured", configured / "decode-test-greedy"))}
    assert hyps["chunks"] == hyps["configured"] != hyps["own"]
    paths = [path for path, _ in audio[:3]]
    transcribed = [run_tool(sys.executable, STEPS / "transcribe.py", *options, where, *paths)
                   for options, where in (([], configured), (chunks, exp))]
    assert [out.returncode for out in transcribed] == [0, 0], transcribed[1].stderr[-2000:]
    assert transcribed[0].stdout == transcribed[1].stdout
    out = run_tool(sys.executable, STEPS / "transcribe.py", "--stream", "--attention-chunk", "whole", exp, paths[0])
    assert out.returncode == 1 and "--attention-chunk whole) attends to every frame" in out.stderr, out.stderr
    dynamic = make_experiment(tmp_path / "dynamic", langs["bpe"], encoder={**STREAMING_CONFORMER, "dynamic_chunks": 4})
    out = run_tool(sys.executable, STEPS / "decode.py", *chunks, dynamic, data_list, "test")
    assert out.returncode == 0 and "outside what it learnt" not in out.stderr, out.stderr


def recipe_stages(folder, script: str, **variables: str) -> subprocess.CompletedProcess:
    """`script` run in bash as a recipe's run.sh runs its stages (utils/stages.sh, decoding.sh and units.sh sourced,
    run.sh's `variables` set) in folder, a recipe folder of steps/ and data/."""
    (folder / "steps").symlink_to(STEPS)
    settings = " ".join(f"{name}={value}" for name, value in {"stage": "0", "stop_stage": "100", **variables}.items())
    sourced = "; ".join(f'. "{ROOT}/utils/{name}.sh"' for name in ("stages", "decoding", "units"))
    return subprocess.run(["bash", "-c", f"set -euo pipefail; {settings}; {sourced}\n{script}"], cwd=folder,
                          capture_output=True, text=True)


def test_run_sh_decodes_and_deploys_at_the_attention_chunks_asked(an4_test, tmp_path):
    """A recipe's --attention-chunk 1 --left-chunks 3 (utils/decoding.sh, as run.sh passes them): our search decodes
    in those chunks into decode-test-greedy+chunk1-left3-TAG, the streaming export is in them, and sherpa-onnx's
    decode of it (decode-test-sherpa_onnx_streaming+chunk1-left3-TAG) gives our transcripts at the same chunks;
    the config's own chunks are decoded apart and differ. --attention-chunk whole with --deploy streaming stops at
    run.sh's check, before any stage."""
    audio, langs = an4_test
    # the tail of silence a stream ends with, which sherpa-onnx gets from the export, appended by our search too
    make_experiment(tmp_path / "exp", langs["bpe"], encoder={**STREAMING_CONFORMER, "dynamic_chunks": 4},
                    tail_silence=0.5)
    (tmp_path / "data" / "test").mkdir(parents=True)
    (tmp_path / "data" / "test" / "data.list").write_text("".join(
        json.dumps({"key": f"utt{i}", "wav": p, "txt": t}) + "\n" for i, (p, t) in enumerate(audio)))
    (tmp_path / "data" / "test" / "text").write_text("".join(f"utt{i} {t}\n" for i, (_, t) in enumerate(audio)))
    out = recipe_stages(tmp_path, """attention=$(attention_of exp/config.yaml)
check_deployable bpe streaming exp/config.yaml "$attention"
decode_stages 6 exp epoch-1 unused greedy test "$attention"
deploy_stages 7 exp epoch-1 streaming test "$attention"
decode_stages 6 exp epoch-1 unused greedy test  # the config's chunks
echo '{"scale": 0.8, "offset": 0.3}' > exp/confidence_calibration.json  # calibrated since: the export carries it
export_stage 7 exp epoch-1 streaming "$attention"
for method in greedy sherpa_onnx_streaming; do decode_result "$method:" exp epoch-1 test "$method+$attention"; done
""", attention_chunk="1", left_chunks="3")
    assert out.returncode == 0, out.stderr[-3000:]
    exp = tmp_path / "exp"
    assert "stage 7 (export-streaming+chunk1-left3-epoch-1): its inputs changed" in out.stdout, out.stdout
    decoding = json.loads((exp / "onnx-streaming+chunk1-left3-epoch-1" / "decoding.json").read_text())
    assert decoding["confidence_calibration"] == {"scale": 0.8, "offset": 0.3}
    assert [line.split(" %WER")[0] for line in out.stdout.splitlines()[-2:]] == ["greedy:", "sherpa_onnx_streaming:"]
    hyps = {name: dict(line.split(" ", 1) for line in (exp / f"decode-test-{name}-epoch-1" / "hyp").read_text()
                       .splitlines())
            for name in ("greedy+chunk1-left3", "sherpa_onnx_streaming+chunk1-left3", "greedy")}
    ours, sherpa = hyps["greedy+chunk1-left3"], hyps["sherpa_onnx_streaming+chunk1-left3"]
    # sherpa-onnx encodes whole windows alone, so a stream is fed the tail and a window more (tail_seconds): its
    # encoder sees the whole tail and up to a window of silence after it, where this untrained model emits too
    assert all(sherpa[key].startswith(ours[key]) for key in ours)
    assert sum(hyps["greedy"][k] != ours[k] for k in ours) > len(ours) // 2  # the config's own chunks: others
    meta = {p.key: p.value for p in onnx.load(str(exp / "onnx-streaming+chunk1-left3-epoch-1" / "encoder.onnx"))
            .metadata_props}
    assert (meta["attention_chunks"], meta["left_context"]) == ("chunk1-left3", "6")
    whole = recipe_stages(tmp_path / "exp", """attention=$(attention_of config.yaml)
check_deployable bpe streaming config.yaml "$attention"
echo "not stopped"
""", attention_chunk="whole")
    assert whole.returncode == 1 and "not stopped" not in whole.stdout, whole.stdout
    assert "--attention-chunk whole) attends to every frame" in whole.stderr, whole.stderr


def test_a_model_with_cmvn_runs_in_sherpa_onnx_as_ours(an4_test, tmp_path):
    """data.features.cmvn goes into the exported graph (sherpa-onnx computes plain fbank): the export's own check
    compares the graph with the same front end, so only sherpa-onnx against our decoding shows it there."""
    audio, langs = an4_test
    stats = tmp_path / "cmvn.json"
    stats.write_text(json.dumps({"mean": [-9.0 + 0.1 * i for i in range(80)],
                                 "std": [1.5 + 0.05 * i for i in range(80)], "preset": "sherpa_onnx",
                                 "sample_rate": 16000}))
    exp = make_experiment(tmp_path / "exp", langs["bpe"], cmvn=str(stats))
    out = decoded_by_both(exp, audio, tmp_path)
    assert out.returncode == 0 and f"{len(audio)} of {len(audio)} transcripts identical" in out.stdout, out.stdout
    plain = Transcriber.from_exp_dir(str(make_experiment(tmp_path / "plain", langs["bpe"])))  # CMVN matters here
    assert any(plain.transcribe(path).text != Transcriber.from_exp_dir(str(exp)).transcribe(path).text
               for path, _ in audio)


def test_decode_sherpa_onnx_scores_a_list_as_decode_py(an4_test, tmp_path):
    """steps/decode_sherpa_onnx.py on a raw list: every utterance scored against the list's transcripts,
    and all of its transcripts identical to steps/decode.py's greedy ones; the words' confidences too, through the
    calibration the export carries from the experiment."""
    audio, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs["bpe"])
    (exp / "confidence_calibration.json").write_text('{"scale": 0.8, "offset": 0.3}\n')
    out = decoded_by_both(exp, audio, tmp_path)
    assert json.loads((tmp_path / "onnx" / "decoding.json").read_text())["confidence_calibration"] == \
        {"scale": 0.8, "offset": 0.3}
    assert out.returncode == 0, out.stderr[-2000:]
    words = sum(len(t.split()) for _, t in audio)
    assert f"/ {words}," in out.stdout and f"{len(audio)} of {len(audio)} transcripts identical" in out.stdout
    assert (tmp_path / "sherpa" / "wer").read_text() == (exp / "decode-test-greedy" / "wer").read_text()
    # utterances the other decode lacks are counted as such, not as identical (an empty transcript was), and a
    # decode of another set is refused
    hyp = exp / "decode-test-greedy" / "hyp"
    lines = hyp.read_text().splitlines()
    hyp.write_text("\n".join(lines[1:]) + "\n")
    again = run_tool(sys.executable, STEPS / "decode_sherpa_onnx.py", "--compare", hyp.parent, tmp_path / "onnx",
                     tmp_path / "test.list", tmp_path / "sherpa2")
    assert f"; {len(audio) - 1} of {len(audio) - 1} transcripts identical to {hyp.parent} (1 not in {hyp})" \
        in again.stdout, again.stdout
    hyp.write_text("".join(f"other{line}\n" for line in lines))
    again = run_tool(sys.executable, STEPS / "decode_sherpa_onnx.py", "--compare", hyp.parent, tmp_path / "onnx",
                     tmp_path / "test.list", tmp_path / "sherpa2")
    assert again.returncode == 1 and f"--compare {hyp.parent}: none of the {len(audio)} utterances decoded is in " \
        "its hyp (a decode of another set?)" in again.stderr, again.stderr
    # what the list holds that cannot be decoded is named under the tool's name (it was bare), in words for people
    # and a key listed again (with another utterance's audio) is left out and named, as decode.py does: the last
    # was decoded and scored against the first's reference
    bad = tmp_path / "bad.list"
    entries = [json.loads(line) for line in (tmp_path / "test.list").read_text().splitlines()]
    bad.write_text((tmp_path / "test.list").read_text() + "{not json\n"
                   + json.dumps({"key": "lost", "wav": str(tmp_path / "lost.wav"), "txt": "A"}) + "\n"
                   + json.dumps({**entries[1], "key": entries[0]["key"]}) + "\n")
    again = run_tool(sys.executable, STEPS / "decode_sherpa_onnx.py", tmp_path / "onnx", bad, tmp_path / "sherpa3")
    assert again.returncode == 0, again.stderr
    assert f"decode_sherpa_onnx.py: {bad}: 1 line skipped (named above), {len(audio) + 2} kept" in again.stderr
    assert f"decode_sherpa_onnx.py: skipped lost from {tmp_path / 'lost.wav'}: cannot decode audio (no such file)" \
        in again.stderr, again.stderr
    assert f"decode_sherpa_onnx.py: {bad}: {entries[0]['key']} is an utterance read before; left out" in again.stderr
    assert (tmp_path / "sherpa3" / "hyp").read_text() == (tmp_path / "sherpa" / "hyp").read_text()
    bad.write_text("")
    again = run_tool(sys.executable, STEPS / "decode_sherpa_onnx.py", tmp_path / "onnx", bad, tmp_path / "sherpa3")
    assert again.returncode == 1 and f"{bad} holds no utterance to decode" in again.stderr, again.stderr
    # and the words' times: sherpa-onnx's token times, taking this encoder's 60 ms frames for 40 ms, rescaled
    theirs, ours = ((path / "ctm").read_text().splitlines()
                    for path in (tmp_path / "sherpa", exp / "decode-test-greedy"))
    hyp_words = sum(len(line.split()) - 1 for line in (tmp_path / "sherpa" / "hyp").read_text().splitlines())
    assert len(theirs) == len(ours) == hyp_words > len(audio)
    # a word ending with the audio ends with the recording in both; sherpa-onnx's token log-probabilities give the
    # words' confidences ours give (float32 graphs: to the 4th decimal)
    assert [line.split()[:5] for line in theirs] == [line.split()[:5] for line in ours]
    assert [float(line.split()[5]) for line in theirs] == pytest.approx([float(line.split()[5]) for line in ours],
                                                                        abs=2e-4)
    calibrated_by = f"calibrated by {tmp_path / 'onnx'}/decoding.json\n"
    assert (tmp_path / "sherpa" / "confidence").read_text().endswith(calibrated_by)


def test_sherpa_onnx_favours_the_hotwords_of_an_export_in_its_modified_beam_search(an4_test, tmp_path):
    """decode_sherpa_onnx.py --method modified_beam runs sherpa-onnx's modified_beam_search, which gives our
    modified_beam's transcripts (but for the order it keeps candidates in); --hotwords FIVE makes this untrained
    model say FIVE more often there, through the bpe.vocab the export wrote for its unigram units; a phrase the
    units cannot spell is named and left out, and greedy search takes no hotwords."""
    audio, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs["unigram"])
    export(exp, tmp_path / "onnx")
    args = json.loads((tmp_path / "onnx" / "sherpa-onnx.json").read_text())
    assert args["modeling_unit"] == "bpe" and (tmp_path / "onnx" / args["bpe_vocab"]).is_file()
    data_list = tmp_path / "test.list"
    data_list.write_text("".join(json.dumps({"key": f"utt{i}", "wav": p, "txt": t}) + "\n"
                                 for i, (p, t) in enumerate(audio)))
    assert run_tool(sys.executable, STEPS / "decode.py", "--method", "modified_beam", exp, data_list,
                    "test").returncode == 0

    def sherpa(out: str, *options):
        result = run_tool(sys.executable, STEPS / "decode_sherpa_onnx.py", "--method", "modified_beam", *options,
                          tmp_path / "onnx", data_list, tmp_path / out)
        assert result.returncode == 0, result.stderr[-2000:]
        return result, (tmp_path / out / "hyp").read_text().split().count("FIVE")

    plain, fives = sherpa("plain", "--compare", exp / "decode-test-modified_beam")
    same = int(plain.stdout.split("; ")[-1].split()[0])
    assert "offline modified_beam," in plain.stdout and same >= len(audio) - 2, plain.stdout
    (tmp_path / "hot.txt").write_text("FIVE\nZÜRICH :3\n")
    biased, biased_fives = sherpa("biased", "--hotwords", tmp_path / "hot.txt", "--hotwords-score", "3")
    assert biased_fives > fives + 5 and "offline modified_beam+hotwords," in biased.stdout
    assert f"{tmp_path / 'hot.txt'}:2: 'ZÜRICH': the model has no unit" in biased.stderr
    assert (tmp_path / "biased" / "hotwords.txt").read_text() == "FIVE\n"  # what sherpa-onnx was given
    greedy = run_tool(sys.executable, STEPS / "decode_sherpa_onnx.py", "--hotwords", tmp_path / "hot.txt",
                      tmp_path / "onnx", data_list, tmp_path / "greedy")
    assert greedy.returncode == 2 and "--hotwords goes with --method modified_beam" in greedy.stderr


def test_segments_cut_in_pauses_and_cover_the_recording():
    """Speech-like bursts of 1.7 s with pauses of 0.3 s, segments of at most 6 s (cut in their last 2 s,
    which always hold a pause): every cut is in a pause and the segments put together are the recording."""
    generator = torch.Generator().manual_seed(0)
    burst, pause = 27200, 4800
    signal = torch.cat([torch.cat([torch.randn(burst, generator=generator) * 0.3, torch.zeros(pause)])
                        for _ in range(10)])
    blocks = signal.split(16000)
    pieces = list(segments(blocks, 16000, 6.0))
    assert torch.equal(torch.cat([p for _, p in pieces]), signal)
    assert all(p.shape[0] <= 96000 for _, p in pieces) and len(pieces) >= 4
    for start, piece in pieces[1:]:
        at = round(start * 16000)
        assert at % (burst + pause) >= burst, at  # inside a pause


def test_a_last_piece_shorter_than_a_cuts_window_joins_the_segment_before_it():
    """Segments of 0.2 s (the last third of which is shorter than the 100 ms a cut is searched in: cut at the
    limit) over 0.41 s left a last segment of 160 samples, too short for one analysis window: the whole recording
    failed. It joins the one before; a last piece of 100 ms or more stays a segment of its own."""
    for length, sizes in ((6560, [3200, 3360]), (8000, [3200, 3200, 1600])):
        signal = torch.randn(length, generator=torch.Generator().manual_seed(1))
        pieces = list(segments(signal.split(1000), 16000, 0.2))
        assert [p.shape[0] for _, p in pieces] == sizes and torch.equal(torch.cat([p for _, p in pieces]), signal)
        assert [start for start, _ in pieces] == [sum(sizes[:i]) / 16000 for i in range(len(sizes))]


def test_transcribe_segments_a_long_recording_for_any_model(an4_test, tmp_path):
    """A bidirectional model (it cannot stream) on 70 s of speech in segments of at most 20 s: word
    times count from the file's start, in order, within the recording."""
    audio, langs = an4_test
    exp = make_experiment(tmp_path / "exp", langs["bpe"], encoder={"bidirectional": True})
    pieces = [soundfile.read(path, dtype="float32")[0] for path, _ in audio] * 2
    long = np.concatenate(pieces)
    soundfile.write(tmp_path / "long.flac", long, 16000)
    out = run_tool(sys.executable, STEPS / "transcribe.py", "--json", "--word-times", "--segment-seconds", "20", exp,
                   tmp_path / "long.flac")
    assert out.returncode == 0, out.stderr[-2000:]
    words = json.loads(out.stdout)["words"]
    starts = [w["start"] for w in words]
    assert starts == sorted(starts) and words[-1]["end"] <= len(long) / 16000 + 0.1 and starts[-1] > 50
    alone = run_tool(sys.executable, STEPS / "transcribe.py", "--json", "--word-times", "--segment-seconds", "20",
                     "--batch-size", "1", exp, tmp_path / "long.flac")  # one segment at a time: the same
    assert alone.returncode == 0 and alone.stdout == out.stdout, alone.stderr[-2000:]
