"""The identified friction YAML at run time: one RobotModel carries it (with_settings), both engines put the
armature in M(q) and the inverse dynamics, the loaders (shared_model, the CLI's --friction-yaml) apply it,
the external-torque core subtracts the offset, and a payload change beyond ±10 % warns.

Expected values: Pinocchio's own ``model.armature`` set directly from the YAML numbers (not through the
package's engine), and the closed forms ΔM = diag(armature), Δτ = armature·qdd."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros import robots
from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.friction import JointFriction
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_testing.identified_cases import VALUES, _yaml  # noqa: F401

#: per joint (coulomb, viscous, offset, armature) written to the YAML; joint 7 deliberately left out


def _panda(held=None):
    entry = robots.resolve("panda")
    return RobotModel.from_file(entry.path, held_joints=dict(entry.held_joints) if held is None else held)


def _expected(model, name_to_arm):
    """Pinocchio model from the reduced URDF with ``armature`` set directly by joint name."""
    pm = pin.buildModelFromXML(model.reduced_urdf())
    arm = np.zeros(pm.nv)
    for jn, a in name_to_arm.items():
        arm[pm.joints[pm.getJointId(jn)].idx_v] = a
    pm.armature = arm
    return pm, pm.createData()


def test_yaml_replaces_urdf_friction_and_leaves_the_original_unchanged(tmp_path):
    base = _panda()
    damping0, friction0, version0 = base.damping.copy(), base.friction.copy(), base.version
    jf = JointFriction.from_yaml(_yaml(tmp_path / "f.yaml"), base.joint_names)
    m = base.with_settings(friction=jf)
    i7 = m.index["panda_joint7"]
    for jn, (fc, fv, fo, ia) in VALUES.items():
        i = m.index[jn]
        assert (m.friction[i], m.damping[i], m.effort_offset[i], m.armature[i]) == (fc, fv, fo, ia)
    assert (m.friction[i7], m.damping[i7], m.effort_offset[i7], m.armature[i7]) == (0, 0, 0, 0)
    np.testing.assert_array_equal(base.damping, damping0)
    np.testing.assert_array_equal(base.friction, friction0)
    assert not base.armature.any() and not base.effort_offset.any() and base.version == version0
    assert m.version != base.version
    # gravity/payload copies keep the friction; friction=None goes back to the URDF values
    g = m.with_settings(payload=("panda_link7", 1.0, (0, 0, 0.1)))
    np.testing.assert_array_equal(g.armature, m.armature)
    u = m.with_settings(friction=None)
    np.testing.assert_array_equal(u.damping, damping0)
    assert not u.armature.any()
    # PinocchioDynamics.friction_torque uses the YAML's Coulomb and viscous values
    qd = np.linspace(-0.5, 0.6, m.n)
    fc = np.array([VALUES.get(j, (0, 0, 0, 0))[0] for j in m.joint_names])
    fv = np.array([VALUES.get(j, (0, 0, 0, 0))[1] for j in m.joint_names])
    np.testing.assert_allclose(PinocchioDynamics(m).friction_torque(qd), fc * np.sign(qd) + fv * qd, rtol=0, atol=1e-15)


def test_bad_friction_values_name_the_joint(tmp_path):
    base = _panda()
    z = np.zeros(base.n)
    with pytest.raises(UserError, match="panda_joint3.*armature = -0.1"):
        bad = z.copy()
        bad[2] = -0.1
        base.with_settings(friction=JointFriction(z, z, z, bad, "x.yaml"))
    with pytest.raises(UserError, match="expected 7 values"):
        base.with_settings(friction=JointFriction(z[:3], z, z, z))
    with pytest.raises(UserError, match="not in the model"):
        JointFriction.from_yaml(_yaml(tmp_path / "g.yaml", {"nope": (0, 0, 0, 0)}), base.joint_names)


def test_coulomb_velocity_gives_the_tanh_law_in_the_engine_and_the_observer(tmp_path):
    """The friction YAML's coulomb_velocity v_s (what ``identify`` fits): fc·tanh(qd / v_s) in
    ``friction_torque`` and in the observer's compiled step; 0 or absent keeps fc·sign(qd); a bad value is
    refused naming the file. Expected values: the closed form with the YAML's numbers."""
    from robot_dynamics_ros.control.momentum_observer import MomentumObserver

    base = _panda()
    path = _yaml(tmp_path / "f.yaml")
    path.write_text(path.read_text().replace("  version: 1\n", "  version: 1\n  coulomb_velocity: 0.02\n"))
    m = base.with_settings(friction=JointFriction.from_yaml(path, base.joint_names))
    assert m.coulomb_velocity == 0.02 and m.joint_friction.coulomb_velocity == 0.02 and base.coulomb_velocity == 0
    fc = np.array([VALUES.get(j, (0, 0, 0, 0))[0] for j in m.joint_names])
    fv = np.array([VALUES.get(j, (0, 0, 0, 0))[1] for j in m.joint_names])
    qd = np.array([-0.5, -0.03, -0.004, 0.0, 0.004, 0.03, 0.6])
    expected = fc * np.tanh(qd / 0.02) + fv * qd
    np.testing.assert_allclose(PinocchioDynamics(m).friction_torque(qd), expected, rtol=0, atol=1e-15)
    # the observer's compiled friction against the engine's: equal residual trajectories
    q = base.neutral() + 0.3
    fused, reference = MomentumObserver(NewtonEulerDynamics(m), 50.0), MomentumObserver(PinocchioDynamics(m), 50.0)
    reference._tab = None   # the engine path: Pinocchio's terms and friction_torque
    for k in range(20):
        v = qd * np.cos(0.3 * k)
        tau = PinocchioDynamics(m).gravity(q) + 0.1 * k
        np.testing.assert_allclose(fused.update(0.001 * k, q, v, tau), reference.update(0.001 * k, q, v, tau),
                                   rtol=0, atol=1e-9)
    for bad in ("-0.1", ".nan", "'x'"):
        path.write_text(path.read_text().replace("coulomb_velocity: 0.02", f"coulomb_velocity: {bad}", 1))
        with pytest.raises(UserError, match=r"f\.yaml.*coulomb_velocity"):
            JointFriction.from_yaml(path, base.joint_names)
        path.write_text(path.read_text().replace(f"coulomb_velocity: {bad}", "coulomb_velocity: 0.02", 1))


