"""Both engines refuse a wrong shape or a non-finite entry at their public API, naming the argument, the
entry and its joint — also where the output would partly hide it (unchecked, ``pinocchio.rnea`` on the
model below with a NaN slide velocity returns a finite 14.715 N for the slide itself)."""
from __future__ import annotations

import numpy as np
import pytest

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_testing.urdf_text import Body, serial_urdf

# a vertical prismatic joint under a revolute one
PRISMATIC = serial_urdf("p", [
    Body("rev", "revolute", mass=2.0, com=(0.1, 0, 0), inertia=(0.02, 0.03, 0.04), link="a"),
    Body("slide", "prismatic", mass=1.5, origin=(0, 0, 0.2), limit=(-1, 1, 100, 1), link="b")])


@pytest.fixture(scope="module")
def engines():
    m = RobotModel.from_text(PRISMATIC)
    return m, PinocchioDynamics(m), NewtonEulerDynamics(m)


def test_nan_velocity_of_a_prismatic_joint_is_refused_by_both_engines(engines):
    m, pino, ne = engines
    q, qd, qdd = np.zeros(2), np.array([0.0, np.nan]), np.zeros(2)
    for eng in (pino, ne):
        with pytest.raises(ValueError, match=r"^qd\[1\] \(slide\) is NaN$"):
            eng.rnea(q, qd, qdd)
        with pytest.raises(ValueError, match=r"^qd\[1\] \(slide\) is NaN$"):
            eng.nonlinear_effects(q, qd)
        with pytest.raises(ValueError, match=r"^q\[0\] \(rev\) is inf$"):
            eng.gravity(np.array([np.inf, 0.0]))
        with pytest.raises(ValueError, match=r"^q\[1\] \(slide\) is -inf$"):
            eng.mass_matrix(np.array([0.0, -np.inf]))
    with pytest.raises(ValueError, match=r"^tau\[0\] \(rev\) is NaN$"):
        pino.aba(q, np.zeros(2), np.array([np.nan, 0.0]))
    with pytest.raises(ValueError, match=r"^qd\[0\] \(rev\) is NaN$"):
        pino.coriolis_matrix(q, np.array([np.nan, 0.0]))
    with pytest.raises(ValueError, match=r"^qd\[1\] \(slide\) is NaN$"):
        pino.friction_torque(qd)


@pytest.mark.parametrize("which", ["pinocchio", "newton-euler"])
def test_wrong_shapes_name_the_argument(engines, which):
    m, pino, ne = engines
    eng = pino if which == "pinocchio" else ne
    want = r"\(2,\)" if which == "pinocchio" else r"\(N, 2\) or \(2,\)"
    with pytest.raises(ValueError, match=rf"^q: expected shape {want} in model.joint_names order, got \(3,\)$"):
        eng.gravity(np.zeros(3))
    with pytest.raises(ValueError, match=r"^qdd: expected shape"):
        eng.rnea(np.zeros(2), np.zeros(2), np.zeros(1))


def test_the_checks_leave_finite_inputs_alone(engines):
    # the checks must not alter good inputs: gravity of the chain in closed form, g = (0, m_b · 9.81)
    m, pino, ne = engines
    for eng in (pino, ne):
        np.testing.assert_allclose(eng.gravity(np.array([0.3, 0.1])), [0.0, 1.5 * 9.81], rtol=0, atol=1e-12)


def test_large_finite_inputs_pass_the_cheap_check(engines):
    # |q|² overflows to inf for |q| > 1e154: the exact test must then let the finite input through
    m, pino, ne = engines
    g = pino.gravity(np.array([1e200, 0.0]))
    np.testing.assert_allclose(g, [0.0, 1.5 * 9.81], rtol=0, atol=1e-12)
