"""TOPP-RA core (retiming/topp_ra.py, constraints.py): the 2-variable LP, closed forms, toppra, dense checks.

Independent sources: brute-force vertex enumeration for the LP; the closed-form trapezoidal / bang-bang
time for a straight 1-DoF path; toppra 0.6.10 (PyPI) durations on the same path, limits and gridpoints;
and Pinocchio's RNEA (a Pinocchio model built here from the URDF file, payload added here) on a 10×
denser sampling of our output.
"""
from __future__ import annotations

import logging

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros.retiming.constraints import build_constraints
from robot_dynamics_ros.retiming.grid import gridpoints_for
from robot_dynamics_ros.retiming.path import JointPath
from robot_dynamics_ros.retiming.sampling import joint_trajectory, sample_path_parameter
from robot_dynamics_ros.retiming.topp_ra import SolveStatus, _lp2d_x, solve_topp_ra, stage_times
from robot_dynamics_ros.robots import ROBOTS
from robot_dynamics_testing.retiming_cases import ACC, MARGIN, PAYLOADS, dense_peaks, load_model, pinocchio_reference, smooth_waypoints  # noqa: F401

#: robot -> (payload link, kg, com) so that the 0.9 torque margin binds on part of the test paths


# ---------------------------------------------------------------------------------------------------
# helpers shared with test_retimer.py
# ---------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------
# the 2-variable LP against vertex enumeration
# ---------------------------------------------------------------------------------------------------
def _brute_force_max_x(H, direction):
    """Max/min x over the polygon {H[:, :2] (u, x) ≤ H[:, 2]} ∩ box, by enumerating all vertices."""
    box = np.array([[1, 0, 1e9], [-1, 0, 1e9], [0, 1, 1e9], [0, -1, 0.0]])
    A = np.vstack((H, box))
    best = None
    for i in range(len(A)):
        for j in range(i + 1, len(A)):
            M = A[[i, j], :2]
            if abs(np.linalg.det(M)) < 1e-12:
                continue
            p = np.linalg.solve(M, A[[i, j], 2])
            if np.all(A[:, :2] @ p <= A[:, 2] + 1e-7 * (1 + np.abs(A[:, 2]))):
                val = direction * p[1]
                best = val if best is None else max(best, val)
    return None if best is None else direction * best


@pytest.mark.parametrize("seed", range(40))
def test_seidel_lp_matches_vertex_enumeration(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(3, 25))
    # half-planes around a random point (mostly feasible), some random (sometimes infeasible)
    center = rng.normal(size=2) * [3.0, 1.0] + [0.0, 2.0]
    normals = rng.normal(size=(m, 2))
    normals /= np.linalg.norm(normals, axis=1)[:, None]
    offsets = normals @ center + rng.uniform(-0.5 if seed % 4 == 0 else 0.05, 2.0, m)
    H = np.column_stack((normals, offsets))
    out = np.empty(4)
    for direction in (1.0, -1.0):
        expected = _brute_force_max_x(H, direction)
        first, second = (int(rng.integers(0, m)), int(rng.integers(0, m))) if seed % 2 else (-1, -1)
        ok = _lp2d_x(H.copy(), m, direction, first, second, out)
        if expected is None:
            assert not ok
        else:
            assert ok
            assert out[1] == pytest.approx(expected, rel=1e-7, abs=1e-7)
            assert np.all(H[:, :2] @ out[:2] <= H[:, 2] + 1e-7)


@pytest.mark.parametrize("seed", range(20))
def test_least_violating_control_matches_a_minimax_lp(seed):
    """The forward pass's fallback when round-off empties the u interval at x_i (the benchmark paths of
    test_retimer.py::test_benchmark_paths_where_the_arm_can_stand_still_are_feasible): a nearly u-free row
    (α ~ 1e-8) meets a torque-like row with a gap of ~1e-7 in u. Reference: the minimax LP
    min t s.t. α_k u − r_k ≤ t, t ≥ 0 (scipy's HiGHS)."""
    from scipy.optimize import linprog

    from robot_dynamics_ros.retiming.topp_ra import _least_violating_u, _u_range

    rng = np.random.default_rng(seed)
    x = rng.uniform(1.0, 20.0)
    u0 = rng.uniform(-200.0, 200.0)
    tiny = rng.uniform(1e-9, 1e-7) * rng.choice([-1.0, 1.0])
    big = rng.uniform(0.1, 1.0) * -np.sign(tiny)
    gap = rng.uniform(1e-8, 1e-6)
    rows = [  # α u + β x ≤ γ with the two bounds on u crossing by `gap`
        (tiny, 0.99, tiny * (u0 - np.sign(tiny) * gap) + 0.99 * x),
        (big, -0.7, big * u0 - 0.7 * x),
    ]
    for _ in range(int(rng.integers(0, 12))):  # loose rows around the crossing
        a, b = rng.normal(size=2)
        rows.append((a, b, a * u0 + b * x + rng.uniform(1e-3, 1.0)))
    H = np.array(rows)
    lo, hi = _u_range(H, H.shape[0], x)
    assert lo > hi  # the situation of the fallback
    u, v = _least_violating_u(H, H.shape[0], x, hi, lo)
    r = H[:, 2] - H[:, 1] * x
    ref = linprog([0.0, 1.0], A_ub=np.column_stack((H[:, 0], -np.ones(len(H)))), b_ub=r,
                  bounds=[(None, None), (0.0, None)], method="highs")
    assert ref.status == 0
    assert hi <= u <= lo
    assert v == pytest.approx(max(0.0, (H[:, 0] * u - r).max()), abs=1e-15)
    assert v <= ref.fun + 1e-12
    assert v < 1e-7  # accepted by the forward pass: round-off, not a real violation


