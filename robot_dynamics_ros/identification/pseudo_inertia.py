"""The pseudo-inertia of one body and its log-Cholesky parametrization.

A body's 10 inertial parameters pi = (m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz) (the
:mod:`~robot_dynamics_ros.identification.regressor` convention, inertia about the frame origin) map to the
pseudo-inertia J = [[Σ, h], [hᵀ, m]] (4, 4), Σ = ½ tr(I) E − I. J ⪰ 0 is physical consistency (Wensing, Kim &
Slotine, IEEE RA-L 3(1), 2018); the log-Cholesky parametrization J = U Uᵀ (Rucker & Wensing, IEEE RA-L 7(2),
2022) maps every θ ∈ R¹⁰ to a consistent body.
"""
from __future__ import annotations

import numpy as np

__all__ = ["pseudo_inertia", "parameters_of_pseudo_inertia", "is_consistent", "parameters_from_log_cholesky",
           "log_cholesky_from_parameters"]


def pseudo_inertia(pi: np.ndarray) -> np.ndarray:
    """pi (10,) -> J (4, 4) = [[Σ, h], [hᵀ, m]] with Σ = ½ tr(I) E − I (I about the frame origin)."""
    m, h = pi[0], pi[1:4]
    I = np.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])
    J = np.empty((4, 4))
    J[:3, :3] = 0.5 * np.trace(I) * np.eye(3) - I
    J[:3, 3] = J[3, :3] = h
    J[3, 3] = m
    return J


def parameters_of_pseudo_inertia(J: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pseudo_inertia`: I = tr(Σ) E − Σ."""
    S = J[:3, :3]
    I = np.trace(S) * np.eye(3) - S
    return np.array([J[3, 3], J[0, 3], J[1, 3], J[2, 3], I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]])


def _U(theta: np.ndarray) -> np.ndarray:
    a, d1, d2, d3, s12, s23, s13, t1, t2, t3 = theta
    return np.exp(a) * np.array([[np.exp(d1), s12, s13, t1], [0.0, np.exp(d2), s23, t2],
                                 [0.0, 0.0, np.exp(d3), t3], [0.0, 0.0, 0.0, 1.0]])


def parameters_from_log_cholesky(theta) -> tuple[np.ndarray, np.ndarray]:
    """θ (10,) = (α, d1, d2, d3, s12, s23, s13, t1, t2, t3) -> (pi (10,), dpi/dθ (10, 10)).

    The COM is c = (t1, t2, t3) m and the mass m = e^{2α} kg (Rucker & Wensing 2022, eq. 7).
    """
    theta = np.asarray(theta, dtype=float)
    U = _U(theta)
    pi = parameters_of_pseudo_inertia(U @ U.T)
    D = np.empty((10, 10))
    e = np.exp(theta[0])
    slots = [None, (0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 3)]
    for k in range(10):
        if k == 0:
            dU = U
        else:
            dU = np.zeros((4, 4))
            r, c = slots[k]
            dU[r, c] = e * (np.exp(theta[k]) if k <= 3 else 1.0)
        dJ = dU @ U.T + U @ dU.T
        D[:, k] = parameters_of_pseudo_inertia(dJ)
    return pi, D


def log_cholesky_from_parameters(pi, eps: float = 1e-9) -> np.ndarray:
    """pi (10,) -> θ (10,); a singular or indefinite J (point mass, massless body, rounding) is first
    moved to J + δ E₄ with δ = eps · max(tr J, 1e-6) + the negative part of its smallest eigenvalue."""
    J = pseudo_inertia(np.asarray(pi, dtype=float))
    lam = np.linalg.eigvalsh(J)[0]
    tr = max(np.trace(J), 1e-6)
    if lam <= eps * tr:
        J = J + (eps * tr - min(lam, 0.0) + eps * tr) * np.eye(4)
    P = np.eye(4)[::-1]
    L = np.linalg.cholesky(P @ J @ P)
    U = P @ L @ P  # upper triangular, J = U Uᵀ
    s = U[3, 3]
    V = U / s
    return np.array([np.log(s), np.log(V[0, 0]), np.log(V[1, 1]), np.log(V[2, 2]),
                     V[0, 1], V[1, 2], V[0, 2], V[0, 3], V[1, 3], V[2, 3]])


def is_consistent(pi: np.ndarray, tol: float = 1e-9) -> bool:
    """Physical consistency of pi (10,): m > 0 and the pseudo-inertia J = [[½tr(I)E − I, h], [hᵀ, m]] has
    λ_min(J) ≥ −tol·tr(J) (tol absorbs the rounding of forming J; a body on the boundary is a planar density)."""
    J = pseudo_inertia(np.asarray(pi, dtype=float))
    return bool(pi[0] > 0 and np.linalg.eigvalsh(J)[0] >= -tol * max(np.trace(J), 1e-12))
