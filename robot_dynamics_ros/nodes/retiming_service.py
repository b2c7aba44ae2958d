"""Retiming service node: ``robot_dynamics_interfaces/srv/RetimeTrajectory`` on ``~/retime``.

A planner sends a geometric path (``trajectory_msgs/JointTrajectory``: ``joint_names`` + ``points[].positions``,
any joint order, matched by name) and gets back the time-optimal trajectory under the velocity,
acceleration and torque limits (TOPP-RA, Pham & Pham 2018; :mod:`robot_dynamics_ros.retiming`), sampled
at ``sample_period`` (or at the gridpoints) with positions, velocities, accelerations and feedforward
efforts. The response's ``joint_names`` are all actuated joints of the model (URDF order).

Names are relative: the service is ``~/retime``, measured states come from ``joint_states`` and the
description (when no file is given) from ``robot_description``, so ``-r __ns:=/r1`` and remaps apply.

Partial requests: model joints the request does not name are held at the latest measured position from
``joint_states`` not older than ``joint_state_timeout``; without one the request is refused, naming them.

Request fields whose value is 0 mean the node's ``default_*`` parameter (MoveIt's
``default_velocity_scaling_factor`` semantics).

Threads and deadline: the service is served by an internal node ``<name>_worker`` (created without the
process's global ROS arguments, so ``-r __node:=X`` renames only this node: the worker becomes
``X_worker``; it has no parameters and no rosout) spun by its own multi-threaded executor, so a retiming
never runs in the executor this node was added to. One retiming runs at a time, on a solver thread (the
compiled kernels release the GIL). Every request the worker takes is answered within
``request_deadline`` seconds: with the result, a failure, ``busy`` (the solver stayed occupied by other
requests until the deadline) or ``timed out`` (the result is discarded; the solver finishes it and takes
the next request). Up to ``max_concurrent_requests`` requests are taken at once; more wait in the DDS
service queue. Memory per request: ``max_waypoints`` is checked before any array is built; the retimer
checks its caps (gridpoints, output samples, waypoints × gridpoints × joints after merging waypoints
closer than the path tolerance) before allocating, and its failure names the cap.

Acceleration limits come from ``joint_limits_path`` (MoveIt ``joint_limits.yaml``; a bare file name is
looked up in the package's ``config/``) or ``acceleration_limit``; URDFs carry none. Without them every
response message and the log say which joints have none (their acceleration is then bounded by the
torque limits only).

A bad request (NaN, unknown joint, ragged points, bad option, infeasible path, a waypoint outside the
position limits or where gravity alone exceeds the torque limit, ...) gets ``success: false`` and a
message naming the joint, the waypoint index and the limit; the node logs it and serves on. Any
unexpected exception in a request is caught the same way.

Payload: ``~/set_payload`` (``robot_dynamics_interfaces/srv/SetPayload``, as on the control nodes:
:func:`robot_dynamics_ros.nodes.common.create_payload_service`) sets the ``payload.*`` parameters in one
atomic change; the node builds the new model (``common.model_with_params``) and its retimer and swaps
both in, so a request already running finishes on the old model and the next one uses the new one.

Parameters: :func:`robot_dynamics_ros.nodes.common.robot_source_params` (``friction_path`` included) and
:data:`PARAMS` (with the control nodes' ``payload.*``).
"""
from __future__ import annotations

import dataclasses
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import numpy as np
import rclpy
from builtin_interfaces.msg import Duration
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from trajectory_msgs.msg import JointTrajectoryPoint

from robot_dynamics_ros.nodes import common, naming
from robot_dynamics_ros.nodes.common import Diagnostics, ParamSpec, RateLimitedLog
from robot_dynamics_ros.retiming import retimer as _retimer

NODE_NAME = "retiming_service"

#: the retimer's gridpoint cap and default tolerance (fallbacks for a retimer without them)
MAX_GRIDPOINTS = int(getattr(_retimer, "MAX_GRIDPOINTS", 1_000_000))
_OPTION_FIELDS = {f.name: f for f in dataclasses.fields(_retimer.RetimeOptions)}
DEFAULT_PATH_TOLERANCE = float(getattr(_retimer, "DEFAULT_PATH_TOLERANCE", 1e-3))

