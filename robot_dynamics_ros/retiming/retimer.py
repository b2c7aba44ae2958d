"""The retiming facade: waypoints by joint name in, a time-optimal sampled trajectory out.

Pipeline (each step in its own module):
1. request checks (:mod:`.validation`; the request and result types in :mod:`.request`): shapes, NaN,
   joint names, position limits, start/end velocity limits, gravity at every waypoint against the torque
   limit — every failure is a :class:`~.request.RetimeResult` with ``success=False`` and a message naming
   the joint, the waypoint index and the limit (never an exception);
2. continuous joints unwrapped the short way, waypoints within path_tolerance / 2 of the previous kept one
   merged, the path split where the motion turns back (:mod:`.waypoints`);
3. per segment: C² spline q(s) within path_tolerance of the request's polyline
   (:meth:`~.path.JointPath.within_tolerance`: knots added on the chords; a corner the waypoint spline cannot
   pass within the tolerance is cut by knots on its two chords, :mod:`.corners`, except for jerk-limited
   timings), gridpoints containing every knot
   with turn-limited stages, q, q', q'' at gridpoints and stage midpoints (:mod:`.grid`), torque
   coefficients a, b, c from one batched RNEA call (:mod:`.constraints`), TOPP-RA (:mod:`.topp_ra`); with
   jerk or motor limits the jerk-limited timing from that profile (:mod:`.jerk`, :mod:`.motor_limits`);
4. output sampling of the same s(t) at a period or at the gridpoints, efforts from the same dynamics
   engine, peak fractions of the limits (:mod:`.sampling`, :mod:`.output`).

Used by ``robot-dynamics retime`` and the ``retiming_service`` node.
"""
from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from numba import njit

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.retiming import path as _path
from robot_dynamics_ros.retiming.binding import tolerance_bound
from robot_dynamics_ros.retiming.constraints import (build_constraints, build_rows, plan_and_schemes,
                                                     torque_coefficients_planned)
from robot_dynamics_ros.retiming.jerk import solve_jerk_limited
from robot_dynamics_ros.retiming.motor_limits import load_motor_limits, solve_within_motor_limits
from robot_dynamics_ros.retiming.output import (Segment, exceeded_limit, grid_efforts, peak_fractions,
                                                sample_segments)
from robot_dynamics_ros.retiming.path import JointPath
from robot_dynamics_ros.retiming.grid import collocation
from robot_dynamics_ros.retiming.request import (DEFAULT_GRIDPOINTS, DEFAULT_PATH_TOLERANCE, MAX_GRIDPOINTS,
                                                 MAX_OUTPUT_SAMPLES, MAX_WORK, MIN_SEGMENT_GRIDPOINTS, PEAK_TOLERANCE,
                                                 RetimeFailure, RetimeOptions, RetimeResult, RetimeStatus)
from robot_dynamics_ros.retiming.topp_ra import SolveStatus, solve_topp_ra, stage_times
from robot_dynamics_ros.retiming.validation import RequestChecks, map_request
from robot_dynamics_ros.retiming.waypoints import prepare_waypoints, simplify_chords

__all__ = ["Retimer"]

#: the path parameter s must resolve this fraction of path_tolerance: a corner's pieces are a few
#: path_tolerance long, and a path so long that a double's step in s is coarser (waypoints of 1e12 rad on
#: iris's ±1e16 rad joints) left knot intervals of zero length (a division by zero in the spline)
S_RESOLUTION = 1e-4

#: denser grids (× the default request) tried when the default grid's timing passes a limit between its
#: gridpoints (:meth:`Retimer._retime_refined`); a noisy 200-waypoint TIAGo Pro path exceeded the torso's
#: velocity limit by 0.29 % at the default grid and held it at 1000 gridpoints
REFINE_FACTORS = (4, 16)


@njit(cache=True, nogil=True)
def _gravity_within(c, knot_index, tlim):  # pragma: no cover - compiled
    """|c| ≤ tlim at every knot (collocation row 2·knot_index)."""
    for k in range(knot_index.shape[0]):
        for j in range(c.shape[1]):
            if not abs(c[2 * knot_index[k], j]) <= tlim[j]:
                return False
    return True


#: a waypoint merged into the previous kept one (within path_tolerance / 2) farther than this (rad / m,
#: infinity norm; 10 × the default path_tolerance) is a warning: the trajectory no longer passes near it (a
#: path_tolerance given in the wrong unit merges a planner's waypoints into a straight move)
MERGE_WARNING_DISTANCE = 10.0 * DEFAULT_PATH_TOLERANCE


