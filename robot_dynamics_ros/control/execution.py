"""Trajectory goals with ``joint_trajectory_controller``'s FollowJointTrajectory semantics (ROS-free).

:class:`TrajectoryExecution` sits on a
:class:`~robot_dynamics_ros.control.computed_torque.ComputedTorqueController` and turns a goal (a
``trajectory_msgs/JointTrajectory`` with per-joint tolerances, read by duck typing) into a trajectory of
the controller's executor — the same validation (:meth:`ComputedTorqueController.trajectory_from_message`)
and the same :meth:`~ComputedTorqueController.submit_trajectory` as the ``~/joint_trajectory`` topic
(:meth:`TrajectoryExecution.submit_topic`) — and watches it, once per control tick, against its tolerances.
This is the contract MoveIt's execution manager relies on (ros2_controllers, joint_trajectory_controller
docs, "Trajectory tolerances" and "Speed scaling"):

* **Acceptance** (:meth:`TrajectoryExecution.prepare`, :class:`GoalRejected` naming joint and point): the
  topic's checks (known joints, strictly increasing ``time_from_start``, finite values, position limits,
  speeds within the velocity limits), plus: all controlled joints named unless
  ``allow_partial_joints_goal`` (then the others hold their current desired position), a zero final
  velocity, and — when the first point is meant to be reached at t = 0 — that point within
  ``start_tolerance`` of the measured state (JTC would jump there; this controller never jumps).
* **Timing**: ``header.stamp`` 0 = start now; a stamp in the past drops the points already due and starts
  the rest now (none left: ``OLD_HEADER_TIMESTAMP``).
* **Tolerances** per joint (:func:`goal_tolerances`): a message value 0 = the default of
  :class:`ExecutionSettings`, −1 = not checked; position (rad) and velocity (rad/s) are checked,
  acceleration is not (no measured acceleration). While the trajectory runs, |q_d − q| and |q̇_d − q̇| are
  held to the path tolerance (else ``PATH_TOLERANCE_VIOLATED``, hold the measured position). After the
  last point: success once every joint is within the goal tolerance and |q̇| ≤ ``stopped_velocity_
  tolerance``; not so ``goal_time`` after the end (0 = wait without limit, as JTC) →
  ``GOAL_TOLERANCE_VIOLATED`` (hold the end). Times are virtual trajectory time (speed scaling); the
  result text reports the real duration.
* **Cancel** (:meth:`TrajectoryExecution.cancel`): the speed-scaling factor ramps to 0 within its rate and
  jerk limits (:mod:`~robot_dynamics_ros.control.speed_scaling`): the arm decelerates along the path with a
  continuous commanded acceleration, then holds where it stopped → ``CANCELED``.
* **Preemption**: a new goal (or a topic trajectory) ends the running one as JTC does: aborted with
  ``INVALID_GOAL`` and "preempted"; the new trajectory starts from the current desired state.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np

from robot_dynamics_ros.control.interpolation import (
    START_TOLERANCE, JointTrajectorySpec, TrajectoryRejected, check_trajectory_size, check_trajectory_speed,
    duration_to_sec,
)
from robot_dynamics_ros.control.laws import wrap_angle

__all__ = ["SUCCESSFUL", "INVALID_GOAL", "INVALID_JOINTS", "OLD_HEADER_TIMESTAMP", "PATH_TOLERANCE_VIOLATED",
           "GOAL_TOLERANCE_VIOLATED", "SUCCEEDED", "ABORTED", "CANCELED", "ExecutionSettings", "GoalRejected",
           "Tolerances", "Outcome", "goal_tolerances", "goal_time_s", "TrajectoryExecution"]

#: ``control_msgs/action/FollowJointTrajectory`` result codes
SUCCESSFUL, INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP = 0, -1, -2, -3
PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED = -4, -5
#: terminal goal states (the action's)
SUCCEEDED, ABORTED, CANCELED = "succeeded", "aborted", "canceled"
#: rad/s; a last point's velocity up to this counts as zero (round-off of a planner's polynomial)
FINAL_VELOCITY_ROUNDOFF = 1e-9


@dataclass(frozen=True)
class ExecutionSettings:
    """Defaults of the goal contract (module docstring); one value for every joint.

    Attributes:
        start_tolerance: rad (m); how far a first point meant for t = 0 may be from the measured state.
        path_tolerance: rad; default |q_d − q| bound while running; 0 = not checked (JTC's default).
        path_velocity_tolerance: rad/s; default |q̇_d − q̇| bound while running; 0 = not checked.
        goal_tolerance: rad; default |q_end − q| for success; 0 = not checked. Default 0.01: MoveIt
            refuses the next plan when the start state is more than 0.01 rad off.
        stopped_velocity_tolerance: rad/s; |q̇| bound for success (JTC's default 0.01).
        goal_time: s (virtual time) after the last point to reach the goal tolerance; 0 = no limit.
        allow_partial_joints_goal: accept goals naming a subset of the joints (the others hold).
    """

    start_tolerance: float = START_TOLERANCE
    path_tolerance: float = 0.0
    path_velocity_tolerance: float = 0.0
    goal_tolerance: float = 0.01
    stopped_velocity_tolerance: float = 0.01
    goal_time: float = 0.5
    allow_partial_joints_goal: bool = False

    def check(self) -> None:
        """Raise ValueError naming the field when a value is negative or not finite."""
        for name in ("start_tolerance", "path_tolerance", "path_velocity_tolerance", "goal_tolerance",
                     "stopped_velocity_tolerance", "goal_time"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} = {v!r}: must be a finite number ≥ 0")


class GoalRejected(ValueError):
    """A goal that is not executed; ``code`` is the FollowJointTrajectory result code, the message says why."""

    def __init__(self, code: int, text: str):
        super().__init__(text)
        self.code = code


@dataclass(frozen=True)
class Tolerances:
    """Per-joint tolerances in model order, ``(n,)`` each; ``inf`` = not checked.

    Attributes: path_position (rad), path_velocity (rad/s), goal_position (rad), goal_velocity (rad/s),
    goal_time (s, inf = no limit).
    """

    path_position: np.ndarray
    path_velocity: np.ndarray
    goal_position: np.ndarray
    goal_velocity: np.ndarray
    goal_time: float


@dataclass(frozen=True)
class Outcome:
    """How a goal ended: ``state`` one of SUCCEEDED / ABORTED / CANCELED, ``code`` the result code,
    ``text`` the ``error_string``."""

    state: str
    code: int
    text: str


def _default(value: float, default: float, what: str) -> float:
    """JTC's reading of one tolerance value: 0 → default (0 there = unchecked), −1 → unchecked."""
    v = float(value)
    if not math.isfinite(v) or (v < 0 and v != -1.0):
        raise GoalRejected(INVALID_GOAL, f"{what} = {value!r}: must be ≥ 0 or -1 (not checked)")
    if v == -1.0:
        return math.inf
    if v == 0.0:
        v = default
    return v if v > 0 else math.inf


def goal_tolerances(settings: ExecutionSettings, joint_names: Sequence[str], path_tolerance=(),
                    goal_tolerance=(), goal_time_tolerance: float = 0.0) -> Tolerances:
    """The per-joint tolerances of a goal (module docstring).

    Args:
        settings: the defaults. joint_names: ``(n,)`` model order.
        path_tolerance, goal_tolerance: ``control_msgs/JointTolerance`` items (``name``, ``position``,
            ``velocity``, ``acceleration``), duck-typed. goal_time_tolerance: s, 0 = the default.

    Raises:
        GoalRejected: a tolerance for a joint that is not controlled, or a negative value other than −1.
    """
    index = {j: i for i, j in enumerate(joint_names)}
    n = len(joint_names)

    def table(entries, kind, pos_default, vel_default):
        pos = np.full(n, pos_default if pos_default > 0 else math.inf)
        vel = np.full(n, vel_default if vel_default > 0 else math.inf)
        for k, e in enumerate(entries):
            name = str(e.name)
            if name not in index:
                raise GoalRejected(INVALID_JOINTS, f"{kind}[{k}].name = '{name}' is not a controlled joint")
            i = index[name]
            pos[i] = _default(e.position, pos_default, f"{kind}[{k}].position (joint '{name}')")
            vel[i] = _default(e.velocity, vel_default, f"{kind}[{k}].velocity (joint '{name}')")
        return pos, vel

    s = settings
    pp, pv = table(path_tolerance, "path_tolerance", s.path_tolerance, s.path_velocity_tolerance)
    gp, gv = table(goal_tolerance, "goal_tolerance", s.goal_tolerance, 0.0)
    gt = _default(goal_time_tolerance, s.goal_time, "goal_time_tolerance")
    return Tolerances(pp, pv, gp, gv, gt)


def _complete(msg, joint_names: Sequence[str], hold: np.ndarray):
    """A message-like copy of ``msg`` naming every joint: the missing ones at ``hold`` (rad), with zero
    velocity and acceleration where the points give them."""
    named = set(msg.joint_names)
    missing = [i for i, j in enumerate(joint_names) if j not in named]
    if not missing or not len(msg.points):
        return msg
    extra_names = [joint_names[i] for i in missing]
    extra_q = [float(hold[i]) for i in missing]
    points = []
    for p in msg.points:
        points.append(SimpleNamespace(
            positions=list(p.positions) + extra_q,
            velocities=list(p.velocities) + [0.0] * len(missing) if len(p.velocities) else [],
            accelerations=list(p.accelerations) + [0.0] * len(missing) if len(p.accelerations) else [],
            time_from_start=p.time_from_start))
    return SimpleNamespace(header=msg.header, joint_names=list(msg.joint_names) + extra_names, points=points)


def _drop_past(spec: JointTrajectorySpec, now_s: float, start_s: float) -> JointTrajectorySpec:
    """A stamped start in the past: the points due by ``now_s`` dropped, the rest starting now."""
    elapsed = now_s - start_s
    keep = spec.times > elapsed
    if not keep.any():
        raise GoalRejected(OLD_HEADER_TIMESTAMP, f"header.stamp is {elapsed:.3f} s in the past and every point "
                                                 f"is already due (last at {spec.times[-1]:g} s)")
    return replace(spec, start_ns=0, times=spec.times[keep] - elapsed, positions=spec.positions[keep],
                   velocities=spec.velocities[keep], accelerations=spec.accelerations[keep],
                   has_velocity=spec.has_velocity[keep], has_acceleration=spec.has_acceleration[keep])


class _Goal:
    __slots__ = ("spec", "times", "tol", "start_tau", "start_real", "stopping", "outcome", "index")

    def __init__(self, spec, tol, start_tau, start_real):
        self.spec, self.tol, self.start_tau, self.start_real = spec, tol, start_tau, start_real
        self.times = spec.times.tolist()
        self.stopping = False
        self.outcome: Outcome | None = None
        self.index = 0


class TrajectoryExecution:
    """Goals on a :class:`~robot_dynamics_ros.control.computed_torque.ComputedTorqueController` (module
    docstring). Call :meth:`update` after every control step.

    Args:
        controller: the controller (its executor, virtual clock and measured state are used).
        settings: :class:`ExecutionSettings`.

    Raises:
        ValueError: settings out of range.
    """

    def __init__(self, controller, settings: ExecutionSettings | None = None):
        self.controller = controller
        self.settings = settings if settings is not None else ExecutionSettings()
        self.settings.check()
        self._goal: _Goal | None = None

    @property
    def active(self) -> bool:
        """A goal is running (not yet ended)."""
        return self._goal is not None and self._goal.outcome is None

    # ------------------------------------------------------------------ acceptance
    def _hold_reference(self) -> np.ndarray:
        c = self.controller
        last = c.trajectory.last
        if last is not None:
            return last.q
        if c.mapper.ready:
            return c.mapper.q
        raise GoalRejected(INVALID_GOAL, "no joint state received yet")

    def prepare(self, trajectory, now_s: float, *, goal: bool = True) -> JointTrajectorySpec:
        """Validate ``trajectory`` (a ``JointTrajectory``, duck-typed) received at ``now_s`` (s since the
        controller's epoch) and return it ready for :meth:`ComputedTorqueController.submit_trajectory`.

        ``goal`` adds the action's own checks (partial joint sets, zero final velocity, start tolerance,
        no empty goal); the topic (``goal=False``) keeps its own contract (module docstring of
        :mod:`~robot_dynamics_ros.control.interpolation`: an empty message cancels).

        Raises:
            GoalRejected: with the result code and a reason naming joint and point.
        """
        c = self.controller
        names = tuple(c.model.joint_names)
        try:
            check_trajectory_size(trajectory, len(names))   # before _complete's per-point work
        except TrajectoryRejected as exc:
            raise GoalRejected(INVALID_GOAL, str(exc)) from None
        if goal:
            if not len(trajectory.points):
                raise GoalRejected(INVALID_GOAL, "trajectory has no points")
            unknown = [j for j in trajectory.joint_names if j not in names]
            if unknown:
                raise GoalRejected(INVALID_JOINTS, f"joint '{unknown[0]}' is not a controlled joint "
                                                   f"(controlled: {list(names)})")
            missing = [j for j in names if j not in set(trajectory.joint_names)]
            if missing and not self.settings.allow_partial_joints_goal:
                raise GoalRejected(INVALID_JOINTS, f"trajectory lacks joint(s) {missing} "
                                                   "(allow_partial_joints_goal is false)")
            if missing:
                trajectory = _complete(trajectory, names, self._hold_reference())
        try:
            spec = c.trajectory_from_message(trajectory, self.settings.start_tolerance)
        except TrajectoryRejected as exc:
            raise GoalRejected(INVALID_GOAL, str(exc)) from None
        if spec.start_ns and c.time_s(spec.start_ns) < now_s and spec.empty:
            spec = replace(spec, start_ns=0)     # a cancel stamped in the past cancels now
        elif spec.start_ns and c.time_s(spec.start_ns) < now_s:
            spec = _drop_past(spec, now_s, c.time_s(spec.start_ns))
            measured = c.mapper.q if c.mapper.ready else None
            try:
                check_trajectory_speed(spec, measured, c.model.velocity_limit, continuous=c._continuous,
                                       start_tolerance=self.settings.start_tolerance)
            except TrajectoryRejected as exc:
                raise GoalRejected(INVALID_GOAL, str(exc)) from None
        if goal:
            self._check_goal_ends(spec)
        return spec

    def _check_goal_ends(self, spec: JointTrajectorySpec) -> None:
        c = self.controller
        if spec.has_velocity[-1]:
            v = spec.velocities[-1]
            j = int(np.argmax(np.abs(v)))
            if abs(v[j]) > FINAL_VELOCITY_ROUNDOFF:
                raise GoalRejected(INVALID_GOAL, f"points[{len(spec.times) - 1}].velocities (joint "
                                                 f"'{spec.joint_names[j]}') = {v[j]:g}: the last point "
                                                 "must have zero velocity")
        if spec.times[0] == 0.0 and c.mapper.ready:
            d = spec.positions[0] - c.mapper.q
            d[c._continuous] = wrap_angle(d[c._continuous])
            j = int(np.argmax(np.abs(d)))
            if abs(d[j]) > self.settings.start_tolerance:
                raise GoalRejected(INVALID_GOAL, f"points[0].positions (joint '{spec.joint_names[j]}') is "
                                                 f"{abs(d[j]):.4g} rad from the measured state at "
                                                 f"time_from_start 0; start_tolerance is "
                                                 f"{self.settings.start_tolerance:g} rad")

    # ------------------------------------------------------------------ submission
    def _preempt(self) -> Outcome | None:
        g = self._goal
        self._goal = None
        if g is None or g.outcome is not None:
            return None
        if g.stopping:
            self.controller.clock.resume()
        g.outcome = Outcome(ABORTED, INVALID_GOAL, "preempted")
        return g.outcome

    def start(self, spec: JointTrajectorySpec, tolerances: Tolerances, now_s: float) -> Outcome | None:
        """Run a prepared goal from ``now_s``; returns the outcome of the goal it preempts (or None)."""
        old = self._preempt()
        start_tau = self.controller.submit_trajectory(spec, now_s)
        self._goal = _Goal(spec, tolerances, start_tau, now_s)
        return old

    def submit_topic(self, trajectory, now_s: float) -> tuple[JointTrajectorySpec, float, Outcome | None]:
        """The ``~/joint_trajectory`` topic: :meth:`prepare` (``goal=False``) and submit, no monitoring.

        Returns:
            ``(spec, start, preempted)``: the spec, its start in virtual time, the outcome of a goal it
            preempted (or None).

        Raises:
            GoalRejected: as :meth:`prepare`; the running goal is kept.
        """
        spec = self.prepare(trajectory, now_s, goal=False)
        old = self._preempt()
        return spec, self.controller.submit_trajectory(spec, now_s), old

    def cancel(self) -> None:
        """Stop the running goal smoothly along its path (module docstring); :meth:`update` reports
        CANCELED once the arm holds."""
        g = self._goal
        if g is not None and g.outcome is None and not g.stopping:
            g.stopping = True
            self.controller.clock.stop()

    def deactivate(self) -> Outcome | None:
        """The controller stops commanding: the running goal is aborted (returned) and its trajectory
        dropped (on reactivation the controller holds the last desired position)."""
        g = self._goal
        self._goal = None
        if g is None or g.outcome is not None:
            return None
        self.controller.hold_desired()
        self.controller.clock.resume(jump=True)
        g.outcome = Outcome(ABORTED, INVALID_GOAL, "controller deactivated")
        return g.outcome

    # ------------------------------------------------------------------ monitoring
    def update(self, now_s: float) -> Outcome | None:
        """Check the running goal after a control step at ``now_s`` (s since the epoch); returns its outcome
        when it ends at this step, else None."""
        g = self._goal
        c = self.controller
        if g is None or g.outcome is not None or c.desired is None or not c.mapper.ready:
            return None
        if g.stopping:
            if not c.clock.stopped:
                return None
            c.hold_desired()
            c.clock.resume(jump=True)
            return self._end(g, Outcome(CANCELED, SUCCESSFUL, "canceled: stopped on the path and holding"))
        rel = c.virtual_time - g.start_tau
        duration = float(g.spec.times[-1])
        g.index = max(0, bisect_right(g.times, rel) - 1) if rel >= 0 else 0
        if rel < 0:
            return None
        q, qd, d = c.mapper.q, c.mapper.qd, c.desired
        err = self._position_error(d.q, q)
        if rel < duration:
            bad = self._first_over(err, g.tol.path_position)
            if bad is not None:
                c.hold_desired(q)
                return self._end(g, Outcome(ABORTED, PATH_TOLERANCE_VIOLATED, self._text(
                    "path", bad, err, g.tol.path_position, "rad", rel)))
            verr = d.qd - qd
            bad = self._first_over(verr, g.tol.path_velocity)
            if bad is not None:
                c.hold_desired(q)
                return self._end(g, Outcome(ABORTED, PATH_TOLERANCE_VIOLATED, self._text(
                    "path velocity", bad, verr, g.tol.path_velocity, "rad/s", rel)))
            return None
        pos_bad = self._first_over(err, g.tol.goal_position)
        vel_bad = self._first_over(qd, np.minimum(g.tol.goal_velocity, self.settings.stopped_velocity_tolerance))
        if pos_bad is None and vel_bad is None:
            real = now_s - g.start_real
            return self._end(g, Outcome(SUCCEEDED, SUCCESSFUL, f"goal reached in {real:.3f} s (real time; "
                                                                f"trajectory {duration:.3f} s)"))
        if rel - duration > g.tol.goal_time:
            c.hold_desired()
            if pos_bad is not None:
                text = self._text("goal", pos_bad, err, g.tol.goal_position, "rad", rel)
            else:
                stopped = np.full(len(qd), self.settings.stopped_velocity_tolerance)
                text = self._text("stopped velocity", vel_bad, qd, stopped, "rad/s", rel)
            return self._end(g, Outcome(ABORTED, GOAL_TOLERANCE_VIOLATED,
                                        text + f" {rel - duration:.3f} s after the last point "
                                               f"(goal_time_tolerance {g.tol.goal_time:g} s)"))
        return None

    def _position_error(self, q_d: np.ndarray, q: np.ndarray) -> np.ndarray:
        e = q_d - q
        cont = self.controller._continuous
        if cont.any():
            e[cont] = wrap_angle(e[cont])
        return e

    @staticmethod
    def _first_over(values: np.ndarray, bound: np.ndarray) -> int | None:
        over = np.flatnonzero(np.abs(values) > bound)
        return int(over[0]) if over.size else None

    def _text(self, what: str, j: int, values: np.ndarray, bound: np.ndarray, unit: str, rel: float) -> str:
        name = self.controller.model.joint_names[j]
        return (f"{what} tolerance violated: joint '{name}' error {abs(values[j]):.4g} {unit} > "
                f"{bound[j]:g} {unit} at trajectory time {rel:.3f} s")

    @staticmethod
    def _end(g: _Goal, outcome: Outcome) -> Outcome:
        g.outcome = outcome
        return outcome

    def feedback(self) -> dict | None:
        """The running goal's feedback in model order: ``desired`` (q, q̇, q̈), ``actual`` (q, q̇),
        ``error`` (q_d − q, q̇_d − q̇), ``index`` (the point being executed); None without a running goal."""
        g, c = self._goal, self.controller
        if g is None or g.outcome is not None or c.desired is None or not c.mapper.ready:
            return None
        d, q, qd = c.desired, c.mapper.q.copy(), c.mapper.qd.copy()
        return {"desired": (d.q.copy(), d.qd.copy(), d.qdd.copy()), "actual": (q, qd),
                "error": (self._position_error(d.q, q), d.qd - qd), "index": g.index}


def goal_time_s(duration) -> float:
    """``builtin_interfaces/Duration`` → s, GoalRejected on a malformed one."""
    try:
        return duration_to_sec(duration)
    except TrajectoryRejected as exc:
        raise GoalRejected(INVALID_GOAL, f"goal_time_tolerance: {exc}") from None
