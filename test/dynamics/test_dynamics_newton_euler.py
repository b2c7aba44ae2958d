"""The in-package batched Newton–Euler against Pinocchio (independent engine) on real arms.

Issue 3: agreement ≤ 1e-9 N·m on Panda, UR5, Kinova, Z1, SO-100, Baxter, a Talos arm (and xArm7), with
payload and with held joints.
"""
from __future__ import annotations

import numpy as np
import pytest

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS

ARMS = ["panda", "ur5", "kinova", "z1", "so100", "baxter", "talos_left_arm", "xarm7"]
TOL = 1e-9  # N·m, issue 3


def states(model, rng, N):
    q = model.random_configuration(rng, N)
    return q, rng.uniform(-2, 2, q.shape), rng.uniform(-5, 5, q.shape)


def assert_engines_agree(model, N=8, seed=0):
    rng = np.random.default_rng(seed)
    ne, pino = NewtonEulerDynamics(model), PinocchioDynamics(model)
    q, qd, qdd = states(model, rng, N)
    tau, g, M, cqd = ne.rnea(q, qd, qdd), ne.gravity(q), ne.mass_matrix(q), ne.coriolis_qd(q, qd)
    M_columns = ne.mass_matrix(q, method="columns")  # the other in-package algorithm
    assert tau.shape == (N, model.n) and M.shape == M_columns.shape == (N, model.n, model.n)
    for k in range(N):
        np.testing.assert_allclose(tau[k], pino.rnea(q[k], qd[k], qdd[k]), rtol=0, atol=TOL)
        np.testing.assert_allclose(g[k], pino.gravity(q[k]), rtol=0, atol=TOL)
        np.testing.assert_allclose(M[k], pino.mass_matrix(q[k]), rtol=0, atol=TOL)
        np.testing.assert_allclose(M_columns[k], pino.mass_matrix(q[k]), rtol=0, atol=TOL)
        np.testing.assert_allclose(cqd[k], pino.coriolis_matrix(q[k], qd[k]) @ qd[k], rtol=0, atol=TOL)


@pytest.mark.parametrize("robot", ARMS)
def test_agrees_with_pinocchio(robot):
    e = ROBOTS[robot]
    assert_engines_agree(RobotModel.from_urdf(e.path, held_joints=e.held_joints))


@pytest.mark.parametrize("robot, held", [
    ("panda", {"panda_finger_joint1": 0.035}),                  # finger + its mimic welded
    ("ur5", {"wrist_3_joint": 1.3, "elbow_joint": -0.8}),      # a mid-chain joint held
    ("kinova", {"j2s6s200_joint_4": 2.0}),                     # a continuous joint held
    ("baxter", {"head_pan": 0.4, "r_gripper_l_finger_joint": 0.01}),
])
def test_held_joints_and_payload(robot, held):
    e = ROBOTS[robot]
    model = RobotModel.from_urdf(e.path, held_joints=held)
    for jn in held:
        assert jn not in model.joint_names
    tip = model.description.joints[model.joint_names[-1]].child
    model = model.with_settings(
        payload=(tip, 1.7, (0.02, -0.01, 0.06), [[0.01, 0.001, 0.0], [0.001, 0.012, 0.0], [0.0, 0.0, 0.008]]))
    assert_engines_agree(model, N=4, seed=3)


def test_payload_and_gravity_settings_reach_engines_over_the_new_model():
    e = ROBOTS["panda"]
    model = RobotModel.from_urdf(e.path, held_joints=e.held_joints)
    ne = NewtonEulerDynamics(model)
    q = model.random_configuration(np.random.default_rng(1), 3)
    g0 = ne.gravity(q)
    loaded = model.with_settings(payload=("panda_link8", 3.0, (0, 0, 0.1)))
    ne1, pino1 = NewtonEulerDynamics(loaded), PinocchioDynamics(loaded)
    g1 = ne1.gravity(q)
    assert np.abs(g1 - g0).max() > 0.5  # 3 kg at the flange is felt
    for k in range(3):
        np.testing.assert_allclose(g1[k], pino1.gravity(q[k]), atol=TOL)
    np.testing.assert_allclose(ne.gravity(q), g0, atol=1e-12)  # the engine over the old model is untouched
    wall = loaded.with_settings(gravity=(0.0, 9.81, 0.0))  # robot mounted on a wall
    np.testing.assert_allclose(NewtonEulerDynamics(wall).gravity(q)[0], PinocchioDynamics(wall).gravity(q[0]),
                               atol=TOL)
    back = wall.with_settings(payload=None, gravity=(0.0, 0.0, -9.81))
    np.testing.assert_allclose(NewtonEulerDynamics(back).gravity(q), g0, atol=1e-12)