@pytest.mark.parametrize("held", [None, {}], ids=["panda", "panda_moving_fingers"])
def test_armature_in_both_engines_against_pinocchio_set_directly(tmp_path, held):
    base = _panda(held)
    m = base.with_settings(friction=JointFriction.from_yaml(_yaml(tmp_path / "f.yaml"), base.joint_names))
    arm = {jn: v[3] for jn, v in VALUES.items()}
    pm, pd = _expected(m, arm)
    pin_eng, ne = PinocchioDynamics(m), NewtonEulerDynamics(m)
    G = np.zeros((pm.nv, m.n))  # mimic map into Pinocchio's velocity order
    for k, jn in enumerate(m.moving_joint_names):
        G[pm.joints[pm.getJointId(jn)].idx_v, m.mimic_source[k]] = m.mimic_multiplier[k]
    rng = np.random.default_rng(3)
    Q = m.random_configuration(rng, 20)
    QD, QDD = rng.uniform(-1.5, 1.5, Q.shape), rng.uniform(-3, 3, Q.shape)
    tau_ne, M_ne = ne.rnea(Q, QD, QDD), ne.mass_matrix(Q)
    M_cols = ne.mass_matrix(Q, method="columns")
    for k in range(len(Q)):
        qp = pin_eng.pinocchio_configuration(Q[k])
        tau_ref = G.T @ pin.rnea(pm, pd, qp, G @ QD[k], G @ QDD[k])
        M_ref = pin.crba(pm, pd, qp)
        M_ref = np.triu(M_ref) + np.triu(M_ref, 1).T
        M_ref = G.T @ M_ref @ G
        scale_t, scale_m = max(1.0, np.abs(tau_ref).max()), max(1.0, np.abs(M_ref).max())
        assert np.abs(pin_eng.rnea(Q[k], QD[k], QDD[k]) - tau_ref).max() <= 1e-12 * scale_t
        assert np.abs(tau_ne[k] - tau_ref).max() <= 1e-12 * scale_t
        assert np.abs(pin_eng.mass_matrix(Q[k]) - M_ref).max() <= 1e-12 * scale_m
        assert np.abs(M_ne[k] - M_ref).max() <= 1e-12 * scale_m
        assert np.abs(M_cols[k] - M_ref).max() <= 1e-12 * scale_m
        if not m.massless_joints:
            np.testing.assert_allclose(pin_eng.aba(Q[k], QD[k], tau_ref), QDD[k], rtol=0, atol=1e-9)


