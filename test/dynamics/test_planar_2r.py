"""Both engines reproduce the closed-form dynamics of the planar 2R arm (seeds 002 §6-3/§6-4).

The expected values are the textbook's closed forms with the parameters documented in
``urdf/planar_2r.urdf`` (point masses m1, m2 at the link ends, lengths l1, l2, gravity along -y0).
"""
from __future__ import annotations

import numpy as np
import pytest

from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics, SingularConfigurationError
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS

L1, L2, M1, M2, G0 = 0.5, 0.4, 2.0, 1.5, 9.81


def closed_form(q, qd):
    """M, C (Christoffel), g of the textbook's 2R arm (seeds 002 §6-4, matrix form D(q), h(q, qd), G(q))."""
    c1, c2, s2, c12 = np.cos(q[0]), np.cos(q[1]), np.sin(q[1]), np.cos(q[0] + q[1])
    M = np.array([[(M1 + M2) * L1**2 + M2 * L2**2 + 2 * M2 * L1 * L2 * c2, M2 * L2**2 + M2 * L1 * L2 * c2],
                  [M2 * L2**2 + M2 * L1 * L2 * c2, M2 * L2**2]])
    h = M2 * L1 * L2 * s2
    C = np.array([[-h * qd[1], -h * (qd[0] + qd[1])], [h * qd[0], 0.0]])
    Cqd = np.array([-h * (2 * qd[0] * qd[1] + qd[1] ** 2), h * qd[0] ** 2])
    g = np.array([(M1 + M2) * G0 * L1 * c1 + M2 * G0 * L2 * c12, M2 * G0 * L2 * c12])
    return M, C, Cqd, g


@pytest.fixture(scope="module")
def model():
    return RobotModel.from_urdf(ROBOTS["planar_2r"].path)


def engines(model):
    out = {"pinocchio": PinocchioDynamics(model)}
    try:
        from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
    except ImportError:  # pragma: no cover - the in-package engine lands in a later commit
        return out
    out["newton-euler"] = NewtonEulerDynamics(model)
    return out


STATES = np.random.default_rng(7).uniform(-3, 3, size=(12, 6))


def test_joint_names(model):
    assert model.joint_names == ("joint1", "joint2")


@pytest.mark.parametrize("state", STATES)
def test_engines_match_closed_form(model, state):
    q, qd, qdd = state[:2], state[2:4], state[4:]
    M, C, Cqd, g = closed_form(q, qd)
    tau = M @ qdd + Cqd + g
    for name, eng in engines(model).items():
        np.testing.assert_allclose(np.squeeze(eng.gravity(q)), g, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(np.squeeze(eng.mass_matrix(q)), M, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(np.squeeze(eng.rnea(q, qd, qdd)), tau, atol=1e-11, err_msg=name)
        if hasattr(eng, "coriolis_qd"):
            np.testing.assert_allclose(np.squeeze(eng.coriolis_qd(q, qd)), Cqd, atol=1e-12, err_msg=name)
    pino = PinocchioDynamics(model)
    np.testing.assert_allclose(pino.coriolis_matrix(q, qd), C, atol=1e-12)
    np.testing.assert_allclose(pino.aba(q, qd, tau), qdd, atol=1e-9)


def test_tool_kinematics_closed_form(model):
    pino = PinocchioDynamics(model)
    q = np.array([0.7, -1.1])
    s1, c1, s12, c12 = np.sin(q[0]), np.cos(q[0]), np.sin(q.sum()), np.cos(q.sum())
    # plane frame {0} = base frame turned +90 deg about x: plane (x, y) -> base (x, z)
    T = pino.frame_placement(q, "tool")
    np.testing.assert_allclose(T[:3, 3], [L1 * c1 + L2 * c12, 0.0, L1 * s1 + L2 * s12], atol=1e-15)
    J = pino.frame_jacobian(q, "tool")
    np.testing.assert_allclose(J[0], [-L1 * s1 - L2 * s12, -L2 * s12], atol=1e-15)
    np.testing.assert_allclose(J[2], [L1 * c1 + L2 * c12, L2 * c12], atol=1e-15)
    # the plane normal is base -y: both joint axes
    np.testing.assert_allclose(J[4], [-1.0, -1.0], atol=1e-15)


def test_operational_space_inertia_singular_errors_clearly(model):
    pino = PinocchioDynamics(model)
    # two joints cannot move the tool in three linear directions: a clear error, not garbage
    with pytest.raises(SingularConfigurationError, match=r"frame 'tool'.*singular"):
        pino.operational_space_inertia(np.array([0.3, 0.5]), "tool", part="linear")


def test_gravity_from_with_settings_reaches_engines_over_the_new_model(model):
    m = RobotModel.from_urdf(ROBOTS["planar_2r"].path)
    q = np.array([0.2, 0.9])
    doubled = m.with_settings(gravity=(0.0, 0.0, -2 * G0))
    np.testing.assert_allclose(PinocchioDynamics(doubled).gravity(q), 2 * closed_form(q, q)[3], atol=1e-12)
    np.testing.assert_allclose(PinocchioDynamics(m).gravity(q), closed_form(q, q)[3], atol=1e-12)
    weightless = doubled.with_settings(gravity=(0.0, 0.0, 0.0))
    np.testing.assert_allclose(PinocchioDynamics(weightless).gravity(q), 0.0, atol=1e-15)
