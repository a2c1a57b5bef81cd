#!/usr/bin/env python3
"""Choose the LM weight and length bonus (and for LODR the low-order LM's weight) of an LM-fused search
on a dev set, and for a transducer with a CTC head the weight of the head's rescoring of its n-best
(rnnt.ctc_rescoring).

Encodes the dev list once, then decodes it with --method (any *_lm or *_lodr of rnnt.search_methods)
at every point of the grid, and without the LM, and keeps the point of the lowest dev WER (on a tie, the
smaller weights). The CTC weights rescore each point's n-best: they cost no search of their own. The
points are searched by --nj processes at once (default: torch's thread count, which OMP_NUM_THREADS sets),
each of one thread: a search is mostly Python, one core each. Writes,
in <exp-dir>/lm/: a copy of the ARPA files, <method>.yaml (what steps/decode.py --method <method> reads)
and <method>.tsv (every point's WER). Choose on dev, never on test.
"""

import argparse
import dataclasses
import filecmp
import itertools
import multiprocessing
import os
import shutil
import sys

import torch
from rnnt.devices import auto_device
from rnnt.progress_bar import progress

from rnnt.cli import (at_least, error_line, glued_values, number_list, run_tool, show_data_reports, tool_parser,
                      ToolError)
from rnnt.ctc_rescoring import check_ctc_head, ctc_log_likelihoods, rescored
from rnnt.decode_results import reference_texts
from rnnt.lm.fusion import OVER, FusionConfig, fusion_config_path, write_fusion_config
from rnnt.prep.download import hex_digest
from rnnt.scoring import percent_text, score
from rnnt.search import remembered_scores
from rnnt.search_methods import LM_METHODS, METHODS, SearchOptions, check_method, search
from rnnt.transcriber import decoding_pipeline, load_model


def encode_all(model, pipeline, device: str) -> list[tuple[list[str], torch.Tensor, torch.Tensor]]:
    """Each batch's keys, encoder output and lengths."""
    encoded = []
    with torch.no_grad():
        for batch in progress(pipeline.batches(), desc="encode", unit="batch"):
            enc, enc_lens = model.encode(batch["feats"].to(device), batch["feat_lens"].to(device))
            encoded.append((batch["keys"], enc, enc_lens))
    return encoded


def parse_args() -> argparse.Namespace:
    parser = tool_parser(__doc__, "steps/tune_lm_fusion.py --method modified_beam_lm --arpa data/lang_phone/"
                                  "lm_word_3gram.arpa --over words exp/transducer data/dev/data.list")
    parser.add_argument("--method", choices=LM_METHODS, default="ctc_prefix_beam_lm")
    parser.add_argument("--arpa", required=True,
                        help="the n-gram LM, over the model's units or over words (steps/build_ngram_lm.py)")
    parser.add_argument("--over", choices=OVER, default="units",
                        help="the LM's words: the model's units (default), or words, searched through a lexicon "
                             "(character or phone units)")
    parser.add_argument("--weights", type=number_list(0), default="0.2,0.4,0.6,0.8,1.0,1.5",
                        help="LM weights to try, comma-separated (default 0.2,0.4,0.6,0.8,1.0,1.5)")
    parser.add_argument("--bonuses", type=number_list(),
                        help="length bonuses to try, comma-separated: added per emitted unit (--over units; default "
                             "0,0.5,1,2,3) or word (--over words; default -2,-1,0,1,2), against the LM's preference "
                             "for short outputs or, below 0, against inserted short words")
    parser.add_argument("--lodr-arpa", help="the *_lodr methods: the low-order LM over the units (a 2-gram from the "
                        "training text, steps/build_ngram_lm.py --order 2 --over units)")
    parser.add_argument("--lodr-weights", type=number_list(0), default="0.1,0.2,0.4",
                        help="the *_lodr methods: low-order LM weights to try (default 0.1,0.2,0.4)")
    parser.add_argument("--ctc-weights", type=number_list(0), default="0,0.2,0.4,0.7,1.0",
                        help="weights of the CTC head's rescoring of a transducer's n-best to try (default "
                             "0,0.2,0.4,0.7,1.0; only 0 for a CTC search or a model without a CTC head)")
    parser.add_argument("--beam", type=at_least(1), default=8)
    parser.add_argument("--checkpoint", help="default: the experiment's model.pt, the model its result lines "
                        "name (unless training went past it), else the newest avg-N.pt or checkpoint")
    parser.add_argument("--batch-size", type=at_least(1), default=16, help="utterances encoded together")
    parser.add_argument("--device", type=auto_device, default="cpu", help="cpu (default), cuda, cuda:N or auto")
    parser.add_argument("--nj", type=at_least(1), default=torch.get_num_threads(),
                        help="grid points searched at once, a process of one thread each (default: torch's thread "
                             f"count, {torch.get_num_threads()} here; 1 on a GPU)")
    parser.add_argument("exp_dir")
    parser.add_argument("dev_list", help="the dev set's data.list (its data dir's text holds the references)")
    args = parser.parse_args(glued_values(sys.argv[1:], ("--bonuses",)))  # --bonuses -2,-1,0: not an option
    if args.bonuses is None:
        args.bonuses = number_list()("0,0.5,1,2,3" if args.over == "units" else "-2,-1,0,1,2")
    if (METHODS[args.method].lm == "lodr") != (args.lodr_arpa is not None):
        parser.error(f"--lodr-arpa goes with the *_lodr methods, and they need it (--method {args.method})")
    return args


