"""One jerk-limited solve on fixed gridpoints by sequential linear programming (the method is in
:mod:`robot_dynamics_ros.retiming.jerk`): the starting profile from a coarser grid, the LPs on a working set
of rows warm-started from the previous basis, and the SLP iteration with its trust region and line search.
"""
from __future__ import annotations

import time

import numpy as np

from robot_dynamics_ros.retiming.jerk.highs import HighsLP, lp_result
from robot_dynamics_ros.retiming.jerk.profile import JerkSolution, stage_times, time_gradient
from robot_dynamics_ros.retiming.jerk.rows import JerkRows, build_rows
from robot_dynamics_ros.retiming.jerk.vertex import dual_simplex

#: working set of an LP: the rows whose slack (rows scaled to a largest coefficient of 1) at the previous
#: answer is below this, and the least-slack jerk rows of each stage (:meth:`JerkRows.working_set`); rows
#: added after a solve: the violated ones and those with slack below _WS_ADD. HiGHS's time per solve and
#: per pivot grows with the model's rows (~1 100 on the case's full-size LPs at 0.05, ~1 850 at 0.3);
#: below 0.05 the rows added after the solve make up for it
_WS_SLACK = 0.05
_WS_ADD = 0.02
#: trust region of the SLP steps: x at every gridpoint within [x̄ / _TRUST, _TRUST x̄]
_TRUST = 2.0
#: dual simplex pivots from a previous basis before HiGHS takes over (each refactorizes the band matrix:
#: ~10–80 µs at 40–200 gridpoints; the LPs after the first of a solve take a few)
_PIVOTS = 30
#: the first linearization point comes from the problem on the knots (where at most half the gridpoints)
#: or every _COARSE-th gridpoint (paths of at least _COARSE_MIN gridpoints, recursively), solved with at
#: most _COARSE_ITERATIONS SLP iterations
_COARSE = 4
_COARSE_MIN = 40
_COARSE_ITERATIONS = 4
#: a coarse grid whose own start (a still coarser grid) fails it is solved again from the TOPP-RA profile
#: with at most this many SLP iterations: the climb from that first profile (far below the answer) takes
#: more than the iterations from a good start
_RETRY_ITERATIONS = 8


def _extended(order, basis, add):
    """The rows ``order`` and their ``basis`` (col_status, row_status) with the rows ``add`` appended, basic (a
    basis of the larger model, dual feasible where ``basis`` was)."""
    return np.concatenate((order, add)), (basis[0], np.concatenate((basis[1], np.full(add.shape[0], HighsLP.BASIC,
                                                                                       np.int8))))


