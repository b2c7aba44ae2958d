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
        if lam >= 0:  # f_λ += R f_i ;  n_λ += R n_i + p × (R f_i)
            Rfx = R[i, 0, 0] * fx + R[i, 0, 1] * fy + R[i, 0, 2] * fz
            Rfy = R[i, 1, 0] * fx + R[i, 1, 1] * fy + R[i, 1, 2] * fz
            Rfz = R[i, 2, 0] * fx + R[i, 2, 1] * fy + R[i, 2, 2] * fz
            Rnx = R[i, 0, 0] * nx + R[i, 0, 1] * ny + R[i, 0, 2] * nz
            Rny = R[i, 1, 0] * nx + R[i, 1, 1] * ny + R[i, 1, 2] * nz
            Rnz = R[i, 2, 0] * nx + R[i, 2, 1] * ny + R[i, 2, 2] * nz
            cx, cy, cz = _cross(p[i, 0], p[i, 1], p[i, 2], Rfx, Rfy, Rfz)
            f[lam, 0] += Rfx
            f[lam, 1] += Rfy
            f[lam, 2] += Rfz
            nt[lam, 0] += Rnx + cx
            nt[lam, 1] += Rny + cy
            nt[lam, 2] += Rnz + cz


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
#: floats of the work buffer of :func:`momentum_terms_one` per body (see its docstring)
MOMENTUM_WORK_PER_BODY = 40


