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

The kernels are compiled with numba (``@njit(cache=True)``) on first use (or :meth:`NewtonEulerDynamics.warmup`),
with explicit loops over samples and bodies; they allocate nothing per sample and release the GIL
(``nogil=True``), so a service thread computing a long path does not stall the other threads.

For the momentum observer, :func:`momentum_terms_one` gives g(q), p = M(q) q̇ and Cᵀ(q, q̇) q̇ of one state
in one outward and one inward pass over a per-body table (:func:`momentum_terms_buffers`), from the
composite momentum of each subtree and Ṡ = v × S (its docstring has the derivation); no matrix is built.
"""
from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
from numba import njit

from robot_dynamics_ros.dynamics import inputs
from robot_dynamics_ros.model import RobotModel

REVOLUTE, PRISMATIC = 0, 1
#: LLVM may fuse multiply-adds and reassociate sums (no "nnan"/"ninf": NaN inputs still give NaN out)
_FASTMATH = {"contract", "reassoc"}


# --------------------------------------------------------------------------------------------------
# the joint table (built once per model version, in Python)
# --------------------------------------------------------------------------------------------------
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
        offset (1); int layout: parent, jtype, src. :func:`_unpack` restores the named views.
        """
        fbuf = np.concatenate([self.R_T.ravel(), self.p_T.ravel(), self.axis.ravel(), self.mass,
                               self.com.ravel(), self.I_c.ravel(), self.mult, self.offset])
        ibuf = np.concatenate([self.parent, self.jtype, self.src]).astype(np.int64)
        return np.ascontiguousarray(fbuf), np.ascontiguousarray(ibuf)


# --------------------------------------------------------------------------------------------------
# numba kernels
# --------------------------------------------------------------------------------------------------
# sin and cos of the joint angles: libm's take ~48 ns per pair here, over half of the whole RNEA. This
# branch-free version vectorizes (about 3 ns per pair) and is accurate to 1-2 ulp for |x| ≤ 2^19 · π/2:
# Cody–Waite reduction x = k·π/2 + r, |r| ≤ π/4, with π/2 split as P1 + P1T where P1 has 33 significant
# bits (so k·P1 is exact), then the Taylor series of sin r to r¹⁷ and cos r to r¹⁶ (remainder below
# 1e-19 on |r| ≤ π/4), then the quadrant k mod 4. Larger |x| fall back to libm.
_TWO_OVER_PI = 2.0 / math.pi
_PIO2_1 = math.floor(math.pi / 2 * 2.0**32) / 2.0**32  # π/2 to 33 bits: k·_PIO2_1 is exact for |k| < 2^20
_PIO2_1T = float(Decimal("1.5707963267948966192313216916397514420985846996875529")
                 - Decimal(_PIO2_1))  # π/2 − _PIO2_1 (Decimal: exact difference, then rounded once)
_SINCOS_MAX = 2.0**19 * math.pi / 2


@njit(cache=True, nogil=True)  # no fastmath: the reduction relies on the evaluation order written here
def _sincos_flat(x, S, C):
    """S[j], C[j] = sin x[j], cos x[j] for flat arrays (see the comment above for the method)."""
    for j in range(x.shape[0]):
        xj = x[j]
        k = np.rint(xj * _TWO_OVER_PI)
        r = (xj - k * _PIO2_1) - k * _PIO2_1T
        r2 = r * r
        s = r * (1.0 + r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (
            1.0 / 362880.0 + r2 * (-1.0 / 39916800.0 + r2 * (1.0 / 6227020800.0 + r2 * (
                -1.0 / 1307674368000.0 + r2 * (1.0 / 355687428096000.0)))))))))
        c = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (
            -1.0 / 3628800.0 + r2 * (1.0 / 479001600.0 + r2 * (-1.0 / 87178291200.0 + r2 * (
                1.0 / 20922789888000.0))))))))
        q = np.int64(k) & 3  # quadrant: (sin, cos) of x = (s, c), (c, −s), (−s, −c), (−c, s)
        ss = c if (q & 1) else s
        cc = s if (q & 1) else c
        S[j] = ss if (q & 2) == 0 else -ss
        C[j] = cc if ((q + 1) & 2) == 0 else -cc


@njit(cache=True, nogil=True)
def _body_positions(q, src, mult, offset):
    """Joint position of every body, q_b = mult · q[src] + offset, with its sine and cosine: 3 × (N, nb)."""
    N = q.shape[0]
    nb = src.shape[0]
    qb = np.empty((N, nb))
    S = np.empty((N, nb))
    C = np.empty((N, nb))
    big = False
    for k in range(N):
        for i in range(nb):
            v = mult[i] * q[k, src[i]] + offset[i]
            qb[k, i] = v
            if not abs(v) <= _SINCOS_MAX:
                big = True
    if big:
        for k in range(N):
            for i in range(nb):
                S[k, i] = np.sin(qb[k, i])
                C[k, i] = np.cos(qb[k, i])
    else:
        _sincos_flat(qb.reshape(N * nb), S.reshape(N * nb), C.reshape(N * nb))
    return qb, S, C


@njit(cache=True, inline="always", fastmath=_FASTMATH)
def _cross(ax, ay, az, bx, by, bz):
    """a × b for 3-vectors given as scalars (returns a tuple: no allocation)."""
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@njit(cache=True, inline="always", fastmath=_FASTMATH)
def _rot(R, i, x, y, z):
    """R_i v for R (nb, 3, 3)."""
    return (R[i, 0, 0] * x + R[i, 0, 1] * y + R[i, 0, 2] * z, R[i, 1, 0] * x + R[i, 1, 1] * y + R[i, 1, 2] * z,
            R[i, 2, 0] * x + R[i, 2, 1] * y + R[i, 2, 2] * z)


@njit(cache=True, inline="always", fastmath=_FASTMATH)
def _rot_t(R, i, x, y, z):
    """R_iᵀ v for R (nb, 3, 3)."""
    return (R[i, 0, 0] * x + R[i, 1, 0] * y + R[i, 2, 0] * z, R[i, 0, 1] * x + R[i, 1, 1] * y + R[i, 2, 1] * z,
            R[i, 0, 2] * x + R[i, 1, 2] * y + R[i, 2, 2] * z)


