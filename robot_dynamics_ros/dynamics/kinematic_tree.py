"""The kinematic tree of a :class:`~robot_dynamics_ros.model.RobotModel` as per-body constants: :class:`JointTable`.

Built in Python once per model version from our own reading of the URDF (never from Pinocchio's model). The
Newton–Euler engine (:mod:`robot_dynamics_ros.dynamics.newton_euler`), the momentum observer's one-sweep terms
(:mod:`robot_dynamics_ros.dynamics.momentum_terms`) and the identification regressor
(:mod:`robot_dynamics_ros.identification.regressor`) all run on this table. Body i has its frame {i} at its
joint (the child link frame of the URDF joint); fixed and held joints are folded into constant transforms and
the links welded to a body (and a payload) are merged into it (parallel-axis theorem); mimic joints are
bodies of their own with ``q_i = mult·q[src] + offset``.
"""
from __future__ import annotations

import numpy as np

from robot_dynamics_ros.model import RobotModel

#: joint types of :attr:`JointTable.jtype`
REVOLUTE, PRISMATIC = 0, 1


class JointTable:
    """Per-body constants of the recursion, in ``model.moving_joint_names`` order (parents first).

    Attributes (nb = number of moving joints, actuated and mimic):
        parent (nb,) int: index of the parent body, -1 for the fixed base.
        R_T (nb, 3, 3), p_T (nb, 3): fixed part of the transform from the parent body frame to the joint
            frame (fixed and held joints on the way composed with the joint's ``<origin>``).
        axis (nb, 3): unit joint axis z in the body frame.  jtype (nb,): 0 revolute/continuous, 1 prismatic.
        mass (nb,) kg, com (nb, 3) m, I_c (nb, 3, 3) kg·m²: merged body (links welded to it, payload).
        src (nb,) int, mult (nb,), offset (nb,): q_body = mult · q[src] + offset (mimic map).
    """

    def __init__(self, model: RobotModel):
        d = model.description
        held = model.held_joints
        names = list(model.moving_joint_names)
        body_of_joint = {jn: i for i, jn in enumerate(names)}
        nb = len(names)
        self.parent = np.full(nb, -1, dtype=np.int64)
        self.R_T = np.zeros((nb, 3, 3))
        self.p_T = np.zeros((nb, 3))
        self.axis = np.zeros((nb, 3))
        self.jtype = np.zeros(nb, dtype=np.int64)
        for i, jn in enumerate(names):
            j = d.joints[jn]
            T = j.origin
            link = j.parent
            # walk up through fixed/held joints to the nearest moving body (or the base)
            while link in d.parent_joint:
                pj = d.joints[d.parent_joint[link]]
                if pj.name in body_of_joint:
                    self.parent[i] = body_of_joint[pj.name]
                    break
                T = pj.origin @ pj.motion(held.get(pj.name, 0.0)) @ T
                link = pj.parent
            self.R_T[i], self.p_T[i] = T[:3, :3], T[:3, 3]
            self.axis[i] = j.axis
            self.jtype[i] = PRISMATIC if j.type == "prismatic" else REVOLUTE
        # merge the links welded to each body (and the payload) into one rigid body, in the body frame
        h = np.zeros((nb, 3))       # first moment of mass Σ m c, kg·m
        I_o = np.zeros((nb, 3, 3))  # inertia about the body origin, kg·m²
        self.mass = np.zeros(nb)

        def add(i, mass, com, I_com, T):
            R, p = T[:3, :3], T[:3, 3]
            c = R @ com + p
            self.mass[i] += mass
            h[i] += mass * c
            I_o[i] += R @ I_com @ R.T + mass * (np.dot(c, c) * np.eye(3) - np.outer(c, c))

        payload = model.payload
        for i, jn in enumerate(names):
            stack = [(d.joints[jn].child, np.eye(4))]
            while stack:
                link, T = stack.pop()
                ine = d.links[link].inertial
                add(i, ine.mass, ine.com, ine.inertia, T)
                if payload is not None and payload.link == link:
                    add(i, payload.mass, payload.com, payload.inertia, T)
                for cj in d.child_joints[link]:
                    if cj not in body_of_joint:  # welded: fixed or held
                        j = d.joints[cj]
                        stack.append((j.child, T @ j.origin @ j.motion(held.get(cj, 0.0))))
        self.com = np.zeros((nb, 3))
        self.I_c = np.zeros((nb, 3, 3))
        for i in range(nb):
            if self.mass[i] > 0:
                c = h[i] / self.mass[i]
                self.com[i] = c
                self.I_c[i] = I_o[i] - self.mass[i] * (np.dot(c, c) * np.eye(3) - np.outer(c, c))
            else:
                self.I_c[i] = I_o[i]
        self.src = np.ascontiguousarray(model.mimic_source, dtype=np.int64)
        self.mult = np.ascontiguousarray(model.mimic_multiplier, dtype=float)
        self.offset = np.ascontiguousarray(model.mimic_offset, dtype=float)

    def packed(self) -> tuple[np.ndarray, np.ndarray]:
        """The table as two flat buffers (floats, ints) for the kernels (fewer arguments: cheaper calls).

        Float layout, blocks of nb rows: R_T (9), p_T (3), axis (3), mass (1), com (3), I_c (9), mult (1),
        offset (1); int layout: parent, jtype, src. :func:`~robot_dynamics_ros.dynamics.rnea_kernels.unpack_table` restores the named
        views.
        """
        fbuf = np.concatenate([self.R_T.ravel(), self.p_T.ravel(), self.axis.ravel(), self.mass,
                               self.com.ravel(), self.I_c.ravel(), self.mult, self.offset])
        ibuf = np.concatenate([self.parent, self.jtype, self.src]).astype(np.int64)
        return np.ascontiguousarray(fbuf), np.ascontiguousarray(ibuf)
