"""Cut corners of a joint-space path (:meth:`~robot_dynamics_ros.retiming.path.JointPath.within_tolerance`):
which corners are cut (:func:`_tight_corners`), the knots that replace a waypoint corner by points on its two
chords (:func:`_corner_points`), and an exact upper bound of a cubic piece's distance from the two segments of a
corner (:func:`_corner_deviation`, :func:`_corner_bounds`) or from its own chord (:func:`_chord_fit`, and
cheaper bounds of that: :func:`_chord_fit_bounds`).

A corner waypoint need not be on the path: the polyline's corner is turned on the spline through points
at a distance d before and after it on its chords, d chosen so that this bound is close to the path
tolerance — the same tolerance buys a larger radius, hence speed, at the corner (Kunz & Stilman, RSS 2012,
blend circular arcs for the same reason; here the path stays one C² cubic spline).
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["CORNER_PIECES", "CORNER_SEEDS"]


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
def _chord_fit(c0, c1, c2, h, roots):  # pragma: no cover - compiled
    """max over [0, h] of |r(t)|, r(t) = c0 t³ + c1 t² + c2 t minus its chord (vanishing at 0 and h): r is
    largest at a root of r' (a quadratic)."""
    slope = (c0 * h + c1) * h + c2  # chord slope (q(h) - q(0)) / h
    k = _critical_points(c0, c1, c2 - slope, h, roots)
    fit = 0.0
    for r in range(k):
        t = roots[r]
        fit = max(fit, abs(((c0 * t + c1) * t + c2 - slope) * t))
    return fit


@njit(cache=True, nogil=True)
def _chord_fit_bounds(c0, c1, c2, h):  # pragma: no cover - compiled
    """(lower, upper bound of :func:`_chord_fit`, margin): r(t) = t (t - h) (c0 (t + h) + c1), so
    |r(h/2)| ≤ max|r| ≤ h²/4 max(|c0 h + c1|, |2 c0 h + c1|) (the last factor is linear in t); the margin
    is far above the rounding of _chord_fit's value."""
    e0 = c0 * h + c1
    quarter = 0.25 * h * h
    slope = e0 * h + c2
    return (quarter * abs(e0 + 0.5 * c0 * h), quarter * max(abs(e0), abs(e0 + c0 * h)),
            1e-9 * h * (abs(c0) * h * h + abs(c1) * h + abs(c2) + abs(slope)))


@njit(cache=True, nogil=True)
def _piece_to_segment(c, i, t0, t1, a0, a1, u, w, roots):  # pragma: no cover - compiled
    """max over joints j and t in [t0, t1] of |q_j(t) - u_j - alpha(t) w_j|, alpha linear from a0 at t0 to
    a1 at t1, for the cubic piece i of c: per joint a cubic, whose extremes are at its ends or at the
    roots of a quadratic."""
    n = c.shape[2]
    rate = (a1 - a0) / (t1 - t0)
    worst = 0.0
    for j in range(n):
        c0, c1, c2, c3 = c[0, i, j], c[1, i, j], c[2, i, j], c[3, i, j]
        k = _critical_points(c0, c1, c2 - rate * w[j], t1, roots)
        for r in range(k + 2):
            t = t0 if r == k else (t1 if r == k + 1 else roots[r])
            if t < t0:
                continue
            worst = max(worst, abs(((c0 * t + c1) * t + c2) * t + c3 - u[j] - (a0 + rate * (t - t0)) * w[j]))
    return worst


#: pieces of a cut corner's knot interval over which :func:`_corner_deviation` tracks the polyline
CORNER_PIECES = 8