@njit(cache=True, inline="always", fastmath=_FASTMATH)
def _to_parent(R, p, i, lam, fx, fy, fz, nx, ny, nz, f, nt):
    """The inward step of body i's force f_i and moment n_i (its axes) onto its parent λ: f_λ += R f_i,
    n_λ += R n_i + p × (R f_i) (Craig 2005 eqs. 6.51–6.52)."""
    Rfx, Rfy, Rfz = _rot(R, i, fx, fy, fz)
    Rnx, Rny, Rnz = _rot(R, i, nx, ny, nz)
    cx, cy, cz = _cross(p[i, 0], p[i, 1], p[i, 2], Rfx, Rfy, Rfz)
    f[lam, 0] += Rfx
    f[lam, 1] += Rfy
    f[lam, 2] += Rfz
    nt[lam, 0] += Rnx + cx
    nt[lam, 1] += Rny + cy
    nt[lam, 2] += Rnz + cz


@njit(cache=True, inline="always", fastmath=_FASTMATH)
def _along_axis(revolute, zx, zy, zz, r, wx, wy, wz, vx, vy, vz):
    """A joint's rate r along its axis z added to a body's (angular, linear) pair: to the angular part for a
    revolute joint, to the linear part for a prismatic one."""
    if revolute:
        return wx + zx * r, wy + zy * r, wz + zz * r, vx, vy, vz
    return wx, wy, wz, vx + zx * r, vy + zy * r, vz + zz * r


@njit(cache=True, inline="always", fastmath=_FASTMATH)
def _joint_transform(R_T, p_T, axis, jtype, i, qi, s, c, R, p):
    """Write R[i] = ⁱ⁻¹Rᵢ and p[i] = ⁱ⁻¹Pᵢ of body i at joint position qi (rad or m), s, c = sin qi, cos qi.

    Revolute: R = R_T · Rot(z, qi) (Rodrigues' formula), p = p_T. Prismatic: R = R_T, p = p_T + R_T z qi.
    """
    x, y, w = axis[i, 0], axis[i, 1], axis[i, 2]
    if jtype[i] == 0:
        v = 1.0 - c
        r00, r01, r02 = c + x * x * v, x * y * v - w * s, x * w * v + y * s
        r10, r11, r12 = y * x * v + w * s, c + y * y * v, y * w * v - x * s
        r20, r21, r22 = w * x * v - y * s, w * y * v + x * s, c + w * w * v
        for a in range(3):
            t0, t1, t2 = R_T[i, a, 0], R_T[i, a, 1], R_T[i, a, 2]
            R[i, a, 0] = t0 * r00 + t1 * r10 + t2 * r20
            R[i, a, 1] = t0 * r01 + t1 * r11 + t2 * r21
            R[i, a, 2] = t0 * r02 + t1 * r12 + t2 * r22
            p[i, a] = p_T[i, a]
    else:
        for a in range(3):
            t0, t1, t2 = R_T[i, a, 0], R_T[i, a, 1], R_T[i, a, 2]
            R[i, a, 0], R[i, a, 1], R[i, a, 2] = t0, t1, t2
            p[i, a] = p_T[i, a] + (t0 * x + t1 * y + t2 * w) * qi


@njit(cache=True, inline="always", fastmath=_FASTMATH)
def _rnea_one(parent, axis, jtype, mass, com, I_c, R, p, qd_b, qdd_b, a0x, a0y, a0z, w, wd, vd, f, nt, tau_b):
    """One RNEA (both passes) for one state, given the body transforms R (nb, 3, 3) and p (nb, 3).

    qd_b, qdd_b (nb,): joint rates of every body; (a0x, a0y, a0z): base linear acceleration (= −g).
    w, wd, vd, f, nt (nb, 3): work arrays for ω_i, ω̇_i, v̇_i, f_i, n_i.
    Output: tau_b (nb,), the joint torque (N·m) or force (N) of every body.
    """
    nb = parent.shape[0]
    # ---- outward pass, i = 1 … n: ω_i, ω̇_i, v̇_i, then F_i and N_i (Craig 6.45–6.50) ----
    for i in range(nb):
        lam = parent[i]
        zx, zy, zz = axis[i, 0], axis[i, 1], axis[i, 2]
        if lam < 0:  # the fixed base: ω_0 = ω̇_0 = 0, v̇_0 = −g
            wlx = wly = wlz = 0.0
            dlx = dly = dlz = 0.0
            ax, ay, az = a0x, a0y, a0z
        else:
            wlx, wly, wlz = w[lam, 0], w[lam, 1], w[lam, 2]
            dlx, dly, dlz = wd[lam, 0], wd[lam, 1], wd[lam, 2]
            px, py, pz = p[i, 0], p[i, 1], p[i, 2]
            # acceleration of origin i in parent axes: ω̇_λ × p + ω_λ × (ω_λ × p) + v̇_λ
            cx, cy, cz = _cross(wlx, wly, wlz, px, py, pz)
            ex, ey, ez = _cross(wlx, wly, wlz, cx, cy, cz)
            gx, gy, gz = _cross(dlx, dly, dlz, px, py, pz)
            ax, ay, az = gx + ex + vd[lam, 0], gy + ey + vd[lam, 1], gz + ez + vd[lam, 2]
        # into frame i: Rᵀ ω_λ, Rᵀ ω̇_λ, Rᵀ (acceleration of origin i)
        wx = R[i, 0, 0] * wlx + R[i, 1, 0] * wly + R[i, 2, 0] * wlz
        wy = R[i, 0, 1] * wlx + R[i, 1, 1] * wly + R[i, 2, 1] * wlz
        wz = R[i, 0, 2] * wlx + R[i, 1, 2] * wly + R[i, 2, 2] * wlz
        dx = R[i, 0, 0] * dlx + R[i, 1, 0] * dly + R[i, 2, 0] * dlz
        dy = R[i, 0, 1] * dlx + R[i, 1, 1] * dly + R[i, 2, 1] * dlz
        dz = R[i, 0, 2] * dlx + R[i, 1, 2] * dly + R[i, 2, 2] * dlz
        vx = R[i, 0, 0] * ax + R[i, 1, 0] * ay + R[i, 2, 0] * az
        vy = R[i, 0, 1] * ax + R[i, 1, 1] * ay + R[i, 2, 1] * az
        vz = R[i, 0, 2] * ax + R[i, 1, 2] * ay + R[i, 2, 2] * az
        qd_i, qdd_i = qd_b[i], qdd_b[i]
        kx, ky, kz = _cross(wx, wy, wz, zx, zy, zz)  # (Rᵀ ω_λ) × z
        if jtype[i] == 0:  # revolute: ω̇_i = Rᵀ ω̇_λ + (Rᵀ ω_λ) × q̇ z + q̈ z ;  ω_i = Rᵀ ω_λ + q̇ z
            dx += kx * qd_i + zx * qdd_i
            dy += ky * qd_i + zy * qdd_i
            dz += kz * qd_i + zz * qdd_i
            wx += zx * qd_i
            wy += zy * qd_i
            wz += zz * qd_i
        else:  # prismatic: v̇_i += 2 ω_i × ḋ z + d̈ z
            vx += 2.0 * kx * qd_i + zx * qdd_i
            vy += 2.0 * ky * qd_i + zy * qdd_i
            vz += 2.0 * kz * qd_i + zz * qdd_i
        w[i, 0], w[i, 1], w[i, 2] = wx, wy, wz
        wd[i, 0], wd[i, 1], wd[i, 2] = dx, dy, dz
        vd[i, 0], vd[i, 1], vd[i, 2] = vx, vy, vz
        # v̇_Ci = ω̇_i × c + ω_i × (ω_i × c) + v̇_i ;  F_i = m v̇_Ci   (Newton)
        ccx, ccy, ccz = com[i, 0], com[i, 1], com[i, 2]
        ux, uy, uz = _cross(wx, wy, wz, ccx, ccy, ccz)
        ux, uy, uz = _cross(wx, wy, wz, ux, uy, uz)
        sx, sy, sz = _cross(dx, dy, dz, ccx, ccy, ccz)
        m = mass[i]
        Fx, Fy, Fz = m * (sx + ux + vx), m * (sy + uy + vy), m * (sz + uz + vz)
        f[i, 0], f[i, 1], f[i, 2] = Fx, Fy, Fz
        # N_i = I_c ω̇_i + ω_i × (I_c ω_i)   (Euler); n_i starts as N_i + c × F_i
        Iwx = I_c[i, 0, 0] * wx + I_c[i, 0, 1] * wy + I_c[i, 0, 2] * wz
        Iwy = I_c[i, 1, 0] * wx + I_c[i, 1, 1] * wy + I_c[i, 1, 2] * wz
        Iwz = I_c[i, 2, 0] * wx + I_c[i, 2, 1] * wy + I_c[i, 2, 2] * wz
        gx, gy, gz = _cross(wx, wy, wz, Iwx, Iwy, Iwz)
        hx, hy, hz = _cross(ccx, ccy, ccz, Fx, Fy, Fz)
        nt[i, 0] = I_c[i, 0, 0] * dx + I_c[i, 0, 1] * dy + I_c[i, 0, 2] * dz + gx + hx
        nt[i, 1] = I_c[i, 1, 0] * dx + I_c[i, 1, 1] * dy + I_c[i, 1, 2] * dz + gy + hy
        nt[i, 2] = I_c[i, 2, 0] * dx + I_c[i, 2, 1] * dy + I_c[i, 2, 2] * dz + gz + hz
    # ---- inward pass, i = n … 1: f_i, n_i, τ_i (Craig 6.51–6.53); children come after parents ----
    for i in range(nb - 1, -1, -1):
        fx, fy, fz = f[i, 0], f[i, 1], f[i, 2]
        nx, ny, nz = nt[i, 0], nt[i, 1], nt[i, 2]
        if jtype[i] == 0:  # τ_i = n_i · z (revolute) or f_i · z (prismatic)
            tau_b[i] = nx * axis[i, 0] + ny * axis[i, 1] + nz * axis[i, 2]
        else:
            tau_b[i] = fx * axis[i, 0] + fy * axis[i, 1] + fz * axis[i, 2]
        lam = parent[i]
        if lam >= 0:
            _to_parent(R, p, i, lam, fx, fy, fz, nx, ny, nz, f, nt)


