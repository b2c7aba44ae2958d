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


class PinByName:
    """Pinocchio's own algorithms on a Pinocchio model, arrays mapped by joint name into ``joint_names``
    order (continuous joints as (cos, sin)); joints not named stay at Pinocchio's neutral position.

    Build it from the URDF file (:meth:`from_urdf`) or from the package's reduced URDF text (:meth:`from_xml`,
    then held joints are already welded); either way no package dynamics code is involved."""

    def __init__(self, pin_model, joint_names, gravity=None):
        import pinocchio as pin

        self.pin = pin
        self.m = pin_model
        if gravity is not None:
            self.m.gravity.linear[:] = gravity
        self.d = self.m.createData()
        joints = [self.m.joints[self.m.getJointId(n)] for n in joint_names]
        self.idx_q = np.array([j.idx_q for j in joints])
        self.idx_v = np.array([j.idx_v for j in joints])
        self.nq = [j.nq for j in joints]

    @classmethod
    def from_urdf(cls, path, joint_names, gravity=None) -> PinByName:
        import pinocchio as pin

        return cls(pin.buildModelFromUrdf(str(path)), joint_names, gravity)

    @classmethod
    def from_xml(cls, xml: str, joint_names, gravity=None) -> PinByName:
        import pinocchio as pin

        return cls(pin.buildModelFromXML(xml), joint_names, gravity)

    def _q(self, q):
        out = self.pin.neutral(self.m)
        for k, (i, nq) in enumerate(zip(self.idx_q, self.nq)):
            if nq == 2:   # continuous joint: (cos, sin)
                out[i], out[i + 1] = np.cos(q[k]), np.sin(q[k])
            else:
                out[i] = q[k]
        return out

    def _v(self, v):
        out = np.zeros(self.m.nv)
        out[self.idx_v] = v
        return out

    def gravity(self, q):
        return self.pin.computeGeneralizedGravity(self.m, self.d, self._q(q))[self.idx_v]

    def rnea(self, q, qd, qdd):
        return self.pin.rnea(self.m, self.d, self._q(q), self._v(qd), self._v(qdd))[self.idx_v]

    def aba(self, q, qd, tau):
        return self.pin.aba(self.m, self.d, self._q(q), self._v(qd), self._v(tau))[self.idx_v]

    def computed_torque(self, q, qd, a):
        """M(q) a + C(q, qd) qd + g(q) from CRBA, the Coriolis matrix and g separately (not RNEA)."""
        pin = self.pin
        pq, pv = self._q(q), self._v(qd)
        M = pin.crba(self.m, self.d, pq)
        M = np.triu(M) + np.triu(M, 1).T
        C = pin.computeCoriolisMatrix(self.m, self.d, pq, pv)
        g = pin.computeGeneralizedGravity(self.m, self.d, pq)
        return (M @ self._v(a) + C @ pv + g)[self.idx_v]


def request_path(k: int, waypoints: int = WAYPOINTS) -> np.ndarray:
    """(waypoints, 7) a smooth Panda path (rad), different for each k, inside the joint limits."""
    base = ProbeRobot.panda().base_pose
    s = np.linspace(0.0, 1.0, waypoints)[:, None]
    phase = 0.37 * k
    amp = np.array([0.5, 0.4, 0.5, 0.3, 0.6, 0.4, 0.8])
    return base[None, :] + amp[None, :] * np.sin(2 * np.pi * s + phase + np.arange(7)[None, :])