@njit(cache=True, nogil=True)
def _corner_deviation(c, i, h, a, p, b, off_in, off_out, roots):  # pragma: no cover - compiled
    """An upper bound of the distance (infinity norm) of the cubic piece i (length h, from a on the chord
    into corner p to b on the chord out of it) from the polyline a -> p -> b, plus the chords' offsets.

    On each of :data:`CORNER_PIECES` equal pieces [t0, t1], for each segment, the point y(t) moving
    linearly along the segment between the (clamped, Euclidean) projections of q(t0) and q(t1) is a point
    of the segment for every t, so |q(t) - y(t)| (:func:`_piece_to_segment`, exact) bounds the distance
    from that segment; the smaller of the two segments' bounds holds on the piece, the largest over the
    pieces is returned.

    The pieces are bounded in order of a cheaper bound, and those whose cheaper bound cannot exceed the
    largest exact one found are skipped (the result is the same maximum): q(t) - y(t) is a cubic whose
    second derivative is q''(t), linear in t, so it is within Δ²/8 max(|q''(t0)|, |q''(t1)|) of its chord
    between its values at the piece's ends (Δ = t1 - t0; the linear interpolation error bound)."""
    n = c.shape[2]
    w_in = np.empty(n)  # the two segments' directions (unnormalized): p − a and b − p
    w_out = np.empty(n)
    dd_in = 0.0
    dd_out = 0.0
    for j in range(n):
        w_in[j] = p[j] - a[j]
        w_out[j] = b[j] - p[j]
        dd_in += w_in[j] * w_in[j]
        dd_out += w_out[j] * w_out[j]
    x = np.empty((CORNER_PIECES + 1, n))
    al_in = np.zeros(CORNER_PIECES + 1)
    al_out = np.zeros(CORNER_PIECES + 1)
    scale = 0.0  # the largest coordinate: the rounding of the residuals is relative to it
    for m in range(CORNER_PIECES + 1):
        t = h * m / CORNER_PIECES
        r_in = 0.0
        r_out = 0.0
        for j in range(n):
            xj = ((c[0, i, j] * t + c[1, i, j]) * t + c[2, i, j]) * t + c[3, i, j]
            x[m, j] = xj
            r_in += (xj - a[j]) * w_in[j]
            r_out += (xj - p[j]) * w_out[j]
            scale = max(scale, abs(xj), abs(a[j]), abs(p[j]), abs(b[j]))
        if dd_in > 0.0:
            al_in[m] = min(max(r_in / dd_in, 0.0), 1.0)
        if dd_out > 0.0:
            al_out[m] = min(max(r_out / dd_out, 0.0), 1.0)
    # cheaper bound per piece: the ends' residuals from each segment plus the interpolation error
    cheap = np.empty(CORNER_PIECES)
    for m in range(CORNER_PIECES):
        step = h * (m + 1) / CORNER_PIECES - h * m / CORNER_PIECES
        t0 = h * m / CORNER_PIECES
        e_in = 0.0
        e_out = 0.0
        for j in range(n):
            curv = max(abs(6.0 * c[0, i, j] * t0 + 2.0 * c[1, i, j]),
                       abs(6.0 * c[0, i, j] * (t0 + step) + 2.0 * c[1, i, j]))
            bend = 0.125 * step * step * curv
            e_in = max(e_in, max(abs(x[m, j] - a[j] - al_in[m] * w_in[j]),
                                 abs(x[m + 1, j] - a[j] - al_in[m + 1] * w_in[j])) + bend)
            e_out = max(e_out, max(abs(x[m, j] - p[j] - al_out[m] * w_out[j]),
                                   abs(x[m + 1, j] - p[j] - al_out[m + 1] * w_out[j])) + bend)
        cheap[m] = min(e_in + off_in, e_out + off_out)
        if cheap[m] != cheap[m]:  # NaN: bounded exactly
            cheap[m] = np.inf
    # margin for the rounding of both bounds (relative 1e-9 of the coordinates: far above it)
    margin = 1e-9 * (scale + h + 1.0)
    worst = 0.0
    for _ in range(CORNER_PIECES):
        m = 0
        for k in range(1, CORNER_PIECES):
            if cheap[k] > cheap[m]:
                m = k
        if not cheap[m] + margin > worst:  # no piece left can raise the maximum
            break
        cheap[m] = -np.inf
        t0 = h * m / CORNER_PIECES
        t1 = h * (m + 1) / CORNER_PIECES
        e = _piece_to_segment(c, i, t0, t1, al_in[m], al_in[m + 1], a, w_in, roots) + off_in
        if e > worst:  # else the piece cannot raise the maximum
            e = min(e, _piece_to_segment(c, i, t0, t1, al_out[m], al_out[m + 1], p, w_out, roots) + off_out)
            worst = max(worst, e)
    return worst


