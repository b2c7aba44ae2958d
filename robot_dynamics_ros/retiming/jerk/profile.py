"""A jerk-limited timing of a path: :class:`JerkSolution` (x = ṡ² and u = s̈ at the gridpoints, its stage
times and sampling), the stage times of any (x, u) profile and their gradient, and the path's third
derivative. The shape of x(s) per stage (constant path jerk on a stage that starts or ends at rest,
quadratic on the others) is described in :mod:`robot_dynamics_ros.retiming.jerk`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from robot_dynamics_ros.retiming.jerk.stage_time import position_at1, time_to1

#: Gauss–Legendre nodes/weights on [0, 1] for the gradient of the stage times ∫ dσ / √x(σ) (the times
#: themselves in closed form, :mod:`.stage_time`)
_GL_X, _GL_W = np.polynomial.legendre.leggauss(12)
_GL_X = 0.5 * (_GL_X + 1.0)
_GL_W = 0.5 * _GL_W


def third_derivative(path, s) -> np.ndarray:
    """q'''(s) (P, n) of the cubic spline ``path`` (piecewise constant: 6 × the leading coefficient of the
    knot interval containing each s (P,); the interval to the right at a knot)."""
    s = np.atleast_1d(np.asarray(s, dtype=float))
    k = np.clip(np.searchsorted(path.knots, s, side="right") - 1, 0, path.knots.shape[0] - 2)
    return 6.0 * path.coefficients[0, k, :]


@njit(cache=True, nogil=True, error_model="numpy")
def _path_motion_kernel(s_g, x, u, tg, d, t, i, s, sd, sdd, sddd):  # pragma: no cover - compiled
    # s, ṡ, s̈, s⃛ at the times t (K,) in stages i (K,) of the timing (gridpoints s_g, x, u, t_grid tg, stage
    # lengths d): a stage that starts from rest (x = 0 at its start: the first, and after a stop inside the
    # path) or ends at rest has constant path jerk, s − s_i = x_{i+1}^{3/2} τ³ / (27 Δ²) resp. its mirror;
    # on the others x is quadratic in σ and σ(τ) the inverse of the stage time (position_at1)
    for k in range(t.shape[0]):
        ii = i[k]
        if x[ii] <= 0.0:
            c = x[ii + 1] ** 1.5 / (27.0 * d[ii] ** 2)
            tt = t[k] - tg[ii]
            s[k] = s_g[ii] + c * tt ** 3
            sd[k] = 3 * c * tt ** 2
            sdd[k] = 6 * c * tt
            sddd[k] = 6 * c
        elif x[ii + 1] <= 0.0:
            c = x[ii] ** 1.5 / (27.0 * d[ii] ** 2)
            tt = tg[ii + 1] - t[k]
            s[k] = s_g[ii + 1] - c * tt ** 3
            sd[k] = 3 * c * tt ** 2
            sdd[k] = -6 * c * tt
            sddd[k] = 6 * c
        else:
            xi, ui, dd = x[ii], u[ii], d[ii]
            v = (u[ii + 1] - ui) / dd
            sig = position_at1(xi, ui, v, dd, t[k] - tg[ii], 60)  # ∫0^σ dσ'/√x(σ') = τ
            s[k] = s_g[ii] + sig
            sd[k] = math.sqrt(max(xi + 2 * ui * sig + v * sig ** 2, 0.0))
            sdd[k] = ui + v * sig
            sddd[k] = v * sd[k]


@dataclass
class JerkSolution:
    """A jerk-limited timing of a path (rest to rest).

    Attributes:
        path: the :class:`~robot_dynamics_ros.retiming.path.JointPath`. s: (N,) gridpoints; x: (N,) sd² (rad²/s²); u: (N,) sdd at
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
    #: LP solves — HiGHS runs and dual simplex runs without HiGHS (:mod:`.vertex`), working-set rounds
    #: included; an LP answered from the previous LP's basis counts one — and rows in each SLP iteration's
    #: final working set
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
        s_g, tg = self.s, self.t_grid
        N = s_g.shape[0]
        d = np.diff(s_g)
        i = np.clip(np.searchsorted(tg, t, side="right") - 1, 0, N - 2)
        s, sd, sdd, sddd = (np.empty_like(t) for _ in range(4))
        _path_motion_kernel(s_g, self.x, self.u, tg, d, t, i, s, sd, sdd, sddd)
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


def stage_times(s, x, u) -> np.ndarray:
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


def time_gradient(s, x, u) -> np.ndarray:
    """(2N,) gradient of the traversal time Σ stage times (:func:`stage_times`) with respect to
    (x_0..x_{N-1}, u_0..u_{N-1}), s per (rad²/s²) and per (rad/s²); s, x, u (N,); requires x > 0 inside
    every stage (12-node Gauss–Legendre quadrature of the derivative of ∫ dσ/√x(σ))."""
    g = np.empty(2 * s.shape[0])
    _time_gradient_kernel(np.ascontiguousarray(s, dtype=float), np.ascontiguousarray(x, dtype=float),
                          np.ascontiguousarray(u, dtype=float), _GL_X, _GL_W, g)
    return g
