#!/usr/bin/env python3
"""Decode a data list with a model exported by steps/export_onnx.py, in sherpa-onnx itself, and score it.

ONNX_DIR's sherpa-onnx.json says which recognizer: offline, or streaming (model_type lstm or conformer), where the
audio is fed in chunks of --chunk-seconds as it would arrive. Each utterance is followed by the silence
its decoding.json asks for (the model's data.tail_silence, which our own decoding appends too), and a
stream by at least 0.5 s (sherpa-onnx encodes a chunk only once the frames after it have come). \
Audio is read and resampled as
our pipeline does it, so both decoders get the same samples.

--method modified_beam runs sherpa-onnx's modified_beam_search (--beam active paths); --hotwords FILE favours
its phrases there as steps/decode.py --hotwords does ours (a phrase's units earn its score as they match, kept
when it completes), each with its own ':S' or --hotwords-score. sherpa-onnx spells a hotword itself (BPE and
unigram pieces through the export's bpe.vocab, characters one by one but Latin words whole: rnnt.export.hotwords),
so a phrase it spells otherwise than the model emits it is left out, named on standard error;
OUT_DIR/hotwords.txt holds the phrases it was given.

Writes OUT_DIR/ as steps/decode.py writes a decode dir (hyp, ref, recogs, errs, wer, ctm: each word's
times from sherpa-onnx's token times, which take every encoder frame for 40 ms, put in the export's own
frames of decoding.json, and its confidence from sherpa-onnx's token log-probabilities, through the calibration
decoding.json carries; and confidence) and prints the %WER line and the real-time factor per core. --compare DECODE_DIR
(a decode.py dir of the same set) adds how many transcripts are identical to its hyp.
"""

import os
import sys
import time

from rnnt.progress_bar import progress

from rnnt.cli import above, at_least, check_out_dir, error_line, run_tool, show_data_reports, tool_parser, ToolError
from rnnt.data import stages
from rnnt.data.sources import records
from rnnt.datadir.table import kaldi_fields, read_table
from rnnt.decode_results import reference_texts, write_results, write_word_outputs
from rnnt.export.hotwords import sherpa_hotwords
from rnnt.export.runtime import (DECODING_JSON, confidence_calibration, decoding_settings, encoder_frame_seconds,
                                 load_recognizer, recognise, recognizer_args, tail_seconds, word_boundary_is_a_unit,
                                 words_with_times)


def decode_all(recognizer, streaming: bool, utterances, rate: int, chunk: float, tail: float,
               frame_seconds: float | None, boundary_is_a_unit: bool, calibration=None, confidences: bool = True):
    """Each utterance's transcript and (given frame_seconds) its words with their times; the seconds of audio
    and the seconds sherpa-onnx took."""
    hyps, words, audio_seconds, decode_seconds = {}, {}, 0.0, 0.0
    for record in progress(utterances, desc="sherpa-onnx", unit="utt"):
        samples = record["waveform"].numpy()
        start = time.perf_counter()
        result = recognise(recognizer, streaming, samples, rate, chunk, tail)
        result.log_probs = result.log_probs if confidences else None
        decode_seconds += time.perf_counter() - start
        audio_seconds += len(samples) / rate
        hyps[record["key"]] = " ".join(kaldi_fields(result.text))
        if frame_seconds is not None:
            words[record["key"]] = words_with_times(result, frame_seconds, len(samples) / rate, boundary_is_a_unit,
                                                    calibration, rounded=False)  # (the ctm rounds them)
    return hyps, words, audio_seconds, decode_seconds


SHERPA_METHODS = {"greedy": "greedy_search", "modified_beam": "modified_beam_search"}  # ours: sherpa-onnx's


def given_hotwords(onnx_dir: str, described: dict, path: str, out_dir: str) -> str:
    """OUT_DIR/hotwords.txt: the phrases of the hotwords file that sherpa-onnx spells as the model emits them; each
    other one named on standard error. None of them is a ValueError. described: the export's recognizer_args."""
    kept, left_out = sherpa_hotwords(onnx_dir, described, decoding_settings(onnx_dir).get("unit_type", "char"), path)
    for problem in left_out:
        print(f"decode_sherpa_onnx.py: {problem}", file=sys.stderr)
    if not kept:
        raise ValueError(f"{path}: none of its {len(left_out)} hotwords is spelt by sherpa-onnx as the model emits "
                         "it" if left_out else f"{path}: no hotword in it (one phrase a line)")
    print(f"decode_sherpa_onnx.py: {len(kept)} hotwords given to sherpa-onnx, {len(left_out)} left out",
          file=sys.stderr)
    os.makedirs(out_dir, exist_ok=True)
    given = os.path.join(out_dir, "hotwords.txt")
    with open(given, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in kept)
    return given


