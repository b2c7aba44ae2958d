"""control/laws.py against Pinocchio's own algorithms called directly on the unmodified URDF."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros import robots
from robot_dynamics_ros.control import laws
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.model import RobotModel


@pytest.fixture(scope="module")
def ur5():
    model = RobotModel.from_urdf(robots.ROBOTS["ur5"].path)
    # the UR5 URDF has no <dynamics>: give it viscous and Coulomb friction so the friction term is exercised
    model.damping[:] = np.linspace(0.5, 1.0, model.n)
    model.friction[:] = np.linspace(2.0, 1.0, model.n)
    return model, PinocchioDynamics(model)


@pytest.fixture(scope="module")
def ref_ur5(ur5):
    """Pinocchio straight from the original URDF file; arrays mapped by joint name."""
    model, _ = ur5
    m = pin.buildModelFromUrdf(str(robots.ROBOTS["ur5"].path))
    d = m.createData()
    idx = np.array([m.joints[m.getJointId(n)].idx_v for n in model.joint_names])
    assert m.nq == m.nv == model.n
    return m, d, idx


def _to(idx, v):
    out = np.zeros(len(idx))
    out[idx] = v
    return out


def test_gravity_and_friction_terms(ur5, ref_ur5):
    model, eng = ur5
    m, d, idx = ref_ur5
    rng = np.random.default_rng(3)
    q = model.random_configuration(rng)
    qd = rng.uniform(-1, 1, model.n)
    g_ref = pin.computeGeneralizedGravity(m, d, _to(idx, q))[idx]
    np.testing.assert_allclose(laws.gravity_compensation(eng, q), g_ref, atol=1e-10)
    fr = np.linspace(0.5, 1.0, model.n) * qd + np.linspace(2.0, 1.0, model.n) * np.sign(qd)
    np.testing.assert_allclose(laws.gravity_compensation(eng, q, qd=qd, friction=True), g_ref + fr, atol=1e-10)
    np.testing.assert_allclose(laws.gravity_compensation(eng, q, qd=qd, friction=True,
                                                         hardware_compensates_gravity=True), fr, atol=1e-12)
    assert not laws.gravity_compensation(eng, q, hardware_compensates_gravity=True).any()
    with pytest.raises(ValueError, match="qd"):
        laws.gravity_compensation(eng, q, friction=True)


def test_feedforward_and_computed_torque_equal_m_c_g(ur5, ref_ur5):
    model, eng = ur5
    m, d, idx = ref_ur5
    rng = np.random.default_rng(4)
    q, q_d = model.random_configuration(rng, 2)
    qd, qd_d, qdd_d = rng.uniform(-1, 1, (3, model.n))
    kp, kd = np.linspace(50, 100, model.n), 12.0
    pq, pqd = _to(idx, q), _to(idx, qd)
    M = pin.crba(m, d, pq)
    M = np.triu(M) + np.triu(M, 1).T
    C = pin.computeCoriolisMatrix(m, d, pq, pqd)
    g = pin.computeGeneralizedGravity(m, d, pq)
    a = qdd_d + kd * (qd_d - qd) + kp * (q_d - q)
    expected = (M @ _to(idx, a) + C @ pqd + g)[idx]
    np.testing.assert_allclose(laws.computed_torque(eng, q, qd, q_d, qd_d, qdd_d, kp, kd), expected, atol=1e-9)
    pqd_d = _to(idx, qd_d)
    ff_ref = pin.rnea(m, d, _to(idx, q_d), pqd_d, _to(idx, qdd_d))[idx]
    np.testing.assert_allclose(laws.feedforward(eng, q_d, qd_d, qdd_d), ff_ref, atol=1e-9)


def test_clamp_effort_counts_and_respects_infinite_limits():
    tau = np.array([100.0, -100.0, 5.0, 1e9])
    limit = np.array([87.0, 87.0, 12.0, np.inf])
    out = tau.tolist()
    n = laws.clamp_effort_list(out, limit.tolist())
    np.testing.assert_array_equal(out, [87.0, -87.0, 5.0, 1e9])
    assert n == 2


def test_clamp_effort_list_matches_numpy_clip_semantics():
    """The list clamp of the gravity node's hot path agrees with np.clip, counts only |tau| > limit."""
    import math

    import numpy as np

    from robot_dynamics_ros.control.laws import clamp_effort_list

    limit = [87.0, 87.0, 12.0, 12.0, math.inf, 5.0, 5.0]
    tau = [100.0, -100.0, 11.9, -12.0, 1e300, math.inf, -math.inf]
    expected = np.clip(np.array(tau), -np.array(limit), np.array(limit))
    assert clamp_effort_list(tau, limit) == 4          # 100, -100, +inf, -inf; exactly -12 is not a clamp
    np.testing.assert_array_equal(tau, expected)
    nan_tau = [math.nan, 0.0]
    assert clamp_effort_list(nan_tau, [1.0, 1.0]) == 0 and math.isnan(nan_tau[0])
