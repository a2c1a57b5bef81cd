"""A trained transducer as the files sherpa-onnx loads: encoder.onnx, decoder.onnx, joiner.onnx,
tokens.txt (with bpe.model and bpe.vocab for BPE and unigram units: how sherpa-onnx spells hotwords,
rnnt.export.hotwords), and sherpa-onnx.json, the keyword arguments of sherpa_onnx.OfflineRecognizer.from_transducer
(streaming: OnlineRecognizer.from_transducer) with paths relative to the output dir; and decoding.json,
what an application feeds besides the audio: {"tail_silence": seconds of silence after each utterance},
the model's data.tail_silence, which our own decoding appends too, "encoder_frame_seconds", the audio an
encoder frame covers (sherpa-onnx times tokens as if it were 40 ms: rnnt.export.runtime.token_seconds), and
streaming "window_frames", the encoder's window T, which the silence after a stream must cover for its last
frames to be encoded.

What sherpa-onnx runs, and so what a model must be to be exported (anything else is refused, never
silently changed):
  - its own fbank: the `sherpa_onnx` feature preset (rnnt.data.features);
  - a stateless prediction network over the last `context_size` labels, blank id 0;
  - greedy search with at most one symbol per frame (a modified transducer decodes the same with ours);
  - units that spell the text themselves (BPE, characters, words: not phones, whose words need a lexicon);
  - streaming: its LSTM or Conformer transducer types (rnnt.export.streaming_encoders), chunks of T fbank frames
    that advance by decode_chunk_len: a unidirectional LSTM encoder or a Conformer of chunk_frames, and
    stacking without overlap. A conv front end reads T - decode_chunk_len frames again in the next chunk (its
    overlap), as sherpa-onnx feeds them; a Conformer's decode_chunk_len is whole attention chunks.
The graphs are checked against the PyTorch model in onnxruntime on inputs of other lengths than the
ones traced.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import warnings
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import torch

from rnnt.attention_chunks import AttentionChunks, attend_in
from rnnt.data import stages
from rnnt.data.tokenizer import BLANK, SPACE, UNK
from rnnt.export.earlier_files import GRAPHS, remove_earlier_files
from rnnt.export.graphs import Decoder, Joiner, OfflineEncoder
from rnnt.export.hotwords import BPE_MODEL, BPE_VOCAB, write_sentencepiece_files
from rnnt.export.runtime import DECODING_JSON, endpoint_rules, tokens_digest, write_decoding_json
from rnnt.export.streaming_encoders import streaming_graph
from rnnt.model.feature_frontend import FeatureFrontEnd
from rnnt.model.transducer import Transducer
from rnnt.streaming import stream_refusals, stream_unit_and_overlap
from rnnt.training.experiment import load_experiment
from rnnt.transcriber import load_model, seconds_per_encoder_frame

OPSET = 17
AUTHOR = "rnnt-recipes"


class NotExportable(ValueError):
    """The model cannot be represented in what sherpa-onnx runs; the message says what and why."""


@dataclass(frozen=True)
class ExportOptions:
    streaming: bool = False
    chunk_frames: int = 0  # streaming: fbank frames per encoder call (0: DEFAULT_CHUNK_FRAMES, made whole)
    int8: bool = False
    attention: AttentionChunks = AttentionChunks()  # a streaming Conformer's chunks, where not its config's


def refusals(experiment, model, tokenizer, options: ExportOptions) -> list[str]:
    """Why the model cannot be exported as asked; empty when it can."""
    data, why = experiment.data, []
    if tokenizer.kind == "phone":
        why.append("phone units: sherpa-onnx would print phones, not words (our words come from a lexicon "
                   "search it does not have); train with bpe, unigram or char units")
    if not model.is_transducer:
        why.append("a CTC model (loss.type: ctc) has no prediction and joint network for sherpa-onnx's transducer")
    else:
        if model.config.predictor.kind != "stateless":
            why.append(f"predictor.kind is {model.config.predictor.kind}: sherpa-onnx runs a stateless prediction "
                       "network over the last context_size labels; train with predictor: {kind: stateless}")
        if not model.config.loss.one_sym_per_frame:
            why.append("loss.one_sym_per_frame is false: sherpa-onnx's search emits at most one symbol a frame, so "
                       "it would decode this standard transducer otherwise than it was trained and than our searches "
                       "do; train with loss: {one_sym_per_frame: true}")
    if data.features.preset != "sherpa_onnx":
        why.append(f"data.features.preset is {data.features.preset}: sherpa-onnx computes its own fbank, which the "
                   "sherpa_onnx preset reproduces; train with features: {preset: sherpa_onnx}")
    if options.streaming:
        why += stream_refusals(experiment, model)
        if model.config.encoder.kind == "lstm" and not model.encoder.layers:
            why.append("the encoder has no LSTM layers: sherpa-onnx streams an LSTM transducer, whose state is "
                       "the LSTMs' h and c; give it pre_layers or post_layers, or export it offline")
        unit, _ = stream_unit_and_overlap(experiment, model)
        if options.chunk_frames < 0:
            why.append(f"--chunk-frames {options.chunk_frames} is negative")
        elif options.chunk_frames % unit:
            why.append(f"--chunk-frames {options.chunk_frames} is not a multiple of {unit} (stacking x the conv "
                       "front end's strides x StackTime, x a Conformer's chunk_frames)")
    return why


def config_refusals(config_path: str, unit_type: str, options: ExportOptions) -> list[str]:
    """Why a model trained from the config at config_path over unit_type units (rnnt.data.tokenizer.UNIT_TYPES) would be
    refused, known before it is trained: refusals reads the model's config and shapes, never its weights."""
    experiment = load_experiment(config_path)
    model = Transducer(experiment.model, 16)  # a vocabulary of any size: nothing refused depends on it
    attend_in(model, options.attention)
    return refusals(experiment, model, SimpleNamespace(kind=unit_type), options)


