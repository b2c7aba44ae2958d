"""Base parameters: the independent combinations of the dynamic parameters that torques can reveal.

Gautier & Khalil, "Direct calculation of minimum set of inertial parameters of serial robots", IEEE T-RA
6(3), 1990 (the numerical method of Gautier 1991): stack the regressor W = [Y(q_k, qd_k, qdd_k)] at random
states, QR-factor it with column pivoting, W P = Q [R1 R2]; the rank r (|R_kk| > tol · |R_11|) is the
number of base parameters, the first r pivoted columns are independent and the others combine into them:

    beta = x_ind + K x_dep,   K = R1⁻¹ R2   (r × (P − r)),   tau = W_ind beta.

The same factorization on recorded data gives what THAT data can identify (its rank and the condition
number of W_ind), which is what an excitation trajectory must make small (Swevers et al. 1997).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import qr

__all__ = ["BaseParameters", "base_parameters", "condition_number"]

#: relative pivot threshold of the rank decision (columns of W are scaled to unit norm first)
RANK_TOL = 1e-8
#: columns whose norm is below this fraction of the largest column's count as zero
ZERO_COLUMN = 1e-10


@dataclass(frozen=True)
class BaseParameters:
    """Result of :func:`base_parameters` for a column layout of P parameters.

    Attributes:
        rank: number of base parameters r.
        independent: (r,) column indices kept as they are.  dependent: (P − r,) the other columns.
        K: (r, P − r) beta = x[independent] + K x[dependent].
        names: (r,) readable combinations, e.g. ``"link3.Izz + 0.31 link4.m"`` (|coefficients| > 1e-9).
    """

    rank: int
    independent: np.ndarray
    dependent: np.ndarray
    K: np.ndarray
    names: tuple[str, ...]

    def beta(self, x: np.ndarray) -> np.ndarray:
        """Base parameters (r,) of a full parameter vector x (P,)."""
        return x[self.independent] + self.K @ x[self.dependent]


def base_parameters(W: np.ndarray, names, tol: float = RANK_TOL) -> BaseParameters:
    """Base parameters of the stacked regressor W (rows, P) with column names (P,).

    Columns are normalized before pivoting (units differ: kg, kg·m, kg·m², N·m); zero columns (norm
    below ZERO_COLUMN × the largest: parameters no torque depends on) are dependent with K = 0.
    Raises ValueError when W has no rows.
    """
    W = np.asarray(W, dtype=float)
    if W.ndim != 2 or W.shape[0] == 0:
        raise ValueError(f"W: expected a non-empty (rows, P) matrix, got shape {W.shape}")
    P = W.shape[1]
    scale = np.linalg.norm(W, axis=0)
    # a column 1e-10 below the largest is rounding (e.g. the derivative of a constant), not excitation
    nz = scale > ZERO_COLUMN * scale.max() if scale.size else scale > 0
    Ws = np.zeros_like(W)
    Ws[:, nz] = W[:, nz] / scale[nz]
    _, R, piv = qr(Ws, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    r = int(np.sum(d > tol * d[0])) if d.size and d[0] > 0 else 0
    ind, dep = piv[:r], piv[r:]
    K = np.zeros((r, P - r))
    if r:
        Ks = np.linalg.solve(R[:r, :r], R[:r, r:]) if P > r else K
        # undo the column scaling: W_ind_s beta_s = W x  ->  K = diag(1/s_ind) Ks diag(s_dep)
        Ks = np.where(np.abs(Ks) > 1e-10, Ks, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            K = Ks * scale[dep][None, :] / scale[ind][:, None]
        K[:, ~nz[dep]] = 0.0
    labels = []
    for a in range(r):
        terms = [str(names[ind[a]])]
        for b in np.argsort(-np.abs(K[a])):
            if abs(K[a, b]) > 1e-9:
                terms.append(f"{K[a, b]:+.4g} {names[dep[b]]}")
        labels.append(" ".join(terms))
    return BaseParameters(r, ind, dep, K, tuple(labels))


def condition_number(W: np.ndarray, base: BaseParameters) -> float:
    """2-norm condition number of the base regressor W[:, independent] (columns unit-normalized)."""
    Wb = W[:, base.independent]
    s = np.linalg.norm(Wb, axis=0)
    if np.any(s == 0):
        return float("inf")
    sv = np.linalg.svd(Wb / s, compute_uv=False)
    return float(sv[0] / sv[-1]) if sv[-1] > 0 else float("inf")
