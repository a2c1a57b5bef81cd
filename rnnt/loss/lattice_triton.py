"""Which backend runs the lattice passes, and the launches of the Triton ones (rnnt.loss.lattice_kernels).
The same choice picks how the losses on logits read them and write their gradient (rnnt.loss.row_triton).

backend "torch": batched PyTorch operations (rnnt.loss.lattice: a scan per row of the lattice, or a step per
frame or anti-diagonal), on any device.
backend "triton": one kernel launch per pass (CUDA tensors; CPU tensors under TRITON_INTERPRET=1).
backend "auto": Triton on an NVIDIA GPU of compute capability 8.0 or newer (Triton's own range) when the triton
package is installed, PyTorch otherwise. "torch" keeps Triton out altogether, the losses' checks and cell maps
too (bookkeeping_in_triton): the way round a GPU or toolchain where Triton does not compile.

Triton launches on the current CUDA device and its stream, not the tensors': the losses' entry points run on
their inputs' device (on_inputs_device; autograd runs a backward on its tensors' device already).
"""

from __future__ import annotations

import functools
import importlib.util
from functools import cache

import torch

from rnnt import host_reads

BACKENDS = ("auto", "torch", "triton")


def triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


@cache
def _kernels():
    from rnnt.loss import lattice_kernels
    return lattice_kernels


def interpreting() -> bool:
    """The kernels run in Triton's interpreter (TRITON_INTERPRET=1 was set before triton was imported)."""
    return type(_kernels().forward_kernel).__name__ == "InterpretedFunction"


def bookkeeping_in_triton(device: torch.device, backend: str = "auto") -> bool:
    """Whether a loss's checks and cell maps take one Triton launch each instead of dozens of small PyTorch ones
    (whichever of "auto" and "triton" runs its passes; never with "torch"): where the host does not read the
    device for free and Triton runs, on a GPU "auto" would give it or on CPU tensors in its interpreter (as the
    tests and benchmarks/launches.py take the GPU's path)."""
    if backend == "torch" or host_reads.free(device) or not triton_installed():
        return False
    return triton_runs_on(device) or (device.type == "cpu" and interpreting())


@cache
def triton_runs_on(device: torch.device) -> bool:
    """An NVIDIA GPU of compute capability 8.0 or newer (Triton 3's; not ROCm's devices, on which these kernels
    were never run)."""
    return device.type == "cuda" and torch.version.hip is None and torch.cuda.get_device_capability(device) >= (8, 0)


def on_inputs_device(function):
    """function run with the current CUDA device set to that of its first tensor argument, where that is a CUDA
    tensor: Triton launches on the current device (a loss of tensors on cuda:1 ran its kernels on cuda:0)."""
    @functools.wraps(function)
    def run(*args, **kwargs):
        first = next((x for x in (*args, *kwargs.values()) if isinstance(x, torch.Tensor)), None)
        if first is None or first.device.type != "cuda":
            return function(*args, **kwargs)
        with torch.cuda.device(first.device):
            return function(*args, **kwargs)
    return run


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"loss backend must be one of {BACKENDS}, got '{backend}'")


def resolve_backend(backend: str, device: torch.device) -> str:
    """'torch' or 'triton' for lattices on device; a clear error where the Triton backend cannot run."""
    check_backend(backend)
    if backend == "auto":
        return "triton" if device.type == "cuda" and triton_installed() and triton_runs_on(device) else "torch"
    if backend == "triton":
        if not triton_installed():
            raise RuntimeError("loss backend 'triton' needs the triton package (pip install triton)")
        if device.type != "cuda" and not interpreting():
            raise ValueError(f"loss backend 'triton' runs on CUDA tensors, got {device.type} ones; on the CPU it "
                             "runs in Triton's interpreter, with TRITON_INTERPRET=1 set before triton is imported")
    return backend


def _launch_shape(U1: int) -> tuple[int, int]:
    """Columns a program handles at once and its warps. On an H100, 128 columns on 4 warps was the fastest
    of 1-8 warps on 128-256 columns at U = 50-104 (one lattice pass in 0.1-0.35 ms)."""
    block = min(max(next_power_of_2(U1), 128), 1024)
    return block, 4 if block <= 256 else 8


def next_power_of_2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def _steps(T: int, U1: int, one_sym_per_frame: bool) -> int:
    """Steps of a pass over the padded lattice: its frames, or its anti-diagonals."""
    return T if one_sym_per_frame else T + U1 - 1


def on_device(x: torch.Tensor, device, dtype=None) -> torch.Tensor:
    """x on device (in dtype) and contiguous, as the kernels read a (B,) tensor (an expanded or strided one
    was read as another's values, or past its end): no copy where it is so already, none that waits for the
    device."""
    return x.to(device=device, dtype=dtype, non_blocking=True).contiguous()


def lengths_on(logit_lengths, target_lengths, device):
    """The lengths on the lattice's device (on_device), of any integer dtype (the kernels read them as such)."""
    return on_device(logit_lengths, device), on_device(target_lengths, device)


