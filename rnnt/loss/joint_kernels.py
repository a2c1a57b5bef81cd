"""Triton kernels of the fused joiner + loss that never hold logits: each program takes a tile of the
lattice (utterance b, TILE_T frames, TILE_U label positions), computes the tile's joiner activations
act(enc[b, t] + pred[b, u]) in registers and walks the vocabulary COLUMNS at a time, multiplying them
by the output layer's rows (tl.dot).

- joint_stats_kernel: per cell the log-normaliser (online log-sum-exp over the vocabulary tiles) and
  the blank and label log-probs: all the lattice recursion reads.
- joint_hidden_grad_kernel: per cell d loss / d logits (softmax times the cell's occupancy less its two
  arc posteriors, tile by tile from the saved log-normaliser), times the output layer: d loss / d
  activations, then through the activation, summed over each step's labels into grad_enc and over a
  chunk of frames into grad_pred (atomic adds: label tiles share frames, frame chunks share labels).
- joint_weight_grad_kernel: per vocabulary tile and chunk of hidden units the sum over cells of d loss /
  d logits times the activations (grad_weight, grad_bias); each program sums a share of the tiles and
  adds it atomically.

Memory is the lattice's (B, T, U+1) arrays and the inputs' gradients; the logits are computed once in
each of the first two kernels and once a chunk of hidden units in the third. Imported only when the
Triton backend is asked for (rnnt.loss.joint_triton).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _activate(x, TANH: tl.constexpr):
    if TANH:
        return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)  # tanh; exact at both ends (exp overflows to inf: 1)
    return tl.maximum(x, 0.0)


@triton.jit
def _tile(pid, n_t_tiles, n_u_tiles, logit_lengths, target_lengths, TILE_T: tl.constexpr, TILE_U: tl.constexpr):
    """The tile's utterance, its frames (TILE_T,) and label positions (TILE_U,), and which are the utterance's."""
    per_utterance = n_t_tiles * n_u_tiles
    b = pid // per_utterance
    t = (pid % per_utterance) // n_u_tiles * TILE_T + tl.arange(0, TILE_T)
    u = (pid % n_u_tiles) * TILE_U + tl.arange(0, TILE_U)
    frames, labels = tl.load(logit_lengths + b), tl.load(target_lengths + b)
    return b, t, u, t < frames, u <= labels, labels


@triton.jit
def _hidden(enc, enc_sb, enc_st, pred, pred_sb, pred_su, b, t, u, t_in, u_in, hidden_size,
            ROWS: tl.constexpr, HIDDEN: tl.constexpr, TANH: tl.constexpr, INPUT_DTYPE_DOT: tl.constexpr, k0):
    """act(enc[b, t] + pred[b, u]) for the tile's cells and HIDDEN activations from k0, (ROWS = TILE_T *
    TILE_U, HIDDEN), 0 past hidden_size; in the inputs' dtype with INPUT_DTYPE_DOT (half-precision
    products), else float32."""
    k = k0 + tl.arange(0, HIDDEN)
    k_in = k < hidden_size
    e = tl.load(enc + b * enc_sb + t[:, None] * enc_st + k[None, :],
                mask=t_in[:, None] & k_in[None, :], other=0.0)
    p = tl.load(pred + b * pred_sb + u[:, None] * pred_su + k[None, :],
                mask=u_in[:, None] & k_in[None, :], other=0.0)
    hidden = _activate(e.to(tl.float32)[:, None, :] + p.to(tl.float32)[None, :, :], TANH)
    hidden = tl.reshape(hidden, (ROWS, HIDDEN))
    return hidden.to(enc.dtype.element_ty) if INPUT_DTYPE_DOT else hidden


@triton.jit
def _logits(hidden, weight, weight_stride, bias, v, hidden_size, vocab, HAS_BIAS: tl.constexpr,
            HIDDEN: tl.constexpr, PRECISION: tl.constexpr):
    """hidden @ weight[v].T + bias[v] in float32, (rows, COLUMNS), -inf past the vocabulary; and weight[v]
    in hidden's dtype."""
    k = tl.arange(0, HIDDEN)
    w = tl.load(weight + v[:, None] * weight_stride + k[None, :],
                mask=(v < vocab)[:, None] & (k < hidden_size)[None, :], other=0.0).to(hidden.dtype)
    logits = tl.dot(hidden, tl.trans(w), input_precision=PRECISION)
    return _biased_in_vocabulary(logits, bias, v, vocab, HAS_BIAS), w


