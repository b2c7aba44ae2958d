"""Joint velocity, acceleration and torque limits as linear inequalities in (u = sdd, x = sd²).

Along a path q(s) with q' = dq/ds, q'' = d²q/ds² (Pham & Pham 2018, §II; Bobrow et al. 1985):

    qd  = q'(s) sd
    qdd = q'(s) sdd + q''(s) sd²
    tau = M(q) qdd + C(q, qd) qd + g(q) = a(s) u + b(s) x + c(s)                      (1)
    a(s) = M(q) q',   b(s) = M(q) q'' + C(q, q') q',   c(s) = g(q)

(C(q, qd) qd is quadratic in qd, so C(q, q' sd) q' sd = C(q, q') q' x). With RNEA(q, qd, qdd) =
M qdd + C(q, qd) qd + g (Featherstone 2008, §5.3) the coefficients come from three batched inverse-dynamics
calls: c = RNEA(q, 0, 0), a = RNEA(q, 0, q') − c, b = RNEA(q, q', q'') − c, stacked into one batched call
(:func:`torque_coefficients`; the in-package Newton–Euler engine's ``path_torque_terms`` computes the three in
one pass per point instead).

Limits become rows ``G[p, r, 0] u + G[p, r, 1] x ≤ h[p, r]`` at every collocation point p:
    acceleration:  ±(q'_j u + q''_j x) ≤ A_j
    torque:        ±(a_j u + b_j x + c_j + friction_j) ≤ T_j
and the velocity limit |q'_j| sd ≤ V_j as q'_j² x ≤ V_j² (a "first-order" constraint in the paper's
words; one row per joint rather than x ≤ min_j V_j² / q'_j², which is not smooth in s).

Friction (optional, joint ``<dynamics damping friction>`` of the URDF): Coulomb F_j sign(qd_j) =
F_j sign(q'_j) (sd > 0) moves c (both bounds tightened by F_j where q'_j changes sign); viscous D_j qd_j = D_j q'_j sqrt(x) is not
linear in x and is bounded conservatively around a reference profile x_ref: sqrt(x) ≤ (x + x0)/(2 sqrt(x0))
(tangent of a concave function, valid for all x ≥ 0) where it raises the torque, and
sqrt(x) ≥ x / sqrt(xm) for x ≤ xm (chord; x ≤ xm becomes a row) where it lowers it. With identified friction
whose Coulomb law is F_j tanh(qd_j / v_s) (``RobotModel.coulomb_law``) the rows keep F_j sign(q'_j): the
smooth term has the same sign and at most that magnitude, and is within 0.5 % of it once |qd_j| > 3 v_s
(v_s is of the order of 0.01 rad/s), so only the first and last few milliseconds of a rest-to-rest motion
see the difference.
"""
from __future__ import annotations

import numpy as np
from numba import njit



def torque_coefficients(dynamics, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray):
    """a(s), b(s), c(s) of eq. (1) at P path points at once: the engine's ``path_torque_terms`` where it has
    one (one compiled pass per point), else one stacked batched RNEA call (:func:`_stacked_torques`).

    Args:
        dynamics: an engine with a batched ``rnea(q, qd, qdd)`` taking (N, n) arrays (N·m out), e.g.
            :class:`robot_dynamics_ros.dynamics.newton_euler.NewtonEulerDynamics`.
        q, dq, ddq: (P, n) path q(s), q'(s), q''(s) (rad, rad per unit s, rad per unit s²).
    Returns:
        a, b, c: (P, n) each (N·m per unit sdd, N·m per unit sd², N·m).
    """
    p = q.shape[0]
    tau, relative = _stacked_torques(dynamics, q, dq, ddq, np.arange(p))
    c, a, b = tau[:p], tau[p:2 * p], tau[2 * p:]
    return (a - c, b - c, c) if relative else (a, b, c)


@njit(cache=True, nogil=True)
def _lagrange4(tau, nodes, j0, w):  # pragma: no cover - compiled
    for a in range(4):
        wa = 1.0
        for b in range(4):
            if b != a:
                wa *= (tau - nodes[j0 + b]) / (nodes[j0 + a] - nodes[j0 + b])
        w[a] = wa


