"""Which part of a data list each (rank, worker) reads in an epoch.

The units are shards (shard lists) or lines (raw lists). Every epoch the list order is shuffled with a
seed of (seed, epoch), the same on every rank; rank r then takes units r, r + world, ...; worker w of
that rank takes every num_workers-th of those. Parts are disjoint and together cover the list.

Shards: as many whole shards go to each rank as divide evenly; the shards left over (fewer than the
ranks) are shared, rank r taking their utterances r, r + world, ... (rnnt.data.sources.ShardShare). So
the ranks' utterance counts differ by at most one a leftover shard (plus what shards of unequal
lengths differ by), not by whole shards: 29 shards on 8 ranks give each 3 whole ones and an eighth
of 5, where rank-by-shard would leave 5 ranks with a fourth shard and the others idle.

Ranks can still end up with different numbers of batches. The trainer joins them (rnnt.training.
trainer): the epoch goes on while any rank has a batch; a rank that has run out repeats its last batch
with weight 0, so every utterance of the epoch is trained on and no rank waits on a collective that
the others never enter.
"""

from __future__ import annotations

import logging
import random

from rnnt.data.sources import ShardShare

log = logging.getLogger(__name__)


def epoch_order(units: list[str], seed: int, epoch: int, shuffle: bool) -> list[str]:
    order = list(units)
    if shuffle:
        random.Random(f"list:{seed}:{epoch}").shuffle(order)
    return order


def part(units: list[str], seed: int, epoch: int, rank: int = 0, world_size: int = 1, worker: int = 0,
         num_workers: int = 1, shuffle: bool = True, share_leftovers: bool = False) -> list:
    """The units of one (rank, worker) in one epoch; with share_leftovers (shards), ShardShares: whole
    shards, then this rank's share of the shards left over."""
    if not 0 <= rank < world_size or not 0 <= worker < num_workers:
        raise ValueError(f"rank {rank} of {world_size}, worker {worker} of {num_workers}: out of range")
    order = epoch_order(units, seed, epoch, shuffle)
    if share_leftovers:
        whole = len(order) // world_size * world_size
        mine = [ShardShare(u) for u in order[rank:whole:world_size]]
        mine += [ShardShare(u, world_size, rank) for u in order[whole:]]
    else:
        mine = order[rank::world_size]
    mine = mine[worker::num_workers]
    if not mine:
        log.warning("rank %d worker %d gets no data: %d units for %d ranks x %d workers", rank, worker,
                    len(units), world_size, num_workers)
    return mine
