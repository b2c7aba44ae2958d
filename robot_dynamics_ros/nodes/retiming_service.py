"""Retiming service node: ``robot_dynamics_interfaces/srv/RetimeTrajectory`` on ``~/retime``.

A planner sends a geometric path (``trajectory_msgs/JointTrajectory``: ``joint_names`` + ``points[].positions``,
any joint order, matched by name) and gets back the time-optimal trajectory under the velocity,
acceleration and torque limits (TOPP-RA, Pham & Pham 2018; :mod:`robot_dynamics_ros.retiming`), sampled
at ``sample_period`` (or at the gridpoints) with positions, velocities, accelerations and feedforward
efforts. The response's ``joint_names`` are all actuated joints of the model (URDF order).

Names are relative: the service is ``~/retime``, measured states come from ``joint_states`` and the
description (when no file is given) from ``robot_description``, so ``-r __ns:=/r1`` and remaps apply.

The request handling (partial requests held at the latest measured position from ``joint_states`` not
older than ``joint_state_timeout``, 0 = the node's ``default_*`` parameter as MoveIt's
``default_velocity_scaling_factor``, the ``max_waypoints`` / ``max_samples`` caps, the deadline) is
ROS-free: :mod:`robot_dynamics_ros.retiming.service`.

Process, intake and deadline: the node runs in a process of its own (``robot-dynamics run`` starts one per
node) on a multi-threaded executor of :attr:`RetimingServiceNode.executor_threads` threads, ``~/retime`` on a
reentrant callback group of its own. Each request is taken by a free executor thread and put in the
solver's bounded queue (:class:`robot_dynamics_ros.retiming.service.DeadlineSolver`, ``max_queued_requests``);
the thread waits for its answer while one solver thread solves the requests in order. When the queue is full
the request is answered at once with ``success: false`` and a ``busy`` message giving the queue length; every
request taken is answered within ``request_deadline`` (result, failure, ``busy`` or ``timed out``). The
executor has threads for the whole queue, the request being solved, one more taking requests and one for the
node's other callbacks (joint states, parameters, ``~/set_payload``), so neither a long solve nor a full
queue stops the intake or those callbacks; a thread waiting for an answer holds no CPU and no interpreter
lock. The service's request and response queues are keep-last
:data:`~robot_dynamics_ros.nodes.SERVICE_QOS_DEPTH`, so a burst of requests waits in the middleware
instead of being dropped before it is taken.

Acceleration limits come from ``joint_limits_path`` (MoveIt ``joint_limits.yaml``; a bare file name is
looked up in the package's ``config/``) or ``acceleration_limit``; URDFs carry none. Without them every
response message and the log name the joints without one (bounded by the torque limits only). A bad
request or an unexpected exception gets ``success: false`` and a one-line message; the node serves on.

Payload: ``~/set_payload`` (:func:`robot_dynamics_ros.nodes.create_payload_service`) sets the
``payload.*`` parameters atomically; the node builds the new model and retimer and swaps both in (a request
already running finishes on the old model).

Parameters: :data:`SCHEMA` (``params/retiming_service.yaml``: the robot source, ``friction_path`` included, the
control nodes' ``payload.*`` and the service's own; docs/nodes.md).
"""
from __future__ import annotations

import threading
import time

from builtin_interfaces.msg import Duration
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectoryPoint

from robot_dynamics_interfaces.srv import RetimeTrajectory
from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.nodes import naming
from robot_dynamics_ros.nodes.diagnostics import Diagnostics, RateLimitedLog
from robot_dynamics_ros.nodes.model_source import MODEL_PARAMS, ModelLoader, model_with_params
from robot_dynamics_ros.nodes.parameters import declare_parameters, merged_parameters, node_schema, validate_parameters
from robot_dynamics_ros.nodes.runtime import run_node
from robot_dynamics_ros.nodes.services import create_payload_service
from robot_dynamics_ros.nodes.wire import qos_overrides, service_qos
from robot_dynamics_ros.retiming import service as core
from robot_dynamics_ros.retiming.retimer import Retimer
from robot_dynamics_ros.retiming.service import acceleration_warning

NODE_NAME = "retiming_service"

#: executor threads beyond the queue: the request being solved, one taking requests, one for the rest
SPARE_THREADS = 3
#: the node's parameters (``params/retiming_service.yaml``: robot source, payload.* and its own)
SCHEMA = node_schema(NODE_NAME)


