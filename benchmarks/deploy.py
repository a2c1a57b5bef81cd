#!/usr/bin/env python3
"""A model exported for sherpa-onnx, decoded in sherpa-onnx: WER, speed and streaming latency, as a table.

Rows: offline float32, offline int8 (onnxruntime dynamic quantisation), streaming float32 fed --chunk
seconds at a time. Latency: for each utterance, the audio fed before the first partial result, minus
where speech starts (the first of 3 frames of 10 ms in a row within 25 dB of the utterance's loudest,
so that a click is not taken for speech); median, 90th percentile and the share within 0.3 s. Exports
go to a temporary dir; RTF is per core (1 thread).

Needs a trained deployable experiment and a data list, e.g. after egs/an4's
`./run.sh --unit-type bpe --train-config conf/deploy.yaml --exp exp/deploy --methods greedy --deploy "offline streaming"`:
  python benchmarks/deploy.py egs/an4/exp/deploy egs/an4/data/test/data.list
"""

import os
import sys
import tempfile
import time

import numpy as np
import torch

from rnnt.cli import tool_parser
from rnnt.data import stages
from rnnt.data.features import fbank
from rnnt.data.sources import records
from rnnt.decode_results import reference_texts
from rnnt.export.runtime import load_recognizer, recognise, tail_seconds
from rnnt.export.sherpa_onnx import ExportOptions, export
from rnnt.scoring import score


def speech_start(samples: np.ndarray, rate: int, db: float = 25.0, sustained: int = 3) -> float:
    """Seconds before the first `sustained` 10 ms frames in a row within `db` of the utterance's loudest
    frame (fbank energy). A single loud frame is not speech: AN4's recordings often open with a click 20
    ms long, up to 30 dB over the noise floor, a third of a second before the speaker does."""
    energy = torch.logsumexp(fbank(torch.from_numpy(samples), rate, "sherpa_onnx"), dim=1)
    loud = (energy > energy.max() - db / 10 * np.log(10)).tolist()
    for frame in range(len(loud) - sustained + 1):
        if all(loud[frame:frame + sustained]):
            return frame * 0.01
    return 0.0


def first_partial(recognizer, samples: np.ndarray, rate: int, chunk: float, tail: float) -> float | None:
    """Seconds of audio fed when the streaming result first has text (the audio followed by `tail` seconds
    of silence, as recognise() feeds it)."""
    stream, size = recognizer.create_stream(), round(chunk * rate)
    padded = np.concatenate([samples, np.zeros(round(tail * rate), dtype=np.float32)])
    for start in range(0, len(padded), size):
        stream.accept_waveform(rate, padded[start:start + size])
        while recognizer.is_ready(stream):
            recognizer.decode_stream(stream)
        if recognizer.get_result(stream).strip():
            return min(start + size, len(padded)) / rate
    return None


def main() -> int:
    parser = tool_parser(__doc__)
    parser.add_argument("--chunk", type=float, default=0.1, help="streaming: seconds of audio fed at a time")
    parser.add_argument("--chunk-frames", type=int, default=0,
                        help="streaming: fbank frames per encoder call in the export (default: export_onnx.py's)")
    parser.add_argument("exp_dir")
    parser.add_argument("data_list")
    args = parser.parse_args()
    torch.set_num_threads(1)
    refs, _ = reference_texts(args.data_list, None)
    utterances = None
    print("| model | WER | RTF per core | first partial after speech starts: median / p90 / within 0.3 s |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, options in (("offline float32", ExportOptions()), ("offline int8", ExportOptions(int8=True)),
                              ("streaming float32", ExportOptions(streaming=True, chunk_frames=args.chunk_frames))):
            out = os.path.join(tmp, name.replace(" ", "-"))
            chunk_frames = export(args.exp_dir, out, options=options)["options"].chunk_frames
            recognizer, streaming, rate = load_recognizer(out, 1)
            if utterances is None:
                utterances = [(r["key"], r["waveform"].numpy()) for r in
                              stages.resample_to(stages.decode(records(args.data_list)), rate)]
            hyps, seconds, latencies, tail = {}, 0.0, [], tail_seconds(out, streaming)
            start = time.perf_counter()
            for key, samples in utterances:
                text = recognise(recognizer, streaming, samples, rate, args.chunk, tail)
                hyps[key] = " ".join(text.split())
            seconds = time.perf_counter() - start
            audio = sum(len(s) for _, s in utterances) / rate
            latency = "-"
            if streaming:
                for _, samples in utterances:
                    fed = first_partial(recognizer, samples, rate, args.chunk, tail)
                    if fed is not None:
                        latencies.append(fed - speech_start(samples, rate))
                lat = np.array(latencies)
                latency = (f"{np.median(lat):.2f} s / {np.percentile(lat, 90):.2f} s / "
                           f"{100 * np.mean(lat <= 0.3):.0f}% ({len(lat)} utterances; fed {args.chunk} s at a time, "
                           f"{chunk_frames} frames an encoder call)")
            print(f"| {name} | {score(refs, hyps).wer_line} | {seconds / audio:.4f} | {latency} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
