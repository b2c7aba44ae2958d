"""TOPP-RA: time-optimal path parameterization by reachability analysis (Pham & Pham 2018).

Reference: H. Pham, Q.-C. Pham, "A New Approach to Time-Optimal Path Parameterization Based on Reachability
Analysis", IEEE Transactions on Robotics 34(3), 2018 (arXiv:1707.07239). Notation as in the paper:
gridpoints ``0 = s_0 < ... < s_{N-1} = L``, state ``x_i = sd(s_i)²``, control ``u_i = sdd`` constant on
stage i = [s_i, s_{i+1}], so ``x_{i+1} = x_i + 2 Δ_i u_i`` (eq. 4, Δ_i = s_{i+1} - s_i).

Every constraint is a linear inequality in (u, x) at a path point (eq. 5): ``a(s) u + b(s) x + c(s) ≤ 0``.
This module works on a "collocation grid" of 2N-1 points: the gridpoints (even indices 2i) and the stage
midpoints (odd indices 2i+1). Within stage i a constraint at s is imposed with ``x(s) = x_i + 2(s − s_i) u_i``
— exactly the x the output sampling will realise there, because the sampled trajectory uses the same
piecewise-constant u (:mod:`robot_dynamics_ros.retiming.sampling`). Instead of imposing it only at s_i
(the "collocation" scheme of the paper, §VI-A) it is imposed at both ends of the stage together with a
bound on its curvature from a third point (the stage midpoint, or a neighbouring gridpoint of the same
knot interval; :func:`_stage_halfplanes`), which keeps the row below its limit on the whole stage up to an
O(Δ³) residual — so a dense check of the output finds no overshoot.

Algorithm (paper §III–IV):
1. Backward pass: K_{N-1} = {x_end}; K_i = {x ≥ 0 | ∃u: stage-i constraints hold and x + 2Δ_i u ∈ K_{i+1}},
   an interval [min, max]. The paper finds each end with a 2-variable LP (eq. 13); here the top needs none:
   a row bounding u from below (α < 0) leaves room for x + 2Δu ≤ max K_{i+1} only up to an x it fixes in
   closed form, and a row bounding it from above only for x + 2Δu ≥ min K_{i+1} (:func:`_pair_top`, O(m)).
   The least of those bounds is the top whenever the stage's rows still leave some u there (one O(m) check,
   :func:`_u_range`); where two rows of the stage cross below it (the maximum velocity curve binds), Newton
   steps from above on the concave width of the u interval reach the crossing (:func:`_exact_top`, usually
   one or two). The bottom is 0 whenever x = 0 admits a control (u = 0 when every γ ≥ 0); only else an
   LP. An empty K_i means the path is infeasible at s_i.
2. Forward pass: starting at x_0 = sd_start² ∈ K_0, take the greedy control u_i = max{u | stage-i
   constraints at x_i, x_i + 2Δ_i u ∈ K_{i+1}} (eq. 16), the upper end of :func:`_u_range`. Theorem 3 of
   the paper: the result is time-optimal for the discretized problem.

Rows arrive roughly normalized (|(G0, G1)| ≈ 1, :func:`~.constraints.build_constraints`), so one absolute
feasibility tolerance fits all of them. The 2-variable LPs left (the bottom of K_i when x = 0 admits no
control, the fallback of :func:`_best_entry`) are solved by our own compiled Seidel-style incremental
solver (:mod:`.stage_lp`). ``test/retiming/test_topp_ra_floor.py`` holds the result to the LP-based solver it
replaced (``test/retiming/topp_ra_reference.py``): same statuses, durations to 1e-9.
"""
from __future__ import annotations

import enum
import threading

import numpy as np
from numba import njit

from robot_dynamics_ros.retiming.stage_lp import (_BIG_U, _BIG_X, _TOL, _least_violating_u, _lp2d_x, _u_range,
                                                   _u_ranges)


class SolveStatus(enum.IntEnum):
    """Return codes of :func:`solve_topp_ra` (never ``None``)."""

    OK = 0
    #: K_i is empty at some gridpoint: no velocity profile satisfies the constraints there
    INFEASIBLE = 1
    #: the requested start state x_0 = sd_start² is not in the controllable set K_0
    START_NOT_CONTROLLABLE = 2
    #: the forward pass could not move (zero speed at two consecutive gridpoints)
    STALLED = 3


#: relative loss of x_{i+1} below its best that :func:`_best_entry` accepts to keep x_i at the top of K_i
_ENTRY_RTOL = 1e-3


@njit(cache=True, inline="always")
def _push(H, m, a, b, g):  # pragma: no cover - compiled
    """Append the half-plane a u + b x ≤ g; returns the new count, or -1 if 0 ≤ g fails for a = b = 0."""
    if a == 0.0 and b == 0.0:
        if g < -_TOL:
            return -1
        return m
    H[m, 0] = a
    H[m, 1] = b
    H[m, 2] = g
    return m + 1