@njit(cache=True, nogil=True)
def _dynamics_plan(s, knot_index, spacing, is_node, mids, t_idx, t_row, t_w, a_row, a_w):  # pragma: no cover
    """Fill the evaluation plan (see :func:`plan_and_schemes`); returns (n_nodes, n_mids, n_targets)."""
    n_grid = s.shape[0]
    n_int = knot_index.shape[0] - 1
    n_mid = 0
    for g in range(n_grid):
        is_node[g] = False
    # pass 1: nodes (every gridpoint of short or coarse intervals; ~ one per `spacing` otherwise)
    for k in range(n_int):
        ga = knot_index[k]
        gb = knot_index[k + 1]
        length = gb - ga
        if length == 1:  # a one-stage interval: its midpoint bounds the stage (scheme 0)
            mids[n_mid] = ga
            n_mid += 1
        ds = s[ga + 1] - s[ga]
        step = 1 if spacing <= 0.0 else max(1, int(np.floor(spacing / ds)))
        m = max(4, (length + step - 1) // step)
        if m >= length:
            for g in range(ga, gb + 1):
                is_node[g] = True
        else:
            for j in range(m + 1):
                is_node[ga + int(np.round(j * length / m))] = True
    rank = np.empty(n_grid, dtype=np.int64)
    n_nodes = 0
    for g in range(n_grid):
        if is_node[g]:
            rank[g] = n_nodes
            n_nodes += 1
    # pass 2: every other collocation point (midpoints, non-node gridpoints) is a target, interpolated
    # from 4 nodes of its interval, with a second (shifted) stencil for the error estimate
    n_t = 0
    nodes = np.empty(n_grid, dtype=np.int64)
    w = np.empty(4)
    for k in range(n_int):
        ga = knot_index[k]
        gb = knot_index[k + 1]
        cnt = 0
        for g in range(ga, gb + 1):
            if is_node[g]:
                nodes[cnt] = g
                cnt += 1
        j = 0
        for half in range(2 * ga + 2, 2 * gb, 2):  # gridpoints strictly inside the interval
            if is_node[half // 2]:
                continue
            t_idx[n_t] = half
            if spacing <= 0.0 or cnt < 5:  # no interpolation (or no error estimate): evaluate exactly
                t_row[n_t, 0] = -1
                n_t += 1
                continue
            tau = 0.5 * half
            while j < cnt - 2 and nodes[j + 1] <= tau:
                j += 1
            j0 = min(max(j - 1, 0), cnt - 4)
            _lagrange4(tau, nodes, j0, w)
            for a in range(4):
                t_w[n_t, a] = w[a]
                t_row[n_t, a] = rank[nodes[j0 + a]]
            j1 = j0 + 1 if j0 + 4 < cnt else j0 - 1
            _lagrange4(tau, nodes, j1, w)
            for a in range(4):
                a_w[n_t, a] = w[a]
                a_row[n_t, a] = rank[nodes[j1 + a]]
            n_t += 1
    return n_nodes, n_mid, n_t


@njit(cache=True, nogil=True)
def _plan_and_schemes(s, knot_index, spacing):  # pragma: no cover - compiled
    """The body of :func:`plan_and_schemes`."""
    n_grid = s.shape[0]
    is_node = np.empty(n_grid, dtype=np.bool_)
    mids = np.empty(n_grid, dtype=np.int64)
    t_idx = np.empty(n_grid, dtype=np.int64)
    t_row = np.empty((n_grid, 4), dtype=np.int64)
    t_w = np.empty((n_grid, 4))
    a_row = np.empty((n_grid, 4), dtype=np.int64)
    a_w = np.empty((n_grid, 4))
    n_nodes, n_mid, n_t = _dynamics_plan(s, knot_index, spacing, is_node, mids, t_idx, t_row, t_w, a_row, a_w)
    nodes = np.empty(n_nodes + n_mid, dtype=np.int64)
    e = 0
    for g in range(n_grid):
        if is_node[g]:
            nodes[e] = 2 * g
            e += 1
    for k in range(n_mid):
        nodes[e + k] = 2 * mids[k] + 1
    scheme = np.empty(n_grid - 1, dtype=np.int8)
    for k in range(knot_index.shape[0] - 1):
        ga = knot_index[k]
        gb = knot_index[k + 1]
        for i in range(ga, gb):
            scheme[i] = 0 if gb - ga == 1 else (2 if i == ga else 1)
    return nodes, t_idx[:n_t], t_row[:n_t], t_w[:n_t], a_row[:n_t], a_w[:n_t], scheme, is_node


def plan_and_schemes(s: np.ndarray, knot_index: np.ndarray, spacing: float):
    """The dynamics plan (where to evaluate the dynamics along the path, and how to fill in the other
    collocation points) and the stage schemes, in one compiled call.

    Inside a knot interval q(s) is one cubic, so a(s), b(s), c(s) are analytic there. Nodes: the midpoint
    of every one-stage knot interval (the only midpoints the solver reads, see the schemes below); every
    gridpoint of intervals with at most 4 stages or stages longer than ``spacing``; else about one gridpoint per ``spacing`` (path units, rad), at least 5 per interval.
    The other gridpoints are targets: cubic Lagrange interpolation from the 4 nearest nodes of their
    interval (error about (3/128) h⁴ max|f⁽⁴⁾|, h the node spacing), checked against a shifted 4-node
    stencil; targets whose two estimates differ by more than a tolerance are evaluated exactly
    (:func:`torque_coefficients_planned`). Unused midpoints are left at 0.

    Args:
        s: (N,) gridpoints; knot_index: (K,) index of every knot in s (first 0, last N-1);
        spacing: node spacing (≤ 0: exact evaluation everywhere).
    Returns:
        (plan, scheme, is_node): plan = (nodes (E,) collocation indices of the nodes (gridpoint nodes
        first, in order), targets (T,) collocation indices, rows (T, 4) node rows used (row 0 = -1:
        exact), weights (T, 4), alt_rows (T, 4), alt_weights (T, 4)); scheme (N-1,) int8, which three
        points bound each stage's constraints (:func:`~.topp_ra.solve_topp_ra`): a stage alone in its knot
        interval needs its midpoint (0), any other the neighbouring gridpoint of its interval, left (1)
        when there is one, else right (2); is_node (N,) bool, the gridpoints that are dynamics nodes.
    """
    out = _plan_and_schemes(s, knot_index, float(spacing))
    return out[:6], out[6], out[7]


#: interpolated coefficients are accepted when two stencils agree to this fraction of the joint's
#: largest coefficient magnitude along the path (the shifted stencil overestimates the error by ~2×)
INTERPOLATION_RTOL = 1e-5


@njit(cache=True, nogil=True)
def _stack(q, dq, ddq, idx):  # pragma: no cover - compiled
    """States (3E, n) for c = RNEA(q, 0, 0), a + c = RNEA(q, 0, q'), b + c = RNEA(q, q', q'') at rows idx."""
    e = idx.shape[0]
    n = q.shape[1]
    Q = np.empty((3 * e, n))
    QD = np.zeros((3 * e, n))
    QDD = np.zeros((3 * e, n))
    for k in range(e):
        p = idx[k]
        for j in range(n):
            Q[k, j] = q[p, j]
            Q[e + k, j] = q[p, j]
            Q[2 * e + k, j] = q[p, j]
            QDD[e + k, j] = dq[p, j]
            QD[2 * e + k, j] = dq[p, j]
            QDD[2 * e + k, j] = ddq[p, j]
    return Q, QD, QDD


@njit(cache=True, nogil=True)
def _split_interpolate(tau, nodes, targets, rows, weights, alt_rows, alt_weights, rtol, a, b, c,
                       bad, relative):  # pragma: no cover - compiled
    """a, b, c at the nodes from the stacked RNEA torques (``relative``: rows e.. hold a + c and b + c,
    else a and b), cubic interpolation at the targets, and
    bad[t] where the two stencils disagree by more than rtol × the joint's largest |coefficient|."""
    e = nodes.shape[0]
    n = a.shape[1]
    scale = np.zeros((3, n))
    for k in range(e):
        p = nodes[k]
        for j in range(n):
            cc = tau[k, j]
            aa = tau[e + k, j] - cc if relative else tau[e + k, j]
            bb = tau[2 * e + k, j] - cc if relative else tau[2 * e + k, j]
            a[p, j] = aa
            b[p, j] = bb
            c[p, j] = cc
            scale[0, j] = max(scale[0, j], abs(aa))
            scale[1, j] = max(scale[1, j], abs(bb))
            scale[2, j] = max(scale[2, j], abs(cc))
    for r in range(3):
        top = 0.0
        for j in range(n):
            top = max(top, scale[r, j])
        for j in range(n):  # joints that barely feel a term
            scale[r, j] = max(scale[r, j], 1e-3 * top + 1e-12)
    for t in range(targets.shape[0]):
        bad[t] = False
        if rows[t, 0] < 0:
            bad[t] = True
            continue
        p = targets[t]
        for r in range(3):
            arr = a if r == 0 else (b if r == 1 else c)
            for j in range(n):
                acc = 0.0
                alt = 0.0
                for w in range(4):
                    acc += weights[t, w] * arr[nodes[rows[t, w]], j]
                    alt += alt_weights[t, w] * arr[nodes[alt_rows[t, w]], j]
                arr[p, j] = acc
                if abs(acc - alt) > rtol * scale[r, j]:
                    bad[t] = True


def _stacked_torques(dynamics, q, dq, ddq, idx):
    """(tau (3E, n), relative) for the rows idx: [c; a; b] from the engine's ``path_torque_terms`` when it has
    one (relative False), else [c; a + c; b + c] from one stacked ``dynamics.rnea`` call."""
    terms = getattr(dynamics, "path_torque_terms", None)
    if terms is not None:
        a, b, c = terms(q, dq, ddq, idx)
        return np.concatenate((c, a, b)), False
    return np.asarray(dynamics.rnea(*_stack(q, dq, ddq, idx))), True


def torque_coefficients_planned(dynamics, q, dq, ddq, plan):
    """a, b, c (P, n) at all P = 2N-1 collocation points (:func:`plan_and_schemes`).

    Dynamics at the nodes — with the in-package engine its ``path_torque_terms`` (one compiled pass per
    state); with any other engine one stacked batched ``rnea`` call (see :func:`torque_coefficients`) — then cubic interpolation at the targets, and a second evaluation for
    the targets whose interpolation error estimate exceeds :data:`INTERPOLATION_RTOL`.
    """
    nodes, targets, rows, weights, alt_rows, alt_weights = plan
    tau, relative = _stacked_torques(dynamics, q, dq, ddq, nodes)
    a, b, c = np.zeros((3,) + q.shape)  # (unused midpoints stay 0: finite rows for the table)
    bad = np.empty(targets.shape[0], dtype=np.bool_)
    _split_interpolate(tau, nodes, targets, rows, weights, alt_rows, alt_weights, INTERPOLATION_RTOL, a, b, c,
                       bad, relative)
    if bad.any():
        idx = targets[bad]
        tau, relative = _stacked_torques(dynamics, q, dq, ddq, idx)
        e = idx.shape[0]
        c[idx] = tau[:e]
        a[idx] = tau[e:2 * e] - c[idx] if relative else tau[e:2 * e]
        b[idx] = tau[2 * e:] - c[idx] if relative else tau[2 * e:]
    return a, b, c


def velocity_bound(dq: np.ndarray, velocity_limit: np.ndarray) -> np.ndarray:
    """xmax (P,) = min_j V_j² / q'_j² (+inf when unconstrained), from |q'_j(s)| sd ≤ V_j."""
    v2 = np.asarray(velocity_limit, dtype=float) ** 2
    dq2 = dq * dq
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(dq2 > 0.0, v2 / dq2, np.inf)
    return r.min(axis=1) if r.shape[1] else np.full(dq.shape[0], np.inf)


def build_constraints(dq: np.ndarray, ddq: np.ndarray, *, velocity_limit: np.ndarray,
                      acceleration_limit: np.ndarray, torque_limit: np.ndarray | None = None,
                      torque_abc: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                      viscous: np.ndarray | None = None, coulomb: np.ndarray | None = None,
                      x_ref: np.ndarray | None = None, tangent_factor: float = 1.0):
    """Rows (G, h) for :func:`robot_dynamics_ros.retiming.topp_ra.solve_topp_ra`.

    Args:
        dq, ddq: (P, n) q'(s), q''(s) at the collocation points.
        velocity_limit, acceleration_limit, torque_limit: (n,) already scaled / margin-applied limits
            (rad/s, rad/s², N·m); +inf disables a joint's row.
        torque_abc: (a, b, c) of :func:`torque_coefficients`; required when torque_limit is finite anywhere.
        viscous, coulomb: (n,) friction coefficients (N·m·s/rad, N·m) or None.
        x_ref: (P,) reference sd² profile for the viscous-friction linearization (required with viscous).
        tangent_factor: the tangent of sqrt is taken at tangent_factor · x_ref (< 1 is less conservative
            at low speed, more at high speed).
    Returns:
        G (P, R, 2), h (P, R) with R = 1 (x ≤ xm of the viscous-friction chord, +inf without) + n
        (velocity, q'_j² x ≤ V_j²) + 2n (acceleration) [+ 2n (torque)]; every row scaled by one factor so
        that its largest |(G0, G1)| along the path is 1; xmin (P,) = min_j V_j² / q'_j² (the tightest
        velocity bound on x, for pruning: pass ``vel_rows=n`` and ``xmin`` to the solver).
    Raises:
        ValueError: torque limits without coefficients, viscous friction without x_ref.
    """
    p, n = dq.shape
    vlim = np.asarray(velocity_limit, dtype=float)
    alim = np.asarray(acceleration_limit, dtype=float)
    xcap = np.full(p, np.inf)
    if torque_limit is None or not np.any(np.isfinite(torque_limit)):
        empty = np.zeros((0, n))
        return _build(dq, ddq, vlim, alim, np.full(n, np.inf), empty, empty, empty, empty, empty, xcap, False)
    if torque_abc is None:
        raise ValueError("torque_abc: required with a finite torque_limit")
    a, b, c = torque_abc
    tlim = np.asarray(torque_limit, dtype=float)
    c_up, c_lo, b_up, b_lo = c, c, b, b
    if coulomb is not None:
        fc = np.broadcast_to(np.asarray(coulomb, dtype=float), (p, n))
        sgn = np.sign(dq)
        # next to a sign change of q'_j (within a neighbouring half stage) the friction torque jumps:
        # there, and where q' = 0, the sign of qd is taken as unknown and both sides are tightened
        # (the solver's stencils reach one gridpoint = two collocation points to either side of a stage)
        jump = np.zeros_like(sgn, dtype=bool)
        jump[1:] = sgn[1:] != sgn[:-1]
        change = jump.copy()
        for k in range(1, 5):
            change[k:] |= jump[:-k]
            change[:-k] |= jump[k:]
        sgn = np.where(change, 0.0, sgn)
        c_up = c_up + np.where(sgn == 0, fc, sgn * fc)
        c_lo = c_lo + np.where(sgn == 0, -fc, sgn * fc)
    if viscous is not None and np.any(np.asarray(viscous) != 0.0):
        if x_ref is None:
            raise ValueError("x_ref: required with viscous friction")
        xr = np.maximum(np.asarray(x_ref, dtype=float), 0.0)
        floor = 1e-6 * max(float(xr.max()), 1e-6)
        x0 = np.maximum(tangent_factor * xr, floor)[:, None]
        # the chord bound holds for x <= xm: twice the reference over the neighbouring points
        near = np.maximum.reduce([np.roll(xr, k) for k in (-2, -1, 0, 1, 2)])
        xm = (2.0 * near + 1e-2 * max(float(xr.max()), 1e-6))[:, None]
        f = np.asarray(viscous, dtype=float)[None, :] * dq  # torque = ... + f sqrt(x)
        fpos = np.maximum(f, 0.0)
        fneg = np.minimum(f, 0.0)
        # upper row  a u + b x + c + f sqrt(x) <= T: tangent above, chord below (x <= xm)
        b_up = b_up + fpos / (2.0 * np.sqrt(x0)) + fneg / np.sqrt(xm)
        c_up = c_up + fpos * np.sqrt(x0) / 2.0
        # lower row  a u + b x + c + f sqrt(x) >= -T
        b_lo = b_lo + fneg / (2.0 * np.sqrt(x0)) + fpos / np.sqrt(xm)
        c_lo = c_lo + fneg * np.sqrt(x0) / 2.0
        xcap = xm[:, 0].copy()
    arrs = [np.ascontiguousarray(v, dtype=float) for v in (a, b_up, b_lo, c_up, c_lo)]
    return _build(dq, ddq, vlim, alim, tlim, *arrs, xcap, True)


def build_rows(dq, ddq, vlim, alim, tlim, abc):
    """:func:`build_constraints` without friction, for callers that already hold C-contiguous float arrays
    and finite torque limits somewhere (``abc`` from :func:`torque_coefficients_planned`) or ``abc`` None
    (no torque rows): one compiled call, no argument conversions."""
    xcap = np.full(dq.shape[0], np.inf)
    if abc is None:
        empty = np.zeros((0, dq.shape[1]))
        return _build(dq, ddq, vlim, alim, np.full(dq.shape[1], np.inf), empty, empty, empty, empty, empty, xcap,
                      False)
    a, b, c = abc
    return _build(dq, ddq, vlim, alim, tlim, a, b, b, c, c, xcap, True)


@njit(cache=True, inline="always")
def _raise(scale, r, v):  # pragma: no cover - compiled
    """scale[r] = v where v is larger (a NaN leaves it as it is)."""
    if v > scale[r]:
        scale[r] = v


@njit(cache=True, nogil=True)
def _build(dq, ddq, vlim, alim, tlim, a, b_up, b_lo, c_up, c_lo, xcap, torque):  # pragma: no cover
    """Rows of :func:`build_constraints` in one pass, each row scaled by one factor along the whole path
    (its largest |(G0, G1)|): the solver combines a row's values at neighbouring points, so a row must be
    the same function of s everywhere (a per-point normalization would distort its curvature). The factors
    come from the inputs first, so the table (2N-1 points × rows; 17 MB at 10 000 gridpoints) is written
    once, already scaled, instead of zeroed, filled and scaled again."""
    p, n = dq.shape
    nrow = 1 + 3 * n + (2 * n if torque else 0)
    # per row, the largest |(G0, G1)|² over the path (the ± rows of a limit share theirs where their
    # coefficients are negatives of each other)
    scale = np.zeros(nrow)
    for k in range(p):
        for j in range(n):
            d2 = dq[k, j] * dq[k, j]
            _raise(scale, 1 + j, d2 * d2)
            _raise(scale, 1 + n + j, d2 + ddq[k, j] * ddq[k, j])
            if torque:
                aa = a[k, j] * a[k, j]
                _raise(scale, 1 + 3 * n + j, aa + b_up[k, j] * b_up[k, j])
                _raise(scale, 1 + 4 * n + j, aa + b_lo[k, j] * b_lo[k, j])
    for j in range(n):
        scale[1 + 2 * n + j] = scale[1 + n + j]
    inv = np.ones(nrow)
    for r in range(1, nrow):
        if scale[r] > 0.0:
            inv[r] = 1.0 / np.sqrt(scale[r])
    G = np.empty((p, nrow, 2))
    h = np.empty((p, nrow))
    xmin = np.full(p, np.inf)
    for k in range(p):
        G[k, 0, 0] = 0.0
        G[k, 0, 1] = 1.0
        h[k, 0] = xcap[k]
        for j in range(n):
            r = 1 + j  # velocity: q'_j² x <= V_j² (smooth in s, unlike min_j V_j² / q'_j²)
            d2 = dq[k, j] * dq[k, j]
            v2 = vlim[j] * vlim[j]
            if d2 > 0.0 and v2 < xmin[k] * d2:
                xmin[k] = v2 / d2
            f = inv[r]
            G[k, r, 0] = 0.0
            G[k, r, 1] = d2 * f
            h[k, r] = v2 * f
            r = 1 + n + j
            f = inv[r]
            G[k, r, 0] = dq[k, j] * f
            G[k, r, 1] = ddq[k, j] * f
            h[k, r] = alim[j] * f
            r = 1 + 2 * n + j
            G[k, r, 0] = -dq[k, j] * f
            G[k, r, 1] = -ddq[k, j] * f
            h[k, r] = alim[j] * f
        if torque:
            for j in range(n):
                r = 1 + 3 * n + j
                f = inv[r]
                G[k, r, 0] = a[k, j] * f
                G[k, r, 1] = b_up[k, j] * f
                h[k, r] = (tlim[j] - c_up[k, j]) * f
                r = 1 + 4 * n + j
                f = inv[r]
                G[k, r, 0] = -a[k, j] * f
                G[k, r, 1] = -b_lo[k, j] * f
                h[k, r] = (tlim[j] + c_lo[k, j]) * f
    return G, h, xmin