def _merge_warning(wp: np.ndarray, kept_idx: np.ndarray, dropped: np.ndarray, tol: float) -> tuple[str, ...]:
    """One warning line when a merged waypoint lies more than :data:`MERGE_WARNING_DISTANCE` from the kept
    waypoint it was merged into (naming how many, the farthest and its distance), else none."""
    if not dropped.size:
        return ()
    into = kept_idx[np.searchsorted(kept_idx, dropped) - 1]
    dist = np.abs(wp[dropped] - wp[into]).max(axis=1)
    far = dist > MERGE_WARNING_DISTANCE
    if not far.any():
        return ()
    k = int(np.argmax(dist))
    return (f"path_tolerance {tol:g} merged {int(far.sum())} waypoint(s) farther than {MERGE_WARNING_DISTANCE:g} "
            f"from the path kept (waypoint {int(dropped[k])}: {dist[k]:.4g} rad/m from waypoint {int(into[k])}): the "
            f"trajectory does not pass through them; a smaller path_tolerance keeps them",)


def _add_time(timings: dict, key: str, t0: float, c0: float) -> None:
    """Add the wall ms since perf_counter t0 to timings[key] and the thread-CPU ms since thread_time c0 to
    timings[key + "_cpu"] (insensitive to other processes on a shared machine)."""
    timings[key] = timings.get(key, 0.0) + (time.perf_counter() - t0) * 1e3
    timings[key + "_cpu"] = timings.get(key + "_cpu", 0.0) + (time.thread_time() - c0) * 1e3


