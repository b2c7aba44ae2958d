"""Jerk-limited timing (retiming/jerk.py) checked densely and independently of the solver.

The independent check: samples at 1 kHz; jerk from finite differences of the returned accelerations (not the
solver's jerk); velocity from the returned velocities; torque by Pinocchio RNEA on a model built here from
the URDF with the payload added to the parent joint (the solver uses the in-package Newton–Euler engine).
"""
from __future__ import annotations

import numpy as np
import pytest

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.retiming.jerk import solve_jerk_limited, third_derivative
from robot_dynamics_ros.retiming.path import JointPath
from robot_dynamics_ros.retiming.request import RetimeOptions
from robot_dynamics_ros.retiming.retimer import Retimer
from robot_dynamics_testing.jerk_cases import CASES, TOL, UR10, dense_check, dense_samples, package_model, pinocchio_model, random_panda_waypoints  # noqa: F401
from robot_dynamics_testing.corner_cases import corners_kept

#: (robot, URDF, payload link or frame, kg, com in that frame (m))


def test_third_derivative_is_six_times_the_leading_coefficient_by_finite_differences():
    rng = np.random.default_rng(0)
    wp = np.cumsum(rng.normal(size=(6, 3)), axis=0)
    path = JointPath.from_waypoints(wp)
    s = np.linspace(0.01, path.length - 0.01, 50)
    s = s[np.min(np.abs(s[:, None] - path.knots[None, :]), axis=1) > 1e-3]  # away from knots (a jump there)
    h = 1e-4
    ddq_p = path.evaluate(s + h)[2]
    ddq_m = path.evaluate(s - h)[2]
    np.testing.assert_allclose(third_derivative(path, s), (ddq_p - ddq_m) / (2 * h), rtol=1e-6, atol=1e-8)


def _solve(robot, waypoints, jerk, margin=0.9, gridpoints=None):
    model = package_model(robot)
    retimer = Retimer(model)
    with corners_kept():  # the path the retimer uses for jerk-limited timings
        res = retimer.retime(waypoints, options=RetimeOptions(torque_margin=margin, gridpoints=gridpoints))
    assert res.success, res.message
    seg = res.segments[0]
    tlim = margin * model.effort_limit
    sol = solve_jerk_limited(seg.path, seg.s, seg.x, NewtonEulerDynamics(model),
                             velocity_limit=model.velocity_limit, acceleration_limit=model.acceleration_limit,
                             torque_limit=tlim, jerk_limit=np.full(model.n, jerk))
    return model, res, sol, tlim


def _assert_within(pm, model, sol, tlim, jerk):
    t, q, qd, qdd = dense_samples(sol)
    jerk_fd, tau = dense_check(pm, t, q, qd, qdd)
    assert np.abs(jerk_fd).max() <= jerk * (1 + TOL)
    assert (np.abs(qd) / model.velocity_limit).max() <= 1 + TOL
    assert (np.abs(tau) / tlim).max() <= 1 + TOL
    # rest to rest with zero acceleration at both ends (no jerk impulse when starting or stopping)
    np.testing.assert_allclose(qd[[0, -1]], 0.0, atol=1e-12)
    np.testing.assert_allclose(qdd[[0, -1]], 0.0, atol=1e-9)
    # the path is not changed: the samples lie on the spline
    np.testing.assert_allclose(q[-1], sol.path(np.array([sol.path.length]))[0], atol=1e-9)
    return jerk_fd, tau


def test_ur10_line_jerk_binds_and_every_limit_holds_in_a_dense_pinocchio_check():
    from robot_dynamics_tools.commands.casestudy import case_line

    model = package_model("ur10")
    line = case_line(model)
    _, res, sol, tlim = _solve("ur10", line.q, 50.0)
    jerk_fd, _ = _assert_within(pinocchio_model("ur10"), model, sol, tlim, 50.0)
    # the jerk limit is reached (the solution is not just slow), and torque-only TOPP-RA was far above it
    assert np.abs(jerk_fd).max() >= 0.99 * 50.0
    assert np.abs(np.diff(res.qdd, axis=0) / np.diff(res.t)[:, None]).max() > 10 * 50.0
    # the SLP iterates get shorter and the result is bounded below by the torque-only time
    assert all(b <= a for a, b in zip(sol.durations, sol.durations[1:]))
    assert res.duration < sol.duration < 2.0 * res.duration
    # the elbow goes out and comes back along the line; at its turn q' = 0, so it is at rest there. From
    # rest, jerk ≤ J reaches at most c J T³ at zero velocity in time T (bang-bang, one switch at
    # T(1 − 1/√2): c integrated here piece by piece), so each leg takes ≥ (D / (c J))^{1/3}: any timing
    # within the jerk limit is at least that long, and this one within 5 % of it
    t1 = 1.0 - 1.0 / np.sqrt(2.0)
    x1, v1, a1 = t1 ** 3 / 6, t1 ** 2 / 2, t1
    t2 = 1.0 - t1
    c = x1 + v1 * t2 + a1 * t2 ** 2 / 2 - t2 ** 3 / 6
    elbow = sol.path(np.linspace(0.0, sol.path.length, 4001))[:, 2]
    turn = int(np.argmax(np.abs(elbow - elbow[0])))
    legs = abs(elbow[turn] - elbow[0]), abs(elbow[-1] - elbow[turn])
    bound = sum((d / (c * 50.0)) ** (1.0 / 3.0) for d in legs)
    assert 0.0 < turn < elbow.shape[0] - 1 and min(legs) > 0.4
    assert bound <= sol.duration <= 1.05 * bound