# ---------------------------------------------------------------------------------------------------
# closed forms on a straight 1-DoF path
# ---------------------------------------------------------------------------------------------------
def _rest_to_rest_time(length, vmax, amax):
    """Closed-form minimum time (s) over a straight path of ``length`` (rad) from rest to rest under
    |sd| ≤ vmax, |sdd| ≤ amax: trapezoid L/v + v/a when the cruise speed is reached (L ≥ v²/a), else
    bang-bang 2 sqrt(L/a)."""
    if length >= vmax * vmax / amax:
        return length / vmax + vmax / amax
    return 2.0 * np.sqrt(length / amax)


@pytest.mark.parametrize("length, vmax, amax, expected", [
    (2.0, 1.0, 2.0, 2.0 / 1.0 + 1.0 / 2.0),        # trapezoid: L/v + v/a
    (0.2, 1.0, 2.0, 2.0 * np.sqrt(0.2 / 2.0)),      # bang-bang: 2 sqrt(L/a)
])
def test_straight_line_matches_closed_form(length, vmax, amax, expected):
    from robot_dynamics_ros.retiming.topp_ra import _TOL

    assert _rest_to_rest_time(length, vmax, amax) == pytest.approx(expected, rel=1e-15)
    path = JointPath.from_waypoints(np.array([[0.0], [length]]))
    s = gridpoints_for(path.knots, 2001)
    se = np.empty(2 * s.shape[0] - 1)
    se[0::2], se[1::2] = s, 0.5 * (s[1:] + s[:-1])
    _, dq, ddq = path.evaluate(se)
    G, h, _ = build_constraints(dq, ddq, velocity_limit=np.array([vmax]), acceleration_limit=np.array([amax]))
    status, idx, x, u, K = solve_topp_ra(s, G, h)
    assert status == SolveStatus.OK and idx == -1
    duration = stage_times(s, x)[-1]
    # What the solver may give away, and no more: here q' = 1, q'' = 0, so the (normalized) rows are
    # x ≤ vmax² and ±u ≤ amax, each accepted when violated by at most the solver's feasibility tolerance
    # _TOL; the fastest profile those relaxed limits allow is the closed form at sqrt(vmax² + _TOL),
    # amax + _TOL. Summing N − 1 stage times adds at most (N − 1) ε of relative round-off. (The optimum of
    # this problem *is* the closed form, so the duration lands on the bound up to round-off: 2.5 − 2.4e-14.)
    v_tol, a_tol = np.sqrt(vmax * vmax + _TOL), amax + _TOL
    lower = _rest_to_rest_time(length, v_tol, a_tol) * (1.0 - s.shape[0] * np.finfo(float).eps)
    assert lower <= duration <= expected * 1.002
    assert np.sqrt(x).max() <= v_tol
    assert np.abs(u).max() <= a_tol


def test_gravity_above_limit_is_infeasible_at_that_stage():
    path = JointPath.from_waypoints(np.array([[0.0], [1.0]]))
    s = gridpoints_for(path.knots, 11)
    se = np.linspace(0, 1, 21)
    _, dq, ddq = path.evaluate(se)
    c = np.where(se > 0.55, 5.0, 0.0)[:, None]  # "gravity" 5 N·m beyond s = 0.55, limit 3
    abc = (np.ones_like(dq), np.zeros_like(dq), c)
    G, h, _ = build_constraints(dq, ddq, velocity_limit=np.array([1.0]), acceleration_limit=np.array([np.inf]),
                             torque_limit=np.array([3.0]), torque_abc=abc)
    status, idx, *_ = solve_topp_ra(s, G, h)
    # (|tau| <= 3 with tau = u + 5 forces u <= -2 beyond s = 0.55: the robot must brake and stalls there)
    assert status == SolveStatus.INFEASIBLE
    assert s[idx + 1] > 0.55