def copied(path: str, lm_dir: str) -> str:
    """path copied into lm_dir (unless it is there): the experiment keeps the LMs its yaml names. Another LM of
    the same name there (tuned for another method, or from another dir) is left alone, for the yaml that names
    it: this one takes the next free name (lm-2.arpa)."""
    stem, ext = os.path.splitext(os.path.basename(path))
    for number in itertools.count(1):
        copy = os.path.join(lm_dir, f"{stem}{f'-{number}' if number > 1 else ''}{ext}")
        if os.path.abspath(path) == os.path.abspath(copy):
            return copy
        if not os.path.exists(copy):
            shutil.copyfile(path, copy)
            return copy
        if filecmp.cmp(path, copy, shallow=False):
            return copy


def main() -> str:
    args = parse_args()
    try:
        experiment, model, tokenizer, path = load_model(args.exp_dir, args.checkpoint, True, args.device)
        check_method(model, args.method)
        refs, _ = reference_texts(args.dev_list, None)
        config_path = fusion_config_path(args.exp_dir, args.method)
        lm_dir = os.path.dirname(config_path)
        os.makedirs(lm_dir, exist_ok=True)
        given = FusionConfig(args.arpa, args.over, 0.0, 0.0, args.beam, f"{args.dev_list}, {os.path.basename(path)}",
                             args.lodr_arpa, checkpoint_sha256=hex_digest(path))
        fusion = given.load(tokenizer)  # the user's files checked, and named, before the experiment keeps copies
        base = dataclasses.replace(given, arpa=copied(args.arpa, lm_dir),
                                   lodr_arpa=copied(args.lodr_arpa, lm_dir) if args.lodr_arpa else None)
        show_data_reports()
        pipeline = decoding_pipeline(experiment, tokenizer, args.dev_list, args.batch_size)
    except (OSError, ValueError, KeyError) as error:
        raise ToolError(error_line(error)) from error
    encoded = encode_all(model, pipeline, args.device)
    without_lm = METHODS[args.method].without_lm

    dev = DevSearches(model, tokenizer, refs, encoded)
    lodr_weights = args.lodr_weights if base.lodr_arpa else [0.0]
    ctc_weights = args.ctc_weights if METHODS[args.method].head == "transducer" and model.ctc is not None else [0.0]
    # the search without the LM at each CTC rescoring weight, as the LM's points are: compared with the plain
    # search alone, CTC rescoring's gain was the LM's, and an LM that made dev worse was chosen without a warning
    rows: list = list(zip(ctc_weights, dev.wers(without_lm, SearchOptions(args.beam), ctc_weights)))
    unfused = len(rows)
    grid = [dataclasses.replace(base, weight=w, length_bonus=b, lodr_weight=lw)
            for w in args.weights for b in args.bonuses for lw in lodr_weights]
    nj = 1 if args.device != "cpu" else args.nj
    for point, reports in zip(grid, grid_reports(dev, args.method, args.beam, fusion, grid, ctc_weights, nj)):
        rows += [(dataclasses.replace(point, ctc_weight=cw), report) for cw, report in zip(ctc_weights, reports)]
    chosen, best = min(rows[unfused:], key=lambda row: (row[1].counts.wer, row[0].weight, row[0].lodr_weight,
                                                        row[0].ctc_weight))
    plain_ctc, plain = min(rows[:unfused], key=lambda row: (row[1].counts.wer, row[0]))
    plain_line = plain.wer_line + (f" with CTC rescoring weight {plain_ctc}" if plain_ctc else "")
    write_grid(os.path.join(lm_dir, f"{args.method}.tsv"), rows)
    write_fusion_config(config_path, chosen)
    if plain.counts.wer < best.counts.wer:  # every weight tried is worse than none: said, not hidden
        print(f"tune_lm_fusion.py: warning: the LM makes dev worse at every weight tried ({best.wer_line} at best, "
              f"{plain_line} without it): decode with {without_lm}, or try smaller --weights",
              file=sys.stderr)
    lodr = f", low-order weight {chosen.lodr_weight}" if base.lodr_arpa else ""
    ctc = f", CTC rescoring weight {chosen.ctc_weight}" if chosen.ctc_weight else ""  # one given: it was hidden
    return (f"{config_path}: weight {chosen.weight}, length bonus {chosen.length_bonus}{lodr}{ctc}: dev "
            f"{best.wer_line} ({without_lm} without the LM, beam {args.beam} as the LM's: {plain_line}); "
            f"{len(rows) - unfused} points tried, "
            f"{sum(len(keys) for keys, _, _ in encoded)} of {len(refs)} dev utterances decoded")