@njit(cache=True, inline="always")
def _unpack(fbuf, ibuf):
    """Named views of the packed joint table (see :meth:`JointTable.packed`)."""
    nb = ibuf.shape[0] // 3
    parent, jtype, src = ibuf[0:nb], ibuf[nb:2 * nb], ibuf[2 * nb:3 * nb]
    o = 0
    R_T = fbuf[o:o + 9 * nb].reshape((nb, 3, 3))
    o += 9 * nb
    p_T = fbuf[o:o + 3 * nb].reshape((nb, 3))
    o += 3 * nb
    axis = fbuf[o:o + 3 * nb].reshape((nb, 3))
    o += 3 * nb
    mass = fbuf[o:o + nb]
    o += nb
    com = fbuf[o:o + 3 * nb].reshape((nb, 3))
    o += 3 * nb
    I_c = fbuf[o:o + 9 * nb].reshape((nb, 3, 3))
    o += 9 * nb
    mult = fbuf[o:o + nb]
    offset = fbuf[o + nb:o + 2 * nb]
    return parent, R_T, p_T, axis, jtype, mass, com, I_c, src, mult, offset


@njit(cache=True, inline="always")
def _rnea_workspace(nb):
    """Scratch arrays of :func:`_rnea_one` for ``nb`` bodies: R (nb, 3, 3), p, w, wd, vd, f, nt (nb, 3),
    qd_b, qdd_b (nb,) zeros, tau_b (nb,)."""
    return (np.empty((nb, 3, 3)), np.empty((nb, 3)), np.empty((nb, 3)), np.empty((nb, 3)), np.empty((nb, 3)),
            np.empty((nb, 3)), np.empty((nb, 3)), np.zeros(nb), np.zeros(nb), np.empty(nb))


@njit(cache=True, inline="always")
def _to_joints(src, mult, tau_b, out):
    """Body torques/forces tau_b (nb,) -> joint torques out (n,) by virtual work: τ_master += k τ_i
    (a mimic body i moves k = mult[i] times its master src[i])."""
    for j in range(out.shape[0]):
        out[j] = 0.0
    for i in range(tau_b.shape[0]):
        out[src[i]] += mult[i] * tau_b[i]


@njit(cache=True, nogil=True, fastmath=_FASTMATH)
def _rnea_batch(fbuf, ibuf, q, qd, qdd, a0, use_qd, use_qdd, tau):
    """Batched RNEA: q, qd, qdd (N, n) -> tau (N, n). ``use_qd``/``use_qdd`` False treat them as zero.

    fbuf, ibuf: the packed :class:`JointTable`; a0 (3,): base acceleration (−g, or 0).
    """
    parent, R_T, p_T, axis, jtype, mass, com, I_c, src, mult, offset = _unpack(fbuf, ibuf)
    qb, S, C = _body_positions(q, src, mult, offset)
    N, n = q.shape
    nb = parent.shape[0]
    R, p, w, wd, vd, f, nt, qd_b, qdd_b, tau_b = _rnea_workspace(nb)
    a0x, a0y, a0z = a0[0], a0[1], a0[2]
    for k in range(N):
        for i in range(nb):  # joint values of every body (mimic: k q_master + b)
            _joint_transform(R_T, p_T, axis, jtype, i, qb[k, i], S[k, i], C[k, i], R, p)
            if use_qd:
                qd_b[i] = mult[i] * qd[k, src[i]]
            if use_qdd:
                qdd_b[i] = mult[i] * qdd[k, src[i]]
        _rnea_one(parent, axis, jtype, mass, com, I_c, R, p, qd_b, qdd_b, a0x, a0y, a0z, w, wd, vd, f, nt, tau_b)
        _to_joints(src, mult, tau_b, tau[k])


