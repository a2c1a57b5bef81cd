"""Checkpoint file names, and the tags that name the model a recipe decodes: known here alone.

Files in an experiment dir: epoch-N.pt (the end of epoch N), step-N.pt (every checkpoint_every steps,
the newest few kept), avg-N.pt (steps/average_checkpoints.py: the last N epochs averaged). A model tag
names what is decoded and the decode dirs after it: epoch-K (that epoch alone) or avgN-epoch-K (the N
epochs up to K averaged into avg-N.pt). The training code, averaging and decoding import these
functions; utils/decoding.sh asks the command line (no torch is imported):

  python3 -m rnnt.training.checkpoint_names tag EXP AVERAGE   the tag decoding uses ('' with no epochs)
  python3 -m rnnt.training.checkpoint_names path EXP TAG      the tag's checkpoint file
  python3 -m rnnt.training.checkpoint_names averaged EXP TAG  the epoch files the tag averages, one a line
  python3 -m rnnt.training.checkpoint_names point EXP TAG     EXP/model.pt made a link to the tag's checkpoint

model.pt links to the model the recipe's result lines name (or the average written last), which transcription,
export and decoding take by default (rnnt.training.checkpoint.for_decoding).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys

KINDS = {"epoch": "epoch-{}.pt", "step": "step-{}.pt", "average": "avg-{}.pt"}
MODEL_LINK = "model.pt"
TAG = re.compile(r"(?:avg([1-9]\d*)-)?epoch-(\d+)$")


def name(kind: str, number: int) -> str:
    """The file name of a checkpoint: name("epoch", 3) == "epoch-3.pt"."""
    return KINDS[kind].format(number)


def numbered(exp_dir: str, kind: str) -> list[str]:
    """The checkpoints of one kind in exp_dir, in the order of their numbers (exp_dir is a name, not a pattern:
    glob read 'exp[a]' as one, found none there, and a resume started again over its checkpoints)."""
    pattern = re.compile(re.escape(KINDS[kind]).replace(r"\{\}", r"(\d+)") + "$")
    names = os.listdir(exp_dir) if os.path.isdir(exp_dir) else []
    found = [(int(m.group(1)), os.path.join(exp_dir, name)) for name in names if (m := pattern.match(name))]
    return [path for _, path in sorted(found)]


def model_tag(exp_dir: str, average: int) -> str:
    """The tag of the model decoded after `average` epochs are averaged (0: the newest epoch alone); ''
    while exp_dir has no epoch checkpoint."""
    epochs = numbered(exp_dir, "epoch")
    if not epochs:
        return ""
    newest = os.path.basename(epochs[-1])[: -len(".pt")]
    return f"avg{min(average, len(epochs))}-{newest}" if average > 0 else newest


def parse_tag(tag: str) -> tuple[int, int]:
    """(epochs averaged, 0 for an epoch alone; the newest epoch) of a model tag."""
    match = TAG.match(tag)
    if not match:
        raise ValueError(f"'{tag}' is not a model tag (epoch-K or avgN-epoch-K)")
    return int(match.group(1) or 0), int(match.group(2))


def checkpoint_path(exp_dir: str, tag: str) -> str:
    averaged, epoch = parse_tag(tag)
    return os.path.join(exp_dir, name("average", averaged) if averaged else name("epoch", epoch))


def averaged_epochs(exp_dir: str, tag: str) -> list[str]:
    """The epoch checkpoints a tag's model averages: the last N up to epoch K; none for an epoch alone."""
    averaged, epoch = parse_tag(tag)
    upto = [path for path in numbered(exp_dir, "epoch")
            if int(os.path.basename(path)[len("epoch-"): -len(".pt")]) <= epoch]
    return upto[-averaged:] if averaged else []


def point(exp_dir: str, checkpoint_file: str) -> str | None:
    """Makes exp_dir/model.pt a link to checkpoint_file, a file of exp_dir (relative: the experiment dir can move),
    replacing the link before at once; a model.pt that is no link (a model put there by hand) is left as it is.
    Why it was not made, or None; an OSError where the dir cannot take it."""
    link = os.path.join(exp_dir, MODEL_LINK)
    if os.path.lexists(link) and not os.path.islink(link):
        return f"{link} is a file of its own, not a link: left as it is (decoding takes it by default)"
    with contextlib.suppress(FileNotFoundError):
        os.remove(link + ".new")
    os.symlink(os.path.basename(checkpoint_file), link + ".new")
    os.replace(link + ".new", link)
    return None


def main(argv: list[str]) -> int:
    usage = ("usage: python3 -m rnnt.training.checkpoint_names {tag EXP AVERAGE | path EXP TAG | averaged EXP TAG | "
             "point EXP TAG}")
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__ + "\n" + usage)
        return 0
    if len(argv) != 3 or argv[0] not in ("tag", "path", "averaged", "point"):
        print(usage, file=sys.stderr)
        return 2
    command, exp_dir, value = argv
    try:
        if command == "tag":
            print(model_tag(exp_dir, int(value)))
        elif command == "path":
            print(checkpoint_path(exp_dir, value))
        elif command == "point":  # says nothing where it pointed the link
            if why := point(exp_dir, checkpoint_path(exp_dir, value)):
                print(f"checkpoint_names: {why}", file=sys.stderr)
        else:
            print("\n".join(averaged_epochs(exp_dir, value)))
    except (ValueError, OSError) as error:
        print(f"checkpoint_names: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