PARAMS = [
    ParamSpec("default_gridpoints", 0, "Gridpoints when a request says 0 (0: the retimer's default, "
              "max(200, waypoints)).", range=(0, MAX_GRIDPOINTS)),
    ParamSpec("default_velocity_scaling_factor", 1.0, "Fraction of the velocity limits when a request's "
              "velocity_scaling is 0, (0, 1].", range=(1e-6, 1.0)),
    ParamSpec("default_acceleration_scaling_factor", 1.0, "Fraction of the acceleration limits when a "
              "request's acceleration_scaling is 0, (0, 1].", range=(1e-6, 1.0)),
    ParamSpec("default_torque_margin", 1.0, "Fraction of the URDF effort limits when a request's "
              "torque_margin is 0, (0, 1] (e.g. 0.9).", range=(1e-6, 1.0)),
    ParamSpec("default_path_tolerance", DEFAULT_PATH_TOLERANCE, "Largest distance (rad or m, infinity norm) "
              "of the retimed path from the request's polyline when a request's path_tolerance is 0.",
              range=(0.0, 10.0)),
    ParamSpec("default_sample_period", 0.0, "Output period (s) when a request says 0 (0: one sample per "
              "gridpoint).", range=(0.0, 10.0)),
    ParamSpec("acceleration_limit", 0.0, "Acceleration limit (rad/s² or m/s²) for joints without one from "
              "joint_limits_path (0: none).", range=(0.0, 1e6), read_only=True),
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
    ParamSpec("warmup", True, "Compile / load the retiming kernels when the model loads (on the solver "
              "thread; requests wait for it), else on the first request.", read_only=True),
    ParamSpec("log_period", 1.0, "Minimum seconds between two log lines of the same kind.", range=(0.0, 3600.0)),
    ParamSpec("diagnostics_period", 1.0, "Seconds between two /diagnostics messages.", range=(0.01, 3600.0),
              read_only=True),
]


PARAMS += [s for s in common.CONTROL_PARAMS if s.name.startswith("payload.")]


def _duration(seconds: float) -> Duration:
    ns = int(round(seconds * 1e9))
    return Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def acceleration_warning(model) -> str:
    """The one-line warning for joints of ``model`` without an acceleration limit, or ''."""
    missing = [j for j, a in zip(model.joint_names, model.acceleration_limit) if not math.isfinite(a)]
    if not missing:
        return ""
    return (f"no acceleration limits configured for joints {missing} (set joint_limits_path to a "
            f"joint_limits.yaml, or acceleration_limit): their acceleration is bounded by the torque limits only")


#: keep-last depth of the ~/retime service's request and response queues
SERVICE_QOS_DEPTH = 100

