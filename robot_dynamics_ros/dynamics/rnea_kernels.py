"""The compiled Newton–Euler kernels (numba) over a packed :class:`~robot_dynamics_ros.dynamics.kinematic_tree.JointTable`.

The recursion and its sources are in :mod:`robot_dynamics_ros.dynamics.newton_euler` (the engine that calls
these). Batched entry points, arrays (N, n) in and out, no allocation per sample, GIL released:
:func:`rnea_batch`, :func:`mass_matrix_batch` (column by column), :func:`crba_batch` and :func:`path_terms_batch`
(the retimer's a, b, c). The small ``inline="always"`` helpers (3-vector products, one joint's transform, one
RNEA pass) are also used by :mod:`robot_dynamics_ros.dynamics.momentum_terms`: numba inlines them into the
caller's compiled code and its on-disk cache only notices edits to the caller's file, so after changing this
module run ``make clean-numba-cache``.
"""
from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
from numba import njit

#: LLVM may fuse multiply-adds and reassociate sums (no "nnan"/"ninf": NaN inputs still give NaN out)
FASTMATH = {"contract", "reassoc"}


# sin and cos of the joint angles: libm's take ~48 ns per pair here, over half of the whole RNEA. This
# branch-free version vectorizes (about 3 ns per pair) and is accurate to 1-2 ulp for |x| ≤ 2^19 · π/2:
# Cody–Waite reduction x = k·π/2 + r, |r| ≤ π/4, with π/2 split as P1 + P1T where P1 has 33 significant
# bits (so k·P1 is exact), then the Taylor series of sin r to r¹⁷ and cos r to r¹⁶ (remainder below
# 1e-19 on |r| ≤ π/4), then the quadrant k mod 4. Larger |x| fall back to libm.
_TWO_OVER_PI = 2.0 / math.pi
_PIO2_1 = math.floor(math.pi / 2 * 2.0**32) / 2.0**32  # π/2 to 33 bits: k·_PIO2_1 is exact for |k| < 2^20
_PIO2_1T = float(Decimal("1.5707963267948966192313216916397514420985846996875529")
                 - Decimal(_PIO2_1))  # π/2 − _PIO2_1 (Decimal: exact difference, then rounded once)
SINCOS_MAX = 2.0**19 * math.pi / 2


@njit(cache=True, nogil=True)  # no fastmath: the reduction relies on the evaluation order written here
def sincos_flat(x, S, C):
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
            if not abs(v) <= SINCOS_MAX:
                big = True
    if big:
        for k in range(N):
            for i in range(nb):
                S[k, i] = np.sin(qb[k, i])
                C[k, i] = np.cos(qb[k, i])
    else:
        sincos_flat(qb.reshape(N * nb), S.reshape(N * nb), C.reshape(N * nb))
    return qb, S, C


@njit(cache=True, inline="always", fastmath=FASTMATH)
def cross3(ax, ay, az, bx, by, bz):
    """a × b for 3-vectors given as scalars (returns a tuple: no allocation)."""
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _rot(R, i, x, y, z):
    """R_i v for R (nb, 3, 3)."""
    return (R[i, 0, 0] * x + R[i, 0, 1] * y + R[i, 0, 2] * z, R[i, 1, 0] * x + R[i, 1, 1] * y + R[i, 1, 2] * z,
            R[i, 2, 0] * x + R[i, 2, 1] * y + R[i, 2, 2] * z)


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _rot_t(R, i, x, y, z):
    """R_iᵀ v for R (nb, 3, 3)."""
    return (R[i, 0, 0] * x + R[i, 1, 0] * y + R[i, 2, 0] * z, R[i, 0, 1] * x + R[i, 1, 1] * y + R[i, 2, 1] * z,
            R[i, 0, 2] * x + R[i, 1, 2] * y + R[i, 2, 2] * z)


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _to_parent(R, p, i, lam, fx, fy, fz, nx, ny, nz, f, nt):
    """The inward step of body i's force f_i and moment n_i (its axes) onto its parent λ: f_λ += R f_i,
    n_λ += R n_i + p × (R f_i) (Craig 2005 eqs. 6.51–6.52)."""
    Rfx, Rfy, Rfz = _rot(R, i, fx, fy, fz)
    Rnx, Rny, Rnz = _rot(R, i, nx, ny, nz)
    cx, cy, cz = cross3(p[i, 0], p[i, 1], p[i, 2], Rfx, Rfy, Rfz)
    f[lam, 0] += Rfx
    f[lam, 1] += Rfy
    f[lam, 2] += Rfz
    nt[lam, 0] += Rnx + cx
    nt[lam, 1] += Rny + cy
    nt[lam, 2] += Rnz + cz


