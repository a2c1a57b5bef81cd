"""Compiles every Triton kernel of rnnt.loss for a real NVIDIA GPU, without one: each launcher runs on CPU tensors
with Triton's compile-only path (a kernel compiled as for its launch, through ptxas, and not run), for the
compute capability asked. What Triton's interpreter lets through and a GPU's compiler refuses (tl.exp on bfloat16,
say) fails here. Prints a line per compiled kernel and configuration (its shared memory); exits 1 where one fails
to compile or needs more shared memory than a block of that GPU gets.

    python tests/triton_gpu_compile.py 86     # run without TRITON_INTERPRET
"""

from __future__ import annotations

import argparse
import sys

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.runtime import jit
from triton.runtime.driver import driver

# the most shared memory a block can have on each compute capability (CUDA's programming guide, by major.minor)
SHARED_LIMIT = {80: 163 * 1024, 86: 99 * 1024, 89: 99 * 1024, 90: 227 * 1024, 100: 227 * 1024, 120: 99 * 1024}


class CompileOnlyDriver:
    """A CUDA device of the given capability as far as compiling asks (target, device 0, stream 0)."""

    def __init__(self, capability: int):
        self.target = GPUTarget("cuda", capability, 32)

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def is_active(self):
        return True


def compile_only(compiled: list, failed: list):
    """JITFunction.run with warmup (compile, no launch) whatever its launcher asked, each result recorded."""
    run = jit.JITFunction.run

    def compile_instead(self, *args, grid, warmup, **kwargs):
        config = {k: v for k, v in kwargs.items() if k.isupper() or k == "num_warps"}
        try:
            kernel = run(self, *args, grid=grid, warmup=True, **kwargs)
        except Exception as error:  # every compile error is the finding
            failed.append((self.fn.__name__, config, f"{type(error).__name__}: {str(error)[-600:]}"))
            return None
        compiled.append((self.fn.__name__, config, kernel.metadata.shared))
        return kernel
    jit.JITFunction.run = compile_instead


def lengths(B: int, T: int, U: int):
    return torch.full((B,), T, dtype=torch.long), torch.full((B,), U, dtype=torch.long)


def lattice_passes():
    """The lattice passes and band kernels, for a block of 128 and of 1024 columns (U + 1 of 105 and 1001)."""
    from rnnt.loss import lattice_triton
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        for B, T, U1 in ((2, 50, 105), (2, 20, 1001)):
            frames, symbols = lengths(B, T, U1 - 1)
            blank = torch.zeros(B, T, U1, dtype=dtype)
            for one_sym in (False, True):
                lattice_triton.lattice_posteriors(blank, blank, frames, symbols, one_sym)
                lattice_triton.best_path_label_frames(blank, blank, frames, symbols, one_sym)
            _, last = lattice_triton.window_starts(blank, blank, symbols, 5)
            start = torch.zeros(B, T, dtype=torch.long)
            lattice_triton.connected_band_starts(start, frames, last, 5)
            lattice_triton.one_symbol_band_starts(start, frames, symbols, last, 5)


def rows_cells_checks():
    """The logits' row kernels (per row and into a block's cells), the cell maps and the argument checks."""
    from rnnt.loss import cells, checks, row_triton
    B, T, U1, V = 2, 8, 5, 500
    frames, symbols = lengths(B, T, U1 - 1)
    targets = torch.ones(B, U1 - 1, dtype=torch.long)
    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        rows = torch.zeros(B * T * U1, V, dtype=dtype)
        acc = torch.float64 if dtype == torch.float64 else torch.float32
        cell_map = cells._built_in_triton(None, targets, frames, symbols, 0, T, U1, U1)
        lse, post_blank, post_label = row_triton.row_stats(rows, cell_map.label, 0, acc, into=cell_map)
        row_triton.row_gradient(rows, rows, lse, post_blank, post_label, cell_map.label, 0, 1.0, batch=cell_map.batch,
                                scale=torch.ones(B, dtype=acc), at_cells=(cell_map.cell, cell_map.valid))
        row_triton.row_gradient(rows, rows, lse, post_blank, post_label, cell_map.label, 0, None)
        row_triton.row_stats(rows, targets.new_zeros(B, U1), 0, acc, out=tuple(torch.zeros(B, T, U1, dtype=acc)
                                                                               for _ in range(3)))
    cells._built_in_triton(torch.zeros(B, T, 4, dtype=torch.long), targets, frames, symbols, 0, T, 4, U1)
    for one_sym in (False, True):
        checks._launch_check_kernel(targets, frames, symbols, V, 0, (T, "T"), (U1, "U + 1"), one_sym)