def test_random_panda_path_within_every_limit():
    model = package_model("panda")
    _, res, sol, tlim = _solve("panda", random_panda_waypoints(3), 500.0, gridpoints=40)
    jerk_fd, _ = _assert_within(pinocchio_model("panda"), model, sol, tlim, 500.0)
    assert np.abs(jerk_fd).max() >= 0.99 * 500.0
    assert res.duration < sol.duration


def test_a_path_needing_more_than_three_verification_rounds_ends_within_every_limit():
    """The verification used to stop after 4 solves and return that output: on seed 1085 (the benchmark's
    Panda path 85, with the grid of that time) the rows between check points then exceeded the velocity
    limit by 0.19 %. Now the rounds go on until the dense check holds. Seed 1014 is the first from 1000
    that needs more than 4 rounds with today's grid (``path.TURN_PER_STAGE``, ``grid.KEEP_SHARE``):
    5 solves."""
    model = package_model("panda")
    _, _, sol, tlim = _solve("panda", random_panda_waypoints(1014), 500.0, gridpoints=40)
    assert sol.rounds > 4
    _assert_within(pinocchio_model("panda"), model, sol, tlim, 500.0)


def test_a_path_where_the_torque_only_solution_stops_is_timed_through_the_stop_within_every_limit():
    model = package_model("panda")
    res = Retimer(model).retime(random_panda_waypoints(6), options=RetimeOptions(torque_margin=0.9, gridpoints=40))
    seg = res.segments[0]
    assert len(res.segments) == 1
    # the torque-only profile stopped at one interior gridpoint, as it must where gravity alone reaches a
    # torque limit: an upper bound x_ref = 0 there is a constraint every timing has to meet
    k = seg.x.shape[0] // 3
    x_ref = seg.x.copy()
    x_ref[k] = 0.0
    stops = np.array([k])
    tlim = 0.9 * model.effort_limit
    sol = solve_jerk_limited(seg.path, seg.s, x_ref, NewtonEulerDynamics(model), velocity_limit=model.velocity_limit,
                             acceleration_limit=model.acceleration_limit, torque_limit=tlim,
                             jerk_limit=np.full(model.n, 500.0))
    assert sol.parts == stops.size + 1
    _assert_within(pinocchio_model("panda"), model, sol, tlim, 500.0)
    # at rest with zero acceleration at the stop: the joint velocities and accelerations sampled there
    t_stop = np.interp(seg.s[stops], sol.s, sol.t_grid)
    _, sd, sdd, _, q, qd, qdd, _ = sol.sample(t_stop)
    np.testing.assert_allclose(q, seg.path(seg.s[stops]), atol=1e-9)
    np.testing.assert_allclose(qd, 0.0, atol=1e-9)
    np.testing.assert_allclose(qdd, 0.0, atol=1e-6)
    assert res.duration < sol.duration


def test_jerk_limits_from_joint_limits_yaml():
    from pathlib import Path

    from robot_dynamics_ros.errors import UserError

    config = Path(__file__).resolve().parents[2] / "config" / "ur10_joint_limits.yaml"
    model = RobotModel.from_urdf(UR10, joint_limits=config)
    np.testing.assert_array_equal(model.jerk_limit, np.full(6, 50.0))
    plain = RobotModel.from_urdf(UR10)
    assert np.isinf(plain.jerk_limit).all()
    off = RobotModel.from_urdf(UR10, joint_limits={"elbow_joint": {"has_jerk_limits": False, "max_jerk": 5.0}})
    assert np.isinf(off.jerk_limit).all()  # the flag decides, as for MoveIt's other limits
    with pytest.raises(UserError, match="elbow_joint.*max_jerk=-1.0 must be a positive"):
        RobotModel.from_urdf(UR10, joint_limits={"elbow_joint": {"has_jerk_limits": True, "max_jerk": -1}})


