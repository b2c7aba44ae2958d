"""Geometric joint-space path q(s): a C² cubic spline through waypoints, with derivatives q'(s), q''(s).

The path parameter ``s`` is the cumulative chord length of the waypoints (Euclidean norm of the joint-space
differences, in rad for revolute joints), so ``|q'(s)| ≈ 1`` and the TOPP-RA variables ``sd`` (≈ joint-space
speed, rad/s) and ``sdd`` are well scaled for every path.

The spline is the classic cubic interpolating spline (de Boor, *A Practical Guide to Splines*, 2001, ch. IV;
the same system scipy's ``CubicSpline`` solves): slopes ``m_k = q'(s_k)`` from a tridiagonal system with
"not-a-knot" end conditions (third derivative continuous at the second and second-to-last knot) or a
prescribed end tangent (used when the request has a non-zero start / end velocity). It is solved here by a
small compiled kernel instead of ``scipy.interpolate.CubicSpline`` only because the latter costs ~0.2 ms of
Python overhead per call, a fifth of the retiming budget; ``test/retiming/test_path.py`` checks both agree to 1e-12.

The waypoints are prepared first (duplicates merged, the motion split at direction reversals:
:mod:`robot_dynamics_ros.retiming.waypoints`). :meth:`JointPath.within_tolerance` cuts the corners the spline
through the waypoints cannot pass within a tolerance of the straight segments between them (knots on the
corner's chords instead of the corner, :mod:`robot_dynamics_ros.retiming.corners`) and adds knots on the
chords until the spline stays within the tolerance; the gridpoints and the path at them are
:mod:`robot_dynamics_ros.retiming.grid`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from robot_dynamics_ros.retiming.corners import (_chord_fit, _chord_fit_bounds, _corner_bounds, _corner_points,
                                                  _critical_points, _tight_corners)

#: largest change of the path tangent q' (infinity norm) over one stage: the stage-interior bound of the
#: velocity and torque rows is exact only up to a residual that grows with the square of this turn, and the
#: duration's discretization error near cut corners falls with it (0.015: ≤ +0.42 % from the 10 000-gridpoint
#: duration on bench_corners' cases, docs/retiming.md)
TURN_PER_STAGE = 0.015


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
def spline_eval(x, c, s, q, dq, ddq):  # pragma: no cover - compiled
    """q(s), q'(s), q''(s) of a PPoly cubic (breakpoints x (K,), coefficients c (4, K-1, n)) at s (N,)."""
    nint = x.shape[0] - 1
    n = c.shape[2]
    j = 0
    # the current interval's coefficients side by side: c holds them (K-1) n apart
    cj = np.empty((n, 4))
    for d in range(n):
        for r in range(4):
            cj[d, r] = c[r, 0, d]
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
            for d in range(n):
                for r in range(4):
                    cj[d, r] = c[r, j, d]
        t = sp - x[j]
        for d in range(n):
            c0, c1, c2, c3 = cj[d, 0], cj[d, 1], cj[d, 2], cj[d, 3]
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
                         end_tangent=None, max_knots: int = 1_000_000, max_rounds: int = 60,
                         cut_corners: bool = True):
        """The C² cubic spline within ``tol`` of the polyline through the waypoints and inside [lower, upper]
        everywhere, through the end waypoints and through points on the chords; with ``cut_corners`` it
        turns each corner using (close to) the whole tolerance instead of passing through the corner.

        Corners (:func:`_cut_corners`): each interior waypoint is replaced by knots on its two chords at a
        distance d from it (and a few further ones at 2d, 4d, ... that damp the spline's ringing), d
        chosen per corner so that the exact bound of the spline's distance from the polyline across the
        corner (:func:`.corners._corner_deviation`) is within [0.9, 1] × ``tol`` — the speed a corner allows grows
        with the radius it is turned on (Kunz & Stilman 2012 blend circular arcs to the same end). Then,
        as without cutting: the spline can swing far from the straight segments between the knots (the
        segments a planner checked); every knot interval on a chord where it does, by the exact bound of
        :func:`_interval_bounds`, or where it leaves the position box, gets the midpoint of its chord as
        a new knot, until no interval does (≈ 10 rounds from 1 rad chords to 1 mrad); the bound is
        checked, not assumed: status 2 if it is not met after ``max_rounds``. A corner whose interval
        leaves the position box is cut less; one that cannot be cut within the tolerance keeps its
        waypoint as a knot.

        Args:
            waypoints: (K, n) distinct consecutive waypoints (rad / m).
            chord_offset: (K-1,) distance bound (infinity norm) of each chord from the request's polyline
                (non-zero where waypoints were merged, see :func:`prepare_waypoints`).
            tol: path tolerance (rad / m, infinity norm); lower, upper: (n,) position bounds.
            start_tangent, end_tangent: as in :meth:`from_waypoints`.
            cut_corners: False: every waypoint is a knot (the path passes through every corner).
        Returns:
            (path, deviation (K'-1,) per knot interval the bound on its distance from the polyline,
            status: 0 within tolerance, 1 more than ``max_knots`` knots needed, 2 not within ``max_rounds``
            halvings, bad (K'-1,) joint leaving [lower, upper] per interval or -1). ``path.waypoint_knots``
            is s at the waypoints (s is the chord length of the polyline; a cut corner's s is the middle
            of its knot interval).
        Raises:
            ValueError: fewer than 2 waypoints or consecutive duplicates.
        """
        wp = np.ascontiguousarray(waypoints, dtype=float)
        knots, shortest = _chord_knots(wp)
        if wp.shape[0] < 2 or not shortest > 0.0:
            raise ValueError("waypoints: need at least 2 distinct consecutive waypoints")
        n = wp.shape[1]
        ss, hs = _unit(start_tangent, n)
        es, he = _unit(end_tangent, n)
        args = (np.ascontiguousarray(chord_offset, dtype=float), float(tol),
                np.ascontiguousarray(lower, dtype=float), np.ascontiguousarray(upper, dtype=float),
                ss, hs, es, he, int(max_knots), int(max_rounds))
        no_corner = np.full(wp.shape[0] - 1, -1, dtype=np.int64)
        out = _refine(wp, knots, args[0], no_corner, wp[:0], np.zeros((0, 2)), *args[1:])
        if cut_corners and out[1].shape[0] > knots.shape[0] > 2:
            # only corners the spline through the waypoints could not pass within tol (a chord next to
            # them needed knots) are cut: a smooth, dense path is left as it is
            tight = _tight_corners(knots, out[1])
            if tight.any():
                cut = _cut_corners(wp, knots, tight, *args)
                out = cut if cut[7] == 0 else out  # else every waypoint a knot
        _, kn, _, _, c, dev, bad, status = out
        return cls(kn, c, waypoint_knots=knots), dev, int(status), bad

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
        spline_eval(self.knots, self.coefficients, s, q, dq, ddq)
        return q, dq, ddq

    def __call__(self, s) -> np.ndarray:
        """q(s), (N, n)."""
        return self.evaluate(s)[0]