def lattice_posteriors(blank, label, logit_lengths, target_lengths, one_sym_per_frame: bool):
    """As rnnt.loss.lattice.lattice_posteriors, in two launches (alpha; beta with the posteriors). Half-precision
    arcs are summed in float32 (as the torch backend sums them in more: tl.exp and tl.log take float32 and float64
    alone, and a GPU refused to compile them for bfloat16), the results given back in their dtype."""
    if blank.dtype in (torch.bfloat16, torch.float16):
        tiny = torch.finfo(blank.dtype).tiny
        results = lattice_posteriors(blank.float(), label.float(), logit_lengths, target_lengths, one_sym_per_frame)
        log_like, *posteriors = (x.to(blank.dtype) for x in results)
        return log_like, *(torch.nn.functional.threshold_(x, tiny, 0.0) for x in posteriors)
    kernels = _kernels()
    blank, label = blank.contiguous(), label.contiguous()
    B, T, U1 = blank.shape
    frames, symbols = lengths_on(logit_lengths, target_lengths, blank.device)
    alpha, beta = torch.empty((2, *blank.shape), dtype=blank.dtype, device=blank.device)  # only nodes are read
    cells = B * T * U1  # the posteriors (0 but at nodes) and log_like in one allocation
    gammas, log_like = torch.zeros(2 * cells + B, dtype=blank.dtype, device=blank.device).split([2 * cells, B])
    gamma_blank, gamma_label = gammas.view(2, B, T, U1)
    block, warps = _launch_shape(U1)
    one_sym, steps = int(one_sym_per_frame), _steps(T, U1, one_sym_per_frame)
    kernels.forward_kernel[(B,)](blank, label, alpha, log_like, frames, symbols, T, U1, steps,
                                 ONE_SYM=one_sym, BLOCK=block, num_warps=warps)
    kernels.backward_kernel[(B,)](blank, label, alpha, log_like, beta, gamma_blank, gamma_label, frames, symbols,
                                  T, U1, steps, tiny=torch.finfo(blank.dtype).tiny, ONE_SYM=one_sym, BLOCK=block,
                                  num_warps=warps)
    return log_like, gamma_blank, gamma_label


def best_path_label_frames(blank, label, logit_lengths, target_lengths, one_sym_per_frame: bool):
    """As rnnt.loss.lattice.best_path_label_frames, in one launch."""
    kernels = _kernels()
    blank, label = blank.contiguous(), label.contiguous()
    B, T, U1 = blank.shape
    frames, symbols = lengths_on(logit_lengths, target_lengths, blank.device)
    delta = torch.empty_like(blank)
    by_label = torch.empty(blank.shape, dtype=torch.int8, device=blank.device)
    width = max(U1 - 1, 1)
    label_frames = torch.full((B, width), -1, dtype=torch.long, device=blank.device)
    block, warps = _launch_shape(U1)
    kernels.viterbi_kernel[(B,)](blank, label, delta, by_label, label_frames, frames, symbols, T, U1,
                                 _steps(T, U1, one_sym_per_frame), width,
                                 ONE_SYM=int(one_sym_per_frame), BLOCK=block, num_warps=warps)
    return label_frames


def window_starts(gamma_blank, gamma_label, target_lengths, s_range: int):
    """As rnnt.loss.pruned.window_starts, in one launch: (B, T) starts and (B,) last starts."""
    B, T, U1 = gamma_blank.shape
    width = min(s_range, U1)
    start, last_start = torch.empty(B * T + B, dtype=torch.long, device=gamma_blank.device).split([B * T, B])
    _kernels().window_kernel[(B * T,)](gamma_blank.contiguous(), gamma_label.contiguous(),
                                       on_device(target_lengths, gamma_blank.device), start, last_start,
                                       T, U1, U1 - width + 1, width, s_range,
                                       BLOCK=next_power_of_2(U1 - width + 1), num_warps=4)
    return start.view(B, T), last_start


def connected_band_starts(start, logit_lengths, last_start, s_range: int):
    """As the two passes of rnnt.loss.pruned.prune_ranges over start (B, T), in one launch; in place."""
    B, T = start.shape
    frames = on_device(logit_lengths, start.device)
    _kernels().band_kernel[(B,)](start, frames, last_start.contiguous(), T, s_range, num_warps=1)
    return start


def one_symbol_band_starts(start, logit_lengths, target_lengths, last_start, s_range: int):
    """As rnnt.loss.pruned._one_symbol_band_starts over start (B, T), in one launch; in place."""
    B, T = start.shape
    frames = on_device(logit_lengths, start.device, start.dtype)
    symbols = on_device(target_lengths, start.device, start.dtype)
    _kernels().one_symbol_band_kernel[(B,)](start, frames, symbols, last_start.to(start.dtype).contiguous(), T,
                                            s_range, num_warps=1)
    return start
