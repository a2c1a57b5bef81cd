#!/usr/bin/env python3
"""Combine several models' decodes of one data list (system combination, rnnt.system_combination): their
n-best lists (steps/decode.py --nbest: EXP/decode-SET-METHOD-TAG/nbest.json) pooled per utterance, every
hypothesis scored again by each model (its transducer over all alignments, its CTC head) and an LM (an
--lm-fusion yaml, as decode.py takes: its weight and bonus as tuned there), and the best weighted sum kept.

With --tune the weights are chosen on the data list's references over a grid (the first feature and the
LM weigh 1, every other feature each of --grid; on a tie the first point) and written to OUT/weights.yaml,
every point's WER to OUT/tuning.tsv; with --weights FILE (a dev set's weights.yaml) they are read. Tune on
dev, never on test. Writes OUT/ as decode.py writes a decode dir (hyp, ref, recogs, wer, errs, per for phones,
per_spk where the list's data dir has utt2spk).
"""

import math
import os
import sys

import torch
import yaml

from rnnt.cli import check_out_dir, error_line, number_list, run_tool, tool_parser, ToolError
from rnnt.config import read_yaml
from rnnt.decode_results import reference_texts, write_results
from rnnt.lm.fusion import read_fusion_config
from rnnt.phone_scoring import hypothesis_phones, write_phone_error_rate
from rnnt.prep.download import changed_since, hex_digest
from rnnt.progress_bar import progress
from rnnt.scoring import percent_text, words as reference_words
from rnnt.system_combination import LM, choose, feature_names, grid_errors, lm_features, model_features, pool, \
    read_nbest, weight_grid
from rnnt.transcriber import decoding_pipeline, load_model


def parse_args():
    parser = tool_parser(__doc__, "steps/combine_nbest.py --system exp/a exp/a/avg-5.pt "
                                  "exp/a/decode-dev-pooled_beam_lm-avg5 --system exp/b exp/b/avg-5.pt "
                                  "exp/b/decode-dev-pooled_beam_lm-avg5 --lm-fusion exp/a/lm/pooled_beam_lm.yaml "
                                  "--tune data/dev/data.list exp/combined/decode-dev")
    parser.add_argument("--system", nargs=3, action="append", required=True,
                        metavar=("EXP_DIR", "CHECKPOINT", "DECODE_DIR"),
                        help="a model and the decode dir of its n-best (decode.py --nbest); two or more")
    parser.add_argument("--lm-fusion", required=True, help="the LM and its weights (an EXP/lm/<method>.yaml)")
    choice = parser.add_mutually_exclusive_group(required=True)
    choice.add_argument("--tune", action="store_true", help="choose the weights on this data list's references")
    choice.add_argument("--weights", help="a weights.yaml that --tune wrote (on dev)")
    parser.add_argument("--grid", type=number_list(0), default="0,0.2,0.4,0.7,1.0",
                        help="weights --tune tries (default 0,0.2,0.4,0.7,1.0)")
    parser.add_argument("data_list")
    parser.add_argument("out_dir")
    return parser.parse_args()


def load_systems(systems) -> list:
    """Each system's (experiment, model, tokenizer, checkpoint); they must share their units, which every model
    scores every pooled hypothesis in."""
    models = [load_model(exp, checkpoint, True, "cpu") for exp, checkpoint, _ in systems]
    for (exp, _, _), (_, _, tokenizer, _) in zip(systems[1:], models[1:]):
        if tokenizer.units != models[0][2].units:
            raise ValueError(f"{exp}: its units are not those of {systems[0][0]} (its lang dir's units.txt): the "
                             "systems must share their units to score each other's hypotheses")
    return models


