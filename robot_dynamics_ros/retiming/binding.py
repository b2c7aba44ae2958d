"""Where ``path_tolerance`` limits the speed: the corners of a retimed path where the curvature of the spline
(within path_tolerance of the request's polyline), not a joint's velocity limit, sets the speed, and the seconds
spent there.

At a waypoint where the polyline turns, the spline cuts the corner by at most ``path_tolerance``; the tighter
the tolerance, the sharper the bend and the larger |q''|. Along the path the joint acceleration is
q'_j sdd + q''_j sd² (:mod:`.constraints`); the bend (q'' without its part along q', which only changes the
speed) uses |q''_j| sd² of joint j's acceleration limit A_j and caps the path speed near sqrt(A_j / |q''_j|)
whatever the joint velocity limits allow. A gridpoint counts as curvature-bound when that term alone takes at
least :data:`CURVATURE_SHARE` of some joint's (scaled) acceleration limit — the speed there is within a factor
sqrt(1 / CURVATURE_SHARE) of the bend's own limit — while the speed is below the joint velocity limits. The
runs of such gridpoints nearest to one request waypoint form its corner (from the first to the last); its
seconds are the durations of the stages touching them. A larger path_tolerance lets the spline bend less
there (and merges more waypoints); the measured trade-off on a recorded path is in docs/retiming.md.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["CURVATURE_SHARE", "MAX_LISTED", "tolerance_bound"]

#: share of a joint's acceleration limit the bend term |q''_j| sd² must take for a gridpoint to count as
#: curvature-bound
CURVATURE_SHARE = 0.5
#: corners listed in the result (the longest; ``count``, ``waypoints`` and ``seconds`` cover all of them): a
#: recorded path may have hundreds
MAX_LISTED = 20


@njit(cache=True, nogil=True)
def _corner_runs(bound, curvature, s, knots):  # pragma: no cover - compiled
    """Per run of True in ``bound`` (N,): its first and last gridpoint, the knot nearest to its middle
    s (the first of equally near ones; knots (K,) increasing) and the largest curvature in it."""
    n_pt = bound.shape[0]
    count = 0
    for k in range(n_pt):
        if bound[k] and (k == 0 or not bound[k - 1]):
            count += 1
    first = np.empty(count, dtype=np.int64)
    last = np.empty(count, dtype=np.int64)
    nearest = np.empty(count, dtype=np.int64)
    peak = np.empty(count)
    r = -1
    for k in range(n_pt):
        if not bound[k]:
            continue
        if k == 0 or not bound[k - 1]:
            r += 1
            first[r] = k
            peak[r] = curvature[k]
        last[r] = k
        peak[r] = max(peak[r], curvature[k])
    for r in range(count):
        mid = 0.5 * (s[first[r]] + s[last[r]])
        # |knots - mid| falls up to mid and rises after it: its first smallest value is next to where mid
        # would be inserted, or equal to it further left
        j = min(np.searchsorted(knots, mid), knots.shape[0] - 1)
        if j > 0 and abs(knots[j - 1] - mid) <= abs(knots[j] - mid):
            j -= 1
        while j > 0 and abs(knots[j - 1] - mid) == abs(knots[j] - mid):
            j -= 1
        nearest[r] = j
    return first, last, nearest, peak


@njit(cache=True, nogil=True)
def _bend_bound(dq, ddq, x, vlim, alim):  # pragma: no cover - compiled
    """Per gridpoint k: whether the bend takes at least :data:`CURVATURE_SHARE` of some finite acceleration
    limit while x_k is below the velocity rows' bound (by 1e-3), and max_j |bend_kj| (1/rad); dq, ddq
    (N, n) q', q'' at the gridpoints, x (N,) sd², vlim, alim (n,) (inf: none)."""
    n_pt, n = dq.shape
    bound = np.zeros(n_pt, dtype=np.bool_)
    curvature = np.zeros(n_pt)
    for k in range(n_pt):
        xk = max(x[k], 0.0)
        norm2 = 0.0
        along = 0.0
        for j in range(n):
            norm2 += dq[k, j] * dq[k, j]
            along += ddq[k, j] * dq[k, j]
        # the bend: q'' without its part along q' (that part only changes the speed along the path)
        f = along / norm2 if norm2 > 0.0 else 0.0
        share = 0.0
        xvel = np.inf
        for j in range(n):
            bend = abs(ddq[k, j] - f * dq[k, j])
            curvature[k] = max(curvature[k], bend)
            if np.isfinite(alim[j]) and alim[j] > 0.0:
                share = max(share, bend * xk / alim[j])
            d2 = dq[k, j] * dq[k, j]
            if d2 > 0.0:
                xvel = min(xvel, vlim[j] * vlim[j] / d2)
        bound[k] = share >= CURVATURE_SHARE and xk < xvel * (1.0 - 1e-3)
    return bound, curvature


