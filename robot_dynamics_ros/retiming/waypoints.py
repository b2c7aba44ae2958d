"""The request's waypoints made ready for the spline (:mod:`robot_dynamics_ros.retiming.path`): waypoints within
a merge distance of the previous kept one dropped, the motion split where it turns back at a waypoint (the
chords before and after make an angle above 90°, so the trajectory stops at the turn instead of
overshooting it), and waypoints within a tolerance of the chord between their neighbours dropped.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["prepare_waypoints", "simplify_chords", "DUPLICATE_TOL", "MAX_CHORD_SPAN"]

#: consecutive waypoints closer than this (infinity norm, rad / m) are duplicates (the last waypoint is kept
#: unless it repeats the last kept one within this)
DUPLICATE_TOL = 1e-9


@njit(cache=True, nogil=True)
def _prepare(wp, tol, cos_threshold):  # pragma: no cover - compiled
    """keep (W,) bool, turn (W,) bool over the kept rows (reversals), number kept, kept path length, and
    offset (W,) over the kept chords: a bound on the distance of chord k (kept rows k, k+1) from the
    input polyline it replaces (0 where no row was dropped in between)."""
    w, n = wp.shape
    keep = np.empty(w, dtype=np.bool_)
    turn = np.zeros(w, dtype=np.bool_)
    offset = np.zeros(w)
    keep[0] = True
    last = 0  # index of the last kept row
    prev = -1  # index of the kept row before it
    kept = 1
    total = 0.0
    prev_step = 0.0
    for i in range(1, w):
        far = 0.0  # infinity-norm distance from the last kept row
        for j in range(n):
            far = max(far, abs(wp[i, j] - wp[last, j]))
        # the last row is kept unless it repeats the last kept one: the path ends where requested
        keep[i] = far > tol or (i == w - 1 and far > DUPLICATE_TOL)
        if not keep[i]:
            continue
        acc = 0.0
        for j in range(n):
            d = wp[i, j] - wp[last, j]
            acc += d * d
        step = np.sqrt(acc)
        if last != i - 1:
            # rows last+1 .. i-1 dropped. A chord point a + t (b - a) is within (1-t) |a - p_{i-1}| of the
            # input segment p_{i-1} -> b and within t |b - p_{last+1}| of the segment a -> p_{last+1}
            big_a = 0.0
            big_b = 0.0
            for j in range(n):
                big_a = max(big_a, abs(wp[last, j] - wp[i - 1, j]))
                big_b = max(big_b, abs(wp[i, j] - wp[last + 1, j]))
            offset[kept - 1] = big_a * big_b / (big_a + big_b) if big_a + big_b > 0.0 else 0.0
        if prev >= 0:
            dot = 0.0
            for j in range(n):
                dot += (wp[last, j] - wp[prev, j]) * (wp[i, j] - wp[last, j])
            if dot / (prev_step * step) < cos_threshold:
                turn[kept - 1] = True
        total += step
        prev_step = step
        prev = last
        last = i
        kept += 1
    return keep, turn, kept, total, offset


#: at most this many kept rows are replaced by one chord (bounds the simplification's cost per chord)
MAX_CHORD_SPAN = 256


@njit(cache=True, nogil=True)
def _segment_distance(wp, a, b, r):  # pragma: no cover - compiled
    """Euclidean distance of row r from the segment between rows a and b."""
    n = wp.shape[1]
    dd = 0.0
    dr = 0.0
    for j in range(n):
        d = wp[b, j] - wp[a, j]
        dd += d * d
        dr += (wp[r, j] - wp[a, j]) * d
    t = 0.0 if dd == 0.0 else min(max(dr / dd, 0.0), 1.0)
    acc = 0.0
    for j in range(n):
        e = wp[r, j] - wp[a, j] - t * (wp[b, j] - wp[a, j])
        acc += e * e
    return np.sqrt(acc)


@njit(cache=True, nogil=True)
def _simplify(wp, kidx, protect, offset, tol):  # pragma: no cover - compiled
    """Greedy chord simplification of the kept rows ``kidx`` (K,) of ``wp``: from each kept anchor, the
    chord goes to the farthest kept row (at most :data:`MAX_CHORD_SPAN` on, never past a ``protect``-ed one)
    such that every input row in between is within ``tol`` (Euclidean) of it. Returns keep (K,) and the
    new chords' offsets (K,) (index of the chord's first kept row): the largest such distance, or the
    merge's ``offset`` for a chord to the next kept row."""
    k_count = kidx.shape[0]
    keep = np.zeros(k_count, dtype=np.bool_)
    new_off = np.zeros(k_count)
    keep[0] = True
    anchor = 0
    while anchor < k_count - 1:
        best = anchor + 1
        best_off = offset[anchor]
        if not protect[best]:
            e = best + 1
            while e < k_count and e - anchor <= MAX_CHORD_SPAN:
                worst = 0.0
                for r in range(kidx[anchor] + 1, kidx[e]):
                    worst = max(worst, _segment_distance(wp, kidx[anchor], kidx[e], r))
                    if worst > tol:
                        break
                if worst > tol:
                    break
                best, best_off = e, worst
                if protect[e]:
                    break
                e += 1
        keep[best] = True
        new_off[anchor] = best_off
        anchor = best
    return keep, new_off