@njit(cache=True, inline="always")
def _box_slack(a, b, g, ulo, uhi, xb):  # pragma: no cover - compiled
    """g − max{a u + b x : ulo ≤ u ≤ uhi, 0 ≤ x ≤ xb} minus a margin (> 0: the half-plane holds on the box)."""
    return g - (max(a * ulo, a * uhi) + max(0.0, b * xb)) - 1e-6 * (1.0 + abs(g))


@njit(cache=True, inline="always")
def _prune_box(i, ds, G, h, klo, khi, vel_rows, xmin, pa, pb, pc):  # pragma: no cover - compiled
    """The box that contains every (u, x) the kept rows of stage i allow, for :func:`_stage_halfplanes`'
    pruning: x ≤ X, the tightest velocity bound at s_i (its row, ``keep_x``, is always kept), and
    klo ≤ x + 2Δu ≤ khi with 0 ≤ x ≤ X, tightened by the two rows (other than velocity rows) that bound u
    most at s_i over 0 ≤ x ≤ X (``keep_lo``, ``keep_hi``: kept whatever); widened a little so that the
    solver's tolerances never make a pruned row matter. Returns (X, ulo, uhi, keep_lo, keep_hi, keep_x)."""
    p0 = 2 * i
    keep_lo = keep_hi = keep_x = -1
    for r in range(1, vel_rows + 1):
        if G[p0, r, 1] > 0.0 and h[p0, r] <= xmin[p0] * G[p0, r, 1] * (1.0 + 1e-12):
            keep_x = r
            break
    xb = xmin[p0] * (1.0 + 1e-3) + 1e-6
    ulo = (klo - xb) / (2.0 * ds)
    uhi = khi / (2.0 * ds)
    for r in range(vel_rows + 1, G.shape[1]):
        al = G[p0, r, 0]
        if abs(al) < 1e-3 or h[pa, r] == np.inf or h[pb, r] == np.inf or h[pc, r] == np.inf:
            continue
        bound = (h[p0, r] - min(0.0, G[p0, r, 1] * xb)) / al
        if al > 0.0:
            if bound < uhi:
                uhi = bound
                keep_hi = r
        elif bound > ulo:
            ulo = bound
            keep_lo = r
    ulo -= 1e-3 * abs(ulo) + 1e-6
    uhi += 1e-3 * abs(uhi) + 1e-6
    return xb, ulo, uhi, keep_lo, keep_hi, keep_x