@njit(cache=True, nogil=True)
def _interval_bounds(knots, pts, c, offset, corner, cp, coff, lo, hi, dev, bad, state, which):  # pragma: no cover
    """Per knot interval i with state[i] == which: dev[i] = a bound of the spline's distance from the
    polyline there, and bad[i] = a joint whose q leaves [lo, hi] inside the interval, or -1.

    The spline minus the straight line between its values at the interval's two knots is a cubic
    vanishing at both ends: fit = the largest of the joints' :func:`_chord_fit`, taken exactly for the
    joint with the largest upper bound (:func:`_chord_fit_bounds`) and for the others whose bound can
    exceed it. On a chord (corner[i] < 0) dev[i] = fit + offset[i]. Across a cut corner (corner[i] = k ≥ 0:
    knots a = pts[i], b = pts[i+1] at equal distances d from the corner p = cp[k] on its two chords, whose
    offsets are coff[k] (2,)), the straight line a -> b is within d sin(turn) / 2 (Euclidean) of the
    polyline a -> p -> b (its distances from the lines p a and p b are linear along it, 0 at a resp. b),
    so fit + that + the larger offset bounds it (:func:`_corner_bounds` takes the finer bound too).
    A joint's q is between its values at the knots ± its fit (or the fit's bound): its extremes are looked
    at only where that range reaches [lo, hi] (the same joint is reported)."""
    nint = knots.shape[0] - 1
    n = c.shape[2]
    roots = np.empty(2)
    up = np.empty(n)
    above = np.empty(n)
    for i in range(nint):
        if state[i] != which:
            continue
        h = knots[i + 1] - knots[i]
        top = 0
        for j in range(n):
            _, up[j], margin = _chord_fit_bounds(c[0, i, j], c[1, i, j], c[2, i, j], h)
            above[j] = up[j] + margin
            if up[j] > up[top]:
                top = j
        d = _chord_fit(c[0, i, top], c[1, i, top], c[2, i, top], h, roots)
        d_top = d
        bad[i] = -1
        for j in range(n):
            c0, c1, c2, c3 = c[0, i, j], c[1, i, j], c[2, i, j], c[3, i, j]
            fit = up[j]
            if j == top:
                fit = d_top
            elif above[j] > d:  # else it cannot raise d
                fit = _chord_fit(c0, c1, c2, h, roots)
                d = max(d, fit)
            if bad[i] < 0:
                q1 = ((c0 * h + c1) * h + c2) * h + c3
                # a margin far above the rounding of the values compared
                margin = 1e-9 * (1.0 + abs(c3) + abs(q1) + fit)
                if not (lo[j] + margin <= min(c3, q1) - fit and max(c3, q1) + fit <= hi[j] - margin):
                    k = _critical_points(c0, c1, c2, h, roots)
                    for r in range(k):
                        t = roots[r]
                        v = ((c0 * t + c1) * t + c2) * t + c3
                        if not (lo[j] <= v <= hi[j]):
                            bad[i] = j
        if corner[i] < 0:
            dev[i] = d + offset[i]
        else:
            k = corner[i]
            # distance of the midpoint of a -> b from the line p a
            aa = 0.0
            ma = 0.0
            mm = 0.0
            for j in range(n):
                u = pts[i, j] - cp[k, j]
                m = 0.5 * (pts[i, j] + pts[i + 1, j]) - cp[k, j]
                aa += u * u
                ma += m * u
                mm += m * m
            mid = np.sqrt(max(mm - ma * ma / aa, 0.0)) if aa > 0.0 else np.sqrt(mm)
            dev[i] = d + mid + max(coff[k, 0], coff[k, 1])