def test_stage_time_closed_form_against_quadrature_and_its_inverse():
    """stage_time.time_to = ∫ dσ/√x(σ) for x quadratic, against scipy's adaptive quadrature (split at the
    minimum of x), on rising, falling, concave, nearly linear stages and stages whose x nearly vanishes at an
    interior minimum (where a fixed Gauss–Legendre rule is off by percent); position_at inverts it."""
    from scipy.integrate import quad

    from robot_dynamics_ros.retiming.jerk.stage_time import position_at, time_to

    rng = np.random.default_rng(5)
    cases = [(2.0, 0.0, 0.0, 0.3), (1e-2, 3.0, -4.0, 0.2), (4.0, -5.0, 3.0, 0.25), (1.0, 2.0, 1e-11, 0.5)]
    for _ in range(40):  # interior minimum x_m = x_i · 10^-k at σ* inside the stage
        dd, xi, k = rng.uniform(0.005, 0.05), rng.uniform(1e-3, 10.0), rng.uniform(0, 5)
        ss = rng.uniform(0.2, 0.8) * dd
        v = xi * (1 - 10.0 ** -k) / ss ** 2
        cases.append((xi, -v * ss, v, dd))
    for _ in range(40):
        xi, ui, v, dd = rng.uniform(0.01, 5.0), rng.normal() * 5, rng.normal() * 50, rng.uniform(0.005, 0.05)
        if min(xi + 2 * ui * s + v * s * s for s in np.linspace(0, dd, 201)) > 1e-3 * xi:
            cases.append((xi, ui, v, dd))
    for xi, ui, v, dd in cases:
        pts = [-ui / v] if v > 0 and 0 < -ui / v < dd else None
        ref, _ = quad(lambda s: (xi + 2 * ui * s + v * s * s) ** -0.5, 0.0, dd, points=pts, epsabs=0.0,
                      epsrel=1e-12, limit=200)
        assert time_to(xi, ui, v, dd) == pytest.approx(ref, rel=1e-9)
        tau = rng.uniform(0.0, ref)
        sig = position_at(xi, ui, v, dd, tau)
        assert time_to(xi, ui, v, sig) == pytest.approx(tau, rel=1e-9, abs=1e-12)
    # x reaches zero inside the stage: it cannot be traversed
    assert time_to(1.0, -1.0, 0.5, 2.0) == np.inf
    assert time_to(1.0, -1.0, 0.0, 0.6) == np.inf


def test_traversal_time_gradient_against_finite_differences_of_quadrature():
    """jerk.profile.time_gradient (12-node Gauss–Legendre rule of the derivative) against central differences of
    the traversal time computed by scipy's adaptive quadrature: the end stages take 3Δ/√x (x_1 resp.
    x_{N-2}), interior stage i ∫ dσ/√(x_i + 2u_iσ + vσ²) with v = (u_{i+1} − u_i)/Δ_i."""
    from scipy.integrate import quad

    from robot_dynamics_ros.retiming.jerk.profile import time_gradient

    rng = np.random.default_rng(11)
    N = 9
    s = np.concatenate(([0.0], np.cumsum(rng.uniform(0.02, 0.08, N - 1))))
    x = np.concatenate(([0.0], rng.uniform(0.5, 3.0, N - 2), [0.0]))
    u = np.concatenate(([0.0], rng.normal(size=N - 2) * 2.0, [0.0]))

    def total(x, u):
        d = np.diff(s)
        t = 3 * d[0] / np.sqrt(x[1]) + 3 * d[N - 2] / np.sqrt(x[N - 2])
        for i in range(1, N - 2):
            v = (u[i + 1] - u[i]) / d[i]
            t += quad(lambda g: (x[i] + 2 * u[i] * g + v * g * g) ** -0.5, 0.0, d[i], epsabs=0.0, epsrel=1e-13)[0]
        return t

    g = time_gradient(s, x, u)
    z = np.concatenate((x, u))
    for k in [*range(1, N - 1), *range(N + 1, 2 * N - 1)]:
        h = 1e-5 * max(abs(z[k]), 1.0)
        zp, zm = z.copy(), z.copy()
        zp[k] += h
        zm[k] -= h
        fd = (total(zp[:N], zp[N:]) - total(zm[:N], zm[N:])) / (2 * h)
        assert g[k] == pytest.approx(fd, rel=1e-6, abs=1e-9), k
    assert g[0] == g[N - 1] == g[N] == g[2 * N - 1] == 0.0  # x, u at rest do not enter the stage times


