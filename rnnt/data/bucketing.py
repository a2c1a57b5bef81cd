"""Duration bucketing with global batches for raw lists, as the MLPerf RNN-T reference samples.

Each epoch: the utterances sorted by duration are cut into `buckets` groups of (nearly) equal size,
the larger ones first; each group is shuffled and the groups are put back one after the other; as many
utterances as do not fill a whole global batch (batch_size x world_size) are dropped, at random places
(the same utterances, the longest, every epoch, were they cut from the end); the rest is cut into global
batches, which are shuffled. In a step every rank takes its own slice of the same
global batch, so the ranks train on utterances of similar length and wait little for each other (a slice the
filters or unreadable audio empty holds its place: Pipeline.batches yields it without keys); the
worker w of a rank takes every num_workers-th of the rank's batches. Every rank computes the same
order from (seed, epoch). Needs the "duration" of each entry (steps/make_raw_list.py).
"""

from __future__ import annotations

import json
import logging
import math
import random

from rnnt.data.splitting import Reader

log = logging.getLogger(__name__)


def with_durations(lines: list[str], list_path: str) -> list[str]:
    """The lines of a raw list that hold a positive "duration", which bucketing orders by; every other is
    logged by key and left out (steps/make_raw_list.py lists an utterance without one where utt2dur lacks it)."""
    kept = []
    for number, line in enumerate(lines, 1):
        entry = json.loads(line)
        try:
            duration = float(entry.get("duration"))  # a number, or a string of one
        except (TypeError, ValueError):
            duration = math.nan
        if math.isfinite(duration) and duration > 0:
            kept.append(line)
        else:
            log.warning("%s: %s: no positive 'duration' to bucket it by; left out of training (bucketing needs "
                        "utt2dur in the data dir steps/make_raw_list.py read)", list_path, entry.get("key", number))
    if not kept:
        raise ValueError(f"{list_path}: no entry has a positive 'duration': make the list with steps/make_raw_list.py "
                         "from a data dir with utt2dur, or turn bucketing off (data.buckets: 0)")
    return kept


def durations(lines: list[str]) -> list[float]:
    found = []
    for line in lines:
        entry = json.loads(line)
        duration = entry.get("duration")
        if duration is None:
            raise ValueError(f"the raw list's entry {entry.get('key')} has no 'duration'; make the list with "
                             "steps/make_raw_list.py from a data dir with utt2dur, or turn bucketing off")
        found.append(float(duration))
    return found


def check_fills_a_global_batch(utterances: int, batch_size: int, world_size: int, list_path: str) -> None:
    """A ValueError where the list holds fewer utterances than one global batch: bucketing leaves out what does not
    fill one, here every utterance (the training then found 'no usable utterance', its data report none dropped)."""
    if utterances < batch_size * world_size:
        raise ValueError(f"{list_path}: {utterances} utterances with a duration fill no global batch of "
                         f"data.batch.batch_size {batch_size} x {world_size} ranks, and bucketing trains whole ones "
                         "only: a smaller batch_size, or data.buckets: 0")


def global_batches(lines: list[str], buckets: int, global_size: int, seed: int, epoch: int) -> list[list[str]]:
    """The epoch's global batches of global_size lines each, in the order they are trained."""
    lengths = durations(lines)
    order = sorted(range(len(lines)), key=lambda i: lengths[i])
    rng = random.Random(f"buckets:{seed}:{epoch}")
    small, larger = divmod(len(order), buckets)
    shuffled, start = [], 0
    for bucket in range(buckets):
        size = small + (bucket < larger)
        members = order[start:start + size]
        rng.shuffle(members)
        shuffled += members
        start += size
    dropped = set(rng.sample(range(len(shuffled)), len(shuffled) % global_size))
    kept = [i for place, i in enumerate(shuffled) if place not in dropped]
    batches = [[lines[i] for i in kept[s:s + global_size]] for s in range(0, len(kept), global_size)]
    rng.shuffle(batches)
    return batches


def bucket_batches(lines: list[str], buckets: int, batch_size: int, seed: int, epoch: int,
                   reader: Reader = Reader()) -> list[list[str]]:
    """The batches of one reader in one epoch: its rank's slice of every global batch, every
    num_workers-th of them."""
    steps = global_batches(lines, buckets, batch_size * reader.world_size, seed, epoch)
    mine = [batch[reader.rank * batch_size:(reader.rank + 1) * batch_size] for batch in steps]
    return mine[reader.worker::reader.num_workers]
