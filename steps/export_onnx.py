#!/usr/bin/env python3
"""Export a trained transducer to ONNX for sherpa-onnx: OUTDIR/encoder.onnx, decoder.onnx, joiner.onnx,
tokens.txt, decoding.json (the silence to feed after each utterance, {"tail_silence"}, streaming the
encoder's "window_frames", the "encoder_frame_seconds" and "unit_type" word times need, and the experiment's
"confidence_calibration" where it has one for the checkpoint) and sherpa-onnx.json, the keyword arguments of
sherpa_onnx.OfflineRecognizer.from_transducer (--streaming: OnlineRecognizer.from_transducer) with paths
relative to OUTDIR:

  cd OUTDIR && python3 -c 'import json, sherpa_onnx; r = \
sherpa_onnx.OfflineRecognizer.from_transducer(**json.load(open("sherpa-onnx.json")))'

The front end beyond sherpa-onnx's own fbank (global CMVN, frame stacking) is inside encoder.onnx, and
each graph is checked against the PyTorch model in onnxruntime. A model sherpa-onnx cannot run as it
is (phone units, which it would print as phones; a CTC-only model; another fbank preset; an LSTM
prediction network; streamed: a bidirectional encoder, one without LSTM layers, or a --chunk-frames that
is negative or not a multiple of its unit) is refused with the reason; nothing is silently changed.
A streaming Conformer trained with dynamic chunks exports at another attention chunk with --attention-chunk
(whole: offline, over whole utterances) and --left-chunks (rnnt.attention_chunks).
--check-config CONFIG --unit-type TYPE says so of a model not yet trained (run.sh --deploy asks it first).
An export into the folder of an earlier one removes, and names, the files of it that it does not write itself
(its *.int8.onnx after an --int8 export), so that the folder holds one model.
"""

import os
import shutil
import sys

from rnnt.attention_chunks import add_attention_options, from_args
from rnnt.cli import at_least, check_out_dir, error_line, run_tool, tool_parser, ToolError
from rnnt.data.tokenizer import UNIT_TYPES
from rnnt.export.earlier_files import remove_earlier_files
from rnnt.export.runtime import STREAMING_TAIL, decoding_settings
from rnnt.export.sherpa_onnx import ExportOptions, NotExportable, config_refusals, export


def main() -> str:
    parser = tool_parser(__doc__, "steps/export_onnx.py --streaming exp/deploy exp/deploy/onnx-streaming")
    parser.add_argument("--checkpoint", help="default: the experiment's model.pt, the model its result lines "
                        "name (unless training went past it), else the newest avg-N.pt or checkpoint")
    parser.add_argument("--streaming", action="store_true",
                        help="a streaming encoder (sherpa-onnx's lstm or conformer type)")
    parser.add_argument("--chunk-frames", type=at_least(0), default=0,
                        help="streaming: fbank frames an encoder call advances by, a multiple of stacking x "
                             "the conv front end's strides x StackTime (default: the smallest such multiple of "
                             "at least 4, 40 ms); a conv front end reads its overlap again besides")
    parser.add_argument("--int8", action="store_true",
                        help="also write *.int8.onnx (onnxruntime dynamic quantisation of the matrix products', "
                             "LSTMs' and embedding's weights per output channel; convolutions stay float) and "
                             "point sherpa-onnx.json at them")
    add_attention_options(parser)
    parser.add_argument("--check-config", metavar="CONFIG",
                        help="instead of exporting: whether a model trained from CONFIG over --unit-type units "
                             "could be exported so (what run.sh --deploy asks before training); exit status 1 "
                             "with the reasons if not")
    parser.add_argument("--unit-type", choices=UNIT_TYPES, help="with --check-config")
    parser.add_argument("exp_dir", nargs="?")
    parser.add_argument("out_dir", nargs="?")
    args = parser.parse_args()
    args.attention = from_args(parser, args)
    if args.check_config:
        return check_config(args)
    if not args.out_dir or args.unit_type:
        parser.error("give EXP_DIR and OUT_DIR (--unit-type goes with --check-config)")
    if args.chunk_frames and not args.streaming:
        parser.error("--chunk-frames sets a streaming export's chunks: add --streaming")
    check_out_dir(args.out_dir)
    try:
        result = export_in_place(args, ExportOptions(args.streaming, args.chunk_frames, args.int8, args.attention))
    except (NotExportable, OSError, ValueError, KeyError, RuntimeError) as error:  # (RuntimeError: a graph that
        raise ToolError(error_line(error)) from error  # onnxruntime runs otherwise than PyTorch, a traceback)
    return summary(result, args)