@triton.jit
def _biased_in_vocabulary(logits, bias, v, vocab, HAS_BIAS: tl.constexpr):
    """logits + bias[v], -inf past the vocabulary."""
    if HAS_BIAS:
        logits += tl.load(bias + v, mask=v < vocab, other=0.0).to(tl.float32)[None, :]
    return tl.where((v < vocab)[None, :], logits, float("-inf"))


@triton.jit
def _cells(b, t, u, n_frames, n_positions, ROWS: tl.constexpr):
    """Offsets of the tile's cells in a (B, T, U+1) array, as rows (ROWS,)."""
    return tl.reshape((b * n_frames + t[:, None]) * n_positions + u[None, :], (ROWS,))


@triton.jit
def _rows_of(x, ROWS: tl.constexpr):
    return tl.reshape(x, (ROWS,))


@triton.jit
def _tile_labels(cell_labels, b, u, n_positions, t, ROWS: tl.constexpr):
    """The label arc's symbol of each cell, as rows (cell_labels: (B, U+1))."""
    label = tl.load(cell_labels + b * n_positions + u, mask=u < n_positions, other=0)
    return _rows_of(tl.zeros_like(t)[:, None] + label[None, :], ROWS)


@triton.jit
def joint_stats_kernel(enc, enc_sb, enc_st, pred, pred_sb, pred_su, weight, weight_stride, bias, cell_labels,
                       logit_lengths, target_lengths, lse, blank_lp, label_lp, n_frames, n_positions, n_t_tiles,
                       n_u_tiles, hidden_size, vocab, blank, HAS_BIAS: tl.constexpr, TANH: tl.constexpr,
                       PRECISION: tl.constexpr, TILE_T: tl.constexpr, TILE_U: tl.constexpr, ROWS: tl.constexpr,
                       HIDDEN: tl.constexpr, COLUMNS: tl.constexpr, INPUT_DTYPE_DOT: tl.constexpr):
    """lse, blank_lp and label_lp (B, T, U+1, float32) of the tile's cells; blank_lp -inf outside the
    utterance, label_lp -inf outside it and in its last column."""
    b, t, u, t_in, u_in, n_labels = _tile(tl.program_id(0), n_t_tiles, n_u_tiles, logit_lengths, target_lengths,
                                          TILE_T, TILE_U)
    hidden = _hidden(enc, enc_sb, enc_st, pred, pred_sb, pred_su, b, t, u, t_in, u_in, hidden_size, ROWS, HIDDEN,
                     TANH, INPUT_DTYPE_DOT, 0)
    label = _tile_labels(cell_labels, b, u, n_positions, t, ROWS)
    top = tl.full((ROWS,), float("-inf"), dtype=tl.float32)
    total = tl.zeros((ROWS,), dtype=tl.float32)
    blank_logit = tl.zeros((ROWS,), dtype=tl.float32)
    label_logit = tl.zeros((ROWS,), dtype=tl.float32)
    for v0 in range(0, vocab, COLUMNS):
        v = v0 + tl.arange(0, COLUMNS)
        logits, _ = _logits(hidden, weight, weight_stride, bias, v, hidden_size, vocab, HAS_BIAS, HIDDEN, PRECISION)
        new_top = tl.maximum(top, tl.max(logits, axis=1))
        total = total * tl.exp(top - new_top) + tl.sum(tl.exp(logits - new_top[:, None]), axis=1)
        top = new_top
        blank_logit += tl.sum(tl.where(v[None, :] == blank, logits, 0.0), axis=1)
        label_logit += tl.sum(tl.where(v[None, :] == label[:, None], logits, 0.0), axis=1)
    norm = top + tl.log(total)
    cells = _cells(b, t, u, n_frames, n_positions, ROWS)
    inside = _rows_of(t_in[:, None] & u_in[None, :], ROWS)
    has_label = _rows_of(t_in[:, None] & (u < n_labels)[None, :], ROWS)
    tl.store(lse + cells, norm, mask=inside)
    tl.store(blank_lp + cells, blank_logit - norm, mask=inside)
    tl.store(label_lp + cells, label_logit - norm, mask=has_label)


