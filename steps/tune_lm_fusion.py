#!/usr/bin/env python3
"""Choose the LM weight and length bonus of CTC prefix beam search with an n-gram LM on a dev set.

Encodes the dev list once, then decodes it with every weight x bonus of the grid (and without the LM)
and keeps the pair of the lowest dev WER (on a tie, the smaller weight). Writes, in <exp-dir>/lm/: a
copy of the ARPA file, fusion.yaml (what steps/decode.py --method ctc_prefix_beam_lm reads) and
tuning.tsv (every pair's WER). Choose on dev, never on test.
"""

import argparse
import os
import shutil

import torch
from rnnt.progress_bar import progress

from rnnt.cli import ToolError, run_tool, tool_parser
from rnnt.ctc_search import ctc_prefix_beam_search
from rnnt.decode_results import reference_texts
from rnnt.lm.fusion import OVER, fusion_config_path, load_fusion, write_fusion_config
from rnnt.scoring import score
from rnnt.transcriber import check_method, decoding_pipeline, load_model


def float_list(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got '{text}'") from None


def encode_all(model, pipeline, device: str) -> dict[str, torch.Tensor]:
    """Each utterance's encoder output (frames, dim), on the CPU."""
    encoded = {}
    with torch.no_grad():
        for batch in progress(pipeline.batches(), desc="encode", unit="batch"):
            enc, enc_lens = model.encode(batch["feats"].to(device), batch["feat_lens"].to(device))
            for key, e, n in zip(batch["keys"], enc.cpu(), enc_lens.tolist()):
                encoded[key] = e[:n]
    return encoded


def parse_args() -> argparse.Namespace:
    parser = tool_parser(__doc__, "steps/tune_lm_fusion.py --arpa data/lang_char/lm_6gram.arpa "
                                  "exp/deepspeech data/dev/data.list")
    parser.add_argument("--arpa", required=True, help="the n-gram LM, over the model's units or over words (steps/build_ngram_lm.py)")
    parser.add_argument("--over", choices=OVER, default="units",
                        help="the LM's words: the model's units (default), or words, searched through a lexicon "
                             "(character or phone units)")
    parser.add_argument("--weights", type=float_list, default="0.2,0.4,0.6,0.8,1.0,1.5",
                        help="LM weights to try, comma-separated (default 0.2,0.4,0.6,0.8,1.0,1.5)")
    parser.add_argument("--bonuses", type=float_list,
                        help="length bonuses to try, comma-separated: added per emitted unit (--over units; default "
                             "0,0.5,1,2,3) or word (--over words; default -2,-1,0,1,2), against the LM's preference "
                             "for short outputs or, below 0, against inserted short words")
    parser.add_argument("--beam", type=int, default=8)
    parser.add_argument("--checkpoint", help="default: the newest avg-N.pt, else the newest checkpoint")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("exp_dir")
    parser.add_argument("dev_list", help="the dev set's data.list (its data dir's text holds the references)")
    args = parser.parse_args()
    if args.bonuses is None:
        args.bonuses = float_list("0,0.5,1,2,3" if args.over == "units" else "-2,-1,0,1,2")
    if args.beam < 1 or min(args.weights) < 0:
        parser.error("--beam must be at least 1 and the weights at least 0")
    return args


def main() -> str:
    args = parse_args()
    try:
        experiment, model, tokenizer, path = load_model(args.exp_dir, args.checkpoint, True, args.device)
        check_method(model, "ctc_prefix_beam_lm")
        refs, _ = reference_texts(args.dev_list, None)
        lm_dir = os.path.dirname(fusion_config_path(args.exp_dir))
        os.makedirs(lm_dir, exist_ok=True)
        arpa = os.path.join(lm_dir, os.path.basename(args.arpa))
        if os.path.abspath(args.arpa) != os.path.abspath(arpa):
            shutil.copyfile(args.arpa, arpa)
        fusion = load_fusion(arpa, tokenizer, 0.0, 0.0, args.over)
    except (OSError, ValueError, KeyError) as error:
        raise ToolError(str(error)) from error
    encoded = encode_all(model, decoding_pipeline(experiment, tokenizer, args.dev_list, args.batch_size), args.device)

    def dev_wer(with_lm: bool):
        hyps = {key: tokenizer.text(ctc_prefix_beam_search(model, enc, enc.shape[0], args.beam,
                                                           fusion if with_lm else None)[0])
                for key, enc in encoded.items()}
        return score(refs, hyps)

    rows = [("none", "none", dev_wer(False))]
    grid = [(w, b) for w in args.weights for b in args.bonuses]
    for weight, bonus in progress(grid, desc="weights x bonuses"):
        fusion.weight, fusion.length_bonus = weight, bonus
        rows.append((weight, bonus, dev_wer(True)))
    weight, bonus, best = min(rows[1:], key=lambda row: (row[2].counts.wer, row[0]))
    with open(os.path.join(lm_dir, "tuning.tsv"), "w", encoding="utf-8") as f:
        f.write("weight\tlength_bonus\tdev_wer\n")
        f.writelines(f"{w}\t{b}\t{report.counts.wer:.2f}\n" for w, b, report in rows)
    config = fusion_config_path(args.exp_dir)
    write_fusion_config(config, arpa, args.over, weight, bonus, args.beam, f"{args.dev_list}, {os.path.basename(path)}")
    return (f"{config}: weight {weight}, length bonus {bonus}: dev {best.wer_line} "
            f"(without the LM: {rows[0][2].wer_line}); {len(grid)} pairs tried, {len(encoded)} of {len(refs)} "
            f"dev utterances decoded")


if __name__ == "__main__":
    run_tool(main)
