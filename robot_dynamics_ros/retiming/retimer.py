"""The retiming facade: waypoints by joint name in, a time-optimal sampled trajectory out.

Pipeline (each step in its own module):
1. request checks (shapes, NaN, joint names, position limits, start/end velocity limits, gravity at every
   waypoint against the torque limit) — every failure is a :class:`RetimeResult` with ``success=False``
   and a message naming the joint, the waypoint index and the limit (never an exception);
2. continuous joints unwrapped the short way, waypoints within path_tolerance / 2 of the previous kept one
   merged, the path split where the motion turns back (:mod:`.path`);
3. per segment: C² spline q(s) within path_tolerance of the request's polyline
   (:meth:`~.path.JointPath.within_tolerance`: knots added on the chords), gridpoints containing every knot
   with turn-limited stages, q, q', q'' at gridpoints and stage midpoints, torque coefficients a, b, c from
   one batched RNEA call (:mod:`.constraints`), TOPP-RA (:mod:`.topp_ra`);
4. output sampling of the same piecewise-constant-sdd s(t) at a period or at the gridpoints, efforts from
   the same dynamics engine (:mod:`.sampling`).

Used by ``robot-dynamics retime`` and the ``retiming_service`` node.
"""
from __future__ import annotations

import enum
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from numba import njit

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.retiming import path as _path
from robot_dynamics_ros.retiming.constraints import (build_constraints, build_rows, plan_and_schemes,
                                                     torque_coefficients_planned)
from robot_dynamics_ros.retiming.jerk import solve_jerk_limited
from robot_dynamics_ros.retiming.motor_limits import load_motor_limits, solve_within_motor_limits
from robot_dynamics_ros.retiming.path import JointPath, collocation, prepare_waypoints, simplify_chords
from robot_dynamics_ros.retiming.sampling import sample_joint_trajectory, sample_times
from robot_dynamics_ros.retiming.topp_ra import SolveStatus, solve_topp_ra, stage_times

#: default number of gridpoints (at least one per waypoint is always used)
DEFAULT_GRIDPOINTS = 200
#: default path tolerance (rad for revolute joints, m for prismatic; infinity norm over the joints): the
#: retimed path stays this close to the straight joint-space segments between the request's waypoints.
#: 1 mrad moves a point at 1 m from a joint axis by ≤ 1 mm, so on a 7-axis arm of 0.85 m reach the
#: end effector leaves the checked segments by a few mm at most — below the resolution and padding
#: planners collision-check with — and it is the merge distance that absorbs encoder jitter of
#: recorded paths (µrad) without turning a still arm's jitter into direction reversals.
DEFAULT_PATH_TOLERANCE = 1e-3
#: most gridpoints a request may use (all segments, including the knots added to meet path_tolerance)
MAX_GRIDPOINTS = 100_000
#: most output samples a request may ask for (duration / sample_period)
MAX_OUTPUT_SAMPLES = 1_000_000
#: most waypoints × gridpoints × joints of a request (its memory and time grow with each factor)
MAX_WORK = 2_000_000_000
#: fewest gridpoints of a segment between direction reversals (a rest-to-rest motion needs several stages)
MIN_SEGMENT_GRIDPOINTS = 20
#: relative tolerance for "at the limit" checks of the request (waypoint / velocity limits)
_LIMIT_TOL = 1e-9
#: a start / end velocity v must be parallel to the path's direction d there: |v - (v·d) d| ≤ DIRECTION_TOL |v|
#: (the sine of the angle between them), with v·d > 0
DIRECTION_TOL = 1e-3


@njit(cache=True, nogil=True)
def _peak_fractions(qd, qdd, tau, vlim, alim, tlim):  # pragma: no cover - compiled
    """max_k,j |value| / limit for (qd, qdd, tau); -1 where every limit is infinite. A zero limit (URDF
    ``velocity="0" effort="0"`` on a joint the path does not move, e.g. romeo's hands) counts 0 when the
    value stays 0, inf otherwise."""
    out = np.full(3, -1.0)
    n = qd.shape[1]
    for r in range(3):
        arr = qd if r == 0 else (qdd if r == 1 else tau)
        lim = vlim if r == 0 else (alim if r == 1 else tlim)
        for j in range(n):
            if lim[j] < np.inf:
                peak = 0.0
                for k in range(arr.shape[0]):
                    v = abs(arr[k, j])
                    if v > peak:
                        peak = v
                frac = peak / lim[j] if lim[j] > 0.0 else (np.inf if peak > 0.0 else 0.0)
                if frac > out[r]:
                    out[r] = frac
    return out


@njit(cache=True, nogil=True)
def _first_outside(wp, lo, hi):  # pragma: no cover - compiled
    """Flat index k·n + j of the first wp[k, j] outside [lo[j], hi[j]] (or NaN), -1 if none."""
    w, n = wp.shape
    for k in range(w):
        for j in range(n):
            if not (lo[j] <= wp[k, j] <= hi[j]):
                return k * n + j
    return -1


@njit(cache=True, nogil=True)
def _gravity_within(c, knot_index, tlim):  # pragma: no cover - compiled
    """|c| ≤ tlim at every knot (collocation row 2·knot_index)."""
    for k in range(knot_index.shape[0]):
        for j in range(c.shape[1]):
            if not abs(c[2 * knot_index[k], j]) <= tlim[j]:
                return False
    return True