@njit(cache=True, nogil=True)
def _corner_bounds(knots, pts, c, corner, cp, coff, dev, close):  # pragma: no cover - compiled
    """dev[i] of every interval across a cut corner (see :func:`_interval_bounds`) above ``close``: the
    smaller of it and the finer bound :func:`_corner_deviation`."""
    roots = np.empty(2)
    for i in range(knots.shape[0] - 1):
        k = corner[i]
        if k >= 0 and dev[i] > close:
            dev[i] = min(dev[i], _corner_deviation(c, i, knots[i + 1] - knots[i], pts[i], cp[k], pts[i + 1],
                                                   coff[k, 0], coff[k, 1], roots))


#: knots a cut corner seeds on each of its chords, at d, 2d, 4d, ... from the corner (short of the chord's
#: middle): the knot spacing grows geometrically away from the corner, so the spline's ringing is damped
#: near it and the corner's deviation scales with d
CORNER_SEEDS = 4


@njit(cache=True, nogil=True)
def _corner_points(wp, sw, cut, offset):  # pragma: no cover - compiled
    """The knots of a path whose corner k (0 < k < W-1) with cut[k] > 0 is replaced by points on its two
    chords at distance cut[k] from it (plus :data:`CORNER_SEEDS` - 1 further ones on each chord at 2d,
    4d, ... short of the chord's middle). s is the polyline's chord length (sw (W,) at the waypoints),
    so a cut corner's interval is 2 cut[k] long in s. Returns points (K, n), s (K,), offset (K-1,) of
    the chord an interval lies on, corner (K-1,) the corner an interval cuts (k - 1 for waypoint k) or -1."""
    w, n = wp.shape
    cap = w + 2 * CORNER_SEEDS * w + 1
    pts = np.empty((cap, n))
    s = np.empty(cap)
    off = np.empty(cap)
    corner = np.full(cap, -1, dtype=np.int64)
    rs = np.empty(2 * CORNER_SEEDS + 1)
    pts[0, :] = wp[0, :]
    s[0] = 0.0
    g = 1
    for k in range(w - 1):
        length = sw[k + 1] - sw[k]
        m = 0
        if cut[k] > 0.0:
            r = cut[k]
            for _ in range(CORNER_SEEDS):
                if not r < 0.5 * length:
                    break
                rs[m] = r
                m += 1
                r *= 2.0
        top = m
        if cut[k + 1] > 0.0:
            r = cut[k + 1]
            for _ in range(CORNER_SEEDS):
                if not r < 0.5 * length:
                    break
                m += 1
                r *= 2.0
            r = cut[k + 1]
            for e in range(m - 1, top - 1, -1):  # ascending distance from wp[k]
                rs[e] = length - r
                r *= 2.0
        else:
            rs[m] = length
            m += 1
        for e in range(m):
            t = rs[e] / length
            for j in range(n):
                pts[g, j] = wp[k, j] + t * (wp[k + 1, j] - wp[k, j])
            s[g] = sw[k] + rs[e]
            off[g - 1] = offset[k]
            if e == 0 and cut[k] > 0.0:
                corner[g - 1] = k - 1  # corners are numbered from the first interior waypoint
            g += 1
    return pts[:g].copy(), s[:g].copy(), off[:g - 1].copy(), corner[:g - 1].copy()


@njit(cache=True, nogil=True)
def _tight_corners(knots, refined):  # pragma: no cover - compiled
    """(W-2,) whether a chord next to each corner got knots: knots (W,) s at the waypoints, refined (K,)
    the knots of :func:`_refine` on them (every waypoint's s among them)."""
    w = knots.shape[0]
    first = np.empty(w, dtype=np.int64)  # index of each waypoint's s among the refined knots
    g = 0
    for k in range(w):
        while g < refined.shape[0] and refined[g] < knots[k]:
            g += 1
        first[k] = g
    tight = np.zeros(w - 2, dtype=np.bool_)
    for k in range(w - 1):
        if first[k + 1] - first[k] > 1:
            if k > 0:
                tight[k - 1] = True
            if k < w - 2:
                tight[k] = True
    return tight
