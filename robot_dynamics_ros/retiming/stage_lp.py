"""The small LPs of one TOPP-RA stage (:mod:`.topp_ra`): the 2-variable LP over the stage's half-planes
``H[k,0] u + H[k,1] x ≤ H[k,2]`` (maximize or minimize x) and the interval of u the half-planes leave at a given x.

The 2-variable LPs are solved by our own compiled Seidel-style incremental solver (R. Seidel, "Small-dimensional
linear programming and convex hulls made easy", Discrete Comput. Geom. 6, 1991): add the half-planes one by one; if
the current optimum violates a new one the new optimum lies on its boundary line, found by a 1-D LP over the
half-planes added before. Rows arrive roughly normalized (|(α, β)| ≲ 1), so one absolute feasibility tolerance
:data:`_TOL` fits all of them.
"""
from __future__ import annotations

import numpy as np
from numba import njit

_BIG_U = 1e9  # bounding box of the LPs in u = sdd
_BIG_X = 1e9  # and in x = sd²
_TOL = 1e-9   # feasibility tolerance of the (roughly normalized) half-planes


@njit(cache=True, inline="always")
def _visit_row(c, nfirst, first, second, m):  # pragma: no cover - compiled
    """The row visited c-th by the 2-variable LP: ``second``, then ``first`` (the ``nfirst`` of them that
    are rows), then 0 .. m-1 without those two; -1 for a position that repeats one of them (skip it)."""
    if c < nfirst:
        if nfirst == 2:
            return second if c == 0 else first
        return second if 0 <= second < m else first
    k = c - nfirst
    if k == first or k == second:
        return -1
    return k


@njit(cache=True, inline="always")
def _clip_to_range(p0, d, lo, hi, tlo, thi):  # pragma: no cover - compiled
    """(tlo, thi) cut to the t with lo ≤ p0 + t d ≤ hi (d ≠ 0): one coordinate of the LP's bounding box."""
    t1 = (hi - p0) / d
    t2 = (lo - p0) / d
    if d > 0:
        return max(tlo, t2), min(thi, t1)
    return max(tlo, t1), min(thi, t2)


@njit(cache=True, nogil=True)
def _least_violating_t(H, m, c, nfirst, first, second, p0u, p0x, du, dx, ta, tb):  # pragma: no cover - compiled
    """(t, v): the t in [ta, tb] minimizing v(t) = max(0, max_k H[k,0] u(t) + H[k,1] x(t) − H[k,2]) over
    the rows (of the m in H) visited before position c of :func:`_lp2d_x`, with (u, x)(t) = (p0u, p0x) +
    t (du, dx); bisection on the subgradient of this convex piecewise-linear function (≤ 200 steps of O(c))."""
    lo = ta
    hi = tb
    best_t = 0.5 * (ta + tb)
    best_v = np.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        u = p0u + mid * du
        x = p0x + mid * dx
        v = 0.0
        slope = 0.0
        for c2 in range(c):
            j = _visit_row(c2, nfirst, first, second, m)
            if j < 0:
                continue
            w = H[j, 0] * u - (H[j, 2] - H[j, 1] * x)   # (the order :func:`_least_violating_u` is tested in)
            if w > v:
                v = w
                slope = H[j, 0] * du + H[j, 1] * dx
        if v < best_v:
            best_v = v
            best_t = mid
        if v <= 0.0 or not (lo < mid < hi):
            break
        if slope > 0.0:
            hi = mid
        else:
            lo = mid
    return best_t, best_v