@njit(cache=True, nogil=True)
def _grid_efforts(a, b, c, u, x, exact):  # pragma: no cover - compiled
    """tau (N, n) = a sdd + b sd² + c at the gridpoints (eq. 1; sdd = u of the stage starting there, the last
    stage's at the end), from the coefficients at the collocation points (gridpoints: even rows); and
    whether every gridpoint is exact (a dynamics node)."""
    ng = x.shape[0]
    n = a.shape[1]
    tau = np.empty((ng, n))
    for i in range(ng):
        sdd = u[i] if i < ng - 1 else u[ng - 2]
        for j in range(n):
            tau[i, j] = a[2 * i, j] * sdd + b[2 * i, j] * x[i] + c[2 * i, j]
    every = True
    for i in range(ng):
        if not exact[i]:
            every = False
    return tau, every


class RetimeStatus(enum.Enum):
    """Outcome of :meth:`Retimer.retime` (never ``None``)."""

    SUCCESS = "success"
    #: malformed request: NaN, unknown, duplicate or missing joint name, wrong shape, bad option value, a cap
    INVALID_REQUEST = "invalid_request"
    #: a waypoint (or the spline between two) outside a joint's position limits
    POSITION_LIMIT = "position_limit"
    #: a start or end joint velocity above its (scaled) velocity limit
    VELOCITY_LIMIT = "velocity_limit"
    #: gravity alone needs more than the (margin-scaled) torque limit at a waypoint or gridpoint
    GRAVITY_EXCEEDS_TORQUE = "gravity_exceeds_torque"
    #: no velocity profile satisfies the limits on part of the path (empty controllable set)
    INFEASIBLE = "infeasible"
    #: the requested start velocity is too fast to satisfy the limits afterwards
    START_NOT_CONTROLLABLE = "start_not_controllable"


@dataclass
class RetimeOptions:
    """Options of a retiming request.

    Attributes:
        velocity_scale: fraction (0, 1] of the velocity limits; None → the model's
            ``default_velocity_scaling_factor`` (joint_limits.yaml), else 1.
        acceleration_scale: fraction (0, 1] of the acceleration limits (joint_limits.yaml; inf if none);
            None → the model's ``default_acceleration_scaling_factor``, else 1.
        torque_margin: fraction (0, 1] of the URDF effort limits the trajectory may use (e.g. 0.9).
        gridpoints: requested number of gridpoints (2 .. MAX_GRIDPOINTS); more are used where needed: one
            stage at least per knot (waypoints and added knots), turn-limited stages
            (:data:`~.path.TURN_PER_STAGE`), MIN_SEGMENT_GRIDPOINTS per segment. None → default.
        sample_period: output period (s); None or 0 → one sample per gridpoint.
        friction: include URDF ``<dynamics>`` viscous damping and Coulomb friction in the torque
            constraint and the output efforts.
        reversal_cos: a waypoint where consecutive chords make an angle whose cosine is below this is a
            direction reversal: the trajectory stops there (see :func:`~.path.prepare_waypoints`).
        dynamics_spacing: path-length spacing (rad) of the exact dynamics evaluations inside a knot
            interval when the gridpoints are denser; the rest is cubic interpolation
            (:func:`~.constraints.plan_and_schemes`). 0 → RNEA at every gridpoint and stage midpoint.
        path_tolerance: rad (m for prismatic joints), infinity norm: the retimed path stays within this
            distance of the request's polyline (straight joint-space segments between its waypoints);
            waypoints within path_tolerance / 2 of the previous kept one are merged
            (:data:`DEFAULT_PATH_TOLERANCE`).
    """

    velocity_scale: float | None = None
    acceleration_scale: float | None = None
    torque_margin: float = 1.0
    gridpoints: int | None = None
    sample_period: float | None = None
    friction: bool = False
    reversal_cos: float = 0.0
    dynamics_spacing: float = 0.05
    path_tolerance: float = DEFAULT_PATH_TOLERANCE
    #: fraction (0, 1] of the model's jerk limits (joint_limits.yaml ``max_jerk``, ``model.jerk_limit``)
    jerk_scale: float = 1.0
    #: rad/s³ (m/s³) for joints without a configured jerk limit; None: those joints have none. Any finite
    #: jerk limit makes every segment a jerk-limited timing (:mod:`.jerk`), at rest at both ends.
    jerk_limit: float | None = None
    #: :class:`~.motor_limits.MotorLimits` (rated vs peak), a motor_limits.yaml path (str / Path, read with
    #: :func:`~.motor_limits.load_motor_limits`) or None: with them the timing is the jerk-limited
    #: one with the torque limits lowered until the rated/peak rules hold
    #: (:func:`~.motor_limits.solve_within_motor_limits`, margin = torque_margin on the peak)
    motor_limits: object | None = None

    def problem(self) -> str | None:
        """The first invalid option as a message, or None."""
        for name in ("velocity_scale", "acceleration_scale", "torque_margin", "jerk_scale"):
            v = getattr(self, name)
            if v is None and name in ("velocity_scale", "acceleration_scale"):
                continue
            if not (isinstance(v, (int, float)) and math.isfinite(v) and 0.0 < v <= 1.0):
                return f"{name}={v!r}: must be in (0, 1]"
        if self.gridpoints is not None and (int(self.gridpoints) != self.gridpoints or self.gridpoints < 2):
            return f"gridpoints={self.gridpoints!r}: must be an integer ≥ 2"
        if self.gridpoints is not None and self.gridpoints > MAX_GRIDPOINTS:
            return f"gridpoints={self.gridpoints}: above MAX_GRIDPOINTS = {MAX_GRIDPOINTS}"
        jl = self.jerk_limit
        if jl is not None and not (isinstance(jl, (int, float)) and math.isfinite(jl) and jl > 0.0):
            return f"jerk_limit={jl!r}: must be a positive number of rad/s³ (or None)"
        tol = self.path_tolerance
        if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0.0):
            return f"path_tolerance={tol!r}: must be a positive distance (rad / m)"
        sp = self.sample_period
        if sp is not None and not (math.isfinite(sp) and sp >= 0.0):
            return f"sample_period={sp!r}: must be a non-negative number of seconds"
        if not (math.isfinite(self.dynamics_spacing) and self.dynamics_spacing >= 0.0):
            return f"dynamics_spacing={self.dynamics_spacing!r}: must be ≥ 0"
        if not (math.isfinite(self.reversal_cos) and -1.0 <= self.reversal_cos <= 1.0):
            return f"reversal_cos={self.reversal_cos!r}: must be in [-1, 1]"
        return None