class RetimingServiceNode(Node):
    """The retiming service node (see the module docstring).

    Args:
        node_name: ROS node name; the service is ``<namespace>/<node_name>/retime`` (remappable).
        **kwargs: passed to ``rclpy.node.Node`` (``context``, ``parameter_overrides``, ...).

    Attributes:
        model: the model served (None until loaded); accel_warning: its missing-acceleration warning or ''.
        retimer: the model's :class:`~robot_dynamics_ros.retiming.retimer.Retimer` (settable; swapped whole).
        solver: the :class:`~robot_dynamics_ros.retiming.service.DeadlineSolver`.
        warm: set once a model is loaded and its retiming kernels are compiled / loaded (warm-up done).
        executor_threads: threads the node's multi-threaded executor needs (module docstring).
        requests, failures, busy_answers, timeouts: answers given so far.

    Raises:
        UserError / URDFError: the URDF from ``urdf_path`` / ``robot_description`` cannot be read.
        ValueError: a parameter override fails its check.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        self._specs = SCHEMA.by_name
        self.p = declare_parameters(self, self._specs.values())
        self.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        self.diag = Diagnostics(self, hardware_id="retiming_service", period=self.p["diagnostics_period"])
        self.diag.set_level(Diagnostics.WARN, "waiting for the robot model")
        self._lock = threading.Lock()        # model, retimer, warning and measured table swapped together
        self._count_lock = threading.Lock()  # answers are counted from several executor threads
        self.model = self.base_model = self.retimer = None  # base_model: before payload.*
        self.accel_warning = ""
        self.last_error = ""
        self.requests = self.failures = self.busy_answers = self.timeouts = 0
        self.measured = core.MeasuredPositions()
        self.solver = core.DeadlineSolver(f"{self.get_name()}_solver", int(self.p["max_queued_requests"]))
        self.warm = self.solver.warm
        self.warm.clear()
        self.executor_threads = int(self.p["max_queued_requests"]) + SPARE_THREADS
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.service_name = self.resolve_service_name("~/retime")
        self.joint_state_topic = self.resolve_topic_name("joint_states")
        # best effort accepts reliable and best-effort publishers alike; depth 1: only the latest matters
        self.joint_state_sub = self.create_subscription(
            JointState, "joint_states", self._on_joint_state,
            QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT),
            qos_overriding_options=qos_overrides())
        self.srv = self.create_service(
            RetimeTrajectory, "~/retime", self.on_request,
            qos_profile=service_qos(), callback_group=ReentrantCallbackGroup())
        self.loader = ModelLoader(self, self._on_model, self.log, naming.loader_params(self.p))
        create_payload_service(self, lambda: self.p, self.diag)

    # ------------------------------------------------------------------ requests
    def _on_joint_state(self, msg) -> None:
        self.measured.update(msg.name, msg.position, time.monotonic())

    def measured_hold(self, joints) -> tuple[dict[str, float], list[str]]:
        """For ``joints``: ``(fresh measured positions by name, joints without one)``."""
        return self.measured.hold(joints, time.monotonic(), float(self.p["joint_state_timeout"]))

    def on_request(self, request, response):
        """``~/retime``: queue the request for the solver and answer within ``request_deadline`` (module
        docstring); a full queue is answered at once."""
        t0 = time.perf_counter()
        deadline_s = float(self.p["request_deadline"])
        with self._lock:
            warning = self.accel_warning
        status, answer = self.solver.run(lambda: self._solve(request), deadline_s)
        if status == "full":
            answer = core.RetimeAnswer.failure(self.solver.full_message())
        elif status == "busy":
            answer = core.RetimeAnswer.failure(self.solver.busy_message(deadline_s))
        elif status == "timed out":
            answer = core.RetimeAnswer.failure(self.solver.timeout_message(deadline_s))
        message = f"{answer.message}; warning: {warning}" if warning else answer.message
        core.fill_response(response, answer, message, JointTrajectoryPoint, Duration)
        response.solve_time = time.perf_counter() - t0
        self._count(status, answer, message, warning, response.solve_time)
        return response

    def _solve(self, request) -> core.RetimeAnswer:
        """On the solver thread: the whole retiming (any exception becomes a failure answer)."""
        with self._lock:
            retimer, model, measured = self.retimer, self.model, self.measured
        try:
            return core.handle_request(request, retimer, model, self.p, measured, time.monotonic(),
                                       self.joint_state_topic)
        except Exception as exc:  # noqa: BLE001 - a request must never take the node down
            return core.RetimeAnswer.failure(f"internal error while retiming: {type(exc).__name__}: {exc}")

    def _count(self, status: str, answer, message: str, warning: str, solve_time: float) -> None:
        """Count and log one answer."""
        with self._count_lock:
            self.requests += 1
            self.diag.count("requests")
            if status in ("busy", "full"):
                self.busy_answers += 1
                self.diag.count("busy")
            elif status == "timed out":
                self.timeouts += 1
                self.diag.count("timeouts")
            if not answer.success:
                self.failures += 1
                self.diag.count("failures")
                self.last_error = message
                self.diag.set("last_error", message[:200])
            else:
                self.diag.set("last_duration_s", round(float(answer.duration), 6))
                self.diag.set("last_solve_ms", round(float(answer.solve_ms), 3))
            self.diag.latency.add(solve_time)
        if not answer.success:
            self.log.warning("request", f"retiming request refused: {message}")
        elif warning:
            self.log.warning("acceleration", warning)

    # ------------------------------------------------------------------ model / parameters
    def _serve(self, model, warmup: bool) -> None:
        """Serve ``model`` from now on (a request already running finishes on the old one); with ``warmup``
        compile / load the retiming kernels on the solver thread first (requests wait for it until their
        deadline)."""
        retimer = Retimer(model)
        with self._lock:
            same_joints = self.model is not None and self.model.joint_names == model.joint_names
            self.model, self.retimer = model, retimer
            self.accel_warning = acceleration_warning(model)
            if not same_joints:
                self.measured = core.MeasuredPositions(model.joint_names)
        if warmup:
            self.get_logger().info("warming up the retiming kernels (the first run compiles them, 1-2 min; "
                                   "requests wait until request_deadline)")
            self.solver.warm_up(lambda: self._warmup(retimer))
        else:
            self.warm.set()

    def _warmup(self, retimer) -> None:
        t0 = time.monotonic()
        try:
            retimer.warmup()
            self.get_logger().info(f"retiming kernels ready after {time.monotonic() - t0:.1f} s")
        except Exception as exc:  # noqa: BLE001 - a failed warm-up only costs the first request's time
            self.log.warning("warmup", f"retiming warm-up failed: {exc}")

    def _on_model(self, model, label: str) -> None:
        self.base_model = model = core.with_default_acceleration(model, float(self.p["acceleration_limit"]))
        model = model_with_params(model, self.p)
        self._serve(model, bool(self.p["warmup"]))
        warning = self.accel_warning
        self.diag.set("robot", model.description.name)
        self.diag.set("model_source", label)
        self.diag.set_level(Diagnostics.WARN if warning else Diagnostics.OK, warning or "serving")
        self.get_logger().info(f"retiming for '{model.description.name}' from {label} ({model.n} joints) on "
                               f"{self.service_name}")
        if warning:
            self.get_logger().warning(warning)

    def _on_set_parameters(self, params):
        ok, reason = validate_parameters(self._specs, params, self.p)
        if not ok:
            return SetParametersResult(successful=False, reason=reason)
        new = merged_parameters(self._specs, self.p, params)
        model = None
        if self.base_model is not None and any(p.name in MODEL_PARAMS for p in params):
            try:
                model = model_with_params(self.base_model, new)
            except UserError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        self.p = new
        self.log = RateLimitedLog(self.get_logger(), new["log_period"])
        if model is not None:
            self._serve(model, False)
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------ shutdown
    def destroy_node(self) -> None:
        """Stop the solver (requests still queued are answered ``busy``; a running solve is not waited for),
        then destroy this node."""
        self.solver.shutdown()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_dynamics_ros retiming_service`` entry point (SIGINT stops it), on a multi-threaded
    executor of :attr:`RetimingServiceNode.executor_threads` threads (module docstring)."""
    # no shared-memory transport: a client killed mid-request would otherwise block the answer to it, and
    # with it the whole service, for good (issue 25; runtime.middleware_environment)
    return run_node(NODE_NAME, RetimingServiceNode, args, executor_kind=lambda node: "multi",
                    executor_threads=lambda node: node.executor_threads)


if __name__ == "__main__":
    raise SystemExit(main())
