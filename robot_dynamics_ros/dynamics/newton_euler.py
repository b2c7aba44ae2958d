"""NewtonEulerDynamics: the in-package, batched recursive Newton–Euler algorithm (RNEA).

Built from our own reading of the URDF (:class:`~robot_dynamics_ros.description.RobotDescription`), never
from Pinocchio's model, so that it is an independent check of :class:`PinocchioDynamics`. It evaluates
many states at once — arrays (N, n) in, (N, n) out — which is what the TOPP-RA retiming needs to build
its torque constraints along a whole path.

The algorithm is the two-pass recursion of the reference text (seeds 002 §6-3, "牛顿—欧拉递推"), which is
Craig, *Introduction to Robotics* (3rd ed., 2005) eqs. 6.45–6.53 and, in spatial-vector form, Featherstone,
*Rigid Body Dynamics Algorithms* (2008) Table 5.1. Every body i has its frame {i} at its joint (the child
link frame of the URDF joint); ``R`` = ⁱ⁻¹Rᵢ is the orientation of {i} in its parent body frame and ``p`` =
ⁱ⁻¹Pᵢ the position of its origin; ``z`` is the joint axis in {i}; ``c`` = ⁱP_Ci the centre of mass of
the body in {i}; ``I_c`` its inertia about the centre of mass, axes of {i}.

Outward pass, i = 1 … n (velocities and accelerations, eqs. 6.45–6.50)::

    revolute:   ω_i  = Rᵀ ω_λ + q̇_i z
                ω̇_i  = Rᵀ ω̇_λ + (Rᵀ ω_λ) × q̇_i z + q̈_i z
                v̇_i  = Rᵀ (ω̇_λ × p + ω_λ × (ω_λ × p) + v̇_λ)
    prismatic:  ω_i  = Rᵀ ω_λ,   ω̇_i = Rᵀ ω̇_λ
                v̇_i  = Rᵀ (ω̇_λ × p + ω_λ × (ω_λ × p) + v̇_λ) + 2 ω_i × ḋ_i z + d̈_i z
    v̇_Ci = ω̇_i × c + ω_i × (ω_i × c) + v̇_i
    F_i  = m v̇_Ci                          (Newton)
    N_i  = I_c ω̇_i + ω_i × I_c ω_i         (Euler)

with λ the parent body, and the base at rest with ``v̇_0 = −g`` (gravity folded in as a base acceleration).
Inward pass, i = n … 1 (forces, eqs. 6.51–6.53); a body may have several children (trees)::

    f_i = F_i + Σ_children R_j f_j
    n_i = N_i + c × F_i + Σ_children (R_j n_j + p_j × R_j f_j)
    τ_i = n_i · z  (revolute)      τ_i = f_i · z  (prismatic)

Fixed joints and held joints are folded into constant transforms; links welded together are merged
into one body (parallel-axis theorem); a payload is merged into the body carrying its link. Mimic joints
run as bodies of their own with ``q_i = k·q_master + b`` and give their torque back to the master,
``τ_master += k·τ_i`` (virtual work).

Rotor inertia (``model.armature``, kg·m² reflected to the joint) is a diagonal term of the actuated
joints: ``M += diag(armature)`` and ``tau += armature · qdd``, added after the kernels (gravity and
C(q, q̇) q̇ do not involve it).

M(q) comes from the composite-rigid-body algorithm (Featherstone 2008 Table 6.2, written with the same
3-vectors), or, as an independent check, column by column (Walker & Orin 1982, method 1): column j is
the RNEA torque for q̇ = 0, q̈ = e_j, g = 0. C(q, q̇) q̇ is the RNEA torque for q̈ = 0, g = 0.

The per-body constants are the :class:`~robot_dynamics_ros.dynamics.kinematic_tree.JointTable`; the kernels
(:mod:`robot_dynamics_ros.dynamics.rnea_kernels`) are compiled with numba (``@njit(cache=True)``) on first use (or :meth:`NewtonEulerDynamics.warmup`),
with explicit loops over samples and bodies; they allocate nothing per sample and release the GIL
(``nogil=True``), so a service thread computing a long path does not stall the other threads.

For the momentum observer, :func:`~robot_dynamics_ros.dynamics.momentum_terms.momentum_terms_one` gives g(q), p = M(q) q̇ and Cᵀ(q, q̇) q̇ of one state
in one outward and one inward pass over a per-body table (:func:`~robot_dynamics_ros.dynamics.momentum_terms.momentum_terms_buffers`), from the
composite momentum of each subtree and Ṡ = v × S (its docstring has the derivation); no matrix is built.
"""
from __future__ import annotations

