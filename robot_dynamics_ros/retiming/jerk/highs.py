"""The linear programs of the jerk-limited timing: :class:`HighsLP`, HiGHS's dual simplex through the bindings
scipy ships, with rows added to a solved model and a basis given or read back as small int arrays.

This is the package's one use of a private scipy module (``scipy.optimize._highspy._core``); ``linprog``
can neither continue from a basis after adding rows nor start from a given basis.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

__all__ = ["HighsLP", "lp_result"]

#: per thread: the HiGHS instance of the last :class:`HighsLP` and a weak reference to that LP. An LP made
#: after the previous one is gone takes the instance over (``clearModel``: model and solver state dropped,
#: the options kept) instead of constructing and configuring another (~55 µs, as much as a warm-started
#: small LP's simplex iterations)
_REUSE = threading.local()


class _LPResult:
    __slots__ = ("status", "x", "message")


def lp_result(status, x, message):
    """An LP answer as :meth:`HighsLP.solve` returns it (``status``, ``x``, ``message``)."""
    out = _LPResult()
    out.status, out.x, out.message = status, x, message
    return out


class HighsLP:
    """min cost·z s.t. A_eq z = 0, A z ≤ b, lo ≤ z ≤ hi — HiGHS's dual simplex (the HiGHS that scipy
    ships, through its bindings ``scipy.optimize._highspy._core``, because ``linprog`` can neither add rows to a
    solved model and continue from its basis nor start from a given basis).

    Args: cost (nv,); A_eq (me, nv) in CSR form (``indptr``, ``indices``, ``data``, ``nnz``, ``shape``: a
    scipy CSR matrix or :class:`~robot_dynamics_ros.retiming.jerk.rows.EqualityRows`); rows: the inequality
    rows A z ≤ b as (cols, data, b), cols (m, 3) distinct column indices per row, data (m, 3) their
    coefficients, b (m,) (in the model after A_eq, in that order); lo, hi (nv,) (±inf: unbounded); basis:
    None (slack basis) or (col_status (nv,), row_status (me + m,)) int arrays as returned by :meth:`basis`
    for a model with the same columns and rows (the values of HiGHS's ``HighsBasisStatus``: :attr:`LOWER`,
    :attr:`BASIC`, :attr:`UPPER`), as many basic as the model has rows. It is given to HiGHS as not alien:
    no factorization at ``setBasis`` (~0.5 ms at 1 000 rows, another one follows when the solve starts); a
    singular one (a guess, or a previous LP's final basis under changed coefficients) is repaired when HiGHS
    factorizes it at the solve's start (slack columns swapped in for the deficient ones). ``solve()`` /
    ``add_rows_and_solve(rows)`` return an object with ``status`` (0: optimal, 2: infeasible, 3: unbounded,
    4: other), ``x`` (nv,) and ``message``.
    """

    @staticmethod
    def _core():
        # imported on the first jerk-limited request: HiGHS and its bindings add ~27 MB to a process (the
        # retiming service node) that may never receive one; a private module, so a scipy upgrade may move it
        try:
            from scipy.optimize._highspy import _core
        except ImportError as exc:
            raise ImportError("jerk-limited timing needs the HiGHS bindings scipy ships "
                              "(scipy.optimize._highspy._core, present in scipy 1.17)") from exc
        return _core

    #: values of ``HighsBasisStatus``: nonbasic at the lower bound, basic, nonbasic at the upper bound
    LOWER, BASIC, UPPER = 0, 1, 2

    @staticmethod
    def _status_members():
        # indexed by value: statuses travel as small ints, converted to the enum only at setBasis (an enum
        # comparison per row costs more than the simplex iterations of a warm-started LP)
        e = HighsLP._core().HighsBasisStatus
        return tuple(sorted(e.__members__.values(), key=lambda m: m.value))

    @staticmethod
    def _status_objects():
        # the enum members as an object array: a basis (int8 values) becomes the list setBasis takes by one
        # fancy index and tolist
        arr = getattr(HighsLP, "_members_arr", None)
        if arr is None:
            arr = HighsLP._members_arr = np.array(HighsLP._status_members(), dtype=object)
        return arr

    def _instance(self):
        """A HiGHS instance for this LP: the thread's last one, cleared, if its LP is gone, else a new one."""
        h, owner = getattr(_REUSE, "h", None), getattr(_REUSE, "owner", None)
        if h is not None and owner() is None:
            h.clearModel()
        else:
            h = self._new_instance()
        _REUSE.h, _REUSE.owner = h, weakref.ref(self)
        return h

    def _new_instance(self):
        h = self._hs._Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)  # these LPs are too small for parallel simplex to pay on shared cores
        h.setOptionValue("simplex_strategy", 1)  # dual simplex
        # Devex pricing: steepest-edge weights cost a factorization solve per row at every (re)start, more
        # than the few iterations a warm start then needs
        h.setOptionValue("simplex_dual_edge_weight_strategy", 1)
        # no presolve: the rows are already scaled and without redundancy, presolve costs more than it saves
        # on these LPs and would discard a given basis
        h.setOptionValue("presolve", "off")
        return h

    def __init__(self, cost, A_eq, rows, lo, hi, basis=None):
        hs = self._hs = self._core()
        nc = A_eq.shape[1]
        me = A_eq.shape[0]
        h = self._instance()
        # columns and rows through addCols / addRows, whose numpy arguments go in as buffers (a HighsLp's
        # fields convert element by element: ~20 µs more per LP at 200 gridpoints)
        none = np.zeros(0, np.int32)
        h.addCols(nc, np.asarray(cost, float), np.asarray(lo, float), np.asarray(hi, float), 0, none, none,
                  np.zeros(0))
        h.addRows(me, np.zeros(me), np.zeros(me), A_eq.nnz, A_eq.indptr[:-1].astype(np.int32),
                  A_eq.indices.astype(np.int32), A_eq.data)
        self._h = h
        self._lo, self._hi, self._me, self._x = np.asarray(lo, float), np.asarray(hi, float), me, None
        self._add(rows)
        if basis is not None:
            members = self._status_objects()
            b = hs.HighsBasis()
            b.col_status = members[basis[0]].tolist()
            b.row_status = members[basis[1]].tolist()
            b.valid = True
            b.alien = False
            h.setBasis(b)

    def solve(self):
        h, hs = self._h, self._hs
        h.run()
        st = h.getModelStatus()
        out = _LPResult()
        out.message = h.modelStatusToString(st)
        codes = HighsLP.__dict__.get("_codes")
        if codes is None:
            codes = HighsLP._codes = {hs.HighsModelStatus.kOptimal: 0, hs.HighsModelStatus.kInfeasible: 2,
                                      hs.HighsModelStatus.kUnbounded: 3}
        out.status = codes.get(st, 4)
        out.x = self._x = np.array(h.getSolution().col_value) if out.status == 0 else None
        return out

    def _add(self, rows):
        cols, data, b = rows
        m = b.shape[0]
        self._h.addRows(m, np.full(m, -np.inf), np.ascontiguousarray(b, float), 3 * m,
                        np.arange(0, 3 * m, 3, dtype=np.int32), np.ascontiguousarray(cols, np.int32).ravel(),
                        np.ascontiguousarray(data, float).ravel())

    def add_rows_and_solve(self, rows):
        self._add(rows)
        return self.solve()

    def basis(self):
        """(col_status (nv,), row_status (rows,)): the basis of the last optimal solve, int8 arrays of
        ``HighsBasisStatus`` values, rows in model order; None if HiGHS has none.

        From HiGHS's list of basic variables (an int array, where reading the statuses would create one
        enum object per row): every other column is at the bound its value is nearest, every other
        inequality row at its upper bound (its lower one is −inf), every other equality row at its (only)
        value, given as lower."""
        status, basic = self._h.getBasicVariables()
        if status != self._hs.HighsStatus.kOk or self._x is None:
            return None
        x, lo, hi = self._x, self._lo, self._hi
        with np.errstate(invalid="ignore"):
            upper = np.isfinite(hi) & (np.abs(x - hi) < np.abs(x - lo))
        col = np.where(upper, HighsLP.UPPER, HighsLP.LOWER).astype(np.int8)
        row = np.full(self._h.getNumRow(), HighsLP.UPPER, np.int8)
        row[:self._me] = HighsLP.LOWER
        col[basic[basic >= 0]] = HighsLP.BASIC
        row[-1 - basic[basic < 0]] = HighsLP.BASIC  # a basic row r is listed as −1 − r
        return col, row
