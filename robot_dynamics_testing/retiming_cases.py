"""Shared test helpers (moved here from test/test_topp_ra.py so tests of other areas import them from the harness)."""
from __future__ import annotations

import contextlib

import numpy as np
import pinocchio as pin
from robot_dynamics_ros.robots import ROBOTS


PAYLOADS = {"panda": ("panda_link7", 2.5, (0.0, 0.0, 0.1)), "ur5": ("wrist_3_link", 8.0, (0.0, 0.1, 0.0))}


MARGIN = 0.9


ACC = 10.0  # rad/s²


def pinocchio_reference(robot: str, payload=True):
    """A Pinocchio model built directly from the example-robot-data URDF (held joints locked, payload
    inertia added to the parent joint of the payload link), independent of our RobotModel."""
    entry = ROBOTS[robot]
    full = pin.buildModelFromUrdf(str(entry.path))
    q0 = pin.neutral(full)
    lock = []
    for name, value in entry.held_joints.items():
        jid = full.getJointId(name)
        lock.append(jid)
        q0[full.joints[jid].idx_q] = value
    model = pin.buildReducedModel(full, lock, q0) if lock else full
    if payload:
        link, mass, com = PAYLOADS[robot]
        frame = model.frames[model.getFrameId(link)]
        model.inertias[frame.parentJoint] = (model.inertias[frame.parentJoint]
                                             + frame.placement.act(pin.Inertia(mass, np.array(com),
                                                                               np.zeros((3, 3)))))
    return model


def load_model(robot: str, payload=True):
    from robot_dynamics_ros.model import RobotModel

    entry = ROBOTS[robot]
    model = RobotModel.from_urdf(entry.path, held_joints=entry.held_joints)
    if payload:
        link, mass, com = PAYLOADS[robot]
        model = model.with_settings(payload=(link, mass, com))
    model.acceleration_limit = np.full(model.n, ACC)
    return model


def urdf_model(path, acceleration: float = ACC):
    """The package's model of any URDF for random requests on it: infinite position limits (continuous
    joints) replaced by ±π so that :func:`smooth_waypoints` stays finite, every acceleration limit
    ``acceleration`` rad/s² (a URDF has none)."""
    from robot_dynamics_ros.model import RobotModel

    model = RobotModel.from_urdf(path)
    model.lower = np.where(np.isfinite(model.lower), model.lower, -np.pi)
    model.upper = np.where(np.isfinite(model.upper), model.upper, np.pi)
    model.acceleration_limit = np.full(model.n, float(acceleration))
    return model


def smooth_waypoints(model, count: int, seed: int = 0, amplitude=0.42):
    """A smooth joint-space path without direction reversals, inside the position limits."""
    rng = np.random.default_rng(seed)
    lo, hi = model.lower, model.upper
    center, amp = (lo + hi) / 2, (hi - lo) / 2 * amplitude
    tau = np.linspace(0.0, 1.0, count)[:, None]
    return center + amp * np.sin(2 * np.pi * rng.uniform(0.5, 1.2, model.n) * tau
                                 + rng.uniform(0, 2 * np.pi, model.n))


def dense_peaks(pm, q, qd, qdd, vlim, alim, tlim, damping=None, coulomb=None):
    """Peak |qd|/V, |qdd|/A, |tau|/T over samples, tau from Pinocchio RNEA (+ friction if given)."""
    data = pm.createData()
    tau = np.array([pin.rnea(pm, data, q[k], qd[k], qdd[k]) for k in range(q.shape[0])])
    if damping is not None:
        moving = qd != 0.0
        tau = np.where(moving, tau + damping * qd + coulomb * np.sign(qd),
                       # at rest static friction holds anything in [-F, F]: the motor needs |tau| - F at least
                       np.sign(tau) * np.maximum(np.abs(tau) - coulomb, 0.0))
    return ((np.abs(qd) / vlim).max(), (np.abs(qdd) / alim).max(), (np.abs(tau) / tlim).max())


@contextlib.contextmanager
def recorded_solves():
    """Within the block, every call the retimer makes of
    :func:`~robot_dynamics_ros.retiming.topp_ra.solve_topp_ra` is made and appended, as (args, result), to
    the list this yields (for comparing the solver against another on the rows real requests build)."""
    import robot_dynamics_ros.retiming.retimer as retimer_module

    calls = []
    solve = retimer_module.solve_topp_ra

    def recording(*args):
        out = solve(*args)
        calls.append((args, out))
        return out

    retimer_module.solve_topp_ra = recording
    try:
        yield calls
    finally:
        retimer_module.solve_topp_ra = solve