def test_lp_basis_from_basic_variables_matches_highs_statuses():
    """jerk.highs.HighsLP.basis (built from HiGHS's basic-variable list and the solution) against HiGHS's own basis
    statuses, on random LPs with equality rows, ≤ rows of three entries, columns with finite, infinite and
    equal bounds (nonbasic fixed rows and columns: only 'nonbasic' compared, either bound is the value)."""
    from robot_dynamics_ros.retiming.jerk.highs import HighsLP

    rng = np.random.default_rng(3)
    compared = at_upper = 0
    for _ in range(20):
        A_eq, rows, lo, hi = _random_lp(rng, upper=np.inf, fixed_first=True)
        nv, me = lo.shape[0], A_eq.shape[0]
        lp = HighsLP(rng.normal(size=nv), A_eq, rows, lo, hi)
        res = lp.solve()
        if res.status != 0:
            continue
        mine = lp.basis()
        hb = lp._h.getBasis()
        col = np.array([st.value for st in hb.col_status])
        row = np.array([st.value for st in hb.row_status])
        fixed_col = lo == hi
        fixed_row = np.arange(row.shape[0]) < me
        np.testing.assert_array_equal(mine[0][~fixed_col], col[~fixed_col])
        np.testing.assert_array_equal(mine[1][~fixed_row], row[~fixed_row])
        np.testing.assert_array_equal(mine[0][fixed_col] == HighsLP.BASIC, col[fixed_col] == HighsLP.BASIC)
        np.testing.assert_array_equal(mine[1][fixed_row] == HighsLP.BASIC, row[fixed_row] == HighsLP.BASIC)
        compared += 1
        at_upper += int((col[~fixed_col] == HighsLP.UPPER).sum())
    assert compared >= 10 and at_upper > 0  # both bounds of the columns occur


def _random_lp(rng, upper, fixed_first):
    """A random feasible LP of the jerk solver's shape: 12 columns in [0, 1 or ``upper``] (column 0 fixed at
    a feasible value when ``fixed_first``), 3 equality rows, 30 ≤ rows of three entries, all built to hold
    at a random interior point x0 (the equalities' rows projected so that A_eq x0 = 0).
    Returns (A_eq (CSR), (cols, data, b), lo, hi)."""
    import scipy.sparse as sp

    nv, me, m = 12, 3, 30
    A_eq = sp.csr_matrix(rng.normal(size=(me, nv)) * (rng.random((me, nv)) < 0.4))
    cols = np.array([rng.choice(nv, 3, replace=False) for _ in range(m)])
    data = rng.normal(size=(m, 3))
    x0 = rng.uniform(0.2, 0.8, nv)  # a feasible point: the rows are built to hold there
    b = (data * x0[cols]).sum(axis=1) + rng.uniform(0.0, 0.5, m)
    lo = np.zeros(nv)
    hi = np.where(rng.random(nv) < 0.5, 1.0, upper)
    if fixed_first:
        lo[0] = hi[0] = x0[0]
    A_eq = sp.csr_matrix(A_eq.toarray() - np.outer(A_eq @ x0, x0) / (x0 @ x0))
    return A_eq, (cols, data, b), lo, hi


def test_basis_vertex_is_the_lp_optimum_of_an_optimal_basis_and_refuses_others():
    """jerk.vertex.basis_vertex (the LP answer from a basis, without HiGHS) on random LPs with equality rows,
    ≤ rows of three entries and bounded columns: from HiGHS's final basis it returns HiGHS's answer; for the
    negated cost that basis is not optimal (it returns None, or a vertex as good as HiGHS's optimum there);
    with one inactive row moved past HiGHS's answer (the case the SLP meets: new tangents, the old basis
    still dual feasible) the basis's vertex breaks that row and is refused. Half the draws fix a column."""
    from robot_dynamics_ros.retiming.jerk.highs import HighsLP
    from robot_dynamics_ros.retiming.jerk.vertex import basis_vertex

    rng = np.random.default_rng(5)
    same = refused = moved = 0
    for draw in range(40):
        A_eq, (cols, data, b), lo, hi = _random_lp(rng, upper=2.0, fixed_first=draw % 2 == 1)
        nv = lo.shape[0]
        cost = rng.normal(size=nv)
        cost /= np.abs(cost).max()
        lp = HighsLP(cost, A_eq, (cols, data, b), lo, hi)
        res = lp.solve()
        if res.status != 0:
            continue
        basis = lp.basis()
        z = basis_vertex(cost, A_eq, (cols, data, b), lo, hi, basis, np.arange(nv))
        assert z is not None
        np.testing.assert_allclose(z, res.x, atol=1e-9)
        same += 1
        other = basis_vertex(-cost, A_eq, (cols, data, b), lo, hi, basis, np.arange(nv))
        if other is None:
            refused += 1
        else:
            best = HighsLP(-cost, A_eq, (cols, data, b), lo, hi).solve()
            assert -cost @ other == pytest.approx(-cost @ best.x, abs=1e-9)
        value = (data * res.x[cols]).sum(axis=1)
        slack = b - value
        k = int(np.argmax(slack))
        if slack[k] > 1e-3:   # an inactive row, moved to cut HiGHS's answer off
            b_moved = b.copy()
            b_moved[k] = value[k] - 0.5 * slack[k]
            assert basis_vertex(cost, A_eq, (cols, data, b_moved), lo, hi, basis, np.arange(nv)) is None
            moved += 1
    assert same >= 20 and refused >= 10 and moved >= 20


