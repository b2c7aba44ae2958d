"""Requests on real robot descriptions of example-robot-data that once failed in a way a user could not act on
(a sweep of the retimer over every URDF there, cut corners at 1e-3 and 1e-2 rad): the refusal names the real
cause, the call returns a result instead of raising, and a trajectory that stops at direction reversals ends
at rest exactly. Expected values come from Pinocchio on the same URDF, never from the package."""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.retiming.request import RetimeOptions, RetimeStatus
from robot_dynamics_ros.retiming.retimer import Retimer
from robot_dynamics_ros.robots import ROBOTS, example_robot_data_dir
from robot_dynamics_testing.retiming_cases import load_model, smooth_waypoints


def test_a_gravity_refusal_with_cut_corners_names_the_first_waypoint_pinocchio_finds_over_the_limit():
    """TALOS's left arm, the benchmark's smooth 10-waypoint path: gravity alone exceeds arm_left_2_joint's
    22.32 N·m first at waypoint 3 (Pinocchio). The refusal named waypoint 1 with waypoint 9's value when the
    corners were cut (the knots' rows were read as the waypoints')."""
    path = ROBOTS["talos_left_arm"].path
    m = RobotModel.from_urdf(path)
    wp = smooth_waypoints(m, 10)
    res = Retimer(m).retime(wp)
    pm = pin.buildModelFromUrdf(str(path))
    data = pm.createData()
    j = m.joint_names.index("arm_left_2_joint")
    g = []
    for row in wp:
        q = pin.neutral(pm)
        for name, value in zip(m.joint_names, row):
            q[pm.joints[pm.getJointId(name)].idx_q] = value
        g.append(pin.computeGeneralizedGravity(pm, data, q)[pm.joints[pm.getJointId("arm_left_2_joint")].idx_v])
    g = np.array(g)
    first = int(np.flatnonzero(np.abs(g) > m.effort_limit[j])[0])
    assert first == 3
    assert res.status == RetimeStatus.GRAVITY_EXCEEDS_TORQUE
    assert res.message.startswith(f"waypoint {first}: gravity alone needs {g[first]:.6g} N·m at joint "
                                  "'arm_left_2_joint'"), res.message


def test_a_joint_with_a_zero_velocity_limit_that_the_path_moves_is_refused_by_name():
    """romeo's LHand (URDF velocity="0" effort="0") and iris's rotors (velocity="0"): moving them is refused
    naming the joint and the waypoints. Before: LHand was timed at 2.2e4 rad/s by the solver (its zero-limit
    rows were dropped as inactive) and refused by the output check with advice that cannot help; the rotors
    got a "numerical failure, please report it"."""
    romeo = RobotModel.from_urdf(example_robot_data_dir() / "romeo_description/urdf/romeo.urdf")
    wp = np.zeros((2, romeo.n))
    wp[1, romeo.joint_names.index("LHand")] = 0.5
    res = Retimer(romeo).retime(wp)
    assert res.status == RetimeStatus.VELOCITY_LIMIT
    assert "joint 'LHand' has a velocity limit of 0 rad/s" in res.message
    assert "between waypoints 0 and 1" in res.message
    iris = RobotModel.from_urdf(example_robot_data_dir() / "iris_description/robots/iris.urdf")
    res = Retimer(iris).retime(np.array([[0.0, 0, 0, 0], [0.0, 0, 0, 0], [1.0, 0, 0, 0]]))
    assert res.status == RetimeStatus.VELOCITY_LIMIT
    assert f"joint '{iris.joint_names[0]}' has a velocity limit of 0 rad/s" in res.message
    assert "between waypoints 1 and 2" in res.message
    # a joint with a zero limit that stays still does not stop the others
    still = np.tile(0.5 * (romeo.lower + romeo.upper), (2, 1))
    still[1, romeo.joint_names.index("LElbowYaw")] += 0.1
    assert Retimer(romeo).retime(still).success


def test_waypoints_beyond_what_a_double_resolves_are_refused_not_raised():
    """iris's joints accept ±1e16 rad; waypoints 1e15 rad apart left knot intervals of zero length when the
    corner was cut (numba's ZeroDivisionError escaped ``retime``). Refused with the path's length."""
    iris = RobotModel.from_urdf(example_robot_data_dir() / "iris_description/robots/iris.urdf")
    iris.velocity_limit = np.ones(iris.n)   # its URDF's 0 would be refused first
    res = Retimer(iris).retime(np.array([[0.0, 0, 0, 0], [1e15, 0, 0, 0], [1e15, 1e15, 0, 0]]))
    assert res.status == RetimeStatus.INVALID_REQUEST
    assert "rad/m long" in res.message and "path_tolerance 0.001" in res.message


def test_a_trajectory_through_direction_reversals_ends_at_rest_exactly():
    """UR5, random waypoints (direction reversals: the trajectory stops at each): the last 1 kHz sample is the
    last waypoint at zero velocity exactly (it was 1e-15 rad/s: the end time, summed over the segments, fell
    one rounding step short of the last segment's end)."""
    m = load_model("ur5", payload=False)
    wp = np.random.default_rng(0).uniform(m.lower, m.upper, (6, m.n))
    res = Retimer(m).retime(wp, options=RetimeOptions(sample_period=1e-3))
    assert res.success, res.message
    assert len(res.segments) > 1
    assert np.all(res.qd[-1] == 0.0), res.qd[-1]
    np.testing.assert_allclose(res.q[-1], wp[-1], rtol=0, atol=1e-12)


def test_a_timing_past_a_limit_between_default_gridpoints_is_redone_on_a_denser_grid():
    """TIAGo Pro, the benchmark's smooth 200-waypoint path with ±0.3 mrad of recording noise, 10 rad/s²: on the
    default grid the torso's velocity reached 1.0029× its limit between gridpoints and the request was refused
    ("try more gridpoints"). Now the retimer tries denser grids itself: the output, sampled at 1 kHz, stays
    within the URDF's velocity limits as Pinocchio reads them (1 + 1e-4), and the message says so."""
    from types import SimpleNamespace

    path = example_robot_data_dir() / "tiago_pro_description/robots/tiago_pro.urdf"
    m = RobotModel.from_urdf(path)
    m.acceleration_limit[:] = 10.0
    lo, hi = np.clip(m.lower, -3, 3), np.clip(m.upper, -3, 3)
    base = smooth_waypoints(SimpleNamespace(lower=lo, upper=hi, n=m.n), 200)
    wp = np.clip(base + np.random.default_rng(2000).uniform(-3e-4, 3e-4, base.shape), lo, hi)
    res = Retimer(m).retime(wp, options=RetimeOptions(sample_period=1e-3))
    assert res.success, res.message
    assert "on the default grid the timing found exceeds the velocity limit: joint 'torso_lift_joint'" in res.message
    assert res.gridpoints >= 4 * 200
    pm = pin.buildModelFromUrdf(str(path))
    vmax = np.array([pm.velocityLimit[pm.joints[pm.getJointId(n)].idx_v] for n in m.joint_names])
    assert (np.abs(res.qd) / vmax).max() <= 1 + 1e-4
    # a request that names its grid gets that grid: refused as before
    fixed = Retimer(m).retime(wp, options=RetimeOptions(sample_period=1e-3, gridpoints=200))
    assert fixed.status == RetimeStatus.LIMIT_EXCEEDED and "torso_lift_joint" in fixed.message
