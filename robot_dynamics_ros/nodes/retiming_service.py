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

Processes and deadline: with ``solver_process`` (the default) a worker process
(:class:`robot_dynamics_ros.retiming.worker.WorkerProcess`) serves ``~/retime``: taking a request, the solve
and the response never hold this process's interpreter, so a control node in the same process keeps its
executor next to 100 000-point requests; ``solver_process: false`` runs the same
:class:`~robot_dynamics_ros.retiming.worker.RetimeServer` on threads of this process. Every request taken is
answered within ``request_deadline`` (result, failure, ``busy`` or ``timed out``). Details (restarts, the
``<name>_worker`` node, queues): docs/nodes.md.

Acceleration limits come from ``joint_limits_path`` (MoveIt ``joint_limits.yaml``; a bare file name is
looked up in the package's ``config/``) or ``acceleration_limit``; URDFs carry none. Without them every
response message and the log name the joints without one (bounded by the torque limits only). A bad
request or an unexpected exception gets ``success: false`` and a one-line message; the node serves on.

Payload: ``~/set_payload`` (:func:`robot_dynamics_ros.nodes.services.create_payload_service`) sets the
``payload.*`` parameters atomically; the node builds the new model and retimer and swaps both in (a request
already running finishes on the old model).

Parameters: :func:`robot_dynamics_ros.nodes.parameters.robot_source_params` (``friction_path`` included) and
:data:`PARAMS` (with the control nodes' ``payload.*``).
"""
from __future__ import annotations

import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from robot_dynamics_ros.nodes import naming
from robot_dynamics_ros.nodes.diagnostics import Diagnostics, RateLimitedLog
from robot_dynamics_ros.nodes.model_source import MODEL_PARAMS, ModelLoader, model_with_params
from robot_dynamics_ros.nodes.parameters import (ParamSpec, declare_parameters, merged_parameters, node_schema,
                                                 robot_source_params, validate_parameters)
from robot_dynamics_ros.nodes.runtime import run_node
from robot_dynamics_ros.nodes.services import create_payload_service
from robot_dynamics_ros.nodes.wire import qos_overrides
from robot_dynamics_ros.retiming import service as core
from robot_dynamics_ros.retiming import worker as retiming_worker
from robot_dynamics_ros.retiming.service import DEFAULT_PATH_TOLERANCE, MAX_GRIDPOINTS, acceleration_warning

NODE_NAME = "retiming_service"

PARAMS = [
    ParamSpec("default_gridpoints", 0, "Gridpoints when a request says 0 (0: the retimer's default, "
              "max(200, waypoints)).", range=(0, MAX_GRIDPOINTS)),
    ParamSpec("default_velocity_scaling_factor", 0.0, "Velocity limit fraction (0, 1] for a request's 0; 0: "
              "joint_limits_path's default_velocity_scaling_factor, else 1.", range=(0.0, 1.0)),
    ParamSpec("default_acceleration_scaling_factor", 0.0, "Acceleration limit fraction (0, 1] for a request's 0;"
              " 0: joint_limits_path's default_acceleration_scaling_factor, else 1.", range=(0.0, 1.0)),
    ParamSpec("default_torque_margin", 1.0, "Fraction of the URDF effort limits when a request's "
              "torque_margin is 0, (0, 1] (e.g. 0.9).", range=(1e-6, 1.0)),
    ParamSpec("default_path_tolerance", DEFAULT_PATH_TOLERANCE, "Largest distance (rad or m, infinity norm) "
              "of the retimed path from the request's polyline when a request's path_tolerance is 0.",
              range=(0.0, 10.0)),
    ParamSpec("default_sample_period", 0.0, "Output period (s) when a request says 0 (0: one sample per "
              "gridpoint).", range=(0.0, 10.0)),
    ParamSpec("acceleration_limit", 0.0, "Acceleration limit (rad/s² or m/s²) for joints without one from "
              "joint_limits_path (0: none).", range=(0.0, 1e6), read_only=True),
    ParamSpec("motor_limits_path", "", "motor_limits.yaml (rated and peak torque, peak duration per joint): "
              "requests are timed within the rated/peak rules and the answer reports them per joint ('': "
              "none; a bad file refuses the requests, naming it)."),
    ParamSpec("friction", False, "Include URDF <dynamics> damping and Coulomb friction in the torque limits "
              "and the output efforts."),
    ParamSpec("joint_state_timeout", 0.5, "A measured position from joint_states older than this (s, "
              "arrival time) does not hold an unnamed joint of a partial request.", range=(0.0, 3600.0)),
    ParamSpec("max_waypoints", 100_000, "Requests with more waypoints are refused before any work.",
              range=(2, 10_000_000)),
    ParamSpec("max_samples", 200_000, "Requests whose output would exceed this many samples are refused.",
              range=(10, 100_000_000)),
    ParamSpec("request_deadline", 30.0, "Every request is answered within this many seconds of being "
              "taken (result, failure, busy or timed out).", range=(0.1, 3600.0)),
    ParamSpec("max_concurrent_requests", 4, "Requests taken at once (one is solved, the others wait for "
              "the solver until request_deadline); more wait in the DDS queue.", range=(1, 64),
              read_only=True),
    ParamSpec("solver_process", True, "Serve ~/retime from a worker process (requests, solves and responses "
              "never hold this process's interpreter); false: on threads of this process.", read_only=True),
    ParamSpec("solver_nice", 10, "Niceness added to the worker process (0-19): a long solve takes the CPU the "
              "control nodes leave.", range=(0, 19), read_only=True),
    ParamSpec("warmup", True, "Compile / load the retiming kernels when the model loads (on the solver "
              "thread; requests wait for it), else on the first request.", read_only=True),
    ParamSpec("log_period", 1.0, "Minimum seconds between two log lines of the same kind.", range=(0.0, 3600.0)),
    ParamSpec("diagnostics_period", 1.0, "Seconds between two /diagnostics messages.", range=(0.01, 3600.0),
              read_only=True),
]


PARAMS += [s for s in node_schema("retiming_service").specs if s.name.startswith("payload.")]


class RetimingServiceNode(Node):
    """The retiming service node (see the module docstring).

    Args:
        node_name: ROS node name; the service is ``<namespace>/<node_name>/retime`` (remappable).
        **kwargs: passed to ``rclpy.node.Node`` (``context``, ``parameter_overrides``, ...).

    Attributes:
        model: the model served (None until loaded); accel_warning: its missing-acceleration warning or ''.
        warm: set once a model is loaded and its retiming kernels are compiled / loaded (warm-up done).
        server: the in-process :class:`~robot_dynamics_ros.retiming.worker.RetimeServer`
            (``solver_process: false``) or None; worker: the
            :class:`~robot_dynamics_ros.retiming.worker.WorkerProcess` (``solver_process: true``) or None.

    Raises:
        UserError / URDFError: the URDF from ``urdf_path`` / ``robot_description`` cannot be read.
        ValueError: a parameter override fails its check.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        self._specs = {s.name: s for s in [*robot_source_params(), *PARAMS]}
        self.p = declare_parameters(self, self._specs.values())
        self.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        self.diag = Diagnostics(self, hardware_id="retiming_service", period=self.p["diagnostics_period"])
        self.diag.set_level(Diagnostics.WARN, "waiting for the robot model")
        self.model = None
        self.base_model = None  # the loaded model before payload.*: run-time payloads are built from it
        self.accel_warning = ""
        self.last_error = ""
        self.requests = self.failures = self.busy_answers = self.timeouts = 0
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.service_name = self.resolve_service_name("~/retime")
        self.joint_state_topic = self.resolve_topic_name("joint_states")
        self.server = self.worker = self._inspect_retimer = None
        self.joint_state_sub = None
        self._serving = None
        if self.p["solver_process"]:
            self.worker = retiming_worker.WorkerProcess(
                {"node_name": f"{self.get_name()}_worker", "namespace": self.get_namespace(),
                 "domain_id": self.context.get_domain_id(), "service_name": self.service_name,
                 "state_topic": self.joint_state_topic, "max_concurrent": int(self.p["max_concurrent_requests"]),
                 "nice": int(self.p["solver_nice"])},
                self._on_answer, self._worker_log, self._on_worker_restart)
            self.worker.set_params(self.p)
            self.warm = self.worker.warm
        else:
            self._start_server()
            self.warm = self.server.warm
        self.loader = ModelLoader(self, self._on_model, self.log, naming.loader_params(self.p))
        create_payload_service(self, lambda: self.p, self.diag)

    def _start_server(self) -> None:
        """``solver_process: false``: the server on an internal node spun by its own executor thread; the
        joint states through this node's subscription (rclpy's qos_overrides parameters apply to it)."""
        from sensor_msgs.msg import JointState

        config = {"node_name": f"{self.get_name()}_worker", "namespace": self.get_namespace(),
                  "service_name": self.service_name, "state_topic": self.joint_state_topic,
                  "max_concurrent": int(self.p["max_concurrent_requests"])}
        self._serving = retiming_worker.ServingThreads(self.context, config, self.p, self._on_answer,
                                                       self._worker_log, subscribe_states=False,
                                                       on_executor_error=self._executor_stopped)
        self.server = self._serving.server
        # best effort accepts reliable and best-effort publishers alike; depth 1: only the latest matters
        self.joint_state_sub = self.create_subscription(
            JointState, "joint_states", self.server.on_joint_state,
            QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT),
            qos_overriding_options=qos_overrides())

    def _executor_stopped(self, exc: BaseException) -> None:
        if rclpy.ok(context=self.context):
            self.get_logger().error(f"retiming executor stopped: {exc}")

    # ------------------------------------------------------------------ the server's state (in-process only)
    @property
    def retimer(self):
        """The retimer of the served model: the in-process server's (settable, e.g. by a test), or with
        ``solver_process`` one built here on first access for inspection (the worker solves with its own,
        built from the same model); None before a model is loaded."""
        if self.server is not None:
            return self.server.retimer
        if self.model is None:
            return None
        if self._inspect_retimer is None or self._inspect_retimer.model is not self.model:
            from robot_dynamics_ros.retiming.retimer import Retimer

            self._inspect_retimer = Retimer(self.model)
        return self._inspect_retimer

    @retimer.setter
    def retimer(self, retimer) -> None:
        self.server.retimer = retimer

    def measured_hold(self, joints) -> tuple[dict[str, float], list[str]]:
        """For ``joints``: ``(fresh measured positions by name, joints without one)``; in-process server
        only (RuntimeError with ``solver_process``: the worker process keeps its own)."""
        import time

        if self.server is None:
            raise RuntimeError("measured positions are kept in the retiming worker process")
        return self.server.measured.hold(joints, time.monotonic(), float(self.p["joint_state_timeout"]))

    # ------------------------------------------------------------------ model / parameters
    def _serve(self, model, warmup: bool) -> None:
        self.model, self.accel_warning = model, acceleration_warning(model)
        if self.worker is not None:
            self.worker.set_model(model, warmup)
        else:
            self.server.set_model(model, warmup)

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
        from rcl_interfaces.msg import SetParametersResult

        ok, reason = validate_parameters(self._specs, params, self.p)
        if not ok:
            return SetParametersResult(successful=False, reason=reason)
        new = merged_parameters(self._specs, self.p, params)
        model = None
        if self.base_model is not None and any(p.name in MODEL_PARAMS for p in params):
            from robot_dynamics_ros.errors import UserError

            try:
                model = model_with_params(self.base_model, new)
            except UserError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        self.p = new
        self.log = RateLimitedLog(self.get_logger(), new["log_period"])
        (self.worker or self.server).set_params(new)
        if model is not None:
            self._serve(model, False)
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------ answers, logs (server callbacks)
    def _on_answer(self, answer: dict) -> None:
        """Count and log one answered request (``RetimeServer.on_request``'s dict)."""
        self.requests += 1
        self.diag.count("requests")
        if answer["status"] == "busy":
            self.busy_answers += 1
            self.diag.count("busy")
        elif answer["status"] == "timed out":
            self.timeouts += 1
            self.diag.count("timeouts")
        message = answer["message"]
        if not answer["success"]:
            self.failures += 1
            self.diag.count("failures")
            self.last_error = message
            self.diag.set("last_error", message[:200])
            self.log.warning("request", f"retiming request refused: {message}")
        else:
            if answer["warning"]:
                self.log.warning("acceleration", answer["warning"])
            self.diag.set("last_duration_s", round(answer["duration"], 6))
            self.diag.set("last_solve_ms", round(answer["solve_ms"], 3))
        self.diag.latency.add(answer["solve_time"])

    def _worker_log(self, level: str, text: str) -> None:
        if level == "info":
            self.get_logger().info(text)
        elif level == "warning":
            self.log.warning("worker", text)
        else:
            self.log.error("worker_error", text)

    def _on_worker_restart(self, exit_code) -> None:
        self.diag.count("worker_restarts")

    # ------------------------------------------------------------------ shutdown
    def destroy_node(self) -> None:
        """Stop the worker process, or the in-process server's executor and solver; then destroy this node."""
        if self.worker is not None:
            self.worker.shutdown()
            self.worker = None
        if self._serving is not None:
            self._serving.shutdown()
            self._serving = None
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_dynamics_ros retiming_service`` entry point (SIGINT stops it)."""
    return run_node("retiming_service", RetimingServiceNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
