"""A torch DataLoader over the pipeline: worker processes, prefetching, pinned memory, exact resume."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from rnnt.data.bucketing import check_fills_a_global_batch
from rnnt.data.pipeline import Pipeline
from rnnt.data.splitting import Reader
from rnnt.data.worker_signals import OwnGroupWorkersLoader


class LoaderPosition:
    """Where an epoch of the DataLoader stands, exactly, with any number of workers.

    Each worker plays a role: it reads part `role` of the rank's data. The DataLoader takes a batch
    from its workers in turn, and once one has no more it goes on round the others. Told the role and
    position (Pipeline.batches) of every batch it delivered, this records where each role stands, which
    roles are exhausted (the DataLoader passed over them) and which role is due next: all a resumed epoch
    needs to continue in the same order (plan()).
    """

    def __init__(self, num_workers: int):
        self.counts = [0] * max(num_workers, 1)
        self.cycle = list(range(max(num_workers, 1)))  # roles still giving batches, in the order asked
        self.next = 0  # index in cycle of the role due next

    def delivered(self, role: int, position: int) -> None:
        while self.cycle[self.next] != role:  # the roles passed over had no batch left
            del self.cycle[self.next]
            self.next %= len(self.cycle)
        self.counts[role] = position
        self.next = (self.next + 1) % len(self.cycle)

    def plan(self) -> list[tuple[int, int]]:
        """(role, position to go on from) for workers 0, 1, ...: worker 0 plays the role due next."""
        roles = self.cycle[self.next:] + self.cycle[:self.next]
        return [(role, self.counts[role]) for role in roles]

    def state_dict(self) -> dict:
        return {"counts": list(self.counts), "cycle": list(self.cycle), "next": self.next}

    @classmethod
    def from_state(cls, state: dict) -> "LoaderPosition":
        position = cls(len(state["counts"]))
        position.counts, position.cycle, position.next = list(state["counts"]), list(state["cycle"]), state["next"]
        return position


class PipelineDataset(IterableDataset):
    """Yields the padded batches of one rank, each marked with the worker role that made it ("role");
    each DataLoader worker reads its own part of the list."""

    def __init__(self, pipeline: Pipeline, rank: int = 0, world_size: int = 1):
        super().__init__()
        self.pipeline, self.rank, self.world_size = pipeline, rank, world_size
        self.epoch, self.position = 0, None

    def set_epoch(self, epoch: int, position: LoaderPosition | None = None) -> None:
        """The next iteration yields `epoch`, from its start or from where `position` says it was."""
        self.epoch, self.position = epoch, position

    def spare_batch(self) -> dict | None:
        """The first batch of this rank's epoch, read again (a place held passed over): padding for a rank whose
        part ran out before a resume, or whose first place is held."""
        batch = next((batch for batch in self.pipeline.batches(self.epoch, Reader(self.rank, self.world_size))
                      if batch["keys"]), None)
        return None if batch is None else {**batch, "role": 0}

    def __iter__(self):
        info = get_worker_info()
        worker, num_workers = (info.id, info.num_workers) if info else (0, 1)
        if info is not None:
            torch.set_num_threads(1)  # workers share the cores with training
        plan = self.position.plan() if self.position else [(w, 0) for w in range(num_workers)]
        if worker >= len(plan):  # more workers than roles still giving batches
            return iter(())
        role, skip = plan[worker]
        return ({**batch, "role": role} for batch in
                self.pipeline.batches(self.epoch, Reader(self.rank, self.world_size, role, num_workers), skip))


def make_loader(pipeline: Pipeline, rank: int = 0, world_size: int = 1) -> DataLoader:
    """DataLoader with the pipeline's num_workers, prefetch_factor and pin_memory; batches are already formed."""
    config = pipeline.config
    if pipeline.buckets:
        check_fills_a_global_batch(len(pipeline.entries), config.batch.batch_size, world_size, pipeline.list_path)
    extra = {"prefetch_factor": config.prefetch_factor} if config.num_workers > 0 else {}
    # Every iterator draws a worker base seed from its generator; from the global RNG that draw would
    # shift dropout after a resume. The pipeline seeds its own randomness per utterance, so this
    # generator's seed does not matter.
    return OwnGroupWorkersLoader(PipelineDataset(pipeline, rank, world_size), batch_size=None,
                                 num_workers=config.num_workers, pin_memory=config.pin_memory,
                                 generator=torch.Generator(), **extra)
