"""The launches of the fused joiner + loss kernels (rnnt.loss.joint_kernels), used by fused_joiner_loss
when its backend resolves to "triton" and the joiner fits (`fits`): three passes over the lattice, none
holding a block of logits."""

from __future__ import annotations

from functools import cache

import torch

from rnnt.loss.lattice_triton import interpreting, next_power_of_2

MAX_HIDDEN = 512  # joiner activations a tile holds in registers; wider joiners take the blocks of logits
# Launch constants: on an sm_90 build (benchmarks/kernel_resources.py), 16 cells x 32 columns x 4 warps spill
# least: nothing at width 256 in float32, a few KB at 512; their speed is timed by benchmarks/joint_kernels.py
TILE_ROWS = 16  # lattice cells a program takes at once (tl.dot needs at least 16)
MAX_TILE_U = 16  # of them label positions; the rest frames
COLUMNS = 32  # vocabulary entries of one step
WARPS = 4
CHUNK_FRAMES = 32  # frames a program of the input gradients walks, adding to grad_pred once at the end
# Hidden units a program of the weight gradient sums (COLUMNS x this in registers): holding all 512 of a wide
# joiner spilled its sum to local memory, 95% of a bfloat16 step on an H200; of 64, 128 and 256, 256 was the
# fastest there under bfloat16 and TF32 at both of joint_kernels.py's shapes (benchmarks/RESULTS.md)
WEIGHT_GRAD_CHUNK = DEFAULT_WEIGHT_GRAD_CHUNK = 256
STAGES = 1  # no software pipelining of the vocabulary steps: each stage holds another weight tile in shared memory
PROGRAMS_PER_CORE = 4  # of the weight gradient: its lattice tiles are shared among this many programs per core
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def use_launch(launch: str) -> None:
    """Sets the launch constants from CELLSxCOLUMNSxWARPS[xCHUNK] (lattice cells a program takes, vocabulary
    columns a step, warps, hidden units a weight-gradient program sums; the default without), as the benchmarks
    sweep them."""
    global TILE_ROWS, MAX_TILE_U, COLUMNS, WARPS, WEIGHT_GRAD_CHUNK
    cells, columns, warps, *chunk = map(int, launch.split("x"))
    TILE_ROWS, MAX_TILE_U, COLUMNS, WARPS = cells, min(16, cells), columns, warps
    WEIGHT_GRAD_CHUNK = chunk[0] if chunk else DEFAULT_WEIGHT_GRAD_CHUNK


@cache
def _kernels():
    from rnnt.loss import joint_kernels
    return joint_kernels