class _WorkingSetLP:
    """The LPs of one solve on a working set of ``rows``: each solved on the rows with little slack at a
    reference profile and the previous LP's rows (from its final basis), then every row checked at the answer
    and the violated ones added until none is (a subset's optimum that meets every row is the full LP's
    optimum). ``warm``: the dict the rows' order and the last basis are kept in (given again for the same
    gridpoints and rows, the first LP starts from them); it also counts the LP solves (``lps``) and the
    working-set sizes (``rows``)."""

    def __init__(self, rows: JerkRows, z_ref: np.ndarray, warm: dict | None):
        self.rows = rows
        self.z_ref = z_ref
        ws = self.ws = warm if warm is not None else {}
        ws.update(lps=0, rows=[])
        ws.setdefault("order", None)

    def guessed_basis(self, order, slack):
        """A starting basis for the LP on rows ``order`` from a profile z0 near its answer: a vertex has as
        many active rows as degrees of freedom (N − 3: 2N variables, N − 1 equalities, 4 fixed), about one
        per stage, so in each stage the row with the least slack at z0 is taken active (nonbasic at its
        bound), those of the N − 3 stages with the least slack, every other row and free column basic. A
        singular guess is repaired by HiGHS (slack columns swapped in). ``slack``: the rows' slack at z0.
        None where fewer than N − 3 stages have a row in the working set (no jerk limit): no basis then."""
        r = self.rows
        N = r.N
        stage = r.row_stage[order]
        by = np.lexsort((slack, stage))  # by stage, least slack first
        least = by[np.r_[True, stage[by][1:] != stage[by][:-1]]]
        if least.shape[0] < N - 3:
            return None
        active = np.zeros(order.shape[0], bool)
        active[least[np.argsort(slack[least])][:N - 3]] = True
        col_status = np.full(r.nv, HighsLP.BASIC, np.int8)
        col_status[[0, N - 1, N, 2 * N - 1]] = HighsLP.LOWER
        row_status = np.concatenate((np.full(r.A_eq.shape[0], HighsLP.LOWER, np.int8),
                                     np.where(active, HighsLP.UPPER, HighsLP.BASIC).astype(np.int8)))
        return col_status, row_status

    def _cost(self, xbar_grid, zfull):
        """The LP's objective (nv,), scaled to a largest |entry| of 1: the traversal time's gradient at
        ``zfull`` (2N,), or where that is None or not finite (a reference profile whose quadratic x(σ) reaches
        0 inside a stage) the gradient of Σ w_i x_i^{-1/2} at the gridpoint x̄ ``xbar_grid`` (N,). Both are
        0 on the columns fixed at rest (x and u at the ends): a cost there, where x̄ = 0, would be the largest
        by orders of magnitude and scale every free column's cost below HiGHS's dual feasibility tolerance
        (1e-7), so that any feasible vertex would pass as optimal and the answer depend on HiGHS's pivots."""
        r = self.rows
        N = r.N
        cost = None
        if zfull is not None:
            cost = time_gradient(r.s, np.maximum(zfull[:N], 1e-300), zfull[N:])
        if cost is None or not np.isfinite(cost).all():
            xg = np.maximum(xbar_grid, 1e-6 * max(float(xbar_grid.max()), 1e-12))
            cost = np.zeros(r.nv)
            cost[1:N - 1] = -r.w_grid[1:N - 1] * xg[1:N - 1] ** -1.5
        return cost / np.abs(cost).max()

    def _start(self, keep, slack, guess):
        """The rows (order), basis and whether that basis is a guess (:meth:`guessed_basis`) the LP starts
        from; ``keep`` (m,) bool, the working set at z0 (``slack`` (m,) there), is updated to the rows in
        the model."""
        r, ws = self.rows, self.ws
        order, basis = ws["order"], None
        if order is not None and ws["shape"] != r.data.shape:  # a different row set: a cold start
            order = None
        if order is not None:
            # the previous LP's rows first, in its order, with its final basis (the new rows' slacks basic):
            # the dual simplex starts where the last LP ended instead of from the slack basis
            keep[order] = False
            new = np.flatnonzero(keep)
            col_status, row_status = ws["basis"]
            me = r.A_eq.shape[0]
            # rows basic in the last basis (inactive) with much slack at z leave: removing a basic row keeps
            # the basis valid, and the model small
            basic = row_status[me:] == HighsLP.BASIC
            stay = ~basic | (slack[order] < _WS_SLACK)
            keep[:] = False
            keep[order[stay]] = True
            keep[new] = True
            order = np.concatenate((order[stay], new))
            basis = (col_status, np.concatenate((row_status[:me], row_status[me:][stay],
                                                 np.full(new.shape[0], HighsLP.BASIC, np.int8))))
        else:
            order = np.flatnonzero(keep)
            if guess:
                basis = self.guessed_basis(order, slack[order])
                return order, basis, basis is not None
        return order, basis, False

    def _outside(self, z, keep):
        """(slack (m,) of every row at z, whether a row outside the working set ``keep`` is violated there)."""
        slack = self.rows.slack_at(z)
        return slack, bool(((slack < -1e-9) & ~keep).any())

    def _pivots(self, cost, lo, hi, order, basis, keep, pivots):
        """This LP's answer by at most ``pivots`` dual simplex pivots
        (:func:`~robot_dynamics_ros.retiming.jerk.vertex.dual_simplex`; 0: ``basis`` is optimal or refused)
        from ``basis`` on the rows ``order``, the rows outside the working set ``keep`` it violates added (basic:
        the basis stays dual feasible) and pivoted on until none is. Returns (z (nv,) or None, the basis
        reached, its rows): None where the pivots fail (HiGHS then goes on from the basis reached)."""
        r = self.rows
        while True:
            z, basis = dual_simplex(cost, r.A_eq, r.take(order), lo, hi, basis, r.grid_order, pivots)
            self.ws["lps"] += 1
            if z is None:
                return None, basis, order
            slack, violated = self._outside(z, keep)
            if not violated:
                return z, basis, order
            order, basis = _extended(order, basis, self._added(slack, keep))

    @staticmethod
    def _added(slack, keep):
        """The rows outside the working set ``keep`` (updated) that are violated or nearly active at a
        point with rows' ``slack`` there (m,): the violated rows and their near neighbours."""
        add = np.flatnonzero((slack < _WS_ADD) & ~keep)
        keep[add] = True
        return add

    def solve(self, xbar_pts, xbar_grid, zfull=None, trust=True, guess=False):
        """The LP with the jerk rows' tangents at ``xbar_pts`` (K,); objective (:meth:`_cost`): the traversal
        time's gradient at ``zfull`` (2N,), with x within the trust region around it when ``trust``, or with
        ``zfull`` None the gridpoint x̄ ``xbar_grid``'s weighted Σ x^{-1/2} gradient; ``guess``: start a cold
        LP from :meth:`guessed_basis`. Returns (result, wall time ms)."""
        r, ws = self.rows, self.ws
        N = r.N
        r.set_jerk_rows(xbar_pts)
        cost = self._cost(xbar_grid, zfull)
        t0 = time.perf_counter()
        z0 = zfull if zfull is not None else self.z_ref
        lo_t, hi_t = r.lo, r.hi
        if zfull is not None and trust:
            # trust region on x at the gridpoints: the answer stays near z, where the working set was chosen
            lo_t, hi_t = r.lo.copy(), r.hi.copy()
            hi_t[1:N - 1] = np.minimum(r.hi[1:N - 1], _TRUST * zfull[1:N - 1])
            lo_t[1:N - 1] = np.minimum(np.maximum(r.lo[1:N - 1], zfull[1:N - 1] / _TRUST), hi_t[1:N - 1])
        slack, keep = r.working_set(z0, _WS_SLACK)
        order, basis, guessed = self._start(keep, slack, guess)
        # dual simplex pivots where the objective is the traversal time's gradient; the fallback objective on
        # x alone (the reference profile's answer stops somewhere) leaves u to the equalities, so HiGHS's
        # answer alone there, for the same answers as before that fallback existed
        pivots = _PIVOTS if zfull is not None else 0
        z, final, res = None, basis, None
        if basis is not None and not guessed:
            # the previous LP's final basis is often optimal, or a few pivots from the optimum (the last SLP
            # iterations move little): then no HiGHS, whose model set-up and factorization alone cost ~0.5 ms
            # at 200 gridpoints
            z, final, order = self._pivots(cost, lo_t, hi_t, order, basis, keep, pivots)
        while z is None:
            lpk = HighsLP(cost, r.A_eq, r.take(order), lo_t, hi_t, final)  # from the basis reached, if any
            res = lpk.solve()
            ws["lps"] += 1
            while res.status == 0:
                slack, violated = self._outside(res.x, keep)
                if not violated:
                    z, final = res.x, lpk.basis()
                    break
                add = self._added(slack, keep)
                final = lpk.basis() if pivots else None
                if final is not None:
                    # HiGHS's optimal basis with the added rows basic is dual feasible: pivots from it (or, where
                    # they fail, HiGHS again from the basis they reached)
                    order, final = _extended(order, final, add)
                    z, final, order = self._pivots(cost, lo_t, hi_t, order, final, keep, pivots)
                    break
                order = np.concatenate((order, add))
                res = lpk.add_rows_and_solve(r.take(add))  # from the last basis (HiGHS's dual simplex)
                ws["lps"] += 1
            if res.status != 0:
                final = None
                break
        if z is not None:
            res = lp_result(0, z, "Optimal")
            ws["basis"] = final
            ws["order"], ws["shape"] = (order if final is not None else None), r.data.shape
        ws["rows"].append(int(keep.sum()))
        return res, (time.perf_counter() - t0) * 1e3