@njit(cache=True, nogil=True)
def _lp2d_x(H, m, direction, first, second, out):  # pragma: no cover - compiled
    """Maximize direction·x (direction = ±1) over {(u, x) : H[k,0] u + H[k,1] x ≤ H[k,2], k < m} ∩ box.

    Seidel's incremental algorithm; half-planes ``first`` and ``second`` (if ≥ 0) are added first (warm
    start). Writes (u, x) into out[0:2] and the two half-planes that last moved the optimum into out[2:4].
    Returns True when feasible.
    """
    u = 0.0
    x = _BIG_X if direction > 0 else 0.0
    act1 = -1
    act2 = -1
    nfirst = 0
    if 0 <= second < m:
        nfirst = 1
    if 0 <= first < m and first != second:
        nfirst += 1
    for c in range(m + nfirst):
        # order: second, first (so that `first` ends up as the newest), then 0 .. m-1 skipping those
        k = _visit_row(c, nfirst, first, second, m)
        if k < 0:
            continue
        a = H[k, 0]
        b = H[k, 1]
        g = H[k, 2]
        if a * u + b * x <= g + _TOL:
            continue
        # optimum moves onto the line a u + b x = g: p(t) = p0 + t d, d = (-b, a)
        nn = a * a + b * b
        p0u = g * a / nn
        p0x = g * b / nn
        du = -b
        dx = a
        tlo = -np.inf
        thi = np.inf
        # box: -BIG_U <= u <= BIG_U, 0 <= x <= BIG_X
        if du != 0.0:
            tlo, thi = _clip_to_range(p0u, du, -_BIG_U, _BIG_U, tlo, thi)
        if dx != 0.0:
            tlo, thi = _clip_to_range(p0x, dx, 0.0, _BIG_X, tlo, thi)
        elif p0x < -_TOL or p0x > _BIG_X + _TOL:
            return False
        feasible = True
        for c2 in range(c):
            j = _visit_row(c2, nfirst, first, second, m)
            if j < 0:
                continue
            aj = H[j, 0]
            bj = H[j, 1]
            den = aj * du + bj * dx
            num = H[j, 2] - (aj * p0u + bj * p0x)
            if abs(den) < 1e-12 * (abs(aj) + abs(bj)) * (abs(du) + abs(dx)):
                if num < -_TOL:
                    feasible = False
                    break
                continue
            if den > 0:  # (t = num / den < thi ⇔ num < thi den: divide only when the interval shrinks)
                if num < thi * den:
                    thi = num / den
            elif num < tlo * den:
                tlo = num / den
        dn = np.sqrt(nn)
        if not feasible:
            return False
        t_mid = 0.5 * (tlo + thi)
        # relative tolerance: far along a line (|t| ~ box size) round-off in t grows with |t|
        if (tlo - thi) * dn > _TOL * (1.0 + min(abs(tlo), abs(thi)) * dn * 1e-6):
            # an empty interval on the line, but measured along the line: a row nearly parallel to it
            # (a velocity row's end half-plane beside the next controllable set's bound, |den| ~ 1e-11)
            # cuts far from where it is violated by more than _TOL. The point the previous rows were
            # accepted at (within _TOL) may then have no exact counterpart on the line; judge the
            # line by the rows' own violation, as every other check here does
            t_mid, viol = _least_violating_t(H, m, c, nfirst, first, second, p0u, p0x, du, dx, thi, tlo)
            if viol > _TOL:
                return False
        slope = direction * dx / dn
        if tlo > thi:
            t = t_mid
        elif slope > 1e-10:
            t = thi
        elif slope < -1e-10:
            t = tlo
        else:
            # a (nearly) level line: every point is (nearly) optimal; take the one nearest the origin
            # rather than a far corner of the box, where round-off would dominate
            t = min(max(0.0, tlo), thi)
        u = p0u + t * du
        x = p0x + t * dx
        act2 = act1
        act1 = k
    out[0] = u
    out[1] = x
    out[2] = act1
    out[3] = act2
    return True


@njit(cache=True, inline="always")
def _u_ranges(H, m, x1, x0):  # pragma: no cover - compiled
    """The intervals (lo, hi) of u with H[k,0] u ≤ H[k,2] − H[k,1] x for all k < m at x = x1 and at x = x0, in one
    pass over the rows (lo > hi: empty): (lo1, hi1, lo0, hi0)."""
    lo1 = lo0 = -_BIG_U
    hi1 = hi0 = _BIG_U
    free1 = free0 = True
    for k in range(m):
        a = H[k, 0]
        r1 = H[k, 2] - H[k, 1] * x1
        r0 = H[k, 2] - H[k, 1] * x0
        if abs(a) <= 1e-12:  # (rows are scaled to norm ≤ 1: a round-off a is a row without u)
            free1 = free1 and not r1 < -_TOL
            free0 = free0 and not r0 < -_TOL
            continue
        # (r / a < hi  ⇔  r < hi a for a > 0; the division only when the bound moves)
        if a > 0:
            if r1 < hi1 * a:
                hi1 = r1 / a
            if r0 < hi0 * a:
                hi0 = r0 / a
        else:
            if r1 < lo1 * a:
                lo1 = r1 / a
            if r0 < lo0 * a:
                lo0 = r0 / a
    if not free1:
        lo1, hi1 = np.inf, -np.inf
    if not free0:
        lo0, hi0 = np.inf, -np.inf
    return lo1, hi1, lo0, hi0


@njit(cache=True, inline="always")
def _u_range(H, m, x):  # pragma: no cover - compiled
    """Interval (lo, hi) of u with H[k,0] u ≤ H[k,2] − H[k,1] x for all k < m (lo > hi: empty)."""
    lo, hi, _, _ = _u_ranges(H, m, x, x)
    return lo, hi


@njit(cache=True, nogil=True)
def _least_violating_u(H, m, x, ua, ub):  # pragma: no cover - compiled
    """(u, v): the u in [ua, ub] minimizing v(u) = max(0, max_k H[k,0] u − (H[k,2] − H[k,1] x)), by
    bisection on the subgradient of this convex piecewise-linear function (≤ 200 steps of O(m)).

    Used when round-off empties the interval of :func:`_u_range` (then ua = its hi < ub = its lo): the
    rows bounding u from above (α > 0) are violated right of their bound and those bounding it from below
    (α < 0) left of theirs, so the minimum lies in [ua, ub]. Weighted by α, a nearly u-free row costs
    almost nothing when u moves past its bound, unlike the well-conditioned row it meets. It is
    :func:`_least_violating_t` on the line (u, x) = (0, x) + t (1, 0) over every row (the same arithmetic:
    u = t and x are exact there).
    """
    return _least_violating_t(H, m, m, 0, -1, -1, 0.0, x, 1.0, 0.0, ua, ub)
