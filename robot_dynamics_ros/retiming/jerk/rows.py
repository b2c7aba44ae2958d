"""The rows of the jerk-limited timing's linear programs, built once per solve: the check points of every
stage, the velocity, acceleration, torque (and tool speed) rows, x ≥ 0 inside the stages, the equalities
that tie x and u across a stage, the variable bounds (the end stages' jerk bound on x_1 and x_{N-2}), and
the jerk rows whose tangents every LP rewrites (:mod:`robot_dynamics_ros.retiming.jerk` has the method).

Variables z = (x_0..x_{N-1}, u_0..u_{N-1}); every inequality row has three entries (the variables of one
stage) and is scaled to a largest coefficient of 1 (HiGHS's tolerances are absolute).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from robot_dynamics_ros.retiming.constraints import torque_coefficients
from robot_dynamics_ros.retiming.jerk.profile import third_derivative

#: every row is imposed at σ = kΔ/SUBDIVISIONS, k = 0..SUBDIVISIONS, on every stage
SUBDIVISIONS = 2


@njit(cache=True, nogil=True)
def _slack_kernel(cols, data, b, z, idx, out):  # pragma: no cover - compiled
    for k in range(idx.shape[0]):
        r = idx[k]
        out[k] = b[r] - (data[r, 0] * z[cols[r, 0]] + data[r, 1] * z[cols[r, 1]] + data[r, 2] * z[cols[r, 2]])


@njit(cache=True, nogil=True)
def _least_per_stage_kernel(slack, row_stage, start, stop, n_stages, keep):  # pragma: no cover - compiled
    # keep[r] = True for the row r in [start, stop) with the least slack on each stage
    best = np.full(n_stages, -1)
    for r in range(start, stop):
        st = row_stage[r]
        if best[st] < 0 or slack[r] < slack[best[st]]:
            best[st] = r
    for st in range(n_stages):
        if best[st] >= 0:
            keep[best[st]] = True


@njit(cache=True, nogil=True, error_model="numpy")
def _jerk_rows_kernel(xb_pts, floor, kj, Lj, Xj, Jr, nf, data, b):  # pragma: no cover - compiled
    # row nf + r: L z ≤ (J/√x̄)(3/2 − x/(2 x̄)) for check point kj[r], limit J = Jr[r], scaled by √x̄ / (1.5 J)
    # (the tangent's value at x = 0 becomes 1), row nf + mj + r: −L z ≤ the same; each row then scaled to
    # a largest coefficient of 1 (HiGHS's tolerances are absolute)
    mj = kj.shape[0]
    for r in range(mj):
        xb = max(xb_pts[kj[r]], floor)
        ls = math.sqrt(xb) / (1.5 * Jr[r])
        for half in range(2):
            sgn = 1.0 - 2.0 * half
            row = nf + half * mj + r
            scale = 0.0
            for k in range(3):
                c = Xj[r, k] / (3.0 * xb) + sgn * Lj[r, k] * ls
                data[row, k] = c
                scale = max(scale, abs(c))
            if scale <= 0.0:
                scale = 1.0
            for k in range(3):
                data[row, k] /= scale
            b[row] = 1.0 / scale


@njit(cache=True, nogil=True, error_model="numpy")
def _check_points_kernel(s, M, r43, cbrt_r):  # pragma: no cover - compiled
    # check_points' arrays, end stages first (start then end, k = 1..M), then the interior stages point by
    # point; r43, cbrt_r (M,): r^{4/3} and ∛r at r = k/M, k = 1..M, computed by numpy and passed in (numba's
    # cbrt differs from numpy's in the last bit at some r)
    N = s.shape[0]
    e = N - 2
    m = N - 3
    K = 2 * M + (M + 1) * m
    P = np.empty(K, np.int64)
    ST = np.empty(K, np.int64)
    VAR = np.empty((K, 3), np.int64)
    X = np.zeros((K, 3))
    U = np.zeros((K, 3))
    V = np.zeros((K, 3))
    interior = np.zeros(K, np.bool_)
    d0 = s[1] - s[0]
    de = s[e + 1] - s[e]
    # start stage: x = x1 r^{4/3}, u = (2/3) x1 r^{1/3} / Δ; end stage its mirror, r = (L - s) / Δ
    for k in range(M):
        P[k] = k + 1
        ST[k] = 0
        VAR[k, :] = 1
        X[k, 0] = r43[k]
        U[k, 0] = 1.0 * 2 / 3 * cbrt_r[k] / d0
        P[M + k] = M * e + M - (M - k)
        ST[M + k] = e
        VAR[M + k, :] = e
        X[M + k, 0] = r43[M - 1 - k]
        U[M + k, 0] = -1.0 * 2 / 3 * cbrt_r[M - 1 - k] / de
    # interior stage i at σ = kΔ/M: x = x_i + u_i (2σ − σ²/Δ) + u_{i+1} σ²/Δ, u = u_i + (u_{i+1} − u_i) σ/Δ,
    # v = (u_{i+1} − u_i)/Δ
    row = 2 * M
    for i in range(1, N - 2):
        dd = s[i + 1] - s[i]
        for k in range(M + 1):
            f = k / M  # σ/Δ
            P[row] = M * i + k
            ST[row] = i
            VAR[row, 0] = i
            VAR[row, 1] = N + i
            VAR[row, 2] = N + i + 1
            X[row, 0] = 1.0
            X[row, 1] = dd * (2 * f - f * f)
            X[row, 2] = dd * (f * f)
            U[row, 1] = 1 - f
            U[row, 2] = f
            V[row, 1] = -1.0 / dd
            V[row, 2] = 1.0 / dd
            interior[row] = True
            row += 1
    return P, ST, VAR, X, U, V, interior


@njit(cache=True, nogil=True, error_model="numpy")
def _jerk_setup_kernel(p, st, var, X, U, V, interior, jlim, dq, ddq, dddq):  # pragma: no cover - compiled
    # the jerk rows of build_rows: one per interior check point and joint with a finite limit (point by
    # point, joint by joint): the check point (kj, an index into the interior points), the limit (Jr), the
    # linear form q''' x + 3 q'' u + q' v (Lj) and x (Xj) in its variables (cols)
    K = p.shape[0]
    n = jlim.shape[1]
    mj = 0
    for k in range(K):
        if interior[k]:
            for j in range(n):
                mj += np.isfinite(jlim[p[k], j])
    kj = np.empty(mj, np.int64)
    Jr = np.empty(mj)
    Lj = np.empty((mj, 3))
    Xj = np.empty((mj, 3))
    cols = np.empty((mj, 3), np.int64)
    r = 0
    ii = 0
    for k in range(K):
        if not interior[k]:
            continue
        pk = p[k]
        for j in range(n):
            lim = jlim[pk, j]
            if not np.isfinite(lim):
                continue
            kj[r] = ii
            Jr[r] = lim
            a, b3, c = dddq[st[k], j], 3 * ddq[pk, j], dq[pk, j]
            for e in range(3):
                Lj[r, e] = a * X[k, e] + b3 * U[k, e] + c * V[k, e]
                Xj[r, e] = X[k, e]
                cols[r, e] = var[k, e]
            r += 1
        ii += 1
    return kj, Jr, Lj, Xj, cols


@njit(cache=True, nogil=True)
def _row_stage_kernel(cols, N):  # pragma: no cover - compiled
    # the stage of every inequality row: the smallest gridpoint index among its variables; the end stages'
    # rows hold x_1 (resp. x_{N-2}) alone (var repeats it, the other coefficients 0): their zero entries
    # moved to the fixed columns x_0 and u_0, so that no row names a column twice
    m = cols.shape[0]
    row_stage = np.empty(m, cols.dtype)
    for r in range(m):
        best = N
        for e in range(3):
            c = cols[r, e]
            g = c if c < N else c - N
            best = min(best, g)
        row_stage[r] = best
        if cols[r, 1] == cols[r, 0]:
            cols[r, 1] = 0
            cols[r, 2] = N
    return row_stage


def check_points(s, M=None):
    """The check points of every stage and x, u, v at each as linear forms in the variables.

    Args: s (N,) gridpoints; M: sub-intervals per stage (even; None: :data:`SUBDIVISIONS`), the check points
        are at σ = kΔ/M, k = 0..M (k ≥ 1 on the two end stages: x = 0 at rest).
    Returns (p, stage, var (K, 3), X (K, 3), U (K, 3), V (K, 3), interior (K,) bool) where p indexes the
    M(N-1)+1 collocation points s_i + kΔ_i/M (index M i + k) and the variables are ordered
    (x_0..x_{N-1}, u_0..u_{N-1}); compiled (:func:`_check_points_kernel`).
    """
    M = SUBDIVISIONS if M is None else int(M)
    r = np.arange(1, M + 1) / M
    return _check_points_kernel(np.ascontiguousarray(s, dtype=float), M, r ** (4 / 3), np.cbrt(r))


@njit(cache=True, nogil=True, error_model="numpy")
def _put_row(cols, data, b, row, var_k, c0, c1, c2, rhs):  # pragma: no cover - compiled
    # one row, scaled to a largest coefficient of 1 (HiGHS's tolerances are absolute)
    scale = max(abs(c0), abs(c1), abs(c2))
    if not scale > 0.0:
        scale = 1.0
    for k in range(3):
        cols[row, k] = var_k[k]
    data[row, 0] = c0 / scale
    data[row, 1] = c1 / scale
    data[row, 2] = c2 / scale
    b[row] = rhs / scale


@njit(cache=True, nogil=True, error_model="numpy")
def _fixed_rows_kernel(var, X, U, dqp, ddqp, tight, alim, tlim, ta, tb, tc, skip, mids):  # pragma: no cover
    # the rows of _limit_rows in its order: velocity (one per point, if tight has K entries), then
    # acceleration +, −, torque +, − (point by point, joint by joint, finite limits only; if ta has K rows),
    # then x ≥ 0 at the mids; no velocity, acceleration or torque row at a point where skip
    K, n = dqp.shape
    has_tq = ta.shape[0] == K
    n_vel = 0
    n_acc = 0
    n_tq = 0
    n_pos = 0
    for k in range(K):
        n_pos += mids[k]
        if skip[k]:
            continue
        n_vel += 1
        for j in range(n):
            n_acc += np.isfinite(alim[k, j])
            n_tq += np.isfinite(tlim[k, j])
    if tight.shape[0] != K:
        n_vel = 0
    if not has_tq:
        n_tq = 0
    m = n_vel + 2 * n_acc + 2 * n_tq + n_pos
    cols = np.empty((m, 3), np.int64)
    data = np.empty((m, 3))
    b = np.empty(m)
    row = 0
    for k in range(K):
        if n_vel and not skip[k]:
            t = tight[k]
            _put_row(cols, data, b, row, var[k], t * X[k, 0], t * X[k, 1], t * X[k, 2], 1.0)
            row += 1
    for blk in range(4):
        if blk < 2 and n_acc == 0 or blk >= 2 and n_tq == 0:
            continue
        sgn = 1.0 if blk % 2 == 0 else -1.0
        for k in range(K):
            if skip[k]:
                continue
            for j in range(n):
                if blk < 2:
                    lim = alim[k, j]
                    if not np.isfinite(lim):
                        continue
                    al = ddqp[k, j] / lim
                    be = dqp[k, j] / lim
                    rhs = 1.0
                else:
                    lim = tlim[k, j]
                    if not np.isfinite(lim):
                        continue
                    al = tb[k, j] / lim
                    be = ta[k, j] / lim
                    rhs = 1.0 - sgn * tc[k, j] / lim
                _put_row(cols, data, b, row, var[k], sgn * (al * X[k, 0] + be * U[k, 0]),
                         sgn * (al * X[k, 1] + be * U[k, 1]), sgn * (al * X[k, 2] + be * U[k, 2]), rhs)
                row += 1
    for k in range(K):
        if mids[k]:
            _put_row(cols, data, b, row, var[k], -X[k, 0], -X[k, 1], -X[k, 2], 0.0)
            row += 1
    return cols, data, b


def _limit_rows(pts, q, dq, ddq, vlim, alim, tlim, torque, margin, tool_speed):
    """The fixed inequality rows (velocity and tool speed, acceleration, torque, x ≥ 0 inside the interior
    stages) as (cols, data, b) (:func:`_fixed_rows_kernel`); limits (M (N-1) + 1, n) per collocation point;
    ``torque`` the path's torque coefficients (a, b, c) at every collocation point, or None (no torque
    limit)."""
    p, st, var, X, U, _, interior = pts
    M = SUBDIVISIONS
    dqp, ddqp = dq[p], ddq[p]
    vlim, alim, tlim_p = vlim[p], alim[p], tlim[p]  # (K, n)
    vel = np.isfinite(vlim)
    tight = np.zeros(0)
    if vel.any() or tool_speed is not None:
        # q'^2 x / V^2 ≤ 1 (and |dp/ds|² x / v_tool² ≤ 1): the same linear form in x for every joint, so
        # only the tightest row per point
        tight = np.where(vel, dqp ** 2 / np.where(vel, vlim, 1.0) ** 2, 0.0).max(axis=1)
        if tool_speed is not None:
            speed = np.asarray(tool_speed[0](q, dq), float)[p]
            tight = np.maximum(tight, (speed / (tool_speed[1] * (1.0 - margin))) ** 2)
    none = np.zeros((0, dq.shape[1]))
    ta, tb, tc = (none, none, none) if torque is None else (torque[0][p], torque[1][p], torque[2][p])
    # x and u are continuous at a gridpoint, so a row without v (all but the jerk rows) at the end of a stage
    # is, under the equalities, the same row as at the start of the next stage: imposed once
    dup = (interior & (p == M * st + M)) | (~interior & (st == 0) & (p == M))
    # x ≥ 0 at the check points inside the interior stages (x is quadratic there)
    mids = interior & (p % M != 0)
    return _fixed_rows_kernel(var, X, U, dqp, ddqp, tight, np.ascontiguousarray(alim),
                              np.ascontiguousarray(tlim_p), ta, tb, tc, dup, mids)


class EqualityRows(NamedTuple):
    """A sparse matrix in CSR form, as the LP code reads it (the attributes of a scipy CSR matrix it uses,
    without scipy.sparse's construction and validation, ~40 µs per solve level): indptr (me + 1,) and
    indices (nnz,) int32 (column indices ascending in each row), data (nnz,), shape (me, nv)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])


