"""PinocchioDynamics: the production engine for single states (Pinocchio 4, Carpentier et al. 2019).

The Pinocchio model is built from :meth:`RobotModel.reduced_urdf` (held joints welded, geometry dropped),
not from Pinocchio's own handling of held or mimic joints, so that the in-package Newton–Euler engine and
this one share only the URDF text. Every array is in ``model.joint_names`` order:

* Pinocchio's joint order may differ from ours (it is mapped by name);
* continuous joints have nq = 2 in Pinocchio (cos θ, sin θ); here q is always the angle θ (rad);
* mimic joints are expanded with the constant map G of :attr:`RobotModel.mimic_matrix`:
  ``q_moving = G q + b``, ``qd_moving = G qd``; hence ``tau = Gᵀ tau_moving``, ``M = Gᵀ M_moving G``,
  ``C = Gᵀ C_moving G`` (still Christoffel-consistent, since G is constant);
* payload: its spatial inertia is added to the inertia of the joint that carries its link
  (``model.inertias[joint] += placement · I_payload``), gravity is ``model.gravity``; both are refreshed
  when ``model.version`` changes;
* armature (``model.armature``, rotor inertia reflected to the joint): Pinocchio's ``model.armature`` at
  each actuated joint's velocity index, which ``rnea`` (+ armature·qdd), ``crba`` (+ diag), ``aba`` and
  ``computeMinverse`` include; mimic joints get none.

Units: rad, m, s, kg, N·m (N for prismatic joints). Frames: the base frame is the URDF root link.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from robot_dynamics_ros.urdf_reader import quote_name, quote_names
from robot_dynamics_ros.dynamics import inputs
from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.model import RobotModel


def _own(a: np.ndarray) -> np.ndarray:
    """``a`` itself when it owns its memory (Pinocchio 4.1's bindings return fresh arrays), else a copy
    (never hand out a view of ``pinocchio.Data`` that the next call overwrites)."""
    return a if a.flags.owndata else a.copy()


class SingularConfigurationError(UserError, ValueError):
    """Raised when a quantity is requested at (or too near) a kinematic singularity."""


class PinocchioDynamics:
    """Rigid-body dynamics of a :class:`RobotModel` with Pinocchio (single state per call).

    The equation of motion is ``M(q) qdd + C(q, qd) qd + g(q) = tau`` (Featherstone 2008, eq. 5.1;
    Lynch & Park, Modern Robotics, eq. 8.1), M including ``diag(model.armature)``. Joint friction
    (:meth:`friction_torque`: URDF ``<dynamics>`` or the identified values) is not part of ``rnea``; add
    it where the physical actuator torque is wanted.

    Raises (all methods): ValueError when an array has the wrong shape or a non-finite entry (the message
    names it: ``"q: expected shape (7,) ..., got (6,)"``, ``"qd[3] (panda_joint4) is NaN"``). Methods that
    need M(q)⁻¹ (:meth:`aba`, :meth:`operational_space_inertia`) raise UserError when
    ``model.massless_joints`` is not empty.
    """

    def __init__(self, model: RobotModel):
        self.model = model
        self.n = model.n
        self.pin_model = pin.buildModelFromXML(model.reduced_urdf())
        # one Data per engine: its size depends only on the topology (about 36·nv³ bytes, see
        # robot_dynamics_ros.model.estimated_engine_bytes), not on gravity or inertias, so _sync keeps it
        self.data = self.pin_model.createData()
        pm = self.pin_model
        if pm.nv != len(model.moving_joint_names):
            raise RuntimeError(f"Pinocchio built nv={pm.nv}, expected {len(model.moving_joint_names)} moving joints")
        # index maps: moving joint k -> Pinocchio velocity index, configuration index, continuity
        v_idx, q_idx, cont = [], [], []
        for jn in model.moving_joint_names:
            jid = pm.getJointId(jn)
            if jid >= pm.njoints:
                raise RuntimeError(f"joint '{jn}' missing from the Pinocchio model")
            v_idx.append(pm.joints[jid].idx_v)
            q_idx.append(pm.joints[jid].idx_q)
            cont.append(pm.joints[jid].nq == 2)
        self._v_idx = np.array(v_idx, dtype=np.int64)
        self._q_idx = np.array(q_idx, dtype=np.int64)
        cont_mask = np.array(cont, dtype=bool)
        self._cont_k = np.nonzero(cont_mask)[0]
        self._lin_k = np.nonzero(~cont_mask)[0]
        self._q_idx_lin = self._q_idx[self._lin_k]   # Pinocchio q index of each non-continuous joint
        self._q_idx_cos = self._q_idx[self._cont_k]  # continuous joints: cos θ here, sin θ at +1
        self._identity_v = bool(np.array_equal(self._v_idx, np.arange(pm.nv)))
        self._identity_q = self._identity_v and pm.nq == pm.nv and not model.has_mimic
        self._G = model.mimic_matrix  # (n_moving, n)
        # Pinocchio velocity order -> our moving order: P[k] = v_idx[k]
        self._Gp = np.zeros((pm.nv, self.n))
        self._Gp[self._v_idx] = self._G  # qd_pin = Gp qd, tau = Gpᵀ tau_pin
        self._plain = self._identity_v and not model.has_mimic
        self._lower = np.tril_indices(pm.nv, -1)
        self._base_inertias = [pm.inertias[i].copy() for i in range(pm.njoints)]
        moving_k = {jn: k for k, jn in enumerate(model.moving_joint_names)}
        self._v_actuated = self._v_idx[[moving_k[jn] for jn in model.joint_names]]  # (n,) Pinocchio v index
        self._version = -1
        self._sync()

    # ----------------------------------------------------------------------------------------------
    def _sync(self) -> None:
        """Refresh gravity and payload from the RobotModel (called when ``model.version`` changed)."""
        pm, m = self.pin_model, self.model
        for i in range(pm.njoints):
            pm.inertias[i] = self._base_inertias[i].copy()
        p = m.payload
        if p is not None:
            fid = pm.getFrameId(p.link, pin.FrameType.BODY)
            if fid >= pm.nframes:
                raise UserError(f"payload link '{p.link}' not found in the Pinocchio model")
            frame = pm.frames[fid]
            I_payload = pin.Inertia(p.mass, np.asarray(p.com, dtype=float), np.asarray(p.inertia, dtype=float))
            pm.inertias[frame.parentJoint] = pm.inertias[frame.parentJoint] + frame.placement.act(I_payload)
        pm.gravity = pin.Motion(np.asarray(m.gravity, dtype=float), np.zeros(3))
        armature = np.zeros(pm.nv)
        armature[self._v_actuated] = m.armature
        pm.armature = armature
        self._version = m.version

    _zero_v = None

    def _q(self, q) -> np.ndarray:
        """Our q (n,) -> Pinocchio configuration (nq,)."""
        if self._version != self.model.version:
            self._sync()
        q = inputs.vector(q, self.n, "q", self.model.joint_names)
        if self._identity_q:
            return q
        qm = self.model.expand(q) if self.model.has_mimic else q
        out = np.empty(self.pin_model.nq)
        out[self._q_idx_lin] = qm[self._lin_k]
        if len(self._cont_k):
            qc = qm[self._cont_k]
            out[self._q_idx_cos] = np.cos(qc)
            out[self._q_idx_cos + 1] = np.sin(qc)
        return out

    def pinocchio_configuration(self, q) -> np.ndarray:
        """Pinocchio configuration vector (nq,) of our q (n,) rad/m: mimic joints expanded, continuous
        joints as (cos θ, sin θ), Pinocchio's joint order (for calling ``pinocchio`` on ``pin_model``)."""
        return np.array(self._q(q), dtype=float)

    def _v(self, v, name: str) -> np.ndarray:
        """Our qd or qdd (n,) -> Pinocchio tangent vector (nv,)."""
        v = inputs.vector(v, self.n, name, self.model.joint_names)
        if self._plain:
            return v
        return self._Gp @ v

    def _tau(self, tau_pin: np.ndarray) -> np.ndarray:
        """Pinocchio generalized force (nv,) -> ours (n,) (virtual work through G)."""
        if self._plain:
            return _own(tau_pin)
        return self._Gp.T @ tau_pin

    def _mat(self, A_pin: np.ndarray) -> np.ndarray:
        """Pinocchio (nv, nv) joint-space matrix -> ours (n, n): Gpᵀ A Gp."""
        if self._plain:
            return _own(A_pin)
        return self._Gp.T @ A_pin @ self._Gp

    def _need_minverse(self, what: str) -> None:
        """Refuse what needs M(q)⁻¹ when some actuated joint moves no mass (M singular)."""
        if self.model.massless_joints:
            raise UserError(f"{what} needs M(q) > 0, but joints {quote_names(self.model.massless_joints)} of "
                            f"{quote_name(self.model.description.name)} move no mass or inertia (M(q) is "
                            "singular); give their links an <inertial> or hold the joints")

    # ----------------------------------------------------------------------------------------------
    def rnea(self, q, qd, qdd) -> np.ndarray:
        """Inverse dynamics tau = M(q) qdd + C(q, qd) qd + g(q), (n,) N·m (RNEA, Featherstone 2008 Table 5.1).

        Args: q (n,) rad/m, qd (n,) rad/s, qdd (n,) rad/s².
        """
        qp = self._q(q)
        return self._tau(pin.rnea(self.pin_model, self.data, qp, self._v(qd, "qd"), self._v(qdd, "qdd")))

    def gravity(self, q) -> np.ndarray:
        """Gravity torque g(q), (n,) N·m: the torque that holds the robot still at q."""
        qp = self._q(q)
        return self._tau(pin.computeGeneralizedGravity(self.pin_model, self.data, qp))

    def mass_matrix(self, q) -> np.ndarray:
        """Joint-space inertia M(q), (n, n) kg·m², symmetric positive definite (CRBA, Featherstone 2008 §6.2)."""
        qp = self._q(q)
        M = _own(pin.crba(self.pin_model, self.data, qp))  # Pinocchio fills the upper triangle
        M[self._lower] = M.T[self._lower]
        return M if self._plain else self._Gp.T @ M @ self._Gp

    def coriolis_matrix(self, q, qd) -> np.ndarray:
        """Coriolis/centrifugal matrix C(q, qd), (n, n) N·m·s/rad, Christoffel-consistent: Ṁ − 2C is skew.

        Source: Pinocchio ``computeCoriolisMatrix`` (Christoffel symbols of the first kind,
        Lynch & Park eq. 8.52); ``C(q, qd) qd`` equals ``rnea(q, qd, 0) − g(q)``.
        """
        qp = self._q(q)
        return self._mat(pin.computeCoriolisMatrix(self.pin_model, self.data, qp, self._v(qd, "qd")))

    def coriolis_qd(self, q, qd) -> np.ndarray:
        """C(q, qd) qd, (n,) N·m: velocity-product torques (RNEA with zero gravity and qdd = 0)."""
        return self.nonlinear_effects(q, qd) - self.gravity(q)

    def nonlinear_effects(self, q, qd) -> np.ndarray:
        """C(q, qd) qd + g(q), (n,) N·m (Pinocchio ``nonLinearEffects``)."""
        qp = self._q(q)
        return self._tau(pin.nonLinearEffects(self.pin_model, self.data, qp, self._v(qd, "qd")))

    def aba(self, q, qd, tau) -> np.ndarray:
        """Forward dynamics qdd = M(q)⁻¹ (tau − C qd − g), (n,) rad/s² (ABA, Featherstone 2008 Table 7.1).

        With mimic joints the constrained system is solved as ``M⁻¹ (tau − h)`` with M and h reduced by G
        (Cholesky), since Pinocchio's ABA works on independent joints.
        """
        self._need_minverse("forward dynamics (aba)")
        tau = inputs.vector(tau, self.n, "tau", self.model.joint_names)
        if self._plain:
            qp = self._q(q)
            return _own(pin.aba(self.pin_model, self.data, qp, self._v(qd, "qd"), tau))
        M = self.mass_matrix(q)
        h = self.nonlinear_effects(q, qd)
        return np.linalg.solve(M, tau - h)

    def friction_torque(self, qd) -> np.ndarray:
        """Joint friction: ``damping · qd + friction · law(qd)``, (n,) N·m, from URDF ``<dynamics>`` or identified
        friction; ``law`` is ``sign`` (sign(0) = 0) or ``tanh(qd / v_s)`` (``RobotModel.coulomb_law``).

        It opposes motion, so the torque a motor must add to overcome it is ``+friction_torque(qd)``.
        """
        qd = inputs.vector(qd, self.n, "qd", self.model.joint_names)
        return self.model.damping * qd + self.model.friction * self.model.coulomb_law(qd)

    # ----------------------------------------------------------------------------------------------
    def _frame_id(self, frame: str) -> int:
        """Frame id of a link (preferred: a joint may carry the same name) or else a joint."""
        pm = self.pin_model
        for ftype in (pin.FrameType.BODY, pin.FrameType.JOINT, pin.FrameType.FIXED_JOINT):
            if pm.existFrame(frame, ftype):
                return pm.getFrameId(frame, ftype)
        links = sorted(self.model.description.links)
        raise UserError(f"frame '{frame}' is not a link or joint of {self.model.description.name} "
                        f"(links: {', '.join(links)})")

    def frame_placement(self, q, frame: str) -> np.ndarray:
        """Pose of a link/joint frame in the base (root link) frame: (4, 4) homogeneous transform, m."""
        qp = self._q(q)
        fid = self._frame_id(frame)
        pin.framesForwardKinematics(self.pin_model, self.data, qp)
        return self.data.oMf[fid].homogeneous.copy()

    def frame_jacobian(self, q, frame: str) -> np.ndarray:
        """Geometric Jacobian (6, n) of a frame, LOCAL_WORLD_ALIGNED: rows (v_x, v_y, v_z, ω_x, ω_y, ω_z).

        The linear rows give the velocity of the frame origin, both in base-frame axes (m/s, rad/s per
        unit qd). Source: Pinocchio ``computeFrameJacobian``; Lynch & Park §5.1 (space Jacobian, reordered).
        """
        qp = self._q(q)
        fid = self._frame_id(frame)
        J = pin.computeFrameJacobian(self.pin_model, self.data, qp, fid, pin.LOCAL_WORLD_ALIGNED)
        if self._plain:
            return _own(J)
        return J @ self._Gp

    def momentum_terms(self, q, qd) -> tuple[np.ndarray, np.ndarray]:
        """``(p, Cᵀ(q, qd) qd − g(q))``, both (n,): the generalized momentum p = M(q) qd (kg·m²/s) and the
        configuration part of its rate, ṗ = τ + Cᵀ qd − g (N·m) — what the momentum observer (De Luca &
        Mattone 2003) needs per sample, with one configuration conversion.

        p comes from RNEA with zero velocity and qd as the acceleration (M qd + g, minus g), so no mass
        matrix is built; C is Pinocchio's Christoffel-consistent ``computeCoriolisMatrix``.
        """
        qp = self._q(q)
        v = self._v(qd, "qd")
        pm, d = self.pin_model, self.data
        if self._zero_v is None:
            self._zero_v = np.zeros(pm.nv)
        g = pin.computeGeneralizedGravity(pm, d, qp).copy()
        p = pin.rnea(pm, d, qp, self._zero_v, v) - g
        beta = pin.computeCoriolisMatrix(pm, d, qp, v).T @ v - g
        if self._plain:
            return p, beta
        return self._Gp.T @ p, self._Gp.T @ beta

    def operational_space_inertia(self, q, frame: str, *, part: str = "full", rcond: float = 1e-6) -> np.ndarray:
        """Operational-space inertia Λ(q) = (J M⁻¹ Jᵀ)⁻¹ of a frame (Khatib 1987; Lynch & Park eq. 8.87).

        Args:
            q: (n,) rad/m.
            frame: link or joint name.
            part: ``"full"`` (6×6, rows as :meth:`frame_jacobian`), ``"linear"`` (3×3, kg) or
                ``"angular"`` (3×3, kg·m²).
            rcond: smallest accepted ratio of the smallest to the largest singular value of J M⁻¹ Jᵀ.

        Returns:
            (6, 6) or (3, 3) symmetric positive definite.

        Raises:
            SingularConfigurationError: J M⁻¹ Jᵀ is (near) singular at q — e.g. an arm with fewer than six
                joints asked for the full 6×6 Λ, or a stretched-out arm; the message gives the singular
                values and suggests ``part="linear"``.
        """
        rows = {"full": slice(0, 6), "linear": slice(0, 3), "angular": slice(3, 6)}
        if part not in rows:
            raise ValueError(f"part: expected 'full', 'linear' or 'angular', got {part!r}")
        self._need_minverse("the operational-space inertia")
        J = self.frame_jacobian(q, frame)[rows[part]]
        if self._plain:  # M⁻¹ by Pinocchio's ABA-based algorithm (Carpentier 2018), upper triangle filled
            Minv = _own(pin.computeMinverse(self.pin_model, self.data, self._q(q)))
            Minv[self._lower] = Minv.T[self._lower]
        else:
            Minv = np.linalg.inv(self.mass_matrix(q))
        A = J @ Minv @ J.T  # J M⁻¹ Jᵀ, the inverse operational-space inertia
        A = 0.5 * (A + A.T)
        w, V = np.linalg.eigh(A)  # symmetric PSD: eigenvalues = singular values
        s = w[::-1]
        if s[0] <= 0 or s[-1] < rcond * s[0]:
            raise SingularConfigurationError(
                f"operational-space inertia of frame '{frame}' ({part}) is undefined at q={np.round(np.asarray(q), 4).tolist()}: "
                f"J M⁻¹ Jᵀ is singular (singular values {', '.join(f'{v:.3g}' for v in s)}; "
                f"ratio {s[-1] / s[0] if s[0] > 0 else 0:.2g} < rcond {rcond:g}); the frame cannot move in every "
                "requested direction here (a kinematic singularity, or fewer than 6 joints: try part='linear')")
        L = (V / w) @ V.T  # Λ = A⁻¹ = V diag(1/w) Vᵀ
        return 0.5 * (L + L.T)