@njit(cache=True, nogil=True, fastmath=_FASTMATH)
def momentum_terms_one(fbuf, ibuf, q, qd, a0, armature, work, out):
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
    L = m (v + ω × c), K = I_c ω + c × L. Gravity rides along at zero velocity: the origin of {i}
    accelerates at Rᵀ a_λ (a_0 = −g), its body force is F = m a_i with moment c × F about the origin.
    Mimic bodies fold onto their master by virtual work (p = Gᵀ p_b, Cᵀq̇ = Gᵀ (C_bᵀ q̇_b)); the rotor
    inertia adds ``armature · q̇`` to p (a constant diagonal: not in Ṁ).

    Args:
        fbuf, ibuf: the packed :class:`JointTable` (:meth:`JointTable.packed`).
        q, qd: (n,) rad (m), rad/s (m/s), model joint order; finite (not checked here).
        a0: (3,) base acceleration −g, m/s², base axes.
        armature: (n,) kg·m² (kg), rotor inertia reflected to the joint (zeros: none).
        work: (:data:`MOMENTUM_WORK_PER_BODY` · nb,) float scratch, overwritten.
        out: (3, n) written: ``out[0]`` = g(q) N·m (N), ``out[1]`` = p kg·m²/s (kg·m/s),
            ``out[2]`` = Cᵀ(q, q̇) q̇ N·m (N).
    """
    parent, R_T, p_T, axis, jtype, mass, com, I_c, src, mult, offset = _unpack(fbuf, ibuf)
    nb = parent.shape[0]
    o = 0
    R = work[o:o + 9 * nb].reshape((nb, 3, 3))
    o += 9 * nb
    P = work[o:o + 3 * nb].reshape((nb, 3))
    o += 3 * nb
    W = work[o:o + 3 * nb].reshape((nb, 3))      # ω_i, axes of {i}
    o += 3 * nb
    V = work[o:o + 3 * nb].reshape((nb, 3))      # velocity of the origin of {i}
    o += 3 * nb
    A = work[o:o + 3 * nb].reshape((nb, 3))      # acceleration of the origin at zero velocity (gravity)
    o += 3 * nb
    L = work[o:o + 3 * nb].reshape((nb, 3))      # composite linear momentum
    o += 3 * nb
    K = work[o:o + 3 * nb].reshape((nb, 3))      # composite angular momentum about the origin of {i}
    o += 3 * nb
    F = work[o:o + 3 * nb].reshape((nb, 3))      # composite gravity force
    o += 3 * nb
    N = work[o:o + 3 * nb].reshape((nb, 3))      # its moment about the origin of {i}
    o += 3 * nb
    qb = work[o:o + nb]
    Sb = work[o + nb:o + 2 * nb]
    Cb = work[o + 2 * nb:o + 3 * nb]
    qdb = work[o + 3 * nb:o + 4 * nb]
    gb = work[o + 4 * nb:o + 5 * nb]
    pb = work[o + 5 * nb:o + 6 * nb]
    cb = work[o + 6 * nb:o + 7 * nb]
    big = False
    for i in range(nb):
        v = mult[i] * q[src[i]] + offset[i]
        qb[i] = v
        qdb[i] = mult[i] * qd[src[i]]
        if not abs(v) <= _SINCOS_MAX:
            big = True
    if big:
        for i in range(nb):
            Sb[i] = np.sin(qb[i])
            Cb[i] = np.cos(qb[i])
    else:
        _sincos_flat(qb, Sb, Cb)
    # ---- outward: transforms, ω_i, v_i, gravity acceleration, body momenta and gravity forces ----
    for i in range(nb):
        _joint_transform(R_T, p_T, axis, jtype, i, qb[i], Sb[i], Cb[i], R, P)
        lam = parent[i]
        zx, zy, zz = axis[i, 0], axis[i, 1], axis[i, 2]
        if lam < 0:
            wlx = wly = wlz = 0.0
            ux = uy = uz = 0.0
            gx, gy, gz = a0[0], a0[1], a0[2]
        else:
            wlx, wly, wlz = W[lam, 0], W[lam, 1], W[lam, 2]
            cx, cy, cz = _cross(wlx, wly, wlz, P[i, 0], P[i, 1], P[i, 2])
            ux, uy, uz = V[lam, 0] + cx, V[lam, 1] + cy, V[lam, 2] + cz
            gx, gy, gz = A[lam, 0], A[lam, 1], A[lam, 2]
        # into {i}: Rᵀ (·)
        wx = R[i, 0, 0] * wlx + R[i, 1, 0] * wly + R[i, 2, 0] * wlz
        wy = R[i, 0, 1] * wlx + R[i, 1, 1] * wly + R[i, 2, 1] * wlz
        wz = R[i, 0, 2] * wlx + R[i, 1, 2] * wly + R[i, 2, 2] * wlz
        vx = R[i, 0, 0] * ux + R[i, 1, 0] * uy + R[i, 2, 0] * uz
        vy = R[i, 0, 1] * ux + R[i, 1, 1] * uy + R[i, 2, 1] * uz
        vz = R[i, 0, 2] * ux + R[i, 1, 2] * uy + R[i, 2, 2] * uz
        ax = R[i, 0, 0] * gx + R[i, 1, 0] * gy + R[i, 2, 0] * gz
        ay = R[i, 0, 1] * gx + R[i, 1, 1] * gy + R[i, 2, 1] * gz
        az = R[i, 0, 2] * gx + R[i, 1, 2] * gy + R[i, 2, 2] * gz
        r = qdb[i]
        if jtype[i] == 0:
            wx += zx * r
            wy += zy * r
            wz += zz * r
        else:
            vx += zx * r
            vy += zy * r
            vz += zz * r
        W[i, 0], W[i, 1], W[i, 2] = wx, wy, wz
        V[i, 0], V[i, 1], V[i, 2] = vx, vy, vz
        A[i, 0], A[i, 1], A[i, 2] = ax, ay, az
        m = mass[i]
        ccx, ccy, ccz = com[i, 0], com[i, 1], com[i, 2]
        sx, sy, sz = _cross(wx, wy, wz, ccx, ccy, ccz)
        Lx, Ly, Lz = m * (vx + sx), m * (vy + sy), m * (vz + sz)
        kx, ky, kz = _cross(ccx, ccy, ccz, Lx, Ly, Lz)
        L[i, 0], L[i, 1], L[i, 2] = Lx, Ly, Lz
        K[i, 0] = I_c[i, 0, 0] * wx + I_c[i, 0, 1] * wy + I_c[i, 0, 2] * wz + kx
        K[i, 1] = I_c[i, 1, 0] * wx + I_c[i, 1, 1] * wy + I_c[i, 1, 2] * wz + ky
        K[i, 2] = I_c[i, 2, 0] * wx + I_c[i, 2, 1] * wy + I_c[i, 2, 2] * wz + kz
        Fx, Fy, Fz = m * ax, m * ay, m * az
        F[i, 0], F[i, 1], F[i, 2] = Fx, Fy, Fz
        N[i, 0], N[i, 1], N[i, 2] = _cross(ccx, ccy, ccz, Fx, Fy, Fz)
    # ---- inward: composites into parents; p_i, g_i, (Cᵀq̇)_i from the composite of body i ----
    for i in range(nb - 1, -1, -1):
        zx, zy, zz = axis[i, 0], axis[i, 1], axis[i, 2]
        Lx, Ly, Lz = L[i, 0], L[i, 1], L[i, 2]
        Kx, Ky, Kz = K[i, 0], K[i, 1], K[i, 2]
        Fx, Fy, Fz = F[i, 0], F[i, 1], F[i, 2]
        Nx, Ny, Nz = N[i, 0], N[i, 1], N[i, 2]
        ex, ey, ez = _cross(W[i, 0], W[i, 1], W[i, 2], zx, zy, zz)  # ω_i × z
        if jtype[i] == 0:
            pb[i] = zx * Kx + zy * Ky + zz * Kz
            gb[i] = zx * Nx + zy * Ny + zz * Nz
            fx, fy, fz = _cross(V[i, 0], V[i, 1], V[i, 2], zx, zy, zz)  # v_i × z
            cb[i] = ex * Kx + ey * Ky + ez * Kz + fx * Lx + fy * Ly + fz * Lz
        else:
            pb[i] = zx * Lx + zy * Ly + zz * Lz
            gb[i] = zx * Fx + zy * Fy + zz * Fz
            cb[i] = ex * Lx + ey * Ly + ez * Lz
        lam = parent[i]
        if lam >= 0:  # h_λ += R h_i, moments also + p × (R force)
            RLx = R[i, 0, 0] * Lx + R[i, 0, 1] * Ly + R[i, 0, 2] * Lz
            RLy = R[i, 1, 0] * Lx + R[i, 1, 1] * Ly + R[i, 1, 2] * Lz
            RLz = R[i, 2, 0] * Lx + R[i, 2, 1] * Ly + R[i, 2, 2] * Lz
            RFx = R[i, 0, 0] * Fx + R[i, 0, 1] * Fy + R[i, 0, 2] * Fz
            RFy = R[i, 1, 0] * Fx + R[i, 1, 1] * Fy + R[i, 1, 2] * Fz
            RFz = R[i, 2, 0] * Fx + R[i, 2, 1] * Fy + R[i, 2, 2] * Fz
            cx, cy, cz = _cross(P[i, 0], P[i, 1], P[i, 2], RLx, RLy, RLz)
            dx, dy, dz = _cross(P[i, 0], P[i, 1], P[i, 2], RFx, RFy, RFz)
            L[lam, 0] += RLx
            L[lam, 1] += RLy
            L[lam, 2] += RLz
            K[lam, 0] += R[i, 0, 0] * Kx + R[i, 0, 1] * Ky + R[i, 0, 2] * Kz + cx
            K[lam, 1] += R[i, 1, 0] * Kx + R[i, 1, 1] * Ky + R[i, 1, 2] * Kz + cy
            K[lam, 2] += R[i, 2, 0] * Kx + R[i, 2, 1] * Ky + R[i, 2, 2] * Kz + cz
            F[lam, 0] += RFx
            F[lam, 1] += RFy
            F[lam, 2] += RFz
            N[lam, 0] += R[i, 0, 0] * Nx + R[i, 0, 1] * Ny + R[i, 0, 2] * Nz + dx
            N[lam, 1] += R[i, 1, 0] * Nx + R[i, 1, 1] * Ny + R[i, 1, 2] * Nz + dy
            N[lam, 2] += R[i, 2, 0] * Nx + R[i, 2, 1] * Ny + R[i, 2, 2] * Nz + dz
    _to_joints(src, mult, gb, out[0])
    _to_joints(src, mult, pb, out[1])
    _to_joints(src, mult, cb, out[2])
    for j in range(out.shape[1]):
        out[1, j] += armature[j] * qd[j]


def momentum_terms_buffers(model: RobotModel) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The constant arguments of :func:`momentum_terms_one` for ``model``: ``(fbuf, ibuf, a0, armature)``
    (the packed joint table, −g (3,) m/s², rotor inertia (n,) kg·m²), read once — a payload or gravity
    change is a new ``RobotModel`` and new buffers."""
    fbuf, ibuf = JointTable(model).packed()
    a0 = np.ascontiguousarray(-np.asarray(model.gravity, dtype=float))
    armature = np.ascontiguousarray(np.asarray(model.armature, dtype=float).reshape(model.n))
    return fbuf, ibuf, a0, armature


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
        if self._version != self.model.version:
            self._sync()
        q1 = np.ascontiguousarray(inputs.vector(q, self.n, "q", self.model.joint_names))
        qd1 = np.ascontiguousarray(inputs.vector(qd, self.n, "qd", self.model.joint_names))
        arm = self._armature if self._armature is not None else np.zeros(self.n)
        out = np.empty((3, self.n))
        work = np.empty(MOMENTUM_WORK_PER_BODY * self.table.parent.shape[0])
        momentum_terms_one(self._fbuf, self._ibuf, q1, qd1, self._a0, arm, work, out)
        self._check_finite(out)
        return out[0], out[1], out[2]
