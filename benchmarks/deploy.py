#!/usr/bin/env python3
"""A model exported for sherpa-onnx, decoded in sherpa-onnx: WER, speed and streaming latency, as a table.

Rows: offline float32, offline int8 (onnxruntime dynamic quantisation), streaming float32 fed --chunk
seconds at a time. Latency: for each utterance, the audio fed before the first partial result, minus
where speech starts (the sound around its first voiced stretch, speech_start: a click or a breath before
the speaker is not speech, the hiss of a first S is); median, 90th percentile and the share within 0.3 s.
Exports go to a temporary dir; RTF is per core (1 thread).

Needs a trained deployable experiment and a data list, e.g. after egs/an4's
`./run.sh --unit-type bpe --train-config conf/deploy.yaml --exp exp/deploy --methods greedy \
--deploy "offline streaming"`:
  python benchmarks/deploy.py egs/an4/exp/deploy egs/an4/data/test/data.list
"""

import os
import sys
import tempfile
import time

import numpy as np
import torch

from rnnt.attention_chunks import add_attention_options, from_args
from rnnt.cli import tool_parser
from rnnt.data import stages
from rnnt.data.features import fbank
from rnnt.data.sources import records
from rnnt.decode_results import reference_texts
from rnnt.export.runtime import load_recognizer, recognise, tail_seconds
from rnnt.export.sherpa_onnx import ExportOptions, export
from rnnt.scoring import score