@njit(cache=True, nogil=True)
def _stage_halfplanes(i, s, G, h, klo, khi, H, scheme, vel_rows, xmin):  # pragma: no cover - compiled
    """Fill H (m, 3) with the half-planes α u + β x ≤ γ of stage i; return m, or -1 if a constant row
    is violated (the stage is infeasible whatever (u, x)).

    Each row F(s) = G0(s) u + G1(s) x(s) − h(s) ≤ 0, with the stage's x(s) = x + 2(s − s_i) u, is linear in
    (u, x) at any point. It is known at three equally spaced points: s_i, the stage midpoint and s_{i+1}
    (``scheme[i] == 0``), or s_{i-1}, s_i, s_{i+1} (``1``) or s_i, s_{i+1}, s_{i+2} (``2``), all in the same
    knot interval. On a half stage the quadratic Q through them exceeds its larger end value by at most
    max(0, −Q'')(Δ/2)²/8; with D the second difference of the three values this is max(0, −D)/8 (scheme 0,
    spacing Δ/2) or max(0, −D)/32 (schemes 1, 2, spacing Δ). So F(s_i), F(s_{i+1}) ≤ 0 and
    Q − D/8 (resp. Q − D/32) ≤ 0 at s_i, the stage midpoint and s_{i+1} (Q there by Lagrange weights for
    schemes 1, 2) keep the row ≤ 0 on the whole stage — exactly for the acceleration rows, which are
    quadratic in s inside a knot interval; up to O(Δ³) for the others.

    Velocity rows (indices 1 .. vel_rows, q'_j² x ≤ V_j²) whose bound V_j²/q'_j² is at least 4× the
    tightest one (``xmin``) at all three points are left out: with x below the tightest bound they are
    far from active. Any other row whose candidate half-planes all hold (with margin) on a box that
    contains every (u, x) the kept rows allow — 0 ≤ x ≤ the tightest velocity bound at s_i (that velocity
    row is always kept), klo ≤ x + 2Δ_i u ≤ khi, and the bounds on u at s_i of the two rows that bound it
    most (kept too) — is left out as well: it cannot change K_i or the greedy control. Velocity rows are
    pruned this way too (their curvature half-planes are most of a stage's rows: 39 → 27 per stage on
    the Panda benchmark path at 1000 gridpoints).
    """
    ds = s[i + 1] - s[i]
    m = 0
    nrow = G.shape[1]
    sc = scheme[i]
    if sc == 0:
        pa, pb, pc = 2 * i, 2 * i + 1, 2 * i + 2
        ta, tb, tc = 0.0, ds, 2.0 * ds
    elif sc == 1:
        pa, pb, pc = 2 * i - 2, 2 * i, 2 * i + 2
        ta, tb, tc = -2.0 * (s[i] - s[i - 1]), 0.0, 2.0 * ds
    else:
        pa, pb, pc = 2 * i, 2 * i + 2, 2 * i + 4
        ta, tb, tc = 0.0, 2.0 * ds, 2.0 * (s[i + 2] - s[i])
    prune = vel_rows > 0 and xmin[2 * i] < np.inf
    xb = ulo = uhi = 0.0
    keep_lo = keep_hi = keep_x = -1
    if prune:
        xb, ulo, uhi, keep_lo, keep_hi, keep_x = _prune_box(i, ds, G, h, klo, khi, vel_rows, xmin, pa, pb, pc)
    sc_stage = sc
    pa_stage, pb_stage, pc_stage, ta_stage, tb_stage, tc_stage = pa, pb, pc, ta, tb, tc
    for r in range(nrow):
        # velocity rows q'_j(s)² x(s) are quintic in s inside a knot interval (not quadratic like the
        # acceleration rows): the quadratic through a neighbouring gridpoint misses their peak inside the
        # stage by up to ~2e-4 (fuzzing, Panda); they use the stage's own midpoint (q' is known there)
        if 1 <= r <= vel_rows:
            sc, pa, pb, pc, ta, tb, tc = 0, 2 * i, 2 * i + 1, 2 * i + 2, 0.0, ds, 2.0 * ds
        else:
            sc, pa, pb, pc, ta, tb, tc = sc_stage, pa_stage, pb_stage, pc_stage, ta_stage, tb_stage, tc_stage
        h0 = h[pa, r]
        h1 = h[pb, r]
        h2 = h[pc, r]
        if h0 == np.inf or h1 == np.inf or h2 == np.inf:
            continue
        b0 = G[pa, r, 1]
        b1 = G[pb, r, 1]
        b2 = G[pc, r, 1]
        # inactive: 4x the tightest velocity cap at all three points (never with a zero cap: all would pass)
        if 1 <= r <= vel_rows and (min(xmin[pa], xmin[pb], xmin[pc]) > 0.0 and h0 >= 4.0 * xmin[pa] * b0
                                   and h1 >= 4.0 * xmin[pb] * b1 and h2 >= 4.0 * xmin[pc] * b2):
            continue
        a0 = G[pa, r, 0] + ta * b0
        a1 = G[pb, r, 0] + tb * b1
        a2 = G[pc, r, 0] + tc * b2
        da = 0.125 * (a0 - 2.0 * a1 + a2)
        db = 0.125 * (b0 - 2.0 * b1 + b2)
        dh = 0.125 * (h0 - 2.0 * h1 + h2)
        curved = da != 0.0 or db != 0.0 or dh != 0.0
        # the candidate half-planes: the stage's two ends (e, f) and, for a curved row, the three points
        # (e, mid, f) lowered by the curvature bound (else the plain midpoint)
        if sc == 0:
            ea, eb, eh, fa, fb, fh = a0, b0, h0, a2, b2, h2
            ma, mb, mh = a1, b1, h1
        else:
            if sc == 1:
                ea, eb, eh, fa, fb, fh = a1, b1, h1, a2, b2, h2
                wa, wb, wc = -0.125, 0.75, 0.375
            else:
                ea, eb, eh, fa, fb, fh = a0, b0, h0, a1, b1, h1
                wa, wb, wc = 0.375, 0.75, -0.125
            # the stage midpoint value Q(1/2) by Lagrange weights; bound on each half: max(0, -D)/32
            ma = wa * a0 + wb * a1 + wc * a2
            mb = wa * b0 + wb * b1 + wc * b2
            mh = wa * h0 + wb * h1 + wc * h2
            da *= 0.25
            db *= 0.25
            dh *= 0.25
        if prune and r != keep_lo and r != keep_hi and r != keep_x:
            # a row that holds with margin on the whole box cannot change the LP: leave it out
            # (max of α u + β x over the box = max(α ulo, α uhi) + max(0, β X))
            if curved:
                cut = (_box_slack(ea, eb, eh, ulo, uhi, xb) > 0.0 and _box_slack(fa, fb, fh, ulo, uhi, xb) > 0.0
                       and _box_slack(ea - da, eb - db, eh - dh, ulo, uhi, xb) > 0.0
                       and _box_slack(ma - da, mb - db, mh - dh, ulo, uhi, xb) > 0.0
                       and _box_slack(fa - da, fb - db, fh - dh, ulo, uhi, xb) > 0.0)
            else:
                cut = (_box_slack(ea, eb, eh, ulo, uhi, xb) > 0.0 and _box_slack(fa, fb, fh, ulo, uhi, xb) > 0.0
                       and (sc != 0 or _box_slack(ma, mb, mh, ulo, uhi, xb) > 0.0))
            if cut:
                continue
        m = _push(H, m, ea, eb, eh)
        if m < 0:
            return -1
        m = _push(H, m, fa, fb, fh)
        if m < 0:
            return -1
        if curved:
            m = _push(H, m, ea - da, eb - db, eh - dh)
            if m < 0:
                return -1
            m = _push(H, m, ma - da, mb - db, mh - dh)
            if m < 0:
                return -1
            m = _push(H, m, fa - da, fb - db, fh - dh)
            if m < 0:
                return -1
        elif sc == 0:
            m = _push(H, m, ma, mb, mh)
            if m < 0:
                return -1
    # x(σ) = x + 2σu is linear: x ≥ 0 at both ends of the stage
    m = _push(H, m, 0.0, -1.0, 0.0)
    m = _push(H, m, -2.0 * ds, -1.0, 0.0)
    # next controllable set: klo <= x + 2 ds u <= khi
    m = _push(H, m, 2.0 * ds, 1.0, khi)
    m = _push(H, m, -2.0 * ds, -1.0, -klo)
    return m