@njit(cache=True, inline="always", fastmath=FASTMATH)
def along_axis(revolute, zx, zy, zz, r, wx, wy, wz, vx, vy, vz):
    """A joint's rate r along its axis z added to a body's (angular, linear) pair: to the angular part for a
    revolute joint, to the linear part for a prismatic one."""
    if revolute:
        return wx + zx * r, wy + zy * r, wz + zz * r, vx, vy, vz
    return wx, wy, wz, vx + zx * r, vy + zy * r, vz + zz * r


@njit(cache=True, inline="always", fastmath=FASTMATH)
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


@njit(cache=True, inline="always", fastmath=FASTMATH)
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
            cx, cy, cz = cross3(wlx, wly, wlz, px, py, pz)
            ex, ey, ez = cross3(wlx, wly, wlz, cx, cy, cz)
            gx, gy, gz = cross3(dlx, dly, dlz, px, py, pz)
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
        kx, ky, kz = cross3(wx, wy, wz, zx, zy, zz)  # (Rᵀ ω_λ) × z
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
        ux, uy, uz = cross3(wx, wy, wz, ccx, ccy, ccz)
        ux, uy, uz = cross3(wx, wy, wz, ux, uy, uz)
        sx, sy, sz = cross3(dx, dy, dz, ccx, ccy, ccz)
        m = mass[i]
        Fx, Fy, Fz = m * (sx + ux + vx), m * (sy + uy + vy), m * (sz + uz + vz)
        f[i, 0], f[i, 1], f[i, 2] = Fx, Fy, Fz
        # N_i = I_c ω̇_i + ω_i × (I_c ω_i)   (Euler); n_i starts as N_i + c × F_i
        Iwx = I_c[i, 0, 0] * wx + I_c[i, 0, 1] * wy + I_c[i, 0, 2] * wz
        Iwy = I_c[i, 1, 0] * wx + I_c[i, 1, 1] * wy + I_c[i, 1, 2] * wz
        Iwz = I_c[i, 2, 0] * wx + I_c[i, 2, 1] * wy + I_c[i, 2, 2] * wz
        gx, gy, gz = cross3(wx, wy, wz, Iwx, Iwy, Iwz)
        hx, hy, hz = cross3(ccx, ccy, ccz, Fx, Fy, Fz)
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
def unpack_table(fbuf, ibuf):
    """Named views of the packed joint table (see :meth:`~robot_dynamics_ros.dynamics.kinematic_tree.JointTable.packed`)."""
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


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def rnea_batch(fbuf, ibuf, q, qd, qdd, a0, use_qd, use_qdd, tau):
    """Batched RNEA: q, qd, qdd (N, n) -> tau (N, n). ``use_qd``/``use_qdd`` False treat them as zero.

    fbuf, ibuf: the packed :class:`~robot_dynamics_ros.dynamics.kinematic_tree.JointTable`; a0 (3,): base acceleration (−g, or 0).
    """
    parent, R_T, p_T, axis, jtype, mass, com, I_c, src, mult, offset = unpack_table(fbuf, ibuf)
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


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def mass_matrix_batch(fbuf, ibuf, q, M):
    """Batched M(q): column j = RNEA(q, q̇ = 0, q̈ = e_j, g = 0) (Walker & Orin 1982, method 1)."""
    parent, R_T, p_T, axis, jtype, mass, com, I_c, src, mult, offset = unpack_table(fbuf, ibuf)
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


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def crba_batch(fbuf, ibuf, q, M):
    """Batched M(q) by the composite-rigid-body algorithm (Featherstone 2008 Table 6.2, in 3-vector form).

    Each body's inertia about its frame origin is (m, h = m c, I_o = I_c + m(|c|² E − c cᵀ)). Pass 1,
    leaves to root: the composite inertia of body i's subtree, moved into the parent frame
    (m' = m, h' = R h + m p, I_o' = R I_o Rᵀ + m(|p|² E − p pᵀ) + 2(p·h') E − p h'ᵀ − h' pᵀ with h' = R h),
    is added to the parent's. Pass 2: the force F_i = I^c_i S_i that moves the composite of i with unit
    joint rate — revolute S = (ω = z): f = z × h, n = I_o z; prismatic S = (v = z): f = m z, n = h × z —
    gives M_ii = S_i·F_i, and, carried to each ancestor j (f ← R f, n ← R n + p × R f), M_ij = S_j·F.
    """
    parent, R_T, p_T, axis, jtype, mass, com, I_c, src, mult, offset = unpack_table(fbuf, ibuf)
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
                fx, fy, fz = cross3(zx, zy, zz, hc[i, 0], hc[i, 1], hc[i, 2])
                nx = Ic[i, 0, 0] * zx + Ic[i, 0, 1] * zy + Ic[i, 0, 2] * zz
                ny = Ic[i, 1, 0] * zx + Ic[i, 1, 1] * zy + Ic[i, 1, 2] * zz
                nz = Ic[i, 2, 0] * zx + Ic[i, 2, 1] * zy + Ic[i, 2, 2] * zz
                Mb[i, i] = nx * zx + ny * zy + nz * zz
            else:  # prismatic: f = m z, n = h × z
                fx, fy, fz = mc[i] * zx, mc[i] * zy, mc[i] * zz
                nx, ny, nz = cross3(hc[i, 0], hc[i, 1], hc[i, 2], zx, zy, zz)
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
                ex, ey, ez = cross3(p[j, 0], p[j, 1], p[j, 2], gx, gy, gz)
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