def frame_voicing(samples: np.ndarray, rate: int, window: float = 0.04, low_hz: float = 60.0,
                  high_hz: float = 400.0) -> np.ndarray:
    """Every 10 ms, the highest normalised autocorrelation of `window` seconds at a lag of one pitch period
    (low_hz to high_hz): close to 1 where the vocal folds vibrate, 0.1 to 0.4 for breath, clicks and room
    noise. Frame i is centred where the sherpa_onnx fbank's frame i is, at 10 i + 5 ms."""
    size, hop = round(window * rate), round(0.01 * rate)
    padded = np.pad(samples.astype(np.float64), (size // 2 - hop // 2, size // 2))
    if len(samples) < hop:
        return np.zeros(0)
    frames = np.lib.stride_tricks.sliding_window_view(padded, size)[::hop][: len(samples) // hop]
    frames = frames - frames.mean(axis=1, keepdims=True)
    spectrum = np.fft.rfft(frames, n=2 * size, axis=1)
    correlation = np.fft.irfft(spectrum * spectrum.conj(), axis=1)[:, :size]
    energy = np.concatenate([np.zeros((len(frames), 1)), np.cumsum(frames**2, axis=1)], axis=1)
    lags = np.arange(int(rate / high_hz), int(rate / low_hz) + 1)
    head, tail = energy[:, size - lags], energy[:, -1:] - energy[:, lags]  # the two overlapping parts
    return (correlation[:, lags] / np.sqrt(head * tail + 1e-12)).max(axis=1)


def speech_start(samples: np.ndarray, rate: int, db: float = 25.0, sustained: int = 3, voiced: float = 0.7,
                 above_floor: float = 10.0, gap: int = 5) -> float:
    """Seconds before the speaker's first sound. Per 10 ms frame: fbank energy and voicing (frame_voicing).
    Speech is found at the first `sustained` frames in a row that are voiced and within `db` of the
    utterance's loudest frame; it starts where that stretch of sound does: back through every frame
    `above_floor` dB over the noise floor (the 10th percentile of the frames), across gaps of at most
    `gap` frames, so that the hiss or burst of a first S, F, H or P counts. AN4's recordings often open
    with a click or a breath (unvoiced, up to 35 dB over the floor, 20 to 300 ms long) a third of a
    second before the speaker: neither is where speech starts. With no voiced stretch, the first
    `sustained` loud frames."""
    energy = torch.logsumexp(fbank(torch.from_numpy(samples), rate, "sherpa_onnx"), dim=1).numpy() * 10 / np.log(10)
    if not len(energy):
        return 0.0
    voicing = frame_voicing(samples, rate)
    n = min(len(energy), len(voicing)) if len(voicing) else len(energy)
    loud = energy[:n] > energy.max() - db
    anchor = first_run(loud & (voicing[:n] >= voiced), sustained) if len(voicing) else None
    if anchor is None:
        return (first_run(loud, sustained) or 0) * 0.01
    active, start = energy > np.percentile(energy, 10) + above_floor, anchor
    for frame in range(anchor - 1, -1, -1):
        if active[frame]:
            start = frame
        elif start - frame > gap:
            break
    return start * 0.01


def first_run(flags: np.ndarray, length: int) -> int | None:
    """The first frame of `length` True flags in a row."""
    run = 0
    for frame, flag in enumerate(flags.tolist()):
        run = run + 1 if flag else 0
        if run == length:
            return frame - length + 1
    return None


def first_partial(recognizer, samples: np.ndarray, rate: int, chunk: float, tail: float) -> tuple[float, str] | None:
    """Seconds of audio fed when the streaming result first has text, and that text (the audio followed by
    `tail` seconds of silence, as recognise() feeds it)."""
    stream, size = recognizer.create_stream(), round(chunk * rate)
    padded = np.concatenate([samples, np.zeros(round(tail * rate), dtype=np.float32)])
    for start in range(0, len(padded), size):
        stream.accept_waveform(rate, padded[start:start + size])
        while recognizer.is_ready(stream):
            recognizer.decode_stream(stream)
        text = recognizer.get_result(stream).strip()
        if text:
            return min(start + size, len(padded)) / rate, text
    return None


def main() -> int:
    parser = tool_parser(__doc__)
    parser.add_argument("--chunk", type=float, default=0.1, help="streaming: seconds of audio fed at a time")
    parser.add_argument("--chunk-frames", type=int, default=0,
                        help="streaming: fbank frames per encoder call in the export (default: export_onnx.py's)")
    parser.add_argument("--streaming-only", action="store_true", help="the streaming row alone")
    add_attention_options(parser)
    parser.add_argument("--latencies", help="write each utterance's latency to this TSV: key, where speech "
                        "starts, audio fed at the first partial result (seconds), that result")
    parser.add_argument("exp_dir")
    parser.add_argument("data_list")
    args = parser.parse_args()
    attention = from_args(parser, args)
    torch.set_num_threads(1)
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line("cpu") + "\n")  # benchmarks/machine.py: where the table was measured
    refs, _ = reference_texts(args.data_list, None)
    utterances = None
    print("| model | WER | RTF per core | first partial after speech starts: median / p90 / within 0.3 s |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        exports = [("offline float32", ExportOptions(attention=attention)),
                   ("offline int8", ExportOptions(int8=True, attention=attention))] if not args.streaming_only else []
        if attention.frames != 0:  # a whole utterance's attention does not stream
            exports.append(("streaming float32", ExportOptions(True, args.chunk_frames, attention=attention)))
        for name, options in exports:
            out = os.path.join(tmp, name.replace(" ", "-"))
            chunk_frames = export(args.exp_dir, out, options=options)["options"].chunk_frames
            recognizer, streaming, rate = load_recognizer(out, 1)
            if utterances is None:
                utterances = [(r["key"], r["waveform"].numpy()) for r in
                              stages.waveforms(stages.first_of_each_key(records(args.data_list), args.data_list), rate)]
            hyps, seconds, tail = {}, 0.0, tail_seconds(out, streaming)
            start = time.perf_counter()
            for key, samples in utterances:
                hyps[key] = " ".join(recognise(recognizer, streaming, samples, rate, args.chunk, tail).text.split())
            seconds = time.perf_counter() - start
            audio = sum(len(s) for _, s in utterances) / rate
            latency = "-"
            if streaming:
                rows = []
                for key, samples in utterances:
                    first = first_partial(recognizer, samples, rate, args.chunk, tail)
                    if first is not None:
                        rows.append((key, speech_start(samples, rate), *first))
                if args.latencies:
                    with open(args.latencies, "w", encoding="utf-8") as f:
                        f.writelines(f"{key}\t{onset:.2f}\t{fed:.2f}\t{first}\n" for key, onset, fed, first in rows)
                lat = np.array([fed - onset for _, onset, fed, _ in rows])
                latency = (f"{np.median(lat):.2f} s / {np.percentile(lat, 90):.2f} s / "
                           f"{100 * np.mean(lat <= 0.3):.0f}% ({len(lat)} utterances; fed {args.chunk} s at a time, "
                           f"{chunk_frames} new frames an encoder call)")
            print(f"| {name} | {score(refs, hyps).wer_line} | {seconds / audio:.4f} | {latency} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