@njit(cache=True, inline="always")
def _next_best(H, m, ds, x):  # pragma: no cover - compiled
    """y(x) = x + 2Δ u_max(x) over the stage's rows; −inf where no u is feasible beyond round-off (at the
    top of K_i the u interval is a single point, and round-off may leave lo a hair above hi)."""
    lo, hi = _u_range(H, m, x)
    if lo > hi + 1e-9 * (1.0 + abs(hi)):
        return -np.inf
    return x + 2.0 * ds * max(hi, lo)


@njit(cache=True, inline="always")
def _y_falls(H, m, ds, xhi):  # pragma: no cover - compiled
    """(whether the rows leave some u at xhi (:func:`_u_range` non-empty), whether y(x) = x + 2Δ u_max(x)
    falls towards xhi — compared at xhi and 1e-6 xhi below it —, y(xhi)), in one pass over the rows: the
    tests that decide whether :func:`_exact_top` and :func:`_best_entry` have anything to do (the usual
    answer is no to both)."""
    lo1, hi1, lo0, hi0 = _u_ranges(H, m, xhi, xhi - 1e-6 * xhi)
    y1 = -np.inf if lo1 > hi1 + 1e-9 * (1.0 + abs(hi1)) else xhi + 2.0 * ds * max(hi1, lo1)
    y0 = -np.inf if lo0 > hi0 + 1e-9 * (1.0 + abs(hi0)) else (xhi - 1e-6 * xhi) + 2.0 * ds * max(hi0, lo0)
    return lo1 <= hi1, y1 < y0, y1


