"""The inverse-dynamics regressor: tau = Y(q, qd, qdd) pi, linear in the inertial parameters pi.

Convention (the same as Pinocchio's ``computeJointTorqueRegressor`` and ``Inertia.toDynamicParameters``):
one body per moving joint of the :class:`~robot_dynamics_ros.model.RobotModel` (``model.moving_joint_names``
order; links welded to it by fixed or held joints, and the payload, merged in), its frame {i} the joint's
child link frame, and per body the 10 parameters

    pi_i = (m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)

in kg, kg·m, kg·m², with c the centre of mass in {i} and I the inertia about the ORIGIN of {i}, axes of {i}
(I = I_c + m (|c|² E − c cᵀ), parallel-axis theorem). pi stacks the bodies: ``pi[10 i : 10 i + 10]``.

Derivation (Atkeson, An & Hollerbach 1986; Khalil & Dombre, *Modeling, Identification and Control of
Robots*, 2002, §9.3): the outward Newton–Euler pass of :mod:`robot_dynamics_ros.dynamics.newton_euler`
(Craig 2005 eqs. 6.45–6.50, base acceleration −g) gives ω_i, ω̇_i and the origin acceleration v̇_i in
{i}. The wrench body i needs, at the origin of {i}, is linear in pi_i::

    f_i = m v̇_i + ω̇_i × h + ω_i × (ω_i × h)                 (h = m c)
    n_i = I ω̇_i + ω_i × (I ω_i) + h × v̇_i

so f_i = A_f pi_i, n_i = A_n pi_i with 3×10 matrices of the kinematics. Carried to each ancestor j
(f ← R f, n ← R n + p × R f, the inward pass 6.51–6.53) and projected on its axis (n·z revolute, f·z
prismatic), the columns of A give the block Y[j, 10 i : 10 i + 10]. Mimic bodies move k = multiplier
times their master and give k times their torque to it (virtual work), as in the Newton–Euler engine.

Friction and rotor inertia are separate regressors (:meth:`Regressor.friction`, :meth:`Regressor.armature`),
per actuated joint: tau_f = fc·s(qd) + fv·qd + fo, tau_a = Ia·qdd, with s(qd) = sign(qd) or, for a
Coulomb transition velocity v_s > 0, the smooth tanh(qd / v_s) (the sigmoid friction law Gaz, Cognetti,
Oliva, Robuffo Giordano & De Luca identified on the Franka Emika Panda, IEEE RA-L 4(4), 2019, eq. 13,
without its offset term, which fo carries).

Everything is vectorized over N samples with numpy (the kinematics are 3-vectors per body, the wrench
columns (N, 6, 10) per body); the joint table (transforms, axes, mimic map) is
:class:`robot_dynamics_ros.dynamics.kinematic_tree.JointTable`, the same data the engine runs on.
"""
from __future__ import annotations

import numpy as np

from robot_dynamics_ros.dynamics.kinematic_tree import PRISMATIC, JointTable
from robot_dynamics_ros.model import RobotModel

__all__ = ["PARAMETER_NAMES", "FRICTION_NAMES", "Regressor", "inertial_to_parameters",
           "parameters_to_inertial", "transform_parameters"]

#: names of the 10 inertial parameters of one body, in pi order
PARAMETER_NAMES = ("m", "mx", "my", "mz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
#: names of the 3 friction parameters of one joint: Coulomb (N·m), viscous (N·m·s/rad), offset (N·m)
FRICTION_NAMES = ("fc", "fv", "fo")


def inertial_to_parameters(mass: float, com, inertia_com) -> np.ndarray:
    """(m, c (3,) m, I_c (3, 3) about the COM) -> pi (10,) with the inertia about the frame origin."""
    c = np.asarray(com, dtype=float)
    I = np.asarray(inertia_com, dtype=float) + mass * (np.dot(c, c) * np.eye(3) - np.outer(c, c))
    return np.array([mass, *(mass * c), I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]])


