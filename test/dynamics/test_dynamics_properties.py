"""Property tests (hypothesis) of both engines: the structure of the equation of motion.

M(q) qdd + C(q, qd) qd + g(q) = tau  (Featherstone 2008 eq. 5.1; Lynch & Park ch. 8). Checked:
M symmetric positive definite; Ṁ − 2C skew-symmetric (Ṁ by central differences along qd; Lynch & Park
eq. 8.55 / Slotine & Li passivity property); RNEA(q, qd, M⁻¹(tau − C qd − g)) = tau across engines; and
the power balance dE/dt = qdᵀ tau over a short simulated motion (E kinetic + potential, potential from
Pinocchio's computePotentialEnergy).
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS

_CACHE: dict[str, tuple] = {}


def engines(robot: str):
    if robot not in _CACHE:
        e = ROBOTS[robot]
        held = {} if robot == "baxter" else e.held_joints  # Baxter: keep its mimic grippers moving
        m = RobotModel.from_urdf(e.path, held_joints=held)
        if robot == "ur5":
            m = m.with_settings(payload=("wrist_3_link", 1.2, (0.0, 0.04, 0.03), np.diag([0.002, 0.003, 0.004])))
        _CACHE[robot] = (m, PinocchioDynamics(m), NewtonEulerDynamics(m))
    return _CACHE[robot]


unit = st.floats(0.0, 1.0, allow_nan=False)
ROBOT = st.sampled_from(["panda", "ur5", "kinova", "baxter", "planar_2r", "z1"])


@st.composite
def state(draw):
    robot = draw(ROBOT)
    m, _, _ = engines(robot)
    u = np.array(draw(st.lists(unit, min_size=m.n, max_size=m.n)))
    lo = np.where(np.isfinite(m.lower), m.lower, -np.pi)
    hi = np.where(np.isfinite(m.upper), m.upper, np.pi)
    q = lo + u * (hi - lo)
    qd = np.array(draw(st.lists(st.floats(-2.0, 2.0), min_size=m.n, max_size=m.n)))
    tau = np.array(draw(st.lists(st.floats(-20.0, 20.0), min_size=m.n, max_size=m.n)))
    return robot, q, qd, tau


@given(state())
def test_mass_matrix_symmetric_positive_definite(s):
    robot, q, _, _ = s
    _, pino, ne = engines(robot)
    for M in (pino.mass_matrix(q), ne.mass_matrix(q), ne.mass_matrix(q, method="columns")):
        np.testing.assert_array_equal(M, M.T)
        assert np.linalg.eigvalsh(M)[0] > 0, robot
        np.linalg.cholesky(M)


@given(state())
def test_mdot_minus_2c_is_skew(s):
    robot, q, qd, _ = s
    _, pino, ne = engines(robot)
    h = 1e-6
    Mdot = (ne.mass_matrix(q + h * qd) - ne.mass_matrix(q - h * qd)) / (2 * h)  # Ṁ = Σ ∂M/∂q_k qd_k
    C = pino.coriolis_matrix(q, qd)
    S = Mdot - 2 * C
    scale = max(1.0, np.abs(Mdot).max())
    np.testing.assert_allclose(S + S.T, 0.0, atol=1e-6 * scale)
    # and C is the matrix whose product with qd the in-package RNEA gives
    np.testing.assert_allclose(C @ qd, ne.coriolis_qd(q, qd), atol=1e-9)


@given(state())
def test_rnea_inverts_forward_dynamics(s):
    robot, q, qd, tau = s
    _, pino, ne = engines(robot)
    # Pinocchio's ABA (or Cholesky with mimic joints) -> in-package RNEA
    qdd = pino.aba(q, qd, tau)
    np.testing.assert_allclose(ne.rnea(q, qd, qdd), tau, atol=1e-8)
    # in-package M⁻¹(tau − C qd − g) -> Pinocchio's RNEA
    qdd2 = np.linalg.solve(ne.mass_matrix(q), tau - ne.coriolis_qd(q, qd) - ne.gravity(q))
    np.testing.assert_allclose(pino.rnea(q, qd, qdd2), tau, atol=1e-8)


def energy(pino: PinocchioDynamics, ne: NewtonEulerDynamics, q, qd) -> float:
    """½ qdᵀ M qd + potential energy (J); potential from Pinocchio's computePotentialEnergy."""
    m = pino.model
    qm = m.expand(q)
    pm = pino.pin_model
    qp = pin.neutral(pm)
    for k, jn in enumerate(m.moving_joint_names):
        j = pm.joints[pm.getJointId(jn)]
        if j.nq == 2:
            qp[j.idx_q], qp[j.idx_q + 1] = np.cos(qm[k]), np.sin(qm[k])
        else:
            qp[j.idx_q] = qm[k]
    U = pin.computePotentialEnergy(pm, pm.createData(), qp)
    return 0.5 * qd @ ne.mass_matrix(q) @ qd + U


