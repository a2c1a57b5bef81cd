"""Running an export of steps/export_onnx.py in sherpa-onnx: the recognizer its sherpa-onnx.json
describes, one utterance through it as an application would feed it, and the words of its result with
their times."""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass

import numpy as np

from rnnt.confidence import Calibration, calibration_of, usable_calibration, word_confidence
from rnnt.ctm import word_span
from rnnt.data.config import MAX_TAIL_SILENCE
from rnnt.datadir.table import kaldi_fields

DECODING_JSON = "decoding.json"  # written by rnnt.export.sherpa_onnx beside sherpa-onnx.json
STREAMING_TAIL = 0.5  # the least silence a stream is fed after the audio: sherpa-onnx encodes a chunk
#                      only once frames after it have come, so without it the last words are never decoded
FRAME_SHIFT = 0.01  # sherpa-onnx's fbank, seconds
# sherpa-onnx's transducer recognizers time a token as its encoder frame x 10 ms x 4, whatever the model's
# subsampling (a constant in their C++): an export's encoder frame is its own (decoding.json)
SHERPA_ONNX_FRAME_SECONDS = FRAME_SHIFT * 4

ENDPOINT_SILENCE = {"rule1_min_trailing_silence": 2.4, "rule2_min_trailing_silence": 1.2}  # sherpa-onnx's, s


def endpoint_rules(encoder_frame_seconds: float) -> dict[str, float]:
    """sherpa-onnx's endpoint rules' trailing silences for this model: it counts a trailing blank as 40 ms of
    silence whatever the encoder's frame, so that its defaults (2.4 s, and 1.2 s after a word) mean that much
    audio, they are scaled by 40 ms / the frame (a model of 60 ms frames waited 1.5 times as long). Under 40 ms a
    frame, rule 1 takes rule 2's silence: sherpa-onnx's rule 2 holds only while the utterance (in real time) is
    longer than the silence it counts, which counts more than there is (a 20 ms frame: twice), so after under 1.2 s
    of speech an utterance waited for rule 1's 2.4 s; as over 40 ms a frame, one of silence alone ends at 1.2 s."""
    scale = SHERPA_ONNX_FRAME_SECONDS / encoder_frame_seconds
    rules = {rule: round(seconds * scale, 4) for rule, seconds in ENDPOINT_SILENCE.items()}
    if encoder_frame_seconds < SHERPA_ONNX_FRAME_SECONDS - 1e-9:
        rules["rule1_min_trailing_silence"] = rules["rule2_min_trailing_silence"]
    return rules


@dataclass
class Recognised:
    """sherpa-onnx's result: its tokens (the word-start mark shown as a space) joined, its tokens and their times,
    and each token's log-probability where it was emitted (a streaming recognizer's at its temperature_scale,
    which a streaming export sets to 1).
    (sherpa-onnx's own text also takes out the space before a word that begins with an apostrophe.)"""
    text: str
    tokens: list[str]
    timestamps: list[float]
    log_probs: list[float] | None = None


def read_json(path: str) -> dict:
    """The JSON object in path; a file that is not one is a ValueError naming it."""
    with open(path, encoding="utf-8") as f:
        try:
            value = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{error.lineno}:{error.colno}: not valid JSON ({error.msg})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return value


def recognizer_args(onnx_dir: str) -> dict:
    """The keyword arguments sherpa-onnx.json holds, its paths made absolute and its files checked."""
    path = os.path.join(onnx_dir, "sherpa-onnx.json")
    args = read_json(path)
    missing = [key for key in ("encoder", "decoder", "joiner", "tokens", "sample_rate") if key not in args]
    if missing:
        raise ValueError(f"{path}: no {', '.join(missing)} (write it again with steps/export_onnx.py)")
    for key in ("encoder", "decoder", "joiner", "tokens", "bpe_vocab"):
        if key not in args:  # bpe_vocab: only BPE and unigram units have one
            continue
        args[key] = os.path.join(onnx_dir, args[key])
        if not os.path.isfile(args[key]):  # sherpa-onnx's own check is an AssertionError, or a crash later
            raise ValueError(f"{args[key]}: no such file ({path} names it as the {key})")
    check_against_the_graphs(args, path)
    return args


def load_recognizer(onnx_dir: str, threads: int, described: dict | None = None, **search):
    """The recognizer sherpa-onnx.json describes (described: its recognizer_args, where the caller has them), its
    search's arguments replaced by `search` (decoding_method, max_active_paths, hotwords_file, hotwords_score);
    whether it streams; the model's sample rate."""
    import sherpa_onnx

    args = {**(described or recognizer_args(onnx_dir)), **search}
    streaming = "model_type" in args  # a streaming export's (lstm, conformer): the offline one reads the graph's
    kind = sherpa_onnx.OnlineRecognizer if streaming else sherpa_onnx.OfflineRecognizer
    try:
        return kind.from_transducer(**args, num_threads=threads), streaming, args["sample_rate"]
    except TypeError as error:  # a key from_transducer has not (an edit, another version's): a traceback
        raise ValueError(f"{onnx_dir}/sherpa-onnx.json: {error}") from None