def parameters_to_inertial(pi) -> tuple[float, np.ndarray, np.ndarray]:
    """pi (10,) -> (m kg, c (3,) m, I_c (3, 3) kg·m² about the COM). Raises ValueError when m ≤ 0."""
    pi = np.asarray(pi, dtype=float)
    m = float(pi[0])
    if not m > 0:
        raise ValueError(f"mass {m} kg: must be > 0 to have a centre of mass")
    c = pi[1:4] / m
    I = np.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])
    return m, c, I - m * (np.dot(c, c) * np.eye(3) - np.outer(c, c))


def transform_parameters(T: np.ndarray) -> np.ndarray:
    """(10, 10) matrix X with pi_A = X pi_B for a rigid body whose frame B sits at T = ᴬT_B (4, 4).

    h_A = R h + m p; I_A = R I Rᵀ + m(|p|² E − p pᵀ) + 2 (p·h')E − p h'ᵀ − h' pᵀ with h' = R h (inertia
    about the origin, moved by the parallel-axis theorem). Linear in pi_B, so X is built column by column.
    """
    R, p = T[:3, :3], T[:3, 3]
    X = np.empty((10, 10))
    for k in range(10):
        e = np.zeros(10)
        e[k] = 1.0
        m, h = e[0], e[1:4]
        I = np.array([[e[4], e[5], e[7]], [e[5], e[6], e[8]], [e[7], e[8], e[9]]])
        hr = R @ h
        IA = R @ I @ R.T + m * (p @ p * np.eye(3) - np.outer(p, p)) + 2 * (p @ hr) * np.eye(3) \
            - np.outer(p, hr) - np.outer(hr, p)
        hA = hr + m * p
        X[:, k] = [m, *hA, IA[0, 0], IA[0, 1], IA[1, 1], IA[0, 2], IA[1, 2], IA[2, 2]]
    return X