def fits(enc: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether the kernels take this joiner: float32 or half-precision products, at most MAX_HIDDEN wide."""
    return enc.dtype in DTYPES and weight.shape[1] <= MAX_HIDDEN


def _precision(dtype: torch.dtype) -> str:
    """tl.dot's: float32 products as torch.matmul makes them (TF32 only where PyTorch allows it)."""
    return "tf32" if dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32 else "ieee"


def _geometry(enc, pred, activation: str):
    """The launch constants shared by the three kernels, and the lattice tiles along T and U+1."""
    B, T, H = enc.shape
    U1 = pred.shape[1]
    tile_u = min(next_power_of_2(U1), MAX_TILE_U)
    tile_t = TILE_ROWS // tile_u
    n_t, n_u = -(-T // tile_t), -(-U1 // tile_u)
    constants = dict(TANH=activation == "tanh", PRECISION=_precision(enc.dtype), TILE_T=tile_t, TILE_U=tile_u,
                     ROWS=tile_t * tile_u, HIDDEN=max(16, next_power_of_2(H)), COLUMNS=COLUMNS,
                     INPUT_DTYPE_DOT=not interpreting(), num_warps=WARPS,  # the interpreter's bfloat16 dot is wrong
                     num_stages=STAGES)
    return constants, n_t, n_u


def _inputs(enc, pred, weight):
    """The tensors' pointers and strides as the kernels take them (the hidden dimension contiguous)."""
    enc, pred, weight = (x if x.stride(-1) == 1 else x.contiguous() for x in (enc, pred, weight))
    return (enc, enc.stride(0), enc.stride(1), pred, pred.stride(0), pred.stride(1), weight, weight.stride(0))


def joint_stats(enc, pred, weight, bias, cell_labels, logit_lengths, target_lengths, blank: int, activation: str):
    """Per cell (B, T, U+1), float32: the log-normaliser of the joiner's logits W @ act(enc + pred) + bias,
    and the blank's and label's log-probs (-inf where the cell has no such arc)."""
    B, T, H = enc.shape
    U1, V = pred.shape[1], weight.shape[0]
    constants, n_t, n_u = _geometry(enc, pred, activation)
    lse = torch.zeros(B, T, U1, dtype=torch.float32, device=enc.device)
    blank_lp, label_lp = torch.full_like(lse, float("-inf")), torch.full_like(lse, float("-inf"))
    _kernels().joint_stats_kernel[(B * n_t * n_u,)](
        *_inputs(enc, pred, weight), bias if bias is not None else weight, cell_labels.contiguous(),
        logit_lengths.contiguous(), target_lengths.contiguous(), lse, blank_lp, label_lp, T, U1, n_t, n_u, H, V,
        blank, HAS_BIAS=bias is not None, **constants)
    return lse, blank_lp, label_lp


def joint_gradients(enc, pred, weight, bias, cell_labels, logit_lengths, target_lengths, lse, gamma_blank,
                    gamma_label, scale, blank: int, activation: str):
    """d loss / d enc, pred, weight and bias (None without a bias), each in its input's dtype, from the
    cells' log-normalisers (joint_stats) and arc posteriors, each utterance's scaled by scale (B,)."""
    B, T, H = enc.shape
    U1, V = pred.shape[1], weight.shape[0]
    constants, n_t, n_u = _geometry(enc, pred, activation)
    inputs = _inputs(enc, pred, weight)
    cells = (bias if bias is not None else weight, cell_labels.contiguous(), logit_lengths.contiguous(),
             target_lengths.contiguous(), lse.contiguous(), gamma_blank.float().contiguous(),
             gamma_label.float().contiguous(), scale.float().contiguous())
    tiny = torch.finfo(torch.float32).tiny
    grad_enc = torch.zeros(B, T, H, dtype=torch.float32, device=enc.device)
    grad_pred = torch.zeros(B, U1, H, dtype=torch.float32, device=enc.device)
    n_chunks = -(-T // CHUNK_FRAMES)
    _kernels().joint_hidden_grad_kernel[(B * n_u * n_chunks,)](
        *inputs, *cells, grad_enc, grad_pred, T, U1, n_u, n_chunks, CHUNK_FRAMES, H, V, blank, tiny,
        HAS_BIAS=bias is not None, **constants)
    grad_weight = torch.zeros(V, H, dtype=torch.float32, device=enc.device)
    grad_bias = torch.zeros(V, dtype=torch.float32, device=enc.device)
    chunk = min(WEIGHT_GRAD_CHUNK, constants["HIDDEN"])
    n_v, n_h, n_tiles = -(-V // COLUMNS), -(-H // chunk), B * n_t * n_u
    shares = max(1, min(n_tiles, PROGRAMS_PER_CORE * _cores(enc.device) // (n_v * n_h)))
    _kernels().joint_weight_grad_kernel[(n_v, n_h, shares)](
        *inputs, *cells, grad_weight, grad_bias, T, U1, n_t, n_u, n_tiles, H, V, blank, tiny,
        HAS_BIAS=bias is not None, CHUNK=chunk, **constants)
    return (grad_enc.to(enc.dtype), grad_pred.to(pred.dtype), grad_weight.to(weight.dtype),
            grad_bias.to(bias.dtype) if bias is not None else None)


def _cores(device: torch.device) -> int:
    """Streaming multiprocessors of a GPU; on the CPU (Triton's interpreter) a few."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4