class RetimingServiceNode(Node):
    """The retiming service node (see the module docstring).

    Args:
        node_name: ROS node name; the service is ``<namespace>/<node_name>/retime`` (remappable).
        **kwargs: passed to ``rclpy.node.Node`` (``context``, ``parameter_overrides``, ...).

    Raises:
        UserError / URDFError: the URDF from ``urdf_path`` / ``robot_description`` cannot be read.
        ValueError: a parameter override fails its check.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        from robot_dynamics_interfaces.srv import RetimeTrajectory
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        self._specs = {s.name: s for s in [*common.robot_source_params(), *PARAMS]}
        self.p = common.declare_parameters(self, self._specs.values())
        self.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        self.diag = Diagnostics(self, hardware_id="retiming_service", period=self.p["diagnostics_period"])
        self.diag.set_level(Diagnostics.WARN, "waiting for the robot model")
        self._lock = threading.Lock()
        self.retimer = None
        self.model = None
        self.base_model = None  # the loaded model before payload.*: run-time payloads are built from it
        self.accel_warning = ""
        self.last_error = ""
        self.requests = 0
        self.failures = 0
        self.busy_answers = 0
        self.timeouts = 0
        #: latest measured positions of model joints: name -> (position, arrival monotonic s)
        self._measured: dict[str, tuple[float, float]] = {}
        self._model_index: dict[str, int] = {}
        self.add_on_set_parameters_callback(self._on_set_parameters)
        # best effort accepts reliable and best-effort publishers alike; depth 1: only the latest matters
        # (rclpy's qos_overrides.<topic>.subscription.* parameters change it)
        self.joint_state_sub = self.create_subscription(
            JointState, "joint_states", self._on_joint_state,
            QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT),
            qos_overriding_options=common.qos_overrides())

        # one solver thread: one retiming at a time; _solver_free is held from submission to completion
        self._solver = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self.get_name()}_solver")
        self._solver_free = threading.Semaphore(1)
        #: set once the retiming kernels of the current model are compiled / loaded (warm-up done)
        self.warm = threading.Event()
        self.service_name = self.resolve_service_name("~/retime")
        from rclpy.executors import MultiThreadedExecutor

        self._worker = Node(f"{self.get_name()}_worker", context=self.context, namespace=self.get_namespace(),
                            use_global_arguments=False, enable_rosout=False, start_parameter_services=False)
        # keep-last 100 requests and responses (the default 10 is shared by every client: ten concurrent
        # clients with a queued request each can push a response out before it is taken)
        self.srv = self._worker.create_service(RetimeTrajectory, self.service_name, self._on_request,
                                               qos_profile=QoSProfile(depth=SERVICE_QOS_DEPTH,
                                                                      reliability=ReliabilityPolicy.RELIABLE),
                                               callback_group=ReentrantCallbackGroup())
        self._worker_executor = MultiThreadedExecutor(num_threads=int(self.p["max_concurrent_requests"]),
                                                      context=self.context)
        self._worker_executor.add_node(self._worker)
        self.loader = common.ModelLoader(self, self._on_model, self.log, naming.loader_params(self.p))
        common.create_payload_service(self)
        self._worker_thread = threading.Thread(target=self._spin_worker, name=f"{self.get_name()}_retiming",
                                               daemon=True)
        self._worker_thread.start()

    # ------------------------------------------------------------------ model / parameters
    def _on_model(self, model, label: str) -> None:
        from robot_dynamics_ros.retiming.retimer import Retimer

        acc = float(self.p["acceleration_limit"])
        if acc > 0 and not np.all(np.isfinite(model.acceleration_limit)):
            # a copy of our own: the shared model is never modified
            model = model.with_settings()
            a = np.array(model.acceleration_limit, dtype=float)
            a[~np.isfinite(a)] = acc
            model.acceleration_limit = a
        self.base_model = model
        model = common.model_with_params(model, self.p)
        retimer = Retimer(model)
        warning = acceleration_warning(model)
        with self._lock:
            self.model = model
            self.retimer = retimer
            self.accel_warning = warning
            self._model_index = dict(model.index)
            self._measured = {}
        if self.p["warmup"]:
            self.warm.clear()
            self._solver_free.acquire()
            self.get_logger().info("warming up the retiming kernels (the first run compiles them, 1-2 min; "
                                   "requests wait until request_deadline)")
            self._solver.submit(self._warmup, retimer)
        else:
            self.warm.set()
        self.diag.set("robot", model.description.name)
        self.diag.set("model_source", label)
        self.diag.set_level(Diagnostics.WARN if warning else Diagnostics.OK,
                            warning or "serving")
        self.get_logger().info(f"retiming for '{model.description.name}' from {label} ({model.n} joints) on "
                               f"{self.service_name}")
        if warning:
            self.get_logger().warning(warning)

    def _warmup(self, retimer) -> None:
        t0 = time.monotonic()
        try:
            retimer.warmup()
            self.get_logger().info(f"retiming kernels ready after {time.monotonic() - t0:.1f} s")
        except Exception as exc:  # noqa: BLE001 - a failed warm-up only costs the first request's time
            self.log.warning("warmup", f"retiming warm-up failed: {exc}")
        finally:
            self.warm.set()
            self._solver_free.release()

    def _on_set_parameters(self, params):
        from rcl_interfaces.msg import SetParametersResult

        ok, reason = common.validate_parameters(self._specs, params)
        if not ok:
            return SetParametersResult(successful=False, reason=reason)
        new = common.merged_parameters(self._specs, self.p, params)
        if self.base_model is not None and any(p.name in common.MODEL_PARAMS for p in params):
            from robot_dynamics_ros.errors import UserError
            from robot_dynamics_ros.retiming.retimer import Retimer

            try:
                model = common.model_with_params(self.base_model, new)
            except UserError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
            retimer = Retimer(model)
            with self._lock:
                self.model, self.retimer = model, retimer
        self.p = new
        self.log = RateLimitedLog(self.get_logger(), new["log_period"])
        return SetParametersResult(successful=True)

    def _on_joint_state(self, msg) -> None:
        index = self._model_index
        now = time.monotonic()
        fresh = {}
        for name, pos in zip(msg.name, msg.position):
            if name in index and math.isfinite(pos):  # only model joints are kept: bounded memory
                fresh[name] = (float(pos), now)
        if fresh:
            merged = dict(self._measured)
            merged.update(fresh)
            self._measured = merged  # one reference swap: the solver thread reads either dict whole

    def measured_hold(self, joints) -> tuple[dict[str, float], list[str]]:
        """For ``joints``: ``(fresh measured positions by name, joints without one)``."""
        limit = float(self.p["joint_state_timeout"])
        now = time.monotonic()
        measured = self._measured
        hold, absent = {}, []
        for j in joints:
            entry = measured.get(j)
            if entry is not None and now - entry[1] <= limit:
                hold[j] = entry[0]
            else:
                absent.append(j)
        return hold, absent

    def _spin_worker(self) -> None:
        try:
            self._worker_executor.spin()
        except Exception as exc:  # noqa: BLE001 - e.g. the context was shut down under us
            if rclpy.ok(context=self.context):
                self.get_logger().error(f"retiming executor stopped: {exc}")

    # ------------------------------------------------------------------ the service
    def _on_request(self, request, response):
        t0 = time.perf_counter()
        deadline = t0 + float(self.p["request_deadline"])
        self.requests += 1
        self.diag.count("requests")
        with self._lock:
            warning = self.accel_warning
        answer = None
        if not self._solver_free.acquire(timeout=max(0.0, deadline - time.perf_counter())):
            self.busy_answers += 1
            self.diag.count("busy")
            what = "other requests" if self.warm.is_set() else "the warm-up (compiling the retiming kernels)"
            answer = self._fail(response, f"busy: the solver was occupied by {what} for the whole "
                                          f"request_deadline ({self.p['request_deadline']:g} s); try again")
        else:
            try:
                job = self._solver.submit(self._solve, request, response)
            except BaseException:
                self._solver_free.release()
                raise
            try:
                answer = job.result(timeout=max(0.0, deadline - time.perf_counter()))
            except FutureTimeout:
                self.timeouts += 1
                self.diag.count("timeouts")
                answer = self._fail(type(response)(), f"timed out: no result within request_deadline "
                                                      f"({self.p['request_deadline']:g} s); the result is "
                                                      f"discarded (send fewer waypoints or gridpoints, or raise request_deadline)")
        if warning:
            answer.message = f"{answer.message}; warning: {warning}"
        if not answer.success:
            self.failures += 1
            self.diag.count("failures")
            self.last_error = answer.message
            self.diag.set("last_error", answer.message[:200])
            self.log.warning("request", f"retiming request refused: {answer.message}")
        elif warning:
            self.log.warning("acceleration", warning)
        answer.solve_time = time.perf_counter() - t0
        self.diag.latency.add(answer.solve_time)
        return answer

    def _solve(self, request, response):
        """On the solver thread: the whole retiming and the response (releases the solver when done)."""
        try:
            self._retime(request, response)
        except Exception as exc:  # noqa: BLE001 - a request must never take the node down
            response.success = False
            response.message = f"internal error while retiming: {type(exc).__name__}: {exc}"
            response.trajectory.points = []
        finally:
            self._solver_free.release()
        return response

    @staticmethod
    def _fail(response, message: str):
        response.success = False
        response.message = message
        response.trajectory.points = []
        return response

    def _options(self, request):
        """``(RetimeOptions, None)`` from the request and the node's defaults, or ``(None, message)``."""
        p = self.p

        def pick(value, default):
            return float(value) if value != 0.0 else float(default)

        period = pick(request.sample_period, p["default_sample_period"])
        kwargs = dict(
            velocity_scale=pick(request.velocity_scaling, p["default_velocity_scaling_factor"]),
            acceleration_scale=pick(request.acceleration_scaling, p["default_acceleration_scaling_factor"]),
            torque_margin=pick(request.torque_margin, p["default_torque_margin"]),
            gridpoints=int(request.gridpoints) or (int(p["default_gridpoints"]) or None),
            sample_period=period or None, friction=bool(p["friction"]))
        tolerance = pick(request.path_tolerance, p["default_path_tolerance"])
        if "path_tolerance" in _OPTION_FIELDS:
            kwargs["path_tolerance"] = tolerance
        if request.jerk_scaling != 0.0:
            if "jerk_scale" not in _OPTION_FIELDS:
                return None, "jerk_scaling: this retimer has no jerk limits (send 0)"
            kwargs["jerk_scale"] = float(request.jerk_scaling)
        return _retimer.RetimeOptions(**kwargs), None

    def _retime(self, request, response):
        with self._lock:
            retimer = self.retimer
            model = self.model
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
        options, problem = self._options(request)
        if problem:
            return self._fail(response, problem)
        v0 = list(request.start_velocity)
        v1 = list(request.end_velocity)
        for what, v in (("start_velocity", v0), ("end_velocity", v1)):
            if v and len(v) != k:
                return self._fail(response, f"{what}: {len(v)} values for {k} joint_names (empty = at rest)")
        named = set(names)
        unnamed = [j for j in model.joint_names if j not in named]
        # unknown or duplicate names: the retimer's message names them, whatever the hold
        hold, absent = self.measured_hold(unnamed) if named <= model.index.keys() else ({}, [])
        if absent:
            return self._fail(response, f"joints {absent} are not in path.joint_names and have no measured "
                                        f"position on {self.joint_state_sub.topic_name} within "
                                        f"joint_state_timeout {p['joint_state_timeout']:g} s: name them in "
                                        f"the request")
        wp = np.array([pt.positions for pt in points], dtype=float).reshape(len(points), k)
        result = retimer.retime(wp, joint_names=names, start_velocity=v0 or None, end_velocity=v1 or None,
                                hold=hold or None, options=options)
        extra = [w for w in getattr(result, "warnings", ()) if not w.startswith("no acceleration limits")]
        response.message = "; ".join([result.message, *extra])
        response.duration = float(result.duration)
        response.max_path_deviation = float(getattr(result, "max_path_deviation", math.nan))
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
        held = f"; held at the measured state: {sorted(hold)}" if hold else ""
        response.message = f"{response.message}; peak fraction of limits: {peaks}{held}"
        self.diag.set("last_duration_s", round(result.duration, 6))
        self.diag.set("last_solve_ms", round(result.solve_ms, 3))
        return response

    # ------------------------------------------------------------------ shutdown
    def destroy_node(self) -> None:
        """Stop the worker executor thread and the solver, then destroy the worker node and this node."""
        if self._worker_executor is not None:
            try:
                self._worker_executor.shutdown(timeout_sec=2.0)
            except Exception:  # noqa: BLE001 - context may already be gone
                pass
            self._worker_thread.join(timeout=2.0)
            try:
                self._worker.destroy_node()
            except Exception:  # noqa: BLE001
                pass
            self._worker_executor = None
            self._solver.shutdown(wait=False, cancel_futures=True)
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_dynamics_ros retiming_service`` entry point (SIGINT stops it)."""
    return common.run_node("retiming_service", RetimingServiceNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