def tuned_with(lm_fusion: str, checkpoints: dict[str, str]) -> dict:
    """What weights.yaml records of the files its weights were tuned with: the LM's and each system's checkpoint
    (exp -> path), by their SHA-256."""
    return {"lm_fusion": lm_fusion, "lm_fusion_sha256": hex_digest(lm_fusion),
            "checkpoints": dict(checkpoints),
            "checkpoints_sha256": {exp: hex_digest(path) for exp, path in checkpoints.items()}}


def check_tuned_with(path: str, values: dict, lm_fusion: str, checkpoints: dict[str, str]) -> None:
    """ValueError where weights.yaml's weights were tuned with another LM or another checkpoint of a system than
    this run's (one written before the digests: not checked): a retrained system's scores have another scale."""
    if values.get("lm_fusion_sha256") not in (None, hex_digest(lm_fusion)):
        raise ValueError(f"{path}: tuned with another --lm-fusion than {lm_fusion} ({values.get('lm_fusion')} as it "
                         "was then): give the one --tune had")
    recorded = values.get("checkpoints_sha256") or {}
    for exp, checkpoint in checkpoints.items():
        if changed_since(checkpoint, str(recorded.get(exp, ""))):
            raise ValueError(f"{path}: tuned with another checkpoint of {exp} than {checkpoint} "
                             f"({(values.get('checkpoints') or {}).get(exp)} as it was then): tune again on dev")


def read_weights(path: str, names: list[str], lm_fusion: str, checkpoints: dict[str, str]) -> list[float]:
    """The weight of each feature in names from a weights.yaml --tune wrote, with this --lm-fusion and these
    checkpoints (check_tuned_with)."""
    values = read_yaml(path)
    weights = values.get("weights") if isinstance(values, dict) else None
    if not isinstance(weights, dict):
        raise ValueError(f"{path}: expected 'weights:' mapping each feature to its weight (what --tune writes)")
    check_tuned_with(path, values, lm_fusion, checkpoints)
    missing, other = [name for name in names if name not in weights], [name for name in weights if name not in names]
    if missing or other:  # (weights of a system left out of this run dropped silently: a combination of others)
        what = f"no weight for {', '.join(missing)}" if missing else f"weights for {', '.join(map(str, other))}, " \
            "which this run has no feature of"
        raise ValueError(f"{path}: {what} (it weighs {', '.join(map(str, weights))}): tuned for other systems; give "
                         "the same --system as --tune had")
    try:
        values = [float(weights[name]) for name in names]
    except (TypeError, ValueError):
        values = []
    if len(values) != len(names) or not all(math.isfinite(v) and v >= 0 for v in values):  # .nan: every total nan
        raise ValueError(f"{path}: a weight that is not a finite number of at least 0 in {weights}")
    return values


def scored_pools(systems, models, fusion_yaml: str, data_list: str):
    """The feature names, and per utterance its pooled hypotheses and their feature rows."""
    vocab_size = models[0][2].vocab_size  # the systems share their units (checked)
    nbests = [read_nbest(os.path.join(decode_dir, "nbest.json"), vocab_size) for _, _, decode_dir in systems]
    pools = pool(nbests)
    for (_, _, decode_dir), nbest in zip(systems, nbests):
        if lacking := sorted(set(pools) - set(nbest)):  # pooled from the others alone, silently
            print(f"combine_nbest.py: {os.path.join(decode_dir, 'nbest.json')} lacks {len(lacking)} of the "
                  f"{len(pools)} pooled utterances (a decode of another list, or cut short): theirs are the other "
                  f"systems' hypotheses alone: {' '.join(lacking[:5])}", file=sys.stderr)
    names, rows = [], {key: [[] for _ in hyps] for key, hyps in pools.items()}
    for (exp, _, _), (experiment, model, tokenizer, _) in zip(systems, models):
        own = feature_names(os.path.normpath(exp), model)
        names += own
        scored = set()
        for batch in progress(decoding_pipeline(experiment, tokenizer, data_list, 8).batches(), desc=exp, unit="batch"):
            with torch.no_grad():
                enc, enc_lens = model.encode(batch["feats"], batch["feat_lens"])
            for b, key in enumerate(batch["keys"]):
                if key in pools and key not in scored:
                    scored.add(key)
                    for row, features in zip(rows[key], model_features(model, enc[b], int(enc_lens[b]), pools[key])):
                        row += features
        unscored = sorted(set(pools) - scored)
        for key in unscored:  # not in the list, or its audio unreadable by this system: no weighting uses it
            for row in rows[key]:
                row += [-math.inf] * len(own)
        if unscored:
            print(f"combine_nbest.py: {exp} scored no hypothesis of {len(unscored)} pooled utterances (not in "
                  f"{data_list}, or its audio unreadable): their {', '.join(own)} are -inf: "
                  f"{' '.join(unscored[:5])}", file=sys.stderr)
    fusion = read_fusion_config(fusion_yaml).load(models[0][2])
    for key, hyps in pools.items():
        for row, features in zip(rows[key], lm_features(fusion, hyps)):
            row += features
    return names + [LM], pools, rows, models[0][2]