@njit(cache=True, nogil=True, fastmath=_FASTMATH)
def _mass_matrix_batch(fbuf, ibuf, q, M):
    """Batched M(q): column j = RNEA(q, q̇ = 0, q̈ = e_j, g = 0) (Walker & Orin 1982, method 1)."""
    parent, R_T, p_T, axis, jtype, mass, com, I_c, src, mult, offset = _unpack(fbuf, ibuf)
    qb, S, C = _body_positions(q, src, mult, offset)
    N, n = q.shape
    nb = parent.shape[0]
    R, p, w, wd, vd, f, nt, qd_b, qdd_b, tau_b = _rnea_workspace(nb)
    for k in range(N):
        for i in range(nb):
            _joint_transform(R_T, p_T, axis, jtype, i, qb[k, i], S[k, i], C[k, i], R, p)
        for j in range(n):
            for i in range(nb):
                qdd_b[i] = mult[i] if src[i] == j else 0.0
            _rnea_one(parent, axis, jtype, mass, com, I_c, R, p, qd_b, qdd_b, 0.0, 0.0, 0.0, w, wd, vd, f, nt,
                      tau_b)
            _to_joints(src, mult, tau_b, M[k, :, j])
        for r in range(n):  # exact symmetry (the two triangles agree to rounding)
            for j in range(r + 1, n):
                s = 0.5 * (M[k, r, j] + M[k, j, r])
                M[k, r, j] = s
                M[k, j, r] = s


@njit(cache=True, nogil=True, fastmath=_FASTMATH)
def _crba_batch(fbuf, ibuf, q, M):
    """Batched M(q) by the composite-rigid-body algorithm (Featherstone 2008 Table 6.2, in 3-vector form).

    Each body's inertia about its frame origin is (m, h = m c, I_o = I_c + m(|c|² E − c cᵀ)). Pass 1,
    leaves to root: the composite inertia of body i's subtree, moved into the parent frame
    (m' = m, h' = R h + m p, I_o' = R I_o Rᵀ + m(|p|² E − p pᵀ) + 2(p·h') E − p h'ᵀ − h' pᵀ with h' = R h),
    is added to the parent's. Pass 2: the force F_i = I^c_i S_i that moves the composite of i with unit
    joint rate — revolute S = (ω = z): f = z × h, n = I_o z; prismatic S = (v = z): f = m z, n = h × z —
    gives M_ii = S_i·F_i, and, carried to each ancestor j (f ← R f, n ← R n + p × R f), M_ij = S_j·F.
    """
    parent, R_T, p_T, axis, jtype, mass, com, I_c, src, mult, offset = _unpack(fbuf, ibuf)
    qb, S, C = _body_positions(q, src, mult, offset)
    N, n = q.shape
    nb = parent.shape[0]
    R = np.empty((nb, 3, 3))
    p = np.empty((nb, 3))
    # body inertias about their own origin (constant)
    h0 = np.empty((nb, 3))
    I0 = np.empty((nb, 3, 3))
    for i in range(nb):
        m = mass[i]
        cx, cy, cz = com[i, 0], com[i, 1], com[i, 2]
        cc = cx * cx + cy * cy + cz * cz
        h0[i, 0], h0[i, 1], h0[i, 2] = m * cx, m * cy, m * cz
        for a in range(3):
            for b in range(3):
                I0[i, a, b] = I_c[i, a, b] - m * com[i, a] * com[i, b]
            I0[i, a, a] += m * cc
    mc = np.empty(nb)
    hc = np.empty((nb, 3))
    Ic = np.empty((nb, 3, 3))
    Mb = np.empty((nb, nb))
    RI = np.empty((3, 3))
    for k in range(N):
        for i in range(nb):
            _joint_transform(R_T, p_T, axis, jtype, i, qb[k, i], S[k, i], C[k, i], R, p)
            mc[i] = mass[i]
            for a in range(3):
                hc[i, a] = h0[i, a]
                for b in range(3):
                    Ic[i, a, b] = I0[i, a, b]
        # ---- pass 1: composite inertias, children into parents ----
        for i in range(nb - 1, -1, -1):
            lam = parent[i]
            if lam < 0:
                continue
            m = mc[i]
            px, py, pz = p[i, 0], p[i, 1], p[i, 2]
            hx = R[i, 0, 0] * hc[i, 0] + R[i, 0, 1] * hc[i, 1] + R[i, 0, 2] * hc[i, 2]
            hy = R[i, 1, 0] * hc[i, 0] + R[i, 1, 1] * hc[i, 1] + R[i, 1, 2] * hc[i, 2]
            hz = R[i, 2, 0] * hc[i, 0] + R[i, 2, 1] * hc[i, 1] + R[i, 2, 2] * hc[i, 2]
            mc[lam] += m
            hc[lam, 0] += hx + m * px
            hc[lam, 1] += hy + m * py
            hc[lam, 2] += hz + m * pz
            for a in range(3):  # RI = R I_o
                for b in range(3):
                    RI[a, b] = R[i, a, 0] * Ic[i, 0, b] + R[i, a, 1] * Ic[i, 1, b] + R[i, a, 2] * Ic[i, 2, b]
            pp = px * px + py * py + pz * pz
            ph = px * hx + py * hy + pz * hz
            for a in range(3):
                pa = p[i, a]
                ha = hx if a == 0 else (hy if a == 1 else hz)
                for b in range(3):
                    pb = p[i, b]
                    hb = hx if b == 0 else (hy if b == 1 else hz)
                    Ic[lam, a, b] += (RI[a, 0] * R[i, b, 0] + RI[a, 1] * R[i, b, 1] + RI[a, 2] * R[i, b, 2]
                                      - m * pa * pb - pa * hb - ha * pb)
                Ic[lam, a, a] += m * pp + 2.0 * ph
        # ---- pass 2: F = I^c_i S_i, carried down to the root ----
        for i in range(nb):
            zx, zy, zz = axis[i, 0], axis[i, 1], axis[i, 2]
            if jtype[i] == 0:  # revolute: f = z × h, n = I_o z
                fx, fy, fz = _cross(zx, zy, zz, hc[i, 0], hc[i, 1], hc[i, 2])
                nx = Ic[i, 0, 0] * zx + Ic[i, 0, 1] * zy + Ic[i, 0, 2] * zz
                ny = Ic[i, 1, 0] * zx + Ic[i, 1, 1] * zy + Ic[i, 1, 2] * zz
                nz = Ic[i, 2, 0] * zx + Ic[i, 2, 1] * zy + Ic[i, 2, 2] * zz
                Mb[i, i] = nx * zx + ny * zy + nz * zz
            else:  # prismatic: f = m z, n = h × z
                fx, fy, fz = mc[i] * zx, mc[i] * zy, mc[i] * zz
                nx, ny, nz = _cross(hc[i, 0], hc[i, 1], hc[i, 2], zx, zy, zz)
                Mb[i, i] = fx * zx + fy * zy + fz * zz
            for j in range(nb):  # bodies that are not ancestors of i do not couple with it
                if j != i:
                    Mb[i, j] = 0.0
            j = i
            while parent[j] >= 0:
                # to the parent frame: f ← R f, n ← R n + p × (R f)
                gx = R[j, 0, 0] * fx + R[j, 0, 1] * fy + R[j, 0, 2] * fz
                gy = R[j, 1, 0] * fx + R[j, 1, 1] * fy + R[j, 1, 2] * fz
                gz = R[j, 2, 0] * fx + R[j, 2, 1] * fy + R[j, 2, 2] * fz
                ex, ey, ez = _cross(p[j, 0], p[j, 1], p[j, 2], gx, gy, gz)
                ux = R[j, 0, 0] * nx + R[j, 0, 1] * ny + R[j, 0, 2] * nz + ex
                uy = R[j, 1, 0] * nx + R[j, 1, 1] * ny + R[j, 1, 2] * nz + ey
                uz = R[j, 2, 0] * nx + R[j, 2, 1] * ny + R[j, 2, 2] * nz + ez
                fx, fy, fz, nx, ny, nz = gx, gy, gz, ux, uy, uz
                j = parent[j]
                if jtype[j] == 0:
                    Mb[i, j] = nx * axis[j, 0] + ny * axis[j, 1] + nz * axis[j, 2]
                else:
                    Mb[i, j] = fx * axis[j, 0] + fy * axis[j, 1] + fz * axis[j, 2]
        # ---- fold the bodies onto the actuated joints (mimic: M = Gᵀ M_b G), symmetric ----
        for r in range(n):
            for c in range(n):
                M[k, r, c] = 0.0
        for i in range(nb):
            for j in range(nb):
                v = Mb[i, j] if i >= j else Mb[j, i]  # pass 2 fills M_b[i, ancestor j]: the lower part
                M[k, src[i], src[j]] += mult[i] * mult[j] * v