def _coarse_start(path, s, x_ref, dynamics, *, velocity_limit, acceleration_limit, torque_limit, jerk_limit,
                  rtol, margin, tool_speed):
    """The first linearization point: the same problem on a coarser grid (a few times cheaper, itself
    started from a coarser one), or None where that grid stops somewhere (then the TOPP-RA profile starts).
    Tangents there are near the answer, so the first LP starts with nearly its final rows instead of those
    tight at the TOPP-RA profile."""
    N = s.shape[0]
    idx = np.unique(np.r_[np.arange(0, N, _COARSE), N - 1])
    # the knots alone where they are few: each coarse stage is then one knot interval (its third
    # derivative exact)
    kn = path.knots
    k = np.clip(np.searchsorted(kn, s), 1, kn.shape[0] - 1)
    on_knot = np.flatnonzero(np.minimum(np.abs(s - kn[k - 1]), np.abs(s - kn[k])) <= 1e-12 * s[-1])
    if 4 <= on_knot.shape[0] <= N // 2:
        idx = np.unique(np.r_[0, on_knot, N - 1])

    def joint(lim):  # per-point limits: the coarse grid (a start only) takes each joint's smallest
        lim = np.asarray(lim, float)
        return lim.min(axis=0) if lim.ndim == 2 else lim

    kw = dict(velocity_limit=joint(velocity_limit), acceleration_limit=joint(acceleration_limit),
              torque_limit=joint(torque_limit), jerk_limit=joint(jerk_limit), max_iterations=_COARSE_ITERATIONS,
              rtol=rtol, margin=margin, tool_speed=tool_speed)
    try:
        return solve_once(path, s[idx], x_ref[idx], dynamics, strict_start=True, **kw)
    except ValueError:
        if idx.shape[0] < _COARSE_MIN:  # started from the TOPP-RA profile already
            return None
    # the coarse grid's own start (a still coarser grid, whose stages span several knots: on a winding path
    # its profile exceeds the jerk limit on the finer stages, so that no point of its trust region is
    # feasible) failed: that grid again from the TOPP-RA profile, with the iterations the climb from there
    # takes. Following such a start without the trust region instead gives a profile far from the answer
    # (a Panda path: 1.88 s against 1.40 s; from the TOPP-RA profile 1.88 s in 8 cheap coarse iterations, but
    # the fine solve from it ends 0.02 % shorter)
    kw["max_iterations"] = _RETRY_ITERATIONS
    try:
        return solve_once(path, s[idx], x_ref[idx], dynamics, coarse=False, **kw)
    except ValueError:  # the coarse grid stops somewhere: start from the TOPP-RA profile
        return None


