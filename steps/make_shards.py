#!/usr/bin/env python3
"""Pack a Kaldi data dir into WeNet-compatible tar shards and write the shard list.

Each shard holds --utts-per-shard utterances as consecutive members <key>.txt and <key>.<ext>.
Shards are written in parallel (--nj), each under a temporary name renamed when complete. A rerun of the
same settings and utterance ids (the plan, recorded in <shard_dir>/.make_shards.json: rnnt.prep.shard_plan)
reuses the complete shards and redoes the rest: those whose utterances changed since (a transcript corrected,
a recording restored or replaced: named), those that left an utterance out (its audio unreadable then:
<shard>.tar.skipped lists them), and those whose content is not what SHA256SUMS records (emptied, cut short:
named). Shards of another plan, or with no record, are refused unless --replace. Bad audio, and whatever
cannot be paired (audio without transcript, transcript without audio, a malformed segment, a repeated key), is
skipped, named and counted. <shard_dir>/SHA256SUMS holds each shard's SHA-256 (rnnt.data.shard_digests): a
training knows its shards by them wherever they are copied.
"""

import argparse
import contextlib
import os
import sys
from multiprocessing import Pool

from rnnt.counting import counted
from rnnt.progress_bar import progress

from rnnt.atomic_write import write_atomically
from rnnt.cli import at_least, cannot_write, error_line, run_tool, tool_parser, ToolError
from rnnt.data.shard_digests import DIGESTS, read_digests, shard_digest, write_digests
from rnnt.datadir.utterances import read_utterances
from rnnt.prep.shard_plan import DEFAULT_PREFIX, make_plan, start_shard_dir
from rnnt.prep.shard_writer import FORMATS, AudioOptions, ShardItem, skipped_path, write_shard


def read_items(data_dir: str) -> tuple[list[ShardItem], list[str]]:
    """The dir's utterances to shard, and a message for each one left out (unpaired, malformed, or an id that
    tar member names cannot carry: one with '/'; a '.' is carried, as readers split a member's name at its last,
    so speed-perturbed ids such as sp1.1-<id> keep their dots)."""
    utterances, skipped = read_utterances(data_dir)
    items = []
    for utterance in utterances:
        if "/" in utterance.key:
            skipped.append(f"{utterance.where}: {utterance.key}: an id with '/' (a tar member's name would make it "
                           "a directory)")
        else:
            items.append(ShardItem(utterance.key, utterance.text, utterance.source, utterance.start, utterance.end,
                                   utterance.audio_where))
    return items, skipped


def write_one(job):
    path, items, options = job
    return path, write_shard(path, items, options), shard_digest(path)


def write_list(path: str, shards: list[str]) -> None:
    try:
        write_atomically(path, lambda f: f.writelines(f"{shard}\n" for shard in shards))
    except OSError as error:
        raise cannot_write(path, "the list", error) from error


def write_shards(jobs: list, nj: int) -> tuple[int, float, list[str], dict[str, str]]:
    """Writes the shards of jobs, nj at once: (utterances written, seconds of audio, 'key: reason' of each
    utterance left out for unreadable audio, {shard name: SHA-256})."""
    written, seconds, skipped, digests = 0, 0.0, [], {}
    with Pool(nj) if nj > 1 else contextlib.nullcontext() as pool:
        results = pool.imap_unordered(write_one, jobs) if pool else map(write_one, jobs)
        for path, (count, duration, bad), digest in progress(results, total=len(jobs), desc="shards", unit="shard"):
            written += count
            seconds += duration
            skipped.extend(bad)
            digests[os.path.basename(path)] = digest
    return written, seconds, skipped, digests


def shards_to_write(shard_dir: str, paths: list[str], contents: list[list[ShardItem]], options: AudioOptions) -> list:
    """The jobs of write_shards: each shard of paths (its items in contents) that is not whole_shard."""
    recorded = read_digests(shard_dir)
    return [(path, items, options) for path, items in zip(progress(paths, desc="check shards", unit="shard"), contents)
            if not whole_shard(path, recorded)]


def whole_shard(path: str, recorded: dict[str, str]) -> bool:
    """A shard a run before wrote whole: there, with no utterance left out, and its content the SHA-256 that
    SHA256SUMS records (one it does not list, from before digests were kept, taken as whole); one that is not
    (emptied, cut short by a copy) is named, to be written again."""
    if not os.path.isfile(path) or os.path.exists(skipped_path(path)):
        return False
    want = recorded.get(os.path.basename(path))
    if want is None or shard_digest(path) == want:
        return True
    print(f"make_shards.py: {path}: not the shard written there (its SHA-256 is not the one {DIGESTS} records); "
          "written again", file=sys.stderr)
    return False


