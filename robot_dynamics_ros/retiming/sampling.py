"""From the TOPP-RA solution (gridpoints s_i, x_i = sd_i², u_i) to a time-sampled trajectory.

The solver assumes u = sdd constant on each stage [s_i, s_{i+1}] (Pham & Pham 2018, eq. 4), so within a stage
``sd(t) = sd_i + u_i (t − t_i)`` and ``s(t) = s_i + sd_i (t − t_i) + u_i (t − t_i)² / 2`` hold exactly, and
x = sd² is linear in s — the same x(s) the constraints were imposed with at the stage start, midpoint and
end. Sampling that s(t) (instead of fitting a new spline through (t_i, s_i), which is what makes toppra's
output overshoot) keeps the sampled trajectory inside the limits between gridpoints.

Joint quantities follow from the chain rule: qd = q'(s) sd, qdd = q'(s) sdd + q''(s) sd², and the
feedforward effort tau = RNEA(q, qd, qdd) (+ friction when enabled) from the same dynamics engine.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from robot_dynamics_ros.retiming.path import spline_eval


@njit(cache=True, nogil=True)
def _sample_s(s, x, u, t_grid, times, s_out, sd_out, sdd_out):  # pragma: no cover - compiled
    n_grid = s.shape[0]
    i = 0
    for k in range(times.shape[0]):
        tk = times[k]
        if tk < t_grid[i]:
            i = 0
        while i < n_grid - 2 and tk >= t_grid[i + 1]:
            i += 1
        sd_i = np.sqrt(max(x[i], 0.0))
        tau = tk - t_grid[i]
        if tau < 0.0:
            tau = 0.0
        if tk >= t_grid[n_grid - 1]:  # the end point
            s_out[k] = s[n_grid - 1]
            sd_out[k] = np.sqrt(max(x[n_grid - 1], 0.0))
            sdd_out[k] = u[n_grid - 2]
            continue
        sd = sd_i + u[i] * tau
        if sd < 0.0:
            sd = 0.0
        sv = s[i] + sd_i * tau + 0.5 * u[i] * tau * tau
        if sv > s[i + 1]:
            sv = s[i + 1]
        s_out[k] = sv
        sd_out[k] = sd
        sdd_out[k] = u[i]


def sample_times(duration: float, period: float | None, t_grid: np.ndarray) -> np.ndarray:
    """Sample times: every ``period`` s from 0 plus the end time, or the gridpoint times if period is None/0."""
    if not period:
        return np.asarray(t_grid, dtype=float)
    if not np.isfinite(period) or period < 0:
        raise ValueError(f"sample_period: must be a positive number of seconds, got {period}")
    k = int(np.floor(duration / period + 1e-9))
    times = np.arange(k + 1) * period
    if duration - times[-1] > 1e-9 * max(duration, 1.0):
        times = np.append(times, duration)
    else:
        times[-1] = duration
    return times


def sample_path_parameter(s: np.ndarray, x: np.ndarray, u: np.ndarray, t_grid: np.ndarray,
                          times: np.ndarray):
    """s(t), sd(t), sdd(t), each (M,), at sorted times (M,) within [0, t_grid[-1]] (s).

    Args:
        s: (N,) gridpoints; x: (N,) sd²; u: (N-1,) sdd per stage; t_grid: (N,) time at each gridpoint.
    Returns:
        s(t), sd(t), sdd(t); sdd is the control of the stage starting at t (the right limit at gridpoints).
    """
    times = np.ascontiguousarray(times, dtype=float)
    m = times.shape[0]
    s_out = np.empty(m)
    sd_out = np.empty(m)
    sdd_out = np.empty(m)
    _sample_s(np.ascontiguousarray(s, dtype=float), np.ascontiguousarray(x, dtype=float),
              np.ascontiguousarray(u, dtype=float), np.ascontiguousarray(t_grid, dtype=float), times,
              s_out, sd_out, sdd_out)
    return s_out, sd_out, sdd_out


def joint_trajectory(path, s_t: np.ndarray, sd_t: np.ndarray, sdd_t: np.ndarray):
    """q, qd, qdd (M, n) along ``path`` (a :class:`~.path.JointPath`) at s(t), sd(t), sdd(t)."""
    q, dq, ddq = path.evaluate(s_t)
    qd = dq * sd_t[:, None]
    qdd = dq * sdd_t[:, None] + ddq * (sd_t * sd_t)[:, None]
    return q, qd, qdd


@njit(cache=True, nogil=True)
def _sample_joint(knots, coeffs, s, x, u, t_grid, times, q, qd, qdd):  # pragma: no cover - compiled
    m = times.shape[0]
    s_t = np.empty(m)
    sd_t = np.empty(m)
    sdd_t = np.empty(m)
    _sample_s(s, x, u, t_grid, times, s_t, sd_t, sdd_t)
    spline_eval(knots, coeffs, s_t, q, qd, qdd)  # q, q', q'' for now
    n = q.shape[1]
    for k in range(m):
        sd = sd_t[k]
        sdd = sdd_t[k]
        for j in range(n):
            d1 = qd[k, j]
            qdd[k, j] = d1 * sdd + qdd[k, j] * sd * sd
            qd[k, j] = d1 * sd


def sample_joint_trajectory(path, s, x, u, t_grid, times):
    """q, qd, qdd (M, n) at sorted ``times`` (M,) in one compiled pass: s(t), sd(t), sdd(t) of the
    piecewise-constant-sdd profile (:func:`sample_path_parameter`) through the spline (:func:`joint_trajectory`)."""
    times = np.ascontiguousarray(times, dtype=float)
    m = times.shape[0]
    n = path.n
    q = np.empty((m, n))
    qd = np.empty((m, n))
    qdd = np.empty((m, n))
    _sample_joint(path.knots, path.coefficients, s, x, u, t_grid, times, q, qd, qdd)
    return q, qd, qdd
