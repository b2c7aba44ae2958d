"""MuJoCo simulator core vs Pinocchio (an independent engine loading the same reduced URDF)."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros import robots
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.sim.mujoco_model import build_mujoco_model
from robot_dynamics_ros.sim.mujoco_sim import MujocoSim
from robot_dynamics_testing.reference import PinByName


@pytest.fixture(scope="module")
def panda():
    e = robots.ROBOTS["panda"]
    return RobotModel.from_urdf(e.path, held_joints=e.held_joints)


def _raw_pinocchio(model: RobotModel) -> PinByName:
    """Pinocchio on the same reduced URDF, mapped by joint name (independent of our engines)."""
    return PinByName.from_xml(model.reduced_urdf(), model.joint_names, model.gravity)


def _pose(model, name="panda"):
    return np.array([robots.ROBOTS[name].demo_pose[j] for j in model.joint_names])


def test_build_keeps_joints_limits_damping_and_gravity(panda):
    mm = build_mujoco_model(panda, timestep=0.002)
    mj = mm.mj
    assert mm.joint_names == panda.joint_names
    assert [mj.joint(int(j)).name for j in mm.joint_ids] == list(panda.joint_names)
    np.testing.assert_array_equal(mj.dof_damping[mm.dof_adr], panda.damping)
    np.testing.assert_allclose(mj.jnt_range[mm.joint_ids], np.c_[panda.lower, panda.upper])
    np.testing.assert_array_equal(mj.opt.gravity, [0, 0, -9.81])
    assert mj.opt.timestep == 0.002
    assert "panda_hand" in mm.body_of_link and mj.ngeom == 0   # links kept as bodies, geometry dropped
    # total mass = URDF mass without fingers' mobility (held fingers keep their mass)
    assert mj.body_mass.sum() == pytest.approx(sum(
        link.inertial.mass for link in panda.description.links.values()))


def test_bias_force_at_rest_equals_pinocchio_gravity(panda):
    sim = MujocoSim(panda)
    ref = _raw_pinocchio(panda)
    rng = np.random.default_rng(1)
    for q in [_pose(panda), *panda.random_configuration(rng, 5)]:
        sim.reset(q)
        np.testing.assert_allclose(sim.bias_force(), ref.gravity(q), atol=1e-10)


def test_acceleration_equals_pinocchio_aba_with_damping(panda):
    sim = MujocoSim(panda)
    ref = _raw_pinocchio(panda)
    rng = np.random.default_rng(2)
    q = _pose(panda)
    qd = rng.uniform(-1, 1, panda.n)
    tau = rng.uniform(-5, 5, panda.n)
    sim.reset(q, qd)
    sim.set_effort(tau)
    sim.forward()
    # MuJoCo applies URDF damping as a passive force -b qd; Pinocchio's ABA does not: compare like with like
    np.testing.assert_allclose(sim.acceleration(), ref.aba(q, qd, tau - panda.damping * qd), atol=1e-8)


def test_holds_still_with_pinocchio_gravity_and_falls_without(panda):
    sim = MujocoSim(panda, timestep=0.001)
    ref = _raw_pinocchio(panda)
    q0 = _pose(panda)
    sim.reset(q0)
    for _ in range(1000):  # 1 s, torque recomputed every step from the measured q
        sim.set_effort(ref.gravity(sim.q))
        sim.step()
    assert sim.time == pytest.approx(1.0)
    assert np.abs(sim.q - q0).max() < 1e-6
    sim.reset(q0)
    sim.step(500)
    assert np.abs(sim.q - q0).max() > 0.05


def test_effort_clamped_to_urdf_limits_and_named_access(panda):
    sim = MujocoSim(panda)
    tau = np.zeros(panda.n)
    tau[0], tau[6] = 100.0, -20.0     # limits 87 and 12 N·m
    assert sim.set_effort(tau) == 2
    assert sim.effort[0] == 87.0 and sim.effort[6] == -12.0 and sim.clamp_count == 2
    sim.set_effort_by_name({"panda_joint3": 1.5})
    assert sim.state_by_name()["panda_joint3"][2] == 1.5 and sim.effort[0] == 87.0
    with pytest.raises(ValueError, match="'nope' is not a joint"):
        sim.set_effort_by_name({"nope": 1.0})
    with pytest.raises(ValueError, match="non-finite"):
        sim.set_effort(np.full(panda.n, np.nan))
    sim.reset({"panda_joint4": -1.0})
    assert sim.q[3] == -1.0 and sim.effort.sum() == 0.0


def test_payload_and_gravity_match_pinocchio(panda):
    sim = MujocoSim(panda)
    ref = _raw_pinocchio(panda)
    link, mass, com = "panda_hand", 1.5, np.array([0.01, -0.02, 0.08])
    inertia = np.diag([0.004, 0.005, 0.003])
    # Pinocchio reference: append the payload to the inertia of the joint that carries the link
    fid = ref.m.getFrameId(link)
    frame = ref.m.frames[fid]
    ref.m.inertias[frame.parentJoint] += frame.placement.act(pin.Inertia(mass, com, inertia))
    sim.set_payload(link, mass, com, inertia)
    q = _pose(panda)
    sim.reset(q)
    np.testing.assert_allclose(sim.bias_force(), ref.gravity(q), atol=1e-10)
    tilted = np.array([0.0, -9.81 * np.sin(0.3), -9.81 * np.cos(0.3)])
    sim.set_gravity(tilted)
    ref.m.gravity.linear[:] = tilted
    sim.forward()
    np.testing.assert_allclose(sim.bias_force(), ref.gravity(q), atol=1e-10)
    sim.set_payload(None)
    ref2 = _raw_pinocchio(panda)
    ref2.m.gravity.linear[:] = tilted
    np.testing.assert_allclose(sim.bias_force(), ref2.gravity(q), atol=1e-10)


def test_point_mass_arm_gets_an_inertia_floor_and_matches_the_closed_form():
    """planar 2R with point masses (zero inertia): MuJoCo needs a tiny inertia; g(q) is unchanged.

    Closed form (vertical plane, angles from the horizontal x axis; the URDF's header):
    g1 = (m1 l1 + m2 l1) g cos q1 + m2 l2 g cos(q1 + q2), g2 = m2 l2 g cos(q1 + q2).
    """
    from robot_dynamics_ros.sim.mujoco_model import INERTIA_FLOOR

    model = RobotModel.from_urdf(robots.ROBOTS["planar_2r"].path)
    sim = MujocoSim(model)
    assert sim.mm.inertia_floor_applied and INERTIA_FLOOR <= 1e-9
    m1, m2, l1, l2, g = 2.0, 1.5, 0.5, 0.4, 9.81
    for q1, q2 in [(0.0, 0.0), (0.3, -0.8), (1.2, 0.5)]:
        sim.reset([q1, q2])
        expected = [(m1 + m2) * l1 * g * np.cos(q1) + m2 * l2 * g * np.cos(q1 + q2), m2 * l2 * g * np.cos(q1 + q2)]
        np.testing.assert_allclose(sim.bias_force(), expected, atol=1e-9)


def test_mimic_joints_start_coupled_and_the_arm_holds():
    """Baxter's gripper fingers are mimic joints: reset puts them where the coupling wants them."""
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics

    model = RobotModel.from_urdf(robots.ROBOTS["baxter"].path)
    assert model.has_mimic
    sim = MujocoSim(model)
    dyn = PinocchioDynamics(model)
    q0 = np.clip(np.where(np.arange(model.n) % 2 == 0, 0.4, -0.4), model.lower, model.upper)
    sim.reset(q0)
    np.testing.assert_allclose(sim.data.qpos[sim.mm.moving_qpos_adr], model.expand(q0), atol=1e-15)
    for _ in range(500):
        sim.set_effort(dyn.gravity(sim.q))
        sim.step()
    assert np.abs(sim.q - q0).max() < 1e-5
