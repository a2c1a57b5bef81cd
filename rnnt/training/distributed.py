"""torch.distributed for torchrun: rank and world from the environment, gloo on CPU, nccl on GPU; the
decisions ranks take together (every_rank), the epoch's end they reach together (batches_of_every_rank),
and the check that they end with the same parameters."""

from __future__ import annotations

import datetime
import gc
import logging
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from rnnt.devices import auto_device


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


def setup(device: str) -> World:
    """Joins the process group when launched by torchrun (WORLD_SIZE > 1); else a world of one."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = auto_device(device) == "cuda"
    # a process may see its node's GPUs, or (CUDA_VISIBLE_DEVICES set per rank by a launcher) its own alone
    device_index = local_rank % torch.cuda.device_count() if use_cuda else 0
    if use_cuda:
        torch.cuda.set_device(device_index)
    target = torch.device("cuda", device_index) if use_cuda else torch.device("cpu")
    if size > 1 and not dist.is_initialized():
        # At an epoch's end the ranks wait for each other: for the slowest one's part of the validation, and
        # for rank 0 writing the checkpoint. Allow an hour, not the backends' default minutes.
        dist.init_process_group("nccl" if use_cuda else "gloo", timeout=datetime.timedelta(hours=1))
    return World(rank, size, local_rank, target)


def broadcast_buffers(world: World, module: torch.nn.Module) -> None:
    """Rank 0's buffers (batch norm's running statistics) on every rank. DDP sends them at the start of each
    forward pass, so after the last one each rank holds those its own batch left."""
    if world.distributed:
        for buffer in module.buffers():
            dist.broadcast(buffer, 0)


def sum_over_ranks(world: World, values: list[float]) -> list[float]:
    """Each value summed over all ranks, in one all-reduce (float64: counts stay exact)."""
    if not world.distributed:
        return list(values)
    total = torch.tensor(values, dtype=torch.float64, device=world.device)
    dist.all_reduce(total)
    return total.tolist()


def every_rank(world: World, *flags: bool) -> tuple[bool, ...]:
    """Each flag ANDed over all ranks, in one all-reduce: how the ranks take decisions together (an
    epoch ends when every rank has run out of batches, a batch is skipped when any rank cannot use it,
    all stop when any got SIGTERM), so that their collectives never fall out of step."""
    return tuple(n == world.size for n in ranks_with(world, *flags))


def ranks_with(world: World, *flags: bool) -> tuple[int, ...]:
    """For each flag, the ranks where it is true, in one all-reduce."""
    return tuple(round(n) for n in sum_over_ranks(world, [float(f) for f in flags]))


@dataclass(frozen=True)
class Turn:
    """A rank's part in one step of an epoch (batches_of_every_rank)."""

    batch: dict  # what this rank runs: its batch, or, for weight 0, its last one again
    weight: float  # 1: trained on; 0: run for the collectives alone
    stop: bool  # some rank's stop_requested() was true
    ranks_with_batch: int  # the ranks of weight 1 this time, which the optimiser step's average counts
    delivered: dict | None  # the loader's batch this step took its place from (role, position): None when padding


def batches_of_every_rank(world: World, batches: Iterable[dict], stop_requested: Callable[[], bool],
                          spare: Callable[[], dict | None] = lambda: None):
    """A Turn a step until every rank has run out of batches: an epoch goes on while any rank has one, and a rank
    that has run out repeats its last batch with weight 0; so does a rank whose batch is a place held (no keys: a
    bucketed slice whose utterances the filters or unreadable audio all dropped, which keeps the ranks on the same
    global batch). A rank with no last batch (it resumed after its part of the epoch ran out, or its first place
    is held) pads with spare(), any batch of its own (if it has none, all end, as none can wait for it). The
    count of ranks with a batch comes from the all-reduce that decides the rest: the step needs none of its own.
    The all-reduce that ends the epoch carries the stop flags too, and they are not yielded: a rank's request
    stays set, so the next epoch's first all-reduce reports it again (after this epoch is validated and saved)."""
    batches, last, padding, held = iter(batches), None, 0, 0
    while True:
        batch = next(batches, None)
        trained = batch is not None and len(batch["keys"]) > 0
        if not trained and last is None:
            last = spare()
        out, can_go_on, stopping, full = ranks_with(world, batch is None, trained or last is not None,
                                                    stop_requested(), trained)
        if out == world.size or can_go_on < world.size:
            break
        if trained:
            last = batch
        else:
            padding, held = padding + (batch is None), held + (batch is not None)
        yield Turn(batch if trained else last, float(trained), stopping > 0, full, batch)
    if padding or held:
        logging.getLogger("rnnt.train").info(
            "rank %d: %d batches of weight 0 while other ranks finished the epoch, %d for places held", world.rank,
            padding, held)


def scale_gradients(parameters, scale: float, world: World | None = None) -> None:
    """Gradients times scale; with a world, first averaged over its ranks (DDP's own reduction, for
    micro-batches that all ran under no_sync)."""
    size = world.size if world is not None and world.distributed else 1
    for p in parameters:
        if p.grad is not None:
            if size > 1:
                dist.all_reduce(p.grad)
            p.grad.mul_(scale / size)


def all_gather_objects(world: World, value):
    if not world.distributed:
        return [value]
    out = [None] * world.size
    dist.all_gather_object(out, value)
    return out


def cleanup(world: World, together: bool) -> None:
    """Leaves the process group while the interpreter is fully alive (a gloo group left to interpreter
    exit can abort the process from its worker threads). together: every rank is leaving at this point
    (a normal end), so first a barrier, that no rank shuts its connections while another still talks to
    it; not after an error on one rank, where the others are inside some other collective. Drop every
    DDP wrapper before calling it: DDP holds the group too."""
    if world.distributed and dist.is_initialized():
        gc.collect()
        if together:
            dist.barrier()
        dist.destroy_process_group()


def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank's random numbers (dropout) after the model is built: rank 0's own, the others' apart."""
    return seed + 1_000_003 * rank


def check_parameters_agree(world: World, parameters) -> bool:
    """Under DDP every rank must end with the same parameters; checked, not assumed (False: they differ, logged)."""
    if not world.distributed:
        return True
    digest = float(sum(p.detach().cpu().double().sum() for p in parameters))  # on the CPU: one order of sums
    digests = all_gather_objects(world, digest)
    if any(not math.isclose(d, digests[0], rel_tol=0, abs_tol=0) for d in digests):
        logging.getLogger("rnnt.train").error("ranks ended with different parameters: %s", digests)
        return False
    logging.getLogger("rnnt.train").info("all %d ranks hold identical parameters (checksum %.10g)",
                                         world.size, digests[0])
    return True
