"""An LP's answer from a basis known to be optimal, without HiGHS: :func:`basis_vertex`.

The SLP's last iterations move the profile little, and the previous LP's final basis then often stays optimal
for the next LP (new tangents, objective and trust region): HiGHS, started from it, takes no simplex
iteration and returns its vertex, but building, scaling and factorizing its model costs ~0.7 ms at 200
gridpoints. Here the vertex is solved for directly and the basis checked for optimality (compiled, ~50 µs);
where it is not optimal the caller solves the LP with HiGHS. Every row holds the variables of one
stage, so with the variables ordered by gridpoint and the rows by their first variable the active rows make a
banded matrix: a banded LU with partial pivoting (LAPACK's gbtf2 / gbtrs, written out) solves for the vertex
and, transposed, for the rows' multipliers.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from robot_dynamics_ros.retiming.jerk.highs import HighsLP

__all__ = ["basis_vertex", "PRIMAL_TOL", "DUAL_TOL"]

#: primal feasibility tolerance (absolute: every row is scaled to a largest coefficient of 1), HiGHS's
#: (``primal_feasibility_tolerance``): the vertex meets the rows as closely as HiGHS's own answer would
PRIMAL_TOL = 1e-7
#: dual feasibility tolerance (the costs are scaled to a largest entry of 1), below HiGHS's 1e-7: a basis that
#: passes is one HiGHS's dual simplex, started from it, would stop at without an iteration
DUAL_TOL = 1e-9
#: wider bands (the active rows of some stages unevenly spread) go to HiGHS
_MAX_BAND = 64


@njit(cache=True, nogil=True)
def _band_lu(ab, kl, ku, n, ipiv):  # pragma: no cover - compiled
    # LU with partial pivoting of the band matrix ab (A[i, j] at ab[kl + ku + i - j, j]), in place (LAPACK's
    # gbtf2): L's multipliers below the diagonal, U above (width kl + ku); False where a pivot is 0
    kv = kl + ku
    ju = 0
    for j in range(n):
        km = min(kl, n - 1 - j)
        p = j
        best = abs(ab[kv, j])
        for i in range(j + 1, j + km + 1):
            v = abs(ab[kv + i - j, j])
            if v > best:
                best, p = v, i
        ipiv[j] = p
        if best == 0.0 or not np.isfinite(best):
            return False
        ju = max(ju, min(p + ku, n - 1))
        if p != j:
            for c in range(j, ju + 1):
                t = ab[kv + p - c, c]
                ab[kv + p - c, c] = ab[kv + j - c, c]
                ab[kv + j - c, c] = t
        piv = ab[kv, j]
        for i in range(j + 1, j + km + 1):
            ab[kv + i - j, j] /= piv
        for c in range(j + 1, ju + 1):
            u = ab[kv + j - c, c]
            if u != 0.0:
                for i in range(j + 1, j + km + 1):
                    ab[kv + i - c, c] -= ab[kv + i - j, j] * u
    return True


@njit(cache=True, nogil=True)
def _band_solve(ab, kl, ku, n, ipiv, x, trans):  # pragma: no cover - compiled
    # A x = rhs (trans False) or Aᵀ x = rhs (True) with _band_lu's factors, x the right-hand side in place
    kv = kl + ku
    if not trans:
        for j in range(n - 1):
            p = ipiv[j]
            if p != j:
                x[p], x[j] = x[j], x[p]
            for i in range(j + 1, min(n - 1, j + kl) + 1):
                x[i] -= ab[kv + i - j, j] * x[j]
        for i in range(n - 1, -1, -1):
            acc = x[i]
            for c in range(i + 1, min(n - 1, i + kv) + 1):
                acc -= ab[kv + i - c, c] * x[c]
            x[i] = acc / ab[kv, i]
    else:
        for c in range(n):  # Uᵀ w = rhs
            acc = x[c]
            for i in range(max(0, c - kv), c):
                acc -= ab[kv + i - c, c] * x[i]
            x[c] = acc / ab[kv, c]
        for j in range(n - 2, -1, -1):  # Lᵀ, the interchanges in reverse
            acc = x[j]
            for i in range(j + 1, min(n - 1, j + kl) + 1):
                acc -= ab[kv + i - j, j] * x[i]
            x[j] = acc
            p = ipiv[j]
            if p != j:
                x[p], x[j] = x[j], x[p]


@njit(cache=True, nogil=True)
def _vertex_kernel(ri, ci, vi, rhs, basic, rank, z, cost, max_band, y):  # pragma: no cover - compiled
    # the active rows' entries (row ri, column ci, value vi; nb rows), their bound rhs (nb,), the basic
    # columns (basic) and their order (rank: position among the unknowns), z (nv,) holding the nonbasic
    # columns' values: fills z's basic entries and the rows' multipliers y (nb,); returns False where the band
    # is wider than max_band or the matrix singular
    nb = rhs.shape[0]
    b = rhs.copy()
    first = np.full(nb, nb, np.int64)
    for e in range(ri.shape[0]):
        c = ci[e]
        if basic[c]:
            first[ri[e]] = min(first[ri[e]], rank[c])
        else:
            b[ri[e]] -= vi[e] * z[c]
    # the rows' ranks: by first unknown, ties in row order (a counting sort; every row has a basic entry in a
    # nonsingular matrix, first == nb otherwise and the band check or the LU refuses it)
    count = np.zeros(nb + 2, np.int64)
    for r in range(nb):
        count[first[r] + 1] += 1
    for k in range(1, nb + 2):
        count[k] += count[k - 1]
    row_rank = np.empty(nb, np.int64)
    for r in range(nb):
        row_rank[r] = count[first[r]]
        count[first[r]] += 1
    kl = 0
    ku = 0
    for e in range(ri.shape[0]):
        if basic[ci[e]]:
            d = row_rank[ri[e]] - rank[ci[e]]
            kl = max(kl, d)
            ku = max(ku, -d)
    if kl + ku > max_band:
        return False
    ab = np.zeros((2 * kl + ku + 1, nb))
    for e in range(ri.shape[0]):
        c = ci[e]
        if basic[c]:
            ab[kl + ku + row_rank[ri[e]] - rank[c], rank[c]] += vi[e]
    ipiv = np.empty(nb, np.int64)
    if not _band_lu(ab, kl, ku, nb, ipiv):
        return False
    x = np.empty(nb)
    for r in range(nb):
        x[row_rank[r]] = b[r]
    _band_solve(ab, kl, ku, nb, ipiv, x, False)
    yp = np.zeros(nb)
    for c in range(z.shape[0]):
        if basic[c]:
            z[c] = x[rank[c]]
            yp[rank[c]] = cost[c]
    _band_solve(ab, kl, ku, nb, ipiv, yp, True)
    for r in range(nb):
        y[r] = yp[row_rank[r]]
    return True


#: HighsBasisStatus values (:class:`HighsLP`), as compile-time constants of the kernels
_LOWER, _BASIC, _UPPER = HighsLP.LOWER, HighsLP.BASIC, HighsLP.UPPER


@njit(cache=True, nogil=True, error_model="numpy")
def _optimal_vertex_kernel(cost, eq_ptr, eq_idx, eq_val, cols, data, b, lo, hi, col_status, row_status, by_key,
                           max_band, primal_tol, dual_tol, z):  # pragma: no cover - compiled
    # basis_vertex's test, z (nv,) filled with the vertex; True where the basis is optimal (see there)
    nv = cost.shape[0]
    me = eq_ptr.shape[0] - 1
    m = b.shape[0]
    for r in range(me):
        if row_status[r] == _BASIC:
            return False
    basic = np.empty(nv, np.bool_)
    nb = 0
    for c in range(nv):
        basic[c] = col_status[c] == _BASIC
        if basic[c]:
            z[c] = 0.0
            nb += 1
        else:
            z[c] = hi[c] if col_status[c] == _UPPER else lo[c]
            if not np.isfinite(z[c]):
                return False
    nact = 0
    for r in range(m):
        nact += row_status[me + r] != _BASIC
    if me + nact != nb:
        return False
    # the active rows' entries: the equalities, then the active ≤ rows (row index in that order)
    ne = eq_ptr[me] + 3 * nact
    ri = np.empty(ne, np.int64)
    ci = np.empty(ne, np.int64)
    vi = np.empty(ne)
    rhs = np.zeros(nb)
    e = 0
    for r in range(me):
        for k in range(eq_ptr[r], eq_ptr[r + 1]):
            ri[e] = r
            ci[e] = eq_idx[k]
            vi[e] = eq_val[k]
            e += 1
    a = me
    for r in range(m):
        if row_status[me + r] != _BASIC:
            rhs[a] = b[r]
            for k in range(3):
                ri[e] = a
                ci[e] = cols[r, k]
                vi[e] = data[r, k]
                e += 1
            a += 1
    # the basic columns' positions among the unknowns: in the order of their keys
    rank = np.zeros(nv, np.int64)
    nxt = 0
    for c in by_key:
        if basic[c]:
            rank[c] = nxt
            nxt += 1
    y = np.empty(nb)
    if not _vertex_kernel(ri, ci, vi, rhs, basic, rank, z, cost, max_band, y):
        return False
    for c in range(nv):
        if not np.isfinite(z[c]) or z[c] < lo[c] - primal_tol or z[c] > hi[c] + primal_tol:
            return False
    for r in range(nb):
        if not np.isfinite(y[r]) or (r >= me and y[r] > dual_tol):
            return False
    for r in range(m):
        if b[r] - (data[r, 0] * z[cols[r, 0]] + data[r, 1] * z[cols[r, 1]] + data[r, 2] * z[cols[r, 2]]) < -primal_tol:
            return False
    # reduced costs c − Aᵀ y of the nonbasic columns
    d = cost.copy()
    for k in range(ne):
        d[ci[k]] -= vi[k] * y[ri[k]]
    for c in range(nv):
        if basic[c] or lo[c] == hi[c]:
            continue
        if (col_status[c] == _UPPER and d[c] > dual_tol) or (col_status[c] != _UPPER and d[c] < -dual_tol):
            return False
    return True


def basis_vertex(cost, A_eq, rows, lo, hi, basis, key):
    """The optimum of the LP of :class:`~robot_dynamics_ros.retiming.jerk.highs.HighsLP` (same arguments:
    min cost·z, A_eq z = 0, rows A z ≤ b, lo ≤ z ≤ hi) if ``basis`` (col_status, row_status) is an optimal
    basis of it, else None.

    The vertex: nonbasic rows at their bound (the equalities, the ≤ rows at b), nonbasic columns at theirs,
    the basic columns solved for. Optimal when primal feasible (every column within its bounds and every
    row of ``rows`` met, within :data:`PRIMAL_TOL`) and dual feasible (the multipliers of the active ≤ rows
    ≤ :data:`DUAL_TOL`, the reduced costs of the columns at their lower bound ≥ −DUAL_TOL and at their upper
    bound ≤ DUAL_TOL; fixed columns either). ``key`` (nv,): an order of the columns in which every row's
    columns are close together (the gridpoint of each variable). None also where the basis is not square, the
    band is wider than ``_MAX_BAND`` or the matrix singular. Compiled (:func:`_optimal_vertex_kernel`).
    """
    col_status, row_status = basis
    cols, data, b = rows
    z = np.empty(cost.shape[0])
    if not _optimal_vertex_kernel(np.ascontiguousarray(cost, float), A_eq.indptr, A_eq.indices, A_eq.data,
                                  np.ascontiguousarray(cols), np.ascontiguousarray(data, float),
                                  np.ascontiguousarray(b, float), np.asarray(lo, float), np.asarray(hi, float),
                                  col_status, row_status, np.argsort(key, kind="stable"), _MAX_BAND, PRIMAL_TOL,
                                  DUAL_TOL, z):
        return None
    return z