@dataclass
class RetimeResult:
    """A retimed trajectory (arrays in ``joint_names`` order = the model's actuated joints).

    Attributes:
        success, status, message: outcome; on failure the arrays are empty (0, n).
        joint_names: tuple of the n joint names (the model's order).
        t: (M,) s from the start; q (M, n) rad; qd (M, n) rad/s; qdd (M, n) rad/s²; tau (M, n) N·m.
        duration: s; gridpoints: number of gridpoints used (all segments); solve_ms: wall time of the
            whole retiming (path, constraints, solve, sampling), ms; timings: ms per step.
        peak_fraction: {"velocity", "acceleration", "effort", "jerk"} -> max over samples and joints of
            |value| / applied limit (scaled / margin-applied); None where no limit applies (jerk: where the
            timing is not jerk-limited). jerk_limits: see the field.
        segments: per segment (s (N,), x = sd² (N,), u = sdd (N-1,), t_grid (N,), JointPath, t_offset).
        max_path_deviation: rad / m (infinity norm), an upper bound on the distance of the output path
            from the request's polyline, from the spline's coefficients (exact extremes per knot interval)
            plus the offset of merged chords; 0 on failure or for a single waypoint.
        warnings: one line each, e.g. joints without acceleration limits.
    """

    success: bool
    status: RetimeStatus
    message: str
    joint_names: tuple[str, ...]
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    duration: float = 0.0
    gridpoints: int = 0
    solve_ms: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    peak_fraction: dict[str, float | None] = field(default_factory=dict)
    segments: list = field(default_factory=list)
    max_path_deviation: float = 0.0
    warnings: tuple[str, ...] = ()
    #: with motor limits: per joint name {peak_torque, rms_torque, longest_above_rated_s, ok, binding}
    motor: dict | None = None
    #: joint name -> jerk limit applied, rad/s³ (joint_limits.yaml max_jerk × jerk_scale, else jerk_limit);
    #: None when no jerk limit applies
    jerk_limits: dict | None = None

    def summary(self) -> dict:
        """JSON-friendly summary (the last line of ``robot-dynamics retime``)."""
        out = {"success": self.success, "status": self.status.value, "message": self.message,
               "duration": self.duration, "gridpoints": self.gridpoints, "solve_ms": self.solve_ms,
               "samples": int(self.t.shape[0]), "peak_fraction": self.peak_fraction,
               "max_path_deviation": self.max_path_deviation, "warnings": list(self.warnings)}
        if self.jerk_limits is not None:
            out["jerk_limits"] = self.jerk_limits
        if self.motor is not None:
            out["motor_limits"] = self.motor
        return out


@dataclass
class _Segment:
    path: JointPath
    s: np.ndarray
    x: np.ndarray
    u: np.ndarray
    t_grid: np.ndarray
    first: int  # index (into the kept waypoints) of the segment's first waypoint
    t_offset: float = 0.0
    #: bound on the distance (rad / m, infinity norm) of the segment's path from the request's polyline
    deviation: float = 0.0
    #: a, b, c (2N-1, n) at the collocation points (gridpoints: even rows), and (N,) where the gridpoint
    #: values are exact RNEA values (dynamics nodes), or None
    abc_grid: tuple | None = None
    exact: np.ndarray | None = None
    #: the jerk-limited timing (:class:`~.jerk.JerkSolution`) that replaces x, u, t_grid, or None
    jerk: object | None = None