def test_start_velocity_outside_controllable_set():
    path = JointPath.from_waypoints(np.array([[0.0], [0.1]]))
    s = gridpoints_for(path.knots, 50)
    se = np.linspace(0, 0.1, 99)
    _, dq, ddq = path.evaluate(se)
    G, h, _ = build_constraints(dq, ddq, velocity_limit=np.array([2.0]), acceleration_limit=np.array([1.0]))
    # stopping from 1 rad/s at 1 rad/s² needs 0.5 rad > 0.1 rad
    status, idx, x, u, K = solve_topp_ra(s, G, h, x_start=1.0)
    assert status == SolveStatus.START_NOT_CONTROLLABLE
    assert np.sqrt(K[0, 1]) == pytest.approx(np.sqrt(2 * 1.0 * 0.1), rel=1e-3)


# ---------------------------------------------------------------------------------------------------
# real robots: toppra durations and a dense Pinocchio check
# ---------------------------------------------------------------------------------------------------
def _toppra_duration(knots, waypoints, gridpoints, pm, vlim, alim, tlim):
    import toppra
    import toppra.algorithm as algo
    import toppra.constraint as constraint

    logging.getLogger("toppra").setLevel(logging.ERROR)
    data = pm.createData()
    path = toppra.SplineInterpolator(knots, waypoints)
    cons = [constraint.JointVelocityConstraint(np.stack((-vlim, vlim), axis=1)),
            constraint.JointAccelerationConstraint(np.stack((-alim, alim), axis=1)),
            constraint.JointTorqueConstraint(lambda q, qd, qdd: pin.rnea(pm, data, q, qd, qdd),
                                             np.stack((-tlim, tlim), axis=1), np.zeros(len(vlim)))]
    traj = algo.TOPPRA(cons, path, gridpoints=gridpoints, solver_wrapper="seidel").compute_trajectory(0, 0)
    assert traj is not None
    return traj.duration


# path tolerances at which the interpolating spline through the smooth waypoints needs no added knots
@pytest.mark.parametrize("robot, count, gridpoints, tol", [("panda", 10, 100, 0.1), ("panda", 100, 400, 1e-3),
                                                           ("ur5", 10, 300, 0.3), ("ur5", 30, 100, 0.03)])
def test_duration_vs_toppra_and_dense_pinocchio_check(robot, count, gridpoints, tol):
    from robot_dynamics_ros.retiming.request import RetimeOptions
    from robot_dynamics_ros.retiming.retimer import Retimer

    model = load_model(robot)
    pm = pinocchio_reference(robot)
    assert tuple(pm.names[1:]) == model.joint_names
    wp = smooth_waypoints(model, count)
    retimer = Retimer(model)
    dt = 0.01
    res = retimer.retime(wp, options=RetimeOptions(gridpoints=gridpoints, torque_margin=MARGIN, sample_period=dt,
                                                   path_tolerance=tol))
    assert res.success, res.message
    seg = res.segments[0]
    assert res.max_path_deviation <= tol
    # the path is the interpolating spline through the waypoints alone (no knot added on the chords)
    np.testing.assert_allclose(seg.path(seg.s), JointPath.from_waypoints(wp)(seg.s), atol=1e-12)
    vlim, alim = pm.velocityLimit, np.full(model.n, ACC)
    tlim = pm.effortLimit * MARGIN
    # the same path: the not-a-knot spline through our knots (the waypoints and the points added on
    # their chords to stay within path_tolerance)
    t_toppra = _toppra_duration(seg.path.knots, seg.path(seg.path.knots), seg.s, pm, vlim, alim, tlim)
    # within 0.5 % of toppra at the same gridpoints (shorter is fine when the dense check below holds)
    assert res.duration <= t_toppra * 1.005
    assert res.duration >= t_toppra * 0.99
    # the same trajectory sampled 10x denser
    dense = retimer.retime(wp, options=RetimeOptions(gridpoints=gridpoints, torque_margin=MARGIN,
                                                     sample_period=dt / 10, path_tolerance=tol))
    assert dense.duration == res.duration
    np.testing.assert_allclose(dense.q[::10][:-1], res.q[:-1][:dense.q[::10][:-1].shape[0]], atol=1e-12)
    v, a, t = dense_peaks(pm, dense.q, dense.qd, dense.qdd, vlim, alim, tlim)
    assert v <= 1 + 1e-3 and a <= 1 + 1e-3 and t <= 1 + 1e-3
    # and the torque limit does bind somewhere (the test exercises the torque constraint)
    assert t > 0.99
    # our reported efforts agree with Pinocchio
    data = pm.createData()
    tau_pin = np.array([pin.rnea(pm, data, q, qd, qdd) for q, qd, qdd in zip(res.q, res.qd, res.qdd)])
    np.testing.assert_allclose(res.tau, tau_pin, atol=1e-8 * np.abs(tau_pin).max())


