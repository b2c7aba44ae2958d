"""The retiming request and its answer: :class:`RetimeOptions`, :class:`RetimeResult`, :class:`RetimeStatus`,
the request caps, and :class:`RetimeFailure` (how a check refuses a request: the facade turns it into a
``success=False`` result, never an exception to the caller).
"""
from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = ["RetimeStatus", "RetimeOptions", "RetimeResult", "RetimeFailure", "DEFAULT_GRIDPOINTS",
           "DEFAULT_PATH_TOLERANCE", "MAX_GRIDPOINTS", "MAX_OUTPUT_SAMPLES", "MAX_WORK", "MIN_SEGMENT_GRIDPOINTS",
           "DIRECTION_TOL", "MIN_SCALE", "PEAK_TOLERANCE"]

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
#: smallest velocity / acceleration / jerk scale and torque margin accepted: below it the timing is
#: thousands of times slower than the robot allows and the solver's tolerances are no longer small next
#: to the scaled limits (a 1e-300 scale once "succeeded" with accelerations 198× over them)
MIN_SCALE = 1e-3
#: a result whose own peak fraction of a limit exceeds 1 + PEAK_TOLERANCE is refused, never a success
PEAK_TOLERANCE = 1e-4



class RetimeStatus(enum.Enum):
    """Outcome of :meth:`~robot_dynamics_ros.retiming.retimer.Retimer.retime` (never ``None``)."""

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
    #: a timing was found but its own samples exceed a limit by more than PEAK_TOLERANCE (refused, with
    #: the joint and the limit named)
    LIMIT_EXCEEDED = "limit_exceeded"
    #: at rest at both ends, stopping at every waypoint satisfies the velocity and acceleration limits, yet
    #: the solver found no profile: a numerical failure (never reported as ``INFEASIBLE``)
    SOLVER_FAILURE = "solver_failure"
    #: the requested start velocity is too fast to satisfy the limits afterwards
    START_NOT_CONTROLLABLE = "start_not_controllable"