@triton.jit
def _logits_grad(logits, v, norm, post_blank, post_label, label, inside, blank, tiny):
    """d loss / d logits of a tile's rows: softmax * occupancy (flushed under tiny) less the arc posteriors."""
    g = tl.exp(logits - norm[:, None]) * (post_blank + post_label)[:, None]
    g = tl.where(tl.abs(g) < tiny, 0.0, g)
    g -= tl.where(v[None, :] == blank, post_blank[:, None], 0.0)
    g -= tl.where(v[None, :] == label[:, None], post_label[:, None], 0.0)
    return tl.where(inside[:, None] & (logits > float("-inf")), g, 0.0)


@triton.jit
def _cell_gradients(cell_labels, lse, gamma_blank, gamma_label, scale, b, t, u, t_in, u_in, n_frames, n_positions,
                    ROWS: tl.constexpr):
    """Of the tile's cells, as rows: their label symbols, which are the utterance's, their log-normalisers
    and their arc posteriors times the utterance's incoming gradient."""
    label = _tile_labels(cell_labels, b, u, n_positions, t, ROWS)
    cells = _cells(b, t, u, n_frames, n_positions, ROWS)
    inside = _rows_of(t_in[:, None] & u_in[None, :], ROWS)
    factor = tl.load(scale + b)
    norm = tl.load(lse + cells, mask=inside, other=0.0)
    post_blank = tl.load(gamma_blank + cells, mask=inside, other=0.0) * factor
    post_label = tl.load(gamma_label + cells, mask=inside, other=0.0) * factor
    return label, inside, norm, post_blank, post_label


@triton.jit
def _tile_grad_pre(enc, enc_sb, enc_st, pred, pred_sb, pred_su, weight, weight_stride, bias, cell_labels, lse,
                   gamma_blank, gamma_label, scale, b, t, u, t_in, u_in, n_frames, n_positions, hidden_size, vocab,
                   blank, tiny, HAS_BIAS: tl.constexpr, TANH: tl.constexpr, PRECISION: tl.constexpr,
                   TILE_T: tl.constexpr, TILE_U: tl.constexpr, ROWS: tl.constexpr, HIDDEN: tl.constexpr,
                   COLUMNS: tl.constexpr, INPUT_DTYPE_DOT: tl.constexpr):
    """d loss / d (enc[b, t] + pred[b, u]) of a tile's cells, (TILE_T, TILE_U, HIDDEN) float32."""
    hidden = _hidden(enc, enc_sb, enc_st, pred, pred_sb, pred_su, b, t, u, t_in, u_in, hidden_size, ROWS, HIDDEN,
                     TANH, INPUT_DTYPE_DOT, 0)
    label, inside, norm, post_blank, post_label = _cell_gradients(
        cell_labels, lse, gamma_blank, gamma_label, scale, b, t, u, t_in, u_in, n_frames, n_positions, ROWS)
    grad_hidden = tl.zeros((ROWS, HIDDEN), dtype=tl.float32)
    for v0 in range(0, vocab, COLUMNS):
        v = v0 + tl.arange(0, COLUMNS)
        logits, w = _logits(hidden, weight, weight_stride, bias, v, hidden_size, vocab, HAS_BIAS, HIDDEN, PRECISION)
        g = _logits_grad(logits, v, norm, post_blank, post_label, label, inside, blank, tiny)
        grad_hidden += tl.dot(g.to(w.dtype), w, input_precision=PRECISION)
    h = hidden.to(tl.float32)
    if TANH:
        grad_pre = grad_hidden * (1.0 - h * h)
    else:
        grad_pre = tl.where(h > 0.0, grad_hidden, 0.0)
    return tl.reshape(grad_pre, (TILE_T, TILE_U, HIDDEN))


