"""The output of a retiming: the timed :class:`Segment` s, the trajectory sampled from them, the efforts at the
gridpoints from the torque coefficients already computed, and the peak fraction of every applied limit.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from robot_dynamics_ros.retiming.path import JointPath
from robot_dynamics_ros.retiming.request import RetimeResult
from robot_dynamics_ros.retiming.sampling import sample_joint_trajectory, sample_times

__all__ = ["Segment", "sample_segment", "sample_segments", "grid_efforts", "peak_fractions", "exceeded_limit"]


@dataclass
class Segment:
    """One segment of a retimed path (between direction reversals): its path, gridpoints s (N,), x = sd² (N,),
    u = sdd (N-1,), t_grid (N,) s, and where it starts in the request and in time."""

    path: JointPath
    s: np.ndarray
    x: np.ndarray
    u: np.ndarray
    t_grid: np.ndarray
    first: int  # index (into the kept waypoints) of the segment's first waypoint
    t_offset: float = 0.0
    #: bound on the distance (rad / m, infinity norm) of the segment's path from the request's polyline
    deviation: float = 0.0
    #: a, b, c (2N-1, n) at the collocation points (gridpoints: even rows), and (N,) where the gridpoint
    #: values are exact RNEA values (dynamics nodes), or None
    abc_grid: tuple | None = None
    exact: np.ndarray | None = None
    #: the jerk-limited timing (:class:`~robot_dynamics_ros.retiming.jerk.JerkSolution`) that replaces x, u, t_grid, or None
    jerk: object | None = None


@njit(cache=True, nogil=True)
def _peak_fractions(qd, qdd, tau, vlim, alim, tlim):  # pragma: no cover - compiled
    """max_k,j |value| / limit for (qd, qdd, tau); -1 where every limit is infinite. A zero limit (URDF
    ``velocity="0" effort="0"`` on a joint the path does not move, e.g. romeo's hands) counts 0 when the
    value stays 0, inf otherwise. NaN where a limited joint's value is NaN somewhere."""
    out = np.full(3, -1.0)
    n = qd.shape[1]
    for r in range(3):
        arr = qd if r == 0 else (qdd if r == 1 else tau)
        lim = vlim if r == 0 else (alim if r == 1 else tlim)
        nan = False
        for j in range(n):
            if lim[j] < np.inf:
                peak = 0.0
                for k in range(arr.shape[0]):
                    v = abs(arr[k, j])
                    if v > peak:
                        peak = v
                    elif v != v:
                        nan = True
                frac = peak / lim[j] if lim[j] > 0.0 else (np.inf if peak > 0.0 else 0.0)
                if frac > out[r]:
                    out[r] = frac
        if nan:
            out[r] = np.nan
    return out


@njit(cache=True, nogil=True)
def grid_efforts(a, b, c, u, x, exact):  # pragma: no cover - compiled
    """tau (N, n) = a sdd + b sd² + c at the gridpoints (eq. 1; sdd = u of the stage starting there, the last
    stage's at the end), from the coefficients at the collocation points (gridpoints: even rows); and
    whether every gridpoint is exact (a dynamics node)."""
    ng = x.shape[0]
    n = a.shape[1]
    tau = np.empty((ng, n))
    for i in range(ng):
        sdd = u[i] if i < ng - 1 else u[ng - 2]
        for j in range(n):
            tau[i, j] = a[2 * i, j] * sdd + b[2 * i, j] * x[i] + c[2 * i, j]
    every = True
    for i in range(ng):
        if not exact[i]:
            every = False
    return tau, every


def sample_segment(seg: Segment, times):
    """q, qd, qdd (K, n) of one segment at its local ``times`` (K,) s."""
    if seg.jerk is not None:
        return seg.jerk.sample(times)[4:7]
    return sample_joint_trajectory(seg.path, seg.s, seg.x, seg.u, seg.t_grid, times)


def sample_segments(segments, period):
    """(t, q, qd, qdd) of the whole trajectory: every ``period`` s, or at the gridpoints (period None or 0)."""
    total = segments[-1].t_offset + float(segments[-1].t_grid[-1])
    if len(segments) == 1:  # the common case, without selections and concatenations
        seg = segments[0]
        times = sample_times(total, period, np.array([0.0, total])) if period else seg.t_grid
        return (times, *sample_segment(seg, times))
    ts, qs, qds, qdds = [], [], [], []
    if period:
        times = sample_times(total, period, np.array([0.0, total]))
    for k, seg in enumerate(segments):
        t_end = seg.t_offset + float(seg.t_grid[-1])
        if period:
            last = k == len(segments) - 1
            sel = (times >= seg.t_offset) & ((times <= t_end) if last else (times < t_end))
            tl = times[sel]
            if tl.size == 0:
                continue
            # the trajectory's end is the segment's last gridpoint exactly (t_offset + t_grid[-1] - t_offset
            # can round one step short of it, and the sample would miss the end point: a velocity of 1e-15)
            local = np.where(tl >= t_end, float(seg.t_grid[-1]), tl - seg.t_offset)
        else:
            local = seg.t_grid if k == len(segments) - 1 else seg.t_grid[:-1]
            tl = local + seg.t_offset
        q, qd, qdd = sample_segment(seg, local)
        ts.append(tl)
        qs.append(q)
        qds.append(qd)
        qdds.append(qdd)
    return np.concatenate(ts), np.concatenate(qs), np.concatenate(qds), np.concatenate(qdds)


def peak_fractions(res: RetimeResult, limits, jerk_limit=None) -> dict:
    """{"velocity", "acceleration", "effort", "jerk"} -> max over the output samples and joints of
    |value| / applied limit; None where no joint has a finite limit (jerk: also where no segment is
    jerk-limited). ``limits``: the applied (velocity, acceleration, torque) limits (n,) each; ``jerk_limit``: (n,)
    rad/s³, or None."""
    vlim, alim, tlim = limits
    if res.qd.shape[0] == 0:
        return {"velocity": None, "acceleration": None, "effort": None, "jerk": None}
    peaks = _peak_fractions(res.qd, res.qdd, res.tau, vlim, alim, tlim)
    # max over samples of |value| / limit; None where no joint has a finite limit
    out = {key: (None if peaks[k] < 0.0 else float(peaks[k]))  # (NaN stays NaN)
           for k, key in enumerate(("velocity", "acceleration", "effort"))}
    peak = jerk_peak(res, jerk_limit)
    out["jerk"] = None if peak is None else peak[0]
    return out


def jerk_peak(res: RetimeResult, jerk_limit) -> tuple[float, int, float] | None:
    """(largest |jerk| / limit over the output samples and joints, its joint index, its time s) of the
    jerk-limited segments (their jerk at the output sample times inside them), or None where no joint has a
    finite ``jerk_limit`` (n,) rad/s³ or no segment is jerk-limited."""
    limited = np.isfinite(jerk_limit) if jerk_limit is not None else np.zeros(0, dtype=bool)
    if not limited.any() or not any(seg.jerk is not None for seg in res.segments):
        return None
    best = (0.0, int(np.flatnonzero(limited)[0]), 0.0)
    for seg in res.segments:
        if seg.jerk is None:
            continue
        sel = np.flatnonzero((res.t >= seg.t_offset) & (res.t <= seg.t_offset + seg.jerk.duration))
        if sel.size:
            frac = np.where(limited, np.abs(seg.jerk.sample(res.t[sel] - seg.t_offset)[7]) / jerk_limit, 0.0)
            k, j = np.unravel_index(int(np.argmax(frac)), frac.shape)
            if frac[k, j] > best[0]:
                best = (float(frac[k, j]), int(j), float(res.t[sel[k]]))
    return best


def exceeded_limit(res: RetimeResult, limits, tolerance: float, jerk_limit=None):
    """The first limit the result's own samples exceed by more than ``tolerance`` (relative), as
    (kind "velocity" / "acceleration" / "effort" / "jerk", joint index (-1 for jerk without ``jerk_limit``),
    fraction of the limit, time of the sample s (nan for jerk without ``jerk_limit``)), or None. ``limits`` as
    in :func:`peak_fractions`; the jerk is judged from ``res.peak_fraction["jerk"]`` and, past the tolerance,
    located with ``jerk_limit`` (:func:`jerk_peak`); with ``res.peak_fraction`` set (:func:`peak_fractions` of
    the same limits) a result within them is passed without another look at its samples."""
    jerk = res.peak_fraction.get("jerk") if res.peak_fraction else None
    if res.peak_fraction and all(res.peak_fraction[k] is None or res.peak_fraction[k] <= 1.0 + tolerance
                                 for k in ("velocity", "acceleration", "effort")):
        return None if jerk is None or jerk <= 1.0 + tolerance else _jerk_excess(res, jerk, jerk_limit)
    for kind, values, lim in (("velocity", res.qd, limits[0]), ("acceleration", res.qdd, limits[1]),
                              ("effort", res.tau, limits[2])):
        lim = np.asarray(lim, dtype=float)
        if values.shape[0] == 0 or not np.isfinite(lim).any():
            continue
        mag = np.abs(values)
        with np.errstate(divide="ignore", invalid="ignore"):
            # (a zero limit, e.g. romeo's hands: 0 while the value stays 0, as in peak_fractions)
            frac = np.where(np.isfinite(lim), np.where(mag == 0.0, 0.0, mag / lim), 0.0)
        k, j = np.unravel_index(int(np.argmax(frac)), frac.shape)
        if not frac[k, j] <= 1.0 + tolerance:  # (NaN counts as exceeded)
            return kind, int(j), float(frac[k, j]), float(res.t[k])
    if jerk is not None and not jerk <= 1.0 + tolerance:
        return _jerk_excess(res, jerk, jerk_limit)
    return None


def _jerk_excess(res: RetimeResult, jerk: float, jerk_limit):
    """:func:`exceeded_limit`'s answer for a jerk fraction past the tolerance: its joint and time where
    ``jerk_limit`` locates it."""
    peak = jerk_peak(res, jerk_limit)
    return ("jerk", -1, float(jerk), float("nan")) if peak is None else ("jerk", peak[1], float(jerk), peak[2])
