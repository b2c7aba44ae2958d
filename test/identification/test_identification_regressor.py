"""The regressor Y(q, qd, qdd) against two independent sources: Pinocchio's computeJointTorqueRegressor
(its own URDF parser and algorithm) and the in-package RNEA with the URDF's parameters (Y pi_URDF = tau)."""
import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.identification.regressor import (Regressor, inertial_to_parameters,
                                                         parameters_to_inertial, transform_parameters)
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS


def _model(name, held=None):
    e = ROBOTS[name]
    return RobotModel.from_urdf(e.path, held_joints=e.held_joints if held is None else held)


def _states(model, N, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-2.5, 2.5, (N, model.n)), rng.normal(0, 2, (N, model.n)), rng.normal(0, 5, (N, model.n)))


def _pinocchio_regressor(model, reg, q, qd, qdd):
    """Pinocchio's regressor at each sample, its columns reordered to our bodies and rows to our joints."""
    pm = pin.buildModelFromXML(model.reduced_urdf())
    pd = pm.createData()
    joints = [pm.joints[pm.getJointId(jn)] for jn in model.joint_names]
    v_idx = [j.idx_v for j in joints]
    out = np.zeros((q.shape[0], model.n, reg.n_params))
    for k in range(q.shape[0]):
        qp = np.zeros(pm.nq)
        for i, j in enumerate(joints):
            if j.nq == 2:  # continuous joint: (cos, sin)
                qp[j.idx_q:j.idx_q + 2] = np.cos(q[k, i]), np.sin(q[k, i])
            else:
                qp[j.idx_q] = q[k, i]
        v, a = np.zeros(pm.nv), np.zeros(pm.nv)
        v[v_idx], a[v_idx] = qd[k], qdd[k]
        Yp = pin.computeJointTorqueRegressor(pm, pd, qp, v, a)[v_idx]
        for b, jn in enumerate(model.moving_joint_names):
            jid = pm.getJointId(jn)
            out[k, :, 10 * b:10 * b + 10] = Yp[:, 10 * (jid - 1):10 * jid]
    return out


@pytest.mark.parametrize("robot", ["panda", "ur5"])
def test_regressor_matches_pinocchio(robot):
    model = _model(robot)
    reg = Regressor(model)
    q, qd, qdd = _states(model, 50)
    Y = reg.inertial(q, qd, qdd)
    Yp = _pinocchio_regressor(model, reg, q, qd, qdd)
    scale = np.abs(Yp).max()
    assert scale > 1.0
    assert np.abs(Y - Yp).max() <= 1e-12 * scale


@pytest.mark.parametrize("robot,held", [("panda", None), ("ur5", None), ("panda", {})])
def test_regressor_times_urdf_parameters_is_rnea(robot, held):
    """held={} keeps Panda's fingers moving: a prismatic joint and a mimic joint (tau_master += k tau_i)."""
    model = _model(robot, held)
    reg = Regressor(model)
    q, qd, qdd = _states(model, 200, seed=1)
    tau = NewtonEulerDynamics(model).rnea(q, qd, qdd)
    err = np.abs(reg.inertial(q, qd, qdd) @ reg.parameters() - tau).max()
    assert err <= 1e-12 * np.abs(tau).max()
    g = NewtonEulerDynamics(model).gravity(q)
    Yg = reg.inertial(q, np.zeros_like(q), np.zeros_like(q))
    assert np.abs(Yg @ reg.parameters() - g).max() <= 1e-12 * np.abs(g).max()


def test_regressor_is_linear_and_gravity_free_part_vanishes_at_rest():
    model = _model("ur5")
    reg = Regressor(model)
    q, _, _ = _states(model, 5)
    z = np.zeros_like(q)
    assert np.all(reg.inertial(q, z, z, gravity=False) == 0.0)


def test_parameter_conversions_round_trip_and_transform_matches_regressor():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(3, 3))
    Ic = A @ A.T + np.eye(3) * 0.1
    c = rng.normal(size=3) * 0.1
    pi = inertial_to_parameters(2.5, c, Ic)
    m, c2, Ic2 = parameters_to_inertial(pi)
    assert m == 2.5 and np.allclose(c2, c, atol=1e-15) and np.allclose(Ic2, Ic, atol=1e-14)
    # a body at pose T in frame A: its parameters in A are X pi_B; composite inertia from the model agrees
    from robot_dynamics_ros.urdf_elements import transform
    T = transform([0.1, -0.2, 0.3], [0.4, -0.5, 0.6])
    piA = transform_parameters(T) @ pi
    mA, cA, IcA = parameters_to_inertial(piA)
    R = T[:3, :3]
    assert mA == pytest.approx(2.5)
    assert np.allclose(cA, R @ c + T[:3, 3], atol=1e-14)
    assert np.allclose(IcA, R @ Ic @ R.T, atol=1e-13)


def test_bad_input_names_the_joint():
    model = _model("ur5")
    reg = Regressor(model)
    q = np.zeros((2, 6))
    qd = q.copy()
    qd[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"qd\[1, 2\] \(elbow_joint\)"):
        reg.inertial(q, qd, q)
    with pytest.raises(ValueError, match=r"q: expected shape \(N, 6\)"):
        reg.inertial(np.zeros((2, 5)), q, q)