def parsed_arguments():
    parser = tool_parser(__doc__, "steps/decode_sherpa_onnx.py --compare exp/deploy/decode-test-greedy "
                                  "exp/deploy/onnx data/test/data.list exp/deploy/decode-test-sherpa-onnx")
    parser.add_argument("--threads", type=at_least(1), default=1, help="onnxruntime threads (default 1)")
    parser.add_argument("--chunk-seconds", type=above(0), default=0.1, help="streaming: audio per chunk (default 0.1)")
    parser.add_argument("--tail-seconds", type=at_least(0.0),
                        help="silence after the audio (default: the export's decoding.json); a stream adds the "
                        "encoder's window and a frame, at least 0.5 s in all")
    parser.add_argument("--text", help="the reference Kaldi text (default: <the list's dir>/text if there, else the "
                        "transcripts in the list)")
    parser.add_argument("--compare", help="a steps/decode.py dir of the same set: count identical transcripts "
                        "(greedy: all of them; modified_beam: most, sherpa-onnx's search pruning before it merges "
                        "and ending on the best score per symbol)")
    parser.add_argument("--method", choices=sorted(SHERPA_METHODS), default="greedy",
                        help="greedy (default) or modified_beam: sherpa-onnx's greedy_search or modified_beam_search")
    parser.add_argument("--beam", type=at_least(1), default=4, help="modified_beam: active paths (default 4)")
    parser.add_argument("--hotwords", help="modified_beam: a file of phrases to favour, one a line, optionally its "
                        "own score after it ('NEW YORK :3'), as steps/decode.py --hotwords takes")
    parser.add_argument("--hotwords-score", type=at_least(0.0), default=1.5,
                        help="a hotword's score where it gives none (default 1.5)")
    parser.add_argument("onnx_dir")
    parser.add_argument("data_list")
    parser.add_argument("out_dir")
    args = parser.parse_args()
    if args.hotwords and args.method != "modified_beam":
        parser.error("--hotwords goes with --method modified_beam (sherpa-onnx favours them in that search only)")
    return args


def main() -> str:
    args = parsed_arguments()
    try:
        check_out_dir(args.out_dir)  # before the hotwords' spelling, which writes into it
        described = recognizer_args(args.onnx_dir)
        search = {"decoding_method": SHERPA_METHODS[args.method], "max_active_paths": args.beam}
        if args.hotwords:
            search.update(hotwords_file=given_hotwords(args.onnx_dir, described, args.hotwords, args.out_dir),
                          hotwords_score=args.hotwords_score)
        elif os.path.isfile(os.path.join(args.out_dir, "hotwords.txt")):  # a run's before, not this one's
            os.remove(os.path.join(args.out_dir, "hotwords.txt"))
        recognizer, streaming, rate = load_recognizer(args.onnx_dir, args.threads, described, **search)
        calibration = confidence_calibration(args.onnx_dir)
        # a stream's log-probabilities are sherpa-onnx's at its temperature_scale: ours at 1, which exports set
        confidences = not streaming or described.get("temperature_scale") == 1.0
        tail = tail_seconds(args.onnx_dir, streaming, args.tail_seconds)
        frame_seconds = encoder_frame_seconds(args.onnx_dir)
        refs, refs_from = reference_texts(args.data_list, args.text)
        show_data_reports()  # the list's lines and audio skipped, under the tool's name
        utterances = stages.waveforms(stages.first_of_each_key(records(args.data_list), args.data_list), rate)
        if args.compare and not os.path.isfile(os.path.join(args.compare, "hyp")):
            raise FileNotFoundError(f"{args.compare}/hyp: no such file (--compare names a decode dir)")
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        raise ToolError(error_line(error)) from error
    if not confidences:
        print(f"decode_sherpa_onnx.py: {args.onnx_dir}/sherpa-onnx.json sets no temperature_scale 1 (an export older "
              "than it): no words' confidences (export again to have them)", file=sys.stderr)
    hyps, words, audio_seconds, decode_seconds = decode_all(recognizer, streaming, utterances, rate, args.chunk_seconds,
                                                            tail, frame_seconds, word_boundary_is_a_unit(args.onnx_dir),
                                                            calibration, confidences)
    report = write_results(args.out_dir, refs, hyps, refs_from, "decode_sherpa_onnx.py")
    if frame_seconds is None:
        print(f"decode_sherpa_onnx.py: {args.onnx_dir}/decoding.json gives no encoder_frame_seconds (an export "
              "older than it): no ctm (export again to have one)", file=sys.stderr)
    else:
        try:
            write_word_outputs(args.out_dir, words, None, os.path.dirname(os.path.abspath(args.data_list)),
                               "decode_sherpa_onnx.py", refs, f"calibrated by {args.onnx_dir}/{DECODING_JSON}"
                               if calibration else "uncalibrated posteriors")
        except (OSError, ValueError) as error:
            raise ToolError(f"ctm: {error_line(error)}") from error
    rtf = decode_seconds / max(audio_seconds, 1e-9)
    summary = (f"{args.out_dir}: {report.wer_line}; {'streaming' if streaming else 'offline'} {args.method}"
               f"{'+hotwords' if args.hotwords else ''}, "
               f"{audio_seconds:.1f} s of audio, RTF {rtf * args.threads:.4f} per core "
               f"({args.threads} thread{'s' * (args.threads > 1)})")
    return summary + (compared(hyps, args.compare) if args.compare else "")


def compared(hyps: dict[str, str], decode_dir: str) -> str:
    """'; N of M transcripts identical to DIR' over the utterances both decoded (an utterance DIR lacks was counted
    identical where sherpa-onnx gave an empty transcript), and how many each lacks; a decode of another set is a
    ToolError."""
    hyp = read_table(os.path.join(decode_dir, "hyp"))
    theirs = {key: " ".join(kaldi_fields(line.value)) for key, line in hyp.items()}
    both = hyps.keys() & theirs.keys()
    if not both:
        raise ToolError(f"--compare {decode_dir}: none of the {len(hyps)} utterances decoded is in its hyp (a "
                        "decode of another set?)")
    lacking = []
    if hyps.keys() - both:
        lacking.append(f"{len(hyps.keys() - both)} not in {decode_dir}/hyp")
    if theirs.keys() - both:
        lacking.append(f"{len(theirs.keys() - both)} of it not decoded here")
    same = sum(theirs[key] == hyps[key] for key in both)
    return f"; {same} of {len(both)} transcripts identical to {decode_dir}" + (
        f" ({', '.join(lacking)})" if lacking else "")


if __name__ == "__main__":
    run_tool(main)
