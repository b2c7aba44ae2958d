"""The momentum observer's per-sample model terms: g(q), p = M(q) q̇ and Cᵀ(q, q̇) q̇ in one O(n) sweep.

:func:`momentum_terms_one` (compiled with numba, no GIL, nothing allocated) runs one outward and one inward
pass over a per-body table (:func:`momentum_terms_buffers`, built from the
:class:`~robot_dynamics_ros.dynamics.kinematic_tree.JointTable`), from the composite momentum of each subtree
and Ṡ = v × S (its docstring has the derivation); no matrix is built. The engine's
:meth:`~robot_dynamics_ros.dynamics.newton_euler.NewtonEulerDynamics.momentum_terms` calls it; the observer
(:mod:`robot_dynamics_ros.control.momentum_observer`) takes Pinocchio's terms in the node and this kernel as
the independent check in the tests.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from robot_dynamics_ros.dynamics.kinematic_tree import JointTable
from robot_dynamics_ros.dynamics.rnea_kernels import FASTMATH, SINCOS_MAX, along_axis, cross3, sincos_flat
from robot_dynamics_ros.model import RobotModel

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


@njit(cache=True, nogil=True, fastmath=FASTMATH)
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
    _outward(tab, itab, q, qd, work)
    _inward(tab, itab, qd, armature, work, out)


@njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def _outward(tab, itab, q, qd, work):  # pragma: no cover - compiled
    """The outward sweep of :func:`momentum_terms_one`: per body its transform (R, p), ω_i, v_i, the gravity
    acceleration a_i, its momenta L, K about the origin of {i}, its mass and first moment, into ``work``."""
    nb = itab.shape[0]
    big = False
    for i in range(nb):
        v = tab[i, _T_MULT] * q[itab[i, 2]] + tab[i, _T_OFF]
        work[_W_Q, i] = v
        work[_W_QD, i] = tab[i, _T_MULT] * qd[itab[i, 2]]
        if not abs(v) <= SINCOS_MAX:
            big = True
    if big:
        for i in range(nb):
            work[_W_S, i] = np.sin(work[_W_Q, i])
            work[_W_COS, i] = np.cos(work[_W_Q, i])
    else:
        sincos_flat(work[_W_Q], work[_W_S], work[_W_COS])
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
            cx, cy, cz = cross3(wlx, wly, wlz, work[_W_P, i], work[_W_P + 1, i], work[_W_P + 2, i])
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
        wx, wy, wz, vx, vy, vz = along_axis(itab[i, 1] == 0, x, y, w, work[_W_QD, i], wx, wy, wz, vx, vy, vz)
        work[_W_W, i], work[_W_W + 1, i], work[_W_W + 2, i] = wx, wy, wz
        work[_W_V, i], work[_W_V + 1, i], work[_W_V + 2, i] = vx, vy, vz
        m = tab[i, _T_M]
        ccx, ccy, ccz = tab[i, _T_C], tab[i, _T_C + 1], tab[i, _T_C + 2]
        sx, sy, sz = cross3(wx, wy, wz, ccx, ccy, ccz)
        Lx, Ly, Lz = m * (vx + sx), m * (vy + sy), m * (vz + sz)
        kx, ky, kz = cross3(ccx, ccy, ccz, Lx, Ly, Lz)
        work[_W_L, i], work[_W_L + 1, i], work[_W_L + 2, i] = Lx, Ly, Lz
        work[_W_K, i] = tab[i, _T_I] * wx + tab[i, _T_I + 1] * wy + tab[i, _T_I + 2] * wz + kx
        work[_W_K + 1, i] = tab[i, _T_I + 3] * wx + tab[i, _T_I + 4] * wy + tab[i, _T_I + 5] * wz + ky
        work[_W_K + 2, i] = tab[i, _T_I + 6] * wx + tab[i, _T_I + 7] * wy + tab[i, _T_I + 8] * wz + kz
        work[_W_MC, i] = m
        work[_W_H, i], work[_W_H + 1, i], work[_W_H + 2, i] = m * ccx, m * ccy, m * ccz


@njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def _inward(tab, itab, qd, armature, work, out):  # pragma: no cover - compiled
    """The inward sweep of :func:`momentum_terms_one`: the composites of each subtree into the parent, and
    g_i, p_i, (Cᵀq̇)_i from the composite of body i, onto the master joints, into ``out`` rows 0, 1, 2."""
    nb = itab.shape[0]
    n = qd.shape[0]
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
        ex, ey, ez = cross3(work[_W_W, i], work[_W_W + 1, i], work[_W_W + 2, i], zx, zy, zz)  # ω_i × z
        if itab[i, 1] == 0:
            pb = zx * Kx + zy * Ky + zz * Kz
            nx, ny, nz = cross3(hx, hy, hz, ax, ay, az)
            gb = zx * nx + zy * ny + zz * nz
            fx, fy, fz = cross3(work[_W_V, i], work[_W_V + 1, i], work[_W_V + 2, i], zx, zy, zz)  # v_i × z
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
            cx, cy, cz = cross3(px, py, pz, RLx, RLy, RLz)
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