def test_sampling_is_the_solver_profile():
    """s(t) sampled at the gridpoint times reproduces the gridpoints and sd = sqrt(x)."""
    path = JointPath.from_waypoints(np.array([[0.0, 0.0], [1.0, 0.5], [1.5, 1.5]]))
    s = gridpoints_for(path.knots, 60)
    se = np.empty(2 * s.shape[0] - 1)
    se[0::2], se[1::2] = s, 0.5 * (s[1:] + s[:-1])
    _, dq, ddq = path.evaluate(se)
    G, h, _ = build_constraints(dq, ddq, velocity_limit=np.array([1.0, 1.0]), acceleration_limit=np.array([2.0, 2.0]))
    status, _, x, u, _ = solve_topp_ra(s, G, h)
    assert status == SolveStatus.OK
    tg = stage_times(s, x)
    s_t, sd_t, sdd_t = sample_path_parameter(s, x, u, tg, tg)
    np.testing.assert_allclose(s_t, s, atol=1e-12)
    np.testing.assert_allclose(sd_t, np.sqrt(x), atol=1e-9)
    np.testing.assert_allclose(sdd_t[:-1], u, atol=0)
    q, qd, qdd = joint_trajectory(path, s_t, sd_t, sdd_t)
    np.testing.assert_allclose(q[[0, -1]], [[0.0, 0.0], [1.5, 1.5]], atol=1e-12)
    np.testing.assert_allclose(qd[[0, -1]], 0.0, atol=1e-12)


def test_efforts_at_the_gridpoints_match_pinocchio():
    """Output at the gridpoints: tau from the constraint coefficients (a sdd + b sd² + c) equals RNEA."""
    from robot_dynamics_ros.retiming.request import RetimeOptions
    from robot_dynamics_ros.retiming.retimer import Retimer

    model = load_model("ur5")
    pm = pinocchio_reference("ur5")
    data = pm.createData()
    for count, grid in ((10, 100), (10, 1500), (60, 60)):
        res = Retimer(model).retime(smooth_waypoints(model, count), options=RetimeOptions(gridpoints=grid,
                                                                                           torque_margin=MARGIN))
        assert res.success, res.message
        assert res.t.shape[0] == res.gridpoints
        tau_pin = np.array([pin.rnea(pm, data, q, qd, qdd) for q, qd, qdd in zip(res.q, res.qd, res.qdd)])
        np.testing.assert_allclose(res.tau, tau_pin, atol=1e-9 * np.abs(tau_pin).max())


@pytest.mark.parametrize("robot", ["panda", "ur5"])
@pytest.mark.parametrize("velocity_scale", [1.0, 0.1])
def test_limits_hold_to_1e4_between_gridpoints(robot, velocity_scale):
    """At a coarse request (N = 100) and any scale, the output sampled every 1 ms (10x a 10 ms output)
    stays within 1 + 1e-4 of every limit (Pinocchio RNEA for the efforts; velocities also as the chord
    velocities of the positions, the mean velocity over each millisecond, independent of our qd)."""
    from robot_dynamics_ros.retiming.request import RetimeOptions
    from robot_dynamics_ros.retiming.retimer import Retimer

    model = load_model(robot)
    pm = pinocchio_reference(robot)
    wp = smooth_waypoints(model, 10)
    opts = RetimeOptions(gridpoints=100, torque_margin=MARGIN, velocity_scale=velocity_scale, sample_period=0.001)
    res = Retimer(model).retime(wp, options=opts)
    assert res.success, res.message
    vlim = pm.velocityLimit * velocity_scale
    v, a, t = dense_peaks(pm, res.q, res.qd, res.qdd, vlim, np.full(model.n, ACC), pm.effortLimit * MARGIN)
    assert max(v, a, t) <= 1 + 1e-4, (v, a, t)
    assert max(v, a, t) > 0.999  # a limit binds
    fd = np.diff(res.q, axis=0) / np.diff(res.t)[:, None]
    assert (np.abs(fd) / vlim).max() <= 1 + 1e-4