@triton.jit
def joint_hidden_grad_kernel(enc, enc_sb, enc_st, pred, pred_sb, pred_su, weight, weight_stride, bias, cell_labels,
                             logit_lengths, target_lengths, lse, gamma_blank, gamma_label, scale, grad_enc,
                             grad_pred, n_frames, n_positions, n_u_tiles, n_chunks, chunk_frames, hidden_size, vocab,
                             blank, tiny, HAS_BIAS: tl.constexpr, TANH: tl.constexpr, PRECISION: tl.constexpr,
                             TILE_T: tl.constexpr, TILE_U: tl.constexpr, ROWS: tl.constexpr,
                             HIDDEN: tl.constexpr, COLUMNS: tl.constexpr, INPUT_DTYPE_DOT: tl.constexpr):
    """Adds d loss / d enc and d loss / d pred into grad_enc (B, T, H) and grad_pred (B, U+1, H), float32
    and contiguous. A program takes utterance b's label tile (TILE_U positions) over a chunk of chunk_frames
    frames, TILE_T at a time up to the utterance's last frame (padding frames are skipped): each step's
    sum over its labels goes into grad_enc, its sum over its frames into registers, added to grad_pred once."""
    pid = tl.program_id(0)
    b = pid // (n_u_tiles * n_chunks)
    u = (pid // n_chunks % n_u_tiles) * TILE_U + tl.arange(0, TILE_U)
    n_labels = tl.load(target_lengths + b)
    u_in = u <= n_labels
    start = pid % n_chunks * chunk_frames
    end = tl.minimum(start + chunk_frames, tl.load(logit_lengths + b))
    k = tl.arange(0, HIDDEN)
    k_in = k < hidden_size
    grad_pred_sum = tl.zeros((TILE_U, HIDDEN), dtype=tl.float32)
    for t0 in range(start, end, TILE_T):
        t = t0 + tl.arange(0, TILE_T)
        t_in = t < end
        grad_pre = _tile_grad_pre(enc, enc_sb, enc_st, pred, pred_sb, pred_su, weight, weight_stride, bias,
                                  cell_labels, lse, gamma_blank, gamma_label, scale, b, t, u, t_in, u_in, n_frames,
                                  n_positions, hidden_size, vocab, blank, tiny, HAS_BIAS, TANH, PRECISION, TILE_T,
                                  TILE_U, ROWS, HIDDEN, COLUMNS, INPUT_DTYPE_DOT)
        tl.atomic_add(grad_enc + (b * n_frames + t[:, None]) * hidden_size + k[None, :], tl.sum(grad_pre, axis=1),
                      mask=t_in[:, None] & k_in[None, :])
        grad_pred_sum += tl.sum(grad_pre, axis=0)
    tl.atomic_add(grad_pred + (b * n_positions + u[:, None]) * hidden_size + k[None, :], grad_pred_sum,
                  mask=u_in[:, None] & k_in[None, :])


@triton.jit
def _chunked_logits(enc, enc_sb, enc_st, pred, pred_sb, pred_su, weight, weight_stride, bias, b, t, u, t_in, u_in, v,
                    hidden_size, vocab, HAS_BIAS: tl.constexpr, TANH: tl.constexpr, PRECISION: tl.constexpr,
                    ROWS: tl.constexpr, COLUMNS: tl.constexpr, CHUNK: tl.constexpr, INPUT_DTYPE_DOT: tl.constexpr):
    """The tile's logits of vocabulary entries v, (ROWS, COLUMNS) float32, -inf past the vocabulary: the
    activations and the output layer's rows taken CHUNK hidden units at a time, so that no register holds
    a whole row of either."""
    logits = tl.zeros((ROWS, COLUMNS), dtype=tl.float32)
    for k0 in range(0, hidden_size, CHUNK):
        hidden = _hidden(enc, enc_sb, enc_st, pred, pred_sb, pred_su, b, t, u, t_in, u_in, hidden_size, ROWS, CHUNK,
                         TANH, INPUT_DTYPE_DOT, k0)
        k = k0 + tl.arange(0, CHUNK)
        w = tl.load(weight + v[:, None] * weight_stride + k[None, :],
                    mask=(v < vocab)[:, None] & (k < hidden_size)[None, :], other=0.0).to(hidden.dtype)
        logits += tl.dot(hidden, tl.trans(w), input_precision=PRECISION)
    return _biased_in_vocabulary(logits, bias, v, vocab, HAS_BIAS)


@triton.jit
def joint_weight_grad_kernel(enc, enc_sb, enc_st, pred, pred_sb, pred_su, weight, weight_stride, bias, cell_labels,
                             logit_lengths, target_lengths, lse, gamma_blank, gamma_label, scale, grad_weight,
                             grad_bias, n_frames, n_positions, n_t_tiles, n_u_tiles, n_tiles, hidden_size, vocab,
                             blank, tiny, HAS_BIAS: tl.constexpr, TANH: tl.constexpr, PRECISION: tl.constexpr,
                             TILE_T: tl.constexpr, TILE_U: tl.constexpr, ROWS: tl.constexpr,
                             HIDDEN: tl.constexpr, COLUMNS: tl.constexpr, INPUT_DTYPE_DOT: tl.constexpr,
                             CHUNK: tl.constexpr):
    """Adds d loss / d weight[v, k] and d loss / d bias[v] of vocabulary tile program_id(0) and hidden chunk
    program_id(1) (CHUNK units from program_id(1) * CHUNK), summed over the lattice tiles program_id(2),
    + num_programs(2), ..., into grad_weight (V, H) and grad_bias (V,), float32. A program holds a
    COLUMNS x CHUNK sum, not COLUMNS x HIDDEN; each tile's logits are taken over the whole width, once a
    chunk."""
    v = tl.program_id(0) * COLUMNS + tl.arange(0, COLUMNS)
    k0 = tl.program_id(1) * CHUNK
    k = k0 + tl.arange(0, CHUNK)
    acc_weight = tl.zeros((COLUMNS, CHUNK), dtype=tl.float32)
    acc_bias = tl.zeros((COLUMNS,), dtype=tl.float32)
    for tile in range(tl.program_id(2), n_tiles, tl.num_programs(2)):
        b, t, u, t_in, u_in, _ = _tile(tile, n_t_tiles, n_u_tiles, logit_lengths, target_lengths, TILE_T, TILE_U)
        label, inside, norm, post_blank, post_label = _cell_gradients(
            cell_labels, lse, gamma_blank, gamma_label, scale, b, t, u, t_in, u_in, n_frames, n_positions, ROWS)
        logits = _chunked_logits(enc, enc_sb, enc_st, pred, pred_sb, pred_su, weight, weight_stride, bias, b, t, u,
                                 t_in, u_in, v, hidden_size, vocab, HAS_BIAS, TANH, PRECISION, ROWS, COLUMNS, CHUNK,
                                 INPUT_DTYPE_DOT)
        g = _logits_grad(logits, v, norm, post_blank, post_label, label, inside, blank, tiny)
        hidden = _hidden(enc, enc_sb, enc_st, pred, pred_sb, pred_su, b, t, u, t_in, u_in, hidden_size, ROWS, CHUNK,
                         TANH, INPUT_DTYPE_DOT, k0)
        acc_weight += tl.dot(tl.trans(g.to(hidden.dtype)), hidden, input_precision=PRECISION)
        acc_bias += tl.sum(g, axis=0)
    v_in = v < vocab
    tl.atomic_add(grad_weight + v[:, None] * hidden_size + k[None, :], acc_weight,
                  mask=v_in[:, None] & (k < hidden_size)[None, :])
    if HAS_BIAS:
        tl.atomic_add(grad_bias + v, acc_bias, mask=v_in & (tl.program_id(1) == 0))