@njit(cache=True, nogil=True)
def _settled_chords(knots, c, offset, corner, tol, lo, hi, state):  # pragma: no cover - compiled
    """Per knot interval i on a chord, whether :func:`_refine` splits it, decided by the bounds of
    :func:`_chord_fit_bounds` where they decide: state[i] = 1 (split: a joint's lower bound plus the
    chord's offset is above tol), 0 (not split: every upper bound plus the offset is below tol and every
    joint's knot values ± its upper bound are inside [lo, hi]), -1 (not decided here; intervals across
    corners too), each by a margin far above the rounding of the exact bound. Returns the count of 1s."""
    n = c.shape[2]
    count = 0
    for i in range(knots.shape[0] - 1):
        state[i] = -1
        if corner[i] >= 0:
            continue
        h = knots[i + 1] - knots[i]
        slack = 1e-9 * (offset[i] + tol)
        low = -np.inf
        high = 0.0
        inside = True
        for j in range(n):
            c0, c1, c2, c3 = c[0, i, j], c[1, i, j], c[2, i, j], c[3, i, j]
            lower, upper, margin = _chord_fit_bounds(c0, c1, c2, h)
            low = max(low, lower - margin)
            high = max(high, upper + margin)
            q1 = ((c0 * h + c1) * h + c2) * h + c3
            margin = 2e-9 * (1.0 + abs(c3) + abs(q1) + upper)
            inside = inside and lo[j] + margin <= min(c3, q1) - upper and max(c3, q1) + upper <= hi[j] - margin
        if low + offset[i] > tol + slack:
            state[i] = 1
            count += 1
        elif inside and high + offset[i] + slack < tol:
            state[i] = 0
    return count


