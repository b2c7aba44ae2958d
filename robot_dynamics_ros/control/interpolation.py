"""Joint-trajectory sampling with ros2_control ``joint_trajectory_controller`` semantics (pure Python).

A desired motion arrives as a ``trajectory_msgs/JointTrajectory``: joint names in any order, points with
``positions`` (rad), optional ``velocities`` (rad/s) and ``accelerations`` (rad/s²), and strictly increasing
``time_from_start`` (s). This module turns it into arrays in the model's joint order and samples it at the
control rate. Nothing here imports ROS: a message is read by duck typing (any object with the same fields
works), so the core is tested without DDS and reused by the CLI.

Interpolation, per segment [t_k, t_{k+1}] (Lynch & Park, *Modern Robotics*, 2017, §9.2.2 "Polynomial
time scaling": third-order and fifth-order polynomials fixed by their boundary conditions; the same rule as
``joint_trajectory_controller``'s ``interpolate_between_points``):

* both end points carry velocities and accelerations → quintic (matches q, qd, qdd at both ends);
* both carry velocities only → cubic (matches q, qd at both ends; qdd piecewise linear);
* otherwise → linear in q (qd constant over the segment, qdd = 0).

Timing semantics (``joint_trajectory_controller``, ros2_control):

* ``header.stamp`` zero means "start on receipt"; otherwise the trajectory starts at that time.
* A new trajectory replaces the one being executed *from its start time*: until then the old one keeps
  running. If its first point has ``time_from_start > 0`` the controller moves there from the desired state
  it had at the start time (that state becomes an implicit first point, with its velocity and acceleration).
* Before a trajectory starts and after its last point the desired position is held (qd = qdd = 0).
* A message with no points cancels: the controller holds the desired position it has at that moment.

Continuous joints (URDF ``type="continuous"``, passed as a ``continuous`` mask) take the short way, as
``joint_trajectory_controller`` does with ``angle_wraparound``: each point's angle is moved by whole turns
to within π of the previous point's (:func:`validate_joint_trajectory`), and the whole trajectory by
whole turns so that its first point is within π of the desired position it starts from
(:class:`TrajectoryExecutor`). +3.1 → −3.1 rad is thus a 0.083 rad move, not a 6.2 rad sweep; a
deliberate move of more than π between two points of a continuous joint needs intermediate points.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robot_dynamics_ros.control.laws import wrap_angle

__all__ = [
    "TrajectoryRejected",
    "JointTrajectorySpec",
    "PiecewisePolynomialTrajectory",
    "DesiredState",
    "TrajectoryExecutor",
    "validate_joint_trajectory",
    "check_trajectory_speed",
    "check_trajectory_acceleration",
    "check_trajectory_size",
    "duration_to_sec",
    "MAX_TRAJECTORY_POINTS",
]

#: a trajectory is refused when a segment's implied (average) joint speed exceeds the joint's velocity
#: limit times this factor (ros2_control's joint_trajectory_controller refuses or aborts such motion with
#: its tolerances; the margin absorbs rounding in a trajectory planned at the limit)
SPEED_FACTOR = 1.05
#: rad (m for prismatic joints) the first point may be off the measured position on top of the distance
#: the velocity limit allows in its time_from_start (measurement noise, a small tracking error)
START_TOLERANCE = 0.05

#: a trajectory is refused when the torque a joint needs to give its own inertia the implied acceleration
#: (M_jj(q) · |q̈|, no acceleration limit known) exceeds its effort limit times this factor: a plausibility
#: bound, not the limit (coupling and gravity change the real need, the factor covers them)
ACCELERATION_TORQUE_FACTOR = 2.0
#: most points a JointTrajectory may carry, checked before any per-point work (a 1e5-point message cost
#: 1.5 s of validation in the control loop; 10 000 points cost ~80 ms on a 7-joint arm). 10 000 points are
#: 10 s at 1 kHz, or 100 s at the 100 Hz a planner typically samples at.
MAX_TRAJECTORY_POINTS = 10_000
#: most points at which :func:`check_trajectory_acceleration` evaluates M(q)
MAX_INERTIA_EVALUATIONS = 500

LINEAR, CUBIC, QUINTIC = 1, 3, 5


class TrajectoryRejected(ValueError):
    """A ``JointTrajectory`` message that cannot be executed; the message names the field, index and value."""


def duration_to_sec(d) -> float:
    """``builtin_interfaces/Duration`` or ``Time`` (``sec``, ``nanosec``) → seconds (float).

    Raises:
        TrajectoryRejected: ``nanosec`` outside [0, 1e9).
    """
    sec, nanosec = int(d.sec), int(d.nanosec)
    if not 0 <= nanosec < 1_000_000_000:
        raise TrajectoryRejected(f"nanosec={nanosec} is outside [0, 1e9)")
    return (sec * 1_000_000_000 + nanosec) / 1e9  # one rounding: 0.3 s prints as 0.3


@dataclass(frozen=True)
class JointTrajectorySpec:
    """A validated joint trajectory in the controller's joint order.

    Attributes:
        joint_names: (n,) the controller's joint order (not the message's).
        start_ns: absolute start time (``header.stamp`` in integer ns on the node's clock), or 0 for
            "start on receipt" (``header.stamp`` zero). Integer ns: a float of epoch seconds would only
            resolve ~0.2 µs, too coarse to sample a fast trajectory to 1e-9 rad.
        times: (K,) ``time_from_start`` of the points (s), strictly increasing, ≥ 0.
        positions: (K, n) rad.
        velocities: (K, n) rad/s; rows where ``has_velocity`` is False are zeros (not given).
        accelerations: (K, n) rad/s²; rows where ``has_acceleration`` is False are zeros (not given).
        has_velocity, has_acceleration: (K,) bool, per point, whether the message gave the field.
    """

    joint_names: tuple[str, ...]
    start_ns: int
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray
    has_velocity: np.ndarray
    has_acceleration: np.ndarray

    @property
    def empty(self) -> bool:
        """True for a message with no points (a cancel: hold the current desired position)."""
        return len(self.times) == 0


def _check_finite(name: str, values: np.ndarray, msg_names: Sequence[str]) -> None:
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        j = int(bad[0])
        raise TrajectoryRejected(f"{name}[{j}] (joint '{msg_names[j]}') = {float(values[j])!r} is not finite")


def _unwrap_short_way(pos: np.ndarray, continuous) -> None:
    """Make consecutive rows of ``pos`` (K, n) differ by less than π in the ``continuous`` columns, in place."""
    if continuous is None:
        return
    c = np.asarray(continuous, dtype=bool)
    if not c.any() or len(pos) < 2:
        return
    d = wrap_angle(np.diff(pos[:, c], axis=0))
    pos[1:, c] = pos[0, c] + np.cumsum(d, axis=0)


def check_trajectory_size(msg, n: int) -> None:
    """Refuse a ``JointTrajectory`` (duck-typed) with more than :data:`MAX_TRAJECTORY_POINTS` points or more
    than ``n`` joint names, by their lengths alone: before any per-point or per-name work.

    Raises:
        TrajectoryRejected: naming the field, its length and the cap.
    """
    if len(msg.points) > MAX_TRAJECTORY_POINTS:
        raise TrajectoryRejected(f"points: {len(msg.points)} points, more than the {MAX_TRAJECTORY_POINTS} accepted "
                                 "(MAX_TRAJECTORY_POINTS); send a shorter trajectory or fewer points")
    if len(msg.joint_names) > n:
        raise TrajectoryRejected(f"joint_names: {len(msg.joint_names)} names for {n} controlled joints")


def validate_joint_trajectory(msg, joint_names: Sequence[str], *, lower: np.ndarray | None = None,
                              upper: np.ndarray | None = None, continuous=None) -> JointTrajectorySpec:
    """Check a ``trajectory_msgs/JointTrajectory`` and reorder it into ``joint_names`` order.

    Args:
        msg: a ``JointTrajectory`` (or any object with ``header.stamp``, ``joint_names`` and ``points``
            whose items have ``positions``, ``velocities``, ``accelerations``, ``time_from_start``).
        joint_names: (n,) the controller's joints; the message must name each exactly once, in any order.
        lower, upper: (n,) optional position limits (rad) in ``joint_names`` order; points outside are
            rejected. ``inf`` where unbounded.
        continuous: (n,) optional bool mask of continuous joints (``joint_names`` order): their angles
            are unwrapped the short way between consecutive points (module docstring).

    Returns:
        The :class:`JointTrajectorySpec` (empty ``times`` when the message has no points).

    Raises:
        TrajectoryRejected: more than :data:`MAX_TRAJECTORY_POINTS` points or more joint names than
            ``joint_names`` (checked first, before any per-point work); duplicate, unknown or missing joint
            names; a point whose ``positions`` /
            ``velocities`` / ``accelerations`` length is neither 0 (for the optional fields) nor the number
            of joint names; accelerations without velocities; a non-finite value; ``time_from_start``
            negative or not strictly increasing; a position outside ``[lower, upper]``. The message names
            the field, the point index, the joint and the value, e.g.
            ``points[3].velocities[1] (joint 'panda_joint2') = nan is not finite``.
    """
    joint_names = tuple(joint_names)
    n = len(joint_names)
    check_trajectory_size(msg, n)
    msg_names = [str(x) for x in msg.joint_names]
    try:
        duration_to_sec(msg.header.stamp)
    except TrajectoryRejected as exc:
        raise TrajectoryRejected(f"header.stamp: {exc}") from None
    start_ns = int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)
    points = list(msg.points)

    seen: dict[str, int] = {}
    for i, name in enumerate(msg_names):
        if name in seen:
            raise TrajectoryRejected(f"joint_names[{i}] = '{name}' is a duplicate of joint_names[{seen[name]}]")
        seen[name] = i
    index = {name: i for i, name in enumerate(joint_names)}
    unknown = [(i, name) for i, name in enumerate(msg_names) if name not in index]
    if unknown:
        i, name = unknown[0]
        raise TrajectoryRejected(f"joint_names[{i}] = '{name}' is not a controlled joint "
                                 f"(expected names from {list(joint_names)})")
    if not points:
        empty = np.zeros((0, n))
        return JointTrajectorySpec(joint_names, start_ns, np.zeros(0), empty, empty.copy(), empty.copy(),
                                   np.zeros(0, bool), np.zeros(0, bool))
    missing = [name for name in joint_names if name not in seen]
    if missing:
        raise TrajectoryRejected(f"joint_names lacks controlled joint(s) {missing}; "
                                 f"partial trajectories are not accepted")
    # message column j -> controller index perm[j]
    order = np.array([seen[name] for name in joint_names])  # controller i <- message column order[i]

    K = len(points)
    times = np.empty(K)
    pos = np.empty((K, n))
    vel = np.zeros((K, n))
    acc = np.zeros((K, n))
    has_v = np.zeros(K, bool)
    has_a = np.zeros(K, bool)
    for k, p in enumerate(points):
        try:
            t = duration_to_sec(p.time_from_start)
        except TrajectoryRejected as exc:
            raise TrajectoryRejected(f"points[{k}].time_from_start: {exc}") from None
        if t < 0:
            raise TrajectoryRejected(f"points[{k}].time_from_start = {t} s is negative")
        if k and t <= times[k - 1]:
            raise TrajectoryRejected(f"points[{k}].time_from_start = {t} s is not after "
                                     f"points[{k - 1}].time_from_start = {times[k - 1]} s "
                                     f"(must be strictly increasing)")
        times[k] = t
        for field, dst, optional in (("positions", pos, False), ("velocities", vel, True),
                                     ("accelerations", acc, True)):
            raw = getattr(p, field)
            if len(raw) == 0 and optional:
                continue
            if len(raw) != n:   # before the conversion: a point of 1e6 values costs no work
                allowed = f"0 or {n}" if optional else f"{n}"
                raise TrajectoryRejected(f"points[{k}].{field} has {len(raw)} values; expected {allowed} "
                                         f"(one per joint name)")
            values = np.asarray(raw, dtype=float)
            if values.shape != (n,):
                raise TrajectoryRejected(f"points[{k}].{field}: expected {n} numbers")
            _check_finite(f"points[{k}].{field}", values, msg_names)
            dst[k] = values[order]
            if field == "velocities":
                has_v[k] = True
            elif field == "accelerations":
                if not has_v[k]:
                    raise TrajectoryRejected(f"points[{k}].accelerations given without velocities")
                has_a[k] = True
    _unwrap_short_way(pos, continuous)
    for bound, name, cmp in ((lower, "lower", np.less), (upper, "upper", np.greater)):
        if bound is None:
            continue
        bad = np.argwhere(cmp(pos, np.asarray(bound, float)))
        if bad.size:
            k, i = (int(x) for x in bad[0])
            j = int(order[i])
            raise TrajectoryRejected(f"points[{k}].positions[{j}] (joint '{joint_names[i]}') = {pos[k, i]} rad "
                                     f"is beyond the {name} limit {float(np.asarray(bound)[i])} rad")
    return JointTrajectorySpec(joint_names, start_ns, times, pos, vel, acc, has_v, has_a)


def check_trajectory_speed(spec: JointTrajectorySpec, measured: np.ndarray | None, velocity_limit,
                           *, continuous=None, factor: float = SPEED_FACTOR,
                           start_tolerance: float = START_TOLERANCE) -> None:
    """Refuse a trajectory the joints cannot follow within their velocity limits.

    Segments: the measured position -> ``points[0]`` in its ``time_from_start`` (allowed distance
    ``factor × limit × t0 + start_tolerance``; skipped when ``measured`` is None or has NaN, i.e. no state
    yet), and each ``points[k-1] -> points[k]`` (``factor × limit × Δt``). Continuous joints measure the
    first segment the short way. A velocity a point gives (``points[k].velocities``) is checked against the
    same ``factor × limit``. Joints without a finite positive limit are not checked. Average speeds and
    given velocities are lower bounds of the interpolated peak: what is refused cannot be followed by any
    interpolation.

    Args:
        spec: a validated trajectory (model order); measured: ``(n,)`` measured positions or None;
        velocity_limit: ``(n,)`` rad/s (m/s), model order.

    Raises:
        TrajectoryRejected: naming the joint, the segment, the implied and the allowed speed.
    """
    if spec.empty:
        return
    vmax = np.asarray(velocity_limit, dtype=float)
    gated = np.isfinite(vmax) & (vmax > 0)
    if not gated.any():
        return
    allowed_v = np.where(gated, factor * vmax, np.inf)
    pos, times = spec.positions, spec.times
    if measured is not None and np.isfinite(measured).all():
        d0 = pos[0] - np.asarray(measured, dtype=float)
        if continuous is not None:
            c = np.asarray(continuous, dtype=bool)
            d0[c] = wrap_angle(d0[c])
        excess = np.abs(d0) - (allowed_v * times[0] + start_tolerance)
        j = int(np.argmax(np.where(gated, excess, -np.inf)))
        if gated[j] and excess[j] > 0:
            t0 = float(times[0])
            implied = f"{abs(d0[j]) / t0:.4g} rad/s" if t0 > 0 else "an instant jump"
            raise TrajectoryRejected(
                f"joint '{spec.joint_names[j]}', segment measured -> points[0]: {abs(d0[j]):.4g} rad in "
                f"time_from_start {t0:g} s implies {implied}, above {factor:g} × its velocity limit "
                f"{vmax[j]:g} rad/s (start tolerance {start_tolerance:g} rad); start the trajectory at the "
                "measured position or give it more time")
    if len(times) > 1:
        speed = np.abs(np.diff(pos, axis=0)) / np.diff(times)[:, None]
        over = np.where(gated[None, :], speed - allowed_v[None, :], -np.inf)
        k, j = np.unravel_index(int(np.argmax(over)), over.shape)
        if over[k, j] > 1e-12:
            raise TrajectoryRejected(
                f"joint '{spec.joint_names[j]}', segment points[{k}] -> points[{k + 1}]: implies "
                f"{speed[k, j]:.4g} rad/s, above {factor:g} × its velocity limit {vmax[j]:g} rad/s")
    if spec.has_velocity.any():
        given = np.where(spec.has_velocity[:, None] & gated[None, :],
                         np.abs(spec.velocities) - allowed_v[None, :], -np.inf)
        k, j = np.unravel_index(int(np.argmax(given)), given.shape)
        if given[k, j] > 1e-12:
            raise TrajectoryRejected(
                f"points[{k}].velocities (joint '{spec.joint_names[j]}') = {spec.velocities[k, j]:.4g} "
                f"rad/s, above {factor:g} × its velocity limit {vmax[j]:g} rad/s")


def implied_accelerations(spec: JointTrajectorySpec) -> np.ndarray:
    """``(K - 2, n)`` lower bounds of the peak |q̈| (rad/s²) around each interior point k = 1 … K-2.

    Segment k's average speed v_k = Δq_k / Δt_k is reached somewhere inside it (mean value theorem), so any
    C¹ interpolation changes its velocity by |v_k − v_(k−1)| within Δt_(k−1) + Δt_k: its peak acceleration is
    at least their ratio (a piecewise-linear one jumps: infinite).
    """
    if len(spec.times) < 3:
        return np.zeros((0, len(spec.joint_names)))
    dt = np.diff(spec.times)
    v = np.diff(spec.positions, axis=0) / dt[:, None]
    return np.abs(np.diff(v, axis=0)) / (dt[:-1] + dt[1:])[:, None]


def check_trajectory_acceleration(spec: JointTrajectorySpec, acceleration_limit, *, factor: float = SPEED_FACTOR,
                                  effort_limit=None, inertia_diagonal=None,
                                  torque_factor: float = ACCELERATION_TORQUE_FACTOR) -> None:
    """Refuse a trajectory whose accelerations the joints cannot follow, as :func:`check_trajectory_speed`
    does for speeds.

    Per joint and interior point, the acceleration is the larger of the point's given
    ``points[k].accelerations`` and the lower bound of :func:`implied_accelerations`. It is refused

    * above ``factor × acceleration_limit`` where that limit is finite (joint_limits.yaml); else
    * where ``effort_limit`` is finite and ``inertia_diagonal`` given: when ``M_jj(q_k) · |q̈|`` exceeds
      ``torque_factor × effort_limit`` (:data:`ACCELERATION_TORQUE_FACTOR`), M_jj(q_k) the joint's own
      inertia at the point, evaluated at the :data:`MAX_INERTIA_EVALUATIONS` points whose accelerations
      are the largest relative to the effort limits (bounded cost: on a 7-joint arm 500 evaluations take
      ~5 ms; a whole :data:`MAX_TRAJECTORY_POINTS` message validates in ~80 ms).

    Args:
        spec: a validated trajectory (model order).
        acceleration_limit: ``(n,)`` rad/s² (m/s²), inf where unknown.
        effort_limit: ``(n,)`` N·m (N), or None.
        inertia_diagonal: callable ``q (n,) -> (n,)`` diagonal of M(q) (kg·m²), or None; called only at the
            points where a joint without an acceleration limit accelerates.

    Raises:
        TrajectoryRejected: naming the joint, the point, the acceleration and the bound.
    """
    if spec.empty:
        return
    n = len(spec.joint_names)
    acc = np.zeros((len(spec.times), n))
    acc[1:-1] = implied_accelerations(spec)
    given = np.where(spec.has_acceleration[:, None], np.abs(spec.accelerations), 0.0)
    acc = np.maximum(acc, given)
    amax = np.asarray(acceleration_limit, dtype=float)
    limited = np.isfinite(amax) & (amax > 0)
    if limited.any():
        over = np.where(limited[None, :], acc - factor * np.where(limited, amax, 0.0)[None, :], -np.inf)
        k, j = np.unravel_index(int(np.argmax(over)), over.shape)
        if over[k, j] > 1e-9:
            raise TrajectoryRejected(
                f"joint '{spec.joint_names[j]}' at points[{k}]: acceleration {acc[k, j]:.4g} rad/s² (given or "
                f"implied by the neighbouring segments), above {factor:g} × its acceleration limit {amax[j]:g} "
                "rad/s²")
    if effort_limit is None or inertia_diagonal is None:
        return
    emax = np.asarray(effort_limit, dtype=float)
    free = ~limited & np.isfinite(emax) & (emax > 0)
    if not free.any():
        return
    # M(q) costs ~10 µs a point: evaluated where the accelerations relative to the effort limits are largest
    ratio = (acc[:, free] / emax[free]).max(axis=1)
    rows = np.argsort(-ratio, kind="stable")[:MAX_INERTIA_EVALUATIONS]
    for k in rows[ratio[rows] > 0]:
        need = np.asarray(inertia_diagonal(spec.positions[k]), dtype=float) * acc[k]
        over = np.where(free, need - torque_factor * emax, -np.inf)
        j = int(np.argmax(over))
        if over[j] > 0:
            raise TrajectoryRejected(
                f"joint '{spec.joint_names[j]}' at points[{k}]: acceleration {acc[k, j]:.4g} rad/s² (given or "
                f"implied by the neighbouring segments) needs {need[j]:.4g} N·m for the joint's own inertia "
                f"alone, above {torque_factor:g} × its effort limit {emax[j]:g} N·m")


def _segment_coefficients(h, q0, v0, a0, q1, v1, a1, kind):
    """Polynomial coefficients c[0..5] (each (S, n)) of q(τ) = Σ c_i τ^i on τ ∈ [0, h].

    ``h`` is (S, 1); ``kind`` (S,) in {LINEAR, CUBIC, QUINTIC}. Boundary conditions of Lynch & Park
    (2017) §9.2.2 (cubic: q, qd at both ends; quintic: q, qd, qdd at both ends).
    """
    dq = q1 - q0
    c = np.zeros((6,) + q0.shape)
    quint = (kind == QUINTIC)[:, None]
    cub = (kind == CUBIC)[:, None]
    lin = (kind == LINEAR)[:, None]
    h2, h3 = h * h, h * h * h
    c[0] = q0
    # linear
    c[1] = np.where(lin, dq / h, v0)
    # cubic: q(h) = q1, qd(h) = v1
    c2_cub = (3 * dq - (2 * v0 + v1) * h) / h2
    c3_cub = (-2 * dq + (v0 + v1) * h) / h3
    # quintic: q, qd, qdd at both ends
    h4, h5 = h3 * h, h3 * h2
    c2_q = a0 / 2
    c3_q = (20 * dq - (8 * v1 + 12 * v0) * h - (3 * a0 - a1) * h2) / (2 * h3)
    c4_q = (-30 * dq + (14 * v1 + 16 * v0) * h + (3 * a0 - 2 * a1) * h2) / (2 * h4)
    c5_q = (12 * dq - 6 * (v1 + v0) * h + (a1 - a0) * h2) / (2 * h5)
    c[2] = np.where(quint, c2_q, np.where(cub, c2_cub, 0.0))
    c[3] = np.where(quint, c3_q, np.where(cub, c3_cub, 0.0))
    c[4] = np.where(quint, c4_q, 0.0)
    c[5] = np.where(quint, c5_q, 0.0)
    return c


class PiecewisePolynomialTrajectory:
    """Piecewise linear / cubic / quintic q(t) through points, vectorized over joints and sample times.

    Args:
        times: (K,) strictly increasing times (s, relative to the trajectory start), K ≥ 1.
        positions: (K, n) rad.
        velocities, accelerations: (K, n) rad/s and rad/s², or ``None`` (not given).
        has_velocity, has_acceleration: (K,) bool per point (default: given iff the array is not None).

    Sampling before ``times[0]`` holds the first point's position, after ``times[-1]`` the last one's, with
    qd = qdd = 0 (``joint_trajectory_controller`` semantics). Per segment the degree is chosen as in the
    module docstring. Cost of :meth:`sample` at one time: one binary search and a degree-5 Horner
    evaluation over n joints (a few µs).

    Raises:
        ValueError: shapes that disagree, or times not strictly increasing.
    """

    def __init__(self, times, positions, velocities=None, accelerations=None, *,
                 has_velocity=None, has_acceleration=None):
        t = np.asarray(times, float).reshape(-1)
        q = np.atleast_2d(np.asarray(positions, float))
        K, n = q.shape
        if t.shape != (K,):
            raise ValueError(f"times has shape {t.shape}; expected ({K},) to match positions {q.shape}")
        if K == 0:
            raise ValueError("a trajectory needs at least one point")
        if np.any(np.diff(t) <= 0):
            k = int(np.flatnonzero(np.diff(t) <= 0)[0]) + 1
            raise ValueError(f"times[{k}] = {t[k]} is not after times[{k - 1}] = {t[k - 1]}")
        v = np.zeros((K, n)) if velocities is None else np.asarray(velocities, float).reshape(K, n)
        a = np.zeros((K, n)) if accelerations is None else np.asarray(accelerations, float).reshape(K, n)
        hv = np.full(K, velocities is not None) if has_velocity is None else np.asarray(has_velocity, bool)
        ha = np.full(K, accelerations is not None) if has_acceleration is None else np.asarray(has_acceleration,
                                                                                              bool)
        self.times = t
        self._times_list = t.tolist()
        self.n = n
        self.positions = q
        self.start_time_rel = float(t[0])
        self.end_time_rel = float(t[-1])
        if K > 1:
            kind = np.where(hv[:-1] & hv[1:] & ha[:-1] & ha[1:], QUINTIC,
                            np.where(hv[:-1] & hv[1:], CUBIC, LINEAR))
            h = np.diff(t)[:, None]
            self.segment_kind = kind
            # (K-1, 6, n): coefficient i of segment k
            self._coef = np.ascontiguousarray(
                _segment_coefficients(h, q[:-1], v[:-1], a[:-1], q[1:], v[1:], a[1:], kind).transpose(1, 0, 2))
        else:
            self.segment_kind = np.zeros(0, int)
            self._coef = np.zeros((0, 6, n))

    @property
    def duration(self) -> float:
        """Time of the last point (s, relative)."""
        return self.end_time_rel

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q (rad), qd (rad/s), qdd (rad/s²), each (n,), at relative time ``t`` (s)."""
        tt = self._times_list
        if t < tt[0] or t >= tt[-1]:
            z = np.zeros(self.n)
            return self.positions[0 if t < tt[0] else -1].copy(), z, z.copy()
        k = bisect_right(tt, t) - 1
        x = t - tt[k]
        x2 = x * x
        x3 = x2 * x
        # rows: d^r/dτ^r of (1, τ, τ², τ³, τ⁴, τ⁵) for r = 0, 1, 2; one (3, 6) @ (6, n) product
        basis = np.array(((1.0, x, x2, x3, x3 * x, x3 * x2),
                          (0.0, 1.0, 2 * x, 3 * x2, 4 * x3, 5 * x3 * x),
                          (0.0, 0.0, 2.0, 6 * x, 12 * x2, 20 * x3)))
        out = basis @ self._coef[k]
        return out[0], out[1], out[2]

    def sample_many(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Vectorized :meth:`sample`: ``t`` (T,) relative times → q, qd, qdd each (T, n)."""
        t = np.asarray(t, float).reshape(-1)
        tt = self.times
        T = t.size
        q = np.empty((T, self.n))
        qd = np.zeros((T, self.n))
        qdd = np.zeros((T, self.n))
        before = t < tt[0]
        after = t >= tt[-1]
        q[before] = self.positions[0]
        q[after & ~before] = self.positions[-1]
        inside = ~(before | after)
        if inside.any():
            ti = t[inside]
            k = np.searchsorted(tt, ti, side="right") - 1
            c = self._coef[k]  # (m, 6, n)
            x = (ti - tt[k])[:, None]
            q[inside] = c[:, 0] + x * (c[:, 1] + x * (c[:, 2] + x * (c[:, 3] + x * (c[:, 4] + x * c[:, 5]))))
            qd[inside] = c[:, 1] + x * (2 * c[:, 2] + x * (3 * c[:, 3] + x * (4 * c[:, 4] + x * 5 * c[:, 5])))
            qdd[inside] = 2 * c[:, 2] + x * (6 * c[:, 3] + x * (12 * c[:, 4] + x * 20 * c[:, 5]))
        return q, qd, qdd


@dataclass(frozen=True)
class DesiredState:
    """The desired joint state at one control tick, arrays (n,) in the controller's joint order.

    Attributes:
        q: rad. qd: rad/s. qdd: rad/s².
        tracking: True while a trajectory is being followed (between its start and its last point);
            False while holding a position (before the first trajectory, after the last point, after a
            cancel).
    """

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tracking: bool


class _Active:
    __slots__ = ("poly", "t0")

    def __init__(self, poly: PiecewisePolynomialTrajectory, t0: float):
        self.poly = poly
        self.t0 = t0


class TrajectoryExecutor:
    """Which trajectory is executed when: ``joint_trajectory_controller`` replacement semantics.

    Args:
        n: number of controlled joints.
        hold_position: (n,) initial desired position (rad), held until a trajectory starts; ``None`` means
            "not known yet" (see :meth:`set_hold_position`; :meth:`sample` returns ``None`` until then).
        epoch_ns: the clock reading (ns) that times passed to :meth:`submit` / :meth:`sample` count from,
            e.g. the node's start time: keeping the float seconds small keeps them exact to ~1e-15 s.
        continuous: (n,) optional bool mask of continuous joints: a trajectory starting from a desired
            state is moved by whole turns of these joints so that its first point is within π of it.

    Usage: :meth:`submit` each validated :class:`JointTrajectorySpec` with the receive time, and call
    :meth:`sample` once per control tick with the current time (both in seconds since ``epoch_ns``).
    A submitted trajectory waits until its start time (``header.stamp``, or the receive time when the
    stamp is zero); from then on it replaces whatever was executing. Its implicit first point is the
    desired state at that instant (so the motion is continuous when the first point is later than 0 s).
    Of several pending trajectories, the latest submitted one wins from its own start time.
    """

    def __init__(self, n: int, hold_position=None, epoch_ns: int = 0, continuous=None):
        self.n = int(n)
        c = np.zeros(self.n, bool) if continuous is None else np.asarray(continuous, dtype=bool).reshape(-1)
        if c.shape != (self.n,):
            raise ValueError(f"continuous: expected {self.n} flags, got {c.size}")
        self._continuous = c
        self.epoch_ns = int(epoch_ns)
        self._hold = None if hold_position is None else np.asarray(hold_position, float).copy()
        self._active: _Active | None = None
        self._pending: list[tuple[float, JointTrajectorySpec]] = []
        self.last: DesiredState | None = None

    @property
    def has_hold_position(self) -> bool:
        return self._hold is not None or self._active is not None

    def set_hold_position(self, q) -> None:
        """Set the position to hold while no trajectory is active (e.g. the first measured q, rad)."""
        self._hold = np.asarray(q, float).copy()

    def submit(self, spec: JointTrajectorySpec, received: float) -> float:
        """Queue ``spec`` received at ``received`` (s since ``epoch_ns``); return its start time (s since
        ``epoch_ns``). Pending trajectories starting at or after it are dropped (the newer message replaces
        them)."""
        if len(spec.joint_names) != self.n:
            raise ValueError(f"trajectory has {len(spec.joint_names)} joints; the executor has {self.n}")
        t_start = received if spec.start_ns == 0 else (spec.start_ns - self.epoch_ns) * 1e-9
        self._pending = [(t, s) for (t, s) in self._pending if t < t_start]
        self._pending.append((t_start, spec))
        self._pending.sort(key=lambda p: p[0])
        return t_start

    def _state_at(self, t: float) -> DesiredState | None:
        if self._active is not None:
            rel = t - self._active.t0
            q, qd, qdd = self._active.poly.sample(rel)
            tracking = rel < self._active.poly.end_time_rel
            return DesiredState(q, qd, qdd, tracking)
        if self._hold is not None:
            z = np.zeros(self.n)
            return DesiredState(self._hold.copy(), z, z.copy(), False)
        return None

    def _activate(self, t_start: float, spec: JointTrajectorySpec) -> None:
        prev = self._state_at(t_start)
        if spec.empty:  # cancel: hold the current desired position
            if prev is not None:
                self._hold = prev.q.copy()
            self._active = None
            return
        times, pos, vel, acc = spec.times, spec.positions, spec.velocities, spec.accelerations
        hv, ha = spec.has_velocity, spec.has_acceleration
        c = self._continuous
        if prev is not None and c.any():
            # whole turns so that the first point is within π of where the controller is
            turns = np.round((prev.q[c] - pos[0, c]) / (2 * np.pi))
            if turns.any():
                pos = pos.copy()
                pos[:, c] += 2 * np.pi * turns
        if times[0] > 0 and prev is not None:
            # implicit first point: where the controller wants to be at the start time
            times = np.concatenate([[0.0], times])
            pos = np.vstack([prev.q, pos])
            vel = np.vstack([prev.qd, vel])
            acc = np.vstack([prev.qdd, acc])
            hv = np.concatenate([[True], hv])
            ha = np.concatenate([[True], ha])
        poly = PiecewisePolynomialTrajectory(times, pos, vel, acc, has_velocity=hv, has_acceleration=ha)
        self._active = _Active(poly, t_start)
        self._hold = pos[-1].copy()

    def sample(self, now: float) -> DesiredState | None:
        """Desired state (q, qd, qdd; (n,) each) at ``now`` (s since ``epoch_ns``); ``None`` while nothing is
        known (no hold position and no trajectory started yet)."""
        while self._pending and self._pending[0][0] <= now:
            t_start, spec = self._pending.pop(0)
            self._activate(t_start, spec)
        state = self._state_at(now)
        self.last = state
        return state
