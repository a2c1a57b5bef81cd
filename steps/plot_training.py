#!/usr/bin/env python3
"""Plot training loss and dev WER against wall-clock training time, from experiments' train.log.

One line per experiment dir, so that models are compared by time to accuracy. Time counts only while
training ran: a gap of more than --max-gap minutes between log lines (a stopped and resumed run) is
left out. Writes a PNG.
"""

import os
import re
import sys
from datetime import datetime

from rnnt.cli import ToolError, above, cannot_write, run_tool, tool_parser

STAMP = r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \[rank 0\] "
TRAIN = re.compile(STAMP + r"epoch \d+ step (?P<step>\d+): loss (?P<loss>[0-9.eE+-]+|nan|inf)")
VALID = re.compile(STAMP + r"epoch (?P<epoch>\d+)(?: step \d+)? validation[^:]*: loss (?P<loss>[0-9.eE+-]+|nan|inf)"
                   r"(?:, WER (?P<wer>[0-9.]+)%)?")


def read_log(
    path: str, max_gap_seconds: float
) -> tuple[list[tuple[float, float]], list[tuple[float, float, float | None]]]:
    """(minutes, training loss) points and (minutes, dev loss, dev WER or None) points; a line of either kind
    whose date or numbers do not read (a log damaged by hand or by a full disk) is named and left out."""
    train, valid = [], []
    elapsed, last = 0.0, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            match = TRAIN.match(line) or VALID.match(line)
            if match is None:
                continue
            try:
                now = datetime.strptime(match["time"], "%Y-%m-%d %H:%M:%S,%f")
                wer = match.groupdict().get("wer")
                loss, wer = float(match["loss"]), float(wer) if wer else None
            except ValueError as error:
                print(f"plot_training.py: {path}:{number}: {error}; line left out", file=sys.stderr)
                continue
            if last is not None and 0 <= (now - last).total_seconds() <= max_gap_seconds:
                elapsed += (now - last).total_seconds()
            last = now
            if "step" in match.groupdict():
                train.append((elapsed / 60, loss))
            else:
                valid.append((elapsed / 60, loss, wer))
    return train, valid


def plot(runs: list[tuple[str, list, list]], output: str, title: str) -> None:
    """Training loss and dev loss above, dev WER below, against training time in minutes; written to output."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (loss_axes, wer_axes) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for label, train, valid in runs:
        if train:
            loss_axes.plot(*zip(*train), label=f"{label} (training)", alpha=0.6)
        if valid:
            line = loss_axes.plot([v[0] for v in valid], [v[1] for v in valid], "o-", markersize=3,
                                  label=f"{label} (dev)")[0]
            scored = [(m, w) for m, _, w in valid if w is not None]
            if scored:
                wer_axes.plot(*zip(*scored), "o-", markersize=3, color=line.get_color(), label=label)
    loss_axes.set_ylabel("loss per utterance")
    loss_axes.set_yscale("log")
    loss_axes.legend(fontsize=8)
    loss_axes.grid(alpha=0.3)
    wer_axes.set_ylabel("dev WER (%)")
    wer_axes.set_xlabel("training time (minutes)")
    wer_axes.set_ylim(0, min(100, max((w for _, _, v in runs for *_, w in v if w is not None), default=100) * 1.05))
    wer_axes.legend(fontsize=8)
    wer_axes.grid(alpha=0.3)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    figure.savefig(output, dpi=100)


def main() -> str:
    parser = tool_parser(__doc__, "steps/plot_training.py exp/training.png exp/transducer exp/deepspeech")
    parser.add_argument("output", help="the PNG to write")
    parser.add_argument("exp_dirs", nargs="+", help="experiment dirs holding train.log")
    parser.add_argument("--labels", help="comma-separated names for the experiments (default: their dir names)")
    parser.add_argument("--max-gap", type=above(0), default=10.0, help="minutes between log lines counted as a pause")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    labels = args.labels.split(",") if args.labels else [os.path.basename(os.path.normpath(d)) for d in args.exp_dirs]
    if len(labels) != len(args.exp_dirs):
        parser.error(f"--labels names {len(labels)} experiments, {len(args.exp_dirs)} given")
    output = args.output if os.path.splitext(args.output)[1] else args.output + ".png"  # (as matplotlib writes it)
    if os.path.splitext(output)[1].lower() != ".png":  # (out.txt: matplotlib's ValueError as a traceback)
        parser.error(f"{args.output}: the plot is a PNG; name it .png")
    runs, left_out = [], []
    for exp_dir, label in zip(args.exp_dirs, labels):
        log = os.path.join(exp_dir, "train.log")
        if not os.path.isfile(log):
            left_out.append(f"{log}: not found")
            continue
        train, valid = read_log(log, args.max_gap * 60)
        if train or valid:
            runs.append((label, train, valid))
        else:
            left_out.append(f"{log}: no training or validation lines")
    if not runs:
        raise ToolError("; ".join(left_out))
    for message in left_out:  # (one of them ended the plot of the others)
        print(f"plot_training.py: left out {message}", file=sys.stderr)
    try:
        plot(runs, output, args.title)
    except OSError as error:
        raise cannot_write(output, "the plot", error) from error
    best = ", ".join(f"{label}: best dev WER {min(w for *_, w in v if w is not None):.2f}%"
                     for label, _, v in runs if any(w is not None for *_, w in v))
    return (f"wrote {output}; {best or 'no dev WER in the logs'}"
            + (f"; {len(left_out)} of {len(args.exp_dirs)} experiments left out (named above)" if left_out else ""))


if __name__ == "__main__":
    run_tool(main)
