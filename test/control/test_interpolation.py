"""Trajectory sampling against closed-form polynomials, and JointTrajectory validation / semantics.

Independent source: a polynomial of degree d is reproduced exactly by the interpolation of degree ≥ d
when the points carry its own values and derivatives (Lynch & Park 2017, §9.2.2), so the expected
values are numpy.polynomial evaluations, not our own code.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.polynomial import Polynomial
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_dynamics_ros.control.interpolation import (
    CUBIC,
    LINEAR,
    QUINTIC,
    PiecewisePolynomialTrajectory,
    TrajectoryExecutor,
    TrajectoryRejected,
    validate_joint_trajectory,
)

JOINTS = ("j1", "j2", "j3")


def _polys(rng, degree, n):
    return [Polynomial(rng.normal(size=degree + 1)) for _ in range(n)]


def _eval(polys, t, der=0):
    return np.stack([p.deriv(der)(t) if der else p(t) for p in polys], axis=-1)


@given(seed=st.integers(0, 2**31 - 1), degree=st.sampled_from([1, 3, 5]))
def test_polynomial_reproduced_exactly(seed, degree):
    rng = np.random.default_rng(seed)
    n = 3
    polys = _polys(rng, degree, n)
    times = np.cumsum(rng.uniform(0.05, 0.8, size=6)) - 0.05
    q = _eval(polys, times)
    qd = _eval(polys, times, 1) if degree >= 3 else None
    qdd = _eval(polys, times, 2) if degree == 5 else None
    traj = PiecewisePolynomialTrajectory(times, q, qd, qdd)
    assert set(traj.segment_kind) == {degree}
    t = np.linspace(times[0], times[-1], 97)[1:-1]
    qs, qds, qdds = traj.sample_many(t)
    np.testing.assert_allclose(qs, _eval(polys, t), atol=1e-9)
    np.testing.assert_allclose(qds, _eval(polys, t, 1), atol=1e-8)
    np.testing.assert_allclose(qdds, _eval(polys, t, 2), atol=1e-6)
    # the scalar path agrees with the vectorized one
    for ti in t[::13]:
        a, b, c = traj.sample(float(ti))
        k = int(np.flatnonzero(t == ti)[0])
        np.testing.assert_allclose(a, qs[k], atol=1e-12)
        np.testing.assert_allclose(b, qds[k], atol=1e-12)
        np.testing.assert_allclose(c, qdds[k], atol=1e-12)


def test_quintic_matches_boundary_values_of_a_non_polynomial():
    # sin is not a polynomial: the interpolant must still hit q, qd, qdd at every point (C2 trajectory)
    times = np.array([0.0, 0.3, 0.7, 1.4])
    q, qd, qdd = np.sin(times)[:, None], np.cos(times)[:, None], -np.sin(times)[:, None]
    traj = PiecewisePolynomialTrajectory(times, q, qd, qdd)
    eps = 1e-9
    for k, tk in enumerate(times[1:-1], start=1):
        for side in (tk - eps, tk + eps):
            a, b, c = traj.sample(side)
            assert abs(a[0] - q[k, 0]) < 1e-8 and abs(b[0] - qd[k, 0]) < 1e-7 and abs(c[0] - qdd[k, 0]) < 1e-6
    # and it stays close to sin in between (interpolation error of a quintic on 0.7 s segments)
    t = np.linspace(0, 1.4, 200)
    assert np.max(np.abs(traj.sample_many(t)[0][:, 0] - np.sin(t))) < 1e-4


def test_segment_degree_follows_given_fields_and_linear_segment_is_exact():
    times = [0.0, 1.0, 2.0, 3.0]
    q = np.array([[0.0], [1.0], [3.0], [2.0]])
    qd = np.array([[0.0], [0.5], [0.0], [0.0]])
    qdd = np.zeros((4, 1))
    traj = PiecewisePolynomialTrajectory(times, q, qd, qdd, has_velocity=[True, True, False, True],
                                         has_acceleration=[True, True, False, False])
    assert list(traj.segment_kind) == [QUINTIC, LINEAR, LINEAR]
    a, b, c = traj.sample(1.25)  # linear from 1 to 3 over 1 s
    assert a[0] == pytest.approx(1.5) and b[0] == pytest.approx(2.0) and c[0] == 0.0
    traj = PiecewisePolynomialTrajectory(times, q, qd, None, has_velocity=[True] * 4,
                                         has_acceleration=[False] * 4)
    assert set(traj.segment_kind) == {CUBIC}


def test_hold_before_first_and_after_last_point():
    traj = PiecewisePolynomialTrajectory([0.5, 1.0], [[1.0, 2.0], [3.0, 4.0]], [[1, 1], [2, 2]], [[0, 0], [0, 0]])
    for t, expected in ((0.0, [1.0, 2.0]), (0.4999, [1.0, 2.0]), (1.0, [3.0, 4.0]), (7.0, [3.0, 4.0])):
        q, qd, qdd = traj.sample(t)
        np.testing.assert_array_equal(q, expected)
        np.testing.assert_array_equal(qd, 0.0)
        np.testing.assert_array_equal(qdd, 0.0)
    q, qd, _ = traj.sample(0.5)  # at the first point itself: its own velocity (no jump when a trajectory starts)
    np.testing.assert_array_equal(q, [1.0, 2.0])
    np.testing.assert_array_equal(qd, [1.0, 1.0])
    q, qd, _ = traj.sample_many([0.0, 7.0])
    np.testing.assert_array_equal(q, [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(qd, 0.0)


# ----------------------------------------------------------------------------- validation


def _msg(names, points, stamp=(0, 0)):
    m = JointTrajectory()
    m.header.stamp.sec, m.header.stamp.nanosec = stamp
    m.joint_names = list(names)
    for t, pos, vel, acc in points:
        p = JointTrajectoryPoint()
        p.positions = [float(x) for x in pos]
        p.velocities = [float(x) for x in vel]
        p.accelerations = [float(x) for x in acc]
        p.time_from_start.sec = int(t)
        p.time_from_start.nanosec = int(round((t - int(t)) * 1e9))
        m.points.append(p)
    return m


def test_validation_reorders_into_controller_order():
    names = ("j3", "j1", "j2")
    m = _msg(names, [(0.5, [3, 1, 2], [30, 10, 20], [300, 100, 200]), (1.25, [6, 4, 5], [], [])],
             stamp=(12, 500_000_000))
    spec = validate_joint_trajectory(m, JOINTS)
    assert spec.start_ns == 12_500_000_000
    np.testing.assert_array_equal(spec.times, [0.5, 1.25])
    np.testing.assert_array_equal(spec.positions, [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(spec.velocities[0], [10, 20, 30])
    np.testing.assert_array_equal(spec.accelerations[0], [100, 200, 300])
    assert list(spec.has_velocity) == [True, False] and list(spec.has_acceleration) == [True, False]
    assert validate_joint_trajectory(_msg(JOINTS, [(1, [0, 0, 0], [], [])]), JOINTS).start_ns == 0


@pytest.mark.parametrize("names, points, match", [
    (("j1", "j2", "jx"), [(1, [0, 0, 0], [], [])], r"joint_names\[2\] = 'jx' is not a controlled joint"),
    (("j1", "j2", "j1"), [(1, [0, 0, 0], [], [])], r"joint_names\[2\] = 'j1' is a duplicate"),
    (("j1", "j2"), [(1, [0, 0], [], [])], r"lacks controlled joint\(s\) \['j3'\]"),
    (JOINTS, [(1, [0, 0, 0], [], []), (1, [1, 1, 1], [], [])],
     r"points\[1\].time_from_start = 1.0 s is not after points\[0\]"),
    (JOINTS, [(2, [0, 0, 0], [], []), (1, [1, 1, 1], [], [])], r"points\[1\].time_from_start"),
    (JOINTS, [(1, [0, 0], [], [])], r"points\[0\].positions has 2 values; expected 3"),
    (JOINTS, [(1, [0, 0, 0], [1, 2], [])], r"points\[0\].velocities has 2 values; expected 0 or 3"),
    (JOINTS, [(1, [0, 0, 0], [1, 2, 3], [1])], r"points\[0\].accelerations has 1 values"),
    (JOINTS, [(1, [0, 0, 0], [], [1, 2, 3])], r"points\[0\].accelerations given without velocities"),
    (JOINTS, [(1, [0, 0, 0], [], []), (2, [0, float("nan"), 0], [], [])],
     r"points\[1\].positions\[1\] \(joint 'j2'\) = nan is not finite"),
    (JOINTS, [(1, [0, 0, 0], [0, 0, float("inf")], [])], r"points\[0\].velocities\[2\] \(joint 'j3'\) = inf"),
])
def test_validation_rejects_with_reason(names, points, match):
    with pytest.raises(TrajectoryRejected, match=match):
        validate_joint_trajectory(_msg(names, points), JOINTS)


def test_validation_position_limits_name_joint_and_value():
    m = _msg(("j2", "j1", "j3"), [(1, [0.5, 2.5, 0.0], [], [])])
    with pytest.raises(TrajectoryRejected, match=r"points\[0\].positions\[1\] \(joint 'j1'\) = 2.5 rad is beyond "
                                                 r"the upper limit 2.0"):
        validate_joint_trajectory(m, JOINTS, lower=-np.full(3, 2.0), upper=np.full(3, 2.0))


def test_empty_message_is_a_cancel_not_an_error():
    spec = validate_joint_trajectory(_msg(JOINTS, []), JOINTS)
    assert spec.empty


# ----------------------------------------------------------------------------- replacement semantics


def _spec(points, stamp=(0, 0)):
    return validate_joint_trajectory(_msg(JOINTS, points, stamp), JOINTS)


def test_executor_holds_then_starts_on_receipt_from_the_held_state():
    ex = TrajectoryExecutor(3, hold_position=[0.1, 0.2, 0.3])
    s = ex.sample(5.0)
    np.testing.assert_array_equal(s.q, [0.1, 0.2, 0.3])
    assert not s.tracking
    ex.submit(_spec([(1.0, [1, 1, 1], [0, 0, 0], [0, 0, 0])]), received=10.0)
    # implicit first point = held state at the receive time; quintic rest-to-rest over 1 s
    s = ex.sample(10.5)
    assert s.tracking
    np.testing.assert_allclose(s.q, 0.5 * (np.array([0.1, 0.2, 0.3]) + 1.0), atol=1e-12)  # symmetric midpoint
    # closed form of the rest-to-rest quintic at τ=0.5: velocity 15/8 · Δ / T
    np.testing.assert_allclose(s.qd, 15 / 8 * (1 - np.array([0.1, 0.2, 0.3])), atol=1e-12)
    s = ex.sample(11.5)
    np.testing.assert_array_equal(s.q, [1, 1, 1])
    assert not s.tracking and np.all(s.qd == 0)


def test_executor_new_trajectory_replaces_old_from_its_start_time_with_continuity():
    ex = TrajectoryExecutor(3, hold_position=[0, 0, 0])
    # old: linear ramp 0 -> 10 over 10 s
    ex.submit(_spec([(0.0, [0, 0, 0], [1, 1, 1], [0, 0, 0]), (10.0, [10, 10, 10], [1, 1, 1], [0, 0, 0])]),
              received=100.0)
    # new, received at 101 but stamped to start at 104: first point at +1 s
    ex.submit(_spec([(1.0, [0, 0, 0], [0, 0, 0], [0, 0, 0])], stamp=(104, 0)), received=101.0)
    np.testing.assert_allclose(ex.sample(103.0).q, 3.0)  # old one still runs
    s = ex.sample(104.0)
    np.testing.assert_allclose(s.q, 4.0)  # continuous at the switch: implicit point = old state at 104 s
    np.testing.assert_allclose(s.qd, 1.0)
    np.testing.assert_allclose(ex.sample(105.0).q, 0.0)
    np.testing.assert_allclose(ex.sample(200.0).q, 0.0)


def test_executor_cancel_holds_current_desired_position():
    ex = TrajectoryExecutor(3, hold_position=[0, 0, 0])
    ex.submit(_spec([(0.0, [0, 0, 0], [2, 2, 2], [0, 0, 0]), (10.0, [20, 20, 20], [2, 2, 2], [0, 0, 0])]),
              received=0.0)
    ex.sample(1.0)
    ex.submit(_spec([]), received=2.5)
    s = ex.sample(3.0)
    np.testing.assert_allclose(s.q, 5.0)
    assert not s.tracking
    np.testing.assert_allclose(ex.sample(9.0).q, 5.0)


def test_executor_without_hold_position_returns_none_until_known():
    ex = TrajectoryExecutor(3)
    assert ex.sample(0.0) is None
    ex.set_hold_position([1, 2, 3])
    np.testing.assert_array_equal(ex.sample(0.0).q, [1, 2, 3])


def test_executor_epoch_keeps_nanosecond_stamps_exact():
    # stamp 1.7e9 s + 123456789 ns: as float epoch seconds this would be off by ~1e-7 s
    stamp = (1_700_000_000, 123_456_789)
    epoch_ns = 1_700_000_000 * 10**9
    ex = TrajectoryExecutor(3, hold_position=[0, 0, 0], epoch_ns=epoch_ns)
    # linear motion at 1000 rad/s through the start point: a 1e-7 s timing error would be 1e-4 rad
    ex.submit(_spec([(0.0, [0, 0, 0], [1000, 1000, 1000], [0, 0, 0]),
                     (1.0, [1000, 1000, 1000], [1000, 1000, 1000], [0, 0, 0])], stamp=stamp), received=0.0)
    tick_ns = stamp[0] * 10**9 + stamp[1] + 250_000_001
    s = ex.sample((tick_ns - epoch_ns) * 1e-9)
    np.testing.assert_allclose(s.q, 1000 * 0.250000001, atol=1e-9)


def test_executor_newer_message_drops_pending_ones_starting_later():
    ex = TrajectoryExecutor(3, hold_position=[0, 0, 0])
    ex.submit(_spec([(1.0, [5, 5, 5], [], [])], stamp=(20, 0)), received=10.0)   # pending: starts at 20 s
    ex.submit(_spec([(1.0, [1, 1, 1], [], [])], stamp=(15, 0)), received=11.0)   # newer, starts earlier
    np.testing.assert_allclose(ex.sample(14.0).q, 0.0)
    np.testing.assert_allclose(ex.sample(15.5).q, 0.5)     # linear from the held 0 to 1 over 1 s
    np.testing.assert_allclose(ex.sample(30.0).q, 1.0)     # the 20 s trajectory was replaced: never runs
    # an older pending message starting earlier than a newer one still runs until the newer one starts
    ex.submit(_spec([(1.0, [2, 2, 2], [], [])], stamp=(40, 0)), received=31.0)
    ex.submit(_spec([(1.0, [3, 3, 3], [], [])], stamp=(50, 0)), received=32.0)
    np.testing.assert_allclose(ex.sample(45.0).q, 2.0)
    np.testing.assert_allclose(ex.sample(52.0).q, 3.0)


def test_executor_trajectory_stamped_in_the_past_is_sampled_where_it_is_now():
    ex = TrajectoryExecutor(3, hold_position=[0, 0, 0])
    # started 0.5 s before it was received: linear 0 -> 2 over 1 s from its own first point at t = 0
    ex.submit(_spec([(0.0, [0, 0, 0], [], []), (1.0, [2, 2, 2], [], [])], stamp=(99, 500_000_000)),
              received=100.0)
    np.testing.assert_allclose(ex.sample(100.0).q, 1.0)
    np.testing.assert_allclose(ex.sample(100.25).q, 1.5)