def test_dual_simplex_from_a_dual_feasible_basis_reaches_the_highs_optimum():
    """jerk.vertex.dual_simplex (dual simplex pivots on the band matrix, without HiGHS) on random LPs of the
    solver's shape, against HiGHS's optimum of the same LP: from HiGHS's optimal basis of the LP on a third of
    the ≤ rows with the other rows added basic (the working-set step: dual feasible, added rows violated at
    its vertex), and from the optimal basis with its most slack row moved just past HiGHS's answer (new
    tangents), it ends at HiGHS's optimum (objective and answer), or refuses (None) where HiGHS finds the
    moved LP infeasible; from an optimal basis under the negated cost (not dual feasible: bounds flipped,
    slacks put at an artificial bound) it ends at HiGHS's optimum of the negated LP or refuses (an
    artificial bound still active, more pivots needed). Half the draws fix a column."""
    from robot_dynamics_ros.retiming.jerk.highs import HighsLP
    from robot_dynamics_ros.retiming.jerk.vertex import dual_simplex

    rng = np.random.default_rng(17)
    added = pivoted = moved = infeasible = refused = flipped = 0
    for draw in range(40):
        A_eq, (cols, data, b), lo, hi = _random_lp(rng, upper=2.0, fixed_first=draw % 2 == 1)
        nv, m = lo.shape[0], b.shape[0]
        key = np.arange(nv)
        cost = rng.normal(size=nv)
        cost /= np.abs(cost).max()
        full = HighsLP(cost, A_eq, (cols, data, b), lo, hi)
        best = full.solve()
        part = rng.permutation(m)[:m // 3]
        rest = np.setdiff1d(np.arange(m), part)
        lp = HighsLP(cost, A_eq, (cols[part], data[part], b[part]), lo, hi)
        if best.status != 0 or lp.solve().status != 0:
            continue
        col_status, row_status = lp.basis()
        start = (col_status, np.concatenate((row_status, np.full(rest.shape[0], HighsLP.BASIC, np.int8))))
        order = np.concatenate((part, rest))
        z, reached = dual_simplex(cost, A_eq, (cols[order], data[order], b[order]), lo, hi, start, key, 50)
        assert z is not None
        assert cost @ z == pytest.approx(cost @ best.x, abs=1e-9)
        np.testing.assert_allclose(z, best.x, atol=1e-7)
        added += 1
        pivoted += int((reached[1] != start[1]).any())
        basis = full.basis()
        other, _ = dual_simplex(-cost, A_eq, (cols, data, b), lo, hi, basis, key, 50)
        if other is None:
            refused += 1
        else:  # reached through flipped bounds: then the negated LP's optimum
            assert -cost @ other == pytest.approx(-cost @ HighsLP(-cost, A_eq, (cols, data, b), lo, hi).solve().x,
                                                  abs=1e-9)
            flipped += 1
        value = (data * best.x[cols]).sum(axis=1)
        k = int(np.argmax(b - value))
        b_moved = b.copy()
        b_moved[k] = value[k] - 0.02 * (b[k] - value[k])
        target = HighsLP(cost, A_eq, (cols, data, b_moved), lo, hi).solve()
        z, _ = dual_simplex(cost, A_eq, (cols, data, b_moved), lo, hi, basis, key, 50)
        if target.status == 0:
            assert z is not None
            assert cost @ z == pytest.approx(cost @ target.x, abs=1e-9)
            np.testing.assert_allclose(z, target.x, atol=1e-7)
            moved += 1
        else:
            assert target.status == 2 and z is None
            infeasible += 1
    assert added >= 30 and pivoted >= 20 and moved >= 20 and infeasible >= 1 and refused + flipped >= 30
    assert flipped >= 10 and refused >= 5


@pytest.mark.parametrize("objective", ["time gradient", "x alone"])
def test_first_lp_without_a_start_is_the_full_lps_unique_optimum(objective):
    """The first LP of a solve without a start (tangents and objective at the torque-only TOPP-RA profile, the
    case line on its 30-point grid) answers the full LP's optimum, and that optimum is unique: HiGHS's dual
    simplex and its interior point method on every row (scipy's linprog, from no basis) reach the same x (to
    1e-6 of the largest), where the working set and the guessed basis take another path. The objective is the traversal time's gradient at the
    reference profile, or (the fallback where that answer stops the path) the gradient of Σ w x^{-1/2} at the
    gridpoints; with the columns fixed at rest (x̄ = 0) given a cost, the latter's free costs fell below
    HiGHS's dual tolerance and its answer was whichever feasible vertex HiGHS reached first."""
    import scipy.sparse as sp
    from scipy.optimize import linprog

    from robot_dynamics_ros.retiming.jerk import slp
    from robot_dynamics_ros.retiming.jerk.rows import build_rows
    from robot_dynamics_tools.commands.casestudy import case_line

    model = package_model("ur10")
    with corners_kept():
        res = Retimer(model).retime(case_line(model, points=30).q, options=RetimeOptions(torque_margin=0.9))
    seg = res.segments[0]
    s, x_ref = seg.s, seg.x
    N = s.shape[0]
    rows = build_rows(seg.path, s, x_ref, NewtonEulerDynamics(model), velocity_limit=model.velocity_limit,
                      acceleration_limit=model.acceleration_limit, torque_limit=0.9 * model.effort_limit,
                      jerk_limit=np.full(model.n, 50.0), margin=1e-4, tool_speed=None)
    u_stage = np.diff(x_ref) / (2.0 * np.diff(s))
    z_ref = np.concatenate((x_ref, [0.0], 0.5 * (u_stage[1:] + u_stage[:-1]), [0.0]))
    xbar_pts = np.interp(rows.points_s, s, x_ref)
    wlp = slp._WorkingSetLP(rows, z_ref, None)
    zfull = z_ref if objective == "time gradient" else None
    lp, _ = wlp.solve(xbar_pts, x_ref, zfull, trust=False, guess=zfull is not None)
    assert lp.status == 0
    cost = wlp._cost(x_ref, zfull)
    assert np.isfinite(cost).all() and cost[[0, N - 1, N, 2 * N - 1]].tolist() == [0.0] * 4
    # the full LP, every row, independently of the working set and bases
    A_ub = sp.csr_matrix((rows.data.ravel(), rows.cols.ravel(), np.arange(0, 3 * rows.b_ub.shape[0] + 1, 3)),
                         shape=(rows.b_ub.shape[0], rows.nv))
    A_eq = sp.csr_matrix((rows.A_eq.data, rows.A_eq.indices, rows.A_eq.indptr), shape=rows.A_eq.shape)
    bounds = np.stack((rows.lo, rows.hi), axis=1)
    full = linprog(cost, A_ub=A_ub, b_ub=rows.b_ub, A_eq=A_eq, b_eq=np.zeros(A_eq.shape[0]), bounds=bounds,
                   method="highs-ds")
    assert full.status == 0
    assert cost @ lp.x == pytest.approx(full.fun, rel=1e-8)  # both within HiGHS's 1e-7 feasibility tolerance
    assert (A_ub @ lp.x - rows.b_ub).max() <= 1e-7
    # unique: HiGHS's interior point method (its crossover ends at a vertex of the optimal face, by another
    # path than either dual simplex) answers the same x
    ipm = linprog(cost, A_ub=A_ub, b_ub=rows.b_ub, A_eq=A_eq, b_eq=np.zeros(A_eq.shape[0]), bounds=bounds,
                  method="highs-ipm")
    assert ipm.status == 0
    for other in (full.x, ipm.x):
        assert np.abs(lp.x[:N] - other[:N]).max() <= 1e-6 * x_ref.max()
        # u from x by the equalities x_{i+1} − x_i = Δ_i (u_i + u_{i+1}): x's differences over Δ
        assert np.abs(lp.x[N:] - other[N:]).max() <= 2e-6 * x_ref.max() / np.diff(s).min()


def test_a_coarse_start_without_a_feasible_trust_region_is_refused_when_strict():
    """On a Panda path (the benchmark's Panda path 1) the solution on every 4th knot, a start for the problem
    on the knots, exceeds the jerk limit between its check points so far that the first LP's trust region
    around it has no feasible point — HiGHS's dual simplex on every row (scipy's linprog) says infeasible.
    With ``strict_start`` the solve refuses that start (the coarse chain then solves the knot grid again from
    the TOPP-RA profile); without it the LPs that follow the start without the trust region stop the path.
    The knot grid solved from the TOPP-RA profile meets every row."""
    import scipy.sparse as sp
    from scipy.optimize import linprog

    from robot_dynamics_ros.retiming.jerk import slp
    from robot_dynamics_ros.retiming.jerk.rows import build_rows

    model = package_model("panda")
    # the benchmark's path and grid (bench_casestudy.py retimes without corners_kept)
    res = Retimer(model).retime(random_panda_waypoints(1001), options=RetimeOptions(torque_margin=0.9, gridpoints=40))
    seg = res.segments[0]
    path, s = seg.path, seg.s
    kn = path.knots
    k = np.clip(np.searchsorted(kn, s), 1, kn.shape[0] - 1)
    on_knot = np.flatnonzero(np.minimum(np.abs(s - kn[k - 1]), np.abs(s - kn[k])) <= 1e-12 * s[-1])
    knots = np.unique(np.r_[0, on_knot, s.shape[0] - 1])
    assert 40 <= knots.shape[0] <= s.shape[0] // 2  # the knot grid, itself started from a coarser one
    sk, xk = s[knots], seg.x[knots]
    coarse = np.unique(np.r_[np.arange(0, sk.shape[0], 4), sk.shape[0] - 1])
    limits = dict(velocity_limit=model.velocity_limit, acceleration_limit=model.acceleration_limit,
                  torque_limit=0.9 * model.effort_limit, jerk_limit=np.full(model.n, 500.0))
    ne = NewtonEulerDynamics(model)
    start = slp.solve_once(path, sk[coarse], xk[coarse], ne, max_iterations=4, **limits)
    # the knot grid's first LP as the solve poses it: tangents at the start's profile, x within the trust region
    N = sk.shape[0]
    rows = build_rows(path, sk, xk, ne, margin=1e-4, tool_speed=None, **limits)
    xq, uq = start._profile(np.concatenate((sk, rows.points_s)))
    rows.set_jerk_rows(xq[N:])
    lo, hi = rows.lo.copy(), rows.hi.copy()
    hi[1:N - 1] = np.minimum(hi[1:N - 1], slp._TRUST * xq[1:N - 1])
    lo[1:N - 1] = np.minimum(np.maximum(lo[1:N - 1], xq[1:N - 1] / slp._TRUST), hi[1:N - 1])
    A_ub = sp.csr_matrix((rows.data.ravel(), rows.cols.ravel(), np.arange(0, 3 * rows.b_ub.shape[0] + 1, 3)),
                         shape=(rows.b_ub.shape[0], rows.nv))
    A_eq = sp.csr_matrix((rows.A_eq.data, rows.A_eq.indices, rows.A_eq.indptr), shape=rows.A_eq.shape)
    lp = linprog(np.zeros(rows.nv), A_ub=A_ub, b_ub=rows.b_ub, A_eq=A_eq, b_eq=np.zeros(A_eq.shape[0]),
                 bounds=np.stack((lo, hi), axis=1), method="highs-ds")
    assert lp.status == 2  # infeasible
    with pytest.raises(ValueError, match="trust region"):
        slp.solve_once(path, sk, xk, ne, max_iterations=4, start=start, strict_start=True, **limits)
    # followed without the trust region, that start leaves no positive-speed profile within the coarse
    # iterations (the LP answers stop the path inside a stage)
    with pytest.raises(ValueError, match="positive speed"):
        slp.solve_once(path, sk, xk, ne, max_iterations=4, start=start, **limits)
    # the knot grid from the TOPP-RA profile instead: an answer that meets every row of the grid (tangents at
    # the answer: the jerk rows are then the true limits at the check points)
    sol = slp.solve_once(path, sk, xk, ne, max_iterations=slp._RETRY_ITERATIONS, coarse=False, **limits)
    assert np.isfinite(sol.duration) and sol.duration > res.duration
    z = np.concatenate((sol.x, sol.u))
    rows.set_jerk_rows(rows.at_points(z))
    assert (A_ub @ z - rows.b_ub).max() <= 1e-7
    assert np.abs(A_eq @ z).max() <= 1e-9 * np.abs(z).max() and (z >= rows.lo - 1e-12).all()


def _stage_lp(rng, N, per_stage):
    """A random feasible LP of the jerk solver's banded shape: columns x_0..x_{N-1}, u_0..u_{N-1} (x in
    [0, 5], u in [-20, 20]), the equalities x_{i+1} − x_i − Δ (u_i + u_{i+1}) = 0, and ``per_stage`` ≤ rows
    of three entries (x_i, u_i, x_{i+1}) on every stage, built to hold at a feasible profile z0 with slack
    in [0, 0.3]. Returns (A_eq (CSR), (cols, data, b), lo, hi, col_order (by gridpoint), z0)."""
    import scipy.sparse as sp

    d = 1.0 / (N - 1)
    u = 0.5 * np.sin(np.linspace(0.0, 3.0, N) + rng.uniform(0, 6))
    x = np.empty(N)
    x[0] = 1.0
    for i in range(N - 1):
        x[i + 1] = x[i] + d * (u[i] + u[i + 1])
    z0 = np.concatenate((x, u))
    i = np.arange(N - 1)
    one = np.ones(N - 1)
    A_eq = sp.csr_matrix((np.stack([-one, one, -d * one, -d * one], 1).ravel(),
                          np.stack([i, i + 1, N + i, N + i + 1], 1).ravel(), np.arange(0, 4 * N - 3, 4)),
                         shape=(N - 1, 2 * N))
    stage = np.repeat(i, per_stage)
    cols = np.stack([stage, N + stage, stage + 1], 1)
    data = rng.normal(size=cols.shape)
    data /= np.abs(data).max(axis=1, keepdims=True)
    b = (data * z0[cols]).sum(axis=1) + rng.uniform(0.0, 0.3, cols.shape[0])
    lo = np.r_[np.zeros(N), np.full(N, -20.0)]
    hi = np.r_[np.full(N, 5.0), np.full(N, 20.0)]
    return A_eq, (cols, data, b), lo, hi, np.stack([np.arange(N), N + np.arange(N)], 1).ravel(), z0


@pytest.mark.parametrize("degenerate", [False, True])
def test_dual_simplex_takes_many_pivots_on_banded_lps_to_the_highs_optimum(degenerate):
    """jerk.vertex.dual_simplex on LPs of the solver's banded shape (60 gridpoints, 4 rows per stage), from
    HiGHS's optimal basis of the LP on a quarter of the rows with the others added basic (refused where an
    equality's slack is basic in it): many pivots (over 30 on most draws) end at HiGHS's optimum of the full
    LP (objective to 1e-9, answer to 1e-7); with ``degenerate``, rows through HiGHS's optimum added (copies
    of its active rows and random rows meeting it with equality: a degenerate vertex, many tied ratio tests)
    do not change that. A pivot limit below the pivots needed returns None and a basis HiGHS goes on from
    to the same optimum."""
    from robot_dynamics_ros.retiming.jerk.highs import HighsLP
    from robot_dynamics_ros.retiming.jerk.vertex import dual_simplex

    rng = np.random.default_rng(23)
    many = compared = 0
    for draw in range(12):
        A_eq, (cols, data, b), lo, hi, key, z0 = _stage_lp(rng, 60, 4)
        nv, N = lo.shape[0], 60
        cost = np.r_[-rng.uniform(0.5, 1.0, N), rng.normal(scale=0.05, size=N)]
        best = HighsLP(cost, A_eq, (cols, data, b), lo, hi).solve()
        assert best.status == 0
        if degenerate:
            value = (data * best.x[cols]).sum(axis=1)
            tight = np.flatnonzero(b - value < 1e-9)
            extra = rng.choice(N - 1, 20)
            ecols = np.stack([extra, N + extra, extra + 1], 1)
            edata = rng.normal(size=ecols.shape)
            edata /= np.abs(edata).max(axis=1, keepdims=True)
            cols = np.concatenate((cols, cols[tight], ecols))
            data = np.concatenate((data, data[tight], edata))
            b = np.concatenate((b, b[tight], (edata * best.x[ecols]).sum(axis=1)))
            best = HighsLP(cost, A_eq, (cols, data, b), lo, hi).solve()
            assert best.status == 0
        m = b.shape[0]
        part = np.sort(rng.permutation(m)[:m // 4])
        rest = np.setdiff1d(np.arange(m), part)
        lp = HighsLP(cost, A_eq, (cols[part], data[part], b[part]), lo, hi)
        assert lp.solve().status == 0
        col_status, row_status = lp.basis()
        start = (col_status, np.concatenate((row_status, np.full(rest.shape[0], HighsLP.BASIC, np.int8))))
        order = np.concatenate((part, rest))
        rows = (cols[order], data[order], b[order])
        z, reached = dual_simplex(cost, A_eq, rows, lo, hi, start, key, 2000)
        if (row_status[:N - 1] == HighsLP.BASIC).any():  # an equality's slack basic: refused, HiGHS's to solve
            assert z is None
            continue
        assert z is not None
        assert cost @ z == pytest.approx(cost @ best.x, abs=1e-9)
        if not degenerate:  # a unique optimum (a degenerate vertex may have several optimal bases, one vertex)
            np.testing.assert_allclose(z, best.x, atol=1e-7)
        np.testing.assert_allclose(z, best.x, atol=1e-6)
        compared += 1
        needed = int((reached[0] != start[0]).sum() + (reached[1] != start[1]).sum())
        if needed > 60:  # each pivot changes at most two statuses: over 30 pivots
            many += 1
            short, part_basis = dual_simplex(cost, A_eq, rows, lo, hi, start, key, 10)
            assert short is None
            full = HighsLP(cost, A_eq, rows, lo, hi, part_basis).solve()  # HiGHS goes on from the basis reached
            assert full.status == 0 and cost @ full.x == pytest.approx(cost @ best.x, abs=1e-9)
    assert compared >= 8 and many >= 6