# --------------------------------------------------------------------------------------------------
# the momentum observer's per-sample terms: g(q), p = M(q) q̇ and Cᵀ(q, q̇) q̇ in one O(n) sweep
# --------------------------------------------------------------------------------------------------
#: rows of the work array (rows, nb) of :func:`momentum_terms_one`
MOMENTUM_WORK_ROWS = 35
#: columns of the per-body table (nb, cols) of :func:`momentum_terms_one` (:func:`momentum_terms_buffers`)
MOMENTUM_TABLE_COLS = 33
# table columns: R_T (9, row-major), p_T (3), axis z (3), mass, com (3), I_c (9, row-major), mult, offset,
# and in every row the base acceleration a0 = −g (3); int table columns: parent, jtype, src
_T_RT, _T_PT, _T_Z, _T_M, _T_C, _T_I, _T_MULT, _T_OFF, _T_A0 = 0, 9, 12, 15, 16, 19, 28, 29, 30
# work rows (one column per body): R (9), p (3), ω (3), v (3), gravity acceleration a (3), L (3), K (3),
# composite mass (1) and first moment h (3), q_b, sin q_b, cos q_b, q̇_b
_W_R, _W_P, _W_W, _W_V, _W_A, _W_L, _W_K, _W_MC, _W_H, _W_Q, _W_S, _W_COS, _W_QD = (
    0, 9, 12, 15, 18, 21, 24, 27, 28, 31, 32, 33, 34)


