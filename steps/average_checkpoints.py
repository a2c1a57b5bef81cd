#!/usr/bin/env python3
"""Average model weights over epoch checkpoints: the last N, or the N with the lowest validation loss.

Where a checkpoint holds EMA weights, those are averaged (--no-ema: the raw weights). Integer buffers
are taken from the newest checkpoint. Writes <exp-dir>/avg-<N>.pt for --last (or --output), which decode.py
reads as the tag avg<N>-epoch-<last epoch>; --best writes <exp-dir>/avg-best-<N>.pt, another set of epochs
that the tag would misname (decode it with --checkpoint), and --no-ema adds -raw (avg-<N>-raw.pt): the tag
decodes the recipe's average, of EMA weights where they are kept. An average written into the experiment dir
becomes its model.pt (a link), the model transcription and export take by default.
"""

import math
import os
import sys

import torch

from rnnt.cli import ToolError, at_least, cannot_write, run_tool, tool_parser
from rnnt.training import checkpoint
from rnnt.training.checkpoint_names import point


def average(paths: list[str], use_ema: bool) -> tuple[dict[str, torch.Tensor], str]:
    """The weights' average, and which weights they are ("ema" where any checkpoint kept EMA weights and use_ema,
    else "raw"); checkpoints of another model than the first's (other tensors, shapes or units: a file copied in
    from another experiment) are refused, naming them."""
    total: dict[str, torch.Tensor] = {}
    newest, first, kind = None, None, "raw"  # "ema" where any was (a run that switched EMA on midway mixes them)
    for path in paths:
        state = checkpoint.load(path)
        weights = state["ema"] if use_ema and state.get("ema") is not None else state["model"]
        kind = "ema" if weights is state.get("ema") else kind
        model = ({name: tuple(value.shape) for name, value in weights.items()}, state["meta"].get("units"))
        first = first or (path, model)
        units_differ = None not in (model[1], first[1][1]) and model[1] != first[1][1]  # none kept before 11-30
        if model[0] != first[1][0] or units_differ:
            what = "other tensors or shapes" if model[0] != first[1][0] else "other units"
            raise ToolError(f"{path}: another model than {first[0]}'s ({what}); nothing averaged")
        newest = weights
        for name, value in weights.items():
            if value.dtype.is_floating_point:
                total[name] = total.get(name, 0) + value.double()
    return {name: (total[name] / len(paths)).to(value.dtype) if value.dtype.is_floating_point else value
            for name, value in newest.items()}, kind


def best_epochs(paths: list[str], n: int) -> list[str]:
    """The n epochs of paths with the lowest validation loss, in epoch order (the newest last; not as text: 10
    after 9). An epoch whose validation left a batch out of memory scored another, shorter dev set: not ranked;
    nor one validated on another dev set than the newest validated epoch (the list changed on a resume:
    valid_dev_set), nor one whose loss is not a number (a NaN is neither below nor above any other: the whole
    order broke), nor one not validated (trained before a valid list was given on a resume, or after it was
    dropped on one: the newest epoch's missing dev set refused every validated one)."""
    metas = [(checkpoint.load_meta(p), p) for p in paths]
    validated = [(meta, p) for meta, p in metas if meta.get("valid_loss") is not None]
    if not validated:
        raise ToolError("no epoch has a validation loss (train with a valid list); use --last")
    reference = validated[-1][1]
    dev_set = validated[-1][0].get("valid_dev_set")  # none kept before 12-02: taken to be the same
    for meta, path in metas:
        if meta.get("valid_loss") is None:  # trained without a valid list (one given on a resume: the rest have it)
            print(f"average_checkpoints.py: {path}: not validated; not ranked", file=sys.stderr)
        elif not math.isfinite(meta["valid_loss"]):
            print(f"average_checkpoints.py: {path}: validation loss {meta['valid_loss']}; not ranked", file=sys.stderr)
        elif None not in (dev_set, meta.get("valid_dev_set")) and meta["valid_dev_set"] != dev_set:
            print(f"average_checkpoints.py: {path}: validated on another dev set than {os.path.basename(reference)};"
                  " not ranked", file=sys.stderr)
    scored = [(meta["valid_loss"], p) for meta, p in metas if meta.get("valid_loss") is not None
              and not meta.get("valid_skipped_out_of_memory") and math.isfinite(meta["valid_loss"])
              and meta.get("valid_dev_set", dev_set) in (dev_set, None)]
    if len(scored) < n:
        raise ToolError(f"only {len(scored)} epochs were validated on the whole dev set to a finite loss (the "
                        "others left batches out of memory, or are named above); use --last or a smaller N")
    best = {p for _, p in sorted(scored, key=lambda scored_path: scored_path[0])[:n]}
    return [p for p in paths if p in best]


