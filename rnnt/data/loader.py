"""A torch DataLoader over the pipeline: worker processes, prefetching, pinned memory, exact resume."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from rnnt.data.pipeline import Pipeline
from rnnt.data.splitting import batches_before


class PipelineDataset(IterableDataset):
    """Yields the padded batches of one rank; each DataLoader worker reads its own part of the list."""

    def __init__(self, pipeline: Pipeline, rank: int = 0, world_size: int = 1):
        super().__init__()
        self.pipeline, self.rank, self.world_size = pipeline, rank, world_size
        self.epoch, self.start_batch = 0, 0

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        """The next iteration yields `epoch` from its batch `start_batch` on (0: from the start)."""
        self.epoch, self.start_batch = epoch, start_batch

    def __iter__(self):
        info = get_worker_info()
        worker, num_workers = (info.id, info.num_workers) if info else (0, 1)
        if info is not None:
            torch.set_num_threads(1)  # workers share the cores with training
        # The DataLoader takes batches from workers 0, 1, ... in turn, also after a resume. For the
        # resumed epoch to continue the interrupted order, worker 0 plays the part of the worker whose
        # batch comes next, and so on round the ring.
        role = (worker + self.start_batch) % num_workers
        skip = batches_before(self.start_batch, role, num_workers)
        return self.pipeline.batches(self.epoch, self.rank, self.world_size, role, num_workers, skip)


def make_loader(pipeline: Pipeline, rank: int = 0, world_size: int = 1) -> DataLoader:
    """DataLoader with the pipeline's num_workers, prefetch_factor and pin_memory; batches are already formed."""
    c = pipeline.config
    extra = {"prefetch_factor": c.prefetch_factor} if c.num_workers > 0 else {}
    # Every iterator draws a worker base seed from its generator; from the global RNG that draw would
    # shift dropout after a resume. The pipeline seeds its own randomness per utterance, so this
    # generator's seed does not matter.
    return DataLoader(PipelineDataset(pipeline, rank, world_size), batch_size=None, num_workers=c.num_workers,
                      pin_memory=c.pin_memory, generator=torch.Generator(), **extra)