_point_reports = None  # grid_reports' function for the processes it forks (a closure does not pickle)


def _reports_of(point):
    return _point_reports(point)


def grid_reports(dev, method: str, beam: int, fusion, grid: list, ctc_weights: list[float], nj: int) -> list:
    """Each grid point's reports (one a CTC weight), in the grid's order, from nj processes at once: each
    forked with the encoded dev set, searching in one thread with memos of its own."""
    global _point_reports

    def point_reports(point):
        point.weigh(fusion)
        return dev.wers(method, SearchOptions(beam, fusion=fusion), ctc_weights)

    bar = {"desc": "LM weights", "unit": "point", "total": len(grid)}
    if nj <= 1 or len(grid) <= 1:
        return [point_reports(point) for point in progress(grid, **bar)]
    _point_reports = point_reports
    with multiprocessing.get_context("fork").Pool(min(nj, len(grid)), torch.set_num_threads, (1,)) as pool:
        return list(progress(pool.imap(_reports_of, grid), **bar))


class DevSearches:
    """Searches of the encoded dev set, scored against refs, with the CTC log-likelihood of each hypothesis
    (and pooled_beam_lm's transducer log-likelihood) computed once however many grid points find it."""

    def __init__(self, model, tokenizer, refs: dict, encoded: list):
        self.model, self.tokenizer, self.refs, self.encoded = model, tokenizer, refs, encoded
        self.ctc_memo: dict = {}  # (utterance, labels) -> log P_CTC
        self.transducer_memos = [{} for _ in encoded]  # a batch's (row, labels) -> log P_transducer (pooled_beam_lm)

    def wers(self, method: str, options: SearchOptions, ctc_weights: list[float]) -> list:
        """The dev WER report of each CTC rescoring weight, from one search."""
        keys, nbests, likelihoods = [], [], []
        for (batch_keys, enc, enc_lens), memo in zip(self.encoded, self.transducer_memos):
            nbests_of_batch = search(self.model, enc, enc_lens, method, dataclasses.replace(options, likelihoods=memo))
            for b, (key, nbest) in enumerate(zip(batch_keys, nbests_of_batch)):
                keys.append(key)
                nbests.append(nbest)
                likelihoods.append(ctc_scores(self.model, self.ctc_memo, key, enc[b], int(enc_lens[b]), nbest)
                                   if any(ctc_weights) else [0.0] * len(nbest))
        return [score(self.refs, {key: self.tokenizer.text(nbest[0])
                                  for key, nbest in zip(keys, rescored(nbests, likelihoods, weight))})
                for weight in ctc_weights]


def ctc_scores(model, memo: dict, key: str, enc: torch.Tensor, enc_len: int, nbest: list) -> list[float]:
    """log P_CTC of each hypothesis of one utterance's n-best, computing only those not in memo."""
    def compute(missing):
        check_ctc_head(model)
        return ctc_log_likelihoods(model, enc, enc_len, missing).tolist()

    return remembered_scores(memo, key, nbest, compute)


def write_grid(path: str, rows: list) -> None:
    """Every point's dev WER as a table (the first rows: the search without the LM, a row of its CTC rescoring
    weight each; a point of those is that weight alone), rounded as the %WER lines are (compute-wer's float: 1462
    of 1491 words 98.06, where the table said 98.05)."""
    def wer(report) -> str:
        return percent_text(report.counts.errors, report.counts.reference_words)

    with open(path, "w", encoding="utf-8") as f:
        f.write("weight\tlength_bonus\tlodr_weight\tctc_weight\tdev_wer\n")
        f.writelines(f"{p.weight}\t{p.length_bonus}\t{p.lodr_weight}\t{p.ctc_weight}\t{wer(report)}\n"
                     if not isinstance(p, float) else f"none\tnone\tnone\t{p}\t{wer(report)}\n" for p, report in rows)


if __name__ == "__main__":
    run_tool(main)
