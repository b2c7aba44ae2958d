"""Geometric joint-space path q(s): a C² cubic spline through waypoints, with derivatives q'(s), q''(s).

The path parameter ``s`` is the cumulative chord length of the waypoints (Euclidean norm of the joint-space
differences, in rad for revolute joints), so ``|q'(s)| ≈ 1`` and the TOPP-RA variables ``sd`` (≈ joint-space
speed, rad/s) and ``sdd`` are well scaled for every path.

The spline is the classic cubic interpolating spline (de Boor, *A Practical Guide to Splines*, 2001, ch. IV;
the same system scipy's ``CubicSpline`` solves): slopes ``m_k = q'(s_k)`` from a tridiagonal system with
"not-a-knot" end conditions (third derivative continuous at the second and second-to-last knot) or a
prescribed end tangent (used when the request has a non-zero start / end velocity). It is solved here by a
small compiled kernel instead of ``scipy.interpolate.CubicSpline`` only because the latter costs ~0.2 ms of
Python overhead per call, a fifth of the retiming budget; ``test/test_path.py`` checks both agree to 1e-12.

Waypoints within a merge distance of the previous kept one are dropped and a motion that turns back at a
waypoint (the chords before and after it make an angle above 90°) is split there, both by
:func:`prepare_waypoints`, so the retimed trajectory stops at the turn instead of overshooting it.
:meth:`JointPath.within_tolerance` adds knots on the chords until the spline stays within a tolerance of
the straight segments between the waypoints.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

#: consecutive waypoints closer than this (infinity norm, rad / m) are duplicates (the last waypoint is kept
#: unless it repeats the last kept one within this)
DUPLICATE_TOL = 1e-9
#: largest change of the path tangent q' (infinity norm) over one stage: the stage-interior bound of the
#: velocity and torque rows is exact only up to a residual that grows with the square of this turn
TURN_PER_STAGE = 0.02


@njit(cache=True, nogil=True)
def _thomas(lower, diag, upper, rhs):  # pragma: no cover - compiled
    """Solve a tridiagonal system in place (no pivoting; the callers' systems are diagonally dominant)."""
    k = diag.shape[0]
    n = rhs.shape[1]
    for i in range(1, k):
        w = lower[i] / diag[i - 1]
        diag[i] -= w * upper[i - 1]
        for j in range(n):  # explicit loops: no temporary array per row
            rhs[i, j] -= w * rhs[i - 1, j]
    for j in range(n):
        rhs[k - 1, j] /= diag[k - 1]
    for i in range(k - 2, -1, -1):
        for j in range(n):
            rhs[i, j] = (rhs[i, j] - upper[i] * rhs[i + 1, j]) / diag[i]
    return rhs


@njit(cache=True, nogil=True)
def _spline_coefficients(x, y, start_slope, has_start, end_slope, has_end):  # pragma: no cover
    """Coefficients c (4, K-1, n) of the C² cubic spline through (x_k, y_k), PPoly layout (c[0] t³ ...).

    End conditions: prescribed slope where ``has_start`` / ``has_end`` else not-a-knot (K ≥ 4), a parabola
    for K = 3 without slopes, a straight line for K = 2 without slopes (natural end opposite a slope).
    """
    k = x.shape[0]
    n = y.shape[1]
    h = x[1:] - x[:-1]
    delta = np.empty((k - 1, n))
    for i in range(k - 1):
        for j in range(n):
            delta[i, j] = (y[i + 1, j] - y[i, j]) / h[i]
    m = np.empty((k, n))
    if k == 2:
        if has_start and has_end:
            m[0, :] = start_slope
            m[1, :] = end_slope
        elif has_start:  # natural end: 2 m1 + m0 = 3 delta
            m[0, :] = start_slope
            m[1, :] = 0.5 * (3.0 * delta[0, :] - start_slope)
        elif has_end:
            m[1, :] = end_slope
            m[0, :] = 0.5 * (3.0 * delta[0, :] - end_slope)
        else:
            m[0, :] = delta[0, :]
            m[1, :] = delta[0, :]
    elif k == 3 and not has_start and not has_end:
        # the parabola through the three points
        h0, h1 = h[0], h[1]
        cc = (delta[1, :] - delta[0, :]) / (h0 + h1)  # second divided difference
        m[0, :] = delta[0, :] - cc * h0
        m[1, :] = delta[0, :] + cc * h0
        m[2, :] = delta[1, :] + cc * h1
    else:
        lower = np.zeros(k)
        diag = np.ones(k)
        upper = np.zeros(k)
        rhs = np.zeros((k, n))
        for i in range(1, k - 1):
            lower[i] = h[i]
            diag[i] = 2.0 * (h[i - 1] + h[i])
            upper[i] = h[i - 1]
            for j in range(n):
                rhs[i, j] = 3.0 * (h[i] * delta[i - 1, j] + h[i - 1] * delta[i, j])
        # start condition
        if has_start:
            diag[0] = 1.0
            upper[0] = 0.0
            rhs[0, :] = start_slope
            nak_start = False
        else:
            # not-a-knot row 0: h1 m0 + (h0+h1) m1 = r0; eliminated into row 1 (keeps dominance)
            h0, h1 = h[0], h[1]
            r0 = ((h0 + 2.0 * (h0 + h1)) * h1 * delta[0, :] + h0 * h0 * delta[1, :]) / (h0 + h1)
            # row 1: h1 m0 + 2(h0+h1) m1 + h0 m2 = r1  ->  (h0+h1) m1 + h0 m2 = r1 - r0
            lower[1] = 0.0
            diag[1] = h0 + h1
            rhs[1, :] = rhs[1, :] - r0
            diag[0] = 1.0
            upper[0] = 0.0
            rhs[0, :] = 0.0  # placeholder, m0 recovered after the solve
            nak_start = True
        if has_end:
            diag[k - 1] = 1.0
            lower[k - 1] = 0.0
            rhs[k - 1, :] = end_slope
            nak_end = False
        else:
            ha, hb = h[k - 3], h[k - 2]
            # not-a-knot last row: (ha+hb) m_{k-2} + ha m_{k-1} = re
            re = (hb * hb * delta[k - 3, :] + (2.0 * (ha + hb) + hb) * ha * delta[k - 2, :]) / (ha + hb)
            # row k-2: hb m_{k-3} + 2(ha+hb) m_{k-2} + ha m_{k-1} = r  ->  hb m_{k-3} + (ha+hb) m_{k-2} = r - re
            upper[k - 2] = 0.0
            diag[k - 2] = ha + hb  # (k == 3 with not-a-knot at both ends is the parabola branch)
            rhs[k - 2, :] = rhs[k - 2, :] - re
            diag[k - 1] = 1.0
            lower[k - 1] = 0.0
            rhs[k - 1, :] = 0.0
            nak_end = True
        m = _thomas(lower, diag, upper, rhs)
        if nak_start:
            h0, h1 = h[0], h[1]
            r0 = ((h0 + 2.0 * (h0 + h1)) * h1 * delta[0, :] + h0 * h0 * delta[1, :]) / (h0 + h1)
            m[0, :] = (r0 - (h0 + h1) * m[1, :]) / h1
        if nak_end:
            ha, hb = h[k - 3], h[k - 2]
            re = (hb * hb * delta[k - 3, :] + (2.0 * (ha + hb) + hb) * ha * delta[k - 2, :]) / (ha + hb)
            m[k - 1, :] = (re - (ha + hb) * m[k - 2, :]) / ha
    c = np.empty((4, k - 1, n))
    for i in range(k - 1):
        for j in range(n):
            c[0, i, j] = (m[i, j] + m[i + 1, j] - 2.0 * delta[i, j]) / (h[i] * h[i])
            c[1, i, j] = (3.0 * delta[i, j] - 2.0 * m[i, j] - m[i + 1, j]) / h[i]
            c[2, i, j] = m[i, j]
            c[3, i, j] = y[i, j]
    return c


@njit(cache=True, nogil=True)
def _spline_eval(x, c, s, q, dq, ddq):  # pragma: no cover - compiled
    """q(s), q'(s), q''(s) of a PPoly cubic (breakpoints x (K,), coefficients c (4, K-1, n)) at s (N,)."""
    nint = x.shape[0] - 1
    n = c.shape[2]
    j = 0
    for p in range(s.shape[0]):
        sp = s[p]
        # s is usually sorted: walk forward, fall back to bisection otherwise
        if sp < x[j] or (j < nint - 1 and sp >= x[j + 1]):
            lo, hi = 0, nint - 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if x[mid] <= sp:
                    lo = mid
                else:
                    hi = mid - 1
            j = lo
        t = sp - x[j]
        for d in range(n):
            c0, c1, c2, c3 = c[0, j, d], c[1, j, d], c[2, j, d], c[3, j, d]
            q[p, d] = ((c0 * t + c1) * t + c2) * t + c3
            dq[p, d] = (3.0 * c0 * t + 2.0 * c1) * t + c2
            ddq[p, d] = 6.0 * c0 * t + 2.0 * c1


@njit(cache=True, nogil=True)
def _chord_knots(wp):  # pragma: no cover - compiled
    """knots (K,) = cumulative chord length of the waypoints (K, n), and the shortest chord."""
    k, n = wp.shape
    knots = np.empty(k)
    knots[0] = 0.0
    shortest = np.inf
    for i in range(1, k):
        acc = 0.0
        for j in range(n):
            d = wp[i, j] - wp[i - 1, j]
            acc += d * d
        step = np.sqrt(acc)
        shortest = min(shortest, step)
        knots[i] = knots[i - 1] + step
    return knots, shortest


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


def _unit(v, n):
    """(unit vector (n,), True) for a non-zero v, (zeros, False) for None or zero."""
    if v is None:
        return np.zeros(n), False
    v = np.asarray(v, dtype=float)
    nv = np.linalg.norm(v)
    if nv == 0.0:
        return np.zeros(n), False
    return v / nv, True


@dataclass
class JointPath:
    """C² cubic spline q(s) through waypoints, s = cumulative chord length.

    Attributes:
        knots: (K,) s at the knots (the waypoints, and points added on their chords by
            :meth:`within_tolerance`), knots[0] = 0, knots[-1] = length (rad, joint-space norm).
        coefficients: (4, K-1, n) piecewise-polynomial coefficients (scipy PPoly layout, highest power first).
        length: total path length s_end.
        n: number of joints.
    """

    knots: np.ndarray
    coefficients: np.ndarray
    #: (W,) s at the request's waypoints when knots were added between them (see
    #: :meth:`within_tolerance`), else None (every knot is a waypoint)
    waypoint_knots: np.ndarray | None = None

    @classmethod
    def from_waypoints(cls, waypoints, *, start_tangent=None, end_tangent=None) -> "JointPath":
        """Build the spline through distinct waypoints.

        Args:
            waypoints: (K, n), K ≥ 2, no consecutive duplicates (see :func:`prepare_waypoints`).
            start_tangent, end_tangent: optional (n,) prescribed q'(0) / q'(length); scaled to unit norm
                (s is a chord length). None → not-a-knot end condition.
        Raises:
            ValueError: fewer than 2 waypoints, or a zero-length chord.
        """
        wp = np.ascontiguousarray(waypoints, dtype=float)
        if wp.ndim != 2 or wp.shape[0] < 2:
            raise ValueError(f"waypoints: need at least 2 distinct waypoints, got shape {wp.shape}")
        knots, shortest = _chord_knots(wp)
        if not shortest > 0.0:
            raise ValueError("waypoints: consecutive duplicates must be removed first")
        n = wp.shape[1]
        ss, hs = _unit(start_tangent, n)
        es, he = _unit(end_tangent, n)
        return cls(knots, _spline_coefficients(knots, wp, ss, hs, es, he))

    @classmethod
    def within_tolerance(cls, waypoints, chord_offset, tol, lower, upper, *, start_tangent=None,
                         end_tangent=None, max_knots: int = 1_000_000, max_rounds: int = 60):
        """The C² cubic spline through the waypoints and through points added on their chords, within
        ``tol`` of the polyline and inside [lower, upper] everywhere.

        The spline through the waypoints alone can swing far from the straight segments between them
        (the segments a planner checked); every knot interval where it does, by the exact bound of
        :func:`_interval_bounds`, or where it leaves the position box, gets the midpoint of its chord as
        a new knot, until no interval does. The interpolation error near a corner scales with the local
        knot spacing, so each round roughly halves it where needed (≈ 10 rounds from 1 rad chords to
        1 mrad); the bound is checked, not assumed: status 2 if it is not met after ``max_rounds``.

        Args:
            waypoints: (K, n) distinct consecutive waypoints (rad / m).
            chord_offset: (K-1,) distance bound (infinity norm) of each chord from the request's polyline
                (non-zero where waypoints were merged, see :func:`prepare_waypoints`).
            tol: path tolerance (rad / m, infinity norm); lower, upper: (n,) position bounds.
            start_tangent, end_tangent: as in :meth:`from_waypoints`.
        Returns:
            (path, deviation (K'-1,) per knot interval the bound on its distance from the polyline,
            status: 0 within tolerance, 1 more than ``max_knots`` knots needed, 2 not within ``max_rounds``
            halvings, bad (K'-1,) joint leaving [lower, upper] per interval or -1).
        """
        wp = np.ascontiguousarray(waypoints, dtype=float)
        knots, shortest = _chord_knots(wp)
        if wp.shape[0] < 2 or not shortest > 0.0:
            raise ValueError("waypoints: need at least 2 distinct consecutive waypoints")
        n = wp.shape[1]
        ss, hs = _unit(start_tangent, n)
        es, he = _unit(end_tangent, n)
        wp_knots = knots
        _, knots, _, c, dev, bad, status = _refine(
            wp, knots, np.ascontiguousarray(chord_offset, dtype=float), float(tol),
            np.ascontiguousarray(lower, dtype=float), np.ascontiguousarray(upper, dtype=float),
            ss, hs, es, he, int(max_knots), int(max_rounds))
        return cls(knots, c, waypoint_knots=wp_knots), dev, int(status), bad

    def split_for_turn(self, turn: float = TURN_PER_STAGE, max_depth: int = 3) -> "JointPath":
        """The same path (identical polynomials) with knot intervals halved where the curvature varies
        strongly inside them (:func:`_split_for_turn`), so turn-limited stages can be graded; keeps
        ``waypoint_knots``."""
        kn, cf = _split_for_turn(self.knots, self.coefficients, float(turn), int(max_depth))
        return JointPath(kn, cf, waypoint_knots=self.knots if self.waypoint_knots is None else self.waypoint_knots)

    @property
    def length(self) -> float:
        return float(self.knots[-1])

    @property
    def n(self) -> int:
        return int(self.coefficients.shape[2])

    def evaluate(self, s) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q(s), q'(s), q''(s), each (N, n), at path parameters s (N,) (values outside [0, length] extrapolate)."""
        s = np.ascontiguousarray(np.atleast_1d(s), dtype=float)
        q = np.empty((s.shape[0], self.n))
        dq = np.empty_like(q)
        ddq = np.empty_like(q)
        _spline_eval(self.knots, self.coefficients, s, q, dq, ddq)
        return q, dq, ddq

    def __call__(self, s) -> np.ndarray:
        """q(s), (N, n)."""
        return self.evaluate(s)[0]


@njit(cache=True, nogil=True)
def _critical_points(c0, c1, c2, h, out):  # pragma: no cover - compiled
    """Roots of 3 c0 t² + 2 c1 t + c2 (the extrema of c0 t³ + c1 t² + c2 t) inside (0, h), into out;
    returns how many (0-2)."""
    a = 3.0 * c0
    b = 2.0 * c1
    k = 0
    if a == 0.0:
        if b != 0.0:
            t = -c2 / b
            if 0.0 < t < h:
                out[k] = t
                k += 1
        return k
    disc = b * b - 4.0 * a * c2
    if disc < 0.0:
        return 0
    sq = np.sqrt(disc)
    qq = -0.5 * (b + sq) if b >= 0.0 else -0.5 * (b - sq)  # no cancellation (Numerical Recipes 5.6)
    for t in (qq / a, (c2 / qq) if qq != 0.0 else -1.0):
        if 0.0 < t < h:
            out[k] = t
            k += 1
    return k


@njit(cache=True, nogil=True)
def _interval_bounds(knots, c, offset, lo, hi, dev, bad):  # pragma: no cover - compiled
    """Per knot interval i: dev[i] = offset[i] + max over joints and t of |q(t) - chord(t)| (the spline
    minus the straight line between its values at the two knots: a cubic vanishing at both ends, so its
    extremes are at the roots of a quadratic), and bad[i] = a joint whose q leaves [lo, hi] inside the
    interval, or -1. Returns max(dev)."""
    nint = knots.shape[0] - 1
    n = c.shape[2]
    roots = np.empty(2)
    worst = 0.0
    for i in range(nint):
        h = knots[i + 1] - knots[i]
        d = 0.0
        bad[i] = -1
        for j in range(n):
            c0, c1, c2, c3 = c[0, i, j], c[1, i, j], c[2, i, j], c[3, i, j]
            slope = (c0 * h + c1) * h + c2  # chord slope (q(h) - q(0)) / h
            k = _critical_points(c0, c1, c2 - slope, h, roots)
            for r in range(k):
                t = roots[r]
                e = abs(((c0 * t + c1) * t + c2 - slope) * t)
                if e > d:
                    d = e
            if bad[i] < 0:
                k = _critical_points(c0, c1, c2, h, roots)
                for r in range(k):
                    t = roots[r]
                    v = ((c0 * t + c1) * t + c2) * t + c3
                    if not (lo[j] <= v <= hi[j]):
                        bad[i] = j
        dev[i] = d + offset[i]
        if dev[i] > worst:
            worst = dev[i]
    return worst


@njit(cache=True, nogil=True)
def _refine(wp, knots, offset, tol, lo, hi, ss, hs, es, he, max_knots, max_rounds):  # pragma: no cover
    """Insert chord midpoints into every knot interval whose spline leaves the tolerance tube or the
    position box, and solve again, until none does (status 0), the knot count would pass max_knots (1)
    or after max_rounds (2). Returns (points, knots, offset, coefficients, dev, bad, status)."""
    status = 2
    for _ in range(max_rounds):
        c = _spline_coefficients(knots, wp, ss, hs, es, he)
        nint = knots.shape[0] - 1
        dev = np.empty(nint)
        bad = np.empty(nint, dtype=np.int64)
        _interval_bounds(knots, c, offset, lo, hi, dev, bad)
        split = 0
        for i in range(nint):
            if dev[i] > tol or bad[i] >= 0:
                split += 1
        if split == 0:
            return wp, knots, offset, c, dev, bad, 0
        if knots.shape[0] + split > max_knots:
            return wp, knots, offset, c, dev, bad, 1
        k2 = knots.shape[0] + split
        wp2 = np.empty((k2, wp.shape[1]))
        kn2 = np.empty(k2)
        off2 = np.empty(k2 - 1)
        g = 0
        for i in range(nint):
            wp2[g, :] = wp[i, :]
            kn2[g] = knots[i]
            off2[g] = offset[i]
            g += 1
            if dev[i] > tol or bad[i] >= 0:
                # the midpoint of the chord: on the same (input or merged) chord, s stays its chord length
                wp2[g, :] = 0.5 * (wp[i, :] + wp[i + 1, :])
                kn2[g] = 0.5 * (knots[i] + knots[i + 1])
                off2[g] = offset[i]
                g += 1
        wp2[g, :] = wp[nint, :]
        kn2[g] = knots[nint]
        wp, knots, offset = wp2, kn2, off2
    c = _spline_coefficients(knots, wp, ss, hs, es, he)
    dev = np.empty(knots.shape[0] - 1)
    bad = np.empty(knots.shape[0] - 1, dtype=np.int64)
    _interval_bounds(knots, c, offset, lo, hi, dev, bad)
    for i in range(dev.shape[0]):
        if dev[i] > tol or bad[i] >= 0:
            return wp, knots, offset, c, dev, bad, status
    return wp, knots, offset, c, dev, bad, 0


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
def _split_for_turn(knots, coeffs, turn, max_depth):  # pragma: no cover - compiled
    """The same piecewise cubic with intervals halved (exactly: the right half re-expanded about its
    start) wherever the curvature varies so much inside an interval that uniform stages sized for its
    largest |q''| would be several times more than its turn needs: an interval of length h is halved
    while h max|q''| ≥ 2 (h mean|q''| + turn), up to ``max_depth`` times. Gridpoints are uniform inside
    an interval (:func:`_gridpoints`), so this lets stages be short where the path turns fast and long
    where it does not."""
    nint = knots.shape[0] - 1
    n = coeffs.shape[2]
    cap = nint << max_depth
    kn = np.empty(cap + 1)
    cf = np.empty((4, cap, n))
    m = 0
    # explicit stack of (start s, length, depth, source interval, offset of the piece in it)
    st_h = np.empty(max_depth + 2)
    st_t = np.empty(max_depth + 2)
    st_d = np.empty(max_depth + 2, dtype=np.int64)
    for k in range(nint):
        h0 = knots[k + 1] - knots[k]
        top = 0
        st_t[0] = 0.0
        st_h[0] = h0
        st_d[0] = 0
        top = 1
        while top > 0:
            top -= 1
            t0 = st_t[top]
            h = st_h[top]
            d = st_d[top]
            peak = 0.0
            mean = 0.0
            for j in range(n):
                a = 6.0 * coeffs[0, k, j] * t0 + 2.0 * coeffs[1, k, j]
                b = 6.0 * coeffs[0, k, j] * (t0 + h) + 2.0 * coeffs[1, k, j]
                peak = max(peak, max(abs(a), abs(b)))
                mean = max(mean, 0.5 * (abs(a) + abs(b)))
            if d < max_depth and h * peak >= 1.25 * h * mean + turn:
                # right half first on the stack, so that the left half is emitted first
                st_t[top] = t0 + 0.5 * h
                st_h[top] = 0.5 * h
                st_d[top] = d + 1
                st_t[top + 1] = t0
                st_h[top + 1] = 0.5 * h
                st_d[top + 1] = d + 1
                top += 2
                continue
            kn[m] = knots[k] + t0
            for j in range(n):
                c0, c1, c2, c3 = coeffs[0, k, j], coeffs[1, k, j], coeffs[2, k, j], coeffs[3, k, j]
                cf[0, m, j] = c0
                cf[1, m, j] = 3.0 * c0 * t0 + c1
                cf[2, m, j] = (3.0 * c0 * t0 + 2.0 * c1) * t0 + c2
                cf[3, m, j] = ((c0 * t0 + c1) * t0 + c2) * t0 + c3
            m += 1
    kn[m] = knots[nint]
    return kn[:m + 1].copy(), cf[:, :m, :].copy()


@njit(cache=True, nogil=True)
def _gridpoints(knots, count, min_per):  # pragma: no cover - compiled
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
    while short < 0:  # too many from the minima: take from the intervals with most stages per length
        best = -1
        ratio = -1.0
        for k in range(n_int):
            if per[k] > min_per[k]:
                r = per[k] / (knots[k + 1] - knots[k])
                if r > ratio:
                    ratio = r
                    best = k
        if best < 0:  # every interval at its minimum: more stages than requested
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
    s, knot_index = _gridpoints(knots, int(count), np.ones(knots.shape[0] - 1, dtype=np.int64))
    return (s, knot_index) if return_knot_index else s


@njit(cache=True, nogil=True)
def _collocation(knots, coeffs, count, lower, upper, turn):  # pragma: no cover - compiled
    """Gridpoints, collocation points and the spline at them in one pass (see :func:`collocation`)."""
    s, knot_index = _gridpoints(knots, count, _min_stages(knots, coeffs, turn))
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
    _spline_eval(knots, coeffs, s_eval, q, dq, ddq)
    bad = -1
    for k in range(p):
        for j in range(n):
            if not (lower[j] <= q[k, j] <= upper[j]):
                bad = k * n + j
                break
        if bad >= 0:
            break
    return s, knot_index, s_eval, q, dq, ddq, bad


def collocation(path: "JointPath", count: int, lower: np.ndarray, upper: np.ndarray,
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
