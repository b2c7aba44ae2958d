"""PinocchioDynamics on real arms, against Pinocchio used independently of our URDF rewriting.

References: Pinocchio built straight from the example-robot-data file (its own URDF parser, its own
``buildReducedModel`` for held joints, its own mimic support, cos/sin continuous joints), a payload
written as an extra URDF link, and the forward-dynamics identity for Λ.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics, SingularConfigurationError
from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS

RNG = np.random.default_rng(2024)


def ref_config(ref: pin.Model, model: RobotModel, q):
    """Our q (by name) -> Pinocchio configuration of the reference model (continuous: cos, sin)."""
    qr = pin.neutral(ref)
    for name, val in zip(model.joint_names, q):
        j = ref.joints[ref.getJointId(name)]
        if j.nq == 2:
            qr[j.idx_q], qr[j.idx_q + 1] = np.cos(val), np.sin(val)
        else:
            qr[j.idx_q] = val
    return qr


def ref_tangent(ref: pin.Model, model: RobotModel, v):
    vr = np.zeros(ref.nv)
    for name, val in zip(model.joint_names, v):
        vr[ref.joints[ref.getJointId(name)].idx_v] = val
    return vr


def ref_idx(ref, model):
    return [ref.joints[ref.getJointId(n)].idx_v for n in model.joint_names]


def compare(model: RobotModel, ref: pin.Model, samples=5, coriolis_ref=True):
    """Our engine vs the reference model on random states. With ``coriolis_ref=False`` (reference
    built with Pinocchio's mimic support, whose ``computeCoriolisMatrix`` is not consistent with its RNEA:
    C qd ≠ rnea(q, qd, 0) − g there, seen with pin 4.1), C is checked by its defining properties instead:
    C qd = rnea(q, qd, 0) − g of the reference, and Ṁ − 2C skew-symmetric with Ṁ by central differences."""
    eng = PinocchioDynamics(model)
    data = ref.createData()
    idx = ref_idx(ref, model)
    for _ in range(samples):
        q = model.random_configuration(RNG)
        qd, qdd = RNG.normal(size=model.n), RNG.normal(size=model.n)
        qr, vr, ar = ref_config(ref, model, q), ref_tangent(ref, model, qd), ref_tangent(ref, model, qdd)
        np.testing.assert_allclose(eng.rnea(q, qd, qdd), pin.rnea(ref, data, qr, vr, ar)[idx], atol=1e-10)
        np.testing.assert_allclose(eng.gravity(q), pin.computeGeneralizedGravity(ref, data, qr)[idx], atol=1e-10)
        Mr = pin.crba(ref, data, qr)
        Mr = np.triu(Mr) + np.triu(Mr, 1).T
        np.testing.assert_allclose(eng.mass_matrix(q), Mr[np.ix_(idx, idx)], atol=1e-12)
        C = eng.coriolis_matrix(q, qd)
        if coriolis_ref:
            Cr = pin.computeCoriolisMatrix(ref, data, qr, vr)
            np.testing.assert_allclose(C, Cr[np.ix_(idx, idx)], atol=1e-10)
        else:
            Cqd_ref = (pin.rnea(ref, data, qr, vr, np.zeros(ref.nv)) - pin.computeGeneralizedGravity(ref, data, qr))
            np.testing.assert_allclose(C @ qd, Cqd_ref[idx], atol=1e-10)
            h = 1e-6
            Mdot = (eng.mass_matrix(q + h * qd) - eng.mass_matrix(q - h * qd)) / (2 * h)
            S = Mdot - 2 * C
            np.testing.assert_allclose(S, -S.T, atol=1e-7)
    return eng


def test_panda_held_fingers_match_pinocchio_reduced_model():
    e = ROBOTS["panda"]
    model = RobotModel.from_urdf(e.path, held_joints={"panda_finger_joint1": 0.03})
    assert model.joint_names == tuple(f"panda_joint{i}" for i in range(1, 8))
    assert model.held_joints == {"panda_finger_joint1": 0.03, "panda_finger_joint2": 0.03}  # mimic follows
    full = pin.buildModelFromUrdf(str(e.path))
    lock = [full.getJointId("panda_finger_joint1"), full.getJointId("panda_finger_joint2")]
    q0 = pin.neutral(full)
    q0[full.joints[lock[0]].idx_q] = q0[full.joints[lock[1]].idx_q] = 0.03
    ref = pin.buildReducedModel(full, lock, q0)
    compare(model, ref)


def test_panda_mimic_finger_matches_pinocchio_mimic_model():
    e = ROBOTS["panda"]
    model = RobotModel.from_urdf(e.path)
    assert model.n == 8 and "panda_finger_joint2" not in model.joint_names
    ref = pin.buildModelFromUrdf(str(e.path), mimic=True)
    eng = compare(model, ref, coriolis_ref=False)
    q = model.neutral()
    qdd = np.zeros(model.n)
    qdd[7] = 1.0
    # the finger's generalized force is the sum over both (mimic multiplier 1) fingers
    assert eng.rnea(q, np.zeros(8), qdd)[7] > 0


def test_kinova_continuous_joints_are_angles():
    model = RobotModel.from_urdf(ROBOTS["kinova"].path)
    ref = pin.buildModelFromUrdf(str(ROBOTS["kinova"].path))
    assert ref.nq > ref.nv  # Pinocchio: continuous joints are (cos, sin)
    compare(model, ref)


def test_baxter_tree_order_by_name():
    model = RobotModel.from_urdf(ROBOTS["baxter"].path)
    ref = pin.buildModelFromUrdf(str(ROBOTS["baxter"].path), mimic=True)
    assert [ref.names[i] for i in range(1, 4)] != list(model.joint_names[:3])  # orders differ
    compare(model, ref, samples=2, coriolis_ref=False)


def test_payload_equals_an_extra_urdf_link_and_clears():
    path = ROBOTS["panda"].path
    held = ROBOTS["panda"].held_joints
    model = RobotModel.from_urdf(path, held_joints=held)
    eng = PinocchioDynamics(model)
    q = model.random_configuration(RNG)
    qd, qdd = RNG.normal(size=7), RNG.normal(size=7)
    tau0 = eng.rnea(q, qd, qdd)
    com, inertia = (0.01, -0.02, 0.05), [[0.02, 0.001, 0.0], [0.001, 0.03, 0.0], [0.0, 0.0, 0.025]]
    loaded = model.with_settings(payload=("panda_hand", 2.5, com, inertia))
    assert loaded.version != model.version and model.payload is None
    eng_loaded = PinocchioDynamics(loaded)
    text = path.read_text().replace("</robot>", f"""
      <link name="payload"><inertial><origin xyz="{com[0]} {com[1]} {com[2]}"/><mass value="2.5"/>
        <inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0" izz="0.025"/></inertial></link>
      <joint name="payload_joint" type="fixed"><parent link="panda_hand"/><child link="payload"/></joint>
    </robot>""")
    ref = PinocchioDynamics(RobotModel.from_urdf(text, held_joints=held))
    np.testing.assert_allclose(eng_loaded.rnea(q, qd, qdd), ref.rnea(q, qd, qdd), atol=1e-10)
    np.testing.assert_allclose(eng_loaded.mass_matrix(q), ref.mass_matrix(q), atol=1e-12)
    np.testing.assert_allclose(eng.rnea(q, qd, qdd), tau0, atol=1e-12)  # the unloaded model is untouched
    cleared = loaded.with_settings(payload=None)
    np.testing.assert_allclose(PinocchioDynamics(cleared).rnea(q, qd, qdd), tau0, atol=1e-12)


def test_operational_space_inertia_matches_forward_dynamics():
    model = RobotModel.from_urdf(ROBOTS["panda"].path, held_joints=ROBOTS["panda"].held_joints)
    eng = PinocchioDynamics(model)
    q = np.array(list(ROBOTS["panda"].demo_pose.values()))
    Lam = eng.operational_space_inertia(q, "panda_hand")
    assert np.allclose(Lam, Lam.T) and np.all(np.linalg.eigvalsh(Lam) > 0)
    # a wrench F at the frame, robot at rest, gravity compensated: task acceleration = Λ⁻¹ F (+ J̇ qd = 0)
    J = eng.frame_jacobian(q, "panda_hand")
    F = np.array([3.0, -1.0, 2.0, 0.3, 0.1, -0.2])
    qdd = eng.aba(q, np.zeros(7), J.T @ F + eng.gravity(q))  # ABA: no mass-matrix inverse involved
    np.testing.assert_allclose(J @ qdd, np.linalg.solve(Lam, F), atol=1e-9)
    # panda_link4 is moved by four joints only: no full 6x6 Λ exists there, a clear error instead
    q_sing = q.copy()
    with pytest.raises(SingularConfigurationError, match="frame 'panda_link4'.*singular"):
        eng.operational_space_inertia(q_sing, "panda_link4")


def test_friction_torque_from_urdf_dynamics():
    model = RobotModel.from_urdf(ROBOTS["baxter"].path)
    eng = PinocchioDynamics(model)
    i = model.index["l_gripper_l_finger_joint"]
    qd = np.zeros(model.n)
    qd[i] = -0.4
    # baxter.urdf: <dynamics damping="0.7" friction="0.0"/> on the gripper finger
    assert eng.friction_torque(qd)[i] == pytest.approx(-0.28)


def test_bad_shapes_and_frames_are_named():
    model = RobotModel.from_urdf(ROBOTS["planar_2r"].path)
    eng = PinocchioDynamics(model)
    with pytest.raises(ValueError, match=r"q: expected shape \(2,\)"):
        eng.gravity(np.zeros(3))
    with pytest.raises(ValueError, match="qdd"):
        eng.rnea(np.zeros(2), np.zeros(2), np.zeros(5))
    with pytest.raises(UserError, match="frame 'nope'"):
        eng.frame_jacobian(np.zeros(2), "nope")


def test_joint_limits_yaml_and_held_and_gravity(tmp_path):
    y = tmp_path / "joint_limits.yaml"
    y.write_text("joint_limits:\n  joint1:\n    has_acceleration_limits: true\n    max_acceleration: 5.0\n"
                 "    has_velocity_limits: true\n    max_velocity: 1.5\n  joint2:\n"
                 "    has_acceleration_limits: false\n    max_acceleration: 9.0\n")
    m = RobotModel.from_urdf(ROBOTS["planar_2r"].path, joint_limits=y)
    np.testing.assert_array_equal(m.acceleration_limit, [5.0, np.inf])
    np.testing.assert_array_equal(m.velocity_limit, [1.5, 3.0])  # joint2 keeps the URDF's 3.0
    np.testing.assert_array_equal(m.effort_limit, [60.0, 30.0])
    # a joint the URDF lacks: ignored with a warning (as MoveIt), refused when strict
    lenient = RobotModel.from_urdf(ROBOTS["planar_2r"].path, joint_limits={"elbow": {}})
    assert any("'elbow'" in w for w in lenient.warnings)
    with pytest.raises(UserError, match="'elbow'"):
        RobotModel.from_urdf(ROBOTS["planar_2r"].path, joint_limits={"elbow": {}}, strict=True)
    with pytest.raises(UserError, match=r"joint 'joint1'.*max_acceleration"):
        RobotModel.from_urdf(ROBOTS["planar_2r"].path,
                             joint_limits={"joint1": {"has_acceleration_limits": True, "max_acceleration": -1}})
    with pytest.raises(UserError, match="held joint 'joint2'.*outside"):
        RobotModel.from_urdf(ROBOTS["planar_2r"].path, held_joints={"joint2": 4.0})
    with pytest.raises(UserError, match="gravity"):
        m.with_settings(gravity=(0, 0))



@pytest.mark.parametrize("robot, held", [
    ("ur5", {"elbow_joint": -0.8, "wrist_3_joint": 1.3}),      # revolute joints welded mid-chain
    ("kinova", {"j2s6s200_joint_4": 2.0}),                     # a continuous joint welded
    ("talos_left_arm", {"arm_left_4_joint": -1.2}),
    # both gripper masters held: their mimic followers are welded with them
    ("baxter", {"head_pan": 0.4, "l_gripper_l_finger_joint": 0.01, "r_gripper_l_finger_joint": 0.015}),
])
def test_held_joints_match_pinocchio_reduced_model(robot, held):
    """Our welding (held value folded into the child origin of a fixed joint, in to_urdf) against
    Pinocchio's own buildReducedModel of the original file."""
    e = ROBOTS[robot]
    model = RobotModel.from_urdf(e.path, held_joints=held)
    assert not model.has_mimic
    full = pin.buildModelFromUrdf(str(e.path))
    q0 = pin.neutral(full)
    lock = []
    for jn, v in model.held_joints.items():
        jid = full.getJointId(jn)
        j = full.joints[jid]
        if j.nq == 2:
            q0[j.idx_q], q0[j.idx_q + 1] = np.cos(v), np.sin(v)
        else:
            q0[j.idx_q] = v
        lock.append(jid)
    ref = pin.buildReducedModel(full, lock, q0)
    compare(model, ref, samples=3)


def test_frame_named_like_a_joint():
    """Z1 has a link and a joint both called 'gripperStator': the link (BODY frame) is meant."""
    model = RobotModel.from_urdf(ROBOTS["z1"].path)
    eng = PinocchioDynamics(model)
    q = model.random_configuration(RNG)
    T = eng.frame_placement(q, "gripperStator")
    ref = pin.buildModelFromUrdf(str(ROBOTS["z1"].path))
    rd = ref.createData()
    pin.framesForwardKinematics(ref, rd, ref_config(ref, model, q))
    np.testing.assert_allclose(T, rd.oMf[ref.getFrameId("gripperStator", pin.FrameType.BODY)].homogeneous,
                               atol=1e-12)