def tokens_digest(lines: list[str]) -> str:
    """A digest of tokens.txt's '<symbol> <id>' lines as read (spacing and line ends aside), which the export's
    graphs record: another tokens.txt of the same size (another build's, ids swapped) spelt every unit wrong."""
    canonical = "".join(" ".join(line.split()) + "\n" for line in lines if line.strip())
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def graph_metadata(path: str) -> dict:
    """An ONNX graph's metadata; ValueError naming a file that is no graph."""
    import onnx

    try:
        graph = onnx.load(path, load_external_data=False)
    except Exception as error:  # protobuf's DecodeError, onnx's own for a file cut short
        raise ValueError(f"{path}: not an ONNX graph ({type(error).__name__}); export it again") from None
    return {prop.key: prop.value for prop in graph.metadata_props}


def check_against_the_graphs(args: dict, path: str) -> None:
    """tokens.txt holds the units and sherpa-onnx.json the sample rate the decoder graph was exported with (its
    metadata, where it has them): a short tokens.txt crashed sherpa-onnx mid-decoding, another rate scored 99% in
    silence, another tokens.txt of the right size spelt every word wrong."""
    metadata = graph_metadata(args["decoder"])
    streaming, encoder = "model_type" in args, graph_metadata(args["encoder"])
    if "model_author" in encoder and streaming != ("T" in encoder):  # sherpa-onnx's C++ aborted the process
        kinds = ("an offline", "a streaming") if streaming else ("a streaming", "an offline")
        raise ValueError(f"{args['encoder']}: {kinds[0]} export's encoder, in {kinds[1]} export ({path}); copy the "
                         "export dir whole, or export it again")
    with open(args["tokens"], encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    if "vocab_size" in metadata and len(lines) != int(metadata["vocab_size"]):
        raise ValueError(f"{args['tokens']}: {len(lines)} units, but the model has {metadata['vocab_size']}; export "
                         "it again with steps/export_onnx.py")
    if "tokens_sha256" in metadata and tokens_digest(lines) != metadata["tokens_sha256"]:
        raise ValueError(f"{args['tokens']}: not the units the model was exported with (another build's, or ids "
                         "changed since); export it again with steps/export_onnx.py")
    if "sample_rate" in metadata and int(args["sample_rate"]) != int(metadata["sample_rate"]):
        raise ValueError(f"{path}: sample_rate {args['sample_rate']}, but the model was exported at "
                         f"{metadata['sample_rate']} Hz")


def tail_seconds(onnx_dir: str, streaming: bool, silence: float | None = None) -> float:
    """The silence to feed after each utterance: `silence`, by default the model's data.tail_silence
    (decoding.json, which older exports lack: none); for a stream that and the encoder's window and a frame more,
    at least STREAMING_TAIL: sherpa-onnx encodes a window once a frame after it has come and never a part of one,
    so the last 1 to window frames fed are never encoded (with the window's silence alone, as before, the encoder
    saw 10 ms to 0.64 s of a 0.5 s tail; with a silence given alone, none of the last words' 0.68 s)."""
    decoding = decoding_settings(onnx_dir)
    tail = decoding.get("tail_silence", 0.0) if silence is None else silence
    if isinstance(tail, bool) or not isinstance(tail, (int, float)) or not 0 <= tail <= MAX_TAIL_SILENCE:
        raise ValueError(f"{onnx_dir}/{DECODING_JSON}: tail_silence is seconds, 0 to {MAX_TAIL_SILENCE:g}, "
                         f"got {tail!r}")
    if not streaming:
        return tail
    return max(STREAMING_TAIL, tail + (int(decoding.get("window_frames", 0)) + 1) * FRAME_SHIFT)


def recognise(recognizer, streaming: bool, samples: np.ndarray, rate: int, chunk: float,
              tail: float) -> Recognised:
    """The result for one utterance (float samples at the model's rate), followed by `tail` seconds of
    silence (tail_seconds()). Streaming, it is fed `chunk` seconds at a time."""
    stream = recognizer.create_stream()
    padded = np.concatenate([samples, np.zeros(round(tail * rate), dtype=np.float32)])
    if not streaming:
        stream.accept_waveform(rate, padded)
        recognizer.decode_stream(stream)
        result = stream.result
    else:
        size = max(1, round(chunk * rate))
        for start in range(0, len(padded), size):
            stream.accept_waveform(rate, padded[start:start + size])
            while recognizer.is_ready(stream):
                recognizer.decode_stream(stream)
        stream.input_finished()
        while recognizer.is_ready(stream):
            recognizer.decode_stream(stream)
        result = recognizer.get_result_all(stream)
    log_probs = list(getattr(result, "ys_probs" if streaming else "ys_log_probs", None) or []) or None
    return Recognised(" ".join(kaldi_fields("".join(result.tokens))), list(result.tokens), list(result.timestamps),
                      log_probs if log_probs and len(log_probs) == len(result.tokens) else None)


def decoding_settings(onnx_dir: str) -> dict:
    """The export's decoding.json ({} in an export older than it)."""
    path = os.path.join(onnx_dir, DECODING_JSON)
    return read_json(path) if os.path.isfile(path) else {}


def encoder_frame_seconds(onnx_dir: str) -> float | None:
    """The audio an encoder frame of the export covers (None in an export older than decoding.json's)."""
    value = decoding_settings(onnx_dir).get("encoder_frame_seconds")
    return float(value) if value is not None else None


def confidence_calibration(onnx_dir: str) -> Calibration | None:
    """The calibration of words' confidences the export carries from its experiment (None: none)."""
    values = decoding_settings(onnx_dir).get("confidence_calibration")
    return None if values is None else calibration_of(values, f"{onnx_dir}/{DECODING_JSON}'s confidence_calibration",
                                                      "export it again")


def carried_calibration(exp_dir: str, checkpoint: str) -> tuple[dict, str]:
    """decoding.json's confidence_calibration: the experiment's calibration of the exported checkpoint, which an
    application applies to words' confidences from sherpa-onnx's token log-probabilities as ours does ({}: none,
    and one of another checkpoint is left behind); and what it says of them (rnnt.confidence.usable_calibration)."""
    calibration, confidences = usable_calibration(exp_dir, checkpoint, "transducer")
    values = {"scale": calibration.scale, "offset": calibration.offset} if calibration else None
    return ({"confidence_calibration": values} if values else {}), confidences


def write_decoding_json(onnx_dir: str, decoding: dict, exp_dir: str, checkpoint: str) -> str:
    """Writes decoding.json: what an application adds to the audio ("tail_silence"), what sherpa-onnx's token times
    are in ("encoder_frame_seconds"; token_seconds), "unit_type", a stream's "window_frames" (sherpa-onnx encodes a
    window of T frames once a frame after it has come), and the experiment's calibration of the checkpoint's
    words' confidences (carried_calibration); returns what calibrates them."""
    calibration, confidences = carried_calibration(exp_dir, checkpoint)
    with open(os.path.join(onnx_dir, DECODING_JSON), "w", encoding="utf-8") as f:
        f.write(json.dumps({**decoding, **calibration}) + "\n")
    return confidences


def word_boundary_is_a_unit(onnx_dir: str) -> bool:
    """Whether the export's units hold the word boundary as a unit of its own, which only ends a word (character
    and phone units), or as the start of a piece (BPE: a piece that is the mark alone begins a word)."""
    return decoding_settings(onnx_dir).get("unit_type", "char") in ("char", "phone")


def token_seconds(timestamps: list[float], frame_seconds: float) -> list[float]:
    """Token start times in seconds from sherpa-onnx's, which take an encoder frame for 40 ms."""
    return [round(stamp / SHERPA_ONNX_FRAME_SECONDS) * frame_seconds for stamp in timestamps]


def words_with_times(result: Recognised, frame_seconds: float, duration: float,
                     boundary_is_a_unit: bool = True, calibration: Calibration | None = None,
                     rounded: bool = True) -> list[dict]:
    """The result's words ({"word", "start", "end"}, seconds) as rnnt.transcriber.words_with_times gives ours:
    a word from its first unit's frame to the end of its last's, never past the audio's duration. A token
    that begins with a space begins a word; a space alone only ends one where the boundary is a unit of its
    own (word_boundary_is_a_unit), and begins it elsewhere. Each word's confidence where sherpa-onnx gave the
    tokens' log-probabilities (through the export's calibration: confidence_calibration; to 4 decimals unless not
    rounded)."""
    groups: list[list[tuple[str, float, float]]] = []
    log_probs = result.log_probs or [0.0] * len(result.tokens)
    for token, start, log_prob in zip(result.tokens, token_seconds(result.timestamps, frame_seconds), log_probs):
        if not token.strip() and boundary_is_a_unit:
            groups.append([])
        elif not groups or token[0].isspace():
            groups.append([(token, start, log_prob)])
        else:
            groups[-1].append((token, start, log_prob))
    rows = []
    for group in groups:
        if word := "".join(token for token, _, _ in group).strip():
            rows.append({"word": word, **word_span(group[0][1], group[-1][1] + frame_seconds, duration,
                                                   frame_seconds)})
            if result.log_probs is not None:  # as rnnt.confidence gives ours
                rows[-1]["confidence"] = word_confidence([math.exp(log_prob) for _, _, log_prob in group],
                                                         calibration, rounded)
    return rows