@njit(cache=True, nogil=True)
def _best_entry(H, m, ds, xlo, xhi, y1, Hc, out):  # pragma: no cover - compiled
    """The upper end of K_i that keeps the greedy pass from a forced near-stop.

    From x_i the best next state is y(x_i) = x_i + 2 Δ u_max(x_i), concave in x_i (u_max is a minimum of
    linear functions). Usually it grows up to xhi; but a row that bounds u ever more tightly as x grows (a
    nearly u-free row: a velocity row's curvature half-plane where |q'| grows along the stage) makes it fall
    towards xhi, and a greedy pass entering at xhi would then be forced down to y(xhi) ≈ 0 at s_{i+1} — an
    isolated near-stop that a slightly lower x_i avoids. There, when y(xhi) is more than
    :data:`_ENTRY_RTOL` below the best y over K_i, the upper end becomes the largest x_i whose y(x_i) is
    within that of the best (a gently falling y is left alone: trading speed at s_i for a hair at s_{i+1}
    is no gain); elsewhere xhi is returned unchanged. Every x_i below it stays controllable (K_i is an
    interval of a convex polygon's projection). Called where :func:`_y_falls` finds y falling towards xhi;
    y1 = y(xhi).
    """
    # y is x + 2Δ min_k hi_k(x) over the rows bounding u from above, hi_k(x) = p_k − q_k x with p = γ/α,
    # q = β/α (kept in Hc[:, 0:2]): piecewise linear and concave. Walk left from xhi along it, from
    # breakpoint to breakpoint (where the next row takes over as the least bound), until it stops rising to
    # the left; the segments walked are kept in Hc[:, 2] (x at the left end of the segment on row k)
    two = 2.0 * ds
    x = xhi
    nu = 0
    for j in range(m):
        aj = H[j, 0]
        if aj > 1e-12:
            Hc[nu, 0] = H[j, 2] / aj
            Hc[nu, 1] = H[j, 1] / aj
            Hc[nu, 2] = np.nan
            nu += 1
    x_best = xlo
    for _ in range(nu + 1):
        # the row least just left of x (breakpoints closer than 1e-12 x to it are passed over: they move y
        # by less than its slope times that)
        xl = x - 1e-12 * x
        k = -1
        best = np.inf
        for j in range(nu):
            v = Hc[j, 0] - Hc[j, 1] * xl
            if v < best:
                best = v
                k = j
        pk = Hc[k, 0]
        qk = Hc[k, 1]
        if 1.0 - two * qk >= 0.0:   # y rises (or stays level) along row k going right: its best is here
            x_best = x
            break
        # the next breakpoint going left: the largest crossing below xl of a row with a smaller q
        # (c = (p_j − p_k) / (q_j − q_k)); none above xlo: y's best over K_i is at xlo
        xc = xlo
        for j in range(nu):
            qj = Hc[j, 1]
            if qj < qk:
                c = (Hc[j, 0] - pk) / (qj - qk)
                if xc < c < xl:
                    xc = c
        Hc[k, 2] = xc
        x = xc
        if x <= xlo:
            break
    else:
        return _best_entry_lp(H, m, ds, xlo, xhi, y1, Hc, out)
    hi = np.inf
    for j in range(nu):
        hi = min(hi, Hc[j, 0] - Hc[j, 1] * x_best)
    y_best = x_best + two * hi
    if y1 >= y_best * (1.0 - _ENTRY_RTOL):
        return xhi
    # the largest x whose y reaches y_best (1 − rtol): on the segment walked where y crosses it (y falls
    # along the walk, from its best towards xhi); checked, and the two LPs of the polygon decide where the
    # walk is not to be trusted (round-off between nearly parallel rows)
    target = y_best * (1.0 - _ENTRY_RTOL)
    x_entry = -1.0
    left_best = -np.inf
    for j in range(nu):
        left = Hc[j, 2]
        if left == left and left > left_best:   # a segment walked, nearer xhi than the one found so far
            slope = 1.0 - two * Hc[j, 1]
            if slope < 0.0 and two * Hc[j, 0] + slope * left >= target:
                left_best = left
                x_entry = (target - two * Hc[j, 0]) / slope
    if xlo <= x_entry <= xhi and _next_best(H, m, ds, x_entry) >= target * (1.0 - 1e-9):
        return x_entry
    return _best_entry_lp(H, m, ds, xlo, xhi, y1, Hc, out)


@njit(cache=True, nogil=True)
def _best_entry_lp(H, m, ds, xlo, xhi, y1, Hc, out):  # pragma: no cover - compiled
    """:func:`_best_entry` by two 2-variable LPs over the stage's polygon: the best y, then the largest x
    reaching it within :data:`_ENTRY_RTOL` (the fallback of the walk along y's breakpoints)."""
    # best y: maximize y = x + 2Δu over the polygon, in the coordinates (x, y): u = (y − x) / (2Δ)
    inv = 1.0 / (2.0 * ds)
    for k in range(m):
        a, b, g = H[k, 0], H[k, 1], H[k, 2]
        c0, c1 = b - a * inv, a * inv
        nrm = max(np.sqrt(c0 * c0 + c1 * c1), 1e-300)
        Hc[k, 0], Hc[k, 1], Hc[k, 2] = c0 / nrm, c1 / nrm, g / nrm
    Hc[m, 0], Hc[m, 1], Hc[m, 2] = -1.0, 0.0, -xlo   # x ≥ xlo (the "u" slot holds x here)
    if not _lp2d_x(Hc, m + 1, 1.0, -1, -1, out):
        return xhi
    y_best = out[1]
    if y1 >= y_best * (1.0 - _ENTRY_RTOL):
        return xhi
    # the largest x reaching y_best: maximize x over the polygon with x + 2Δu ≥ y_best (1 − rtol)
    for k in range(m):
        Hc[k, 0], Hc[k, 1], Hc[k, 2] = H[k, 0], H[k, 1], H[k, 2]
    nrm = np.sqrt(4.0 * ds * ds + 1.0)
    Hc[m, 0], Hc[m, 1], Hc[m, 2] = -2.0 * ds / nrm, -1.0 / nrm, -y_best * (1.0 - _ENTRY_RTOL) / nrm
    if not _lp2d_x(Hc, m + 1, 1.0, -1, -1, out):
        return xhi
    return min(max(out[1], xlo), xhi)


