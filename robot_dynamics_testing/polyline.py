"""Exact infinity-norm distance of joint-space points from a polyline (the independent check of
``max_path_deviation``, used by the path tests and ``benchmarks/bench_corners.py``)."""
from __future__ import annotations

import numpy as np

__all__ = ["polyline_distance"]


def polyline_distance(q, wp) -> np.ndarray:
    """Infinity-norm distance of each row of q (M, n) from the polyline through wp (W, n), exactly: for one
    segment a + t (b - a), max_j |q_j - a_j - t d_j| is convex and piecewise linear in t, so its minimum on
    [0, 1] is at t = 0, 1 or where two of the lines ±(q_j - a_j - t d_j) cross; all candidates tried.
    Returns (M,) distances (rad / m)."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    wp = np.asarray(wp, dtype=float)
    best = np.full(q.shape[0], np.inf)
    n = q.shape[1]
    for a, b in zip(wp[:-1], wp[1:]):
        d = b - a
        r = q - a  # (M, n)
        # crossings of r_j - t d_j = ±(r_k - t d_k): t = (r_j ∓ r_k) / (d_j ∓ d_k)
        cands = [np.zeros(q.shape[0]), np.ones(q.shape[0])]
        with np.errstate(divide="ignore", invalid="ignore"):
            for j in range(n):
                for k in range(n):
                    for sign in (1.0, -1.0):
                        if j == k and sign == 1.0:
                            continue
                        tt = (r[:, j] - sign * r[:, k]) / (d[j] - sign * d[k])
                        cands.append(np.where(np.isfinite(tt), np.clip(tt, 0.0, 1.0), 0.0))
        for tt in cands:
            best = np.minimum(best, np.abs(r - tt[:, None] * d).max(axis=1))
    return best


def max_polyline_distance(q, wp) -> float:
    """max over the rows of q (M, n) of :func:`polyline_distance` from the polyline wp (W, n), exactly but
    only where needed: the distance at the Euclidean projection onto each segment bounds a row's distance
    from above, and rows whose bound is below the exact maximum found so far cannot raise it."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    wp = np.asarray(wp, dtype=float)
    upper = np.full(q.shape[0], np.inf)
    for a, b in zip(wp[:-1], wp[1:]):
        d = b - a
        t = np.clip((q - a) @ d / (d @ d), 0.0, 1.0)
        upper = np.minimum(upper, np.abs(q - a - t[:, None] * d).max(axis=1))
    order = np.argsort(-upper)
    found = 0.0
    start = 0
    while start < order.shape[0] and upper[order[start]] > found:
        stop = min(order.shape[0], 2 * start + 64)
        found = max(found, float(polyline_distance(q[order[start:stop]], wp).max()))
        start = stop
    return found
