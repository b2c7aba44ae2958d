"""The public jerk-limited solve, :func:`solve_jerk_limited`: a solve on the gridpoints
(:func:`~robot_dynamics_ros.retiming.jerk.slp.solve_once`), then the output checked densely against every
limit and the limits tightened where it exceeds them and solved again; a path where the torque-only timing
stops is timed part by part, rest to rest.
"""
from __future__ import annotations

import time

import numpy as np

from robot_dynamics_ros.retiming.jerk.profile import JerkSolution
from robot_dynamics_ros.retiming.jerk.rows import SUBDIVISIONS
from robot_dynamics_ros.retiming.jerk.slp import solve_once
from robot_dynamics_ros.retiming.request import PEAK_TOLERANCE

__all__ = ["solve_jerk_limited", "STOP_RATIO", "ACCEPT_TOL"]

#: a gridpoint where the torque-only profile's x = ṡ² is at most this fraction of its largest value is a stop:
#: the parts on either side are timed rest to rest. At ṡ below 1e-3 of its top speed a jerk-limited profile
#: stops there too, within its stage-wise quadratic x(σ) (which cannot slow to nearly 0 and recover inside a
#: stage: its stage time would be unbounded), and stopping costs the time of that last 1e-3 of the speed
STOP_RATIO = 1e-6
#: relative excess over a limit on the verification samples an output may keep after the last round: the
#: retimer's own check of its output (``PEAK_TOLERANCE``), which would refuse a larger one anyway
ACCEPT_TOL = PEAK_TOLERANCE
#: relative excess over a limit on the verification samples that makes a round tighten the limits there: half
#: of :data:`ACCEPT_TOL`, so that the output sampled at another period (between the verification samples) stays
#: within it (a Panda path sampled at 10 ms reached 1.00015 of an acceleration limit with 2e-4 here, and the
#: retimer refused it)
VERIFY_TOL = 0.5 * ACCEPT_TOL


def solve_jerk_limited(path, s, x_ref, dynamics, *, velocity_limit, acceleration_limit, torque_limit,
                       jerk_limit, max_iterations: int = 15, rtol: float = 1e-3, margin: float = 1e-4,
                       verify_period: float | None = 1e-3, max_rounds: int = 6,
                       verify_tol: float = VERIFY_TOL, tool_speed=None) -> JerkSolution:
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

    Args: as :func:`~robot_dynamics_ros.retiming.jerk.slp.solve_once`, plus verify_period (s), max_rounds and verify_tol (relative), and
        tool_speed: None or (speed, limit): ``speed(q, v)`` (P, n) × (P, n) → (P,) the norm of a frame's
        linear velocity for joint velocities v (m/s; e.g. |J_v(q) v|, linear in v), ``limit`` m/s — the
        first-order row |speed(q, q')| ṡ ≤ limit, imposed and verified like the joint velocity limits.
    Returns: :class:`JerkSolution` (``rounds`` solves; ``solve_ms`` over all of them).
    Raises: ValueError as :func:`~robot_dynamics_ros.retiming.jerk.slp.solve_once` (except for stops inside the path, handled), or a whole stage
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
    M = SUBDIVISIONS
    # the joint limits the rounds solve with, per collocation point s_i + kΔ_i/M (index M i + k) and joint
    work = [np.tile(v, (M * (N - 1) + 1, 1)) for v in lims[:4]] + [lims[4].copy()]
    x0, start = np.asarray(x_ref, float), None
    # the LP rows (their order) and basis the last round ended with: the next round, on the same gridpoints
    # and rows with rescaled limits, starts from them
    warm = {}
    lp_ms, sol = 0.0, None
    for round_ in range(max_rounds + 1):
        sol = solve_once(path, s, x0, dynamics, velocity_limit=work[0], acceleration_limit=work[1],
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
