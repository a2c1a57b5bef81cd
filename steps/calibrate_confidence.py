#!/usr/bin/env python3
"""Calibrate an experiment's word confidences on a dev set: decode it (--method, greedy by default), align each
word with its reference, and fit the scale and offset of a logistic map of a word's raw confidence (the product
of its units' posteriors, rnnt.confidence) to the chance that it is right, as Kaldi's steps/conf calibrates
lattice confidences. Writes <exp-dir>/confidence_calibration.json, which decode.py, transcribe.py and the
Transcriber then apply (decode.py --raw-confidences does not), and an export carries into sherpa-onnx
(decoding.json), for the words of the checkpoint it was fitted with (--checkpoint; by default decode.py's) and
of searches of the same head (the transducer's, or the CTC head's): others' are left uncalibrated, with the
reason. Prints the dev set's NCE and AUC before and after: the calibration changes NCE, not the order of
the words (AUC). Choose the dev set, never a test set. A dev set whose words are all right (or all wrong) has
nothing to calibrate on: it says so and writes nothing.
"""

import json
import os
import time

from rnnt.progress_bar import progress

from rnnt.cli import at_least, error_line, run_tool, tool_parser, ToolError
from rnnt.confidence import (CALIBRATION_FILE, area_under_curve, fit_calibration, normalised_cross_entropy,
                             scored_words)
from rnnt.decode_results import reference_texts
from rnnt.prep.download import hex_digest
from rnnt.search_methods import METHODS, SearchOptions
from rnnt.transcriber import (decode_batch_nbest, decoding_pipeline, load_model, seconds_per_encoder_frame,
                              words_with_times)


def decoded_words(exp_dir: str, checkpoint: str | None, data_list: str, method: str,
                  batch_size: int) -> tuple[dict[str, list[dict]], str]:
    """Each utterance's words with their raw confidences, not rounded; the checkpoint decoded."""
    experiment, model, tokenizer, checkpoint = load_model(exp_dir, checkpoint)
    frame_seconds, words = seconds_per_encoder_frame(experiment), {}
    for batch in progress(decoding_pipeline(experiment, tokenizer, data_list, batch_size).batches(),
                          desc="decode", unit="batch"):
        nbests = decode_batch_nbest(model, batch["feats"], batch["feat_lens"], method, SearchOptions(4, None))
        for key, nbest, duration in zip(batch["keys"], nbests, batch["seconds"]):
            words[key] = words_with_times(tokenizer, nbest[0], frame_seconds, duration, rounded=False)
    return words, checkpoint


def main() -> str:
    parser = tool_parser(__doc__, "steps/calibrate_confidence.py exp/deploy data/dev/data.list")
    parser.add_argument("--method", default="greedy", choices=[m for m, spec in METHODS.items() if not spec.lm],
                        help="the search whose words are calibrated (default greedy; the calibration serves every "
                        "search of the same head: a CTC search's words need one of their own)")
    parser.add_argument("--checkpoint", help="the checkpoint whose words are calibrated (default: decode.py's); "
                        "decodes of another checkpoint leave theirs uncalibrated")
    parser.add_argument("--batch-size", type=at_least(1), default=16)
    parser.add_argument("--text", help="the reference Kaldi text (default: <the list's dir>/text if there, else the "
                        "transcripts in the list)")
    parser.add_argument("exp_dir")
    parser.add_argument("dev_list")
    args = parser.parse_args()
    start = time.perf_counter()
    try:
        refs, _ = reference_texts(args.dev_list, args.text)
        words, checkpoint = decoded_words(args.exp_dir, args.checkpoint, args.dev_list, args.method, args.batch_size)
        if words and not set(words) & set(refs):  # (another set's --text: 'no word decoded', exit 0)
            raise ValueError(f"{args.text or args.dev_list}: a reference for none of the {len(words)} utterances "
                             f"decoded from {args.dev_list} (another set's text?); nothing calibrated")
        confidences, correct = scored_words(refs, words)
        # all right, all wrong or no word at all (a first short training on a new corpus): an outcome, not an
        # error, so that a recipe's stage goes on
        if all(correct) or not any(correct):
            outcome = (f"all {len(correct)} words of {args.dev_list} {'right' if all(correct) else 'wrong'}"
                       if correct else f"no word decoded from {args.dev_list}")
            kept = os.path.isfile(os.path.join(args.exp_dir, CALIBRATION_FILE))  # (said 'stay uncalibrated' of it)
            return (f"{outcome}: nothing to calibrate on; " + (
                f"{CALIBRATION_FILE}, as it was, still calibrates what it names" if kept else
                f"{os.path.basename(checkpoint)}'s words' confidences stay uncalibrated"))
        calibration = fit_calibration(confidences, correct)
        digest = hex_digest(checkpoint)
    except (OSError, ValueError, KeyError) as error:
        raise ToolError(error_line(error)) from error
    calibrated = [calibration.apply(c) for c in confidences]
    before, after = (normalised_cross_entropy(values, correct) for values in (confidences, calibrated))
    auc = area_under_curve(confidences, correct)
    path = os.path.join(args.exp_dir, CALIBRATION_FILE)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"scale": calibration.scale, "offset": calibration.offset, "checkpoint": os.path.basename(checkpoint),
                   "checkpoint_sha256": digest, "head": METHODS[args.method].head, "method": args.method,
                   "dev_list": os.path.abspath(args.dev_list), "words": len(correct), "right": sum(correct),
                   "nce_before": round(before, 4), "nce_after": round(after, 4), "auc": round(auc, 4)}, f, indent=2)
        f.write("\n")
    against = "; the confidences ran against the words' being right: each word gets the share right (scale 0)" \
        if calibration.scale == 0 else ""
    return (f"{path}: scale {calibration.scale:.3f}, offset {calibration.offset:.3f} from {len(correct)} words of "
            f"{args.dev_list} ({sum(correct)} right, {args.method}, {os.path.basename(checkpoint)}); "
            f"NCE {before:.3f} -> {after:.3f}, AUC {auc:.3f}{against}; {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    run_tool(main)
