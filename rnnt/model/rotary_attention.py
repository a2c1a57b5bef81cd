"""Multi-head self-attention with relative positions by rotation (RoFormer, Su et al. 2021), for the
Conformer (rnnt.model.conformer): queries and keys are turned by their frames' positions, so that every
attention score depends on the distance between the two frames alone, with no parameters. That is also what
lets a stream give the whole utterance's scores: a chunk's frames and the frames cached before it are turned
by their places in the window they make, not in the utterance.

Which keys a query reads (`allowed`): every valid frame of its sequence (offline), or, with chunks
(Conformer's chunk_frames), the frames of its own chunk and of the left_chunks chunks before it, as a stream
of those chunks holds them: the chunk and a cache of the keys and values of the frames before it.

Training on the CPU with dropout on the attention weights, the weights are computed here and dropped by
rnnt.model.dropout: torch's scaled_dot_product_attention falls back to its own arithmetic with dropout there and
draws the mask one float at a time. Forward and backward of 8 x 4 heads x 299 frames (head_dim 36): 24 ms
against 37 in float32, 17 against 38 in bfloat16 (autocast), on two threads. Everywhere else (evaluation, exports,
streams, CUDA, no dropout) it is torch's kernel.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from rnnt.model.dropout import Dropout


def rotation(frames: int, head_dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (frames, head_dim / 2) of the angle t / 10000^(2i / head_dim) of channel pair i at frame t:
    computed once a forward and shared by every block. The angles are brought within one turn in float64, then
    turned in float32: in float32 an angle of thousands of radians (frame 8000 of an 80 s utterance) is off by
    1e-3 or more, and the whole utterance's attention drifted from what a stream (positions within its window)
    computes. (Not cos and sin in float64: onnxruntime has no float64 Cos.)"""
    half = head_dim // 2
    frequencies = 10000.0 ** (-torch.arange(half, device=device, dtype=torch.float64) / half)
    angles = torch.arange(frames, device=device, dtype=torch.float64)[:, None] * frequencies[None, :]
    angles = (angles - torch.floor(angles / (2 * math.pi)) * (2 * math.pi)).float()
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos_sin: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Queries or keys (B, heads, T, head_dim) rotated by their positions: channel pair i of frame t
    (channels i and i + head_dim / 2) turned by the angle of row t of cos_sin (rotation(T, head_dim))."""
    cos, sin = (part.to(x.dtype) for part in cos_sin)
    half = x.shape[3] // 2
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


def allowed_keys(valid: torch.Tensor, chunk_frames: int = 0, left_chunks: int = 0) -> torch.Tensor:
    """valid (B, T) -> (B, 1, T) or (B, T, T) bool, True where a query (row) may read a key (column): the
    sequence's valid frames; with chunk_frames, only those of the query's chunk and the left_chunks before it.
    A padded query reads frame 0 too, and so does every query of a sequence of no frames, so that no row is
    without a key whatever the attention kernel: PyTorch's on the CPU and onnxruntime give such a row zeros, but
    one that gave NaN would have the next block's attention spread it to every frame (NaN x weight 0 is NaN)."""
    if not chunk_frames:
        keys = valid.clone()
        keys[:, 0] = True
        return keys[:, None, :]
    frames = torch.arange(valid.shape[1], device=valid.device)
    behind = (frames // chunk_frames)[:, None] - (frames // chunk_frames)[None, :]  # query's chunk - key's chunk
    allowed = ((behind >= 0) & (behind <= left_chunks))[None] & valid[:, None, :]
    return allowed | (~valid[:, :, None] & (frames == 0)[None, None, :])  # not in place: an ONNX graph's op


class ChunkedKeys(NamedTuple):
    """allowed_keys' rule with chunks, kept as the rule where a (B, T, T) mask would be too large: valid (B, T),
    chunk_frames, left_chunks. Attention then runs a block of queries at a time (attention_in_chunks)."""
    valid: torch.Tensor
    chunk_frames: int
    left_chunks: int


QUERY_BLOCK = 512  # the queries a step of attention_in_chunks takes (20 s of 40 ms frames), rounded to chunks


def keys_allowed(valid: torch.Tensor, chunk_frames: int, left_chunks: int, whole: bool) -> torch.Tensor | ChunkedKeys:
    """allowed_keys' mask, or with chunks over more than two query blocks its rule (ChunkedKeys) where the whole
    forward may run a block at a time (whole: not training, nor traced for export): the mask grew as the square of
    the length, 10 GB of it for 20 minutes decoded whole, though a frame reads (left_chunks + 1) chunks."""
    if chunk_frames and whole and valid.shape[1] > 2 * QUERY_BLOCK:
        return ChunkedKeys(valid, chunk_frames, left_chunks)
    return allowed_keys(valid, chunk_frames, left_chunks)


def attention_in_chunks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keys: ChunkedKeys) -> torch.Tensor:
    """Attention of rotated q, k, v (B, heads, T, head_dim) under keys' rule, a block of whole chunks of queries
    at a time against the keys their chunks read: memory of a block's, not of T x T. A padded query with no key
    reads every key of its block (finite: a NaN would spread to the valid frames through weights of 0)."""
    chunk, left = keys.chunk_frames, keys.left_chunks
    step = chunk * max(1, QUERY_BLOCK // chunk)
    frames = torch.arange(q.shape[2], device=q.device)
    parts = []
    for start in range(0, q.shape[2], step):  # (start begins a chunk: its window begins left chunks before)
        end, first = start + step, max(0, start - left * chunk)
        behind = (frames[start:end] // chunk)[:, None] - (frames[first:end] // chunk)[None, :]
        allowed = ((behind >= 0) & (behind <= left))[None] & keys.valid[:, None, first:end]
        allowed = allowed | ~allowed.any(dim=2, keepdim=True)
        parts.append(torch.nn.functional.scaled_dot_product_attention(
            q[:, :, start:end], k[:, :, first:end], v[:, :, first:end], attn_mask=allowed[:, None]))
    return torch.cat(parts, dim=2)


class SelfAttention(torch.nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.weight_dropout = Dropout(dropout)  # on the attention weights
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, allowed: torch.Tensor | ChunkedKeys, cos_sin: tuple[torch.Tensor, torch.Tensor]
                ) -> torch.Tensor:
        """x (B, T, dim) -> (B, T, dim), each frame attending to the keys allowed (keys_allowed's) allows it;
        cos_sin: rotation(T, dim / heads)."""
        B, T, dim = x.shape
        q, k, v = (self.split_heads(part) for part in self.qkv(x).chunk(3, dim=-1))
        q, k = rotate(q, cos_sin), rotate(k, cos_sin)
        if isinstance(allowed, ChunkedKeys):
            return self.out(attention_in_chunks(q, k, v, allowed).transpose(1, 2).reshape(B, T, dim))
        mask = allowed[:, None]
        if self.training and self.weight_dropout.p > 0 and x.device.type == "cpu":
            scores = (q * (1 / math.sqrt(q.shape[-1]))) @ k.transpose(2, 3)
            attended = self.weight_dropout(torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1)) @ v
        else:
            attended = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=self.weight_dropout.p if self.training else 0.0)
        return self.out(attended.transpose(1, 2).reshape(B, T, dim))

    def stream(self, x: torch.Tensor, cache: torch.Tensor, cached: torch.Tensor,
               cos_sin: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """A chunk's frames x (B, C, dim), each attending to the chunk and to the L frames before it, cache
        (B, 2L, dim) the keys, then the values, of those L frames (as projected, before rotation), of which cached
        (B, L) says which are real (a stream's first chunks have fewer than L before them) -> (B, C, dim) and the
        cache after the chunk. Only the chunk is projected: a cached frame's key and value are its own whatever
        the chunk, and its key is turned by its place in the window each time. cos_sin: rotation(L + C, dim / heads)."""
        B, C, dim = x.shape
        L = cache.shape[1] // 2
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        keys, values = torch.cat([cache[:, :L], k], dim=1), torch.cat([cache[:, L:], v], dim=1)
        cos, sin = cos_sin
        q = rotate(self.split_heads(q), (cos[L:], sin[L:]))
        allowed = torch.cat([cached, torch.ones_like(cached[:, :1]).expand(B, C)], dim=1)
        attended = torch.nn.functional.scaled_dot_product_attention(
            q, rotate(self.split_heads(keys), cos_sin), self.split_heads(values), attn_mask=allowed[:, None, None, :])
        return (self.out(attended.transpose(1, 2).reshape(B, C, dim)),
                torch.cat([keys[:, C:], values[:, C:]], dim=1))

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, dim) -> (B, heads, T, dim / heads)"""
        B, T, dim = x.shape
        return x.view(B, T, self.heads, dim // self.heads).transpose(1, 2)