@njit(cache=True, nogil=True)
def _refine(wp, knots, offset, corner, cp, coff, tol, lo, hi, ss, hs, es, he, max_knots,
            max_rounds):  # pragma: no cover
    """Insert chord midpoints into every knot interval on a chord (corner < 0) whose spline leaves the
    tolerance tube or the position box, and solve again, until none does (status 0), the knot count would
    pass max_knots (1) or after max_rounds (2). Intervals across a cut corner are never split (the caller
    moves their knots). Returns (points, knots, offset, corner, coefficients, dev, bad, status).

    The first round bounds every interval exactly (it is often the last: a dense path, a corner pass
    whose chords need no knots); a later round follows a split, and settles most chords by cheaper bounds
    first (:func:`_settled_chords`), the exact bounds of the others once the knots are final."""
    for rnd in range(max_rounds + 1):
        c = _spline_coefficients(knots, wp, ss, hs, es, he)
        nint = knots.shape[0] - 1
        dev = np.empty(nint)
        bad = np.empty(nint, dtype=np.int64)
        state = np.full(nint, -1, dtype=np.int8)
        split = _settled_chords(knots, c, offset, corner, tol, lo, hi, state) if rnd > 0 else 0
        _interval_bounds(knots, wp, c, offset, corner, cp, coff, lo, hi, dev, bad, state, -1)
        halve = state == 1
        for i in range(nint):
            if state[i] < 0 and corner[i] < 0 and (dev[i] > tol or bad[i] >= 0):
                halve[i] = True
                split += 1
        if split == 0:  # the corners' finer bounds (not needed to split chords) once, for the caller
            _interval_bounds(knots, wp, c, offset, corner, cp, coff, lo, hi, dev, bad, state, 0)
            _corner_bounds(knots, wp, c, corner, cp, coff, dev, 0.9 * tol)
            return wp, knots, offset, corner, c, dev, bad, 0
        if knots.shape[0] + split > max_knots or rnd == max_rounds:
            break
        k2 = knots.shape[0] + split
        wp2 = np.empty((k2, wp.shape[1]))
        kn2 = np.empty(k2)
        off2 = np.empty(k2 - 1)
        cor2 = np.empty(k2 - 1, dtype=np.int64)
        g = 0
        for i in range(nint):
            wp2[g, :] = wp[i, :]
            kn2[g] = knots[i]
            off2[g] = offset[i]
            cor2[g] = corner[i]
            g += 1
            if halve[i]:
                # the midpoint of the chord: on the same (input or merged) chord, s stays its chord length
                wp2[g, :] = 0.5 * (wp[i, :] + wp[i + 1, :])
                kn2[g] = 0.5 * (knots[i] + knots[i + 1])
                off2[g] = offset[i]
                cor2[g] = -1
                g += 1
        wp2[g, :] = wp[nint, :]
        kn2[g] = knots[nint]
        wp, knots, offset, corner = wp2, kn2, off2, cor2
    # not within the tolerance: the bounds of the intervals settled without them too, for the caller
    _interval_bounds(knots, wp, c, offset, corner, cp, coff, lo, hi, dev, bad, state, 0)
    _interval_bounds(knots, wp, c, offset, corner, cp, coff, lo, hi, dev, bad, state, 1)
    return wp, knots, offset, corner, c, dev, bad, 1 if knots.shape[0] + split > max_knots else 2


#: passes of :func:`_cut_corners` adjusting the corners' cut distances
CORNER_PASSES = 3


def _cut_corners(wp, sw, tight, offset, tol, lo, hi, ss, hs, es, he, max_knots, max_rounds):
    """:func:`_refine` on the knots of :func:`_corner_points`, the cut distance d of every corner k with
    tight[k - 1] adjusted (:func:`_corner_passes`) until the bound across each corner is within [0.9, 1] ×
    tol (or d is at its largest, 0.45 of the shorter chord, within tol). Returns _refine's tuple (status 2
    when no pass had every corner within tol: the caller then keeps every waypoint as a knot). The turn
    of the polyline at each corner (rad) and its sine are numpy's (vectorized over the corners), the
    passes compiled."""
    e = np.diff(wp, axis=0) / np.diff(sw)[:, None]
    turn = np.arccos(np.clip(np.sum(e[:-1] * e[1:], axis=1), -1.0, 1.0))
    return _corner_passes(wp, sw, tight, turn, np.sin(np.minimum(turn, 0.5 * np.pi)), offset, tol, lo, hi, ss,
                          hs, es, he, max_knots, max_rounds)


