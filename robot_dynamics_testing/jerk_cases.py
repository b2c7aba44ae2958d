"""Shared test helpers (moved here from test/test_jerk.py so tests of other areas import them from the harness)."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS, example_robot_data_dir


UR10 = example_robot_data_dir() / "ur_description/urdf/ur10_robot.urdf"


CASES = {"ur10": (UR10, "tool0", 15.0, (0.0, 0.0, 0.05)),
         "panda": (ROBOTS["panda"].path, "panda_link7", 2.5, (0.0, 0.0, 0.1))}


TOL = 1e-3  # relative: the dense check's allowance over every limit


def pinocchio_model(robot: str):
    """Pinocchio model from the URDF file, held joints locked, the payload added at its frame."""
    urdf, link, mass, com = CASES[robot]
    full = pin.buildModelFromUrdf(str(urdf))
    q0 = pin.neutral(full)
    lock = []
    held = ROBOTS[robot].held_joints if robot in ROBOTS else {}
    for name, value in held.items():
        jid = full.getJointId(name)
        lock.append(jid)
        q0[full.joints[jid].idx_q] = value
    pm = pin.buildReducedModel(full, lock, q0) if lock else full
    frame = pm.frames[pm.getFrameId(link)]
    pm.inertias[frame.parentJoint] = (pm.inertias[frame.parentJoint]
                                      + frame.placement.act(pin.Inertia(mass, np.array(com), np.zeros((3, 3)))))
    return pm


def package_model(robot: str):
    urdf, link, mass, com = CASES[robot]
    held = ROBOTS[robot].held_joints if robot in ROBOTS else None
    return RobotModel.from_urdf(urdf, held_joints=held).with_settings(payload=(link, mass, com))


def dense_check(pm, t, q, qd, qdd):
    """(K-1, n) jerk by finite differences of qdd, and (K, n) torques by Pinocchio RNEA."""
    data = pm.createData()
    tau = np.array([pin.rnea(pm, data, q[k], qd[k], qdd[k]) for k in range(q.shape[0])])
    jerk = np.diff(qdd, axis=0) / np.diff(t)[:, None]
    return jerk, tau


def dense_samples(sol, period=1e-3):
    t = np.append(np.arange(0.0, sol.duration, period), sol.duration)
    _, _, _, _, q, qd, qdd, _ = sol.sample(t)
    return t, q, qd, qdd


def random_panda_waypoints(seed):
    """6 waypoints of a smooth Panda path (rad) inside the position limits, different for each seed."""
    model = package_model("panda")
    rng = np.random.default_rng(seed)
    lo, hi = model.lower, model.upper
    center, amp = (lo + hi) / 2, (hi - lo) / 2 * 0.3
    frac = np.linspace(0.0, 1.0, 6)[:, None]
    return center + amp * np.sin(2 * np.pi * rng.uniform(0.2, 0.4, model.n) * frac + rng.uniform(0, 2 * np.pi, model.n))