def _coulomb_at_samples(model, segments, t: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """The Coulomb factor of the output efforts, (M, n): ``model.coulomb_law(qd)``, except at a segment's
    first and last sample, where the arm is at rest (sd = 0) on its way out or in: there the sign law takes the
    direction of the path tangent q′, as the solver's torque rows do (kinetic friction up to the stop; sign(0)
    would report the torque without the friction that the timing counted on, above the limit by that
    friction)."""
    law = model.coulomb_law(qd)
    if model.coulomb_velocity > 0.0:
        return law   # tanh: continuous, 0 at rest in the rows as here
    for seg in segments:
        ends = (seg.t_offset, seg.t_offset + float(seg.t_grid[-1]))
        _, dq_ends, _ = seg.path.evaluate(np.array([seg.s[0], seg.s[-1]]))
        for t_end, dq in zip(ends, dq_ends):
            k = np.flatnonzero(np.abs(t - t_end) <= 1e-12)
            if k.size:
                rest = qd[k] == 0.0
                law[k] = np.where(rest, np.sign(dq), law[k])
    return law


class Retimer:
    """Time-optimal retiming for one robot model.

    Args:
        model: a :class:`robot_dynamics_ros.model.RobotModel` (joint order, limits, payload, gravity).
        dynamics: an engine with batched ``rnea`` / ``gravity`` ((N, n) arrays); default: the in-package
            :class:`~robot_dynamics_ros.dynamics.newton_euler.NewtonEulerDynamics` of ``model``.
    """
    def __init__(self, model, dynamics=None):
        if dynamics is None:
            dynamics = NewtonEulerDynamics(model)
        self.model = model
        self.dynamics = dynamics

    @property
    def model(self):
        """The :class:`~robot_dynamics_ros.model.RobotModel` retimed for (setting it resets the limit caches)."""
        return self._model

    @model.setter
    def model(self, model) -> None:
        self._model = model
        self.checks = RequestChecks(model)

    def warmup(self, jerk: bool = False) -> None:
        """Compile / load the numba kernels, so the first request is fast: a 3-waypoint retiming sampled at a
        period and at its gridpoints, and a path through two corners that the default path_tolerance cuts
        (the corner search and its bounds: without it a first planner path compiled ~4 s more after warm-up
        on a cold cache). A model with jerk limits times all of these jerk-limited; ``jerk`` adds one with a
        request's ``jerk_limit`` for a model without them (the jerk-limited solve's kernels and HiGHS cost a
        first such request ~17 s on a cold cache, ~0.25 s on a warm one, and ~40 MB: not without a reason)."""
        m = self.model
        q0 = m.neutral()
        span = np.where(np.isfinite(m.upper - m.lower), 0.05 * (m.upper - m.lower), 0.1)
        wp = np.clip(np.stack((q0, q0 + span, q0 + 2 * span)), m.lower, m.upper)
        # two corners: out along the first joint, across along the others, back along the first
        step = np.zeros_like(span)
        step[0] = span[0]
        corners = np.clip(np.stack((q0, q0 + step, q0 + span, q0 + span - step)), m.lower, m.upper)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.retime(wp, options=RetimeOptions(gridpoints=10, sample_period=0.01))
            self.retime(wp, options=RetimeOptions(gridpoints=10))  # (output at the gridpoints: other kernels)
            self.retime(corners, options=RetimeOptions(sample_period=0.01))
            if jerk:
                self.retime(wp, options=RetimeOptions(sample_period=0.01, jerk_limit=100.0))

    def retime(self, waypoints, *, joint_names: Sequence[str] | None = None,
               start_velocity=None, end_velocity=None, hold: Mapping[str, float] | None = None,
               options: RetimeOptions | None = None) -> RetimeResult:
        """Retime a path through waypoints.

        Args:
            waypoints: (W, k) joint positions (rad / m), one row per waypoint.
            joint_names: the k column names (any order, matched by name). None → the columns are the
                model's ``joint_names`` in order. Model joints not named must be in ``hold`` (else
                ``INVALID_REQUEST`` naming them: a joint silently put at some default would step there).
            start_velocity, end_velocity: (k,) joint velocities (rad/s) at the first / last waypoint in the
                same column order; None or all zero → at rest. Must point forward along the first / last
                segment (parallel within :data:`DIRECTION_TOL`; else ``INVALID_REQUEST`` naming the joints
                that disagree): the spline's end tangent is set to their direction.
            hold: values (rad / m) for model joints absent from ``joint_names`` (e.g. the measured state);
                entries for joints that are named are ignored.
            options: :class:`RetimeOptions`.
        Returns:
            :class:`RetimeResult`; ``success=False`` with a precise message for any bad or infeasible request.
        """
        t_start = time.perf_counter()
        options = self.resolved_options(options or RetimeOptions())
        names = tuple(self.model.joint_names)
        n = len(names)
        try:
            wp, v0, v1 = map_request(self.model, waypoints, joint_names, start_velocity, end_velocity, hold)
            problem = options.problem()
            if problem:
                raise RetimeFailure(RetimeStatus.INVALID_REQUEST, f"options: {problem}")
            return self._retime_refined(wp, v0, v1, options, t_start)
        except RetimeFailure as f:
            empty = np.zeros((0, n))
            warn = () if options.problem() else self.checks.warnings(options)
            return RetimeResult(False, f.status, f.message, names, np.zeros(0), empty, empty.copy(),
                                empty.copy(), empty.copy(),
                                solve_ms=(time.perf_counter() - t_start) * 1e3, warnings=warn)

    def _retime_refined(self, wp, v0, v1, options: RetimeOptions, t_start: float) -> RetimeResult:
        """:meth:`_retime`; when its output check refuses a timing made on the default grid (a sample past a
        limit between gridpoints: the stage-interior residual of velocity and torque rows, docs/retiming.md
        "Limitations"), the same request on :data:`REFINE_FACTORS` × denser grids before refusing. A request
        that names its ``gridpoints`` gets exactly those, and a jerk-limited one is not retried."""
        try:
            return self._retime(wp, v0, v1, options, t_start)
        except RetimeFailure as f:
            if (f.status != RetimeStatus.LIMIT_EXCEEDED or options.gridpoints is not None
                    or np.isfinite(self.checks.jerk_limits(options)).any()):   # a jerk-limited solve's LPs grow with
                raise                                                          # the grid: not retried blindly
            refused = f
        for factor in REFINE_FACTORS:
            try:
                res = self._retime(wp, v0, v1, options, t_start, grid_factor=factor)
            except RetimeFailure:
                continue
            res.message += (f"; on the default grid {refused.message.partition('; refused')[0]}: "
                            f"retimed on {res.gridpoints} gridpoints instead")
            return res
        raise refused

    def resolved_options(self, options: RetimeOptions) -> RetimeOptions:
        """``options`` with a velocity / acceleration scale of None replaced by the model's
        ``default_velocity_scaling_factor`` / ``default_acceleration_scaling_factor`` (joint_limits.yaml),
        else 1.0: MoveIt's default scaling applies when the request gives none."""
        m = self.model

        def pick(given, default):
            return given if given is not None else (default or 1.0)

        return replace(options, velocity_scale=pick(options.velocity_scale, m.default_velocity_scaling_factor),
                       acceleration_scale=pick(options.acceleration_scale, m.default_acceleration_scaling_factor))

    def _retime(self, wp, v0, v1, options: RetimeOptions, t_start: float, grid_factor: int = 1) -> RetimeResult:
        m = self.model
        names = tuple(m.joint_names)
        wp = self.checks.unwrap(wp)
        self.checks.check_request(wp, v0, v1, options)
        tol = float(options.path_tolerance)
        kept, kept_idx, bounds, dropped, total, offset = prepare_waypoints(
            wp, tol=0.5 * tol, cos_threshold=options.reversal_cos)
        notes = []
        if dropped.size:
            shown = ", ".join(str(i) for i in dropped[:10]) + (" ..." if dropped.size > 10 else "")
            notes.append(f"merged {dropped.size} waypoint(s) within path_tolerance/2 = {0.5 * tol:g} of the "
                         f"previous kept one at index {shown}")
        kept, kept_idx, bounds, on_chords, total, offset = simplify_chords(wp, kept_idx, bounds, offset, 0.5 * tol)
        if total * np.finfo(float).eps > S_RESOLUTION * tol:
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                                f"the path between the waypoints is {total:.4g} rad/m long: at that length a double "
                                f"resolves the path only to {total * np.finfo(float).eps:.2g}, too coarse for "
                                f"path_tolerance {tol:g}; check the waypoints' units")
        if on_chords.size:
            notes.append(f"{on_chords.size} more within path_tolerance/2 of the chord between the waypoints "
                         f"around them ({kept.shape[0]} kept)")
        warn = self.checks.warnings(options) + _merge_warning(wp, kept_idx, dropped, tol)
        timings = {}
        if kept.shape[0] == 1:  # zero-length path: a zero-duration trajectory at rest
            if np.any(v0 != 0.0) or np.any(v1 != 0.0):
                raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                               "start_velocity/end_velocity: must be zero for a zero-length path")
            q = kept.copy()
            z = np.zeros_like(q)
            tau = np.atleast_2d(self.dynamics.rnea(q, z, z))
            self.checks.check_request(q, v0, v1, options, gravity=tau)
            msg = "zero-length path: zero-duration trajectory"
            if notes:
                msg += "; " + "; ".join(notes)
            res = RetimeResult(True, RetimeStatus.SUCCESS, msg, names, np.zeros(1), q, z, z.copy(), tau,
                               gridpoints=1, solve_ms=(time.perf_counter() - t_start) * 1e3, warnings=warn)
            res.peak_fraction = peak_fractions(res, self.checks.limits(options))
            return res
        first_a, _ = bounds[0]
        _, last_b = bounds[-1]
        self.checks.check_direction(v0, kept[first_a + 1] - kept[first_a], "start_velocity", int(kept_idx[first_a]))
        self.checks.check_direction(v1, kept[last_b] - kept[last_b - 1], "end_velocity", int(kept_idx[last_b]))
        # the default grid (× grid_factor when _retime_refined redoes a refused timing)
        requested = options.gridpoints or grid_factor * max(DEFAULT_GRIDPOINTS, kept.shape[0])
        work = kept.shape[0] * max(requested, kept.shape[0]) * m.n
        if work > MAX_WORK:
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                           f"{kept.shape[0]} waypoints × {max(requested, kept.shape[0])} gridpoints × {m.n} joints "
                           f"= {work:.4g} is above MAX_WORK = {MAX_WORK:.4g}; send fewer waypoints or gridpoints")
        segments = []
        t_offset = 0.0
        budget = [MAX_GRIDPOINTS]  # gridpoints left for the remaining segments
        deviation = 0.0
        for k, (a, b) in enumerate(bounds):
            seg_wp = kept[a:b + 1]
            sv0 = v0 if k == 0 else None
            sv1 = v1 if k == len(bounds) - 1 else None
            seg = self._solve_segment(seg_wp, offset[a:b], sv0, sv1, requested, total, options, a, kept_idx,
                                      timings, budget)
            seg.t_offset = t_offset
            t_offset += float(seg.t_grid[-1])
            deviation = max(deviation, seg.deviation)
            segments.append(seg)
        jl = self.checks.jerk_limits(options)
        motor = None
        if options.motor_limits is not None and len(segments) > 1:
            # the rated-torque rules (RMS, time above rated) are over the whole motion: parts timed one by
            # one would each pass while their sequence may not (docs/retiming.md, "Motor limits")
            turns = [int(kept_idx[seg.first]) for seg in segments[1:]]
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                           f"motor limits: the path reverses direction at waypoint(s) {turns}; motor limits "
                           f"apply to a path without direction reversals: split it there and send each part "
                           f"alone")
        if np.isfinite(jl).any() or options.motor_limits is not None:
            t_offset, motor = self._limit_jerk(segments, v0, v1, options, jl, timings)
        if options.sample_period and t_offset / options.sample_period > MAX_OUTPUT_SAMPLES:
            # a tiny period would allocate GBs and block the service for minutes (found by fuzzing)
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                           f"sample_period={options.sample_period:g} s gives {t_offset / options.sample_period:.4g} "
                           f"samples over the {t_offset:.6g} s trajectory: above MAX_OUTPUT_SAMPLES = "
                           f"{MAX_OUTPUT_SAMPLES}")
        t0, c0 = time.perf_counter(), time.thread_time()
        t, q, qd, qdd = sample_segments(segments, options.sample_period)
        seg = segments[0]
        if not options.sample_period and len(segments) == 1 and seg.abc_grid is not None:
            # at the gridpoints the efforts follow from the coefficients already computed by RNEA:
            # tau = a sdd + b sd² + c is RNEA(q, q' sd, q' sdd + q'' sd²) (eq. 1); RNEA again where a
            # gridpoint's coefficients were interpolated
            a, b, c = seg.abc_grid
            tau, all_exact = grid_efforts(a, b, c, seg.u, seg.x, seg.exact)
            if not all_exact:
                k = ~seg.exact
                tau[k] = np.atleast_2d(self.dynamics.rnea(q[k], qd[k], qdd[k]))
        else:
            tau = np.atleast_2d(self.dynamics.rnea(q, qd, qdd))
        if options.friction:
            tau = tau + m.damping * qd + m.friction * _coulomb_at_samples(m, segments, t, qd)
        _add_time(timings, "sampling", t0, c0)
        duration = t_offset
        ngrid = sum(s.s.shape[0] for s in segments)
        msg = (f"retimed {wp.shape[0]} waypoints in {len(segments)} segment(s): duration {duration:.6g} s, "
               f"{ngrid} gridpoints")
        if len(segments) > 1:
            turns = [int(kept_idx[a]) for a, _ in bounds[1:]]
            msg += f"; stops at direction reversals at waypoint(s) {turns}"
        if notes:
            msg += "; " + "; ".join(notes)
        res = RetimeResult(True, RetimeStatus.SUCCESS, msg, names, t, q, qd, qdd, tau, duration=duration,
                           gridpoints=ngrid, timings=timings, segments=segments, max_path_deviation=deviation,
                           warnings=warn)
        res.motor = motor
        res.solve_ms = (time.perf_counter() - t_start) * 1e3
        res.peak_fraction = peak_fractions(res, self.checks.limits(options), jl)
        over = exceeded_limit(res, self.checks.limits(options), PEAK_TOLERANCE, jl)
        if over is not None:
            # never a success that its own report contradicts: the solver's tolerances or a discretization
            # error let a sample pass a limit
            kind, j, frac, at = over
            where = f"joint '{names[j]}' at t = {at:.6g} s" if j >= 0 else "the jerk-limited timing"
            raise RetimeFailure(RetimeStatus.LIMIT_EXCEEDED,
                                f"the timing found exceeds the {kind} limit: {where} reaches {frac:.6g} of it "
                                f"(allowed 1 + {PEAK_TOLERANCE:g}); refused. Try more gridpoints or a larger "
                                f"path_tolerance")
        if np.isfinite(jl).any():
            res.jerk_limits = {n: float(v) for n, v in zip(names, jl) if np.isfinite(v)}
        vlim, alim, _ = self.checks.limits(options)
        res.tolerance_bound = bound = tolerance_bound(segments, vlim, alim, kept_idx, tol)
        if bound is not None and bound["corners"]:
            where = bound["waypoints"]
            shown = ", ".join(str(w) for w in where[:10]) + (" ..." if len(where) > 10 else "")
            res.message += (f"; path_tolerance {tol:g} sets the speed at {bound['count']} corner(s) "
                            f"(waypoint(s) {shown}): {bound['seconds']:.4g} s of {duration:.6g} s")
        return res

    def _solve_segment(self, seg_wp, offset, v0, v1, requested, total, options, first, kept_idx, timings,
                       budget):
        m = self.model
        names = m.joint_names
        vlim, alim, tlim = self.checks.limits(options)
        t0 = time.perf_counter()
        sp0 = v0 if v0 is not None and v0.any() else None
        sp1 = v1 if v1 is not None and v1.any() else None
        tol_lo, tol_hi = self.checks.position_bounds()
        tol = options.path_tolerance
        # corners cut within the tolerance (path.py) only for TOPP-RA timings: the jerk-limited solve is
        # slower and its dense jerk check failed on cut corners (docs/retiming.md, "Path tolerance")
        jerk = bool(np.isfinite(self.checks.jerk_limits(options)).any()) or options.motor_limits is not None
        path, dev, status, bad = JointPath.within_tolerance(seg_wp, offset, tol, tol_lo, tol_hi, start_tangent=sp0,
                                                            end_tangent=sp1, max_knots=budget[0], cut_corners=not jerk)
        if status != 0:
            i = int(np.argmax(np.where(bad >= 0, np.inf, dev)))
            w = self._waypoint_at(path, path.knots[i], first, kept_idx)
            if bad[i] >= 0:
                j = int(bad[i])
                raise RetimeFailure(RetimeStatus.POSITION_LIMIT,
                               f"the path between waypoints {w} and {w + 1} cannot stay within the position "
                               f"limits of joint '{names[j]}' ([{m.lower[j]:.6g}, {m.upper[j]:.6g}]) and "
                               f"path_tolerance {tol:g}; move the waypoints away from the limit")
            why = (f"it would need more than MAX_GRIDPOINTS = {MAX_GRIDPOINTS} knots in all" if status == 1
                   else "the spline does not converge to the segments there")
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                           f"path_tolerance={tol:g}: the path between waypoints {w} and {w + 1} cannot be kept "
                           f"within it ({why}); raise path_tolerance")
        path = path.split_for_turn(_path.TURN_PER_STAGE)
        # a segment that is short next to the whole path still needs stages to start and stop
        count = requested if path.length >= total else max(MIN_SEGMENT_GRIDPOINTS,
                                                           int(round(requested * path.length / total)))
        count = max(count, path.knots.shape[0])
        if count > budget[0]:
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                           f"the request needs more than MAX_GRIDPOINTS = {MAX_GRIDPOINTS} gridpoints "
                           f"(waypoints, knots to meet path_tolerance {tol:g}, and {MIN_SEGMENT_GRIDPOINTS} per "
                           f"segment between direction reversals)")
        budget[0] -= count
        s, knot_index, s_eval, q, dq, ddq, outside = collocation(path, count, tol_lo, tol_hi,
                                                                 _path.TURN_PER_STAGE)
        timings["path"] = timings.get("path", 0.0) + (time.perf_counter() - t0) * 1e3
        if outside is not None:
            p, j = outside
            w = self._waypoint_at(path, s_eval[p], first, kept_idx)
            raise RetimeFailure(RetimeStatus.POSITION_LIMIT,
                           f"the spline between waypoints {w} and {w + 1} leaves the position limits of joint "
                           f"'{names[j]}' ([{m.lower[j]:.6g}, {m.upper[j]:.6g}], reaches {q[p, j]:.6g}); "
                           "add waypoints or move them away from the limit")
        t0, c0 = time.perf_counter(), time.thread_time()
        use_torque = self.checks.use_torque(tlim)
        plan, scheme, exact = plan_and_schemes(s, knot_index, options.dynamics_spacing)
        abc = torque_coefficients_planned(self.dynamics, q, dq, ddq, plan) if use_torque else None
        if use_torque:  # gravity alone at the waypoints (knots are exact dynamics nodes)
            if not _gravity_within(abc[2], knot_index, tlim):
                # at the waypoints themselves: with cut corners they are no knots of the path (the knots'
                # rows, taken as the waypoints', named the wrong waypoint)
                self.checks.check_request(seg_wp, None, None, options, gravity=self.dynamics.gravity(seg_wp),
                                          first=first, kept_idx=kept_idx)
                raise self._gravity_failure(abc[2][2 * knot_index], s[knot_index], path, first, kept_idx, tlim)
        x_start = float(np.linalg.norm(v0)) ** 2 if sp0 is not None else 0.0
        x_end = float(np.linalg.norm(v1)) ** 2 if sp1 is not None else 0.0
        friction = options.friction and use_torque and (np.any(m.damping) or np.any(m.friction))
        coulomb = m.friction if friction and np.any(m.friction) else None
        if coulomb is None:
            G, h, xmin = build_rows(dq, ddq, vlim, alim, tlim, abc)
        else:
            G, h, xmin = build_constraints(dq, ddq, velocity_limit=vlim, acceleration_limit=alim,
                                           torque_limit=tlim if use_torque else None, torque_abc=abc,
                                           coulomb=coulomb)
        _add_time(timings, "constraints", t0, c0)
        t0, c0 = time.perf_counter(), time.thread_time()
        status, idx, x, u, K = solve_topp_ra(s, G, h, x_start, x_end, scheme, m.n, xmin)
        if status == SolveStatus.OK and friction and np.any(m.damping):
            # viscous friction: linearize around the frictionless profile and solve again (conservative)
            # (the tangent at x_ref is conservative below x_ref; if that makes the path infeasible, retry
            # with tangents at lower speeds)
            x_ref = np.empty_like(s_eval)
            x_ref[0::2] = x
            x_ref[1::2] = 0.5 * (x[1:] + x[:-1])
            for factor in (1.0, 0.25, 0.0625):
                G, h, xmin = build_constraints(dq, ddq, velocity_limit=vlim, acceleration_limit=alim,
                                               torque_limit=tlim, torque_abc=abc, coulomb=coulomb,
                                               viscous=m.damping, x_ref=x_ref, tangent_factor=factor)
                status, idx, x, u, K = solve_topp_ra(s, G, h, x_start, x_end, scheme, m.n, xmin)
                if status == SolveStatus.OK:
                    break
        _add_time(timings, "solve", t0, c0)
        if status != SolveStatus.OK:
            kinematic_ok = False
            if abc is not None and status != SolveStatus.START_NOT_CONTROLLABLE:
                # which limits bind: the same rows without the torque limits
                Gk, hk, xk = build_rows(dq, ddq, vlim, alim, tlim, None)
                kinematic_ok = solve_topp_ra(s, Gk, hk, x_start, x_end, scheme, m.n, xk)[0] == SolveStatus.OK
            raise self._explain(status, idx, s, s_eval, K, x_start, path, first, kept_idx, tlim, abc,
                                kinematic_ok=kinematic_ok, at_rest=x_start == 0.0 and x_end == 0.0, ddq=ddq,
                                tol=tol)
        t_grid = stage_times(s, x)
        if not np.isfinite(t_grid[-1]):
            w = self._waypoint_at(path, s[int(np.argmax(~np.isfinite(t_grid))) - 1], first, kept_idx)
            raise RetimeFailure(RetimeStatus.INFEASIBLE, f"the path cannot be traversed near waypoint {w}: the "
                                                    "limits allow no motion there (zero speed)")
        seg = Segment(path, s, x, u, t_grid, first, deviation=float(dev.max()) if dev.size else 0.0)
        if abc is not None:
            seg.abc_grid = abc  # at the collocation points (gridpoints: even rows)
            seg.exact = exact
        return seg

    def _limit_jerk(self, segments, v0, v1, options, jl, timings):
        """Replace every segment's timing by the jerk-limited one (:func:`~.jerk.solve_jerk_limited`, from the
        segment's TOPP-RA profile, same velocity / acceleration / torque limits; with motor limits
        :func:`~.motor_limits.solve_within_motor_limits`); returns (total duration, motor figures or None)."""
        if (v0 is not None and np.any(v0 != 0.0)) or (v1 is not None and np.any(v1 != 0.0)):
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST, "jerk limits: start_velocity and end_velocity must be "
                                                         "zero (a jerk-limited timing starts and ends at rest)")
        if options.friction:
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST, "jerk limits: not available together with friction")
        vlim, alim, tlim = self.checks.limits(options)
        t0 = time.perf_counter()
        t_offset = 0.0
        motor = None
        motor_limits = options.motor_limits
        if isinstance(motor_limits, (str, Path)):
            motor_limits = self._motor_limits_file(motor_limits)
        for seg in segments:
            try:
                if options.motor_limits is not None:
                    sol, rep, *_ = solve_within_motor_limits(self.model, seg.path, seg.s, seg.x,
                                                             motor_limits, margin=options.torque_margin,
                                                             jerk_limit=jl, dynamics=self.dynamics,
                                                             velocity_limit=vlim, acceleration_limit=alim,
                                                             torque_limit=tlim)
                    motor = rep.as_dict(self.model.joint_names)
                else:
                    sol = solve_jerk_limited(seg.path, seg.s, seg.x, self.dynamics, velocity_limit=vlim,
                                             acceleration_limit=alim, torque_limit=tlim, jerk_limit=jl)
            except (ValueError, UserError) as exc:
                raise RetimeFailure(RetimeStatus.INFEASIBLE, str(exc)) from None
            seg.jerk, seg.t_grid, seg.abc_grid = sol, sol.t_grid, None  # efforts by RNEA on the output
            seg.t_offset = t_offset
            t_offset += sol.duration
        timings["jerk"] = (time.perf_counter() - t0) * 1e3
        return t_offset, motor

    def _motor_limits_file(self, path):
        """:class:`~.motor_limits.MotorLimits` of this model from a motor_limits.yaml path, read again only
        when the file's modification time changes; a bad file is an INVALID_REQUEST naming it."""
        try:
            key = (str(path), Path(path).stat().st_mtime_ns)
        except OSError as exc:
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST, f"motor limits: {path}: {exc.strerror}") from None
        cached = getattr(self, "_motor_cache", None)
        if cached is None or cached[0] != key:
            try:
                cached = self._motor_cache = (key, load_motor_limits(self.model, path))
            except UserError as exc:
                raise RetimeFailure(RetimeStatus.INVALID_REQUEST, str(exc)) from None
        return cached[1]

    @staticmethod
    def _waypoint_at(path, s_value, first, kept_idx) -> int:
        """Index (in the request) of the waypoint that starts the path's chord containing s_value."""
        knots = path.knots if path.waypoint_knots is None else path.waypoint_knots
        k = int(np.searchsorted(knots, s_value, side="right")) - 1
        k = min(max(k, 0), knots.shape[0] - 2)
        return int(kept_idx[first + k])

    def _gravity_failure(self, c, s_points, path, first, kept_idx, tlim):
        """GRAVITY_EXCEEDS_TORQUE at the first point (s_points (P,), gravity c (P, n)) where gravity alone
        is above the torque limit, or None if there is none."""
        ratio = np.abs(c) / tlim
        over = np.flatnonzero((ratio > 1.0).any(axis=1))
        if not over.size:
            return None
        p = int(over[0])
        j = int(np.argmax(ratio[p]))
        w = self._waypoint_at(path, s_points[p], first, kept_idx)
        return RetimeFailure(RetimeStatus.GRAVITY_EXCEEDS_TORQUE,
                        f"between waypoints {w} and {w + 1} (s = {s_points[p]:.6g}): gravity alone needs "
                        f"{c[p, j]:.6g} N·m at joint '{self.model.joint_names[j]}', above its torque limit "
                        f"{tlim[j]:.6g} N·m")

    def _explain(self, status, idx, s, s_eval, K, x_start, path, first, kept_idx, tlim, abc, *,
                 kinematic_ok=False, at_rest=False, ddq=None, tol=0.0):
        """The failure of a solve, naming its cause: gravity alone above a torque limit; the start velocity;
        with a moving start or end the torque limits (the path is timed without them: ``kinematic_ok``) or
        the velocity and acceleration limits; at rest at both ends, where standing still at every point is
        within every limit once gravity is, a numerical failure of the solver (SOLVER_FAILURE), naming the
        rows it failed on."""
        if status == SolveStatus.START_NOT_CONTROLLABLE and x_start == 0.0 and abc is not None:
            # from rest the limits cannot be met further on: a place where the arm cannot stand still
            # (the solver would have to rush through it); say where
            found = self._gravity_failure(abc[2], s_eval, path, first, kept_idx, tlim)
            if found is not None:
                return found
        if status == SolveStatus.START_NOT_CONTROLLABLE:
            return RetimeFailure(RetimeStatus.START_NOT_CONTROLLABLE,
                            f"start_velocity: path speed {math.sqrt(x_start):.6g} rad/s at waypoint "
                            f"{int(kept_idx[first])} is outside the controllable range [{math.sqrt(K[0, 0]):.6g}, "
                            f"{math.sqrt(K[0, 1]):.6g}] rad/s: the limits cannot be met afterwards")
        i = max(int(idx), 0)
        w = self._waypoint_at(path, s[i], first, kept_idx)
        if abc is not None:
            found = self._gravity_failure(abc[2][2 * i:2 * i + 3], s_eval[2 * i:2 * i + 3], path, first, kept_idx,
                                          tlim)
            if found is None:
                # the stage-interior bound may have seen gravity above the limit between the points: look
                # closer, on the failing stage and its neighbours
                lo, hi = s[max(i - 1, 0)], s[min(i + 2, s.shape[0] - 1)]
                s_dense = np.linspace(lo, hi, 65)
                c = np.atleast_2d(self.dynamics.gravity(path(s_dense)))
                found = self._gravity_failure(c, s_dense, path, first, kept_idx, tlim)
            if found is not None:
                return found
        where = f"between waypoints {w} and {w + 1} (s = {s[i]:.6g} of {path.length:.6g}, gridpoint {i})"
        rows = ("the torque limits (without them the path is timed)" if kinematic_ok
                else "the velocity and acceleration limits")
        if not at_rest:
            return RetimeFailure(RetimeStatus.INFEASIBLE,
                                 f"no velocity profile satisfies the limits {where}: {rows} cannot meet the "
                                 f"requested start/end velocity along this path")
        # at rest at both ends with gravity within the limits everywhere (checked above), standing still at
        # every point is within every limit: a timing exists, the solver missed it
        curvature = float(np.abs(ddq[2 * i:2 * i + 3]).max()) if ddq is not None else float("nan")
        return RetimeFailure(RetimeStatus.SOLVER_FAILURE,
                             f"the solver found no velocity profile {where} although stopping at every waypoint "
                             f"satisfies every limit: a numerical failure in {rows} (path curvature |q''| up "
                             f"to {curvature:.3g} there at path_tolerance {tol:g}); please report it; another "
                             f"path_tolerance or gridpoints count avoids it")