@settings(max_examples=6)
@given(state(), st.floats(0.5, 4.0))
def test_energy_balance_over_simulated_motion(s, freq):
    """RK4 on qdd = M⁻¹(tau(t) − C qd − g) with the in-package engine; E(T) − E(0) = ∫ qdᵀ tau dt."""
    robot, q, qd, u = s
    _, pino, ne = engines(robot)
    # torques that accelerate each joint by at most ~20 rad/s² (light wrists would otherwise spin up so
    # fast that the integration error, not the model, dominates)
    tau0 = (u / 20.0) * np.diag(ne.mass_matrix(q)) * 20.0

    def tau_of(t):
        return tau0 * np.sin(2 * np.pi * freq * t)

    def f(t, x):
        qq, vv = x[: len(q)], x[len(q):]
        a = np.linalg.solve(ne.mass_matrix(qq), tau_of(t) - ne.nonlinear_effects(qq, vv))
        return np.concatenate([vv, a]), vv @ tau_of(t)

    dt, steps = 5e-4, 200  # 0.1 s
    x = np.concatenate([q, qd])
    work = 0.0
    E0 = energy(pino, ne, q, qd)
    for k in range(steps):
        t = k * dt
        k1, p1 = f(t, x)
        k2, p2 = f(t + dt / 2, x + dt / 2 * k1)
        k3, p3 = f(t + dt / 2, x + dt / 2 * k2)
        k4, p4 = f(t + dt, x + dt * k3)
        x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        work += dt / 6 * (p1 + 2 * p2 + 2 * p3 + p4)  # ∫ qdᵀ tau dt by the same RK4 weights
    E1 = energy(pino, ne, x[: len(q)], x[len(q):])
    scale = max(1.0, abs(E0), abs(work))
    assert abs((E1 - E0) - work) <= 1e-6 * scale, (robot, E1 - E0, work)


def test_energy_test_can_fail():
    """The power balance notices a wrong model: doubling the simulated gravity breaks it."""
    m, pino, ne = engines("planar_2r")
    q, qd = np.array([0.3, 0.4]), np.zeros(2)
    m2 = RobotModel.from_urdf(ROBOTS["planar_2r"].path, gravity=(0, 0, -2 * 9.81))
    ne2 = NewtonEulerDynamics(m2)
    x, dt = np.concatenate([q, qd]), 1e-3
    for _ in range(100):  # free fall (tau = 0) under the wrong gravity, semi-implicit Euler is enough here
        a = np.linalg.solve(ne2.mass_matrix(x[:2]), -ne2.nonlinear_effects(x[:2], x[2:]))
        x = np.concatenate([x[:2] + dt * (x[2:] + dt * a), x[2:] + dt * a])
    assert abs(energy(pino, ne, x[:2], x[2:]) - energy(pino, ne, q, qd)) > 1e-2


@pytest.mark.parametrize("robot", ["panda", "baxter"])
def test_friction_is_not_in_rnea(robot):
    """URDF damping/friction are separate (friction_torque), RNEA is the rigid-body part only."""
    m, pino, ne = engines(robot)
    q = m.neutral()
    qd = np.full(m.n, 0.3)
    np.testing.assert_allclose(pino.rnea(q, qd, np.zeros(m.n)), ne.nonlinear_effects(q, qd), atol=1e-9)
    np.testing.assert_allclose(pino.friction_torque(qd), m.damping * 0.3 + m.friction, atol=0)