def export_in_place(args, options: ExportOptions) -> dict:
    """export() into a folder beside OUT_DIR, its files moved into OUT_DIR once every graph has passed its check
    (a graph that failed it was left there among an earlier export's files, a mixed folder sherpa-onnx ran), and
    what an earlier export left that this one does not write removed."""
    staging = os.path.normpath(args.out_dir) + ".exporting"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        result = export(args.exp_dir, staging, args.checkpoint, options)
        os.makedirs(args.out_dir, exist_ok=True)
        names = set(os.listdir(staging))
        for name in names:
            os.replace(os.path.join(staging, name), os.path.join(args.out_dir, name))
        result["removed"] = remove_earlier_files(args.out_dir, names)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return result


def summary(result: dict, args) -> str:
    """The summary line of an export; its notes (the attention chunks', an earlier export's files removed) printed
    on standard error first."""
    chunks, note = result["attention"]
    notes = [note] if note else []
    if result["removed"]:
        notes.append(f"removed from {args.out_dir} what an earlier export left that this one does not write: "
                     f"{' '.join(result['removed'])}")
    if args.streaming and not decoding_settings(args.out_dir).get("tail_silence"):
        notes.append("the model's data.tail_silence is 0: a stream's end in sherpa-onnx is fed silence (at least "
                     f"{STREAMING_TAIL} s, for its encoder to see the last frames) that our own decoding never "
                     "appends, and its last words may differ from ours; a deployable config trains with "
                     "data: {tail_silence: 0.5}")
    print("".join(f"export_onnx.py: {line}\n" for line in notes), end="", file=sys.stderr)
    worst = max(result["checked"].values())
    sizes = sum(os.path.getsize(os.path.join(args.out_dir, result["args"][k]))
                for k in ("encoder", "decoder", "joiner"))
    kind = f"streaming, chunks of {result['options'].chunk_frames} frames" if args.streaming else "offline"
    kind += f", attention in {chunks}" if chunks else ""
    return (f"{os.path.basename(result['checkpoint'])} -> {args.out_dir} ({kind}"
            f"{', int8' if args.int8 else ''}, {sizes / 1e6:.1f} MB); onnxruntime matches PyTorch within {worst:.1e}"
            + (" in the float graphs (the int8 ones quantise them: decode a dev set with steps/decode_sherpa_onnx.py "
               "--compare to see what that costs)" if args.int8 else "")
            + f"; words' confidences: {result['confidences']}")


def check_config(args) -> str:
    if args.exp_dir or not args.unit_type:
        raise ToolError("--check-config takes --unit-type and no EXP_DIR or OUT_DIR")
    kind = "streaming" if args.streaming else "offline"
    try:
        why = config_refusals(args.check_config, args.unit_type,
                              ExportOptions(args.streaming, args.chunk_frames, attention=args.attention))
    except (OSError, ValueError, KeyError) as error:
        raise ToolError(error_line(error)) from error
    if why:
        raise ToolError(f"{args.check_config} with {args.unit_type} units: sherpa-onnx could not run its model "
                        f"({kind}):\n  " + "\n  ".join(why))
    return f"{args.check_config} with {args.unit_type} units: exportable for sherpa-onnx ({kind})"


if __name__ == "__main__":
    run_tool(main)
