"""Exact infinity-norm distance of sampled paths from a polyline: the independent check of the retimer's
``max_path_deviation`` (the path must stay within ``path_tolerance`` of the planner's straight segments)."""
from __future__ import annotations

import numpy as np


def segment_distance_inf(q: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Infinity-norm distance of each row of ``q`` (M, n) from the segment ``a`` → ``b`` (n,), exactly.

    On the segment a + t d (d = b - a, t in [0, 1]), f(t) = max_j |r_j - t d_j| (r = q - a) is convex and
    piecewise linear, so its minimum is at t = 0, t = 1 or where two of the lines ±(r_j - t d_j) cross:
    t = (r_j ∓ r_k) / (d_j ∓ d_k). Every candidate is evaluated; shape (M,)."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    r = q - np.asarray(a, dtype=float)
    n = q.shape[1]
    j, k = np.triu_indices(n, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        cands = np.concatenate([
            np.zeros((q.shape[0], 1)), np.ones((q.shape[0], 1)),
            (r[:, j] - r[:, k]) / (d[j] - d[k]),          # r_j - t d_j = r_k - t d_k
            (r[:, j] + r[:, k]) / (d[j] + d[k]),          # r_j - t d_j = -(r_k - t d_k)
            r / d,                                        # r_j - t d_j = 0 (a line crossing its mirror)
        ], axis=1)
    cands = np.where(np.isfinite(cands), np.clip(cands, 0.0, 1.0), 0.0)      # (M, C)
    values = np.abs(r[:, None, :] - cands[:, :, None] * d[None, None, :]).max(axis=2)
    return values.min(axis=1)


def polyline_distance_inf(q: np.ndarray, waypoints: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """Infinity-norm distance of each row of ``q`` (M, n) from the polyline through ``waypoints`` (W, n):
    the smallest :func:`segment_distance_inf` over its segments; shape (M,). Rows are processed in chunks of
    ``chunk`` to bound memory (M × candidates × n floats per segment)."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    wp = np.atleast_2d(np.asarray(waypoints, dtype=float))
    out = np.full(q.shape[0], np.inf)
    for lo in range(0, q.shape[0], chunk):
        rows = q[lo:lo + chunk]
        for a, b in zip(wp[:-1], wp[1:]):
            out[lo:lo + chunk] = np.minimum(out[lo:lo + chunk], segment_distance_inf(rows, a, b))
    return out
