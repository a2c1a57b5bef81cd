#!/usr/bin/env python3
"""The host's work in a loss step on a GPU: the PyTorch operators a forward + backward step of
benchmarks/loss.py's methods dispatches and its Triton launches, counted on the GPU's code path without a
GPU; on one (--device cuda), also the step's time against the time its device spends in kernels.

A small step on a GPU is bound by its launches: each operator costs the host some microseconds to
dispatch whatever the device does, so a step whose kernels are short takes about its operators' count
times that, and its device sits idle in between. On the CPU (the default) the step runs as on a GPU: the
host reads nothing (rnnt.host_reads, as on an accelerator), the Triton backend, the GPU's block size for
the fused loss, and the Triton kernels counted and skipped (Triton's interpreter, its launches not run:
with no reads on the host no value steers the step, so the count is the GPU's). Views (a new tensor over
the same storage, no kernel) are counted apart from the operators that launch one. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import statistics
import sys
import time
import warnings

ON_CPU = "cuda" not in " ".join(sys.argv[1:])
if ON_CPU:
    os.environ["TRITON_INTERPRET"] = "1"  # before Triton is imported: its kernels take CPU tensors
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes  # noqa: E402

from loss import SHAPES, make_step, select_device  # noqa: E402
from rnnt import host_reads  # noqa: E402
from rnnt.loss.logits_loss import CUDA_CHUNK_ELEMENTS  # noqa: E402

METHODS = ["padded", "fused", "pruned"]  # and torchaudio's, for reference, on a GPU
# Triton kernels run in the interpreter even here: the cell map's indices, the simple loss's labels and the
# band's windows feed PyTorch's indexing, which checks them on the CPU (the checks are cheap and keep the
# step's inputs honest)
RUN_ON_CPU = {"cell_map_kernel", "check_kernel", "arcs_kernel", "window_kernel"}


ALLOCATIONS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}  # memory, no kernel


class Operators(TorchDispatchMode):
    """Counts the operators dispatched under it: views and allocations apart from those that launch a kernel."""

    def __init__(self):
        super().__init__()
        self.views, self.allocations, self.kernels = 0, 0, collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket.__name__)
        if func.is_view:
            self.views += 1
        elif name in ALLOCATIONS:
            self.allocations += 1
        else:
            self.kernels[name] += 1
        return func(*args, **(kwargs or {}))


class TritonLaunches:
    """Counts the Triton launches made under it; in Triton's interpreter (the CPU) without running them, but
    for RUN_ON_CPU's."""

    def __init__(self):
        from triton.runtime import interpreter, jit

        # the interpreter launches through a GridExecutor, a GPU through JITFunction.run
        self.owner, self.name = (interpreter.GridExecutor, "__call__") if ON_CPU else (jit.JITFunction, "run")
        self.launches = 0

    def __enter__(self):
        self.original = getattr(self.owner, self.name)
        original = self.original

        def launch(kernel, *args, **kwargs):
            self.launches += 1
            if not ON_CPU:
                return original(kernel, *args, **kwargs)
            if getattr(kernel.fn, "__name__", "") in RUN_ON_CPU:
                with _disable_current_modes():  # the interpreter's own tensor work is no launch of the step's
                    original(kernel, *args, **kwargs)

        setattr(self.owner, self.name, launch)
        return self

    def __exit__(self, *exc):
        setattr(self.owner, self.name, self.original)


def count(step) -> dict:
    """The operators and Triton launches of one step (after a first one, which imports and builds)."""
    with TritonLaunches():
        step()
        with Operators() as operators, TritonLaunches() as launches:
            step()
    return {"kernels": sum(operators.kernels.values()), "views": operators.views,
            "allocations": operators.allocations, "triton": launches.launches, "most": operators.kernels.most_common(5)}


def device_times(step, runs: int) -> dict:
    """A step's median time (from a synchronised device to its loss on the host), and the time the device
    spent in kernels during one step (the PyTorch profiler's kernel events, summed)."""
    from torch.profiler import ProfilerActivity, profile

    times = []
    for _ in range(runs):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()  # ends reading the loss on the host: the device has finished it
        times.append(time.perf_counter() - start)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
    busy = sum(event.self_device_time_total for event in prof.key_averages()) / 1e6
    return {"step": statistics.median(times), "busy": busy}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],  # the first paragraph
                                     epilog="Prints a markdown table.")
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=["B8-T200-U50-V500"],
                        help="default: B8-T200-U50-V500, where the GPU's step is shortest")
    parser.add_argument("--methods", nargs="+", choices=METHODS + ["torchaudio"],
                        help="default: padded fused pruned, and torchaudio on a GPU where it is installed")
    parser.add_argument("--device", default="cpu", help="cpu (default: counts only) or a CUDA device such as cuda")
    parser.add_argument("--runs", type=int, default=10, help="timed steps on a CUDA device (default 10)")
    args = parser.parse_args()
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line(args.device) + "\n")  # benchmarks/machine.py: where the table was measured
    if ON_CPU != (args.device == "cpu"):
        parser.error(f"--device {args.device}: a CUDA device is named cuda or cuda:N")
    if not ON_CPU and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: this torch sees no CUDA device")
    select_device(args.device)
    warnings.filterwarnings("ignore", "divide by zero", RuntimeWarning)  # the interpreter's log(0) = -inf
    with_torchaudio = not ON_CPU and importlib.util.find_spec("torchaudio") is not None  # a GPU's, where installed
    methods = args.methods or METHODS + (["torchaudio"] if with_torchaudio else [])
    host_reads.free = lambda device: False  # the GPU's path: no reads on the host, whatever the device
    name = "CPU, counted as on a GPU" if ON_CPU else torch.cuda.get_device_name(args.device)
    print(f"{name}; torch {torch.__version__}; float32, joiner tanh + Linear inside the step as loss.py; the "
          f"fused loss in blocks of {CUDA_CHUNK_ELEMENTS >> 20}M logits elements (a GPU's).\n")
    timed = "" if ON_CPU else " step (ms) | device busy (ms) |"
    print(f"| shape | method | operators launching a kernel | views | allocations | Triton launches |{timed} "
          "most frequent operators |")
    print("|---|---|---|---|---|---|" + ("---|---|" if timed else "") + "---|")
    for shape in args.shapes:
        for method in methods:
            step = make_step(method, *SHAPES[shape], device=args.device, backend="triton",
                             chunk_elements=CUDA_CHUNK_ELEMENTS)
            c = count(step)
            row = [shape, method, c["kernels"], c["views"], c["allocations"], c["triton"]]
            if not ON_CPU:
                t = device_times(step, args.runs)
                row += [f"{t['step'] * 1e3:.2f}", f"{t['busy'] * 1e3:.2f}"]
            row.append(", ".join(f"{name} {n}" for name, n in c["most"]))
            print("| " + " | ".join(map(str, row)) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