def _equalities(s):
    """A_eq (N − 1, 2N) :class:`EqualityRows`, A_eq z = 0: interior stages x_{i+1} - x_i - Δ(u_i + u_{i+1}) = 0;
    u_1 = 2 x_1 / (3 Δ_0); u_{N-2} = -2 x_{N-2} / (3 Δ_{N-2})."""
    N = s.shape[0]
    d = np.diff(s)
    i = np.arange(1, N - 2)
    m = i.shape[0]
    indices = np.concatenate((np.stack([i, i + 1, N + i, N + i + 1], 1).ravel(), [1, N + 1, N - 2, 2 * N - 2]))
    data = np.concatenate((np.stack([-np.ones(m), np.ones(m), -d[i], -d[i]], 1).ravel(),
                           [-2.0 / (3.0 * d[0]), 1.0, 2.0 / (3.0 * d[N - 2]), 1.0]))
    indptr = np.concatenate((np.arange(0, 4 * m + 1, 4), [4 * m + 2, 4 * m + 4]))
    return EqualityRows(indptr.astype(np.int32), indices.astype(np.int32), data, (m + 2, 2 * N))


@njit(cache=True, nogil=True, error_model="numpy")
def _end_gmax_kernel(d, dq, ddq, dddq, jlim, M, gmax, jl):  # pragma: no cover - compiled
    # for the two end stages (rows 0: start, 1: end) and every joint: the largest |g| on the stage (gmax) and
    # the smallest jerk limit at its check points (jl), see _bounds
    N = d.shape[0] + 1
    n = dq.shape[1]
    g = np.empty(3)
    for end in range(2):
        stage, sgn = (0, 1) if end == 0 else (N - 2, -1)
        ds = d[stage]
        for j in range(n):
            for k in range(3):
                # the path walked away from the end at rest: p(Δ r) = q(s_0 + Δ r) resp. q(L − Δ r), so
                # p' = sgn q', p'' = q'', p''' = sgn q'''; g at r = 0, 1/2, 1 (check points in that order)
                pt = M * stage + (k * M) // 2 if sgn > 0 else M * stage + M - (k * M) // 2
                g[k] = (sgn * dddq[stage, j] * (0.25 * k * k) + 2 * ddq[pt, j] * (0.5 * k) / ds
                        + sgn * (2 / 9) * dq[pt, j] / ds ** 2)
            # q' is quadratic, q'' linear and q''' constant on a stage, so g is a quadratic in r: its largest
            # |g| on [0, 1] is at an end or at the vertex
            a2 = 2 * g[2] - 4 * g[1] + 2 * g[0]
            a1 = 4 * g[1] - 3 * g[0] - g[2]
            rv = -a1 / (2 * a2) if a2 != 0 else 0.0
            rv = min(max(rv, 0.0), 1.0)
            gmax[end, j] = max(max(abs(g[0]), abs(g[1]), abs(g[2])), abs(a2 * rv ** 2 + a1 * rv + g[0]))
            jl[end, j] = min(jlim[M * stage, j], jlim[M * stage + M // 2, j], jlim[M * stage + M, j])


def _bounds(s, x_ref, dq, ddq, dddq, jlim):
    """(lo, hi (2N,), u_box): x_0 = u_0 = x_{N-1} = u_{N-1} = 0, x ≥ 0, |u| ≤ u_box, and the end stages'
    jerk limit as a bound on x_1 and x_{N-2}; dq, ddq (M (N-1) + 1, n) at the collocation points, dddq
    (N-1, n) per stage, jlim (M (N-1) + 1, n)."""
    N = s.shape[0]
    d = np.diff(s)
    M = SUBDIVISIONS
    # on the end stages the jerk is exactly x^{3/2} g(r),
    # g = p''' r² + 2 p''(Δ r) r / Δ + (2/9) p'(Δ r) / Δ² (r = (s - s_0)/Δ resp. (L - s)/Δ, p below): a bound
    # on x_1 and x_{N-2}
    # |u| ≤ u_box keeps a working-set LP bounded before the rows that bound u are in it; it is 10³ × the
    # TOPP-RA profile's largest |sdd|, which bounds every feasible u, and never active (the solve checks)
    u_box = 1e3 * max(float(np.abs(np.diff(x_ref) / (2.0 * d)).max()), 1e-3)
    lo = np.concatenate((np.zeros(N), np.full(N, -u_box)))
    hi = np.concatenate((np.full(N, np.inf), np.full(N, u_box)))
    hi[[0, N - 1, N, 2 * N - 1]] = 0.0
    lo[[N, 2 * N - 1]] = 0.0
    n = dq.shape[1]
    gmax, jl = np.empty((2, n)), np.empty((2, n))
    _end_gmax_kernel(d, np.ascontiguousarray(dq, dtype=float), np.ascontiguousarray(ddq, dtype=float),
                     np.ascontiguousarray(dddq, dtype=float), np.ascontiguousarray(jlim, dtype=float), M, gmax, jl)
    for end, xi in ((0, 1), (1, N - 2)):
        # the power in numpy, not in the kernel (numba's scalar pow may differ from numpy's in the last bit)
        with np.errstate(divide="ignore"):
            cap = np.where(np.isfinite(jl[end]), (jl[end] / gmax[end]) ** (2 / 3), np.inf).min()
        hi[xi] = min(hi[xi], cap)
    return lo, hi, u_box


@dataclass
class JerkRows:
    """Every row, bound and equality of one solve's LPs (built by :func:`build_rows`), and what an LP step
    needs from them.

    Attributes:
        s (N,) gridpoints; N; nv = 2N variables (x_0..x_{N-1}, u_0..u_{N-1}).
        X, var (K, 3): x at each check point as a linear form in the variables ``var``; interior (K,) bool;
        points_s (K,): the check points' path positions.
        A_eq: (N − 1, nv) equalities (:class:`EqualityRows`); lo, hi (nv,) bounds; u_box: the bound on |u|.
        cols (m, 3) int32, data (m, 3), b_ub (m,): the inequality rows (the fixed rows, then the jerk rows,
        + then −, which :meth:`set_jerk_rows` rewrites); row_stage (m,): the stage of each row.
        w_grid (N,): trapezoid weights of the gridpoints (the fallback first LP's objective).
    """

    s: np.ndarray
    N: int
    nv: int
    X: np.ndarray
    var: np.ndarray
    interior: np.ndarray
    points_s: np.ndarray
    A_eq: EqualityRows
    lo: np.ndarray
    hi: np.ndarray
    u_box: float
    cols: np.ndarray
    data: np.ndarray
    b_ub: np.ndarray
    row_stage: np.ndarray
    w_grid: np.ndarray
    kj: np.ndarray
    Lj: np.ndarray
    Xj: np.ndarray
    Jr: np.ndarray
    nf: int
    mj: int

    def __post_init__(self):
        self.all_rows = np.arange(self.b_ub.shape[0])
        # the variables by gridpoint (x_i, then u_i): every row's variables are close together in this order
        g = np.arange(self.N)
        self.grid_order = np.stack((g, self.N + g), axis=1).ravel()

    def slack_at(self, z, idx=None):
        """b − A z of the inequality rows ``idx`` (None: all)."""
        idx = self.all_rows if idx is None else idx
        out = np.empty(idx.shape[0])
        _slack_kernel(self.cols, self.data, self.b_ub, np.ascontiguousarray(z, dtype=float), idx, out)
        return out

    def working_set(self, z, threshold):
        """(slack (m,), keep (m,) bool): the slack of every row at z and the rows of an LP's working set —
        those with slack below ``threshold``, and on every stage the + and the − jerk row with the least
        slack. Without the latter a stage whose jerk rows are all slack at z has no row on v = du/ds in the
        LP, so its answer puts u far off and the rows then added (violated by up to ~100× their right-hand
        side on the case) take as many pivots as the LP itself."""
        slack = self.slack_at(z)
        keep = slack < threshold
        for half in range(2 if self.mj else 0):
            a = self.nf + half * self.mj
            _least_per_stage_kernel(slack, self.row_stage, a, a + self.mj, self.N - 1, keep)
        return slack, keep

    def take(self, idx):
        """The rows ``idx`` as (cols, data, b)."""
        return self.cols[idx], self.data[idx], self.b_ub[idx]

    def set_jerk_rows(self, xbar_pts):
        """The jerk rows' tangents at x̄ (the check points' x, (K,)) into data and b_ub."""
        if self.mj:
            _jerk_rows_kernel(np.ascontiguousarray(xbar_pts[self.interior], dtype=float),
                              1e-9 * max(float(xbar_pts.max()), 1e-12), self.kj, self.Lj, self.Xj, self.Jr,
                              self.nf, self.data, self.b_ub)

    def at_points(self, z):
        """x (K,) at the check points for the variables z (nv,)."""
        return (self.X * z[self.var]).sum(axis=1)


def build_rows(path, s, x_ref, dynamics, *, velocity_limit, acceleration_limit, torque_limit, jerk_limit,
               margin, tool_speed) -> JerkRows:
    """The rows of the LPs on gridpoints ``s`` (N,); arguments as
    :func:`robot_dynamics_ros.retiming.jerk.slp.solve_once` (limits (n,) or per collocation point)."""
    N = s.shape[0]
    n = path.n
    d = np.diff(s)
    M = SUBDIVISIONS
    # every limit per collocation point s_i + kΔ_i/M (index M i + k) and joint: (M (N-1) + 1, n)
    shape = (M * (N - 1) + 1, n)
    vlim = np.broadcast_to(np.asarray(velocity_limit, float) * (1.0 - margin), shape)
    alim = np.broadcast_to(np.asarray(acceleration_limit, float), shape)
    tlim = np.broadcast_to(np.asarray(torque_limit, float) * (1.0 - margin), shape)
    jlim = np.broadcast_to(np.asarray(jerk_limit, float) * (1.0 - margin), shape)
    s_eval = np.append((s[:-1, None] + d[:, None] * (np.arange(M) / M)[None, :]).ravel(), s[-1])
    q, dq, ddq = path.evaluate(s_eval)
    dddq = third_derivative(path, 0.5 * (s[:-1] + s[1:]))  # (N-1, n) per stage
    torque = torque_coefficients(dynamics, q, dq, ddq) if np.isfinite(tlim).any() else None
    pts = check_points(s)
    p, st, var, X, U, V, interior = pts
    fixed_c, fixed_d, fixed_b = _limit_rows(pts, q, dq, ddq, vlim, alim, tlim, torque, margin, tool_speed)
    A_eq = _equalities(s)
    lo, hi, u_box = _bounds(s, x_ref, dq, ddq, dddq, jlim)
    w_grid = np.zeros(N)
    w_grid[1:] += 0.5 * d
    w_grid[:-1] += 0.5 * d
    # all inequality rows, built once, 3 entries each (cols, data (m, 3), b_ub (m,)): the fixed rows, then
    # the jerk rows (interior check points (kj) × joints with a jerk limit (jj), + then −), whose values
    # every LP rewrites
    kj, Jr, Lj, Xj, jcols = _jerk_setup_kernel(p, st, var, X, U, V, interior, np.ascontiguousarray(jlim), dq,
                                               ddq, dddq)
    mj = kj.shape[0]   # 0 without a finite jerk limit
    nf = fixed_b.shape[0]
    cols = np.concatenate((fixed_c, jcols, jcols)).astype(np.int32)
    data = np.concatenate((fixed_d, np.zeros((2 * mj, 3))))
    b_ub = np.concatenate((fixed_b, np.zeros(2 * mj)))
    row_stage = _row_stage_kernel(cols, N)  # (and the end stages' repeated columns moved, see there)
    return JerkRows(s, N, 2 * N, X, var, interior, s_eval[p], A_eq, lo, hi, u_box, cols, data, b_ub, row_stage,
                    w_grid, kj, Lj, Xj, Jr, nf, mj)
