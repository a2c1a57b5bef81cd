"""Which part of a data list each (rank, worker) reads in an epoch.

The entries are shards (shard lists) or lines (raw lists). Every epoch the list order is shuffled with a
seed of (seed, epoch), the same on every rank; rank r then takes entries r, r + world, ...; worker w of
that rank takes every num_workers-th of those. Parts are disjoint and together cover the list.

Shards: as many whole shards go to each rank as divide evenly; the shards left over (fewer than the
ranks) are shared, rank r taking their utterances r, r + world, ... (rnnt.data.shard_reading.ShardShare). So
the ranks' utterance counts differ by at most one a leftover shard (plus what shards of unequal
lengths differ by), not by whole shards: 29 shards on 8 ranks give each 3 whole ones and an eighth
of 5, where rank-by-shard would leave 5 ranks with a fourth shard and the others idle.

Ranks can still end up with different numbers of batches. The trainer joins them
(rnnt.training.distributed.batches_of_every_rank): the epoch goes on while any rank has a batch; a rank
that has run out repeats its last batch with weight 0, so every utterance of the epoch is trained on and
no rank waits on a collective that the others never enter.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

from rnnt.data.shard_reading import ShardShare

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reader:
    """Who reads a part of a data list: worker `worker` of `num_workers` on rank `rank` of `world_size`."""

    rank: int = 0
    world_size: int = 1
    worker: int = 0
    num_workers: int = 1

    def __post_init__(self):
        if not 0 <= self.rank < self.world_size or not 0 <= self.worker < self.num_workers:
            raise ValueError(f"rank {self.rank} of {self.world_size}, worker {self.worker} of {self.num_workers}: "
                             "out of range")


def epoch_order(entries: list[str], seed: int, epoch: int, shuffle: bool) -> list[str]:
    order = list(entries)
    if shuffle:
        random.Random(f"list:{seed}:{epoch}").shuffle(order)
    return order


def part(entries: list[str], seed: int, epoch: int, reader: Reader = Reader(), shuffle: bool = True,
         share_leftovers: bool = False) -> list:
    """The entries of one reader in one epoch; with share_leftovers (shards), ShardShares: whole shards,
    then the reader's rank's share of the shards left over."""
    rank, world_size = reader.rank, reader.world_size
    order = epoch_order(entries, seed, epoch, shuffle)
    if share_leftovers:
        whole = len(order) // world_size * world_size
        mine = [ShardShare(u) for u in order[rank:whole:world_size]]
        mine += [ShardShare(u, world_size, rank) for u in order[whole:]]
    else:
        mine = order[rank::world_size]
    mine = mine[reader.worker::reader.num_workers]
    if not mine:
        log.warning("rank %d worker %d gets no data: %d entries for %d ranks x %d workers", rank, reader.worker,
                    len(entries), world_size, reader.num_workers)
    return mine