import numpy as np

from robot_dynamics_ros.dynamics import inputs
from robot_dynamics_ros.dynamics.kinematic_tree import JointTable
from robot_dynamics_ros.dynamics.momentum_terms import MOMENTUM_WORK_ROWS, momentum_terms_buffers, momentum_terms_one
from robot_dynamics_ros.dynamics.rnea_kernels import crba_batch, mass_matrix_batch, path_terms_batch, rnea_batch
from robot_dynamics_ros.model import RobotModel


class NewtonEulerDynamics:
    """Batched inverse dynamics of a :class:`RobotModel` (in-package RNEA, see the module docstring).

    Every method takes arrays (N, n) — N states, columns in ``model.joint_names`` order — and returns
    (N, n) (``mass_matrix``: (N, n, n)); a single state (n,) gives (n,) (``mass_matrix``: (n, n)).
    Units: rad, rad/s, rad/s² (m, m/s, m/s² for prismatic joints) in; N·m (N) out.
    Gravity and payload follow ``model`` (the table is rebuilt when ``model.version`` changes).

    Raises (all methods): ValueError when an array has the wrong shape or a non-finite entry (the message
    names the argument, the entry and its joint: ``"qd[0, 3] (panda_joint4) is NaN"``), or when finite
    inputs overflow.
    """

    def __init__(self, model: RobotModel):
        self.model = model
        self.n = model.n
        self._version = -1
        self._sync()

    def _sync(self) -> None:
        self.table = JointTable(self.model)
        self._fbuf, self._ibuf = self.table.packed()
        self._a0 = np.ascontiguousarray(-self.model.gravity)  # base acceleration −g (gravity trick)
        self._zero3 = np.zeros(3)
        arm = np.asarray(self.model.armature, dtype=float)
        self._armature = arm.copy() if np.any(arm) else None  # None: the kernels' result is the answer
        self._version = self.model.version

    def warmup(self) -> None:
        """Compile (or load from the on-disk cache) the numba kernels now rather than on first use."""
        z = np.zeros((1, self.n))
        self.rnea(z, z, z)
        self.mass_matrix(z)
        self.mass_matrix(z, method="columns")

    def _check(self, x, name: str, rows: int | None = None) -> np.ndarray:
        return inputs.batch(x, self.n, name, self.model.joint_names, rows)

    @staticmethod
    def _check_finite(out: np.ndarray) -> None:
        """Finite inputs can still overflow (e.g. |qd| near 1e200): refuse a non-finite result."""
        if not np.isfinite(out.sum()):
            raise ValueError("non-finite result (overflow) for finite inputs")

    def _run(self, q, qd, qdd, gravity: bool) -> np.ndarray:
        if self._version != self.model.version:
            self._sync()
        single = np.ndim(q) == 1
        q2 = self._check(q, "q")
        qd2 = self._check(qd, "qd", q2.shape[0]) if qd is not None else q2
        qdd2 = self._check(qdd, "qdd", q2.shape[0]) if qdd is not None else q2
        tau = np.empty(q2.shape)
        rnea_batch(self._fbuf, self._ibuf, q2, qd2, qdd2, self._a0 if gravity else self._zero3,
                    qd is not None, qdd is not None, tau)
        if qdd is not None and self._armature is not None:
            tau += self._armature * qdd2
        self._check_finite(tau)
        return tau[0] if single else tau

    def path_torque_terms(self, q, dq, ddq, idx=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """a, b, c of τ = a s̈ + b ṡ² + c along a path q(s) (Pham 2014 / Pham & Pham 2018, eq. 1 of
        TOPP-RA): a = M(q) q', b = M(q) q'' + C(q, q') q', c = g(q), with M including ``model.armature``.

        One compiled pass per state: the body transforms once, the two zero-velocity recursions for a and c
        sharing them, the full recursion for b.

        Args:
            q, dq, ddq: (P, n) path points q(s), q'(s), q''(s) (rad, rad per unit s, rad per unit s²); not
                checked (the retimer builds them from a checked path).
            idx: (E,) int rows of q to evaluate; None: all P.
        Returns:
            a, b, c: (E, n) each (N·m per unit s̈, N·m per unit ṡ², N·m).
        Raises:
            ValueError: a non-finite term (NaN or inf in the path, or an overflow).
        """
        if self._version != self.model.version:
            self._sync()
        idx = np.arange(q.shape[0]) if idx is None else np.ascontiguousarray(idx, dtype=np.int64)
        tau = np.empty((3 * idx.shape[0], q.shape[1]))
        if not path_terms_batch(self._fbuf, self._ibuf, self._a0, q, dq, ddq, idx, tau):
            raise ValueError("path torque terms: non-finite (NaN or inf in the path?)")
        e = idx.shape[0]
        c, a, b = tau[:e], tau[e:2 * e], tau[2 * e:]
        if self._armature is not None:
            a += self._armature * dq[idx]
            b += self._armature * ddq[idx]
        return a, b, c

    def rnea(self, q, qd, qdd) -> np.ndarray:
        """Inverse dynamics tau = M(q) qdd + C(q, qd) qd + g(q), (N, n) N·m (Craig 6.45–6.53; Featherstone Table 5.1);
        M includes ``diag(model.armature)``."""
        return self._run(q, qd, qdd, gravity=True)

    def gravity(self, q) -> np.ndarray:
        """Gravity torque g(q) = RNEA(q, 0, 0), (N, n) N·m."""
        return self._run(q, None, None, gravity=True)

    def coriolis_qd(self, q, qd) -> np.ndarray:
        """Velocity-product torque C(q, qd) qd = RNEA(q, qd, 0) with g = 0, (N, n) N·m."""
        return self._run(q, qd, None, gravity=False)

    def nonlinear_effects(self, q, qd) -> np.ndarray:
        """C(q, qd) qd + g(q) = RNEA(q, qd, 0), (N, n) N·m."""
        return self._run(q, qd, None, gravity=True)

    def mass_matrix(self, q, method: str = "crba") -> np.ndarray:
        """Joint-space inertia M(q), (N, n, n) kg·m², symmetric positive definite.

        Args:
            q: (N, n) or (n,) rad/m.
            method: ``"crba"`` (composite-rigid-body algorithm, Featherstone 2008 Table 6.2; the default,
                O(n·depth)) or ``"columns"`` (column j = RNEA(q, 0, e_j) with g = 0, Walker & Orin 1982
                method 1; n RNEA passes). The two are independent and agree to rounding.
        """
        if method not in ("crba", "columns"):
            raise ValueError(f"method: expected 'crba' or 'columns', got {method!r}")
        if self._version != self.model.version:
            self._sync()
        single = np.ndim(q) == 1
        q2 = self._check(q, "q")
        M = np.empty((q2.shape[0], self.n, self.n))
        (crba_batch if method == "crba" else mass_matrix_batch)(self._fbuf, self._ibuf, q2, M)
        if self._armature is not None:
            idx = np.arange(self.n)
            M[:, idx, idx] += self._armature
        self._check_finite(M)
        return M[0] if single else M

    def momentum_terms(self, q, qd) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(g, p, Cᵀ(q, qd) qd)`` of one state, each (n,): g(q) N·m, the generalized momentum p = M(q) qd
        (M with ``diag(model.armature)``; kg·m²/s) and Cᵀ qd N·m for any C with Ṁ = C + Cᵀ — one O(n) sweep
        (:func:`~robot_dynamics_ros.dynamics.momentum_terms.momentum_terms_one`), no mass or Coriolis matrix built.

        Raises:
            ValueError: q or qd of the wrong shape or not finite (naming the entry and joint), or an overflow.
        """
        q1 = np.ascontiguousarray(inputs.vector(q, self.n, "q", self.model.joint_names))
        qd1 = np.ascontiguousarray(inputs.vector(qd, self.n, "qd", self.model.joint_names))
        if self._version != self.model.version or getattr(self, "_momentum", (None,))[0] != self._version:
            self._sync()
            self._momentum = (self._version, *momentum_terms_buffers(self.model))
        _, tab, itab, armature = self._momentum
        out = np.empty((3, self.n))
        momentum_terms_one(tab, itab, q1, qd1, armature, np.empty((MOMENTUM_WORK_ROWS, itab.shape[0])), out)
        self._check_finite(out)
        return out[0], out[1], out[2]