def _first_lp(wlp: _WorkingSetLP, start, xbar_pts, max_iterations, strict=False):
    """The first feasible profile with positive speed: an SLP step from the reference profile ``wlp.z_ref``
    (``start``'s profile, else the TOPP-RA one: an upper bound of every feasible x, where the tangent is
    conservative; any x̄ > 0 gives a feasible answer). If that answer stops somewhere (x = 0 inside a
    stage), LPs whose objective is the gradient of Σ w_i x_i^{-1/2} at the gridpoints, the linearization
    point moved towards the last answer (geometric mean, at most 8× down) each time: at most
    max_iterations // 2 LPs in all from a start profile, max_iterations from the TOPP-RA one (the tangents
    there may have to come down several times: legged robots' paths of example-robot-data took 7 LPs and
    more). ``strict``: a
    start whose trust region has no feasible point raises ValueError (else its LP is solved without the
    trust region). Returns (z, T, iterations, LP ms)."""
    rows = wlp.rows
    s, N = rows.s, rows.N
    z_ref = wlp.z_ref
    xbar = z_ref[:N].copy()
    lp_ms, it, T, best = 0.0, 0, np.inf, None
    # an SLP step from the reference profile (the traversal time's gradient there, from a guessed basis):
    # a start profile is near the answer but need not meet every row on these gridpoints, so its trust region
    # is dropped if it has no feasible point; the TOPP-RA profile (no start) is far above the answer, no trust
    # region
    res, ms = wlp.solve(xbar_pts, xbar, z_ref, trust=start is not None, guess=True)
    if res.status != 0 and start is not None:
        if strict:
            raise ValueError("jerk-limited timing: the start profile's trust region has no feasible point")
        res, ms2 = wlp.solve(xbar_pts, xbar, z_ref, trust=False)
        ms += ms2
    lp_ms += ms
    it += 1
    if res.status == 0:
        best, T = res.x, stage_times(s, res.x[:N], res.x[N:]).sum()
    while not np.isfinite(T) and it < (max_iterations if start is None else max(1, max_iterations // 2)):
        res, ms = wlp.solve(xbar_pts, xbar)
        lp_ms += ms
        it += 1
        if res.status != 0:
            raise ValueError(f"jerk-limited timing: the linear program failed ({res.message})")
        best, T = res.x, stage_times(s, res.x[:N], res.x[N:]).sum()
        if np.isfinite(T):
            break
        xbar_pts = np.maximum(np.sqrt(np.maximum(xbar_pts * rows.at_points(res.x), 0.0)), xbar_pts / 8.0)
        xbar = np.maximum(np.sqrt(np.maximum(xbar * res.x[:N], 0.0)), xbar / 8.0)
    if not np.isfinite(T):
        raise ValueError("jerk-limited timing: no profile with positive speed found (the linear programs "
                         "stop the path somewhere)")
    return best, T, it, lp_ms


def solve_once(path, s, x_ref, dynamics, *, velocity_limit, acceleration_limit, torque_limit,
               jerk_limit, max_iterations: int = 15, rtol: float = 1e-3,
               margin: float = 1e-4, tool_speed=None, start=None, warm=None, coarse: bool = True,
               strict_start: bool = False) -> JerkSolution:
    """Time-optimal rest-to-rest timing of ``path`` under velocity, acceleration, torque and jerk limits.

    Args:
        path: :class:`~robot_dynamics_ros.retiming.path.JointPath`; s: (N,) gridpoints (N ≥ 4) with every
            knot among them (e.g. a TOPP-RA segment's ``s``); x_ref: (N,) sd² of the torque-only TOPP-RA
            solution on ``s`` (the first linearization point where there is no start; any positive profile
            works).
        dynamics: engine with batched ``rnea`` (N·m), the model (payload included) the torque limit is for.
        velocity_limit, acceleration_limit, torque_limit, jerk_limit: (n,) rad/s, rad/s², N·m, rad/s³
            (inf: none), or (M (N-1) + 1, n) per collocation point s_i + kΔ_i/M (index M i + k, M =
            :data:`~robot_dynamics_ros.retiming.jerk.rows.SUBDIVISIONS`). Limits as applied (scales and
            margins already in).
        max_iterations: SLP iterations; rtol: stop when an iteration shortens the duration by less.
        margin: fraction the velocity, torque and jerk limits are tightened by inside the solver, so that
            the rows' curvature between check points (half a stage) cannot take the output above the limit.
        tool_speed: None or (speed, limit) as in :func:`~robot_dynamics_ros.retiming.jerk.solve_jerk_limited`.
        start: None or a :class:`JerkSolution` of the same path (any gridpoints): the first LP's tangents and
            rows are taken at its profile; None: at the solution on a coarser grid (the knots or every
            ``_COARSE``-th gridpoint; at least ``_COARSE_MIN`` gridpoints), else at ``x_ref``.
        warm: None or a dict, filled with the last LP's rows and basis; given again (same ``s``, the same
            limits finite), the first LP starts from them.
        coarse: False: no coarser grid's solution as the start (``start`` None: the TOPP-RA profile).
        strict_start: a start (given or from the coarser grid) whose trust region has no feasible point
            raises ValueError (else the first LP is solved without the trust region).

    Returns:
        :class:`JerkSolution`.

    Raises:
        ValueError: fewer than 4 gridpoints, ``x_ref`` zero inside the path (it must stop there: time each
            side separately), or no positive-speed profile meets the limits (names the LP's status).
    """
    t_start = time.perf_counter()
    s = np.asarray(s, dtype=float)
    N = s.shape[0]
    if N < 4:
        raise ValueError(f"jerk-limited timing: need at least 4 gridpoints, got {N}")
    x_ref = np.asarray(x_ref, dtype=float)
    stops = np.flatnonzero(x_ref[1:-1] <= 1e-9 * max(float(x_ref.max()), 1e-300)) + 1
    if stops.size:
        raise ValueError(f"jerk-limited timing: the torque-only solution stops at s = {s[stops[0]]:.6g} inside the "
                         "path (a cusp or turn); split the path there and time each part")
    limits = dict(velocity_limit=velocity_limit, acceleration_limit=acceleration_limit, torque_limit=torque_limit,
                  jerk_limit=jerk_limit)
    if start is None and coarse and N >= _COARSE_MIN:
        start = _coarse_start(path, s, x_ref, dynamics, rtol=rtol, margin=margin, tool_speed=tool_speed, **limits)
    rows = build_rows(path, s, x_ref, dynamics, margin=margin, tool_speed=tool_speed, **limits)
    # the reference point of the first working set: the TOPP-RA profile (u at the gridpoints from the
    # neighbouring stages' sdd)
    d = np.diff(s)
    u_stage = np.diff(x_ref) / (2.0 * d)
    if start is None:
        z_ref = np.concatenate((x_ref, [0.0], 0.5 * (u_stage[1:] + u_stage[:-1]), [0.0]))
        xbar_pts = np.interp(rows.points_s, s, x_ref)
    else:
        # the start's profile at the gridpoints and at the check points, in one evaluation
        xq, uq = start._profile(np.concatenate((s, rows.points_s)))
        z_ref = np.concatenate((xq[:N], uq[:N]))
        xbar_pts = xq[N:]
    wlp = _WorkingSetLP(rows, z_ref, warm)
    z, T, it, lp_ms = _first_lp(wlp, start, xbar_pts, max_iterations, strict_start)
    durations = [float(T)]
    # SLP: tangents at z, the objective the traversal time's gradient at z, x within the trust region,
    # backtracking on the segment from z to the answer
    while it < max_iterations:
        res, ms = wlp.solve(rows.at_points(z), z[:N], z)
        lp_ms += ms
        it += 1
        if res.status != 0:
            break
        cand = res.x
        alpha, improved = 1.0, False
        while alpha > 1e-3:  # the segment z → cand is feasible (convex LP set containing both)
            trial = z + alpha * (cand - z)
            Tt = stage_times(s, trial[:N], trial[N:]).sum()
            if Tt < T:
                improved = True
                break
            alpha *= 0.5
        if not improved:
            break
        gain = (T - Tt) / T
        z, T = trial, Tt
        durations.append(float(T))
        if gain < rtol:
            break
    x, u = np.maximum(z[:N], 0.0), z[N:]
    if np.abs(u).max() > 0.5 * rows.u_box:
        raise ValueError("jerk-limited timing: the path acceleration is unbounded (a joint without torque, "
                         "acceleration and jerk limits?)")
    x[0] = x[-1] = 0.0
    t_grid = np.concatenate(([0.0], np.cumsum(stage_times(s, x, u))))
    return JerkSolution(path, s, x, u, t_grid, float(t_grid[-1]), it, durations,
                        (time.perf_counter() - t_start) * 1e3, lp_ms, lp_solves=wlp.ws["lps"],
                        lp_rows=wlp.ws["rows"])
