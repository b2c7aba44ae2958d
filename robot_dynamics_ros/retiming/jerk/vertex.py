"""An LP's answer from a basis without HiGHS: :func:`basis_vertex` (a basis known to be optimal) and
:func:`dual_simplex` (a basis a few pivots from the optimum).

The SLP's last iterations move the profile little, and the previous LP's final basis then often stays optimal,
or a few pivots from the optimum, for the next LP (new tangents, objective and trust region); an optimal basis
with violated rows added basic (the working-set step) is dual feasible. HiGHS, started from such a basis,
takes none or a few simplex iterations, but building, scaling and factorizing its model costs ~0.5 ms at 200
gridpoints. Here the vertex is solved for directly, the basis checked for optimality and otherwise dual
simplex pivots taken (compiled, ~10–80 µs per pivot at 40–200 gridpoints; a start that is not dual feasible
made so by flipping bounds); where that fails the caller solves the LP with HiGHS. Every row holds the variables of one stage, so with the variables ordered
by gridpoint and the rows by their first variable the active rows make a banded matrix: a banded LU with
partial pivoting (LAPACK's gbtf2 / gbtrs, written out; a column's band stored contiguously) solves for the
vertex and, transposed, for the rows' multipliers and a pivot's row. A pivot at 200 gridpoints (~400 columns,
band kl = ku = 3) costs ~38 µs, spread over the whole pass: building and factorizing the band matrix ~16 µs
(the LU itself ~5), the three band solves ~10 µs, the passes over the rows and columns (right-hand side,
reduced costs, pricing, ratio test) the rest; an updated factorization (Forrest–Tomlin) would save only
the first part, keeping the solves and passes. The workspaces are allocated once per call.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from robot_dynamics_ros.retiming.jerk.highs import HighsLP

__all__ = ["basis_vertex", "dual_simplex", "PRIMAL_TOL", "DUAL_TOL"]

#: primal feasibility tolerance (absolute: every row is scaled to a largest coefficient of 1), HiGHS's
#: (``primal_feasibility_tolerance``): the vertex meets the rows as closely as HiGHS's own answer would
PRIMAL_TOL = 1e-7
#: dual feasibility tolerance (the costs are scaled to a largest entry of 1), below HiGHS's 1e-7: a basis that
#: passes is one HiGHS's dual simplex, started from it, would stop at without an iteration
DUAL_TOL = 1e-9
#: wider bands (the active rows of some stages unevenly spread) go to HiGHS
_MAX_BAND = 64
#: smallest |rate| of an entering quantity in a dual simplex pivot (the rows are scaled to a largest
#: coefficient of 1): a smaller pivot is refused, as HiGHS's ``small_matrix_value``-sized entries are
_PIVOT_TOL = 1e-9
#: dual infeasibility a basis on the way to the optimum may have (HiGHS's ``dual_feasibility_tolerance``)
_DUAL_TOL_PIVOTS = 1e-7
#: artificial bound of the slack of an active row whose multiplier has the wrong sign at the start (the rows
#: are scaled to a largest coefficient of 1): a dual simplex start from a basis that is not dual feasible
_SLACK_BOX = 1.0


@njit(cache=True, nogil=True)
def _band_lu(ab, kl, ku, n, ipiv):  # pragma: no cover - compiled
    # LU with partial pivoting of the band matrix ab (A[i, j] at ab[j, kl + ku + i - j]: a column's band
    # contiguous, LAPACK's layout transposed), in place (LAPACK's gbtf2): L's multipliers below the diagonal,
    # U above (width kl + ku); False where a pivot is 0
    kv = kl + ku
    ju = 0
    for j in range(n):
        km = min(kl, n - 1 - j)
        p = j
        best = abs(ab[j, kv])
        for i in range(j + 1, j + km + 1):
            v = abs(ab[j, kv + i - j])
            if v > best:
                best, p = v, i
        ipiv[j] = p
        if best == 0.0 or not np.isfinite(best):
            return False
        ju = max(ju, min(p + ku, n - 1))
        if p != j:
            for c in range(j, ju + 1):
                t = ab[c, kv + p - c]
                ab[c, kv + p - c] = ab[c, kv + j - c]
                ab[c, kv + j - c] = t
        piv = ab[j, kv]
        for i in range(j + 1, j + km + 1):
            ab[j, kv + i - j] /= piv
        for c in range(j + 1, ju + 1):
            u = ab[c, kv + j - c]
            if u != 0.0:
                for i in range(j + 1, j + km + 1):
                    ab[c, kv + i - c] -= ab[j, kv + i - j] * u
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
                x[i] -= ab[j, kv + i - j] * x[j]
        for i in range(n - 1, -1, -1):
            acc = x[i]
            for c in range(i + 1, min(n - 1, i + kv) + 1):
                acc -= ab[c, kv + i - c] * x[c]
            x[i] = acc / ab[i, kv]
    else:
        for c in range(n):  # Uᵀ w = rhs
            acc = x[c]
            for i in range(max(0, c - kv), c):
                acc -= ab[c, kv + i - c] * x[i]
            x[c] = acc / ab[c, kv]
        for j in range(n - 2, -1, -1):  # Lᵀ, the interchanges in reverse
            acc = x[j]
            for i in range(j + 1, min(n - 1, j + kl) + 1):
                acc -= ab[j, kv + i - j] * x[i]
            x[j] = acc
            p = ipiv[j]
            if p != j:
                x[p], x[j] = x[j], x[p]


@njit(cache=True, nogil=True)
def _band_factor(ri, ci, vi, ne, basic, rank, nb, max_band, buf, ipiv, row_rank, first, last, count,
                 er):  # pragma: no cover - compiled
    # the active rows' entries (row ri, column ci, value vi; the first ne; nb rows) restricted to the basic
    # columns (basic; rank: a column's position among the unknowns) as a band matrix in the workspace buf,
    # LU-factorized: (ab, kl, ku, ok), row_rank (the rows' positions) and ipiv filled; not ok where the band is
    # wider than max_band or the matrix singular. first, last, count, er: scratch (nb,), (nb,), (nb + 2,), (ne,)
    first[:nb] = nb
    last[:nb] = -1
    for e in range(ne):  # each entry's unknown (-1: a nonbasic column), looked up once
        c = ci[e]
        k = rank[c] if basic[c] else -1
        er[e] = k
        if k >= 0:
            r = ri[e]
            if k < first[r]:
                first[r] = k
            if k > last[r]:
                last[r] = k
    # the rows' ranks: by first unknown, ties in row order (a counting sort; every row has a basic entry in a
    # nonsingular matrix, first == nb otherwise and the band check or the LU refuses it)
    count[:nb + 2] = 0
    for r in range(nb):
        count[first[r] + 1] += 1
    for k in range(1, nb + 2):
        count[k] += count[k - 1]
    for r in range(nb):
        row_rank[r] = count[first[r]]
        count[first[r]] += 1
    kl = 0  # the band: an entry (row position i, unknown k) lies between i − kl and i + ku
    ku = 0
    for r in range(nb):
        if last[r] >= 0:
            kl = max(kl, row_rank[r] - first[r])
            ku = max(ku, last[r] - row_rank[r])
    if kl + ku > max_band:
        return buf[:1].reshape((1, 1)), kl, ku, False
    kv = kl + ku
    w = 2 * kl + ku + 1
    if nb * w <= buf.shape[0]:
        flat = buf[:nb * w]
        flat[:] = 0.0
        ab = flat.reshape((nb, w))
    else:  # a band wider than the workspace was sized for (rare): its own array
        ab = np.zeros((nb, w))
    for e in range(ne):
        k = er[e]
        if k >= 0:
            ab[k, kv + row_rank[ri[e]] - k] += vi[e]
    return ab, kl, ku, _band_lu(ab, kl, ku, nb, ipiv)


#: HighsBasisStatus values (:class:`HighsLP`), as compile-time constants of the kernels
_LOWER, _BASIC, _UPPER = HighsLP.LOWER, HighsLP.BASIC, HighsLP.UPPER


@njit(cache=True, nogil=True, error_model="numpy")
def _active_entries(eq_ptr, eq_idx, eq_val, cols, data, b, row_status, nb, ri, ci, vi, rhs,
                    which):  # pragma: no cover - compiled
    # the active rows' entries into (ri, ci, vi): the equalities, then the active ≤ rows (row index a in that
    # order), their right-hand sides into rhs (nb,) and the ≤ row of each active row into which (-1: an
    # equality); returns the number of entries
    me = eq_ptr.shape[0] - 1
    m = b.shape[0]
    rhs[:nb] = 0.0
    which[:nb] = -1
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
            rhs[a] = b[r] - (_SLACK_BOX if row_status[me + r] == _LOWER else 0.0)
            which[a] = r
            for k in range(3):
                ri[e] = a
                ci[e] = cols[r, k]
                vi[e] = data[r, k]
                e += 1
            a += 1
    return e


@njit(cache=True, nogil=True, error_model="numpy")
def _leaving(z, basic, lo, hi, cols, data, b, row_status, me, primal_tol):  # pragma: no cover - compiled
    # the most violated basic quantity at z: (column c or -1, ≤ row r or -1, direction +1 / -1 it must move
    # (up to lo, down to hi or b)); (-1, -1, 0) where z is primal feasible within primal_tol
    worst = primal_tol
    lc, lr, direction = -1, -1, 0
    for c in range(z.shape[0]):
        if basic[c]:
            if lo[c] - z[c] > worst:
                worst, lc, lr, direction = lo[c] - z[c], c, -1, 1
            elif z[c] - hi[c] > worst:
                worst, lc, lr, direction = z[c] - hi[c], c, -1, -1
    for r in range(b.shape[0]):
        over = (data[r, 0] * z[cols[r, 0]] + data[r, 1] * z[cols[r, 1]] + data[r, 2] * z[cols[r, 2]]) - b[r]
        if row_status[me + r] == _BASIC and over > worst:
            worst, lc, lr, direction = over, -1, r, -1
    return lc, lr, direction


@njit(cache=True, nogil=True, error_model="numpy")
def _entering(alpha, pi, d, y, basic, col_status, row_status, which, lo, hi, me, nb, direction,
              dual_tol):  # pragma: no cover - compiled
    # dual ratio test (Harris's two passes): the entering quantity, among those whose allowed step moves the
    # leaving one (rates alpha per column, -pi per active row's slack) towards its bound (direction), is the
    # one whose dual slack (reduced cost in its allowed direction) reaches 0 first, the largest |rate| among
    # the near-ties: (column or -1, active row index or -1)
    nv = alpha.shape[0]
    bound = np.inf
    best_rate, enter_c, enter_a = 0.0, -1, -1
    for phase in range(2):
        for c in range(nv):
            if basic[c] or lo[c] == hi[c]:
                continue
            step = -1.0 if col_status[c] == _UPPER else 1.0
            rate = alpha[c] * step * direction
            if rate > _PIVOT_TOL:
                dual_slack = max(d[c] * step, 0.0)
                if phase == 0:
                    bound = min(bound, (dual_slack + 0.5 * dual_tol) / rate)
                elif dual_slack / rate <= bound and rate > best_rate:
                    best_rate, enter_c, enter_a = rate, c, -1
        for a in range(me, nb):
            step = -1.0 if row_status[me + which[a]] == _LOWER else 1.0  # the slack's allowed step
            rate = -pi[a] * step * direction
            if rate > _PIVOT_TOL:
                dual_slack = max(-y[a] * step, 0.0)
                if phase == 0:
                    bound = min(bound, (dual_slack + 0.5 * dual_tol) / rate)
                elif dual_slack / rate <= bound and rate > best_rate:
                    best_rate, enter_c, enter_a = rate, -1, a
    return enter_c, enter_a


@njit(cache=True, nogil=True, error_model="numpy")
def _optimal_vertex_kernel(cost, eq_ptr, eq_idx, eq_val, cols, data, b, lo, hi, col_status, row_status, col_order,
                           max_band, primal_tol, dual_tol, max_pivots, z):  # pragma: no cover - compiled
    # basis_vertex's test and dual_simplex's pivots: z (nv,) filled with the vertex, col_status and row_status
    # (the basis) updated in place by the pivots; True where the final basis is optimal (see basis_vertex)
    nv = cost.shape[0]
    me = eq_ptr.shape[0] - 1
    m = b.shape[0]
    for r in range(me):
        if row_status[r] == _BASIC:
            return False
    basic = np.empty(nv, np.bool_)
    rank = np.zeros(nv, np.int64)
    d = np.empty(nv)
    alpha = np.empty(nv)
    # workspaces of every pivot (nb ≤ nv: a square basis)
    nemax = eq_ptr[me] + 3 * m
    ri = np.empty(nemax, np.int64)
    ci = np.empty(nemax, np.int64)
    vi = np.empty(nemax)
    rhs = np.empty(nv)
    which = np.empty(nv, np.int64)
    buf = np.empty(nv * 16)  # the band matrix: kl = ku = 3 (one row per stage) take 10 entries per column
    ipiv = np.empty(nv, np.int64)
    row_rank = np.empty(nv, np.int64)
    first = np.empty(nv, np.int64)
    last = np.empty(nv, np.int64)
    count = np.empty(nv + 2, np.int64)
    x = np.empty(nv)
    yp = np.empty(nv)
    y = np.empty(nv)
    t = np.empty(nv)
    pi = np.empty(nv)
    er = np.empty(nemax, np.int64)
    for pivot in range(max_pivots + 1):
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
        if me + nact != nb or nb > nv:
            return False
        ne = _active_entries(eq_ptr, eq_idx, eq_val, cols, data, b, row_status, nb, ri, ci, vi, rhs, which)
        # the basic columns' positions among the unknowns: in col_order
        nxt = 0
        for c in col_order:
            if basic[c]:
                rank[c] = nxt
                nxt += 1
        ab, kl, ku, ok = _band_factor(ri, ci, vi, ne, basic, rank, nb, max_band, buf, ipiv, row_rank, first,
                                      last, count, er)
        if not ok:
            return False
        # the vertex: B z_C = rhs − A_N z_N; the multipliers: Bᵀ y = c_C
        for e in range(ne):
            if not basic[ci[e]]:
                rhs[ri[e]] -= vi[e] * z[ci[e]]
        for r in range(nb):
            x[row_rank[r]] = rhs[r]
        _band_solve(ab, kl, ku, nb, ipiv, x, False)
        yp[:nb] = 0.0
        for c in range(nv):
            if basic[c]:
                z[c] = x[rank[c]]
                yp[rank[c]] = cost[c]
        _band_solve(ab, kl, ku, nb, ipiv, yp, True)
        for r in range(nb):
            y[r] = yp[row_rank[r]]
            if not np.isfinite(y[r]):
                return False
        for c in range(nv):
            if not np.isfinite(z[c]):
                return False
        # dual feasibility: the multipliers of the active ≤ rows and the reduced costs c − Aᵀ y of the nonbasic
        # columns; the pivots keep it within HiGHS's tolerance (_DUAL_TOL_PIVOTS: rounding in near-degenerate
        # pivots), the answer is accepted within dual_tol only
        for c in range(nv):
            d[c] = cost[c]
        for e in range(ne):
            d[ci[e]] -= vi[e] * y[ri[e]]
        worst, boxed, flipped = 0.0, 0, False
        for a in range(me, nb):
            at_box = row_status[me + which[a]] == _LOWER  # the row's slack at its artificial bound
            boxed += at_box
            v = -y[a] if at_box else y[a]
            if v > _DUAL_TOL_PIVOTS and pivot == 0 and max_pivots > 0:
                # a start that is not dual feasible (a new objective): the row's slack s ≥ 0 is boxed by
                # s ≤ _SLACK_BOX and put at that bound, where its multiplier has the right sign; the answer
                # must have left every such bound (else it is not this LP's optimum)
                row_status[me + which[a]] = _LOWER
                flipped = True
            worst = max(worst, v)
        for c in range(nv):
            if not basic[c] and lo[c] != hi[c]:
                v = d[c] if col_status[c] == _UPPER else -d[c]
                if v > _DUAL_TOL_PIVOTS and pivot == 0 and max_pivots > 0 and np.isfinite(lo[c] + hi[c]):
                    col_status[c] = _LOWER if col_status[c] == _UPPER else _UPPER  # to its other bound
                    flipped = True
                worst = max(worst, v)
        if flipped:
            continue  # the start with bounds flipped: dual feasible
        if worst > _DUAL_TOL_PIVOTS:
            return False
        lc, lr, direction = _leaving(z, basic, lo, hi, cols, data, b, row_status, me, primal_tol)
        if direction == 0:  # primal and dual feasible: optimal, unless an artificial bound is active
            return boxed == 0 and worst <= dual_tol
        if pivot == max_pivots:
            return False
        # the pivot row: the rate of change of the leaving quantity L (z_lc, or row lr's value A_lr z) per unit
        # step of each nonbasic quantity: π = B⁻ᵀ e_lc resp. B⁻ᵀ A_lr,Cᵀ, then dL/dz_j = A_lr,j − πᵀ A_j (the
        # first term for a row only) and dL/ds_a = −π_a for an active row's slack s_a ≥ 0
        t[:nb] = 0.0
        if lc >= 0:
            t[rank[lc]] = 1.0
        else:
            for k in range(3):
                if basic[cols[lr, k]]:
                    t[rank[cols[lr, k]]] += data[lr, k]
        _band_solve(ab, kl, ku, nb, ipiv, t, True)
        for r in range(nb):
            pi[r] = t[row_rank[r]]
        for c in range(nv):
            alpha[c] = 0.0
        if lr >= 0:
            for k in range(3):
                alpha[cols[lr, k]] += data[lr, k]
        for e in range(ne):
            alpha[ci[e]] -= pi[ri[e]] * vi[e]
        enter_c, enter_a = _entering(alpha, pi, d, y, basic, col_status, row_status, which, lo, hi, me, nb,
                                     direction, dual_tol)
        if enter_c < 0 and enter_a < 0:
            return False  # no entering quantity: the LP is infeasible (or numerically so); HiGHS decides
        if lc >= 0:
            col_status[lc] = _LOWER if direction > 0 else _UPPER
        else:
            row_status[me + lr] = _UPPER
        if enter_c >= 0:
            col_status[enter_c] = _BASIC
        else:
            row_status[me + which[enter_a]] = _BASIC
    return False


def _run(cost, A_eq, rows, lo, hi, basis, col_order, max_pivots):
    col_status, row_status = basis
    cols, data, b = rows
    z = np.empty(cost.shape[0])
    ok = _optimal_vertex_kernel(np.ascontiguousarray(cost, float), A_eq.indptr, A_eq.indices, A_eq.data,
                                np.ascontiguousarray(cols), np.ascontiguousarray(data, float),
                                np.ascontiguousarray(b, float), np.asarray(lo, float), np.asarray(hi, float),
                                col_status, row_status, np.asarray(col_order, np.int64), _MAX_BAND, PRIMAL_TOL,
                                DUAL_TOL, max_pivots, z)
    return z if ok else None


def basis_vertex(cost, A_eq, rows, lo, hi, basis, col_order):
    """The optimum of the LP of :class:`~robot_dynamics_ros.retiming.jerk.highs.HighsLP` (same arguments:
    min cost·z, A_eq z = 0, rows A z ≤ b, lo ≤ z ≤ hi) if ``basis`` (col_status, row_status) is an optimal
    basis of it, else None.

    The vertex: nonbasic rows at their bound (the equalities, the ≤ rows at b), nonbasic columns at theirs,
    the basic columns solved for. Optimal when primal feasible (every column within its bounds and every
    row of ``rows`` met, within :data:`PRIMAL_TOL`) and dual feasible (the multipliers of the active ≤ rows
    ≤ :data:`DUAL_TOL`, the reduced costs of the columns at their lower bound ≥ −DUAL_TOL and at their upper
    bound ≤ DUAL_TOL; fixed columns either). ``col_order`` (nv,): the columns in an order in which every
    row's columns are close together (by gridpoint). None also where the basis is not square, the
    band is wider than ``_MAX_BAND`` or the matrix singular. Compiled (:func:`_optimal_vertex_kernel`).
    """
    return _run(cost, A_eq, rows, lo, hi, (basis[0].copy(), basis[1].copy()), col_order, 0)


def dual_simplex(cost, A_eq, rows, lo, hi, basis, col_order, max_pivots):
    """The LP of :func:`basis_vertex` from ``basis`` (col_status, row_status; e.g. an optimal basis of the LP
    with fewer rows, the added rows basic, or of the previous LP) by at most ``max_pivots`` dual simplex
    pivots (the most violated basic quantity leaves, Harris's ratio test picks the entering one; each pivot
    refactorizes the band matrix). A start that is not dual feasible is made so first: a column with the
    wrong reduced-cost sign to its other bound (if finite), an active row whose multiplier has the wrong
    sign to an artificial bound of its slack (:data:`_SLACK_BOX`) that the answer must have left.
    Returns (z (nv,) or None, the basis reached, rows at an artificial bound back at b): z where that basis
    passes :func:`basis_vertex`'s test (the LP's optimum), None where more pivots are needed, an artificial
    bound is still active, the LP is infeasible or the band matrix too wide or singular.

    Sources: the dual simplex with bounded variables, its bound flips and the artificial bounds of a start
    that is not dual feasible, A. Koberstein, "The dual simplex method, techniques for a fast and stable
    implementation", PhD thesis, Universität Paderborn, 2005; the two-pass ratio test, P. M. J. Harris,
    "Pivot selection methods of the Devex LP code", Math. Programming 5, 1973."""
    reached = (basis[0].copy(), basis[1].copy())
    z = _run(cost, A_eq, rows, lo, hi, reached, col_order, max_pivots)
    ineq = reached[1][A_eq.shape[0]:]
    ineq[ineq == HighsLP.LOWER] = HighsLP.UPPER  # slacks at an artificial bound: back at their bound 0
    return z, reached