@njit(cache=True, nogil=True, fastmath=_FASTMATH)
def momentum_terms_one(tab, itab, q, qd, armature, work, out):
    """g(q), p = M(q) q̇ and Cᵀ(q, q̇) q̇ of one state, in one outward and one inward sweep (O(nb)).

    The composite momentum of the subtree of body i, h_i = Σ_{j ⪰ i} I_j v_j (linear L_i, angular K_i about
    the origin of {i}), gives the generalized momentum p_i = S_iᵀ h_i (Featherstone 2008 §7.2: the momentum
    the joint's motion subspace S_i sees). Its rate is ṗ_i = Ṡ_iᵀ h_i + S_iᵀ ḣ_i with Ṡ_i = v_i × S_i (S_i
    is fixed in body i) and S_iᵀ ḣ_i = (M q̈ + C q̇)_i (RNEA without gravity), so with ṗ = M q̈ + Ṁ q̇ and
    Ṁ = C + Cᵀ:

        (Cᵀ q̇)_i = (v_i × S_i)ᵀ h_i = (ω_i × z)·K_i + (v_i × z)·L_i   (revolute, S = (z, 0))
                                      = (ω_i × z)·L_i                  (prismatic, S = (0, z))

    with v_i the velocity of the origin of {i}: the same vector for any C with Ṁ = C + Cᵀ, such as
    Pinocchio's ``computeCoriolisMatrix`` (Christoffel symbols). Body momenta about the origin:
    L = m (v + ω × c), K = I_c ω + c × L. Gravity: in a uniform field the subtree of i weighs
    m_i^c a_i with moment h_i^c × a_i about the origin of {i} (m^c its mass, h^c = Σ m c its first moment,
    a_i = Rᵀ a_λ, a_0 = −g), so g_i = z·(h_i^c × a_i) (revolute) or z·(m_i^c a_i) (prismatic), as the RNEA
    at zero velocity gives. Mimic bodies fold onto their master by virtual work (p = Gᵀ p_b,
    Cᵀq̇ = Gᵀ (C_bᵀ q̇_b)); the rotor inertia adds ``armature · q̇`` to p (a constant diagonal: not in Ṁ).

    The arrays are indexed directly (no views per call: each would cost reference counting in a kernel
    that runs in about a microsecond).

    Args:
        tab: (nb, :data:`MOMENTUM_TABLE_COLS`) float, itab: (nb, 3) int: the body table
            (:func:`momentum_terms_buffers`), bodies in ``model.moving_joint_names`` order (parents first).
        q, qd: (n,) rad (m), rad/s (m/s), model joint order; finite (not checked here).
        armature: (n,) kg·m² (kg), rotor inertia reflected to the joint (zeros: none).
        work: (:data:`MOMENTUM_WORK_ROWS`, nb) float scratch, overwritten.
        out: (≥ 3, n): rows 0, 1, 2 written with g(q) N·m (N), p kg·m²/s (kg·m/s) and
            Cᵀ(q, q̇) q̇ N·m (N); other rows untouched.
    """
    nb = itab.shape[0]
    n = q.shape[0]
    big = False
    for i in range(nb):
        v = tab[i, _T_MULT] * q[itab[i, 2]] + tab[i, _T_OFF]
        work[_W_Q, i] = v
        work[_W_QD, i] = tab[i, _T_MULT] * qd[itab[i, 2]]
        if not abs(v) <= _SINCOS_MAX:
            big = True
    if big:
        for i in range(nb):
            work[_W_S, i] = np.sin(work[_W_Q, i])
            work[_W_COS, i] = np.cos(work[_W_Q, i])
    else:
        _sincos_flat(work[_W_Q], work[_W_S], work[_W_COS])
    # ---- outward: transforms, ω_i, v_i, gravity acceleration, body momenta, mass and first moment ----
    for i in range(nb):
        x, y, w = tab[i, _T_Z], tab[i, _T_Z + 1], tab[i, _T_Z + 2]
        if itab[i, 1] == 0:  # revolute: R = R_T · Rot(z, q) (Rodrigues), p = p_T
            s, c = work[_W_S, i], work[_W_COS, i]
            u = 1.0 - c
            r00, r01, r02 = c + x * x * u, x * y * u - w * s, x * w * u + y * s
            r10, r11, r12 = y * x * u + w * s, c + y * y * u, y * w * u - x * s
            r20, r21, r22 = w * x * u - y * s, w * y * u + x * s, c + w * w * u
            for a in range(3):
                t0, t1, t2 = tab[i, 3 * a], tab[i, 3 * a + 1], tab[i, 3 * a + 2]
                work[3 * a, i] = t0 * r00 + t1 * r10 + t2 * r20
                work[3 * a + 1, i] = t0 * r01 + t1 * r11 + t2 * r21
                work[3 * a + 2, i] = t0 * r02 + t1 * r12 + t2 * r22
                work[_W_P + a, i] = tab[i, _T_PT + a]
        else:  # prismatic: R = R_T, p = p_T + R_T z q
            qi = work[_W_Q, i]
            for a in range(3):
                t0, t1, t2 = tab[i, 3 * a], tab[i, 3 * a + 1], tab[i, 3 * a + 2]
                work[3 * a, i], work[3 * a + 1, i], work[3 * a + 2, i] = t0, t1, t2
                work[_W_P + a, i] = tab[i, _T_PT + a] + (t0 * x + t1 * y + t2 * w) * qi
        R00, R01, R02 = work[0, i], work[1, i], work[2, i]
        R10, R11, R12 = work[3, i], work[4, i], work[5, i]
        R20, R21, R22 = work[6, i], work[7, i], work[8, i]
        lam = itab[i, 0]
        if lam < 0:
            wlx = wly = wlz = 0.0
            ux = uy = uz = 0.0
            gx, gy, gz = tab[i, _T_A0], tab[i, _T_A0 + 1], tab[i, _T_A0 + 2]
        else:
            wlx, wly, wlz = work[_W_W, lam], work[_W_W + 1, lam], work[_W_W + 2, lam]
            cx, cy, cz = _cross(wlx, wly, wlz, work[_W_P, i], work[_W_P + 1, i], work[_W_P + 2, i])
            ux, uy, uz = work[_W_V, lam] + cx, work[_W_V + 1, lam] + cy, work[_W_V + 2, lam] + cz
            gx, gy, gz = work[_W_A, lam], work[_W_A + 1, lam], work[_W_A + 2, lam]
        # into {i}: Rᵀ (·)
        wx = R00 * wlx + R10 * wly + R20 * wlz
        wy = R01 * wlx + R11 * wly + R21 * wlz
        wz = R02 * wlx + R12 * wly + R22 * wlz
        vx = R00 * ux + R10 * uy + R20 * uz
        vy = R01 * ux + R11 * uy + R21 * uz
        vz = R02 * ux + R12 * uy + R22 * uz
        work[_W_A, i] = R00 * gx + R10 * gy + R20 * gz
        work[_W_A + 1, i] = R01 * gx + R11 * gy + R21 * gz
        work[_W_A + 2, i] = R02 * gx + R12 * gy + R22 * gz
        wx, wy, wz, vx, vy, vz = _along_axis(itab[i, 1] == 0, x, y, w, work[_W_QD, i], wx, wy, wz, vx, vy, vz)
        work[_W_W, i], work[_W_W + 1, i], work[_W_W + 2, i] = wx, wy, wz
        work[_W_V, i], work[_W_V + 1, i], work[_W_V + 2, i] = vx, vy, vz
        m = tab[i, _T_M]
        ccx, ccy, ccz = tab[i, _T_C], tab[i, _T_C + 1], tab[i, _T_C + 2]
        sx, sy, sz = _cross(wx, wy, wz, ccx, ccy, ccz)
        Lx, Ly, Lz = m * (vx + sx), m * (vy + sy), m * (vz + sz)
        kx, ky, kz = _cross(ccx, ccy, ccz, Lx, Ly, Lz)
        work[_W_L, i], work[_W_L + 1, i], work[_W_L + 2, i] = Lx, Ly, Lz
        work[_W_K, i] = tab[i, _T_I] * wx + tab[i, _T_I + 1] * wy + tab[i, _T_I + 2] * wz + kx
        work[_W_K + 1, i] = tab[i, _T_I + 3] * wx + tab[i, _T_I + 4] * wy + tab[i, _T_I + 5] * wz + ky
        work[_W_K + 2, i] = tab[i, _T_I + 6] * wx + tab[i, _T_I + 7] * wy + tab[i, _T_I + 8] * wz + kz
        work[_W_MC, i] = m
        work[_W_H, i], work[_W_H + 1, i], work[_W_H + 2, i] = m * ccx, m * ccy, m * ccz
    for j in range(n):
        out[0, j] = 0.0
        out[1, j] = armature[j] * qd[j]
        out[2, j] = 0.0
    # ---- inward: composites into parents; p_i, g_i, (Cᵀq̇)_i from the composite of body i ----
    for i in range(nb - 1, -1, -1):
        zx, zy, zz = tab[i, _T_Z], tab[i, _T_Z + 1], tab[i, _T_Z + 2]
        Lx, Ly, Lz = work[_W_L, i], work[_W_L + 1, i], work[_W_L + 2, i]
        Kx, Ky, Kz = work[_W_K, i], work[_W_K + 1, i], work[_W_K + 2, i]
        mc = work[_W_MC, i]
        hx, hy, hz = work[_W_H, i], work[_W_H + 1, i], work[_W_H + 2, i]
        ax, ay, az = work[_W_A, i], work[_W_A + 1, i], work[_W_A + 2, i]
        ex, ey, ez = _cross(work[_W_W, i], work[_W_W + 1, i], work[_W_W + 2, i], zx, zy, zz)  # ω_i × z
        if itab[i, 1] == 0:
            pb = zx * Kx + zy * Ky + zz * Kz
            nx, ny, nz = _cross(hx, hy, hz, ax, ay, az)
            gb = zx * nx + zy * ny + zz * nz
            fx, fy, fz = _cross(work[_W_V, i], work[_W_V + 1, i], work[_W_V + 2, i], zx, zy, zz)  # v_i × z
            cb = ex * Kx + ey * Ky + ez * Kz + fx * Lx + fy * Ly + fz * Lz
        else:
            pb = zx * Lx + zy * Ly + zz * Lz
            gb = mc * (zx * ax + zy * ay + zz * az)
            cb = ex * Lx + ey * Ly + ez * Lz
        j, k = itab[i, 2], tab[i, _T_MULT]  # virtual work onto the master joint
        out[0, j] += k * gb
        out[1, j] += k * pb
        out[2, j] += k * cb
        lam = itab[i, 0]
        if lam >= 0:  # h_λ += R h_i (moments also + p × R force), m_λ += m_i, first moment + m_i p
            R00, R01, R02 = work[0, i], work[1, i], work[2, i]
            R10, R11, R12 = work[3, i], work[4, i], work[5, i]
            R20, R21, R22 = work[6, i], work[7, i], work[8, i]
            px, py, pz = work[_W_P, i], work[_W_P + 1, i], work[_W_P + 2, i]
            RLx = R00 * Lx + R01 * Ly + R02 * Lz
            RLy = R10 * Lx + R11 * Ly + R12 * Lz
            RLz = R20 * Lx + R21 * Ly + R22 * Lz
            cx, cy, cz = _cross(px, py, pz, RLx, RLy, RLz)
            work[_W_L, lam] += RLx
            work[_W_L + 1, lam] += RLy
            work[_W_L + 2, lam] += RLz
            work[_W_K, lam] += R00 * Kx + R01 * Ky + R02 * Kz + cx
            work[_W_K + 1, lam] += R10 * Kx + R11 * Ky + R12 * Kz + cy
            work[_W_K + 2, lam] += R20 * Kx + R21 * Ky + R22 * Kz + cz
            work[_W_MC, lam] += mc
            work[_W_H, lam] += R00 * hx + R01 * hy + R02 * hz + mc * px
            work[_W_H + 1, lam] += R10 * hx + R11 * hy + R12 * hz + mc * py
            work[_W_H + 2, lam] += R20 * hx + R21 * hy + R22 * hz + mc * pz