def tokens_txt(tokenizer) -> list[str]:
    """sherpa-onnx's tokens.txt: '<symbol> <id>'; a word-level unit gets the word-start mark, so that
    sherpa-onnx, which joins pieces and turns the mark into a space, writes the words apart."""
    lines = []
    for symbol, index in sorted(tokenizer.units.items(), key=lambda item: item[1]):
        word = tokenizer.kind == "word" and symbol not in (BLANK, UNK)
        lines.append(f"{SPACE + symbol if word else symbol} {index}")
    return lines


def _export(module, args: tuple, path: str, inputs: list[str], outputs: list[str], dynamic: dict,
            metadata: dict) -> None:
    import onnx

    module.eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's notes on LSTM batch sizes and tracing
        torch.onnx.export(module, args, path, input_names=inputs, output_names=outputs, dynamic_axes=dynamic,
                          opset_version=OPSET, dynamo=False)
    graph = onnx.load(path)
    for key, value in {"model_author": AUTHOR, **metadata}.items():
        graph.metadata_props.add(key=key, value=str(value))
    onnx.save(graph, path)


def _verify(module, path: str, cases: list[dict[str, torch.Tensor]], tolerance: float = 1e-4,
            no_frame: bool = False) -> float:
    """The largest difference between onnxruntime's outputs and the module's over these inputs (shapes
    and values both: a size baked into the graph when it was traced shows as a difference). no_frame (an
    offline encoder): a clip of no frame runs, to no output frame (a conv front end's graph raised there)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    if no_frame:
        bins = cases[0]["x"].shape[2]
        lengths = session.run(None, {"x": np.zeros((1, 0, bins), np.float32), "x_lens": np.zeros(1, np.int64)})[1]
        if lengths.tolist() != [0]:
            raise RuntimeError(f"{path}: a clip of no frame gives {lengths.tolist()} output frames")
    worst = 0.0
    for inputs in cases:
        got = session.run(None, {name: value.numpy() for name, value in inputs.items()})
        with torch.no_grad():
            want = module(*inputs.values())
        for g, w in zip(got, want if isinstance(want, tuple) else (want,)):
            if g.shape != tuple(w.shape):
                raise RuntimeError(f"{path}: onnxruntime gives shape {g.shape}, PyTorch {tuple(w.shape)}")
            difference = np.abs(g - w.numpy())  # NaN where one gives NaN and the other not (max() would skip it)
            worst = max(worst, float("inf") if np.isnan(difference).any() else float(difference.max(initial=0.0)))
    if worst > tolerance:
        raise RuntimeError(f"{path}: onnxruntime differs from PyTorch by {worst:.2e} (> {tolerance})")
    return worst


# What --int8 quantises: the weights of the matrix products, the LSTMs and the embedding, with a scale per
# output channel. Not a conv front end's convolutions: onnxruntime's ConvInteger ran slower than float
# convolution. On AN4 (egs/an4/RESULTS.md) this gives both deployable front ends (stacked, conv) dev's float
# WER and test +0.26, where every op quantised with one scale per tensor gave test +0.39 and +0.64.
# The weights take 7 bits (reduce_range): x86 CPUs without VNNI multiply u8 activations by s8 weights in
# pairs summed into int16, which saturates at 8 bits; on an AVX2-only EPYC a test joiner's outputs then
# moved by 0.21 against under 0.1 with 7 (the AN4 figures above were measured with 8, on AVX-512 VNNI).
INT8_OPS = ["MatMul", "Gemm", "LSTM", "Gather"]


def _quantize(path: str) -> str:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out = path[:-len(".onnx")] + ".int8.onnx"
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_dynamic's advice to pre-process the graph is for conv nets
    try:
        quantize_dynamic(path, out, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True,
                         op_types_to_quantize=INT8_OPS)
    finally:
        root.setLevel(level)
    return out


# The chunk an export streams by default: 4 fbank frames (40 ms), rounded up to whole encoder frames (stacking x
# the conv front end's strides x StackTime; a streaming Conformer's attention chunk): 6 frames for stacking 3 and
# StackTime 2 (egs/an4/conf/deploy.yaml), 4 for a conv front end of two layers (deploy_lowlatency.yaml), 16 for
# deploy_conformer.yaml. On AN4 (RESULTS.md, "Streaming latency") 6 frames bring the first partial result 50 ms
# sooner than 18 (test median 0.33 s after speech starts against 0.38 s, fed 0.1 s at a time), and a conv
# model's 4 frames its dev 90th percentile from 0.30 s to 0.28 s against 8, each for more encoder calls.
DEFAULT_CHUNK_FRAMES = 4


def _export_encoder(model, frontend, options: ExportOptions, path: str, frame_unit: int, overlap: int,
                    metadata: dict) -> tuple[float, str]:
    """Exports the encoder; returns onnxruntime's largest difference from PyTorch and sherpa-onnx's model_type."""
    bins = metadata["feature_dim"]
    if options.streaming:
        graph = streaming_graph(model, frontend, frame_unit, overlap)
        window = options.chunk_frames + overlap  # T: sherpa-onnx advances by chunk_frames
        _export(graph.module, (torch.randn(1, window, bins), *graph.state), path, graph.inputs, graph.outputs,
                graph.dynamic, {**metadata, "T": window, "decode_chunk_len": options.chunk_frames, **graph.metadata})
        # three streams at once: one starting, one a window in, one long under way (a full attention cache)
        processed = [0, options.chunk_frames, 100 * options.chunk_frames]
        check = dict(zip(graph.inputs, [torch.randn(3, window, bins), *graph.random_state(processed)]))
        return _verify(graph.module, path, [check]), graph.metadata["model_type"]
    encoder = OfflineEncoder(model, frontend).eval()
    _export(encoder, (torch.randn(1, 100, bins), torch.tensor([100])), path, ["x", "x_lens"],
            ["encoder_out", "encoder_out_lens"],
            {"x": {0: "N", 1: "T"}, "x_lens": {0: "N"}, "encoder_out": {0: "N", 1: "T_out"},
             "encoder_out_lens": {0: "N"}},
            # the loader of sherpa-onnx's C++ (its offline tool, C API, mobile bindings) picks the kind of model by
            # this value, which must name one of its offline transducers: all run one graph interface, ours
            {**metadata, "model_type": "conformer"})
    # lengths with every remainder of stacking and StackTime, none of them the traced one, and clips too short
    # for a conv front end's first or second output frame (whatever the stacking: 1, 3); a clip of no frame,
    # which PyTorch's LSTMs do not take, gives no output frame; and a clip beside one 10 times as long (a
    # streaming Conformer's padded frames then have no valid frame in their chunks: none may come out NaN)
    cases = [{"x": torch.randn(2, 101 + k, bins), "x_lens": torch.tensor([101 + k, 61 + k])}
             for k in range(frame_unit)] + [{"x": torch.randn(2, 200, bins), "x_lens": torch.tensor([200, 20])}]
    return _verify(encoder, path, cases + [{"x": torch.randn(2, n, bins), "x_lens": torch.tensor([n, n - 1])}
                                           for n in (1, 3, 6, 18)], no_frame=True), "conformer"


def _export_decoder_and_joiner(model, paths: dict, metadata: dict) -> dict:
    context, joiner_dim = metadata["context_size"], metadata["joiner_dim"]
    decoder, joiner = Decoder(model).eval(), Joiner(model).eval()
    _export(decoder, (torch.zeros(1, context, dtype=torch.long),), paths["decoder"], ["y"], ["decoder_out"],
            {"y": {0: "N"}, "decoder_out": {0: "N"}}, metadata)
    _export(joiner, (torch.randn(1, joiner_dim), torch.randn(1, joiner_dim)), paths["joiner"],
            ["encoder_out", "decoder_out"], ["logit"],
            {"encoder_out": {0: "N"}, "decoder_out": {0: "N"}, "logit": {0: "N"}}, metadata)
    return {"decoder": _verify(decoder, paths["decoder"],
                               [{"y": torch.randint(-1, metadata["vocab_size"], (5, context))}]),
            "joiner": _verify(joiner, paths["joiner"], [{"encoder_out": torch.randn(4, joiner_dim),
                                                         "decoder_out": torch.randn(4, joiner_dim)}])}


def _write_units(tokenizer, out_dir: str, written: set[str]) -> dict:
    """tokens.txt, and a sentencepiece model's files (their names added to written); returns how sherpa-onnx spells
    hotwords in them (rnnt.export.hotwords; word units it cannot spell at all)."""
    with open(os.path.join(out_dir, "tokens.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(tokens_txt(tokenizer)) + "\n")
    if tokenizer.model is None:
        return {"modeling_unit": "cjkchar"} if tokenizer.kind == "char" else {}
    write_sentencepiece_files(tokenizer.model, out_dir)
    written |= {BPE_MODEL, BPE_VOCAB}
    return {"modeling_unit": "bpe", "bpe_vocab": BPE_VOCAB}


def export(exp_dir: str, out_dir: str, checkpoint: str | None = None,
           options: ExportOptions = ExportOptions()) -> dict:
    """Writes the model to out_dir. Returns the from_transducer arguments written to sherpa-onnx.json
    ("args"), the largest difference from PyTorch per graph ("checked"), the checkpoint, the options, what
    calibrates the words' confidences ("confidences"), the files of an earlier export it removed ("removed") and
    the attention chunks' name and note ("attention": rnnt.attention_chunks.attend_in's)."""
    experiment, model, tokenizer, checkpoint = load_model(exp_dir, checkpoint)
    attention = attend_in(model, options.attention)  # before the stream's unit, which its chunk sets
    data, (unit, overlap) = experiment.data, stream_unit_and_overlap(experiment, model)
    if options.streaming and not options.chunk_frames:
        options = dataclasses.replace(options, chunk_frames=unit * -(-DEFAULT_CHUNK_FRAMES // unit))
    why = refusals(experiment, model, tokenizer, options)
    if why:
        raise NotExportable(f"{exp_dir}: cannot export for sherpa-onnx:\n  " + "\n  ".join(why))
    os.makedirs(out_dir, exist_ok=True)
    metadata = {"vocab_size": tokenizer.vocab_size, "context_size": model.config.predictor.context,
                "joiner_dim": model.joiner.output.in_features, "sample_rate": data.sample_rate,
                "feature_dim": data.features.num_mel_bins, "checkpoint": os.path.basename(checkpoint),
                "tokens_sha256": tokens_digest(tokens_txt(tokenizer)),
                **({"attention_chunks": attention[0]} if attention[0] else {})}
    frontend = FeatureFrontEnd(data.stack, data.subsample, stages.load_cmvn(data))
    paths = {name: os.path.join(out_dir, f"{name}.onnx") for name in GRAPHS}
    written = {f"{name}.onnx" for name in GRAPHS} | {"tokens.txt", "sherpa-onnx.json", DECODING_JSON}
    torch.manual_seed(0)  # the random inputs of the checks
    frame_unit = data.subsample * model.config.encoder.time_reduction
    checked, model_type = _export_encoder(model, frontend, options, paths["encoder"], frame_unit, overlap, metadata)
    checked = {"encoder": checked, **_export_decoder_and_joiner(model, paths, metadata)}
    hotwords = _write_units(tokenizer, out_dir, written)
    if options.int8:
        paths = {name: _quantize(path) for name, path in paths.items()}
        written |= {os.path.basename(path) for path in paths.values()}
    args = {**{name: os.path.basename(path) for name, path in paths.items()}, "tokens": "tokens.txt",
            "sample_rate": data.sample_rate, "feature_dim": data.features.num_mel_bins, "dither": 0.0,
            "decoding_method": "greedy_search", **hotwords}
    if options.streaming:
        args.update(model_type=model_type, low_freq=20.0, high_freq=-400.0, normalize_samples=True, snip_edges=False,
                    temperature_scale=1.0,  # its tokens' log-probabilities as the model gives them (confidences)
                    **endpoint_rules(seconds_per_encoder_frame(experiment)))
    with open(os.path.join(out_dir, "sherpa-onnx.json"), "w", encoding="utf-8") as f:
        json.dump(args, f, indent=2)
        f.write("\n")
    decoding = {"tail_silence": data.tail_silence, "encoder_frame_seconds": seconds_per_encoder_frame(experiment),
                "unit_type": tokenizer.kind, **({"window_frames": options.chunk_frames + overlap}
                                                if options.streaming else {})}
    confidences = write_decoding_json(out_dir, decoding, exp_dir, checkpoint)
    return {"args": args, "checked": checked, "checkpoint": checkpoint, "options": options, "confidences": confidences,
            "attention": attention, "removed": remove_earlier_files(out_dir, written)}