@njit(cache=True, nogil=True)
def _corner_passes(wp, sw, tight, turn, sin_turn, offset, tol, lo, hi, ss, hs, es, he, max_knots,
                   max_rounds):  # pragma: no cover - compiled
    """The passes of :func:`_cut_corners`; turn, sin_turn (W-2,) the polyline's turn at each corner and
    its sine (of at most a right angle). First guess: the chord between the cut points passes
    sin(turn) d / 2 from the polyline. An isolated corner's deviation scales with d (the knots near it are
    d, 2d, 4d from it): the first pass rescales d by 0.95 tol / deviation; where corners interact (short
    chords) the later passes bracket d per corner between the largest d seen within tol and the smallest
    seen above it (or outside the position box) and take the secant between them (a corner cut by more
    than a quarter of a chord that went above tol keeps to a quarter). After :data:`CORNER_PASSES` passes
    only corners above tol shrink (to their largest d seen within tol at most), for up to 3 passes; the
    first of these with every corner within tol is taken, else the pass within tol that used most of it
    (the largest sum of the corners' bounds)."""
    w = wp.shape[0]
    cut = np.zeros(w)
    shorter = np.empty(w - 2)
    cp = np.empty((w - 2, wp.shape[1]))
    coff = np.empty((w - 2, 2))
    for k in range(w - 2):
        shorter[k] = min(sw[k + 1] - sw[k], sw[k + 2] - sw[k + 1])
        budget = tol - max(offset[k], offset[k + 1])
        if tight[k] and turn[k] > 1e-6 and budget > 0.0:
            cut[k + 1] = min(0.45 * shorter[k], 2.0 * budget / max(sin_turn[k], 1e-12))
        cp[k, :] = wp[k + 1, :]
        coff[k, 0] = offset[k]
        coff[k, 1] = offset[k + 1]
    nc = cut.shape[0] - 2
    d_max = 0.45 * shorter
    ok_d, ok_dev = np.zeros(nc), np.zeros(nc)  # largest d within tol
    no_d, no_dev = np.full(nc, np.inf), np.zeros(nc)  # smallest d above it
    dev_c = np.empty(nc)
    bad_c = np.empty(nc, dtype=np.bool_)
    over = np.empty(nc, dtype=np.bool_)
    low = np.empty(nc, dtype=np.bool_)
    target = 0.95 * tol
    out = _refine(*_corner_points(wp, sw, cut, offset), cp, coff, tol, lo, hi, ss, hs, es, he, max_knots,
                  max_rounds)
    best, best_score, has_best = out, -1.0, False
    for rnd in range(CORNER_PASSES + 3):
        if rnd > 0:
            out = _refine(*_corner_points(wp, sw, cut, offset), cp, coff, tol, lo, hi, ss, hs, es, he,
                          max_knots, max_rounds)
        if out[7] != 0:
            return out
        corner, dev, bad = out[3], out[5], out[6]
        dev_c[:] = 0.0
        bad_c[:] = False
        for i in range(corner.shape[0]):
            if corner[i] >= 0:
                dev_c[corner[i]] = dev[i]
                bad_c[corner[i]] = bad[i] >= 0
        any_over = False
        any_low = False
        for k in range(nc):
            d = cut[k + 1]
            over[k] = d > 0.0 and (dev_c[k] > tol or bad_c[k])
            low[k] = d > 0.0 and dev_c[k] < 0.9 * tol and d < d_max[k] and not over[k]
            any_over |= over[k]
            any_low |= low[k]
        if not any_over:
            if not any_low or rnd >= CORNER_PASSES:
                return out
            score = dev_c.sum()
            if score > best_score:
                best, best_score, has_best = out, score, True
        for k in range(nc):
            d = cut[k + 1]
            if not over[k] and d > ok_d[k]:
                ok_d[k], ok_dev[k] = d, dev_c[k]
            if over[k] and d < no_d[k]:
                no_d[k], no_dev[k] = d, np.inf if bad_c[k] else dev_c[k]
        for k in range(nc):
            d = cut[k + 1]
            if rnd >= CORNER_PASSES - 1:
                # corners above tol shrink (to their largest d seen within tol at most), the others stay
                if over[k]:
                    cut[k + 1] = min(ok_d[k], d * (0.5 if bad_c[k] else target / dev_c[k]))
                continue
            # a corner cut by more than a quarter of a chord that went above tol interacts with its
            # neighbour across that chord (the spline cannot straighten between them): it keeps to a
            # quarter from now on
            if over[k] and d > 0.25 * shorter[k]:
                d_max[k] = 0.25 * shorter[k]
            if not (over[k] or low[k]):
                continue
            if np.isfinite(no_d[k]):
                gap = no_d[k] - ok_d[k]
                den = no_dev[k] - ok_dev[k]
                # no secant through two equal deviations (or above the box at both ends): the midpoint
                secant = ok_d[k] + (target - ok_dev[k]) * gap / den if den != 0.0 else np.nan
                if np.isfinite(secant):
                    cut[k + 1] = min(max(secant, ok_d[k] + 0.1 * gap), no_d[k] - 0.1 * gap)
                else:
                    cut[k + 1] = ok_d[k] + 0.5 * gap
            else:
                ratio = target / dev_c[k] if dev_c[k] > 0.0 else np.inf
                cut[k + 1] = min(d_max[k], d * min(max(ratio, 0.1), 4.0))
    if has_best:
        return best
    return out[0], out[1], out[2], out[3], out[4], out[5], out[6], 2


