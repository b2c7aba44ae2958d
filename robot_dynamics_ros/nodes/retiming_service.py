"""Retiming service node: ``robot_dynamics_interfaces/srv/RetimeTrajectory`` on ``~/retime``.

A planner sends a geometric path (``trajectory_msgs/JointTrajectory``: ``joint_names`` + ``points[].positions``,
any joint order, matched by name) and gets back the time-optimal trajectory under the velocity,
acceleration and torque limits (TOPP-RA, Pham & Pham 2018; :mod:`robot_dynamics_ros.retiming`), sampled
at ``sample_period`` (or at the gridpoints) with positions, velocities, accelerations and feedforward
efforts. The response's ``joint_names`` are all actuated joints of the model (URDF order); joints absent
from the request are held at their neutral position.

Not blocking the control nodes: by default (``separate_executor: true``) the service lives on an internal
node ``<name>_worker`` spun by a private single-threaded executor on its own thread, so a node in the same
process / executor as the controllers (``robot-dynamics run``) never runs a retiming in the controllers'
executor; the compiled retiming kernels release the GIL while they run. With ``separate_executor: false``
the service is on this node in its own ``MutuallyExclusiveCallbackGroup`` (for a MultiThreadedExecutor).

A bad request (NaN, unknown joint, ragged points, bad option, infeasible path, a waypoint outside the
position limits or where gravity alone exceeds the torque limit, ...) gets ``success: false`` and a
message naming the joint, the waypoint index and the limit; the node logs it and serves on. Any
unexpected exception in a request is caught the same way.

Parameters: :func:`robot_dynamics_ros.nodes.common.robot_source_params` and :data:`PARAMS`.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import rclpy
from builtin_interfaces.msg import Duration
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectoryPoint

from robot_dynamics_ros.nodes import common
from robot_dynamics_ros.nodes.common import Diagnostics, ParamSpec, RateLimitedLog

NODE_NAME = "retiming_service"

PARAMS = [
    ParamSpec("default_gridpoints", 0, "Gridpoints when a request says 0 (0: max(200, waypoints)).",
              range=(0, 1_000_000)),
    ParamSpec("default_velocity_scaling", 1.0, "Velocity scaling when a request says 0, (0, 1].",
              range=(1e-6, 1.0)),
    ParamSpec("default_acceleration_scaling", 1.0, "Acceleration scaling when a request says 0, (0, 1].",
              range=(1e-6, 1.0)),
    ParamSpec("default_torque_margin", 1.0, "Fraction of the URDF effort limits when a request says 0, "
              "(0, 1] (e.g. 0.9).", range=(1e-6, 1.0)),
    ParamSpec("default_sample_period", 0.0, "Output period (s) when a request says 0 (0: one sample per "
              "gridpoint).", range=(0.0, 10.0)),
    ParamSpec("acceleration_limit", 0.0, "Acceleration limit (rad/s²) for joints without one from "
              "joint_limits.yaml (0: none; URDFs carry no acceleration limits).", range=(0.0, 1e6),
              read_only=True),
    ParamSpec("friction", False, "Include URDF <dynamics> damping and Coulomb friction in the torque limits "
              "and the output efforts."),
    ParamSpec("max_waypoints", 100_000, "Requests with more waypoints are refused.", range=(2, 10_000_000)),
    ParamSpec("max_samples", 200_000, "Requests whose output would exceed this many samples are refused.",
              range=(10, 100_000_000)),
    ParamSpec("separate_executor", True, "Serve ~/retime from an internal node on its own executor thread "
              "(never blocks the executor this node is added to).", read_only=True),
    ParamSpec("warmup", True, "Compile / load the retiming kernels when the model loads (else on the "
              "first request).", read_only=True),
    ParamSpec("log_period", 1.0, "Minimum seconds between two log lines of the same kind.", range=(0.0, 3600.0)),
    ParamSpec("diagnostics_period", 1.0, "Seconds between two /diagnostics messages.", range=(0.01, 3600.0),
              read_only=True),
]


def _duration(seconds: float) -> Duration:
    ns = int(round(seconds * 1e9))
    return Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


class RetimingServiceNode(Node):
    """The retiming service node (see the module docstring).

    Args:
        node_name: ROS node name; the service is ``<namespace>/<node_name>/retime``.
        **kwargs: passed to ``rclpy.node.Node`` (``context``, ``parameter_overrides``, ...).

    Raises:
        UserError / URDFError: the URDF from ``urdf_path`` / ``robot_description`` cannot be read.
        ValueError: a parameter override fails its check.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        self._specs = {s.name: s for s in [*common.robot_source_params(), *PARAMS]}
        self.p = common.declare_parameters(self, self._specs.values())
        self.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        self.diag = Diagnostics(self, hardware_id="retiming_service", period=self.p["diagnostics_period"])
        self.diag.set_level(Diagnostics.WARN, "waiting for the robot model")
        self._lock = threading.Lock()
        self.retimer = None
        self.model = None
        self.last_error = ""
        self.requests = 0
        self.failures = 0
        self._worker = None
        self._worker_executor = None
        self._worker_thread = None
        self.add_on_set_parameters_callback(self._on_set_parameters)
        from robot_dynamics_interfaces.srv import RetimeTrajectory

        self.service_name = f"{self.get_fully_qualified_name().rstrip('/')}/retime"
        if self.p["separate_executor"]:
            from rclpy.executors import SingleThreadedExecutor

            self._worker = Node(f"{node_name}_worker", context=self.context, namespace=self.get_namespace(),
                                start_parameter_services=False)
            self.srv = self._worker.create_service(RetimeTrajectory, self.service_name, self._on_request)
            self._worker_executor = SingleThreadedExecutor(context=self.context)
            self._worker_executor.add_node(self._worker)
        else:
            self.srv = self.create_service(RetimeTrajectory, "~/retime", self._on_request,
                                           callback_group=MutuallyExclusiveCallbackGroup())
        self.loader = common.ModelLoader(self, self._on_model, self.log, self.p)
        if self._worker_executor is not None:
            self._worker_thread = threading.Thread(target=self._spin_worker, name=f"{node_name}_retiming",
                                                   daemon=True)
            self._worker_thread.start()

    # ------------------------------------------------------------------ model / parameters
    def _on_model(self, model, label: str) -> None:
        from robot_dynamics_ros.retiming.retimer import Retimer

        acc = float(self.p["acceleration_limit"])
        if acc > 0:
            a = np.array(model.acceleration_limit, dtype=float)
            a[~np.isfinite(a)] = acc
            model.acceleration_limit = a
        retimer = Retimer(model)
        if self.p["warmup"]:
            retimer.warmup()
        with self._lock:
            self.model = model
            self.retimer = retimer
        self.diag.set("robot", model.description.name)
        self.diag.set("model_source", label)
        self.diag.set_level(Diagnostics.OK, "serving")
        self.get_logger().info(f"retiming for '{model.description.name}' from {label} ({model.n} joints) on "
                               f"{self.service_name}")

    def _on_set_parameters(self, params):
        from rcl_interfaces.msg import SetParametersResult

        ok, reason = common.validate_parameters(self._specs, params)
        if not ok:
            return SetParametersResult(successful=False, reason=reason)
        new = common.merged_parameters(self._specs, self.p, params)
        self.p = new
        self.log = RateLimitedLog(self.get_logger(), new["log_period"])
        return SetParametersResult(successful=True)

    def _spin_worker(self) -> None:
        try:
            self._worker_executor.spin()
        except Exception as exc:  # noqa: BLE001 - e.g. the context was shut down under us
            if rclpy.ok(context=self.context):
                self.get_logger().error(f"retiming executor stopped: {exc}")

    # ------------------------------------------------------------------ the service
    def _on_request(self, request, response):
        t0 = time.perf_counter()
        self.requests += 1
        self.diag.count("requests")
        try:
            self._retime(request, response)
        except Exception as exc:  # noqa: BLE001 - a request must never take the node down
            response.success = False
            response.message = f"internal error while retiming: {type(exc).__name__}: {exc}"
            response.trajectory.points = []
        if not response.success:
            self.failures += 1
            self.diag.count("failures")
            self.last_error = response.message
            self.diag.set("last_error", response.message)
            self.log.warning("request", f"retiming request refused: {response.message}")
        response.solve_time = time.perf_counter() - t0
        self.diag.latency.add(response.solve_time)
        return response

    def _fail(self, response, message: str):
        response.success = False
        response.message = message
        return response

    def _retime(self, request, response):
        from robot_dynamics_ros.retiming.retimer import RetimeOptions

        with self._lock:
            retimer = self.retimer
        if retimer is None:
            return self._fail(response, "no robot model loaded yet (waiting for the robot description)")
        p = self.p
        path = request.path
        names = list(path.joint_names)
        points = path.points
        if not names:
            return self._fail(response, "path.joint_names is empty")
        if len(points) == 0:
            return self._fail(response, "path.points is empty: need at least one waypoint")
        if len(points) > p["max_waypoints"]:
            return self._fail(response, f"path.points: {len(points)} waypoints exceed max_waypoints "
                                        f"{p['max_waypoints']}")
        k = len(names)
        for i, pt in enumerate(points):
            if len(pt.positions) != k:
                return self._fail(response, f"path.points[{i}].positions has {len(pt.positions)} values for "
                                            f"{k} joint_names")
        wp = np.array([pt.positions for pt in points], dtype=float).reshape(len(points), k)

        def pick(value, default):
            return float(value) if value != 0.0 else float(default)

        period = pick(request.sample_period, p["default_sample_period"])
        options = RetimeOptions(
            velocity_scale=pick(request.velocity_scaling, p["default_velocity_scaling"]),
            acceleration_scale=pick(request.acceleration_scaling, p["default_acceleration_scaling"]),
            torque_margin=pick(request.torque_margin, p["default_torque_margin"]),
            gridpoints=int(request.gridpoints) or (int(p["default_gridpoints"]) or None),
            sample_period=period or None, friction=bool(p["friction"]))
        v0 = list(request.start_velocity)
        v1 = list(request.end_velocity)
        for what, v in (("start_velocity", v0), ("end_velocity", v1)):
            if v and len(v) != k:
                return self._fail(response, f"{what}: {len(v)} values for {k} joint_names (empty = at rest)")
        result = retimer.retime(wp, joint_names=names, start_velocity=v0 or None, end_velocity=v1 or None,
                                options=options)
        response.message = result.message
        response.duration = float(result.duration)
        if not result.success:
            response.success = False
            return response
        if result.t.shape[0] > p["max_samples"]:
            return self._fail(response, f"the output would have {result.t.shape[0]} samples > max_samples "
                                        f"{p['max_samples']}: raise sample_period")
        traj = response.trajectory
        traj.joint_names = list(result.joint_names)
        q, qd, qdd, tau = (a.tolist() for a in (result.q, result.qd, result.qdd, result.tau))
        pts = []
        for i, t in enumerate(result.t.tolist()):
            pt = JointTrajectoryPoint()
            pt.positions = q[i]
            pt.velocities = qd[i]
            pt.accelerations = qdd[i]
            pt.effort = tau[i]
            pt.time_from_start = _duration(t)
            pts.append(pt)
        traj.points = pts
        response.success = True
        peaks = ", ".join(f"{key} {v:.3f}" for key, v in result.peak_fraction.items() if v is not None)
        response.message = f"{result.message}; peak fraction of limits: {peaks}"
        self.diag.set("last_duration_s", round(result.duration, 6))
        self.diag.set("last_solve_ms", round(result.solve_ms, 3))
        return response

    # ------------------------------------------------------------------ shutdown
    def destroy_node(self) -> None:
        """Stop the worker executor thread, then destroy the worker node and this node."""
        if self._worker_executor is not None:
            try:
                self._worker_executor.shutdown(timeout_sec=2.0)
            except Exception:  # noqa: BLE001 - context may already be gone
                pass
            if self._worker_thread is not None:
                self._worker_thread.join(timeout=2.0)
            try:
                self._worker.destroy_node()
            except Exception:  # noqa: BLE001
                pass
            self._worker_executor = None
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_dynamics_ros retiming_service`` entry point (SIGINT stops it)."""
    return common.run_node("retiming_service", RetimingServiceNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