def simple_loss_arcs():
    from rnnt.loss import simple_arcs
    B, T, U1, V = 2, 16, 105, 500
    frames, symbols = lengths(B, T, U1 - 1)
    targets = torch.ones(B, U1 - 1, dtype=torch.long)
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        am, lm = torch.zeros(B, T, V, dtype=dtype), torch.zeros(B, U1, V, dtype=dtype)
        acc = torch.float64 if dtype == torch.float64 else torch.float32
        for smooth, scales in ((True, simple_arcs.Scales(0.25, 0.1)), (False, simple_arcs.Scales(0.0, 0.0))):
            (a_max, _, a_sum), (l_max, _, l_sum) = simple_arcs._exp_rows_in_triton(am, lm, acc, smooth)
            products = torch.ones(B, T, U1, dtype=acc)
            simple_arcs._arcs_in_triton(am, lm, a_max, l_max, a_sum, l_sum, products, targets, frames, symbols, 0,
                                        scales)
            simple_arcs._weights_in_triton(products, products, products, a_sum, l_sum, frames, symbols, (), scales)


def fused_joiner():
    from rnnt.loss import joint_triton
    B, T, U1, V = 2, 40, 9, 500
    frames, symbols = lengths(B, T, U1 - 1)
    cell_labels = torch.zeros(B, U1, dtype=torch.long)
    for dtype in joint_triton.DTYPES:
        for H in (64, 320, joint_triton.MAX_HIDDEN):
            enc, pred = torch.zeros(B, T, H, dtype=dtype), torch.zeros(B, U1, H, dtype=dtype)
            weight, bias = torch.zeros(V, H, dtype=dtype), torch.zeros(V, dtype=dtype)
            lse, *_ = joint_triton.joint_stats(enc, pred, weight, bias, cell_labels, frames, symbols, 0, "tanh")
            joint_triton.joint_gradients(enc, pred, weight, bias, cell_labels, frames, symbols, lse, lse, lse,
                                         torch.ones(B), 0, "relu")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("capability", type=int, choices=sorted(SHARED_LIMIT), help="compute capability, 86 for 8.6")
    capability = parser.parse_args().capability
    if type(jit.JITFunction).__name__ == "InterpretedFunction" or triton.knobs.runtime.interpret:
        raise SystemExit("triton_gpu_compile.py: run it without TRITON_INTERPRET=1 (the interpreter compiles nothing)")
    from rnnt import host_reads
    host_reads.free = lambda device: False  # the GPU's paths, on CPU tensors
    driver.set_active(CompileOnlyDriver(capability))
    compiled, failed = [], []
    compile_only(compiled, failed)
    for launches in (lattice_passes, rows_cells_checks, simple_loss_arcs, fused_joiner):
        launches()
    limit = SHARED_LIMIT[capability]
    too_big = [(name, config, shared) for name, config, shared in compiled if shared > limit]
    for name, config, shared in compiled:
        print(f"sm_{capability} {name} {config}: shared {shared} B")
    for name, config, error in failed:
        print(f"sm_{capability} {name} {config}: does not compile: {error}", file=sys.stderr)
    for name, config, shared in too_big:
        print(f"sm_{capability} {name} {config}: {shared} B of shared memory, more than {limit}", file=sys.stderr)
    print(f"triton_gpu_compile.py: sm_{capability}: {len(compiled)} kernels compiled, {len(failed)} failed, "
          f"{len(too_big)} over the shared memory limit")
    return 1 if failed or too_big or not compiled else 0


if __name__ == "__main__":
    sys.exit(main())