def test_armature_closed_form_and_gravity_unchanged(tmp_path):
    base = _panda()
    m = base.with_settings(friction=JointFriction.from_yaml(_yaml(tmp_path / "f.yaml"), base.joint_names))
    a = np.array([VALUES.get(j, (0, 0, 0, 0.0))[3] for j in m.joint_names])
    rng = np.random.default_rng(5)
    q, qd, qdd = m.random_configuration(rng), rng.normal(size=m.n), rng.normal(size=m.n)
    for E0, E1 in ((PinocchioDynamics(base), PinocchioDynamics(m)), (NewtonEulerDynamics(base), NewtonEulerDynamics(m))):
        np.testing.assert_allclose(E1.mass_matrix(q) - E0.mass_matrix(q), np.diag(a), rtol=0, atol=1e-12)
        np.testing.assert_allclose(E1.rnea(q, qd, qdd) - E0.rnea(q, qd, qdd), a * qdd, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(E1.gravity(q), E0.gravity(q))
        np.testing.assert_array_equal(E1.nonlinear_effects(q, qd), E0.nonlinear_effects(q, qd))


def test_shared_model_and_cli_apply_the_same_file(tmp_path):
    from robot_dynamics_tools.commands._args import add_robot_arguments, model_from_args
    from robot_dynamics_ros.nodes import model_source, parameters

    path = str(_yaml(tmp_path / "f.yaml"))
    src = str(robots.resolve("panda").path)
    held = dict(robots.resolve("panda").held_joints)
    plain = model_source.shared_model(src, held)
    ident = model_source.shared_model(src, held, friction=path)
    assert ident is not plain and ident is model_source.shared_model(src, held, friction=path)
    assert not plain.armature.any()
    parser = argparse.ArgumentParser()
    add_robot_arguments(parser)
    cli = model_from_args(parser.parse_args(["--urdf", "panda", "--friction-yaml", path]))
    for name in ("armature", "effort_offset", "damping", "friction"):
        np.testing.assert_array_equal(getattr(cli, name), getattr(ident, name))
    assert ident.armature[ident.index["panda_joint1"]] == 0.31
    names = {s.name for s in parameters.robot_source_params()}
    assert "friction_path" in names
    with pytest.raises(UserError, match="friction YAML"):
        model_source.shared_model(src, held, friction=str(tmp_path / "missing.yaml"))


def _at_rest(model, measured, steps=400):
    """Feed the core a robot at rest at q with ``measured`` efforts for ``steps`` ms; last τ_ext."""
    from robot_dynamics_ros.control.joint_mapping import JointStateFields
    from robot_dynamics_ros.control.external_torque import ExternalTorqueCore, ObserverSettings

    core = ExternalTorqueCore(model, ObserverSettings(gain=50.0, threshold=(1e3,), torque_source="measured"))
    entry = robots.resolve("panda")
    q = [entry.demo_pose[j] for j in model.joint_names]
    names = tuple(j.encode() for j in model.joint_names)
    out = None
    for k in range(steps):
        t = 10**12 + k * 1_000_000
        core.on_joint_state(JointStateFields(t, names, tuple(q), (0.0,) * model.n, tuple(map(float, measured))), t, t)
        out = core.step(t, t)
    return np.asarray(out.tau_ext)


def test_external_torque_subtracts_the_sensor_offset(tmp_path):
    base = _panda()
    m = base.with_settings(friction=JointFriction.from_yaml(_yaml(tmp_path / "f.yaml"), base.joint_names))
    entry = robots.resolve("panda")
    q = np.array([entry.demo_pose[j] for j in m.joint_names])
    offset = np.array([VALUES.get(j, (0, 0, 0, 0))[2] for j in m.joint_names])
    measured = PinocchioDynamics(base).gravity(q) + offset  # a sensor reading the true torque plus its bias
    # at rest τ_ext = g(q) − (τ_measured − offset): zero with the identified model; −offset without it
    np.testing.assert_allclose(_at_rest(m, measured), 0.0, rtol=0, atol=1e-6)
    np.testing.assert_allclose(_at_rest(base, measured), -offset, rtol=0, atol=1e-6)


def test_payload_change_warning_and_request_fields(tmp_path):
    from robot_dynamics_ros.nodes.services import payload_change_warning, payload_request_fields

    assert payload_change_warning("panda_link8", 5.0, "panda_link8", 5.5) is None     # +10 %: not more
    w = payload_change_warning("panda_link8", 5.0, "panda_link8", 5.6)                 # +12 %
    assert w and "5 kg" in w and "5.6 kg" in w and "+12%" in w
    assert payload_change_warning("panda_link8", 5.0, "panda_link8", 4.4)             # −12 %
    assert payload_change_warning("", 0.0, "panda_link8", 0.2)                         # added
    assert payload_change_warning("panda_link8", 2.0, "", 0.0)                         # removed
    assert payload_change_warning("", 0.0, "", 0.0) is None
    I = [[0.02, 0.001, -0.002], [0.001, 0.03, 0.004], [-0.002, 0.004, 0.025]]
    path = tmp_path / "payload.json"
    path.write_text(json.dumps({"link": "panda_link8", "mass": 4.9999, "com": [0.03, -0.02, 0.08],
                                "inertia": I, "mass_std": 0.001, "not_identified": []}))
    f = payload_request_fields(path)
    assert f == {"link": "panda_link8", "mass": 4.9999, "com": [0.03, -0.02, 0.08],
                 "inertia": [0.02, 0.001, -0.002, 0.03, 0.004, 0.025]}
    # the fields give the same model as RobotModel's own payload with the 3×3 matrix
    base = _panda()
    a = base.with_settings(payload=(f["link"], f["mass"], f["com"], f["inertia"]))
    b = base.with_settings(payload=("panda_link8", 4.9999, [0.03, -0.02, 0.08], I))
    q = base.neutral()
    np.testing.assert_array_equal(PinocchioDynamics(a).gravity(q), PinocchioDynamics(b).gravity(q))
    path.write_text(json.dumps({"link": "x", "mass": 1.0}))
    with pytest.raises(UserError, match="payload JSON"):
        payload_request_fields(path)


@pytest.mark.parametrize("held", [None, {}], ids=["panda", "panda_moving_fingers"])
def test_crossval_with_armature_includes_mujoco(tmp_path, held):
    """MuJoCo's dof_armature (in mj_fullM) is a third, independent source for M with armature."""
    from robot_dynamics_ros.dynamics.crossval import crossvalidate

    base = _panda(held)
    m = base.with_settings(friction=JointFriction.from_yaml(_yaml(tmp_path / "f.yaml"), base.joint_names))
    report = crossvalidate(m, samples=20, seed=2)
    assert report.mujoco == "compared"
    assert report.passed, report
    worst = {(c.engine, c.quantity): c.max_abs for c in report.comparisons}
    assert worst[("mujoco", "M")] < 1e-10 and worst[("newton-euler", "M")] < 1e-10