@njit(cache=True, nogil=True)
def _split_for_turn(knots, coeffs, turn, max_depth):  # pragma: no cover - compiled
    """The same piecewise cubic with intervals halved (exactly: the right half re-expanded about its
    start) wherever the curvature varies so much inside an interval that uniform stages sized for its
    largest |q''| would be several times more than its turn needs: an interval of length h is halved
    while h max|q''| ≥ 2 (h mean|q''| + turn), up to ``max_depth`` times. Gridpoints are uniform inside
    an interval (:func:`_gridpoints`), so this lets stages be short where the path turns fast and long
    where it does not. The pieces are counted first (:func:`_turn_pieces` without output), then written."""
    m = _turn_pieces(knots, coeffs, turn, max_depth, np.empty(0), np.empty((4, 0, 0)), False)
    kn = np.empty(m + 1)
    cf = np.empty((4, m, coeffs.shape[2]))
    _turn_pieces(knots, coeffs, turn, max_depth, kn, cf, True)
    kn[m] = knots[knots.shape[0] - 1]
    return kn, cf


@njit(cache=True, nogil=True)
def _turn_pieces(knots, coeffs, turn, max_depth, kn, cf, write):  # pragma: no cover - compiled
    """The pieces of :func:`_split_for_turn`, in order: their count, and with ``write`` their start s into
    kn and their coefficients (re-expanded about their start) into cf."""
    nint = knots.shape[0] - 1
    n = coeffs.shape[2]
    m = 0
    # explicit stack of (start s, length, depth) of the pieces of interval k
    st_h = np.empty(max_depth + 2)
    st_t = np.empty(max_depth + 2)
    st_d = np.empty(max_depth + 2, dtype=np.int64)
    for k in range(nint):
        st_t[0] = 0.0
        st_h[0] = knots[k + 1] - knots[k]
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
            if write:
                kn[m] = knots[k] + t0
                for j in range(n):
                    c0, c1, c2, c3 = coeffs[0, k, j], coeffs[1, k, j], coeffs[2, k, j], coeffs[3, k, j]
                    cf[0, m, j] = c0
                    cf[1, m, j] = 3.0 * c0 * t0 + c1
                    cf[2, m, j] = (3.0 * c0 * t0 + 2.0 * c1) * t0 + c2
                    cf[3, m, j] = ((c0 * t0 + c1) * t0 + c2) * t0 + c3
            m += 1
    return m