@njit(cache=True, nogil=True)
def _top_step(H, m, b):  # pragma: no cover - compiled
    """Newton step towards the largest x at which the stage's rows leave some u, from an x = b where they
    leave none: the x where the two rows that bound u at b (the largest lower and the smallest upper bound)
    meet, capped by the u-free rows (|α| ≤ 1e-12, β x ≤ γ + tol, as :func:`_u_range` judges them) that b
    violates. The width of the u interval, hi(x) − lo(x), is concave in x (a minimum minus a maximum of
    linear functions), so its linearization at b lies above it and the step lands at or above the top:
    repeated steps decrease to the top, exactly after finitely many in exact arithmetic. Returns b when no
    step is possible."""
    lo = -_BIG_U
    hi = _BIG_U
    bl = bh = 0.0
    gl = -_BIG_U
    gh = _BIG_U
    cap = b
    for k in range(m):
        a = H[k, 0]
        r = H[k, 2] - H[k, 1] * b
        if abs(a) <= 1e-12:
            if r < -_TOL and H[k, 1] > 0.0:
                cap = min(cap, (H[k, 2] + _TOL) / H[k, 1])
            continue
        t = r / a
        if a > 0:
            if t < hi:
                hi = t
                bh = H[k, 1] / a
                gh = H[k, 2] / a
        elif t > lo:
            lo = t
            bl = H[k, 1] / a
            gl = H[k, 2] / a
    if lo > hi and bh - bl > 0.0:
        cap = min(cap, (gh - gl) / (bh - bl))
    return cap


@njit(cache=True, nogil=True)
def _exact_top(H, m, xlo, xhi):  # pragma: no cover - compiled
    """The largest x in [xlo, xhi] at which the stage's rows leave some u (:func:`_u_range` non-empty):
    xhi itself when they do, else by Newton steps from above (:func:`_top_step`, usually one or two) to
    within round-off of the top, then the nearest x below it that the rows accept (bisection only if that
    fails, ≤ 60 steps of O(m)).

    The 2-variable LP's optimum satisfies its rows within the absolute :data:`_TOL`, not exactly. Where x
    and the stage are small (a corner at a tight path tolerance with small acceleration limits: x ~ 1e-5,
    Δ ~ 1e-4) that slack in x is a large part of the interval of u, which is ~ x / Δ wide: the greedy pass
    entering at the LP's x finds no u and takes the least violating one, and the output then exceeds an
    acceleration limit by up to ~1e-3. With the top of K_i where a u exists, every control the forward
    pass takes satisfies the rows as computed."""
    lo, hi = _u_range(H, m, xhi)
    if lo <= hi:
        return xhi
    lo, hi = _u_range(H, m, xlo)
    if lo > hi:
        return xhi  # (round-off all over K_i: leave it to the forward pass's least-violating control)
    a = xlo
    b = xhi
    for _ in range(16):
        x = _top_step(H, m, b)
        if not (a < x < b):
            break
        lo, hi = _u_range(H, m, x)
        if lo <= hi:
            return x
        b = x
    # b is within round-off of the top but rejected: the nearest accepted x below it
    step = 4.0 * np.finfo(np.float64).eps * abs(b) + 1e-300
    for _ in range(24):
        x = b - step
        if not (a < x < b):
            break
        lo, hi = _u_range(H, m, x)
        if lo <= hi:
            return x
        step *= 4.0
    for _ in range(60):
        mid = 0.5 * (a + b)
        if not (a < mid < b):
            break
        lo, hi = _u_range(H, m, mid)
        if lo <= hi:
            a = mid
        else:
            b = mid
    return a


@njit(cache=True, nogil=True)
def _pair_top(H, m, ds, klo, khi):  # pragma: no cover - compiled
    """The least upper bound on x that a row of the stage and the next controllable set [klo, khi] give
    together: a row α u + β x ≤ γ with α < 0 (u ≥ (γ − βx)/α) and x + 2Δu ≤ khi leave some u only if
    (2Δβ − α) x ≤ 2Δγ − α khi; with α > 0 (u ≤ (γ − βx)/α) and x + 2Δu ≥ klo, only if
    (2Δβ − α) x ≤ 2Δγ − α klo; a u-free row (|α| ≤ 1e-12, as :func:`_u_range` judges it) with β > 0 gives
    x ≤ γ/β (the row's own cap; :func:`_u_range` accepts it to within round-off). Each bound is necessary;
    O(m) in all, at most the LP box's :data:`_BIG_X`. (Pairs of two rows of the stage, the maximum velocity
    curve, are left to :func:`_exact_top`.)"""
    top = _BIG_X
    two = 2.0 * ds
    for k in range(m):
        a = H[k, 0]
        b = H[k, 1]
        g = H[k, 2]
        if abs(a) <= 1e-12:
            if b > 0.0:
                top = min(top, g / b)
            continue
        c = two * b - a
        if c > 0.0:
            top = min(top, (two * g - a * (khi if a < 0.0 else klo)) / c)
    return max(top, 0.0)


