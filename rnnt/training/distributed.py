"""torch.distributed for torchrun: rank and world from the environment, gloo on CPU, nccl on GPU."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


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
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if use_cuda:
        torch.cuda.set_device(local_rank)
    target = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if size > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo")
    return World(rank, size, local_rank, target)


def all_have_batches(world: World, has_batch: bool) -> bool:
    """True while every rank still has a batch: the join rule that ends an epoch for all ranks at once."""
    if not world.distributed:
        return has_batch
    flag = torch.tensor([1 if has_batch else 0], device=world.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def all_gather_objects(world: World, value):
    if not world.distributed:
        return [value]
    out = [None] * world.size
    dist.all_gather_object(out, value)
    return out


def cleanup(world: World) -> None:
    if world.distributed and dist.is_initialized():
        dist.destroy_process_group()