def test_single_state_and_shape_errors():
    model = RobotModel.from_urdf(ROBOTS["planar_2r"].path)
    ne = NewtonEulerDynamics(model)
    q = np.array([0.1, 0.2])
    assert ne.rnea(q, q, q).shape == (2,) and ne.mass_matrix(q).shape == (2, 2)
    with pytest.raises(ValueError, match=r"q: expected shape \(N, 2\)"):
        ne.gravity(np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"qd: expected shape \(4, 2\)"):
        ne.rnea(np.zeros((4, 2)), np.zeros((3, 2)), np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"qdd\[0\] \(joint1\) is NaN"):
        ne.rnea(q, q, np.array([np.nan, 0.0]))
    with pytest.raises(ValueError, match=r"q\[2, 1\] \(joint2\) is -inf"):
        ne.gravity(np.array([[0.0, 0.0], [0.1, 0.2], [0.3, -np.inf]]))
    with pytest.raises(ValueError, match="method"):
        ne.mass_matrix(q, method="aba")


def test_prismatic_chain_against_pinocchio():
    """A Cartesian-style arm (prismatic joints with tilted axes) exercises the prismatic branch."""
    text = """<robot name="p"><link name="base"/>
      <link name="a"><inertial><origin xyz="0.1 0.05 0"/><mass value="2"/>
        <inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0" izz="0.04"/></inertial></link>
      <link name="b"><inertial><origin xyz="0 0.1 0.2"/><mass value="1.5"/>
        <inertia ixx="0.01" ixy="0" ixz="0.002" iyy="0.02" iyz="0" izz="0.015"/></inertial></link>
      <link name="c"><inertial><origin xyz="0.05 0 0.1"/><mass value="0.7"/>
        <inertia ixx="0.004" ixy="0" ixz="0" iyy="0.005" iyz="0.0005" izz="0.006"/></inertial></link>
      <joint name="slide" type="prismatic"><origin xyz="0 0 0.3" rpy="0.2 -0.1 0.4"/><parent link="base"/>
        <child link="a"/><axis xyz="1 1 0"/><limit lower="-0.5" upper="0.5" effort="100" velocity="1"/></joint>
      <joint name="turn" type="revolute"><origin xyz="0.3 0 0.1" rpy="0 0.5 0"/><parent link="a"/>
        <child link="b"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="100" velocity="1"/></joint>
      <joint name="slide2" type="prismatic"><origin xyz="0 0.2 0.1" rpy="1.0 0 0.3"/><parent link="b"/>
        <child link="c"/><axis xyz="0 0.6 0.8"/><limit lower="-0.2" upper="0.2" effort="100" velocity="1"/></joint>
    </robot>"""
    assert_engines_agree(RobotModel.from_urdf(text), N=6)


def test_kernel_sine_cosine_match_libm():
    """The vectorized sin/cos of the kernel against numpy (libm) over the angles a robot can have."""
    from robot_dynamics_ros.dynamics.rnea_kernels import sincos_flat

    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-7, 7, 200_000), rng.uniform(-1e5, 1e5, 200_000),
                        np.arange(-64, 65) * (np.pi / 4), np.arange(-64, 65) * (np.pi / 4) + 1e-13])
    S, C = np.empty_like(x), np.empty_like(x)
    sincos_flat(x, S, C)
    assert np.abs(S - np.sin(x)).max() <= 2.3e-16 and np.abs(C - np.cos(x)).max() <= 2.3e-16


def test_wound_up_continuous_joint_uses_the_libm_fallback():
    model = RobotModel.from_urdf(ROBOTS["kinova"].path)
    ne, pino = NewtonEulerDynamics(model), PinocchioDynamics(model)
    q = model.random_configuration(np.random.default_rng(2))
    i = model.joint_types.index("continuous")
    q[i] = 3.0e6 + 0.3  # far beyond the polynomial reduction's range (2^19 · π/2)
    qd = np.full(model.n, 0.4)
    np.testing.assert_allclose(ne.rnea(q, qd, qd), pino.rnea(q, qd, qd), atol=TOL)