@njit(cache=True, nogil=True)
def _solve(s, G, h, scheme, vel_rows, xmin, x_start, x_end, K, x, u, work, store):  # pragma: no cover - compiled
    n_grid = s.shape[0]
    nrow = G.shape[1]
    mmax = 5 * nrow + 8
    # the half-planes of every stage are kept for the forward pass, packed one stage after the other in the
    # reused buffer `work` (stage i's m_i rows from offset off[i]: a few rows per stage, not the mmax it may
    # need, so the passes stream through little memory)
    ms = np.zeros(n_grid - 1, dtype=np.int64)
    off = np.zeros(n_grid - 1, dtype=np.int64)
    top = 0
    out = np.empty(4)
    Hc = np.empty((mmax + 1, 3))
    # --- backward pass: controllable sets
    K[n_grid - 1, 0] = x_end
    K[n_grid - 1, 1] = x_end
    for i in range(n_grid - 2, -1, -1):
        H = work[top:top + mmax]
        m = _stage_halfplanes(i, s, G, h, K[i + 1, 0], K[i + 1, 1], H, scheme, vel_rows, xmin)
        if m < 0:
            return 1, i
        ms[i] = m
        off[i] = top
        if store:
            top += m
        # min x: 0 whenever x = 0 admits a control (the usual case: u = 0 works when every γ ≥ 0)
        origin = True
        for k in range(m):
            if H[k, 2] < -_TOL:
                origin = False
                break
        if origin:
            xlo = 0.0
        else:
            lo, hi = _u_range(H, m, 0.0)
            if lo <= hi + _TOL:
                xlo = 0.0
            else:
                if not _lp2d_x(H, m, -1.0, -1, -1, out):
                    return 1, i
                xlo = max(out[1], 0.0)
        # max x without an LP: every pair of a row with the next controllable set bounds x (a row that bounds
        # u from below against x + 2Δu ≤ khi, one that bounds it from above against x + 2Δu ≥ klo); the
        # least of those bounds is the top of K_i when the rows still leave some u there, else two rows of
        # the stage cross below it and Newton steps from above find where (:func:`_exact_top`)
        ds = s[i + 1] - s[i]
        x_top = _pair_top(H, m, ds, K[i + 1, 0], K[i + 1, 1])
        # one pass over the rows: whether they leave a u at that top (usually: it is the top of K_i) and
        # whether y falls towards it
        feasible, falls, y1 = _y_falls(H, m, ds, x_top)
        xhi = x_top
        if not feasible:
            xhi = _exact_top(H, m, xlo, x_top)
            if xhi > xlo:
                _, falls, y1 = _y_falls(H, m, ds, xhi)
        # (y never passes max K_{i+1}, one of the stage's half-planes: when y(xhi) is within the entry rule's
        # tolerance of it, it is within that of y's best, and the rule keeps xhi)
        if xhi > xlo:
            if falls and y1 < K[i + 1, 1] * (1.0 - _ENTRY_RTOL):
                entry = _best_entry(H, m, ds, xlo, xhi, y1, Hc, out)
                if entry < xhi:
                    xhi = _exact_top(H, m, xlo, entry)
        if xhi < xlo:
            xhi = xlo
        K[i, 0] = xlo
        K[i, 1] = xhi
    # --- forward pass: greedy
    if x_start > K[0, 1] * (1.0 + 1e-9) + _TOL or x_start < K[0, 0] * (1.0 - 1e-9) - _TOL:
        return 2, 0
    x[0] = min(max(x_start, K[0, 0]), K[0, 1])
    for i in range(n_grid - 1):
        if store:
            H = work[off[i]:off[i] + mmax]
            m = ms[i]
        else:
            H = work[:mmax]
            m = _stage_halfplanes(i, s, G, h, K[i + 1, 0], K[i + 1, 1], H, scheme, vel_rows, xmin)
        lo, hi = _u_range(H, m, x[i])
        ds = s[i + 1] - s[i]
        if lo > hi:
            # only round-off can bring us here: x_i ∈ K_i, but at a vertex of the stage polygon where a
            # nearly u-free row (|α| ~ 1e-8, e.g. a velocity row's curvature half-plane) meets another
            # one, a round-off error δ in x_i moves that row's bound on u by δ β/α — far more than the
            # interval is wide. Take the u that violates the rows least in their own (normalized) units
            # and accept it when that is round-off
            hi, viol = _least_violating_u(H, m, x[i], hi, lo)
            if viol > 1e-7:
                return 1, i
        xn = x[i] + 2.0 * ds * hi
        if xn > K[i + 1, 1]:
            xn = K[i + 1, 1]
        if xn < K[i + 1, 0]:
            xn = K[i + 1, 0]
        if xn < 0.0:
            xn = 0.0
        x[i + 1] = xn
        u[i] = (xn - x[i]) / (2.0 * ds)
        if xn <= 0.0 and x[i] <= 0.0:
            return 3, i
    return 0, -1