class _Failure(Exception):
    def __init__(self, status: RetimeStatus, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


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
        self._limits_cache = None

    def warmup(self) -> None:
        """Compile / load the numba kernels (a 3-waypoint retiming), so the first request is fast."""
        m = self.model
        q0 = m.neutral()
        span = np.where(np.isfinite(m.upper - m.lower), 0.05 * (m.upper - m.lower), 0.1)
        wp = np.stack((q0, q0 + span, q0 + 2 * span))
        wp = np.clip(wp, m.lower, m.upper)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.retime(wp, options=RetimeOptions(gridpoints=10, sample_period=0.01))
            self.retime(wp, options=RetimeOptions(gridpoints=10))  # (output at the gridpoints: other kernels)

    # ------------------------------------------------------------------------------------------
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
            wp, v0, v1 = self._map_request(waypoints, joint_names, start_velocity, end_velocity, hold)
            problem = options.problem()
            if problem:
                raise _Failure(RetimeStatus.INVALID_REQUEST, f"options: {problem}")
            return self._retime(wp, v0, v1, options, t_start)
        except _Failure as f:
            empty = np.zeros((0, n))
            warn = () if options.problem() else self._warnings(options)
            return RetimeResult(False, f.status, f.message, names, np.zeros(0), empty, empty.copy(),
                                empty.copy(), empty.copy(),
                                solve_ms=(time.perf_counter() - t_start) * 1e3, warnings=warn)

    def resolved_options(self, options: RetimeOptions) -> RetimeOptions:
        """``options`` with a velocity / acceleration scale of None replaced by the model's
        ``default_velocity_scaling_factor`` / ``default_acceleration_scaling_factor`` (joint_limits.yaml),
        else 1.0: MoveIt's default scaling applies when the request gives none."""
        m = self.model

        def pick(given, default):
            return given if given is not None else (default or 1.0)

        return replace(options, velocity_scale=pick(options.velocity_scale, m.default_velocity_scaling_factor),
                       acceleration_scale=pick(options.acceleration_scale, m.default_acceleration_scaling_factor))

    # ------------------------------------------------------------------------------------------
    def _map_request(self, waypoints, joint_names, start_velocity, end_velocity, hold):
        m = self.model
        if (joint_names is None and not hold and start_velocity is None and end_velocity is None
                and isinstance(waypoints, np.ndarray) and waypoints.ndim == 2 and waypoints.shape[0] > 0
                and waypoints.shape[1] == m.n and np.isfinite(waypoints).all()):
            z = np.zeros(m.n)  # fast path: an (W, n) array in model order
            return np.array(waypoints, dtype=float), z, z
        try:
            wp_in = np.array(waypoints, dtype=float)
        except (TypeError, ValueError) as exc:
            raise _Failure(RetimeStatus.INVALID_REQUEST, f"waypoints: not numeric ({exc})") from None
        if wp_in.ndim == 1 and wp_in.size > 0 and joint_names is not None and len(joint_names) == wp_in.size:
            wp_in = wp_in[None, :]
        if wp_in.ndim != 2 or wp_in.shape[0] == 0:
            raise _Failure(RetimeStatus.INVALID_REQUEST,
                           f"waypoints: expected a (W, k) array with W ≥ 1, got shape {wp_in.shape}")
        if joint_names is None:
            cols = list(range(m.n))
            if wp_in.shape[1] != m.n:
                raise _Failure(RetimeStatus.INVALID_REQUEST,
                               f"waypoints: {wp_in.shape[1]} columns but the model has {m.n} joints "
                               f"{list(m.joint_names)} (give joint_names)")
            label = list(m.joint_names)
        else:
            label = [str(j) for j in joint_names]
            if len(label) != wp_in.shape[1]:
                raise _Failure(RetimeStatus.INVALID_REQUEST,
                               f"joint_names: {len(label)} names for {wp_in.shape[1]} columns of waypoints")
            seen = set()
            cols = []
            for name in label:
                if name in seen:
                    raise _Failure(RetimeStatus.INVALID_REQUEST, f"joint_names: joint '{name}' appears twice")
                seen.add(name)
                if name not in m.index:
                    held = " (held fixed in this model)" if name in m.held_joints else ""
                    raise _Failure(RetimeStatus.INVALID_REQUEST,
                                   f"joint_names: unknown joint '{name}'{held}; model joints are "
                                   f"{list(m.joint_names)}")
                cols.append(m.index[name])
        bad = np.argwhere(~np.isfinite(wp_in))
        if bad.size:
            w, c = bad[0]
            raise _Failure(RetimeStatus.INVALID_REQUEST,
                           f"waypoint {w}: joint '{label[c]}' position is {wp_in[w, c]} (not finite)")
        named = set(label)
        missing = [j for j in m.joint_names if j not in named and j not in (hold or {})]
        if missing:
            raise _Failure(RetimeStatus.INVALID_REQUEST,
                           f"joint_names: model joint(s) {missing} are neither in the request nor in hold "
                           f"(give their positions in hold)")
        base = m.neutral().copy()
        for name, value in (hold or {}).items():
            if name not in m.index:
                raise _Failure(RetimeStatus.INVALID_REQUEST, f"hold: unknown joint '{name}'")
            if not math.isfinite(float(value)):
                raise _Failure(RetimeStatus.INVALID_REQUEST, f"hold: joint '{name}' value {value} not finite")
            if name not in named:
                base[m.index[name]] = float(value)
        wp = np.repeat(base[None, :], wp_in.shape[0], axis=0)
        wp[:, cols] = wp_in

        def velocity(v, what):
            if v is None or len(v) == 0:
                return np.zeros(m.n)
            arr = np.asarray(v, dtype=float).ravel()
            if arr.shape[0] != len(cols):
                raise _Failure(RetimeStatus.INVALID_REQUEST,
                               f"{what}: {arr.shape[0]} values for {len(cols)} joints")
            if not np.all(np.isfinite(arr)):
                j = int(np.flatnonzero(~np.isfinite(arr))[0])
                raise _Failure(RetimeStatus.INVALID_REQUEST, f"{what}: joint '{label[j]}' is {arr[j]}")
            out = np.zeros(m.n)
            out[cols] = arr
            return out

        return wp, velocity(start_velocity, "start_velocity"), velocity(end_velocity, "end_velocity")

    # ------------------------------------------------------------------------------------------
    def _limits(self, options: RetimeOptions):
        """(velocity, acceleration, torque) limits (n,) with the request's scales / margin applied; cached
        (callers must not modify them) while the model's limits (by value) and the scales stay the same."""
        m = self.model
        key = (options.velocity_scale, options.acceleration_scale, options.torque_margin,
               m.velocity_limit.tobytes(), m.acceleration_limit.tobytes(), m.effort_limit.tobytes())
        cached = self._limits_cache
        if cached is None or cached[0] != key:
            lims = (m.velocity_limit * options.velocity_scale, m.acceleration_limit * options.acceleration_scale,
                    m.effort_limit * options.torque_margin)
            cached = (key, lims, bool(np.any(np.isfinite(lims[2]))))
            self._limits_cache = cached
        return cached[1]

    def _use_torque(self, tlim) -> bool:
        cached = self._limits_cache
        return cached[2] if cached is not None and cached[1][2] is tlim else bool(np.any(np.isfinite(tlim)))

    def _position_bounds(self):
        m = self.model
        key = (m.lower.tobytes(), m.upper.tobytes())
        if getattr(self, "_bounds_key", None) != key:
            self._bounds_key = key
            self._bounds = (m.lower - _LIMIT_TOL * (1.0 + np.abs(m.lower)),
                            m.upper + _LIMIT_TOL * (1.0 + np.abs(m.upper)))
        return self._bounds

    def _check_request(self, wp, v0, v1, options, gravity=None, first=0, kept_idx=None):
        """Position and start/end velocity limits; with ``gravity`` (W, n) = g(q) at the waypoints also the
        torque limit against gravity alone (the first such waypoint, its worst joint)."""
        m = self.model
        names = m.joint_names
        vlim, _, tlim = self._limits(options)
        tol_lo, tol_hi = self._position_bounds()
        bad = _first_outside(wp, tol_lo, tol_hi)
        if bad >= 0:
            k, j = divmod(int(bad), wp.shape[1])
            w = k if kept_idx is None else int(kept_idx[first + k])
            raise _Failure(RetimeStatus.POSITION_LIMIT,
                           f"waypoint {w}: joint '{names[j]}' position {wp[k, j]:.6g} is outside its position "
                           f"limits [{m.lower[j]:.6g}, {m.upper[j]:.6g}]")
        for v, what in ((v0, "start_velocity"), (v1, "end_velocity")):
            if v is None or not v.any():
                continue
            over = np.flatnonzero(np.abs(v) > vlim * (1.0 + _LIMIT_TOL))
            if over.size:
                j = over[0]
                raise _Failure(RetimeStatus.VELOCITY_LIMIT,
                               f"{what}: joint '{names[j]}' at {v[j]:.6g} rad/s exceeds its velocity limit "
                               f"{vlim[j]:.6g} rad/s (URDF {m.velocity_limit[j]:.6g} × velocity_scale "
                               f"{options.velocity_scale:g})")
        if gravity is not None:
            g = np.atleast_2d(gravity)
            ratio = np.abs(g) / tlim
            if ratio.max() <= 1.0:
                return
            over = np.flatnonzero((ratio > 1.0).any(axis=1))
            if over.size:  # the first such waypoint, its worst joint
                k = int(over[0])
                j = int(np.argmax(ratio[k]))
                w = k if kept_idx is None else int(kept_idx[first + k])
                raise _Failure(RetimeStatus.GRAVITY_EXCEEDS_TORQUE,
                               f"waypoint {w}: gravity alone needs {g[k, j]:.6g} N·m at joint '{names[j]}', "
                               f"above its torque limit {tlim[j]:.6g} N·m (effort {m.effort_limit[j]:.6g} × "
                               f"torque_margin {options.torque_margin:g})")

    def _check_direction(self, v, chord, what: str, waypoint: int) -> None:
        """Refuse a non-zero start / end velocity ``v`` (n,) rad/s that is not a positive multiple of the
        path's direction at that end: ``chord`` (n,), the first / last kept chord of the polyline (the
        segment the planner checked; the spline's end tangent is set to v's direction, so any other
        direction would make the path turn away from the chord right at the end), within
        :data:`DIRECTION_TOL`. ``waypoint``: its index in the request, for the message.

        Raises:
            _Failure: INVALID_REQUEST naming the joints whose velocity disagrees and the path's direction.
        """
        if v is None or not v.any():
            return
        d = chord / np.linalg.norm(chord)
        speed = float(np.linalg.norm(v))
        along = float(v @ d)
        off = v - max(along, 0.0) * d
        if along > 0.0 and np.linalg.norm(off) <= DIRECTION_TOL * speed:
            return
        names = self.model.joint_names
        # when |off| exceeds the tolerance, some joint has |off_j| ≥ |off| / sqrt(n): the list is never empty
        bad = [names[j] for j in np.flatnonzero(np.abs(off) > DIRECTION_TOL * speed / math.sqrt(len(v)))]
        direction = ", ".join(f"{names[j]} {d[j]:.4g}" for j in range(len(d)))
        why = "points backwards along the path" if along <= 0.0 else "is not parallel to the path"
        raise _Failure(RetimeStatus.INVALID_REQUEST,
                       f"{what}: joint(s) {bad} disagree with the path direction at waypoint {waypoint}; the "
                       f"velocity {why}: it must be a positive multiple of the path's direction there "
                       f"({direction}; unit vector along the {'first' if what == 'start_velocity' else 'last'} "
                       f"segment), within {DIRECTION_TOL:g} of its norm")

    # ------------------------------------------------------------------------------------------
    def _retime(self, wp, v0, v1, options: RetimeOptions, t_start: float) -> RetimeResult:
        m = self.model
        names = tuple(m.joint_names)
        wp = self._unwrap(wp)
        self._check_request(wp, v0, v1, options)
        tol = float(options.path_tolerance)
        kept, kept_idx, bounds, dropped, total, offset = prepare_waypoints(
            wp, tol=0.5 * tol, cos_threshold=options.reversal_cos)
        notes = []
        if dropped.size:
            shown = ", ".join(str(i) for i in dropped[:10]) + (" ..." if dropped.size > 10 else "")
            notes.append(f"merged {dropped.size} waypoint(s) within path_tolerance/2 = {0.5 * tol:g} of the "
                         f"previous kept one at index {shown}")
        kept, kept_idx, bounds, on_chords, total, offset = simplify_chords(wp, kept_idx, bounds, offset, 0.5 * tol)
        if on_chords.size:
            notes.append(f"{on_chords.size} more within path_tolerance/2 of the chord between the waypoints "
                         f"around them ({kept.shape[0]} kept)")
        warn = self._warnings(options)
        timings = {}
        if kept.shape[0] == 1:  # zero-length path: a zero-duration trajectory at rest
            if np.any(v0 != 0.0) or np.any(v1 != 0.0):
                raise _Failure(RetimeStatus.INVALID_REQUEST,
                               "start_velocity/end_velocity: must be zero for a zero-length path")
            q = kept.copy()
            z = np.zeros_like(q)
            tau = np.atleast_2d(self.dynamics.rnea(q, z, z))
            self._check_request(q, v0, v1, options, gravity=tau)
            msg = "zero-length path: zero-duration trajectory"
            if notes:
                msg += "; " + "; ".join(notes)
            res = RetimeResult(True, RetimeStatus.SUCCESS, msg, names, np.zeros(1), q, z, z.copy(), tau,
                               gridpoints=1, solve_ms=(time.perf_counter() - t_start) * 1e3, warnings=warn)
            res.peak_fraction = self._peaks(res, options)
            return res
        first_a, _ = bounds[0]
        _, last_b = bounds[-1]
        self._check_direction(v0, kept[first_a + 1] - kept[first_a], "start_velocity", int(kept_idx[first_a]))
        self._check_direction(v1, kept[last_b] - kept[last_b - 1], "end_velocity", int(kept_idx[last_b]))
        requested = options.gridpoints or max(DEFAULT_GRIDPOINTS, kept.shape[0])
        work = kept.shape[0] * max(requested, kept.shape[0]) * m.n
        if work > MAX_WORK:
            raise _Failure(RetimeStatus.INVALID_REQUEST,
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
        jl = self._jerk_limits(options)
        motor = None
        if options.motor_limits is not None and len(segments) > 1:
            # the rated-torque rules (RMS, time above rated) are over the whole motion: parts timed one by
            # one would each pass while their sequence may not (docs/retiming.md, "Motor limits")
            turns = [int(kept_idx[seg.first]) for seg in segments[1:]]
            raise _Failure(RetimeStatus.INVALID_REQUEST,
                           f"motor limits: the path reverses direction at waypoint(s) {turns}; motor limits "
                           f"apply to a path without direction reversals: split it there and send each part "
                           f"alone")
        if np.isfinite(jl).any() or options.motor_limits is not None:
            t_offset, motor = self._limit_jerk(segments, v0, v1, options, jl, timings)
        if options.sample_period and t_offset / options.sample_period > MAX_OUTPUT_SAMPLES:
            # a tiny period would allocate GBs and block the service for minutes (found by fuzzing)
            raise _Failure(RetimeStatus.INVALID_REQUEST,
                           f"sample_period={options.sample_period:g} s gives {t_offset / options.sample_period:.4g} "
                           f"samples over the {t_offset:.6g} s trajectory: above MAX_OUTPUT_SAMPLES = "
                           f"{MAX_OUTPUT_SAMPLES}")
        t0 = time.perf_counter()
        t, q, qd, qdd = self._sample(segments, options.sample_period)
        seg = segments[0]
        if not options.sample_period and len(segments) == 1 and seg.abc_grid is not None:
            # at the gridpoints the efforts follow from the coefficients already computed by RNEA:
            # tau = a sdd + b sd² + c is RNEA(q, q' sd, q' sdd + q'' sd²) (eq. 1); RNEA again where a
            # gridpoint's coefficients were interpolated
            a, b, c = seg.abc_grid
            tau, all_exact = _grid_efforts(a, b, c, seg.u, seg.x, seg.exact)
            if not all_exact:
                k = ~seg.exact
                tau[k] = np.atleast_2d(self.dynamics.rnea(q[k], qd[k], qdd[k]))
        else:
            tau = np.atleast_2d(self.dynamics.rnea(q, qd, qdd))
        if options.friction:
            tau = tau + m.damping * qd + m.friction * m.coulomb_law(qd)
        timings["sampling"] = (time.perf_counter() - t0) * 1e3
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
        res.peak_fraction = self._peaks(res, options, jl)
        if np.isfinite(jl).any():
            res.jerk_limits = {n: float(v) for n, v in zip(names, jl) if np.isfinite(v)}
        return res

    def _solve_segment(self, seg_wp, offset, v0, v1, requested, total, options, first, kept_idx, timings,
                       budget):
        m = self.model
        names = m.joint_names
        vlim, alim, tlim = self._limits(options)
        t0 = time.perf_counter()
        sp0 = v0 if v0 is not None and v0.any() else None
        sp1 = v1 if v1 is not None and v1.any() else None
        tol_lo, tol_hi = self._position_bounds()
        tol = options.path_tolerance
        path, dev, status, bad = JointPath.within_tolerance(seg_wp, offset, tol, tol_lo, tol_hi, start_tangent=sp0,
                                                            end_tangent=sp1, max_knots=budget[0])
        if status != 0:
            i = int(np.argmax(np.where(bad >= 0, np.inf, dev)))
            w = self._waypoint_at(path, path.knots[i], first, kept_idx)
            if bad[i] >= 0:
                j = int(bad[i])
                raise _Failure(RetimeStatus.POSITION_LIMIT,
                               f"the path between waypoints {w} and {w + 1} cannot stay within the position "
                               f"limits of joint '{names[j]}' ([{m.lower[j]:.6g}, {m.upper[j]:.6g}]) and "
                               f"path_tolerance {tol:g}; move the waypoints away from the limit")
            why = (f"it would need more than MAX_GRIDPOINTS = {MAX_GRIDPOINTS} knots in all" if status == 1
                   else "the spline does not converge to the segments there")
            raise _Failure(RetimeStatus.INVALID_REQUEST,
                           f"path_tolerance={tol:g}: the path between waypoints {w} and {w + 1} cannot be kept "
                           f"within it ({why}); raise path_tolerance")
        path = path.split_for_turn(_path.TURN_PER_STAGE)
        # a segment that is short next to the whole path still needs stages to start and stop
        count = requested if path.length >= total else max(MIN_SEGMENT_GRIDPOINTS,
                                                           int(round(requested * path.length / total)))
        count = max(count, path.knots.shape[0])
        if count > budget[0]:
            raise _Failure(RetimeStatus.INVALID_REQUEST,
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
            raise _Failure(RetimeStatus.POSITION_LIMIT,
                           f"the spline between waypoints {w} and {w + 1} leaves the position limits of joint "
                           f"'{names[j]}' ([{m.lower[j]:.6g}, {m.upper[j]:.6g}], reaches {q[p, j]:.6g}); "
                           "add waypoints or move them away from the limit")
        t0 = time.perf_counter()
        use_torque = self._use_torque(tlim)
        plan, scheme, exact = plan_and_schemes(s, knot_index, options.dynamics_spacing)
        abc = torque_coefficients_planned(self.dynamics, q, dq, ddq, plan) if use_torque else None
        if use_torque:  # gravity alone at the waypoints (knots are exact dynamics nodes)
            if not _gravity_within(abc[2], knot_index, tlim):
                is_wp = np.isin(path.knots, path.knots if path.waypoint_knots is None else path.waypoint_knots)
                g_wp = abc[2][2 * knot_index[is_wp]]
                self._check_request(seg_wp, None, None, options, gravity=g_wp, first=first, kept_idx=kept_idx)
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
        timings["constraints"] = timings.get("constraints", 0.0) + (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
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
        timings["solve"] = timings.get("solve", 0.0) + (time.perf_counter() - t0) * 1e3
        if status != SolveStatus.OK:
            raise self._explain(status, idx, s, s_eval, K, x_start, path, first, kept_idx, tlim, abc)
        t_grid = stage_times(s, x)
        if not np.isfinite(t_grid[-1]):
            w = self._waypoint_at(path, s[int(np.argmax(~np.isfinite(t_grid))) - 1], first, kept_idx)
            raise _Failure(RetimeStatus.INFEASIBLE, f"the path cannot be traversed near waypoint {w}: the "
                                                    "limits allow no motion there (zero speed)")
        seg = _Segment(path, s, x, u, t_grid, first, deviation=float(dev.max()) if dev.size else 0.0)
        if abc is not None:
            seg.abc_grid = abc  # at the collocation points (gridpoints: even rows)
            seg.exact = exact
        return seg

    def _jerk_limits(self, options) -> np.ndarray:
        """(n,) jerk limits: the model's × jerk_scale, options.jerk_limit where the model has none."""
        jl = np.asarray(getattr(self.model, "jerk_limit", np.full(self.model.n, np.inf)), dtype=float)
        jl = jl * options.jerk_scale
        if options.jerk_limit is not None:
            jl = np.where(np.isfinite(jl), jl, float(options.jerk_limit))
        return jl

    def _limit_jerk(self, segments, v0, v1, options, jl, timings):
        """Replace every segment's timing by the jerk-limited one (:func:`~.jerk.solve_jerk_limited`, from the
        segment's TOPP-RA profile, same velocity / acceleration / torque limits; with motor limits
        :func:`~.motor_limits.solve_within_motor_limits`); returns (total duration, motor figures or None)."""
        if (v0 is not None and np.any(v0 != 0.0)) or (v1 is not None and np.any(v1 != 0.0)):
            raise _Failure(RetimeStatus.INVALID_REQUEST, "jerk limits: start_velocity and end_velocity must be "
                                                         "zero (a jerk-limited timing starts and ends at rest)")
        if options.friction:
            raise _Failure(RetimeStatus.INVALID_REQUEST, "jerk limits: not available together with friction")
        vlim, alim, tlim = self._limits(options)
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
                raise _Failure(RetimeStatus.INFEASIBLE, str(exc)) from None
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
            raise _Failure(RetimeStatus.INVALID_REQUEST, f"motor limits: {path}: {exc.strerror}") from None
        cached = getattr(self, "_motor_cache", None)
        if cached is None or cached[0] != key:
            try:
                cached = self._motor_cache = (key, load_motor_limits(self.model, path))
            except UserError as exc:
                raise _Failure(RetimeStatus.INVALID_REQUEST, str(exc)) from None
        return cached[1]

    @staticmethod
    def _sample_segment(seg, times):
        if seg.jerk is not None:
            return seg.jerk.sample(times)[4:7]
        return sample_joint_trajectory(seg.path, seg.s, seg.x, seg.u, seg.t_grid, times)

    @staticmethod
    def _waypoint_at(path, s_value, first, kept_idx) -> int:
        """Index (in the request) of the waypoint that starts the path's chord containing s_value."""
        knots = path.knots if path.waypoint_knots is None else path.waypoint_knots
        k = int(np.searchsorted(knots, s_value, side="right")) - 1
        k = min(max(k, 0), knots.shape[0] - 2)
        return int(kept_idx[first + k])

    def _unwrap(self, wp):
        """Continuous joints take the short way between consecutive waypoints: each step wrapped into
        [-π, π] (+3.1 → -3.1 rad is a +0.083 rad move to 3.183 rad)."""
        m = self.model
        cont = getattr(self, "_continuous", None)
        if cont is None:
            cont = self._continuous = np.array([t == "continuous" for t in m.joint_types], dtype=bool)
        if not cont.any() or wp.shape[0] < 2:
            return wp
        wp = wp.copy()
        step = np.diff(wp[:, cont], axis=0)
        step -= 2.0 * np.pi * np.round(step / (2.0 * np.pi))
        wp[1:, cont] = wp[0, cont] + np.cumsum(step, axis=0)
        return wp

    def _warnings(self, options) -> tuple[str, ...]:
        """What the request relies on without a configured limit (one line each)."""
        _, alim, tlim = self._limits(options)
        names = self.model.joint_names
        free = [names[j] for j in range(len(names)) if not np.isfinite(alim[j])]
        if not free:
            return ()
        if all(np.isfinite(tlim[self.model.index[j]]) for j in free):
            return (f"no acceleration limits configured for joints {free}: accelerations are bounded only by "
                    "torque limits",)
        return (f"no acceleration limits configured for joints {free}: accelerations are bounded only by "
                "torque limits, and not at all where a joint has no torque limit",)

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
        return _Failure(RetimeStatus.GRAVITY_EXCEEDS_TORQUE,
                        f"between waypoints {w} and {w + 1} (s = {s_points[p]:.6g}): gravity alone needs "
                        f"{c[p, j]:.6g} N·m at joint '{self.model.joint_names[j]}', above its torque limit "
                        f"{tlim[j]:.6g} N·m")

    def _explain(self, status, idx, s, s_eval, K, x_start, path, first, kept_idx, tlim, abc):
        if status == SolveStatus.START_NOT_CONTROLLABLE and x_start == 0.0 and abc is not None:
            # from rest the limits cannot be met further on: a place where the arm cannot stand still
            # (the solver would have to rush through it); say where
            found = self._gravity_failure(abc[2], s_eval, path, first, kept_idx, tlim)
            if found is not None:
                return found
        if status == SolveStatus.START_NOT_CONTROLLABLE:
            return _Failure(RetimeStatus.START_NOT_CONTROLLABLE,
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
        return _Failure(RetimeStatus.INFEASIBLE,
                        f"no velocity profile satisfies the limits between waypoints {w} and {w + 1} "
                        f"(s = {s[i]:.6g} of {path.length:.6g}, gridpoint {i}); the torque or acceleration "
                        f"limits cannot hold the robot on this path")

    # ------------------------------------------------------------------------------------------
    @staticmethod
    def _sample(segments, period):
        total = segments[-1].t_offset + float(segments[-1].t_grid[-1])
        if len(segments) == 1:  # the common case, without selections and concatenations
            seg = segments[0]
            times = sample_times(total, period, np.array([0.0, total])) if period else seg.t_grid
            return (times, *Retimer._sample_segment(seg, times))
        ts, qs, qds, qdds = [], [], [], []
        if period:
            times = sample_times(total, period, np.array([0.0, total]))
        for k, seg in enumerate(segments):
            t_end = seg.t_offset + float(seg.t_grid[-1])
            if period:
                last = k == len(segments) - 1
                sel = (times >= seg.t_offset) & ((times <= t_end) if last else (times < t_end))
                local = times[sel] - seg.t_offset
                if local.size == 0:
                    continue
                tl = times[sel]
            else:
                local = seg.t_grid if k == len(segments) - 1 else seg.t_grid[:-1]
                tl = local + seg.t_offset
            q, qd, qdd = Retimer._sample_segment(seg, local)
            ts.append(tl)
            qs.append(q)
            qds.append(qd)
            qdds.append(qdd)
        return np.concatenate(ts), np.concatenate(qs), np.concatenate(qds), np.concatenate(qdds)

    def _peaks(self, res: RetimeResult, options: RetimeOptions, jerk_limit=None) -> dict:
        """{"velocity", "acceleration", "effort", "jerk"} -> max over the output samples and joints of
        |value| / applied limit; None where no joint has a finite limit (jerk: also where no segment is
        jerk-limited). ``jerk_limit``: (n,) rad/s³ of :meth:`_jerk_limits`, or None."""
        vlim, alim, tlim = self._limits(options)
        if res.qd.shape[0] == 0:
            return {"velocity": None, "acceleration": None, "effort": None, "jerk": None}
        peaks = _peak_fractions(res.qd, res.qdd, res.tau, vlim, alim, tlim)
        # max over samples of |value| / limit; None where no joint has a finite limit
        out = {key: (float(peaks[k]) if peaks[k] >= 0.0 else None)
               for k, key in enumerate(("velocity", "acceleration", "effort"))}
        out["jerk"] = None
        limited = np.isfinite(jerk_limit) if jerk_limit is not None else np.zeros(len(vlim), dtype=bool)
        if limited.any():
            # the jerk of each jerk-limited segment at the output sample times inside it
            peak = 0.0
            for seg in res.segments:
                if seg.jerk is None:
                    continue
                sel = (res.t >= seg.t_offset) & (res.t <= seg.t_offset + seg.jerk.duration)
                if sel.any():
                    jerk = seg.jerk.sample(res.t[sel] - seg.t_offset)[7]
                    peak = max(peak, float((np.abs(jerk[:, limited]) / jerk_limit[limited]).max()))
            if any(seg.jerk is not None for seg in res.segments):
                out["jerk"] = peak
        return out
