"""Straight-line Cartesian paths: every path point's tool pose checked with Pinocchio built directly from
the URDF file (not through the package's engine), the rotation helpers against closed forms."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.retiming.cartesian import line_path, rotation_exp, rotation_log
from robot_dynamics_ros.robots import example_robot_data_dir

UR10 = example_robot_data_dir() / "ur_description/urdf/ur10_robot.urdf"


def _tool_poses(urdf, joint_names, Q, frame):
    pm = pin.buildModelFromUrdf(str(urdf))
    data = pm.createData()
    fid = pm.getFrameId(frame)
    out = []
    for q in Q:
        qp = np.zeros(pm.nq)
        for name, v in zip(joint_names, q):
            qp[pm.joints[pm.getJointId(name)].idx_q] = v
        pin.framesForwardKinematics(pm, data, qp)
        out.append(data.oMf[fid].homogeneous.copy())
    return np.array(out)


def test_rotation_log_exp_closed_forms():
    rng = np.random.default_rng(3)
    for angle in (0.0, 1e-8, 0.3, 2.0, np.pi - 1e-9):
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        R = rotation_exp(angle * axis)
        np.testing.assert_allclose(R, pin.exp3(angle * axis), atol=1e-12)
        w = rotation_log(R)
        np.testing.assert_allclose(rotation_exp(w), R, atol=1e-7 if angle > 3 else 1e-12)


def test_ur10_line_of_1_2_m_in_200_points_is_straight_equally_spaced_and_holds_orientation():
    model = RobotModel.from_urdf(UR10)
    engine = PinocchioDynamics(model)
    q0 = np.array([0.6, -1.2, 1.6, -1.97, -1.57, 0.0])
    line = line_path(engine, "tool0", q0, displacement=[0.0, -1.2, 0.0], points=200)
    assert line.q.shape == (200, 6) and line.length == pytest.approx(1.2)
    T = _tool_poses(UR10, model.joint_names, line.q, "tool0")
    p0 = T[0, :3, 3]
    expected = p0 + np.linspace(0, 1, 200)[:, None] * np.array([0.0, -1.2, 0.0])
    np.testing.assert_allclose(T[:, :3, 3], expected, atol=1e-9)
    for Ti in T:
        assert np.linalg.norm(pin.log3(Ti[:3, :3] @ T[0, :3, :3].T)) < 1e-9
    assert np.abs(np.diff(line.q, axis=0)).max() < 0.02  # continuous: one IK branch
    assert 0 < line.deviation < 1e-4  # between points the joint-space chord bows off the line (m)


def test_slerp_orientation_and_unreachable_goal():
    model = RobotModel.from_urdf(UR10)
    engine = PinocchioDynamics(model)
    q0 = np.array([0.6, -1.2, 1.6, -1.97, -1.57, 0.0])
    R0 = engine.frame_placement(q0, "tool0")[:3, :3]
    R1 = rotation_exp(np.array([0.0, 0.0, 0.5])) @ R0
    line = line_path(engine, "tool0", q0, displacement=[0.0, -0.3, 0.1], goal_rotation=R1, points=21)
    T = _tool_poses(UR10, model.joint_names, line.q, "tool0")
    for k, Ti in enumerate(T):  # the orientation at path fraction s is exp(s·ω01) R0
        expected = pin.exp3(k / 20 * np.array([0.0, 0.0, 0.5])) @ R0
        assert np.linalg.norm(pin.log3(Ti[:3, :3] @ expected.T)) < 1e-9
    with pytest.raises(UserError, match="not reachable"):
        line_path(engine, "tool0", q0, displacement=[0.0, 3.0, 0.0], points=50)
    with pytest.raises(UserError, match="exactly one"):
        line_path(engine, "tool0", q0, points=50)
