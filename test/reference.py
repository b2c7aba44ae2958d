"""Independent references shared by tests (and by the benchmarks, which check their outputs with them):
the arm the DDS probes and benchmarks drive, g(q) from Pinocchio called directly on the URDF, and smooth
request paths. Nothing here calls the package's dynamics code.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the benchmark/probe robot (a bundled robot name)
ROBOT = "panda"
#: waypoints of a default request path
WAYPOINTS = 100


@dataclass(frozen=True)
class ProbeRobot:
    """The arm the probes drive: URDF path, joint names (URDF order), held joints, base pose (rad)."""

    urdf: str
    joint_names: tuple[str, ...]
    held_joints: dict[str, float]
    base_pose: np.ndarray

    @classmethod
    def panda(cls) -> ProbeRobot:
        from robot_dynamics_ros.robots import ROBOTS

        entry = ROBOTS[ROBOT]
        names = tuple(f"panda_joint{i}" for i in range(1, 8))
        return cls(str(entry.path), names, dict(entry.held_joints),
                   np.array([entry.demo_pose[n] for n in names]))


def expected_gravity(robot: ProbeRobot, q: np.ndarray) -> np.ndarray:
    """g(q) (N·m), (count, n) for (count, n) positions: Pinocchio's ``computeGeneralizedGravity`` directly.

    Held joints (Panda fingers) at their catalogue values. Independent of the package's own dynamics code.
    """
    import pinocchio as pin

    model = pin.buildModelFromUrdf(robot.urdf)
    data = model.createData()
    qfull = pin.neutral(model)
    for name, value in robot.held_joints.items():
        if model.existJointName(name):
            qfull[model.joints[model.getJointId(name)].idx_q] = value
    idx_q = [model.joints[model.getJointId(n)].idx_q for n in robot.joint_names]
    idx_v = [model.joints[model.getJointId(n)].idx_v for n in robot.joint_names]
    out = np.empty_like(q)
    for i, row in enumerate(q):
        qfull[idx_q] = row
        out[i] = pin.computeGeneralizedGravity(model, data, qfull)[idx_v]
    return out


def request_path(k: int, waypoints: int = WAYPOINTS) -> np.ndarray:
    """(waypoints, 7) a smooth Panda path (rad), different for each k, inside the joint limits."""
    base = ProbeRobot.panda().base_pose
    s = np.linspace(0.0, 1.0, waypoints)[:, None]
    phase = 0.37 * k
    amp = np.array([0.5, 0.4, 0.5, 0.3, 0.6, 0.4, 0.8])
    return base[None, :] + amp[None, :] * np.sin(2 * np.pi * s + phase + np.arange(7)[None, :])