def chosen_hypotheses(pools, rows, weights) -> dict:
    return {key: choose(hyps, rows[key], weights) for key, hyps in pools.items()}


def main() -> str:
    args = parse_args()
    exps = [os.path.normpath(exp) for exp, _, _ in args.system]
    if len(exps) < 2 or len(set(exps)) < len(exps):
        raise ToolError(f"give two or more --system of different experiments, got {' '.join(exps)}")
    check_out_dir(args.out_dir)
    try:
        refs, refs_from = reference_texts(args.data_list, None)
        models = load_systems(args.system)
        checkpoints = {exp: checkpoint for exp, (_, _, _, checkpoint) in zip(exps, models)}
        if args.weights:  # before the scoring: weights of other systems would be found wanting after it
            weights = read_weights(args.weights, [name for exp, (_, model, _, _) in zip(exps, models)
                                                  for name in feature_names(exp, model)] + [LM], args.lm_fusion,
                                   checkpoints)
        names, pools, rows, tokenizer = scored_pools(args.system, models, args.lm_fusion, args.data_list)
    except (OSError, ValueError, KeyError) as error:
        raise ToolError(error_line(error)) from error
    os.makedirs(args.out_dir, exist_ok=True)
    if args.tune:
        grid = list(weight_grid(names, args.grid))
        errors = grid_errors(pools, rows, refs, grid)
        words = max(sum(len(reference_words(ref)) for ref in refs.values()), 1)  # as the wer file counts
        with open(os.path.join(args.out_dir, "tuning.tsv"), "w", encoding="utf-8") as f:
            f.write("\t".join(names + ["wer"]) + "\n")
            f.writelines("\t".join([f"{x:g}" for x in w] + [percent_text(e, words)]) + "\n"
                         for e, w in zip(errors, grid))
        weights = grid[errors.index(min(errors))]
        with open(os.path.join(args.out_dir, "weights.yaml"), "w", encoding="utf-8") as f:
            yaml.safe_dump({"weights": dict(zip(names, weights)), "chosen_on": args.data_list,
                            **tuned_with(args.lm_fusion, checkpoints)}, f, sort_keys=False)
    best = chosen_hypotheses(pools, rows, weights)
    report = write_results(args.out_dir, refs, {key: " ".join(hyp.words) for key, hyp in best.items()}, refs_from,
                           "combine_nbest.py")
    per = "" if tokenizer.kind != "phone" else "; " + write_phone_error_rate(
        args.out_dir, refs, {key: hypothesis_phones(tokenizer, hyp.tokens) for key, hyp in best.items()}, tokenizer)
    chosen = ", ".join(f"{name} {w:g}" for name, w in zip(names, weights))
    return (f"{args.out_dir}: {report.wer_line}{per}; weights {chosen}; {sum(map(len, pools.values()))} hypotheses "
            "pooled")


if __name__ == "__main__":
    run_tool(main)