def prepare_waypoints(waypoints: np.ndarray, *, tol: float = DUPLICATE_TOL, cos_threshold: float = 0.0):
    """Merge waypoints close to their predecessor and find direction reversals, in one compiled pass.

    A row within ``tol`` (infinity norm) of the last kept row is dropped, except the last row (kept unless
    it is within :data:`DUPLICATE_TOL` of the last kept one), so the path still ends where requested.

    Args:
        waypoints: (W, n) joint positions (rad / m), finite.
        tol: merge distance (rad / m, infinity norm).
        cos_threshold: waypoint k (0 < k < W'-1) is a direction reversal when the kept chords before and
            after it make an angle whose cosine is below this (default 0: a turn of more than 90°); the path
            is split there and each segment retimed rest to rest, so the trajectory stops at the turn.
    Returns:
        (kept (W', n), kept_index (W',) rows of the input kept, segments [(first, last), ...] indices into
        kept, dropped (D,) indices of the dropped rows, length (joint-space chord sum of the kept path, rad),
        offset (W'-1,) per kept chord a bound (rad / m, infinity norm) on its distance from the part of the
        input polyline it replaces).
    """
    wp = np.ascontiguousarray(waypoints, dtype=float)
    if wp.shape[0] <= 1:
        return wp, np.arange(wp.shape[0]), [(0, 0)], np.zeros(0, dtype=np.int64), 0.0, np.zeros(0)
    keep, turn, count, total, offset = _prepare(wp, float(tol), float(cos_threshold))
    if count == wp.shape[0]:
        kept, idx, dropped = wp, np.arange(wp.shape[0]), np.zeros(0, dtype=np.int64)
    else:
        idx = np.flatnonzero(keep)
        dropped = np.flatnonzero(~keep)
        kept = wp[idx]
    turns = np.flatnonzero(turn[:count]).tolist()
    bounds = [0, *turns, count - 1]
    segments = [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)] if count > 1 else [(0, 0)]
    return kept, idx, segments, dropped, total, offset[:max(count - 1, 0)]


def simplify_chords(waypoints, kept_index, segments, offset, tol: float):
    """Drop kept waypoints that lie within ``tol`` (Euclidean, rad / m) of a chord between kept waypoints
    further apart (:func:`_simplify`); segment ends (the path's ends, reversals) stay.

    On a dense recorded path, jitter far below the path tolerance would otherwise become curvature of a
    spline through every sample, on which the acceleration limits bind (5 µrad of noise on a 5000-sample
    path made it 5× slower). A new chord's offset is the largest distance of an input row from it: the
    input polyline runs from the chord's start to its end inside that distance of it, so it crosses every
    hyperplane normal to the chord within that distance of the chord point there — every chord point is
    that close to the input polyline (a bound in the infinity norm too).

    Args:
        waypoints: (W, n) the input rows; kept_index, segments, offset: as :func:`prepare_waypoints` returns
            them; tol: rad / m.
    Returns:
        (kept (W'', n), kept_index (W''), segments, dropped (D,) rows of the input no longer kept by this
        step, length of the kept path, offset (W''-1,)).
    """
    wp = np.ascontiguousarray(waypoints, dtype=float)
    idx = np.asarray(kept_index, dtype=np.int64)
    count = idx.shape[0]
    none = np.zeros(0, dtype=np.int64)
    if count <= 2:
        return wp[idx], idx, segments, none, float(np.linalg.norm(np.diff(wp[idx], axis=0), axis=1).sum()), offset
    protect = np.zeros(count, dtype=np.bool_)
    protect[[b for seg in segments for b in seg]] = True
    keep, off = _simplify(wp, np.ascontiguousarray(idx), protect, np.append(offset, 0.0), float(tol))
    sel = np.flatnonzero(keep)
    remap = np.cumsum(keep) - 1
    segments = [(int(remap[a]), int(remap[b])) for a, b in segments]
    kept = wp[idx[sel]]
    total = float(np.linalg.norm(np.diff(kept, axis=0), axis=1).sum())
    return kept, idx[sel], segments, idx[~keep], total, off[sel[:-1]]