def tolerance_bound(segments, velocity_limit, acceleration_limit, kept_idx, path_tolerance: float) -> dict | None:
    """The corners where the tolerance-limited curvature sets the speed (module docstring).

    Args:
        segments: the :class:`~.output.Segment` s of a result (TOPP-RA timings; jerk-limited segments are skipped:
            their profile is not the curvature-limited one).
        velocity_limit, acceleration_limit: (n,) the applied (scaled) limits, rad/s and rad/s² (inf: none).
        kept_idx: (K,) index in the request of every kept waypoint (segments' ``first`` index into it).
        path_tolerance: rad / m, reported with the result.
    Returns:
        None when no joint has a finite acceleration limit (the bend then never limits the speed), else
        {"path_tolerance", "count" (corners), "waypoints" (request indices of all corners), "corners": the
        :data:`MAX_LISTED` longest in time order [{"waypoint", "t_start" s, "t_end" s, "seconds" s (in
        the runs between them), "curvature" (max |q''| across the path, 1/rad)}], "seconds": total over all corners}.
    """
    alim = np.asarray(acceleration_limit, dtype=float)
    vlim = np.asarray(velocity_limit, dtype=float)
    finite = np.isfinite(alim) & (alim > 0.0)
    if not finite.any():
        return None
    corners = []
    for seg in segments:
        if seg.jerk is not None:
            continue
        _, dq, ddq = seg.path.evaluate(seg.s)
        bound, curvature = _bend_bound(np.ascontiguousarray(dq), np.ascontiguousarray(ddq),
                                       np.ascontiguousarray(seg.x, dtype=float), vlim, alim)
        knots = seg.path.knots if seg.path.waypoint_knots is None else seg.path.waypoint_knots
        t = seg.t_grid + seg.t_offset
        first, last, nearest, peak = _corner_runs(bound, curvature, seg.s, np.ascontiguousarray(knots, dtype=float))
        lo, hi = np.maximum(first - 1, 0), np.minimum(last + 1, seg.s.shape[0] - 1)  # the stages touching a run
        waypoint = kept_idx[seg.first + nearest]
        for w, t_lo, t_hi, span, curv in zip(waypoint.tolist(), t[lo].tolist(), t[hi].tolist(),
                                             (t[hi] - t[lo]).tolist(), peak.tolist()):
            corner = {"waypoint": int(w), "t_start": t_lo, "t_end": t_hi, "seconds": span, "curvature": curv}
            prev = corners[-1] if corners and corners[-1]["segment"] == id(seg) else None
            if prev is not None and prev["waypoint"] == corner["waypoint"]:
                # the bend of one corner peaks at several knots: one corner, its runs' seconds added
                prev["seconds"] += corner["seconds"] - max(0.0, prev["t_end"] - corner["t_start"])
                prev["t_end"] = corner["t_end"]
                prev["curvature"] = max(prev["curvature"], corner["curvature"])
            else:
                corners.append({**corner, "segment": id(seg)})
    for c in corners:
        del c["segment"]
    longest = sorted(corners, key=lambda c: -c["seconds"])[:MAX_LISTED]
    return {"path_tolerance": float(path_tolerance), "count": len(corners),
            "waypoints": sorted({c["waypoint"] for c in corners}),
            "corners": sorted(longest, key=lambda c: c["t_start"]),
            "seconds": float(sum(c["seconds"] for c in corners))}
