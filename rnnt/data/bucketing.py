"""Duration bucketing for raw lists, as the MLPerf RNN-T reference does it.

All utterances are sorted by duration and cut into `buckets` groups of equal size; each epoch every
bucket is shuffled and cut into batches (a batch never mixes buckets), then the batches are shuffled.
Rank r takes batches r, r + world, ... (the tail that would leave ranks unequal is dropped), and worker
w of a rank every num_workers-th of those. Needs the "duration" of each entry (steps/make_raw_list.py).
"""

from __future__ import annotations

import json
import random


def bucket_batches(lines: list[str], buckets: int, batch_size: int, seed: int, epoch: int, rank: int = 0,
                   world_size: int = 1, worker: int = 0, num_workers: int = 1) -> list[list[str]]:
    entries = []
    for number, line in enumerate(lines, 1):
        duration = json.loads(line).get("duration")
        if duration is None:
            raise ValueError(f"raw list line {number} has no 'duration'; make the list with steps/make_raw_list.py "
                             "from a data dir with utt2dur, or turn bucketing off")
        entries.append((float(duration), line))
    entries.sort(key=lambda e: e[0])
    rng = random.Random(f"buckets:{seed}:{epoch}")
    size = -(-len(entries) // buckets)
    batches = []
    for start in range(0, len(entries), size):
        bucket = [line for _, line in entries[start:start + size]]
        rng.shuffle(bucket)
        batches += [bucket[i:i + batch_size] for i in range(0, len(bucket), batch_size)]
    rng.shuffle(batches)
    usable = len(batches) // world_size * world_size
    return batches[:usable][rank::world_size][worker::num_workers]
