"""Which part of a data list each (rank, worker) reads in an epoch.

The units are shards (shard lists) or lines (raw lists). Every epoch the list order is shuffled with a
seed of (seed, epoch), the same on every rank; rank r then takes units r, r + world, ...; worker w of
that rank takes every num_workers-th of those. Parts are disjoint and together cover the list.

Ranks can end up with different numbers of batches (shards differ in length). The trainer joins
them: before every step the ranks all-reduce whether each still has a batch, and the epoch ends for
all as soon as one has none, so no rank waits on a collective that others never enter.
"""

from __future__ import annotations

import logging
import random

log = logging.getLogger(__name__)


def epoch_order(units: list[str], seed: int, epoch: int, shuffle: bool) -> list[str]:
    order = list(units)
    if shuffle:
        random.Random(f"list:{seed}:{epoch}").shuffle(order)
    return order


def part(units: list[str], seed: int, epoch: int, rank: int = 0, world_size: int = 1, worker: int = 0,
         num_workers: int = 1, shuffle: bool = True) -> list[str]:
    """The units of one (rank, worker) in one epoch."""
    if not 0 <= rank < world_size or not 0 <= worker < num_workers:
        raise ValueError(f"rank {rank} of {world_size}, worker {worker} of {num_workers}: out of range")
    mine = epoch_order(units, seed, epoch, shuffle)[rank::world_size][worker::num_workers]
    if not mine:
        log.warning("rank %d worker %d gets no data: %d units for %d ranks x %d workers", rank, worker,
                    len(units), world_size, num_workers)
    return mine