def momentum_terms_buffers(model: RobotModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The constant arguments of :func:`momentum_terms_one` for ``model``: ``(tab, itab, armature)``
    (the body table with −g in every row, its int columns parent / joint type / source joint, and the rotor
    inertia (n,) kg·m²), read once — a payload or gravity change is a new ``RobotModel`` and new buffers."""
    t = JointTable(model)
    nb = t.parent.shape[0]
    a0 = -np.asarray(model.gravity, dtype=float)
    tab = np.concatenate([t.R_T.reshape(nb, 9), t.p_T, t.axis, t.mass[:, None], t.com, t.I_c.reshape(nb, 9),
                          t.mult[:, None], t.offset[:, None], np.tile(a0, (nb, 1))], axis=1)
    if tab.shape[1] != MOMENTUM_TABLE_COLS:  # the column constants above must follow JointTable's fields
        raise RuntimeError(f"momentum table: {tab.shape[1]} columns, expected {MOMENTUM_TABLE_COLS}")
    itab = np.stack([t.parent, t.jtype, t.src], axis=1).astype(np.int64)
    armature = np.asarray(model.armature, dtype=float).reshape(model.n)
    return np.ascontiguousarray(tab), np.ascontiguousarray(itab), np.ascontiguousarray(armature)

@njit(cache=True, nogil=True, fastmath=_FASTMATH)
def _ac_one(parent, axis, jtype, mass, com, I_c, R, p, qdd_b, g0, g1, g2, wa, va, vc, fa, na, fc, nc, ta,
            tc):  # pragma: no cover - compiled
    """The two zero-velocity RNEAs of one state at once, sharing the body transforms R (nb, 3, 3), p (nb, 3):
    ta = RNEA(q, 0, qdd_b) without gravity (= M q'' when qdd_b = q': the coefficient a) and
    tc = RNEA(q, 0, 0) with base acceleration (g0, g1, g2) = −g (= g(q): the coefficient c).

    The recursion of Featherstone 2008 Table 5.1 / Craig 2005 eqs. 6.45–6.53 with ω = 0 on every body, so
    every velocity-product term vanishes: outward ω̇_i = Rᵀ ω̇_λ + q̈_i z, v̇_i = Rᵀ (ω̇_λ × p + v̇_λ),
    F_i = m (ω̇_i × c + v̇_i), N_i = I_c ω̇_i; the gravity channel only carries v̇_i = Rᵀ v̇_λ, F_i = m v̇_i.
    Inward as usual. Work arrays (nb, 3): wa, va (ω̇, v̇ of the a channel), vc, fa, na, fc, nc.
    """
    nb = parent.shape[0]
    for i in range(nb):
        lam = parent[i]
        zx, zy, zz = axis[i, 0], axis[i, 1], axis[i, 2]
        if lam < 0:
            dlx = dly = dlz = 0.0
            ax = ay = az = 0.0
            gx, gy, gz = g0, g1, g2
        else:
            dlx, dly, dlz = wa[lam, 0], wa[lam, 1], wa[lam, 2]
            ex, ey, ez = _cross(dlx, dly, dlz, p[i, 0], p[i, 1], p[i, 2])
            ax, ay, az = ex + va[lam, 0], ey + va[lam, 1], ez + va[lam, 2]
            gx, gy, gz = vc[lam, 0], vc[lam, 1], vc[lam, 2]
        dx, dy, dz = _rot_t(R, i, dlx, dly, dlz)
        vx, vy, vz = _rot_t(R, i, ax, ay, az)
        cx, cy, cz = _rot_t(R, i, gx, gy, gz)
        dx, dy, dz, vx, vy, vz = _along_axis(jtype[i] == 0, zx, zy, zz, qdd_b[i], dx, dy, dz, vx, vy, vz)
        wa[i, 0], wa[i, 1], wa[i, 2] = dx, dy, dz
        va[i, 0], va[i, 1], va[i, 2] = vx, vy, vz
        vc[i, 0], vc[i, 1], vc[i, 2] = cx, cy, cz
        ccx, ccy, ccz = com[i, 0], com[i, 1], com[i, 2]
        m = mass[i]
        sx, sy, sz = _cross(dx, dy, dz, ccx, ccy, ccz)
        Fx, Fy, Fz = m * (sx + vx), m * (sy + vy), m * (sz + vz)
        fa[i, 0], fa[i, 1], fa[i, 2] = Fx, Fy, Fz
        hx, hy, hz = _cross(ccx, ccy, ccz, Fx, Fy, Fz)
        na[i, 0] = I_c[i, 0, 0] * dx + I_c[i, 0, 1] * dy + I_c[i, 0, 2] * dz + hx
        na[i, 1] = I_c[i, 1, 0] * dx + I_c[i, 1, 1] * dy + I_c[i, 1, 2] * dz + hy
        na[i, 2] = I_c[i, 2, 0] * dx + I_c[i, 2, 1] * dy + I_c[i, 2, 2] * dz + hz
        Gx, Gy, Gz = m * cx, m * cy, m * cz
        fc[i, 0], fc[i, 1], fc[i, 2] = Gx, Gy, Gz
        hx, hy, hz = _cross(ccx, ccy, ccz, Gx, Gy, Gz)
        nc[i, 0], nc[i, 1], nc[i, 2] = hx, hy, hz
    for i in range(nb - 1, -1, -1):
        lam = parent[i]
        for ch in range(2):
            f = fa if ch == 0 else fc
            nt = na if ch == 0 else nc
            tb = ta if ch == 0 else tc
            fx, fy, fz = f[i, 0], f[i, 1], f[i, 2]
            nx, ny, nz = nt[i, 0], nt[i, 1], nt[i, 2]
            if jtype[i] == 0:
                tb[i] = nx * axis[i, 0] + ny * axis[i, 1] + nz * axis[i, 2]
            else:
                tb[i] = fx * axis[i, 0] + fy * axis[i, 1] + fz * axis[i, 2]
            if lam >= 0:
                _to_parent(R, p, i, lam, fx, fy, fz, nx, ny, nz, f, nt)

@njit(cache=True, nogil=True, fastmath=_FASTMATH)
def _path_terms_batch(fbuf, ibuf, a0, q, dq, ddq, idx, tau):  # pragma: no cover - compiled
    """tau (3E, n) = [c; a; b] at the rows idx (E,) of q, dq, ddq (P, n): c = g(q), a = M(q) q',
    b = M(q) q'' + C(q, q') q' (eq. 1), with one set of body transforms per state (fbuf, ibuf: the packed
    :class:`~robot_dynamics_ros.dynamics.newton_euler.JointTable`; a0 = −g). Mimic bodies: q_b = k q + b,
    torques back to the master by virtual work, as in ``_rnea_batch``."""
    parent, R_T, p_T, axis, jtype, mass, com, I_c, src, mult, offset = _unpack(fbuf, ibuf)
    nb = parent.shape[0]; n = q.shape[1]; e = idx.shape[0]
    R = np.empty((nb, 3, 3)); p = np.empty((nb, 3))
    w = np.empty((nb, 3)); wd = np.empty((nb, 3)); vd = np.empty((nb, 3)); f = np.empty((nb, 3)); nt = np.empty((nb, 3))
    wa = np.empty((nb, 3)); va = np.empty((nb, 3)); vc = np.empty((nb, 3)); fa = np.empty((nb, 3)); na = np.empty((nb, 3)); fc = np.empty((nb, 3)); nc = np.empty((nb, 3))
    d1 = np.empty(nb); d2 = np.empty(nb); tb = np.empty(nb); ta = np.empty(nb); tc = np.empty(nb)
    qs = np.empty((e, n))
    for k in range(e):
        for j in range(n):
            qs[k, j] = q[idx[k], j]
    qb, S, C = _body_positions(qs, src, mult, offset)
    for k in range(e):
        pt = idx[k]
        for i in range(nb):
            _joint_transform(R_T, p_T, axis, jtype, i, qb[k, i], S[k, i], C[k, i], R, p)
            d1[i] = mult[i] * dq[pt, src[i]]
            d2[i] = mult[i] * ddq[pt, src[i]]
        _ac_one(parent, axis, jtype, mass, com, I_c, R, p, d1, a0[0], a0[1], a0[2], wa, va, vc, fa, na, fc, nc, ta, tc)
        _rnea_one(parent, axis, jtype, mass, com, I_c, R, p, d1, d2, 0.0, 0.0, 0.0, w, wd, vd, f, nt, tb)
        for j in range(n):
            tau[k, j] = 0.0
            tau[e + k, j] = 0.0
            tau[2 * e + k, j] = 0.0
        for i in range(nb):
            tau[k, src[i]] += mult[i] * tc[i]
            tau[e + k, src[i]] += mult[i] * ta[i]
            tau[2 * e + k, src[i]] += mult[i] * tb[i]
    finite = True
    for r in range(3 * e):
        for j in range(n):
            if not np.isfinite(tau[r, j]):
                finite = False
    return finite


# --------------------------------------------------------------------------------------------------
# the engine
# --------------------------------------------------------------------------------------------------
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
        _rnea_batch(self._fbuf, self._ibuf, q2, qd2, qdd2, self._a0 if gravity else self._zero3,
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
        if not _path_terms_batch(self._fbuf, self._ibuf, self._a0, q, dq, ddq, idx, tau):
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
        (_crba_batch if method == "crba" else _mass_matrix_batch)(self._fbuf, self._ibuf, q2, M)
        if self._armature is not None:
            idx = np.arange(self.n)
            M[:, idx, idx] += self._armature
        self._check_finite(M)
        return M[0] if single else M

    def momentum_terms(self, q, qd) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(g, p, Cᵀ(q, qd) qd)`` of one state, each (n,): g(q) N·m, the generalized momentum p = M(q) qd
        (M with ``diag(model.armature)``; kg·m²/s) and Cᵀ qd N·m for any C with Ṁ = C + Cᵀ — one O(n) sweep
        (:func:`momentum_terms_one`), no mass or Coriolis matrix built.

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
