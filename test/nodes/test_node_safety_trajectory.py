"""computed_torque refuses trajectories the joints cannot follow within their URDF velocity limits: from
the measured position to points[0] in its time_from_start, and between consecutive points. The policy is
the ROS-free core's (control/interpolation.check_trajectory_speed via ComputedTorqueController); the
limits here come from the URDF text itself."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from types import SimpleNamespace

import numpy as np
import pytest

from robot_dynamics_ros import robots
from robot_dynamics_ros.control.joint_mapping import JointStateFields
from robot_dynamics_ros.control.computed_torque import ComputedTorqueController, ComputedTorqueSettings
from robot_dynamics_ros.control.interpolation import SPEED_FACTOR, START_TOLERANCE, TrajectoryRejected
from robot_dynamics_ros.model import RobotModel

S = 1_000_000_000
T0 = 100 * S
Q = np.array([0.3, -1.1, 1.2, -0.4, 0.8, 0.2])


@pytest.fixture(scope="module")
def ur5():
    path = str(robots.ROBOTS["ur5"].path)
    model = RobotModel.from_urdf(path)
    root = ET.parse(path).getroot()
    vlim = {j.get("name"): float(j.find("limit").get("velocity")) for j in root.iter("joint")
            if j.find("limit") is not None and j.get("type") in ("revolute", "continuous", "prismatic")}
    return model, np.array([vlim[n] for n in model.joint_names])


def _core(model, q=Q):
    core = ComputedTorqueController(model, ComputedTorqueSettings(), epoch_ns=T0)
    names = tuple(n.encode() for n in model.joint_names)
    assert core.on_joint_state(JointStateFields(0, names, tuple(map(float, q)), (0.0,) * model.n, ()), 0, T0) is None
    return core


def _traj(names, points):
    pts = [SimpleNamespace(positions=list(map(float, p)), velocities=[], accelerations=[],
                           time_from_start=SimpleNamespace(sec=int(t), nanosec=int(round((t % 1) * 1e9))))
           for t, p in points]
    return SimpleNamespace(header=SimpleNamespace(stamp=SimpleNamespace(sec=0, nanosec=0)),
                           joint_names=list(names), points=pts)


def test_first_point_far_from_the_measured_position_too_soon_is_refused(ur5):
    model, vlim = ur5
    core = _core(model)
    target = Q.copy()
    target[2] -= 2.6                                  # elbow: 2.6 rad in 0.05 s = 52 rad/s
    with pytest.raises(TrajectoryRejected) as exc:
        core.trajectory_from_message(_traj(model.joint_names, [(0.05, target)]))
    text = str(exc.value)
    assert f"'{model.joint_names[2]}'" in text and "measured -> points[0]" in text
    assert "52 rad/s" in text and f"{vlim[2]:g} rad/s" in text


def test_the_same_point_with_enough_time_is_accepted(ur5):
    model, vlim = ur5
    core = _core(model)
    target = Q.copy()
    target[2] -= 2.6
    t_ok = 2.6 / vlim[2]                               # exactly at the limit: within the factor
    spec = core.trajectory_from_message(_traj(model.joint_names, [(t_ok, target)]))
    assert spec.positions.shape == (1, model.n)
    # at 1 % more than the documented factor allows (the start tolerance included), it is refused
    t_bad = (2.6 - START_TOLERANCE) / (SPEED_FACTOR * vlim[2]) / 1.01
    with pytest.raises(TrajectoryRejected):
        core.trajectory_from_message(_traj(model.joint_names, [(t_bad, target)]))


def test_start_tolerance_at_time_zero(ur5):
    model, _ = ur5
    core = _core(model)
    near, far = Q.copy(), Q.copy()
    near[0] += 0.9 * START_TOLERANCE
    far[0] += 1.1 * START_TOLERANCE
    core.trajectory_from_message(_traj(model.joint_names, [(0.0, near), (1.0, near)]))
    with pytest.raises(TrajectoryRejected, match="an instant jump"):
        core.trajectory_from_message(_traj(model.joint_names, [(0.0, far), (1.0, far)]))


def test_a_fast_segment_between_points_is_refused_naming_it(ur5):
    model, vlim = ur5
    core = _core(model)
    p1 = Q.copy()
    p2 = Q.copy()
    p2[4] += 1.2 * SPEED_FACTOR * vlim[4] * 0.5       # 20 % above the allowed speed over 0.5 s
    with pytest.raises(TrajectoryRejected) as exc:
        core.trajectory_from_message(_traj(model.joint_names, [(0.1, p1), (0.6, p2)]))
    text = str(exc.value)
    assert f"'{model.joint_names[4]}'" in text and "points[0] -> points[1]" in text
    assert f"{1.2 * SPEED_FACTOR * vlim[4]:.4g} rad/s" in text


def test_no_state_yet_skips_only_the_start_check(ur5):
    model, vlim = ur5
    core = ComputedTorqueController(model, ComputedTorqueSettings(), epoch_ns=T0)
    far = Q - 1.0
    core.trajectory_from_message(_traj(model.joint_names, [(0.05, far)]))   # nothing measured to compare
    fast = far.copy()
    fast[1] += 3.0                                    # 3 rad in 0.5 s: 6 rad/s
    with pytest.raises(TrajectoryRejected, match=r"points\[0\] -> points\[1\]"):
        core.trajectory_from_message(_traj(model.joint_names, [(0.05, far), (0.55, fast)]))


def test_a_given_velocity_above_the_limit_is_refused_naming_point_and_joint(ur5):
    """points[k].velocities are checked against the same factor × URDF limit, in the message's joint order."""
    model, vlim = ur5
    core = _core(model)
    order = list(reversed(model.joint_names))           # the message's order differs from the model's
    far = Q.copy()
    far[3] += 1.0

    def traj(v_mid):
        pts = [(0.0, Q, np.zeros(model.n)), (2.0, (Q + far) / 2, v_mid), (4.0, far, np.zeros(model.n))]
        msg = _traj(order, [(t, p[::-1]) for t, p, _ in pts])
        for point, (_, _, v) in zip(msg.points, pts):
            point.velocities = list(map(float, v[::-1]))
        return msg

    v_ok = np.zeros(model.n)
    v_ok[3] = 0.99 * SPEED_FACTOR * vlim[3]
    core.trajectory_from_message(traj(v_ok))
    v_bad = v_ok.copy()
    v_bad[3] = 1.1 * SPEED_FACTOR * vlim[3]
    with pytest.raises(TrajectoryRejected) as exc:
        core.trajectory_from_message(traj(v_bad))
    text = str(exc.value)
    assert "points[1].velocities" in text and f"'{model.joint_names[3]}'" in text
    assert f"{v_bad[3]:.4g} rad/s" in text and f"{vlim[3]:g} rad/s" in text