def _rodrigues(axis: np.ndarray, s: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Rot(axis, θ) for N angles given by s = sin θ, c = cos θ: (N, 3, 3)."""
    x, y, z = axis
    v = 1.0 - c
    R = np.empty(s.shape + (3, 3))
    R[:, 0, 0], R[:, 0, 1], R[:, 0, 2] = c + x * x * v, x * y * v - z * s, x * z * v + y * s
    R[:, 1, 0], R[:, 1, 1], R[:, 1, 2] = y * x * v + z * s, c + y * y * v, y * z * v - x * s
    R[:, 2, 0], R[:, 2, 1], R[:, 2, 2] = z * x * v - y * s, z * y * v + x * s, c + z * z * v
    return R


def _skew(a: np.ndarray) -> np.ndarray:
    """S(a) with S(a) b = a × b, for a (N, 3): (N, 3, 3)."""
    S = np.zeros(a.shape[:-1] + (3, 3))
    S[..., 0, 1], S[..., 0, 2] = -a[..., 2], a[..., 1]
    S[..., 1, 0], S[..., 1, 2] = a[..., 2], -a[..., 0]
    S[..., 2, 0], S[..., 2, 1] = -a[..., 1], a[..., 0]
    return S


def _dot_inertia(w: np.ndarray) -> np.ndarray:
    """L(w) (N, 3, 6) with L(w) (I_xx, I_xy, I_yy, I_xz, I_yz, I_zz) = I w."""
    L = np.zeros(w.shape[:-1] + (3, 6))
    wx, wy, wz = w[..., 0], w[..., 1], w[..., 2]
    L[..., 0, 0], L[..., 0, 1], L[..., 0, 3] = wx, wy, wz
    L[..., 1, 1], L[..., 1, 2], L[..., 1, 4] = wx, wy, wz
    L[..., 2, 3], L[..., 2, 4], L[..., 2, 5] = wx, wy, wz
    return L


class Regressor:
    """The regressor of a :class:`RobotModel` (see the module docstring for the convention).

    Attributes:
        model: the model (its gravity is used; its payload, if any, is merged into the carrying body).
        n: actuated joints; nb: bodies (moving joints); n_params = 10 nb.
        body_names: (nb,) the child link of each moving joint (the link that names the body).
        parameter_names: (10 nb,) ``"<body>.<name>"`` with names from :data:`PARAMETER_NAMES`.
        table: the :class:`JointTable` (parents, transforms, axes, mimic map, merged inertias).
    """

    def __init__(self, model: RobotModel):
        self.model = model
        self.table = JointTable(model)
        self.n = model.n
        self.nb = len(model.moving_joint_names)
        self.n_params = 10 * self.nb
        d = model.description
        self.body_names = tuple(d.joints[jn].child for jn in model.moving_joint_names)
        self.parameter_names = tuple(f"{b}.{p}" for b in self.body_names for p in PARAMETER_NAMES)

    # ------------------------------------------------------------------ parameters
    def parameters(self) -> np.ndarray:
        """pi (10 nb,) of the model (its URDF inertials, welded links and payload merged per body)."""
        t = self.table
        return np.concatenate([inertial_to_parameters(t.mass[i], t.com[i], t.I_c[i]) for i in range(self.nb)])

    def link_transform(self, link: str) -> tuple[int, np.ndarray]:
        """(body index, ᵇT_link (4, 4)) of a link: the moving body it is welded to and its pose in {body}.

        Raises:
            ValueError: the link is not in the model, or is the root or welded to it (never moves).
        """
        m = self.model
        d = m.description
        if link not in d.links:
            raise ValueError(f"link '{link}' is not in the URDF {d.source}")
        T = np.eye(4)
        cur = link
        moving = {jn: i for i, jn in enumerate(m.moving_joint_names)}
        while cur in d.parent_joint:
            j = d.joints[d.parent_joint[cur]]
            if j.name in moving:
                return moving[j.name], T
            T = j.origin @ j.motion(m.held_joints.get(j.name, 0.0)) @ T
            cur = j.parent
        raise ValueError(f"link '{link}' is fixed to the root link '{cur}': its load is not seen by any joint")

    # ------------------------------------------------------------------ regressors
    def check_array(self, a, name: str, N: int | None = None) -> np.ndarray:
        """``a`` as a float (N, n) array (a single (n,) state becomes (1, n)).

        Raises ValueError naming ``name`` on a wrong shape, and the sample and joint of a non-finite value.
        """
        x = np.asarray(a, dtype=float)
        if x.ndim == 1:
            x = x[None, :]
        if x.ndim != 2 or x.shape[1] != self.n or (N is not None and x.shape[0] != N):
            raise ValueError(f"{name}: expected shape (N, {self.n}) in model.joint_names order, got {np.shape(a)}")
        if not np.all(np.isfinite(x)):
            bad = np.argwhere(~np.isfinite(x))[0]
            raise ValueError(f"{name}[{bad[0]}, {bad[1]}] ({self.model.joint_names[bad[1]]}) is not finite")
        return x

    def inertial(self, q, qd, qdd, gravity: bool = True) -> np.ndarray:
        """Y (N, n, 10 nb) with tau = Y pi (N·m or N); q, qd, qdd (N, n) rad, rad/s, rad/s² (m for prismatic).

        ``gravity=False`` leaves gravity out (base acceleration 0). Raises ValueError on a bad shape or a
        non-finite input (naming the array, sample and joint).
        """
        q = self.check_array(q, "q")
        N = q.shape[0]
        qd = self.check_array(qd, "qd", N)
        qdd = self.check_array(qdd, "qdd", N)
        t = self.table
        nb = self.nb
        qb = q[:, t.src] * t.mult + t.offset
        qdb = qd[:, t.src] * t.mult
        qddb = qdd[:, t.src] * t.mult
        a0 = -np.asarray(self.model.gravity, dtype=float) if gravity else np.zeros(3)
        R = np.empty((nb, N, 3, 3))
        p = np.empty((nb, N, 3))
        w = np.empty((nb, N, 3))
        wd = np.empty((nb, N, 3))
        vd = np.empty((nb, N, 3))
        A = np.empty((nb, N, 6, 10))  # wrench (f; n) at the origin of {i}, per parameter of body i
        for i in range(nb):
            z = t.axis[i]
            if t.jtype[i] == PRISMATIC:
                R[i] = t.R_T[i]
                p[i] = t.p_T[i] + (t.R_T[i] @ z)[None, :] * qb[:, i, None]
            else:
                R[i] = t.R_T[i] @ _rodrigues(z, np.sin(qb[:, i]), np.cos(qb[:, i]))
                p[i] = t.p_T[i]
            lam = t.parent[i]
            if lam < 0:
                wl = np.zeros((N, 3))
                dl = np.zeros((N, 3))
                al = np.broadcast_to(a0, (N, 3))
            else:
                wl, dl = w[lam], wd[lam]
                al = np.cross(dl, p[i]) + np.cross(wl, np.cross(wl, p[i])) + vd[lam]
            RtT = np.swapaxes(R[i], 1, 2)
            wi = np.einsum("nab,nb->na", RtT, wl)
            di = np.einsum("nab,nb->na", RtT, dl)
            vi = np.einsum("nab,nb->na", RtT, al)
            zq = z[None, :] * qdb[:, i, None]
            if t.jtype[i] == PRISMATIC:
                vi = vi + 2.0 * np.cross(wi, zq) + z[None, :] * qddb[:, i, None]
            else:
                di = di + np.cross(wi, zq) + z[None, :] * qddb[:, i, None]
                wi = wi + zq
            w[i], wd[i], vd[i] = wi, di, vi
            Sw, Sd = _skew(wi), _skew(di)
            Ai = np.zeros((N, 6, 10))
            Ai[:, :3, 0] = vi
            Ai[:, :3, 1:4] = Sd + Sw @ Sw
            Ai[:, 3:, 1:4] = -_skew(vi)
            Ai[:, 3:, 4:] = _dot_inertia(di) + Sw @ _dot_inertia(wi)
            A[i] = Ai
        Y = np.zeros((N, self.n, self.n_params))
        for i in range(nb):
            F = A[i]  # carried from body i down to the root, expressed in the frame of body j
            j = i
            while True:
                zj = t.axis[j]
                row = zj @ (F[:, :3] if t.jtype[j] == PRISMATIC else F[:, 3:])  # (N, 10)
                Y[:, t.src[j], 10 * i:10 * i + 10] += t.mult[j] * row
                lam = t.parent[j]
                if lam < 0:
                    break
                Rf = R[j] @ F[:, :3]
                Rn = R[j] @ F[:, 3:]
                F = np.concatenate([Rf, Rn + _skew(p[j]) @ Rf], axis=1)
                j = lam
        return Y

    def friction(self, qd, coulomb_velocity: float = 0.0) -> np.ndarray:
        """(N, n, 3 n): tau_f = Y_f phi with phi[3 j : 3 j + 3] = (fc, fv, fo) of joint j, i.e.
        fc·s(qd) + fv·qd + fo (N·m, N·m·s/rad, N·m; Coulomb + viscous + constant offset), with
        s = sign when ``coulomb_velocity`` (v_s, rad/s or m/s) is 0, else tanh(qd / v_s)."""
        qd = self.check_array(qd, "qd")
        N, n = qd.shape
        v_s = float(coulomb_velocity)
        Yf = np.zeros((N, n, 3 * n))
        for j in range(n):
            Yf[:, j, 3 * j] = np.tanh(qd[:, j] / v_s) if v_s > 0 else np.sign(qd[:, j])
            Yf[:, j, 3 * j + 1] = qd[:, j]
            Yf[:, j, 3 * j + 2] = 1.0
        return Yf

    def armature(self, qdd) -> np.ndarray:
        """(N, n, n): rotor inertia reflected to joint j (kg·m²), tau_a = Ia_j · qdd_j."""
        qdd = self.check_array(qdd, "qdd")
        N, n = qdd.shape
        Ya = np.zeros((N, n, n))
        Ya[:, np.arange(n), np.arange(n)] = qdd
        return Ya
