"""``~/follow_joint_trajectory`` and ``~/speed_scaling_input`` of the computed_torque node (rclpy shell).

The policy is :class:`~robot_dynamics_ros.control.execution.TrajectoryExecution`'s (acceptance, tolerances,
cancel as a smooth stop, preemption) and the core's speed scaling
(:mod:`~robot_dynamics_ros.control.speed_scaling`); this module moves messages:

* ``~/follow_joint_trajectory`` (``control_msgs/action/FollowJointTrajectory``): the goal callback rejects
  a goal while the controller is inactive or without a model, a goal with a multi-DOF part, and any goal
  :meth:`TrajectoryExecution.prepare` refuses (the ROS 2 action protocol carries no text with a
  rejection: the reason is logged at ERROR and kept in diagnostics ``last_rejection``). An accepted goal is
  prepared again against the state at execution (it may have moved since), preempts the running one, and
  ends with JTC's result codes and an ``error_string``. Feedback (desired, actual, error, ``index``, model
  joint order) at :data:`FEEDBACK_RATE` Hz on the steady clock.
* ``~/speed_scaling_input`` (``control_msgs/msg/SpeedScalingFactor``, reliable, transient local, depth 1):
  the target factor k ∈ [0, 1]; a value outside or not finite is refused with a warning (k unchanged).
* ``~/joint_trajectory`` goes through :meth:`TrajectoryExecution.submit_topic` (the same validation and
  executor); it preempts a running goal.

Callbacks of the action server, the subscription and the control tick are serialized by one lock, so the
node's ``multi`` executor is safe too.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable

from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import SpeedScalingFactor
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from trajectory_msgs.msg import JointTrajectoryPoint

from robot_dynamics_ros.control.execution import (
    ABORTED, CANCELED, SUCCEEDED, ExecutionSettings, GoalRejected, TrajectoryExecution, goal_time_s,
    goal_tolerances,
)
from robot_dynamics_ros.nodes.runtime import steady_timer

__all__ = ["FEEDBACK_RATE", "core_settings_kwargs", "execution_settings", "TrajectoryActions"]

#: Hz; feedback of the running goal (MoveIt ignores it; rqt and users watch it)
FEEDBACK_RATE = 25.0


def core_settings_kwargs(p) -> dict:
    """The :class:`~robot_dynamics_ros.control.computed_torque.ComputedTorqueSettings` fields of the
    ``trajectory_execution`` parameters (``params/trajectory_execution.yaml``)."""
    return {"hardware_compensates_gravity": bool(p["hardware_compensates_gravity"]),
            "speed_scaling": float(p["speed_scaling"]), "speed_scaling_rate": float(p["speed_scaling_rate"]),
            "speed_scaling_jerk": float(p["speed_scaling_jerk"]), "unset_gains": str(p["unset_gains"]),
            "model_gain_bandwidth": float(p["model_gain_bandwidth"])}


def execution_settings(p) -> ExecutionSettings:
    """The :class:`ExecutionSettings` of the ``trajectory_execution`` parameters (``params/trajectory_execution.yaml``) values ``p``."""
    return ExecutionSettings(start_tolerance=float(p["start_tolerance"]), path_tolerance=float(p["path_tolerance"]),
                             goal_tolerance=float(p["goal_tolerance"]),
                             stopped_velocity_tolerance=float(p["stopped_velocity_tolerance"]),
                             goal_time=float(p["goal_time"]),
                             allow_partial_joints_goal=bool(p["allow_partial_joints_goal"]))


def _point(q, qd=None, qdd=None) -> JointTrajectoryPoint:
    p = JointTrajectoryPoint()
    p.positions = q.tolist()
    if qd is not None:
        p.velocities = qd.tolist()
    if qdd is not None:
        p.accelerations = qdd.tolist()
    return p


class TrajectoryActions:
    """The action server, the speed-scaling input and the goal bookkeeping of a computed_torque node.

    Args:
        node: the ``ComputedTorqueNode`` (its ``core``, parameters ``p``, clock, logger; the server, the
            subscription and the timer are created on it).
        is_active: whether the controller is active (a goal is refused otherwise).
        reject: ``reject(reason, what)`` records and logs a refused goal (the node's trajectory counters).
    """

    def __init__(self, node, *, is_active: Callable[[], bool], reject: Callable[[str, str], None]):
        self.node = node
        self._is_active = is_active
        self._record_rejection = reject
        self.lock = threading.RLock()
        self.server = self.sub = self.timer = None
        self._exe: TrajectoryExecution | None = None
        self._current = None     # (goal_handle, future) of the running goal
        self._pending_k: float | None = None    # a factor received before the core existed
        self._gains_logged = None

    # ------------------------------------------------------------------ lifecycle
    def configure(self) -> None:
        n = self.node
        self.server = ActionServer(n, FollowJointTrajectory, "~/follow_joint_trajectory", self._execute,
                                   goal_callback=self._on_goal, cancel_callback=self._on_cancel)
        qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.sub = n.create_subscription(SpeedScalingFactor, "~/speed_scaling_input", self._on_speed_scaling, qos)
        self.timer = steady_timer(n, 1.0 / FEEDBACK_RATE, self._feedback)

    def teardown(self) -> None:
        self.deactivate()
        n = self.node
        if self.timer is not None:
            n.destroy_timer(self.timer)
        if self.sub is not None:
            n.destroy_subscription(self.sub)
        if self.server is not None:
            self.server.destroy()
        self.server = self.sub = self.timer = None
        self._exe = None

    def deactivate(self) -> None:
        """The controller stops commanding: abort the running goal."""
        with self.lock:
            if self._exe is not None:
                self._finish(self._exe.deactivate())

    @property
    def execution(self) -> TrajectoryExecution | None:
        """The goal logic on the node's current core (rebuilt when the core is replaced)."""
        core = self.node.core
        if core is None:
            return None
        if self._exe is None or self._exe.controller is not core:
            self._finish(self._exe.deactivate() if self._exe is not None else None)
            self._exe = TrajectoryExecution(core, execution_settings(self.node.p))
            if self._pending_k is not None:
                core.clock.set_target(self._pending_k)
                self._pending_k = None
        else:
            self._exe.settings = execution_settings(self.node.p)
        return self._exe

    def _now_s(self) -> float:
        return self.node.core.time_s(self.node.get_clock().now().nanoseconds)

    # ------------------------------------------------------------------ topic and tick
    def submit_topic(self, msg) -> tuple:
        """``~/joint_trajectory``: ``(spec, start in trajectory time)``; raises GoalRejected."""
        with self.lock:
            exe = self.execution
            now_s = self._now_s()
            spec, start, preempted = exe.submit_topic(msg, now_s)
            self._finish(preempted)
            return spec, start, now_s

    def tick(self, sample_ns: int) -> None:
        """After each control step: watch the running goal."""
        core = self.node.core
        if core.model_gains and self._gains_logged is not core:
            self._gains_logged = core
            self.node.get_logger().warning(
                f"no gains.<joint>.p/.d configured: using critically damped PD gains from M(q0) at "
                f"{self.node.p['model_gain_bandwidth']:g} rad/s, p = {[round(x, 3) for x in core.gains.p]}, "
                f"d = {[round(x, 3) for x in core.gains.d]} (unset_gains: model)")
        if self._current is None:
            return
        with self.lock:
            exe = self._exe
            if exe is not None and exe.controller is core:
                self._finish(exe.update(core.time_s(sample_ns)))

    def _finish(self, outcome) -> None:
        if outcome is None or self._current is None:
            return
        _, future = self._current
        self._current = None
        if not future.done():
            future.set_result(outcome)

    # ------------------------------------------------------------------ action callbacks
    def _reject(self, reason: str) -> GoalResponse:
        self._record_rejection(reason, "goal")
        return GoalResponse.REJECT

    def _prepare(self, goal):
        exe = self.execution
        if exe is None or not self._is_active():
            raise GoalRejected(-1, "the controller is not active")
        if len(goal.multi_dof_trajectory.points) or len(goal.multi_dof_trajectory.joint_names):
            raise GoalRejected(-1, "multi_dof_trajectory is not supported (leave it empty)")
        if len(goal.component_path_tolerance) or len(goal.component_goal_tolerance):
            raise GoalRejected(-1, "component tolerances are for multi-DOF joints (not supported)")
        now_s = self._now_s()
        spec = exe.prepare(goal.trajectory, now_s)
        tol = goal_tolerances(exe.settings, exe.controller.model.joint_names, goal.path_tolerance,
                              goal.goal_tolerance, goal_time_s(goal.goal_time_tolerance))
        return exe, spec, tol, now_s

    def _on_goal(self, goal) -> GoalResponse:
        with self.lock:
            try:
                self._prepare(goal)
            except GoalRejected as exc:
                return self._reject(str(exc))
        return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle) -> CancelResponse:
        with self.lock:
            if self._current is None or self._current[0] is not goal_handle:
                return CancelResponse.REJECT
            self._exe.cancel()
        self.node.get_logger().info("goal canceled: stopping along the path")
        return CancelResponse.ACCEPT

    async def _execute(self, goal_handle):
        result = FollowJointTrajectory.Result()
        with self.lock:
            try:
                exe, spec, tol, now_s = self._prepare(goal_handle.request)
            except GoalRejected as exc:
                self._record_rejection(str(exc), "goal")
                goal_handle.abort()
                result.error_code, result.error_string = exc.code, str(exc)
                return result
            future = Future()
            preempted = exe.start(spec, tol, now_s)
            self._finish(preempted)
            self._current = (goal_handle, future)
        self.node.get_logger().info(f"goal accepted: {len(spec.times)} points over {spec.times[-1]:.3f} s")
        outcome = await future
        result.error_code, result.error_string = outcome.code, outcome.text
        if outcome.state == SUCCEEDED:
            goal_handle.succeed()
        elif outcome.state == CANCELED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        log = self.node.get_logger().info if outcome.state != ABORTED else self.node.get_logger().warning
        log(f"goal {outcome.state}: {outcome.text}")
        return result

    def _feedback(self) -> None:
        with self.lock:
            if self._current is None or self._exe is None:
                return
            fb = self._exe.feedback()
            handle = self._current[0]
        if fb is None:
            return
        msg = FollowJointTrajectory.Feedback()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.joint_names = list(self._exe.controller.model.joint_names)
        msg.desired = _point(*fb["desired"])
        msg.actual = _point(*fb["actual"])
        msg.error = _point(*fb["error"])
        msg.index = int(fb["index"])
        handle.publish_feedback(msg)

    # ------------------------------------------------------------------ speed scaling
    def _on_speed_scaling(self, msg) -> None:
        k = float(msg.factor)
        core = self.node.core
        if not (math.isfinite(k) and 0.0 <= k <= 1.0):
            self.node.log.warning("speed_scaling_refused", f"~/speed_scaling_input factor {k!r} refused: must be in [0, 1]")
            return
        with self.lock:
            if core is not None:
                core.clock.set_target(k)
            else:
                self._pending_k = k
        self.node.diag.set("speed_scaling", k)
