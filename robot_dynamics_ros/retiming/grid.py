"""The gridpoints of a path and the path at them: every knot a gridpoint, stages no longer than the path's
turn allows (:data:`~robot_dynamics_ros.retiming.path.TURN_PER_STAGE`), and q, q', q'' at the gridpoints and
stage midpoints (the collocation points of the TOPP-RA rows), with the first point outside the position limits.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from robot_dynamics_ros.retiming.path import JointPath, spline_eval

__all__ = ["gridpoints_for", "collocation", "KEEP_SHARE"]

#: with turn-limited stages, no knot interval gets fewer than this fraction of its length's share of the
#: requested gridpoints (stages taken back for the turn minima come from the others). A full share: with
#: half, the chords between cut corners kept 2-3 stages each and the default grid's duration was 0.7 %
#: above the 10 000-gridpoint one (docs/retiming.md, "Path")
KEEP_SHARE = 1.0


@njit(cache=True, nogil=True)
def _min_stages(knots, coeffs, turn):  # pragma: no cover - compiled
    """(K-1,) stages each knot interval needs so that no stage turns by more than ``turn``: the tangent
    q' of a stage of length Δ changes by at most Δ max|q''| (q'' is linear in an interval: its largest
    magnitude is at an end)."""
    nint = knots.shape[0] - 1
    out = np.ones(nint, dtype=np.int64)
    if not turn > 0.0:
        return out
    for k in range(nint):
        h = knots[k + 1] - knots[k]
        peak = 0.0
        for j in range(coeffs.shape[2]):
            a = abs(2.0 * coeffs[1, k, j])
            b = abs(6.0 * coeffs[0, k, j] * h + 2.0 * coeffs[1, k, j])
            peak = max(peak, max(a, b))
        out[k] = max(1, int(np.ceil(h * peak / turn)))
    return out


@njit(cache=True, nogil=True)
def _gridpoints(knots, count, min_per, keep):  # pragma: no cover - compiled
    n_int = knots.shape[0] - 1
    stages = max(count - 1, n_int)
    total = knots[n_int] - knots[0]
    per = np.empty(n_int, dtype=np.int64)
    frac = np.empty(n_int)
    used = 0
    for k in range(n_int):
        share = (knots[k + 1] - knots[k]) * (stages / total)
        f = np.floor(share)
        per[k] = max(int(f), min_per[k])
        frac[k] = share - f if per[k] == int(f) else 0.0
        used += per[k]
    short = stages - used
    if short > 0:  # largest remainders first
        order = np.argsort(-frac)
        for k in range(short):
            per[order[k % n_int]] += 1
    while short < 0:  # too many from the minima: take from the intervals with most stages per length,
        # never below ``keep`` × their share of the request: a long, nearly straight interval between
        # sharp turns keeps the stages its speed ramps need (one stage there is one constant sdd over it)
        best = -1
        ratio = -1.0
        for k in range(n_int):
            length = knots[k + 1] - knots[k]
            if per[k] > max(min_per[k], int(keep * length * (stages / total))):
                r = per[k] / length
                if r > ratio:
                    ratio = r
                    best = k
        if best < 0:  # every interval at its floor: more stages than requested
            break
        per[best] -= 1
        short += 1
    n_grid = 1
    for k in range(n_int):
        n_grid += per[k]
    s = np.empty(n_grid)
    knot_index = np.empty(n_int + 1, dtype=np.int64)
    g = 0
    for k in range(n_int):
        knot_index[k] = g
        length = knots[k + 1] - knots[k]
        for j in range(per[k]):
            s[g] = knots[k] + length * (j / per[k])
            g += 1
    s[g] = knots[n_int]
    knot_index[n_int] = g
    return s, knot_index


def gridpoints_for(knots: np.ndarray, count: int, return_knot_index: bool = False):
    """Near-uniform gridpoints (≥ ``count`` of them) in [0, length] that contain every knot.

    Each knot interval gets a number of stages proportional to its length (at least one; largest
    remainders round up), uniformly spaced, so no stage straddles a knot: within a stage q(s) is a single
    cubic, which is what makes the curvature bounds of :mod:`.topp_ra` accurate. With fewer requested
    gridpoints than knots the knots themselves are the gridpoints.

    Returns:
        s (N,) gridpoints; with ``return_knot_index`` also (K,) the index in s of every knot.
    """
    knots = np.ascontiguousarray(knots, dtype=float)
    s, knot_index = _gridpoints(knots, int(count), np.ones(knots.shape[0] - 1, dtype=np.int64), 0.0)
    return (s, knot_index) if return_knot_index else s


@njit(cache=True, nogil=True)
def _collocation(knots, coeffs, count, lower, upper, turn):  # pragma: no cover - compiled
    """Gridpoints, collocation points and the spline at them in one pass (see :func:`collocation`)."""
    s, knot_index = _gridpoints(knots, count, _min_stages(knots, coeffs, turn), KEEP_SHARE)
    n_grid = s.shape[0]
    n = coeffs.shape[2]
    s_eval = np.empty(2 * n_grid - 1)
    for i in range(n_grid - 1):
        s_eval[2 * i] = s[i]
        s_eval[2 * i + 1] = 0.5 * (s[i] + s[i + 1])
    s_eval[2 * n_grid - 2] = s[n_grid - 1]
    p = s_eval.shape[0]
    q = np.empty((p, n))
    dq = np.empty((p, n))
    ddq = np.empty((p, n))
    spline_eval(knots, coeffs, s_eval, q, dq, ddq)
    bad = -1
    for k in range(p):
        for j in range(n):
            if not (lower[j] <= q[k, j] <= upper[j]):
                bad = k * n + j
                break
        if bad >= 0:
            break
    return s, knot_index, s_eval, q, dq, ddq, bad


def collocation(path: JointPath, count: int, lower: np.ndarray, upper: np.ndarray,
                turn: float = 0.0):
    """Gridpoints of :func:`gridpoints_for` and the spline on the collocation grid, in one compiled call.

    Args:
        path: the :class:`JointPath`; count: requested number of gridpoints;
        turn: if > 0, enough stages in every knot interval that none turns the tangent by more than this
            (rad, infinity norm of the change of q'; see :data:`TURN_PER_STAGE`), beyond ``count`` if need be;
        lower, upper: (n,) position bounds (rad / m) checked at every collocation point.
    Returns:
        s (N,), knot_index (K,), s_eval (2N-1,) (gridpoints at even, stage midpoints at odd indices),
        q, q', q'' (2N-1, n) there, and (point, joint) of the first value outside [lower, upper] or None.
    """
    s, ki, s_eval, q, dq, ddq, bad = _collocation(path.knots, path.coefficients, int(count),
                                                  np.ascontiguousarray(lower, dtype=float),
                                                  np.ascontiguousarray(upper, dtype=float), float(turn))
    where = None if bad < 0 else divmod(int(bad), path.n)
    return s, ki, s_eval, q, dq, ddq, where