#: keep every stage's half-planes (for the forward pass) up to this many doubles (~64 MB)
_STORE_LIMIT = 8_000_000
_WORK = np.empty((0, 3))
_WORK_LOCK = threading.Lock()


def solve_topp_ra(s: np.ndarray, G: np.ndarray, h: np.ndarray, x_start: float = 0.0, x_end: float = 0.0,
                  scheme: np.ndarray | None = None, vel_rows: int = 0, xmin: np.ndarray | None = None):
    """Run the backward and forward passes of TOPP-RA.

    Args:
        s: (N,) strictly increasing gridpoints (path parameter, e.g. rad of chord length).
        G: (2N-1, R, 2) constraint rows on the collocation grid (gridpoints at even indices, stage midpoints
           at odd ones): ``G[p, r, 0] u + G[p, r, 1] x(s_p) ≤ h[p, r]`` (see :mod:`.constraints`; the
           velocity limit is the row (0, 1) ≤ xmax).
        h: (2N-1, R) right-hand sides; +inf disables a row.
        x_start, x_end: sd² at the first and last gridpoint ((rad/s)² of chord length).
        scheme: (N-1,) per-stage stencil from :func:`~.constraints.plan_and_schemes` (default: midpoints everywhere; the
            rows at the midpoints of stages with another stencil are not read).
        vel_rows, xmin: rows 1 .. vel_rows are velocity rows and xmin (2N-1,) the tightest velocity bound
            on x at each point (:func:`~.constraints.build_constraints`); rows far from it are skipped.
    Returns:
        (status: SolveStatus, index: stage where it failed or -1, x (N,), u (N-1,), K (N, 2)).
    Raises:
        ValueError: fewer than 2 gridpoints or inconsistent array shapes.
    """
    s = np.ascontiguousarray(s, dtype=float)
    n_grid = s.shape[0]
    if n_grid < 2:
        raise ValueError(f"gridpoints: need at least 2, got {n_grid}")
    if G.shape[0] != 2 * n_grid - 1 or h.shape != G.shape[:2]:
        raise ValueError(f"constraint arrays: expected 2N-1 = {2 * n_grid - 1} collocation points, "
                         f"got G {G.shape}, h {h.shape}")
    if scheme is None:
        scheme = np.zeros(n_grid - 1, dtype=np.int8)
    scheme = np.ascontiguousarray(scheme, dtype=np.int8)
    if scheme.shape != (n_grid - 1,):
        raise ValueError(f"scheme: expected shape ({n_grid - 1},), got {scheme.shape}")
    if xmin is None or vel_rows <= 0:
        vel_rows, xmin = 0, np.zeros(2 * n_grid - 1)
    K = np.zeros((n_grid, 2))
    x = np.zeros(n_grid)
    u = np.zeros(n_grid - 1)
    per_stage = 5 * G.shape[1] + 8
    store = 3 * (n_grid - 1) * per_stage <= _STORE_LIMIT
    need = (n_grid - 1 if store else 1) * per_stage
    with _WORK_LOCK:  # one reused buffer: a fresh multi-MB array per call costs page faults
        global _WORK
        if _WORK.shape[0] < need:
            _WORK = np.empty((need, 3))
        code, idx = _solve(s, G, h, scheme, int(vel_rows), xmin, float(x_start), float(x_end), K, x, u,
                           _WORK, store)
    return SolveStatus(code), int(idx), x, u, K


@njit(cache=True, nogil=True)
def _stage_times(s, x, t):  # pragma: no cover - compiled
    t[0] = 0.0
    for i in range(s.shape[0] - 1):
        den = np.sqrt(max(x[i], 0.0)) + np.sqrt(max(x[i + 1], 0.0))
        t[i + 1] = t[i] + (2.0 * (s[i + 1] - s[i]) / den if den > 0.0 else np.inf)


def stage_times(s: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Time at each gridpoint, t (N,), t[0] = 0: Δt_i = 2Δ_i / (sd_i + sd_{i+1}) (exact for constant u;
    inf after a stage where both speeds are 0)."""
    t = np.empty(s.shape[0])
    _stage_times(np.ascontiguousarray(s, dtype=float), np.ascontiguousarray(x, dtype=float), t)
    return t