@dataclass
class RetimeOptions:
    """Options of a retiming request.

    Attributes:
        velocity_scale: fraction [MIN_SCALE, 1] of the velocity limits (:data:`MIN_SCALE` = 1e-3; the same
            range for acceleration_scale, torque_margin and jerk_scale); None → the model's
            ``default_velocity_scaling_factor`` (joint_limits.yaml), else 1.
        acceleration_scale: fraction [MIN_SCALE, 1] of the acceleration limits (joint_limits.yaml; inf if none);
            None → the model's ``default_acceleration_scaling_factor``, else 1.
        torque_margin: fraction [MIN_SCALE, 1] of the URDF effort limits the trajectory may use (e.g. 0.9).
        gridpoints: requested number of gridpoints (2 .. MAX_GRIDPOINTS); more are used where needed: one
            stage at least per knot (waypoints and added knots), turn-limited stages
            (:data:`~robot_dynamics_ros.retiming.path.TURN_PER_STAGE`), MIN_SEGMENT_GRIDPOINTS per segment. None → default.
        sample_period: output period (s); None or 0 → one sample per gridpoint.
        friction: include URDF ``<dynamics>`` viscous damping and Coulomb friction in the torque
            constraint and the output efforts.
        reversal_cos: a waypoint where consecutive chords make an angle whose cosine is below this is a
            direction reversal: the trajectory stops there
            (see :func:`~robot_dynamics_ros.retiming.waypoints.prepare_waypoints`).
        dynamics_spacing: path-length spacing (rad) of the exact dynamics evaluations inside a knot
            interval when the gridpoints are denser; the rest is cubic interpolation
            (:func:`~robot_dynamics_ros.retiming.constraints.plan_and_schemes`). 0 → RNEA at every gridpoint and stage midpoint.
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
    #: fraction [MIN_SCALE, 1] of the model's jerk limits (joint_limits.yaml ``max_jerk``, ``model.jerk_limit``)
    jerk_scale: float = 1.0
    #: rad/s³ (m/s³) for joints without a configured jerk limit; None: those joints have none. Any finite
    #: jerk limit makes every segment a jerk-limited timing (:mod:`robot_dynamics_ros.retiming.jerk`), at rest at both ends.
    jerk_limit: float | None = None
    #: :class:`~robot_dynamics_ros.retiming.motor_limits.MotorLimits` (rated vs peak), a motor_limits.yaml path (str / Path, read with
    #: :func:`~robot_dynamics_ros.retiming.motor_limits.load_motor_limits`) or None: with them the timing is the jerk-limited
    #: one with the torque limits lowered until the rated/peak rules hold
    #: (:func:`~robot_dynamics_ros.retiming.motor_limits.solve_within_motor_limits`, margin = torque_margin on the peak)
    motor_limits: object | None = None

    def problem(self, names: Mapping[str, str] | None = None) -> str | None:
        """The first invalid option as a message (``<name>=<value>: <rule>``), or None. ``names``: field ->
        the name to show for it (a front end's own: ``--velocity-scale`` of the CLI, ``velocity_scaling`` of the
        service request); the field's own name otherwise."""
        def shown(field_name: str) -> str:
            return (names or {}).get(field_name, field_name)

        for name in ("velocity_scale", "acceleration_scale", "torque_margin", "jerk_scale"):
            v = getattr(self, name)
            if v is None and name in ("velocity_scale", "acceleration_scale"):
                continue
            if not (isinstance(v, (int, float)) and math.isfinite(v) and MIN_SCALE <= v <= 1.0):
                return f"{shown(name)}={v!r}: must be in [{MIN_SCALE:g}, 1] (MIN_SCALE)"
        if self.gridpoints is not None and (int(self.gridpoints) != self.gridpoints or self.gridpoints < 2):
            return f"{shown('gridpoints')}={self.gridpoints!r}: must be an integer ≥ 2"
        if self.gridpoints is not None and self.gridpoints > MAX_GRIDPOINTS:
            return f"{shown('gridpoints')}={self.gridpoints}: above MAX_GRIDPOINTS = {MAX_GRIDPOINTS}"
        jl = self.jerk_limit
        if jl is not None and not (isinstance(jl, (int, float)) and math.isfinite(jl) and jl > 0.0):
            return f"{shown('jerk_limit')}={jl!r}: must be a positive number of rad/s³ (or None)"
        tol = self.path_tolerance
        if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0.0):
            return f"{shown('path_tolerance')}={tol!r}: must be a positive distance (rad / m)"
        sp = self.sample_period
        if sp is not None and not (math.isfinite(sp) and sp >= 0.0):
            return f"{shown('sample_period')}={sp!r}: must be a non-negative number of seconds"
        if not (math.isfinite(self.dynamics_spacing) and self.dynamics_spacing >= 0.0):
            return f"{shown('dynamics_spacing')}={self.dynamics_spacing!r}: must be ≥ 0"
        if not (math.isfinite(self.reversal_cos) and -1.0 <= self.reversal_cos <= 1.0):
            return f"{shown('reversal_cos')}={self.reversal_cos!r}: must be in [-1, 1]"
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
    #: where path_tolerance limits the speed (:func:`~robot_dynamics_ros.retiming.binding.tolerance_bound`):
    #: {"path_tolerance", "count", "waypoints", "corners": [{"waypoint", "t_start", "t_end", "seconds",
    #: "curvature"}], "seconds"}; None on failure or without acceleration limits
    tolerance_bound: dict | None = None
    #: joint name -> jerk limit applied, rad/s³ (joint_limits.yaml max_jerk × jerk_scale, else jerk_limit);
    #: None when no jerk limit applies
    jerk_limits: dict | None = None

    def summary(self) -> dict:
        """JSON-friendly summary (the last line of ``robot-dynamics retime``)."""
        out = {"success": self.success, "status": self.status.value, "message": self.message,
               "duration": self.duration, "gridpoints": self.gridpoints, "solve_ms": self.solve_ms,
               "samples": int(self.t.shape[0]), "peak_fraction": self.peak_fraction,
               "max_path_deviation": self.max_path_deviation, "warnings": list(self.warnings)}
        if self.tolerance_bound is not None:
            out["tolerance_bound"] = self.tolerance_bound
        if self.jerk_limits is not None:
            out["jerk_limits"] = self.jerk_limits
        if self.motor is not None:
            out["motor_limits"] = self.motor
        return out


class RetimeFailure(Exception):
    """A refused request: ``status`` (:class:`RetimeStatus`) and a one-line ``message`` naming the joint,
    waypoint and limit."""

    def __init__(self, status: RetimeStatus, message: str):
        super().__init__(message)
        self.status = status
        self.message = message