def main() -> str:
    parser = tool_parser(__doc__, "steps/average_checkpoints.py --last 10 exp/transducer")
    how = parser.add_mutually_exclusive_group(required=True)
    how.add_argument("--last", type=at_least(1), help="average the last N epochs")
    how.add_argument("--best", type=at_least(1), help="average the N epochs with the lowest validation loss")
    parser.add_argument("--no-ema", action="store_true", help="average the raw weights even where EMA weights exist")
    parser.add_argument("--output", help="default <exp-dir>/avg-<N>.pt (--best: avg-best-<N>.pt; --no-ema: "
                        "avg-<N>-raw.pt, avg-best-<N>-raw.pt)")
    parser.add_argument("exp_dir")
    args = parser.parse_args()
    paths = checkpoint.numbered(args.exp_dir, "epoch")
    n = args.last or args.best
    if len(paths) < n:
        raise ToolError(f"{args.exp_dir} has {len(paths)} epoch checkpoints, fewer than {n}")
    try:
        if args.best:
            chosen = best_epochs(paths, n)
        else:
            chosen = paths[-n:]
        default = (checkpoint.name("average", n) if args.last else f"avg-best-{n}.pt")[:-len(".pt")]
        default += "-raw.pt" if args.no_ema else ".pt"
        output = args.output or os.path.join(args.exp_dir, default)
        meta = {key: value for key, value in checkpoint.load_meta(chosen[-1]).items() if key != "slimmed"}
        meta["averaged"] = [os.path.basename(p) for p in chosen]
        meta["step"] = checkpoint.load_meta(paths[-1])["step"]  # trained so far (--best: past its newest epoch):
        # decoding takes the average until more is trained (checkpoint.for_decoding)
        weights, meta["averaged_weights"] = average(chosen, not args.no_ema)
    except checkpoint.UnreadableCheckpoint as error:
        raise ToolError(f"{error}; nothing averaged (remove the file, or retrain that epoch)") from error
    except FileNotFoundError as error:  # a link to a checkpoint that is gone: a traceback
        raise ToolError(f"{error.filename}: no such file (a link to a checkpoint that is gone?); nothing averaged "
                        "(remove it, or retrain that epoch)") from error
    try:
        checkpoint.save(output, {"model": weights, "ema": None, "meta": meta})
    except OSError as error:  # --output in a dir that is not there, or a dir
        raise cannot_write(output, "the average", error) from error
    linked = ""
    if os.path.samefile(os.path.dirname(os.path.abspath(output)), args.exp_dir):  # the average written last is what
        try:  # transcription and export take (until run.sh names another)
            linked = f"; {point(args.exp_dir, output) or 'model.pt links to it'}"
        except OSError as error:
            linked = f"; model.pt not linked to it ({error.strerror})"
    return (f"{output}: averaged {', '.join(os.path.basename(p) for p in chosen)}"
            f" ({meta['averaged_weights']} weights){linked}")  # (it said EMA where none was kept)


if __name__ == "__main__":
    run_tool(main)
