"""The global CMVN statistics a config names (data.features.cmvn), in the forms a speech engineer has them:
steps/compute_cmvn_stats.py's JSON, WeNet's global_cmvn JSON ({"mean_stat", "var_stat", "frame_num"}), or
a Kaldi stats matrix (2 x (D + 1): the feature sums and the frame count, then the sums of squares, as
compute-cmvn-stats writes it; read through the JSON compute_cmvn_stats.py writes beside it where there is one,
which also says the features it is of)."""

from __future__ import annotations

import json
import os

import numpy as np

WRITTEN_BY = "steps/compute_cmvn_stats.py"


def mean_and_std(sums, squares, frames) -> tuple[np.ndarray, np.ndarray]:
    """The mean and standard deviation of frames from their sums and sums of squares (the variance floored at
    1e-20, as Kaldi's and WeNet's are)."""
    sums, squares = np.asarray(sums, dtype=np.float64), np.asarray(squares, dtype=np.float64)
    mean = sums / frames
    return mean, np.sqrt(np.maximum(squares / frames - mean ** 2, 1e-20))


def cmvn_source(path: str) -> str:
    """The file read_cmvn reads for data.features.cmvn: the JSON beside a matrix compute_cmvn_stats.py wrote."""
    return f"{path}.json" if not path.endswith(".json") and os.path.isfile(f"{path}.json") else path


def read_cmvn(path: str) -> dict:
    """{"mean", "std"} (lists) and, where the file says, "preset" and "sample_rate". Raises ValueError naming
    the file where it holds none of the forms."""
    path = cmvn_source(path)
    try:
        with open(path, "rb") as f:
            head = f.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError as error:
        raise ValueError(f"{path}: cannot read the CMVN stats (data.features.cmvn): {error.strerror}") from None
    stats = _read_json(path) if head.startswith(b"{") else _read_kaldi_matrix(path)
    if "mean" not in stats:
        frames = stats["frame_num"]
        if not isinstance(frames, (int, float)) or frames <= 0:
            raise ValueError(f"{path}: CMVN stats of {frames} frames; recompute them with {WRITTEN_BY}")
        mean, std = mean_and_std(stats["mean_stat"], stats["var_stat"], frames)
        stats = {**stats, "mean": mean.tolist(), "std": std.tolist()}
    if not all(isinstance(stats[key], list) for key in ("mean", "std")) or len(stats["mean"]) != len(stats["std"]) \
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in stats["mean"] + stats["std"]):
        raise ValueError(f"{path}: the CMVN mean and deviation must be lists of numbers of one length (one value a "
                         "bin)")
    return stats


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8-sig") as f:
            stats = json.load(f)
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"{path}: not a CMVN JSON ({error})") from None
    has = set(stats) if isinstance(stats, dict) else set()
    if not ({"mean", "std"} <= has or {"mean_stat", "var_stat", "frame_num"} <= has):
        raise ValueError(f"{path}: a CMVN JSON holds 'mean' and 'std' ({WRITTEN_BY}) or 'mean_stat', 'var_stat' "
                         f"and 'frame_num' (WeNet's global_cmvn); this one has {sorted(has) or 'neither'}")
    return stats


def _read_kaldi_matrix(path: str) -> dict:
    import kaldiio

    try:
        matrix = np.asarray(kaldiio.load_mat(path), dtype=np.float64)
    except Exception as error:  # kaldiio raises what its parsers meet: ValueError, KeyError, struct.error, ...
        raise ValueError(f"{path}: neither a CMVN JSON nor a Kaldi stats matrix ({type(error).__name__}: "
                         f"{error})") from None
    if matrix.ndim != 2 or matrix.shape[0] != 2 or matrix.shape[1] < 2:
        raise ValueError(f"{path}: a Kaldi matrix of shape {matrix.shape}, not CMVN stats (2 x (bins + 1))")
    return {"mean_stat": matrix[0, :-1].tolist(), "var_stat": matrix[1, :-1].tolist(), "frame_num": matrix[0, -1]}
