"""Jerk-limited time-optimal path parameterization on a fixed path, by sequential linear programming.

The path q(s) (a C² cubic spline :class:`~.path.JointPath`) is not changed; only the timing s(t) is. With
x = ṡ², u = s̈ and v = du/ds (so s⃛ = v ṡ), joint j's derivatives along the path are

    qd_j   = q'_j ṡ
    qdd_j  = q'_j u + q''_j x
    jerk_j = q'_j s⃛ + 3 q''_j ṡ s̈ + q'''_j ṡ³ = √x (q'''_j x + 3 q''_j u + q'_j v)            (1)

Velocity, acceleration and torque limits are linear in (u, x) (TOPP-RA's rows, τ = a u + b x + c); the jerk
limit |jerk_j| ≤ J_j is not convex in (x, u, v) (Pham & Pham, "On the structure of the time-optimal path
parameterization problem with third-order constraints", ICRA 2017). Written as

    |q'''_j x + 3 q''_j u + q'_j v| ≤ J_j / √x                                                  (2)

its left side is linear and its right side convex in x, so the tangent of J/√x at any x̄ > 0 lies below it
and replacing the right side by that tangent gives a *linear inner approximation*: every point that meets
the linearized rows meets (2) exactly (the "convex–concave" step of sequential convex programming,
Debrouwere et al., "Time-optimal path following for robots with convex–concave constraints using
sequential convex programming", IEEE T-RO 29(6), 2013).

Discretization. Gridpoints s_0 < … < s_{N-1} (one knot interval per stage, so q''' is constant on a
stage). Variables x_i, u_i at the gridpoints; on interior stages u is linear in s (v constant), so x is
the C¹ quadratic x(σ) = x_i + 2 u_i σ + v σ² and x_{i+1} = x_i + Δ_i (u_i + u_{i+1}) (linear equality).
The trajectory starts and ends at rest with zero acceleration: a rest-to-rest start with bounded jerk has
x ∝ s^{4/3} (s = j t³/6), which no polynomial x(s) has, so the first stage is the exact constant-path-
jerk start s(t) = x_1^{3/2} t³ / (27 Δ_0²) (then x = x_1 (s/Δ_0)^{4/3}, u_1 = 2 x_1 / (3 Δ_0), a linear
equality), and the last stage its mirror. On those two stages the joint jerk is x_1^{3/2} times a known
function of s (a quadratic in s − s_0, whose largest value is taken exactly), so the jerk limit there is a
plain upper bound on x_1 (resp. x_{N-2}). Stage times ∫ dσ/√x(σ) and their inversion for sampling are in
closed form (:mod:`.jerk_time`), exact also where x nearly vanishes inside a stage.

Every row is imposed at both ends and the midpoint of every stage (the output uses the same x(s), u(s),
so the row values between check points differ only by the rows' curvature over half a stage). That
difference depends on the answer, so it is checked on the output (:func:`solve_jerk_limited`, 1 kHz):
a joint's limit exceeded on a stage is tightened at that stage's check points only and the problem
solved again from the last profile and basis.

Iteration (sequential linear programming). The first LP takes its tangents at a starting profile: the
solution of the same problem on a coarser grid — the knots where they are at most half the gridpoints
(each coarse stage one knot interval), else every 4th gridpoint (a stage may then hold several knots and
the third derivative is taken at its midpoint, which only moves the start) — recursively, down to fewer
than 40 gridpoints, where the torque-only TOPP-RA profile is the start. Any x̄ > 0 gives a feasible
answer (inner approximation); near the answer it is also a good one. Then, at the current profile z:
tangents at z, objective the gradient of the traversal time T = Σ ∫ ds/√x(s) at z (x and u,
the stage-time quadrature differentiated), x at every gridpoint within a trust region [z/2, 2z]. z is
feasible for that LP (the tangent is exact at z) and T is convex, so a backtracking line search on the
segment from z to the LP's answer keeps every iterate feasible and T monotone; stop when an iteration
gains < rtol. A fixed point is a KKT point of the discretized non-convex problem (the tangents share the
true rows' values and gradients there); no global guarantee. The optimality gap is bounded by the
torque-only TOPP-RA duration, a lower bound of the jerk-limited one.

LPs: HiGHS's dual simplex with Devex pricing (the HiGHS scipy ships). Of the ~15 000 rows (200
gridpoints, 6 joints) a few hundred are active, so each LP is solved on a working set — the rows with
little slack at the current profile — and then every row is evaluated at the answer; violated rows
(and near neighbours) are added to the solved model and the dual simplex goes on from its basis, until
none is violated: the answer is then the full LP's optimum. Each SLP iteration's LP
starts from the previous LP's final basis and rows (its inactive rows with much slack dropped, the rows
with little slack at the new profile added as basic): between iterations the active set changes little, so
the dual simplex needs a few dozen pivots instead of the ~1 000 of a start from the slack basis. The first
LP after a coarse start begins from a guessed basis: the least-slack row of each stage at the start profile
active (a vertex has about one active row per stage), which HiGHS repairs where it is singular.

Data layout: every inequality row has three entries (the variables of one stage), so the rows are held as
(m, 3) column and coefficient arrays, built once per solve; an LP takes a subset by row index, the jerk
rows' tangents are rewritten in place and the slacks of all rows evaluated by compiled kernels, and the
stage times, their gradient and the output's time inversion too (numba, :mod:`.jerk_time`). LP bases
travel as int8 arrays of HiGHS's basis-status values.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from numba import njit

from robot_dynamics_ros.retiming.constraints import torque_coefficients
from robot_dynamics_ros.retiming.jerk_time import position_at, time_to1

__all__ = ["JerkSolution", "solve_jerk_limited", "third_derivative"]

#: Gauss–Legendre nodes/weights on [0, 1] for the gradient of the stage times ∫ dσ / √x(σ) (the times
#: themselves in closed form, :mod:`.jerk_time`)
_GL_X, _GL_W = np.polynomial.legendre.leggauss(12)
_GL_X = 0.5 * (_GL_X + 1.0)
_GL_W = 0.5 * _GL_W


#: working set of an LP: the rows whose slack (rows scaled to a largest coefficient of 1) at the previous
#: answer is below this; rows added after a solve: the violated ones and those with slack below _WS_ADD
_WS_SLACK = 0.3
_WS_ADD = 0.02
#: trust region of the SLP steps: x at every gridpoint within [x̄ / _TRUST, _TRUST x̄]
_TRUST = 2.0
#: a gridpoint where the torque-only profile's x = ṡ² is at most this fraction of its largest value is a stop:
#: the parts on either side are timed rest to rest. At ṡ below 1e-3 of its top speed a jerk-limited profile
#: stops there too, within its stage-wise quadratic x(σ) (which cannot slow to nearly 0 and recover inside a
#: stage: its stage time would be unbounded), and stopping costs the time of that last 1e-3 of the speed
STOP_RATIO = 1e-6
#: every row is imposed at σ = kΔ/_SUBDIVISIONS, k = 0.._SUBDIVISIONS, on every stage
_SUBDIVISIONS = 2
#: the first linearization point comes from the problem on the knots (where at most half the gridpoints)
#: or every _COARSE-th gridpoint (paths of at least _COARSE_MIN gridpoints, recursively), solved with at
#: most _COARSE_ITERATIONS SLP iterations
#: relative excess over a limit on the verification samples an output may keep after the last round (the
#: dense checks' tolerance); a larger one is refused
ACCEPT_TOL = 1e-3
_COARSE = 4
_COARSE_MIN = 40
_COARSE_ITERATIONS = 4


def third_derivative(path, s) -> np.ndarray:
    """q'''(s) (P, n) of the cubic spline ``path`` (piecewise constant: 6 × the leading coefficient of the
    knot interval containing each s (P,); the interval to the right at a knot)."""
    s = np.atleast_1d(np.asarray(s, dtype=float))
    k = np.clip(np.searchsorted(path.knots, s, side="right") - 1, 0, path.knots.shape[0] - 2)
    return 6.0 * path.coefficients[0, k, :]


@dataclass
class JerkSolution:
    """A jerk-limited timing of a path (rest to rest).

    Attributes:
        path: the :class:`~.path.JointPath`. s: (N,) gridpoints; x: (N,) sd² (rad²/s²); u: (N,) sdd at
        the gridpoints (rad/s²; u is linear in s on interior stages); t_grid: (N,) time at the gridpoints, s.
        duration: s. iterations: SLP iterations taken. durations: duration after each iteration, s.
        solve_ms: wall time of the whole solve, ms; lp_ms: of the LPs only; rounds: solves (verification).
    """

    path: object
    s: np.ndarray
    x: np.ndarray
    u: np.ndarray
    t_grid: np.ndarray
    duration: float
    iterations: int
    durations: list = field(default_factory=list)
    solve_ms: float = 0.0
    lp_ms: float = 0.0
    rounds: int = 1
    #: LP solves (working-set rounds included) and rows in each SLP iteration's final working set
    lp_solves: int = 0
    lp_rows: list = field(default_factory=list)
    #: parts timed rest to rest: more than 1 where the torque-only profile stops inside the path
    parts: int = 1

    def _profile(self, s_query) -> tuple[np.ndarray, np.ndarray]:
        """x = sd² (rad²/s²) and u = sdd (rad/s²) (K,) at path positions ``s_query`` (K,) in [0, s[-1]], as
        the trajectory has them (x quadratic and u linear on interior stages, constant path jerk on a
        stage that starts or ends at rest)."""
        sq = np.clip(np.asarray(s_query, dtype=float), self.s[0], self.s[-1])
        x, u, s_g = self.x, self.u, self.s
        d = np.diff(s_g)
        i = np.clip(np.searchsorted(s_g, sq, side="right") - 1, 0, s_g.shape[0] - 2)
        dd = d[i]
        sig = sq - s_g[i]
        v = (u[i + 1] - u[i]) / dd
        xo = x[i] + 2 * u[i] * sig + v * sig ** 2
        uo = u[i] + v * sig
        first = x[i] <= 0.0
        r = np.clip(sig / dd, 0.0, 1.0)
        xo = np.where(first, x[i + 1] * r ** (4 / 3), xo)
        uo = np.where(first, 2 / 3 * x[i + 1] * np.cbrt(r) / dd, uo)
        last = (x[i + 1] <= 0.0) & ~first
        r = 1.0 - r
        xo = np.where(last, x[i] * r ** (4 / 3), xo)
        uo = np.where(last, -2 / 3 * x[i] * np.cbrt(r) / dd, uo)
        return np.maximum(xo, 0.0), uo

    def sample(self, times) -> tuple[np.ndarray, ...]:
        """Path and joint trajectory at ``times`` (K,) s in [0, duration].

        Returns:
            s, sd, sdd, sddd (K,) and q, qd, qdd, jerk (K, n) (rad, rad/s, rad/s², rad/s³).
        """
        t = np.clip(np.asarray(times, dtype=float), 0.0, self.duration)
        s_g, x, u, tg = self.s, self.x, self.u, self.t_grid
        N = s_g.shape[0]
        d = np.diff(s_g)
        i = np.clip(np.searchsorted(tg, t, side="right") - 1, 0, N - 2)
        s = np.empty_like(t)
        sd = np.empty_like(t)
        sdd = np.empty_like(t)
        sddd = np.empty_like(t)
        # stages that start from rest (x = 0 at their start: the first, and after a stop inside the path)
        # and that end at rest: constant path jerk, s − s_i = x_{i+1}^{3/2} τ³ / (27 Δ²) and its mirror
        first = x[i] <= 0.0
        if first.any():
            ii = i[first]
            k = x[ii + 1] ** 1.5 / (27.0 * d[ii] ** 2)
            tt = t[first] - tg[ii]
            s[first] = s_g[ii] + k * tt ** 3
            sd[first] = 3 * k * tt ** 2
            sdd[first] = 6 * k * tt
            sddd[first] = 6 * k
        last = (x[i + 1] <= 0.0) & ~first
        if last.any():
            ii = i[last]
            k = x[ii] ** 1.5 / (27.0 * d[ii] ** 2)
            tt = tg[ii + 1] - t[last]
            s[last] = s_g[ii + 1] - k * tt ** 3
            sd[last] = 3 * k * tt ** 2
            sdd[last] = -6 * k * tt
            sddd[last] = 6 * k
        mid = ~(first | last)
        if mid.any():
            im = i[mid]
            tau = t[mid] - tg[im]
            xi, ui, dd = x[im], u[im], d[im]
            v = (u[im + 1] - ui) / dd
            sig = position_at(xi, ui, v, dd, tau)  # ∫0^σ dσ'/√x(σ') = τ
            xe = np.maximum(xi + 2 * ui * sig + v * sig ** 2, 0.0)
            s[mid] = s_g[im] + sig
            sd[mid] = np.sqrt(xe)
            sdd[mid] = ui + v * sig
            sddd[mid] = v * sd[mid]
        q, dq, ddq = self.path.evaluate(s)
        # the path's third derivative jumps at a knot (a gridpoint): take it from inside the stage the time
        # fell in, so that it goes with that stage's path jerk (a time a rounding error off a gridpoint lands
        # in the neighbouring stage with s on the knot, and the knot's other side gave a 2x jerk spike)
        inner = 1e-9 * d[i]
        dddq = third_derivative(self.path, np.clip(s, s_g[i] + inner, s_g[i + 1] - inner))
        qd = dq * sd[:, None]
        qdd = dq * sdd[:, None] + ddq * (sd ** 2)[:, None]
        jerk = dq * sddd[:, None] + 3 * ddq * (sd * sdd)[:, None] + dddq * (sd ** 3)[:, None]
        return s, sd, sdd, sddd, q, qd, qdd, jerk


@njit(cache=True, nogil=True, error_model="numpy")
def _stage_times_kernel(s, x, u, out):  # pragma: no cover - compiled
    N = s.shape[0]
    d0, de = s[1] - s[0], s[N - 1] - s[N - 2]
    out[0] = 3.0 * d0 / math.sqrt(x[1]) if x[1] > 0 else np.inf
    out[N - 2] = 3.0 * de / math.sqrt(x[N - 2]) if x[N - 2] > 0 else np.inf
    for i in range(1, N - 2):
        dd = s[i + 1] - s[i]
        out[i] = time_to1(x[i], u[i], (u[i + 1] - u[i]) / dd, dd)


def _stage_times(s, x, u) -> np.ndarray:
    """(N-1,) time of each stage, s (inf where x(σ) ≤ 0 inside a stage); s, x, u (N,)."""
    out = np.empty(s.shape[0] - 1)
    _stage_times_kernel(np.ascontiguousarray(s, dtype=float), np.ascontiguousarray(x, dtype=float),
                        np.ascontiguousarray(u, dtype=float), out)
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def _time_gradient_kernel(s, x, u, gl_x, gl_w, g):  # pragma: no cover - compiled
    N = s.shape[0]
    g[:] = 0.0
    g[1] += -1.5 * (s[1] - s[0]) * x[1] ** -1.5
    g[N - 2] += -1.5 * (s[N - 1] - s[N - 2]) * x[N - 2] ** -1.5
    for i in range(1, N - 2):
        dd = s[i + 1] - s[i]
        v = (u[i + 1] - u[i]) / dd
        gx = gu0 = gu1 = 0.0
        for k in range(gl_x.shape[0]):
            sig = dd * gl_x[k]
            xs = max(x[i] + 2.0 * u[i] * sig + v * sig * sig, 1e-300)
            w = -0.5 * dd * gl_w[k] * xs ** -1.5  # ∂/∂x(σ) of ∫ dσ/√x, per node
            # x(σ) = x_i + u_i (2σ − σ²/Δ) + u_{i+1} σ²/Δ
            gx += w
            gu0 += w * (2.0 * sig - sig * sig / dd)
            gu1 += w * sig * sig / dd
        g[i] += gx
        g[N + i] += gu0
        g[N + i + 1] += gu1


def _time_gradient(s, x, u) -> np.ndarray:
    """(2N,) gradient of the traversal time Σ stage times (:func:`_stage_times`) with respect to
    (x_0..x_{N-1}, u_0..u_{N-1}), s per (rad²/s²) and per (rad/s²); s, x, u (N,); requires x > 0 inside
    every stage (12-node Gauss–Legendre quadrature of the derivative of ∫ dσ/√x(σ))."""
    g = np.empty(2 * s.shape[0])
    _time_gradient_kernel(np.ascontiguousarray(s, dtype=float), np.ascontiguousarray(x, dtype=float),
                          np.ascontiguousarray(u, dtype=float), _GL_X, _GL_W, g)
    return g


@njit(cache=True, nogil=True)
def _slack_kernel(cols, data, b, z, idx, out):  # pragma: no cover - compiled
    for k in range(idx.shape[0]):
        r = idx[k]
        out[k] = b[r] - (data[r, 0] * z[cols[r, 0]] + data[r, 1] * z[cols[r, 1]] + data[r, 2] * z[cols[r, 2]])


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


class _LP:
    """min cost·z s.t. A_eq z = 0, A z ≤ b, lo ≤ z ≤ hi — HiGHS's dual simplex (the HiGHS that scipy
    ships, through its bindings ``scipy.optimize._highspy._core``, because ``linprog`` can neither add rows to a
    solved model and continue from its basis nor start from a given basis).

    Args: cost (nv,); A_eq (me, nv) scipy.sparse; rows: the inequality rows A z ≤ b as (cols, data, b), cols
    (m, 3) distinct column indices per row, data (m, 3) their coefficients, b (m,) (in the model after A_eq,
    in that order); lo, hi (nv,) (±inf: unbounded); basis: None (slack basis) or (col_status (nv,),
    row_status (me + m,)) int arrays as returned by :meth:`basis` for a model with the same columns and rows
    (the values of HiGHS's ``HighsBasisStatus``: :attr:`LOWER`, :attr:`BASIC`, :attr:`UPPER`). ``solve()`` / ``add_rows_and_solve(rows)`` return an object with ``status`` (0:
    optimal, 2: infeasible, 3: unbounded, 4: other), ``x`` (nv,) and ``message``.
    """

    @staticmethod
    def _core():
        try:
            from scipy.optimize._highspy import _core as hs
        except ImportError as exc:  # a private module: say which one when a scipy upgrade moves it
            raise ImportError("jerk-limited timing needs the HiGHS bindings scipy ships "
                              "(scipy.optimize._highspy._core, present in scipy 1.17)") from exc
        return hs

    #: values of ``HighsBasisStatus``: nonbasic at the lower bound, basic, nonbasic at the upper bound
    LOWER, BASIC, UPPER = 0, 1, 2

    @staticmethod
    def _status_members():
        # indexed by value: statuses travel as small ints, converted to the enum only at setBasis (an enum
        # comparison per row costs more than the simplex iterations of a warm-started LP)
        e = _LP._core().HighsBasisStatus
        return tuple(sorted(e.__members__.values(), key=lambda m: m.value))

    def __init__(self, cost, A_eq, rows, lo, hi, basis=None):
        hs = self._hs = self._core()
        nc = A_eq.shape[1]
        # the columns through a HighsLp, the rows through addRows: its numpy arguments go in as buffers, while
        # HighsLp's matrix fields convert element by element
        lp = hs.HighsLp()
        lp.num_col_ = nc
        lp.col_cost_ = np.asarray(cost, float)
        lp.col_lower_ = np.asarray(lo, float)
        lp.col_upper_ = np.asarray(hi, float)
        me = A_eq.shape[0]
        h = hs._Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)  # these LPs are too small for parallel simplex to pay on shared cores
        h.setOptionValue("simplex_strategy", 1)  # dual simplex
        # Devex pricing: steepest-edge weights cost a factorization solve per row at every (re)start, more
        # than the few iterations a warm start then needs
        h.setOptionValue("simplex_dual_edge_weight_strategy", 1)
        # no presolve: the rows are already scaled and without redundancy, presolve costs more than it saves
        # on these LPs and would discard a given basis
        h.setOptionValue("presolve", "off")
        h.passModel(lp)
        h.addRows(me, np.zeros(me), np.zeros(me), A_eq.nnz, A_eq.indptr[:-1].astype(np.int32),
                  A_eq.indices.astype(np.int32), A_eq.data)
        self._h = h
        self._lo, self._hi, self._me, self._x = np.asarray(lo, float), np.asarray(hi, float), me, None
        self._add(rows)
        if basis is not None:
            members = self._status_members()
            b = hs.HighsBasis()
            b.col_status = [members[v] for v in basis[0].tolist()]
            b.row_status = [members[v] for v in basis[1].tolist()]
            b.valid = True
            h.setBasis(b)

    def solve(self):
        h, hs = self._h, self._hs
        h.run()
        st = h.getModelStatus()
        out = type("LPResult", (), {})()
        out.message = h.modelStatusToString(st)
        out.status = {hs.HighsModelStatus.kOptimal: 0, hs.HighsModelStatus.kInfeasible: 2,
                      hs.HighsModelStatus.kUnbounded: 3}.get(st, 4)
        out.x = self._x = np.array(h.getSolution().col_value) if out.status == 0 else None
        return out

    def _add(self, rows):
        cols, data, b = rows
        m = b.shape[0]
        self._h.addRows(m, np.full(m, -np.inf), np.ascontiguousarray(b, float), 3 * m,
                        np.arange(0, 3 * m, 3, dtype=np.int32), np.ascontiguousarray(cols, np.int32).ravel(),
                        np.ascontiguousarray(data, float).ravel())

    def add_rows_and_solve(self, rows):
        self._add(rows)
        return self.solve()

    def basis(self):
        """(col_status (nv,), row_status (rows,)): the basis of the last optimal solve, int8 arrays of
        ``HighsBasisStatus`` values, rows in model order; None if HiGHS has none.

        From HiGHS's list of basic variables (an int array, where reading the statuses would create one
        enum object per row): every other column is at the bound its value is nearest, every other
        inequality row at its upper bound (its lower one is −inf), every other equality row at its (only)
        value, given as lower."""
        status, basic = self._h.getBasicVariables()
        if status != self._hs.HighsStatus.kOk or self._x is None:
            return None
        x, lo, hi = self._x, self._lo, self._hi
        with np.errstate(invalid="ignore"):
            upper = np.isfinite(hi) & (np.abs(x - hi) < np.abs(x - lo))
        col = np.where(upper, _LP.UPPER, _LP.LOWER).astype(np.int8)
        row = np.full(self._h.getNumRow(), _LP.UPPER, np.int8)
        row[:self._me] = _LP.LOWER
        col[basic[basic >= 0]] = _LP.BASIC
        row[-1 - basic[basic < 0]] = _LP.BASIC  # a basic row r is listed as −1 − r
        return col, row


def _check_points(s, M=None):
    """The check points of every stage and x, u, v at each as linear forms in the variables.

    Args: s (N,) gridpoints; M: sub-intervals per stage (even; None: ``_SUBDIVISIONS``), the check points
        are at σ = kΔ/M, k = 0..M (k ≥ 1 on the two end stages: x = 0 at rest).
    Returns (p, stage, var (K, 3), X (K, 3), U (K, 3), V (K, 3), interior (K,) bool) where p indexes the
    M(N-1)+1 collocation points s_i + kΔ_i/M (index M i + k) and the variables are ordered
    (x_0..x_{N-1}, u_0..u_{N-1}).
    """
    M = _SUBDIVISIONS if M is None else M
    N = s.shape[0]
    d = np.diff(s)
    e = N - 2
    r = np.arange(1, M + 1) / M
    # start stage: x = x1 r^{4/3}, u = (2/3) x1 r^{1/3} / Δ; end stage its mirror, r = (L - s) / Δ
    P = np.concatenate((np.arange(1, M + 1), M * e + M - np.arange(M, 0, -1)))
    rr = np.concatenate((r, r[::-1]))
    ST = np.concatenate((np.zeros(M, int), np.full(M, e)))
    VAR = np.concatenate((np.full((M, 3), 1), np.full((M, 3), e)))
    sgn = np.concatenate((np.ones(M), -np.ones(M)))
    dd0 = np.concatenate((np.full(M, d[0]), np.full(M, d[e])))
    zero2 = np.zeros(2 * M)
    X = np.stack([rr ** (4 / 3), zero2, zero2], 1)
    U = np.stack([sgn * 2 / 3 * np.cbrt(rr) / dd0, zero2, zero2], 1)
    V = np.zeros((2 * M, 3))
    i = np.arange(1, N - 2)
    m = i.shape[0]
    # interior stage i at σ = kΔ/M: x = x_i + u_i (2σ − σ²/Δ) + u_{i+1} σ²/Δ, u = u_i + (u_{i+1} − u_i) σ/Δ,
    # v = (u_{i+1} − u_i)/Δ
    f = np.arange(M + 1) / M  # σ/Δ
    dd = np.repeat(d[i], M + 1)
    ff = np.tile(f, m)
    one = np.ones(m * (M + 1))
    Xi = np.stack([one, dd * (2 * ff - ff ** 2), dd * ff ** 2], 1)
    Ui = np.stack([0 * one, 1 - ff, ff], 1)
    Vi = np.stack([0 * one, -1.0 / dd, 1.0 / dd], 1)
    vari = np.repeat(np.stack([i, N + i, N + i + 1], 1), M + 1, axis=0)
    return (np.concatenate((P, (M * i[:, None] + np.arange(M + 1)[None, :]).ravel())),
            np.concatenate((ST, np.repeat(i, M + 1))), np.concatenate((VAR, vari)),
            np.concatenate((X, Xi)), np.concatenate((U, Ui)), np.concatenate((V, Vi)),
            np.concatenate((np.zeros(2 * M, bool), np.ones((M + 1) * m, bool))))


def solve_jerk_limited(path, s, x_ref, dynamics, *, velocity_limit, acceleration_limit, torque_limit,
                       jerk_limit, max_iterations: int = 15, rtol: float = 1e-3, margin: float = 1e-4,
                       verify_period: float | None = 1e-3, max_rounds: int = 6,
                       verify_tol: float = 2e-4, tool_speed=None) -> JerkSolution:
    """Time-optimal rest-to-rest timing of ``path`` under velocity, acceleration, torque and jerk limits,
    verified on the output.

    The LPs hold the rows at three points per stage; in between a row can exceed its limit by its curvature
    over half a stage. So the output is sampled every ``verify_period`` s (joint velocity, acceleration and
    jerk by eq. (1), torque by ``dynamics``); where a joint's limit is exceeded by a ratio r > 1 +
    ``verify_tol`` on a stage (r the largest over the stage's samples), that joint's limit at the stage's
    check points is divided by r (and tightened by ``margin``) — the rest of the path keeps its limits —
    and the problem solved again from the last profile and LP basis, at most ``max_rounds`` times (then a
    ValueError if a limit is still exceeded by more than :data:`ACCEPT_TOL`; ``verify_period`` None:
    no verification; the tool speed limit, one number, is divided as a whole). Where ``x_ref`` is 0 inside the path
    (the torque-only timing stops there, so every timing must), the parts between the stops are timed rest
    to rest and joined (:func:`_through_stops`).

    Args: as :func:`_solve_once`, plus verify_period (s), max_rounds and verify_tol (relative), and
        tool_speed: None or (speed, limit): ``speed(q, v)`` (P, n) × (P, n) → (P,) the norm of a frame's
        linear velocity for joint velocities v (m/s; e.g. |J_v(q) v|, linear in v), ``limit`` m/s — the
        first-order row |speed(q, q')| ṡ ≤ limit, imposed and verified like the joint velocity limits.
    Returns: :class:`JerkSolution` (``rounds`` solves; ``solve_ms`` over all of them).
    Raises: ValueError as :func:`_solve_once` (except for stops inside the path, handled), or a whole stage
        at rest in ``x_ref``.
    """
    t_start = time.perf_counter()
    s = np.asarray(s, dtype=float)
    x_ref = np.asarray(x_ref, dtype=float)
    stops = np.flatnonzero(x_ref[1:-1] <= STOP_RATIO * max(float(x_ref.max()), 1e-300)) + 1
    if stops.size:
        return _through_stops(path, s, x_ref, stops, t_start, dynamics, velocity_limit=velocity_limit,
                              acceleration_limit=acceleration_limit, torque_limit=torque_limit,
                              jerk_limit=jerk_limit, max_iterations=max_iterations, rtol=rtol, margin=margin,
                              verify_period=verify_period, max_rounds=max_rounds, verify_tol=verify_tol,
                              tool_speed=tool_speed)
    lims = [np.asarray(v, float).copy() for v in (velocity_limit, acceleration_limit, torque_limit, jerk_limit,
                                                  np.atleast_1d(np.inf if tool_speed is None else tool_speed[1]))]
    N = s.shape[0]
    M = _SUBDIVISIONS
    # the joint limits the rounds solve with, per collocation point s_i + kΔ_i/M (index M i + k) and joint
    work = [np.tile(v, (M * (N - 1) + 1, 1)) for v in lims[:4]] + [lims[4].copy()]
    x0, start = np.asarray(x_ref, float), None
    # the LP rows (their order) and basis the last round ended with: the next round, on the same gridpoints
    # and rows with rescaled limits, starts from them
    warm = {}
    lp_ms, sol = 0.0, None
    for round_ in range(max_rounds + 1):
        sol = _solve_once(path, s, x0, dynamics, velocity_limit=work[0], acceleration_limit=work[1],
                          torque_limit=work[2], jerk_limit=work[3], max_iterations=max_iterations, rtol=rtol,
                          margin=margin, tool_speed=None if tool_speed is None else (tool_speed[0], work[4][0]),
                          start=start, warm=warm)
        lp_ms += sol.lp_ms
        if verify_period is None:
            break
        t = np.append(np.arange(0.0, sol.duration, verify_period), sol.duration)
        s_t, _, _, _, q, qd, qdd, jerk = sol.sample(t)
        # the stage of every sample: a limit exceeded there is tightened at that stage's check points only
        # (the overshoot is the rows' curvature between them), the rest of the path keeps its limits
        stage = np.clip(np.searchsorted(s, s_t, side="right") - 1, 0, N - 2)
        values = [np.abs(qd), np.abs(qdd), None, np.abs(jerk)]
        if np.isfinite(lims[2]).any():
            values[2] = np.abs(np.atleast_2d(dynamics.rnea(q, qd, qdd)))
        over, worst_ratio = False, 1.0
        for k, val in enumerate(values):
            if val is None:
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                ratio = np.where(np.isfinite(lims[k])[None, :], val / lims[k][None, :], 0.0)  # (samples, n)
            bad = ratio > 1.0 + verify_tol
            if bad.any():
                over, worst_ratio = True, max(worst_ratio, float(ratio.max()))
                worst = np.ones((N - 1, ratio.shape[1]))  # per stage and joint
                np.maximum.at(worst, stage, np.where(bad, ratio, 1.0))
                point = np.ones_like(work[k])  # per check point: the worst of the stages it belongs to
                for j in range(M + 1):
                    idx = M * np.arange(N - 1) + j
                    point[idx] = np.maximum(point[idx], worst)
                work[k] = np.where(point > 1.0, work[k] / point * (1.0 - margin), work[k])
        if tool_speed is not None:
            ratio = float(tool_speed[0](q, qd).max()) / lims[4][0]
            if ratio > 1.0 + verify_tol:
                over, worst_ratio = True, max(worst_ratio, ratio)
                work[4] = work[4] / ratio * (1.0 - margin)
        if not over or (round_ == max_rounds and worst_ratio <= 1.0 + ACCEPT_TOL):
            break
        if round_ == max_rounds:   # never an output further above a limit: refused, naming the excess
            raise ValueError(f"jerk-limited timing: a limit is still exceeded by {worst_ratio - 1.0:.3%} on the "
                             f"{verify_period:g} s samples after {max_rounds + 1} solves")
        start = sol
    sol.rounds = round_ + 1
    sol.lp_ms = lp_ms
    sol.solve_ms = (time.perf_counter() - t_start) * 1e3
    return sol


def _through_stops(path, s, x_ref, stops, t_start, dynamics, **kw) -> JerkSolution:
    """Where the torque-only profile stops inside the path (x_ref = 0 at gridpoints ``stops``: no timing
    can pass there moving), each part between stops is timed rest to rest by :func:`solve_jerk_limited`
    and the parts joined; a part with fewer than 4 gridpoints gets stage midpoints added.

    Raises: ValueError: two consecutive gridpoints at rest (the path cannot be traversed there), or as
        :func:`solve_jerk_limited` for a part.
    """
    cuts = np.concatenate(([0], stops, [s.shape[0] - 1]))
    still = np.flatnonzero(np.diff(cuts) == 1)
    if still.size:
        raise ValueError(f"jerk-limited timing: the torque-only solution is at rest on the whole stage from s = "
                         f"{s[cuts[still[0]]]:.6g}: the limits allow no motion there")
    parts = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        sp_, xp = s[a:b + 1], x_ref[a:b + 1].copy()
        while sp_.shape[0] < 4:
            mid = 0.5 * (sp_[1:] + sp_[:-1])
            xm = 0.5 * (xp[1:] + xp[:-1])
            sp_ = np.insert(sp_, np.arange(1, sp_.shape[0]), mid)
            xp = np.insert(xp, np.arange(1, xp.shape[0]), xm)
        xp[0] = xp[-1] = 0.0
        parts.append(solve_jerk_limited(path, sp_, xp, dynamics, **kw))
    s_all = np.concatenate([parts[0].s] + [p.s[1:] for p in parts[1:]])
    x_all = np.concatenate([parts[0].x] + [p.x[1:] for p in parts[1:]])
    u_all = np.concatenate([parts[0].u] + [p.u[1:] for p in parts[1:]])
    t_all, offset = [parts[0].t_grid], parts[0].duration
    for p in parts[1:]:
        t_all.append(p.t_grid[1:] + offset)
        offset += p.duration
    out = JerkSolution(path, s_all, x_all, u_all, np.concatenate(t_all), float(offset),
                       sum(p.iterations for p in parts), [float(sum(p.durations[-1] for p in parts))],
                       (time.perf_counter() - t_start) * 1e3, sum(p.lp_ms for p in parts),
                       max(p.rounds for p in parts), sum(p.lp_solves for p in parts),
                       [r for p in parts for r in p.lp_rows], len(parts))
    return out


def _solve_once(path, s, x_ref, dynamics, *, velocity_limit, acceleration_limit, torque_limit,
                jerk_limit, max_iterations: int = 15, rtol: float = 1e-3,
                margin: float = 1e-4, tool_speed=None, start=None, warm=None) -> JerkSolution:
    """Time-optimal rest-to-rest timing of ``path`` under velocity, acceleration, torque and jerk limits.

    Args:
        path: :class:`~.path.JointPath`; s: (N,) gridpoints (N ≥ 4) with every knot among them (e.g. a
            TOPP-RA segment's ``s``); x_ref: (N,) sd² of the torque-only TOPP-RA solution on ``s`` (the first
            linearization point where there is no start; any positive profile works).
        dynamics: engine with batched ``rnea`` (N·m), the model (payload included) the torque limit is for.
        velocity_limit, acceleration_limit, torque_limit, jerk_limit: (n,) rad/s, rad/s², N·m, rad/s³
            (inf: none), or (M (N-1) + 1, n) per collocation point s_i + kΔ_i/M (index M i + k, M =
            ``_SUBDIVISIONS``). Limits as applied (scales and margins already in).
        max_iterations: SLP iterations; rtol: stop when an iteration shortens the duration by less.
        margin: fraction the velocity, torque and jerk limits are tightened by inside the solver, so that
            the rows' curvature between check points (half a stage) cannot take the output above the limit.
        tool_speed: None or (speed, limit) as in :func:`solve_jerk_limited`.
        start: None or a :class:`JerkSolution` of the same path (any gridpoints): the first LP's tangents and
            rows are taken at its profile; None: at the solution on a coarser grid (the knots or every
            ``_COARSE``-th gridpoint; at least ``_COARSE_MIN`` gridpoints), else at ``x_ref``.
        warm: None or a dict, filled with the last LP's rows and basis; given again (same ``s``, the same
            limits finite), the first LP starts from them.

    Returns:
        :class:`JerkSolution`.

    Raises:
        ValueError: fewer than 4 gridpoints, ``x_ref`` zero inside the path (it must stop there: time each
            side separately), or no positive-speed profile meets the limits (names the LP's status).
    """
    t_start = time.perf_counter()
    s = np.asarray(s, dtype=float)
    N = s.shape[0]
    if N < 4:
        raise ValueError(f"jerk-limited timing: need at least 4 gridpoints, got {N}")
    x_ref = np.asarray(x_ref, dtype=float)
    stops = np.flatnonzero(x_ref[1:-1] <= 1e-9 * max(float(x_ref.max()), 1e-300)) + 1
    if stops.size:
        raise ValueError(f"jerk-limited timing: the torque-only solution stops at s = {s[stops[0]]:.6g} inside the "
                         "path (a cusp or turn); split the path there and time each part")
    if start is None and N >= _COARSE_MIN:
        # the first linearization point: the same problem on a coarser grid (a few times cheaper, itself
        # started from a coarser one), its profile read here; tangents there are near the answer, so
        # the first LP starts with nearly its final rows instead of those tight at the TOPP-RA profile
        idx = np.unique(np.r_[np.arange(0, N, _COARSE), N - 1])
        # the knots alone where they are few: each coarse stage is then one knot interval (its third
        # derivative exact)
        kn = path.knots
        k = np.clip(np.searchsorted(kn, s), 1, kn.shape[0] - 1)
        on_knot = np.flatnonzero(np.minimum(np.abs(s - kn[k - 1]), np.abs(s - kn[k])) <= 1e-12 * s[-1])
        if 4 <= on_knot.shape[0] <= N // 2:
            idx = np.unique(np.r_[0, on_knot, N - 1])
        def joint(lim):  # per-point limits: the coarse grid (a start only) takes each joint's smallest
            lim = np.asarray(lim, float)
            return lim.min(axis=0) if lim.ndim == 2 else lim

        try:
            start = _solve_once(path, s[idx], x_ref[idx], dynamics, velocity_limit=joint(velocity_limit),
                                acceleration_limit=joint(acceleration_limit), torque_limit=joint(torque_limit),
                                jerk_limit=joint(jerk_limit), max_iterations=_COARSE_ITERATIONS, rtol=rtol,
                                margin=margin, tool_speed=tool_speed)
        except ValueError:  # the coarse grid stops somewhere: start from the TOPP-RA profile
            start = None
    n = path.n
    d = np.diff(s)
    M = _SUBDIVISIONS
    # every limit per collocation point s_i + kΔ_i/M (index M i + k) and joint: (M (N-1) + 1, n)
    shape = (M * (N - 1) + 1, n)
    vlim = np.broadcast_to(np.asarray(velocity_limit, float) * (1.0 - margin), shape)
    alim = np.broadcast_to(np.asarray(acceleration_limit, float), shape)
    tlim = np.broadcast_to(np.asarray(torque_limit, float) * (1.0 - margin), shape)
    jlim = np.broadcast_to(np.asarray(jerk_limit, float) * (1.0 - margin), shape)
    s_eval = np.append((s[:-1, None] + d[:, None] * (np.arange(M) / M)[None, :]).ravel(), s[-1])
    q, dq, ddq = path.evaluate(s_eval)
    dddq = third_derivative(path, 0.5 * (s[:-1] + s[1:]))  # (N-1, n) per stage
    use_torque = bool(np.isfinite(tlim).any())
    if use_torque:
        a, b, c = torque_coefficients(dynamics, q, dq, ddq)
    p, st, var, X, U, V, interior = _check_points(s)
    K = p.shape[0]
    nv = 2 * N

    def forms(alpha, beta, gamma):
        """(K, n, 3) coefficients of alpha X + beta U + gamma V, alpha.. (K, n)."""
        return (alpha[:, :, None] * X[:, None, :] + beta[:, :, None] * U[:, None, :]
                + gamma[:, :, None] * V[:, None, :])

    rows_fixed, rhs_fixed = [], []
    zero = np.zeros((K, n))
    dqp, ddqp = dq[p], ddq[p]
    vlim, alim, tlim_p, jlim_p = vlim[p], alim[p], tlim[p], jlim[p]  # (K, n)
    vel = np.isfinite(vlim)
    if vel.any() or tool_speed is not None:
        # q'^2 x / V^2 ≤ 1 (and |dp/ds|² x / v_tool² ≤ 1): the same linear form in x for every joint, so
        # only the tightest row per point
        tight = np.where(vel, dqp ** 2 / np.where(vel, vlim, 1.0) ** 2, 0.0).max(axis=1, keepdims=True)
        if tool_speed is not None:
            speed = np.asarray(tool_speed[0](q, dq), float)[p]
            tight = np.maximum(tight, ((speed / (tool_speed[1] * (1.0 - margin))) ** 2)[:, None])
        rows_fixed.append(tight[:, :, None] * X[:, None, :])
        rhs_fixed.append(np.ones((K, 1)))
    acc = np.isfinite(alim)
    if acc.any():
        A = np.where(acc, alim, 1.0)
        f = forms(ddqp / A, dqp / A, zero)
        rows_fixed += [f, -f]
        r = np.where(acc, 1.0, np.inf)
        rhs_fixed += [r, r]
    if use_torque:
        T = np.where(np.isfinite(tlim_p), tlim_p, 1.0)
        f = forms(b[p] / T, a[p] / T, zero)
        fin = np.isfinite(tlim_p)
        rows_fixed += [f, -f]
        rhs_fixed += [np.where(fin, 1.0 - c[p] / T, np.inf), np.where(fin, 1.0 + c[p] / T, np.inf)]
    # x and u are continuous at a gridpoint, so a row without v (all but the jerk rows) at the end of a stage
    # is, under the equalities, the same row as at the start of the next stage: imposed once
    dup = (interior & (p == M * st + M)) | (~interior & (st == 0) & (p == M))
    rhs_fixed = [np.where(dup[:, None], np.inf, r) for r in rhs_fixed]
    # x ≥ 0 at the check points inside the interior stages (x is quadratic there)
    mids = interior & (p % M != 0)
    pos_rows = -X[mids][:, None, :]
    pos_var = var[mids]

    def assemble(blocks, rhs, vars_):
        """(cols (m, 3), data (m, 3), b (m,)) of the finite rows of ``blocks``."""
        data, ci, bb = [], [], []
        for f, r, vv in zip(blocks, rhs, vars_):
            keep = np.isfinite(r)
            kk, jj = np.nonzero(keep)
            m = kk.shape[0]
            if m == 0:
                continue
            coef = f[kk, jj, :]  # (m, 3)
            cols = vv[kk, :]
            # each row scaled to a largest coefficient of 1 (HiGHS's tolerances are absolute)
            scale = np.abs(coef).max(axis=1)
            scale = np.where(scale > 0, scale, 1.0)
            data.append(coef / scale[:, None])
            ci.append(cols)
            bb.append(r[kk, jj] / scale)
        return np.concatenate(ci), np.concatenate(data), np.concatenate(bb)

    fixed_c, fixed_d, fixed_b = assemble(rows_fixed + [pos_rows], rhs_fixed + [np.zeros((pos_rows.shape[0], 1))],
                                [var] * len(rows_fixed) + [pos_var])
    # equalities: interior stages x_{i+1} - x_i - Δ(u_i + u_{i+1}) = 0; u_1 = 2 x_1 / (3 Δ_0);
    # u_{N-2} = -2 x_{N-2} / (3 Δ_{N-2})
    i = np.arange(1, N - 2)
    m = i.shape[0]
    er = np.concatenate((np.repeat(np.arange(m), 4), [m, m, m + 1, m + 1]))
    ec = np.concatenate((np.stack([i + 1, i, N + i, N + i + 1], 1).ravel(), [N + 1, 1, 2 * N - 2, N - 2]))
    ev = np.concatenate((np.stack([np.ones(m), -np.ones(m), -d[i], -d[i]], 1).ravel(),
                         [1.0, -2.0 / (3.0 * d[0]), 1.0, 2.0 / (3.0 * d[N - 2])]))
    row = m + 2
    A_eq = sp.csr_matrix((ev, (er, ec)), shape=(row, nv))
    # bounds: x_0 = u_0 = x_{N-1} = u_{N-1} = 0; on the end stages the jerk is exactly x^{3/2} g(r),
    # g = p''' r² + 2 p''(Δ r) r / Δ + (2/9) p'(Δ r) / Δ² (r = (s - s_0)/Δ resp. (L - s)/Δ, p below): a bound
    # on x_1 and x_{N-2}
    # |u| ≤ u_box keeps a working-set LP bounded before the rows that bound u are in it; it is 10³ × the
    # TOPP-RA profile's largest |sdd|, which bounds every feasible u, and never active (checked below)
    u_box = 1e3 * max(float(np.abs(np.diff(x_ref) / (2.0 * d)).max()), 1e-3)
    lo = np.concatenate((np.zeros(N), np.full(N, -u_box)))
    hi = np.concatenate((np.full(N, np.inf), np.full(N, u_box)))
    hi[[0, N - 1, N, 2 * N - 1]] = 0.0
    lo[[N, 2 * N - 1]] = 0.0
    for stage, xi, sgn in ((0, 1, 1), (N - 2, N - 2, -1)):
        # the path walked away from the end at rest: p(Δ r) = q(s_0 + Δ r) resp. q(L − Δ r), so p' = sgn q',
        # p'' = q'', p''' = sgn q'''; g at r = 0, 1/2, 1 (check points in that order)
        pts = [M * stage, M * stage + M // 2, M * stage + M][::sgn]
        g = (sgn * dddq[stage] * np.array([0.0, 0.25, 1.0])[:, None]
             + 2 * ddq[pts] * np.array([0.0, 0.5, 1.0])[:, None] / d[stage]
             + sgn * (2 / 9) * dq[pts] / d[stage] ** 2)  # (3, n)
        # q' is quadratic, q'' linear and q''' constant on a stage, so g is a quadratic in r: its largest
        # |g| on [0, 1] is at an end or at the vertex
        a2 = 2 * g[2] - 4 * g[1] + 2 * g[0]
        a1 = 4 * g[1] - 3 * g[0] - g[2]
        with np.errstate(divide="ignore", invalid="ignore"):
            rv = np.clip(np.where(a2 != 0, -a1 / (2 * a2), 0.0), 0.0, 1.0)
        gmax = np.maximum(np.abs(g).max(0), np.abs(a2 * rv ** 2 + a1 * rv + g[0]))
        jl = jlim[pts].min(axis=0)  # the stage's check points
        with np.errstate(divide="ignore"):
            cap = np.where(np.isfinite(jl), (jl / gmax) ** (2 / 3), np.inf).min()
        hi[xi] = min(hi[xi], cap)
    jerk_on = bool(np.isfinite(jlim).any())  # jerk rows on the interior stages (the end stages: bounds above)
    L = forms(dddq[st], 3 * ddqp, dqp)  # (K, n, 3): q''' x + 3 q'' u + q' v
    w_grid = np.zeros(N)
    w_grid[1:] += 0.5 * d
    w_grid[:-1] += 0.5 * d

    # the reference point of the first working set: the TOPP-RA profile (u at the gridpoints from the
    # neighbouring stages' sdd)
    u_stage = np.diff(x_ref) / (2.0 * d)
    if start is None:
        z_ref = np.concatenate((x_ref, [0.0], 0.5 * (u_stage[1:] + u_stage[:-1]), [0.0]))
        xbar_pts = np.interp(s_eval[p], s, x_ref)
    else:
        z_ref = np.concatenate(start._profile(s))
        xbar_pts = start._profile(s_eval[p])[0]
    ws = warm if warm is not None else {}
    ws.update(lps=0, rows=[])
    ws.setdefault("order", None)

    # all inequality rows, built once, 3 entries each (cols, data (m, 3), b_ub (m,)): the fixed rows, then
    # the jerk rows (interior check points (kj) × joints with a jerk limit (jj), + then −), whose values
    # every LP rewrites
    kj, jj = np.nonzero(np.isfinite(jlim_p[interior]))
    Jr = jlim_p[interior][kj, jj]  # (mj,) the limit of each jerk row
    Lj = L[interior][kj, jj, :]  # (mj, 3)
    Xj = X[interior][kj]
    mj = kj.shape[0] if jerk_on else 0
    nf = fixed_b.shape[0]
    cols = np.concatenate((fixed_c, np.tile(var[interior][kj], (2, 1))[:2 * mj])).astype(np.int32)
    data = np.concatenate((fixed_d, np.zeros((2 * mj, 3))))
    b_ub = np.concatenate((fixed_b, np.zeros(2 * mj)))
    # the stage of every inequality row: the smallest gridpoint index among its variables
    row_stage = np.where(cols < N, cols, cols - N).min(axis=1)
    # the end stages' rows hold x_1 (resp. x_{N-2}) alone (var repeats it, the other coefficients 0): their
    # zero entries moved to the fixed columns x_0 and u_0, so that no row names a column twice
    same = cols[:, 1] == cols[:, 0]
    cols[same, 1] = 0
    cols[same, 2] = N

    all_rows = np.arange(b_ub.shape[0])

    def slack_at(z, idx=None):
        """b − A z of the inequality rows ``idx`` (None: all)."""
        idx = all_rows if idx is None else idx
        out = np.empty(idx.shape[0])
        _slack_kernel(cols, data, b_ub, np.ascontiguousarray(z, dtype=float), idx, out)
        return out

    def take(idx):
        return cols[idx], data[idx], b_ub[idx]

    def set_jerk_rows(xbar_pts):
        """The jerk rows' tangents at x̄ (the check points' x) into data and b_ub."""
        if mj:
            _jerk_rows_kernel(np.ascontiguousarray(xbar_pts[interior], dtype=float),
                              1e-9 * max(float(xbar_pts.max()), 1e-12), kj, Lj, Xj, Jr, nf, data, b_ub)

    def guessed_basis(order, z0):
        """A starting basis for the LP on rows ``order`` from a profile z0 near its answer: a vertex has as
        many active rows as degrees of freedom (N − 3: 2N variables, N − 1 equalities, 4 fixed), about one
        per stage, so in each stage the row with the least slack at z0 is taken active (nonbasic at its
        bound), those of the N − 3 stages with the least slack, every other row and free column basic. A
        singular guess is repaired by HiGHS (slack columns swapped in)."""
        slack = slack_at(z0, order)
        stage = row_stage[order]
        by = np.lexsort((slack, stage))  # by stage, least slack first
        least = by[np.r_[True, stage[by][1:] != stage[by][:-1]]]
        active = np.zeros(order.shape[0], bool)
        active[least[np.argsort(slack[least])][:N - 3]] = True
        col_status = np.full(nv, _LP.BASIC, np.int8)
        col_status[[0, N - 1, N, 2 * N - 1]] = _LP.LOWER
        row_status = np.concatenate((np.full(A_eq.shape[0], _LP.LOWER, np.int8),
                                     np.where(active, _LP.UPPER, _LP.BASIC).astype(np.int8)))
        return col_status, row_status

    def lp(xbar_pts, xbar_grid, zfull=None, trust=True, guess=False):
        set_jerk_rows(xbar_pts)
        xg = np.maximum(xbar_grid, 1e-6 * max(float(xbar_grid.max()), 1e-12))
        if zfull is None:  # d/dx of Σ w_i x_i^{-1/2} (the gridpoint x̄ only: the first LP, no u yet)
            cost = np.zeros(nv)
            cost[:N] = -w_grid * xg ** -1.5
        else:  # the gradient of the traversal time at z
            cost = _time_gradient(s, np.maximum(zfull[:N], 1e-300), zfull[N:])
        cost /= np.abs(cost).max()
        t0 = time.perf_counter()
        # working set: the LP is solved on the rows with little slack at the last answer (at first the
        # TOPP-RA profile) and the rows of the previous LP, then every row is checked at the solution and
        # the violated ones added until none is (a subset's optimum that meets every row is the full LP's
        # optimum)
        z0 = zfull if zfull is not None else z_ref
        lo_t, hi_t = lo, hi
        if zfull is not None and trust:
            # trust region on x at the gridpoints: the answer stays near z, where the working set was chosen
            lo_t, hi_t = lo.copy(), hi.copy()
            hi_t[1:N - 1] = np.minimum(hi[1:N - 1], _TRUST * zfull[1:N - 1])
            lo_t[1:N - 1] = np.minimum(np.maximum(lo[1:N - 1], zfull[1:N - 1] / _TRUST), hi_t[1:N - 1])
        keep = slack_at(z0) < _WS_SLACK
        order, basis = ws["order"], None
        if order is not None and ws["shape"] != data.shape:  # a different row set: a cold start
            order = None
        if order is not None:
            # the previous LP's rows first, in its order, with its final basis (the new rows' slacks basic):
            # the dual simplex starts where the last LP ended instead of from the slack basis
            keep[order] = False
            new = np.flatnonzero(keep)
            col_status, row_status = ws["basis"]
            me = A_eq.shape[0]
            # rows basic in the last basis (inactive) with much slack at z leave: removing a basic row keeps
            # the basis valid, and the model small
            basic = row_status[me:] == _LP.BASIC
            stay = ~basic | (slack_at(z0, order) < _WS_SLACK)
            keep[:] = False
            keep[order[stay]] = True
            keep[new] = True
            order = np.concatenate((order[stay], new))
            basis = (col_status, np.concatenate((row_status[:me], row_status[me:][stay],
                                                 np.full(new.shape[0], _LP.BASIC, np.int8))))
        else:
            order = np.flatnonzero(keep)
            if guess:
                basis = guessed_basis(order, z0)
        lpk = _LP(cost, A_eq, take(order), lo_t, hi_t, basis)
        res = lpk.solve()
        rounds = 1
        while res.status == 0:
            slack = slack_at(res.x)
            if not ((slack < -1e-9) & ~keep).any():
                break
            add = np.flatnonzero((slack < _WS_ADD) & ~keep)  # the violated rows and their near neighbours
            keep[add] = True
            order = np.concatenate((order, add))
            res = lpk.add_rows_and_solve(take(add))  # from the last basis (dual simplex)
            rounds += 1
        if res.status == 0:
            ws["basis"] = lpk.basis()
            ws["order"], ws["shape"] = (order if ws["basis"] is not None else None), data.shape
        ws["lps"] += rounds
        ws["rows"].append(int(keep.sum()))
        return res, (time.perf_counter() - t0) * 1e3

    def at_points(z):
        return (X * z[var]).sum(axis=1)

    # first LP: tangents at the reference profile (an upper bound of every feasible x, where the tangent is
    # conservative; any x̄ > 0 gives a feasible answer). If that answer stops somewhere (x = 0 inside a
    # stage), the linearization point moves towards it (geometric mean, at most 8× down) and again
    xbar = z_ref[:N].copy()
    lp_ms, it, T, best = 0.0, 0, np.inf, None
    if start is not None:
        # the start profile is near the answer but need not meet every row on these gridpoints: the first LP
        # is an SLP step from it (its time gradient, the trust region around it) and without the trust region
        # if that has no feasible point
        res, ms = lp(xbar_pts, xbar, z_ref, guess=True)
        if res.status != 0:
            res, ms2 = lp(xbar_pts, xbar, z_ref, trust=False)
            ms += ms2
        lp_ms += ms
        it += 1
        if res.status == 0:
            best, T = res.x, _stage_times(s, res.x[:N], res.x[N:]).sum()
    while not np.isfinite(T) and it < max(1, max_iterations // 2):
        res, ms = lp(xbar_pts, xbar)
        lp_ms += ms
        it += 1
        if res.status != 0:
            raise ValueError(f"jerk-limited timing: the linear program failed ({res.message})")
        best, T = res.x, _stage_times(s, res.x[:N], res.x[N:]).sum()
        if np.isfinite(T):
            break
        xbar_pts = np.maximum(np.sqrt(np.maximum(xbar_pts * at_points(res.x), 0.0)), xbar_pts / 8.0)
        xbar = np.maximum(np.sqrt(np.maximum(xbar * res.x[:N], 0.0)), xbar / 8.0)
    if not np.isfinite(T):
        raise ValueError("jerk-limited timing: no profile with positive speed found (the linear programs "
                         "stop the path somewhere)")
    z = best
    durations = [float(T)]
    # SLP: tangents at z, the objective the traversal time's gradient at z, x within the trust region,
    # backtracking on the segment from z to the answer
    while it < max_iterations:
        res, ms = lp(at_points(z), z[:N], z)
        lp_ms += ms
        it += 1
        if res.status != 0:
            break
        cand = res.x
        alpha, improved = 1.0, False
        while alpha > 1e-3:  # the segment z → cand is feasible (convex LP set containing both)
            trial = z + alpha * (cand - z)
            Tt = _stage_times(s, trial[:N], trial[N:]).sum()
            if Tt < T:
                improved = True
                break
            alpha *= 0.5
        if not improved:
            break
        gain = (T - Tt) / T
        z, T = trial, Tt
        durations.append(float(T))
        if gain < rtol:
            break
    x, u = np.maximum(z[:N], 0.0), z[N:]
    if np.abs(u).max() > 0.5 * u_box:
        raise ValueError("jerk-limited timing: the path acceleration is unbounded (a joint without torque, "
                         "acceleration and jerk limits?)")
    x[0] = x[-1] = 0.0
    t_grid = np.concatenate(([0.0], np.cumsum(_stage_times(s, x, u))))
    return JerkSolution(path, s, x, u, t_grid, float(t_grid[-1]), it, durations,
                        (time.perf_counter() - t_start) * 1e3, lp_ms, lp_solves=ws["lps"], lp_rows=ws["rows"])
