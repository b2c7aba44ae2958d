"""The observer's per-sample terms on every URDF of example-robot-data: PinocchioDynamics.momentum_terms
against the in-package Newton–Euler engine, independently: p = M q̇ from its CRBA, and Cᵀq̇ − g from the
identity Cᵀq̇ = Ṁq̇ − Cq̇ (Ṁ by a central difference of its M along q̇, Cq̇ and g from its RNEA)."""
from __future__ import annotations

import numpy as np

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.errors import URDFError, UserError
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import example_robot_data_urdfs



def test_momentum_terms_match_newton_euler_on_every_loadable_robot():
    rng = np.random.default_rng(7)
    checked, worst = 0, 0.0
    for path in example_robot_data_urdfs():
        try:
            model = RobotModel.from_file(path)
            pin_eng, ne = PinocchioDynamics(model), NewtonEulerDynamics(model)
        except (URDFError, UserError):
            continue  # refused with its reason: docs/dynamics.md, test_example_robot_data.py
        if model.has_mimic:
            continue  # Pinocchio 4.1's Coriolis matrix disagrees with its own RNEA on mimic models
        q = model.random_configuration(rng)
        qd = rng.uniform(-1.0, 1.0, model.n)
        p, beta = pin_eng.momentum_terms(q, qd)
        h = 1e-6
        Mdot = (ne.mass_matrix((q + h * qd)[None])[0] - ne.mass_matrix((q - h * qd)[None])[0]) / (2 * h)
        g = ne.gravity(q[None])[0]
        c_qd = ne.rnea(q[None], qd[None], np.zeros((1, model.n)))[0] - g
        expected_beta = Mdot @ qd - c_qd - g
        scale = 1.0 + np.abs(expected_beta).max() + np.abs(g).max()
        np.testing.assert_allclose(p, ne.mass_matrix(q[None])[0] @ qd, atol=1e-10 * (1 + np.abs(p).max()),
                                   err_msg=path.name)
        err = np.abs(beta - expected_beta).max() / scale
        assert err < 1e-6, (path.name, err)
        worst = max(worst, err)
        checked += 1
    assert checked >= 50, checked
    print(f"{checked} robots, worst relative error {worst:.1e}")


def _pinocchio_terms(pe: PinocchioDynamics, q, qd):
    """g, M qd and Cᵀ qd from Pinocchio's own algorithms (computeGeneralizedGravity, crba,
    computeCoriolisMatrix), mapped to the model's joint order with the engine's velocity map."""
    import pinocchio as pin

    pm, d = pe.pin_model, pe.data
    qp = pe.pinocchio_configuration(q)
    Gp = pe._Gp  # Pinocchio velocity index <- model joint (a permutation without mimic joints)
    v = Gp @ qd
    M = pin.crba(pm, d, qp).copy()
    M = np.triu(M) + np.triu(M, 1).T  # crba fills the upper triangle
    C = pin.computeCoriolisMatrix(pm, d, qp, v).copy()
    g = pin.computeGeneralizedGravity(pm, d, qp).copy()
    return Gp.T @ g, Gp.T @ (M @ v), Gp.T @ (C.T @ v)


def test_fused_momentum_kernel_matches_pinocchio_on_every_loadable_robot():
    """The one-sweep kernel (NewtonEulerDynamics.momentum_terms) against three separate Pinocchio algorithms."""
    rng = np.random.default_rng(11)
    checked, prismatic, worst = 0, 0, 0.0
    for path in example_robot_data_urdfs():
        try:
            model = RobotModel.from_file(path)
            pe, ne = PinocchioDynamics(model), NewtonEulerDynamics(model)
        except (URDFError, UserError):
            continue
        if model.has_mimic:
            continue  # Pinocchio 4.1's Coriolis matrix disagrees with its own RNEA on mimic models
        for _ in range(2):
            q = model.random_configuration(rng)
            qd = rng.uniform(-2.0, 2.0, model.n)
            g, p, ctqd = ne.momentum_terms(q, qd)
            for name, ours, ref in zip(("g", "p", "Cᵀqd"), (g, p, ctqd), _pinocchio_terms(pe, q, qd)):
                err = np.abs(ours - ref).max() / (1.0 + np.abs(ref).max())
                assert err < 1e-12, (path.name, name, err)
                worst = max(worst, err)
        prismatic += int(np.any(np.asarray(model.joint_types) == "prismatic"))
        checked += 1
    assert checked >= 50 and prismatic >= 1, (checked, prismatic)
    print(f"{checked} robots ({prismatic} with prismatic joints), worst relative error {worst:.1e}")


def test_fused_momentum_kernel_on_mimic_robots_and_with_armature():
    """Mimic joints: against the in-package CRBA (p = M qd) and Cᵀqd = Ṁqd − Cqd (Ṁ by central differences
    of that M, Cqd from the RNEA); armature: against Pinocchio, whose crba adds it (Featherstone's M + diag)."""
    from robot_dynamics_ros import robots
    from robot_dynamics_ros.friction import JointFriction

    rng = np.random.default_rng(5)
    mimic = 0
    for path in example_robot_data_urdfs():
        try:
            model = RobotModel.from_file(path)
            ne = NewtonEulerDynamics(model)
        except (URDFError, UserError):
            continue
        if not model.has_mimic:
            continue
        q = model.random_configuration(rng)
        qd = rng.uniform(-1.0, 1.0, model.n)
        g, p, ctqd = ne.momentum_terms(q, qd)
        h = 1e-6
        Mdot = (ne.mass_matrix(q + h * qd) - ne.mass_matrix(q - h * qd)) / (2 * h)
        c_qd = ne.coriolis_qd(q, qd)
        np.testing.assert_allclose(g, ne.gravity(q), rtol=0, atol=1e-12 * (1 + np.abs(g).max()), err_msg=path.name)
        np.testing.assert_allclose(p, ne.mass_matrix(q) @ qd, rtol=0, atol=1e-12 * (1 + np.abs(p).max()),
                                   err_msg=path.name)
        np.testing.assert_allclose(ctqd, Mdot @ qd - c_qd, rtol=0, atol=1e-6 * (1 + np.abs(c_qd).max()),
                                   err_msg=path.name)
        mimic += 1
    assert mimic >= 1
    e = robots.resolve("panda")
    base = RobotModel.from_urdf(e.path, held_joints=e.held_joints)
    arm = np.linspace(0.1, 0.7, base.n)
    z = np.zeros(base.n)
    model = base.with_settings(friction=JointFriction(z, z, z, arm, "test"))
    q = base.random_configuration(rng)
    qd = rng.uniform(-2.0, 2.0, base.n)
    g, p, ctqd = NewtonEulerDynamics(model).momentum_terms(q, qd)
    g_ref, p_ref, ct_ref = _pinocchio_terms(PinocchioDynamics(model), q, qd)
    np.testing.assert_allclose(p, p_ref, rtol=0, atol=1e-12 * (1 + np.abs(p_ref).max()))
    np.testing.assert_allclose(ctqd, ct_ref, rtol=0, atol=1e-12 * (1 + np.abs(ct_ref).max()))
    assert np.abs(p - NewtonEulerDynamics(base).momentum_terms(q, qd)[1] - arm * qd).max() < 1e-12