def write_recorded_shards(shard_dir: str, paths: list[str], jobs: list, nj: int) -> tuple[int, float, list[str]]:
    """write_shards, with shard_dir's SHA256SUMS true throughout: the lines of the shards to be written again
    taken out before, and those shards removed (a run stopped before it wrote one left it unlisted, which the next
    run took for a shard from before digests were kept: whole, a damaged one's SHA-256 recorded), and every
    shard's line in after (a reused one's not yet there, from a run before digests were kept: read once)."""
    again = {os.path.basename(job[0]) for job in jobs}
    names = {os.path.basename(path) for path in paths}
    digests = {name: digest for name, digest in read_digests(shard_dir).items() if name in names - again}
    try:
        write_digests(shard_dir, digests)
        for path, *_ in jobs:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        written, seconds, skipped, new = write_shards(jobs, nj)
        digests.update(new)
        digests.update({os.path.basename(path): shard_digest(path) for path in paths
                        if os.path.basename(path) not in digests and os.path.isfile(path)})
        write_digests(shard_dir, digests)
    except OSError as error:
        raise cannot_write(error.filename or shard_dir, "there", error) from error
    return written, seconds, skipped


def file_name_part(value: str) -> str:
    """An argparse type: a part of a file name (a '/' in --prefix failed to write, and left a plan behind that
    refused the next run)."""
    if not value or "/" in value or "\0" in value:
        raise argparse.ArgumentTypeError(f"'{value}' is not a part of a file name (the folder is SHARD_DIR)")
    return value


def main() -> str:
    parser = tool_parser(__doc__, "steps/make_shards.py --nj 4 data/train data/train/shards "
                                  "data/train/data.list")
    parser.add_argument("--utts-per-shard", type=at_least(1), default=1000, help="utterances per shard (default 1000)")
    parser.add_argument("--nj", type=at_least(1), default=1, help="parallel processes (default 1)")
    parser.add_argument("--audio-format", choices=FORMATS, default="keep",
                        help="keep the source files' bytes (default), or re-encode as wav or flac")
    parser.add_argument("--resample", type=at_least(1000),  # (1: a 1 Hz shard of 7 samples an utterance)
                        help="resample to this rate (re-encodes; wav unless --audio-format flac)")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX, type=file_name_part,
                        help=f"shard file name prefix (default '{DEFAULT_PREFIX}'); another is another plan")
    parser.add_argument("--replace", action="store_true",
                        help="shards in shard_dir of other settings or utterances, or with no record of theirs, are "
                             "deleted and written anew "
                             "(default: refused); a recipe passes it, as its shards stage runs when its data changed")
    parser.add_argument("data_dir")
    parser.add_argument("shard_dir")
    parser.add_argument("shard_list", help="output list: one shard path a line (data.list)")
    args = parser.parse_args()
    try:
        items, left_out = read_items(args.data_dir)
    except OSError as error:
        raise ToolError(error_line(error)) from error
    for reason in left_out:
        print(f"make_shards.py: skipped {reason}", file=sys.stderr)
    if not items:
        raise ToolError(f"{args.data_dir}: no utterance has both audio and text")
    options = AudioOptions(args.audio_format, args.resample)
    n = args.utts_per_shard
    paths = [os.path.abspath(os.path.join(args.shard_dir, f"{args.prefix}_{i:06d}.tar"))
             for i in range((len(items) + n - 1) // n)]
    plan = make_plan(items, n, args.audio_format, args.resample, args.prefix)
    try:  # both folders made before any packing (a list in a folder not there was a traceback after it)
        os.makedirs(os.path.dirname(os.path.abspath(args.shard_list)), exist_ok=True)
        start_shard_dir(args.shard_dir, plan, items, paths, args.replace)
    except OSError as error:
        raise cannot_write(error.filename or args.shard_dir, "there", error) from error
    jobs = shards_to_write(args.shard_dir, paths, [items[i:i + n] for i in range(0, len(items), n)], options)
    written, seconds, skipped = write_recorded_shards(args.shard_dir, paths, jobs, args.nj)
    for reason in skipped:
        print(f"make_shards.py: skipped {reason}", file=sys.stderr)
    reused = len(paths) - len(jobs)
    if not written and not reused:
        raise ToolError(f"{args.data_dir}: no utterance's audio could be read (each is named above)")
    write_list(args.shard_list, paths)
    return (f"{args.shard_list}: {counted(len(paths), 'shard')} ({reused} already complete); this run wrote "
            f"{counted(written, 'utterance')}, {seconds / 3600:.2f} h of audio; skipped {len(left_out) + len(skipped)}")


if __name__ == "__main__":
    run_tool(main)