@njit(cache=True, nogil=True, fastmath=FASTMATH)
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
            ex, ey, ez = cross3(dlx, dly, dlz, p[i, 0], p[i, 1], p[i, 2])
            ax, ay, az = ex + va[lam, 0], ey + va[lam, 1], ez + va[lam, 2]
            gx, gy, gz = vc[lam, 0], vc[lam, 1], vc[lam, 2]
        dx, dy, dz = _rot_t(R, i, dlx, dly, dlz)
        vx, vy, vz = _rot_t(R, i, ax, ay, az)
        cx, cy, cz = _rot_t(R, i, gx, gy, gz)
        dx, dy, dz, vx, vy, vz = along_axis(jtype[i] == 0, zx, zy, zz, qdd_b[i], dx, dy, dz, vx, vy, vz)
        wa[i, 0], wa[i, 1], wa[i, 2] = dx, dy, dz
        va[i, 0], va[i, 1], va[i, 2] = vx, vy, vz
        vc[i, 0], vc[i, 1], vc[i, 2] = cx, cy, cz
        ccx, ccy, ccz = com[i, 0], com[i, 1], com[i, 2]
        m = mass[i]
        sx, sy, sz = cross3(dx, dy, dz, ccx, ccy, ccz)
        Fx, Fy, Fz = m * (sx + vx), m * (sy + vy), m * (sz + vz)
        fa[i, 0], fa[i, 1], fa[i, 2] = Fx, Fy, Fz
        hx, hy, hz = cross3(ccx, ccy, ccz, Fx, Fy, Fz)
        na[i, 0] = I_c[i, 0, 0] * dx + I_c[i, 0, 1] * dy + I_c[i, 0, 2] * dz + hx
        na[i, 1] = I_c[i, 1, 0] * dx + I_c[i, 1, 1] * dy + I_c[i, 1, 2] * dz + hy
        na[i, 2] = I_c[i, 2, 0] * dx + I_c[i, 2, 1] * dy + I_c[i, 2, 2] * dz + hz
        Gx, Gy, Gz = m * cx, m * cy, m * cz
        fc[i, 0], fc[i, 1], fc[i, 2] = Gx, Gy, Gz
        hx, hy, hz = cross3(ccx, ccy, ccz, Gx, Gy, Gz)
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

@njit(cache=True, nogil=True, fastmath=FASTMATH)
def path_terms_batch(fbuf, ibuf, a0, q, dq, ddq, idx, tau):  # pragma: no cover - compiled
    """tau (3E, n) = [c; a; b] at the rows idx (E,) of q, dq, ddq (P, n): c = g(q), a = M(q) q',
    b = M(q) q'' + C(q, q') q' (eq. 1), with one set of body transforms per state (fbuf, ibuf: the packed
    :class:`~robot_dynamics_ros.dynamics.kinematic_tree.JointTable`; a0 = −g). Mimic bodies: q_b = k q + b,
    torques back to the master by virtual work, as in ``rnea_batch``."""
    parent, R_T, p_T, axis, jtype, mass, com, I_c, src, mult, offset = unpack_table(fbuf, ibuf)
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
