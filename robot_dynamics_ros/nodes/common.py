"""Helpers shared by every node: parameters, robot model loading, diagnostics, logging, QoS, executors.

A node is a thin rclpy shell over the pure-Python core; everything two nodes would otherwise copy lives
here:

* :class:`ParamSpec` / :func:`declare_parameters` / :func:`validate_parameters` /
  :func:`merged_parameters` — parameters declared with descriptors (type, description with unit, range),
  validated and merged in an ``on_set_parameters`` callback.
* :func:`robot_source_params` / :class:`ModelLoader` — the robot model from the ``urdf_path`` parameter
  (a file or a name from :data:`robot_dynamics_ros.robots.ROBOTS`), the ``robot_description`` string
  parameter, or the ``/robot_description`` topic (``std_msgs/String``, transient-local QoS, as
  robot_state_publisher publishes it; a new description swaps the model at run time).
  :func:`shared_model` keeps one model (and one Pinocchio engine) per process and URDF.
* :class:`Diagnostics` — ``diagnostic_msgs/DiagnosticArray`` on ``/diagnostics`` at 1 Hz: message rate,
  latency p50/p99/max, staleness, last error, clamp count and any other key the node sets.
* :class:`RateLimitedLog` — one log line per key and period, with the count of suppressed lines.
* :func:`joint_state_qos` / :func:`command_qos` / :func:`description_qos` / :func:`make_executor` /
  :func:`spin_until_shutdown` (use it instead of ``executor.spin()``: the EventsExecutor's ``spin()`` does
  not return on Ctrl-C) / :func:`run_node` (a node's ``main()``) / :func:`stamp_ns`.

The joint_states -> command hot path of a node should touch only :class:`LatencyStats.add` and
:meth:`Diagnostics.count` from here (a few array writes each).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ParamSpec", "declare_parameters", "validate_parameters", "robot_source_params", "ModelLoader",
    "shared_model", "shared_engine", "Diagnostics", "LatencyStats", "RateLimitedLog", "joint_state_qos",
    "command_qos", "description_qos", "joint_state_fields", "make_executor", "freeze_gc", "spin_until_shutdown",
    "run_node",
    "stamp_ns", "EXECUTORS", "merged_parameters",
]


# --------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class ParamSpec:
    """One node parameter.

    Attributes:
        name: parameter name.
        default: default value; its Python type fixes the ROS parameter type (``bool``, ``int``,
            ``float``, ``str``, ``list[float]``, ``list[str]``; give ``kind`` for an empty list).
        description: what it means, with its unit (shown by ``ros2 param describe``).
        range: ``(low, high)`` inclusive bounds for a number (and each entry of a number array).
        choices: allowed values of a string parameter.
        length: required length of an array parameter.
        read_only: may not change after start-up.
        kind: ``"double_array"`` / ``"string_array"`` for an empty-list default.
    """

    name: str
    default: Any
    description: str
    range: tuple[float, float] | None = None
    choices: tuple[str, ...] | None = None
    length: int | None = None
    read_only: bool = False
    kind: str | None = None

    def ros_type(self):
        from rclpy.parameter import Parameter

        if self.kind == "double_array":
            return Parameter.Type.DOUBLE_ARRAY
        if self.kind == "string_array":
            return Parameter.Type.STRING_ARRAY
        d = self.default
        if isinstance(d, bool):
            return Parameter.Type.BOOL
        if isinstance(d, int):
            return Parameter.Type.INTEGER
        if isinstance(d, float):
            return Parameter.Type.DOUBLE
        if isinstance(d, str):
            return Parameter.Type.STRING
        if isinstance(d, (list, tuple)) and d:
            if all(isinstance(x, str) for x in d):
                return Parameter.Type.STRING_ARRAY
            if all(isinstance(x, bool) for x in d):
                return Parameter.Type.BOOL_ARRAY
            return Parameter.Type.DOUBLE_ARRAY
        raise TypeError(f"parameter '{self.name}': give kind= for default {d!r}")

    def descriptor(self):
        from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

        t = self.ros_type()
        text = self.description
        if self.choices:
            text += f" One of {list(self.choices)}."
        desc = ParameterDescriptor(name=self.name, type=t.value, description=text, read_only=self.read_only)
        if self.range is not None and isinstance(self.default, (int, float)) and not isinstance(
                self.default, bool):
            lo, hi = self.range
            if isinstance(self.default, int):
                desc.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=0)]
            else:
                desc.floating_point_range = [FloatingPointRange(from_value=float(lo), to_value=float(hi),
                                                                step=0.0)]
        return desc

    def check(self, value) -> str | None:
        """Return None when ``value`` is acceptable, else a reason naming the parameter and the value."""
        if self.choices is not None and value not in self.choices:
            return f"parameter '{self.name}' = {value!r}: must be one of {list(self.choices)}"
        if self.length is not None and len(value) != self.length:
            return f"parameter '{self.name}' = {list(value)!r}: needs exactly {self.length} entries"
        if self.range is not None:
            lo, hi = self.range
            vals = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]
            for v in vals:
                if not (lo <= v <= hi):  # also rejects NaN
                    return f"parameter '{self.name}' = {value!r}: must be within [{lo}, {hi}]"
        elif isinstance(value, float) and not np.isfinite(value):
            return f"parameter '{self.name}' = {value!r}: must be finite"
        elif (isinstance(value, (list, tuple, np.ndarray)) and len(value)
              and isinstance(value[0], float) and not np.isfinite(np.asarray(value, dtype=float)).all()):
            return f"parameter '{self.name}' = {list(value)!r}: entries must be finite"
        return None


def declare_parameters(node, specs: Iterable[ParamSpec]) -> dict[str, Any]:
    """Declare ``specs`` on ``node`` (overrides from a params YAML / command line apply) and return values.

    Raises:
        ValueError: an overridden value fails its spec's check (naming the parameter and the value).
    """
    from rclpy.exceptions import ParameterUninitializedException

    values = {}
    for spec in specs:
        t = spec.ros_type()
        default = spec.default
        if isinstance(default, (list, tuple)) and not default:
            # an empty override ([] in a YAML file or a Parameter) arrives typed BYTE_ARRAY and would be
            # refused for a string/double array: treat it as "not set" (= the empty default)
            override = getattr(node, "_parameter_overrides", {}).get(spec.name)
            empty = override is not None and override.value is not None and len(override.value) == 0
            node.declare_parameter(spec.name, t, spec.descriptor(), ignore_override=empty)
            try:
                value = node.get_parameter(spec.name).value
            except ParameterUninitializedException:
                # rclpy cannot hold a typed empty array: the parameter stays "not set", meaning []
                value = []
        else:
            value = node.declare_parameter(spec.name, default, spec.descriptor()).value
        if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
            value = list(value)
        reason = spec.check(value)
        if reason is not None:
            raise ValueError(reason)
        values[spec.name] = value
    return values


def _param_value(node, name: str):
    from rclpy.exceptions import ParameterUninitializedException

    try:
        return node.get_parameter(name).value
    except ParameterUninitializedException:
        return []


def validate_parameters(specs: Mapping[str, ParamSpec], params) -> tuple[bool, str]:
    """Check rclpy ``Parameter`` objects against their specs: ``(ok, reason)`` for SetParametersResult.

    Parameters without a spec pass (other code may own them).
    """
    for p in params:
        spec = specs.get(p.name)
        if spec is None:
            continue
        value = p.value
        if hasattr(value, "tolist"):
            value = value.tolist()
        reason = spec.check(value)
        if reason is not None:
            return False, reason
    return True, ""


def merged_parameters(specs: Mapping[str, ParamSpec], current: Mapping[str, Any], params) -> dict[str, Any]:
    """A copy of ``current`` (parameter name -> value) updated with the rclpy ``Parameter`` objects of
    ``params`` that have a spec; array values become plain lists. Validate first
    (:func:`validate_parameters`): this only merges."""
    new = dict(current)
    for p in params:
        if p.name in specs:
            value = p.value
            new[p.name] = list(value) if hasattr(value, "tolist") or isinstance(value, (list, tuple)) else value
    return new


# --------------------------------------------------------------------------- robot model
def robot_source_params() -> list[ParamSpec]:
    """The parameters that say where the robot model comes from (shared by every dynamics node)."""
    return [
        ParamSpec("urdf_path", "", "URDF file path, or a robot name of robot_dynamics_ros.robots.ROBOTS "
                  "(e.g. 'panda'). Empty: use robot_description, else the /robot_description topic."),
        ParamSpec("robot_description", "", "URDF XML text (as robot_state_publisher's parameter). Used when "
                  "urdf_path is empty."),
        ParamSpec("robot_description_topic", "/robot_description",
                  "std_msgs/String topic (transient local) read when both urdf_path and robot_description "
                  "are empty; a new message swaps the model at run time.", read_only=True),
        ParamSpec("held_joint_names", [], "Joints held fixed at held_joint_positions (e.g. gripper fingers); "
                  "empty: the robot catalogue's default for a named robot.", kind="string_array",
                  read_only=True),
        ParamSpec("held_joint_positions", [], "Positions (rad or m) of held_joint_names, same order.",
                  kind="double_array", read_only=True),
        ParamSpec("joint_limits_path", "", "Optional joint_limits.yaml (MoveIt format) overriding URDF "
                  "limits.", read_only=True),
    ]


def resolve_robot_source(params: Mapping[str, Any]) -> tuple[str | None, dict[str, float] | None, str]:
    """From the :func:`robot_source_params` values: ``(urdf source or None for the topic, held, label)``.

    ``urdf source`` is a file path or XML text for ``RobotModel.from_urdf``; ``held`` is None when the
    parameters give none (the caller may then use a catalogue default); ``label`` names the source.

    Raises:
        UserError: ``urdf_path`` is neither a file nor a known robot name; held joint lists of
            different lengths.
    """
    from robot_dynamics_ros import robots
    from robot_dynamics_ros.errors import UserError

    names = list(params.get("held_joint_names") or [])
    positions = list(params.get("held_joint_positions") or [])
    if len(names) != len(positions):
        raise UserError(f"held_joint_names has {len(names)} entries but held_joint_positions has "
                        f"{len(positions)}")
    held = dict(zip(names, (float(p) for p in positions))) if names else None
    path = str(params.get("urdf_path") or "")
    if path:
        entry = robots.resolve(path)
        if held is None and entry.held_joints:
            held = dict(entry.held_joints)
        return str(entry.path), held, str(entry.path)
    text = str(params.get("robot_description") or "")
    if text.strip():
        return text, held, "parameter robot_description"
    return None, held, str(params.get("robot_description_topic") or "/robot_description")


_SHARED_LOCK = threading.Lock()
_SHARED_MODELS: dict[tuple, Any] = {}
_SHARED_ENGINES: dict[int, Any] = {}


def shared_model(source: str, held_joints: Mapping[str, float] | None = None,
                 joint_limits: str | None = None):
    """One :class:`~robot_dynamics_ros.model.RobotModel` per process and (URDF, held joints, limits).

    Nodes in the same process (``robot-dynamics run``, the demo) share it, so a payload set on one
    node is seen by all nodes that control the same robot.

    Raises:
        URDFError / UserError: the URDF cannot be read (message names the file and the problem).
    """
    from robot_dynamics_ros.model import RobotModel

    key = (source, tuple(sorted((held_joints or {}).items())), joint_limits or "")
    with _SHARED_LOCK:
        model = _SHARED_MODELS.get(key)
        if model is None:
            model = RobotModel.from_urdf(source, held_joints=held_joints or None,
                                         joint_limits=joint_limits or None)
            _SHARED_MODELS[key] = model
        return model


def shared_engine(model):
    """One :class:`~robot_dynamics_ros.dynamics.pinocchio_engine.PinocchioDynamics` per model object.

    Not thread-safe: the engine keeps one Pinocchio ``Data`` and scratch buffers. Two nodes that may run
    concurrently (``MultiThreadedExecutor``) should each build their own engine over the shared model.
    """
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics

    with _SHARED_LOCK:
        eng = _SHARED_ENGINES.get(id(model))
        if eng is None or eng[0] is not model:
            eng = (model, PinocchioDynamics(model))
            _SHARED_ENGINES[id(model)] = eng
        return eng[1]


class ModelLoader:
    """Gets the robot model for a node from its parameters or from the ``/robot_description`` topic.

    Args:
        node: the rclpy node (with :func:`robot_source_params` declared).
        on_model: called with ``(model, label)`` each time a model is (re)loaded — once at start for a
            file/parameter source, on every new message for the topic source.
        log: a :class:`RateLimitedLog` for load errors from the topic.
        params: the node's parameter values from :func:`declare_parameters` (default: read from the
            node; an uninitialized empty array reads as ``[]``).

    A bad URDF from a file or parameter raises at construction (the node cannot start without a
    robot); a bad URDF from the topic is logged and the previous model stays in use.
    """

    def __init__(self, node, on_model: Callable[[Any, str], None], log: RateLimitedLog,
                 params: Mapping[str, Any] | None = None):
        self._node = node
        self._on_model = on_model
        self._log = log
        self.subscription = None
        self.last_error = ""
        if params is None:
            params = {s.name: _param_value(node, s.name) for s in robot_source_params()}
        p = {s.name: params[s.name] for s in robot_source_params()}
        self._joint_limits = p["joint_limits_path"] or None
        source, self._held, label = resolve_robot_source(p)
        if source is not None:
            on_model(shared_model(source, self._held, self._joint_limits), label)
        else:
            from std_msgs.msg import String

            self.subscription = node.create_subscription(String, label, self._on_description,
                                                         description_qos())
            node.get_logger().info(f"waiting for the robot description on {label}")

    def _on_description(self, msg) -> None:
        try:
            model = shared_model(msg.data, self._held, self._joint_limits)
        except Exception as exc:  # noqa: BLE001 - a bad description must not kill the node
            self.last_error = f"robot_description rejected: {exc}"
            self._log.error("robot_description", self.last_error)
            return
        try:
            self._on_model(model, "topic " + self.subscription.topic_name)
        except Exception as exc:  # noqa: BLE001 - e.g. the node's joint list does not fit the new robot
            self.last_error = f"robot_description rejected: {exc}"
            self._log.error("robot_description", self.last_error)
            return
        freeze_gc()  # the new model's objects are long-lived too (see freeze_gc)


def joint_state_fields(reader, raw: bytes):
    """The fields of a serialized ``sensor_msgs/JointState`` from a ``raw=True`` subscription:
    ``reader.read`` (:class:`~robot_dynamics_ros.control.cdr.JointStateReader`), or rclpy's deserializer
    for an encoding the reader does not read.

    Raises:
        Exception: rclpy cannot deserialize ``raw`` either (the caller logs it and serves on).
    """
    fields = reader.read(raw)
    if fields is None:
        from rclpy.serialization import deserialize_message
        from sensor_msgs.msg import JointState

        from robot_dynamics_ros.control.cdr import fields_from_message

        fields = fields_from_message(deserialize_message(raw, JointState))
    return fields


# --------------------------------------------------------------------------- QoS, executors, time
def joint_state_qos(depth: int = 10, reliable: bool = True):
    """QoS of a joint_states subscription: keep-last ``depth``, reliable (default) or best effort."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE if reliable
                      else ReliabilityPolicy.BEST_EFFORT)


def command_qos(depth: int = 10):
    """QoS of an effort command publisher: keep-last ``depth``, reliable, volatile (as a ros2_control
    forward_command_controller subscribes)."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)


def description_qos():
    """QoS of ``/robot_description``: keep-last 1, reliable, transient local (robot_state_publisher's)."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


#: executor kinds accepted by :func:`make_executor`
EXECUTORS = ("events", "single", "multi")


def make_executor(kind: str = "events", context=None):
    """Return an rclpy executor: ``events`` (``rclpy.experimental.EventsExecutor``, the fastest measured
    here, see NOTES.md), ``single`` (SingleThreadedExecutor) or ``multi`` (MultiThreadedExecutor).

    Raises:
        ValueError: unknown kind.
    """
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        return EventsExecutor(context=context)
    if kind == "single":
        from rclpy.executors import SingleThreadedExecutor

        return SingleThreadedExecutor(context=context)
    if kind == "multi":
        from rclpy.executors import MultiThreadedExecutor

        return MultiThreadedExecutor(context=context)
    raise ValueError(f"executor '{kind}': must be one of {list(EXECUTORS)}")


def freeze_gc() -> int:
    """Collect garbage once, then move every object alive now into the garbage collector's permanent
    generation (``gc.freeze()``), which later collections do not scan. Returns the number of objects frozen.

    Why: CPython's cyclic collector scans every tracked object in a full (generation 2) collection and the
    thread that triggers it holds the GIL meanwhile. A node process with rclpy, numpy, Pinocchio and numba
    (the start-up cross-check) loaded holds ~130 000 such objects: measured here, a full collection took
    up to 43 ms, a 43-message gap at 1 kHz. The objects that exist once a node has started (modules,
    the model, the engine) live as long as the process, so scanning them finds nothing; after the freeze a
    full collection only scans what was created since. Cost: garbage cycles among frozen objects are never
    collected, hence the :func:`gc.collect` first. Called by :func:`spin_until_shutdown` and after a model
    is loaded from ``/robot_description``.
    """
    import gc

    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def spin_until_shutdown(executor, context=None, *, until: Callable[[], bool] | None = None,
                        period: float = 0.1) -> None:
    """Spin ``executor`` until SIGINT / SIGTERM, the context's shutdown, or ``until()`` returning True.

    Use this instead of ``executor.spin()``: ``rclpy.experimental.EventsExecutor.spin()`` does not return on
    SIGINT (measured here), and rclpy's own signal handler shuts down only the default context. In the
    main thread this installs Python handlers for SIGINT and SIGTERM for the duration of the call (they
    run between two ``spin_once(period)`` calls) and restores the previous ones afterwards.
    """
    import signal

    from rclpy.executors import ExternalShutdownException
    from rclpy.utilities import get_default_context

    ctx = context if context is not None else get_default_context()
    freeze_gc()   # start-up objects out of the collector's way: no 40 ms full collections while serving
    stop = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[sig] = signal.signal(sig, lambda signum, frame: stop.append(signum))
            except (ValueError, OSError):  # not allowed here: rely on rclpy's handler
                pass
    # the EventsExecutor's spin_once returns after every callback (1000 times a second at 1 kHz): check the
    # context (a lock and a C call) and ``until`` at most once per ``period`` (time.monotonic() is ~20x
    # cheaper); a signal's flag is checked after every callback
    monotonic = time.monotonic
    try:
        next_check = 0.0
        while not stop:
            now = monotonic()
            if now >= next_check:
                if not ctx.ok() or (until is not None and until()):
                    break
                next_check = now + period
            executor.spin_once(timeout_sec=period)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        if ctx.ok() and not stop:
            raise
        # a callback that was running when the signal shut the context down (e.g. "publisher's context
        # is invalid"): that is the shutdown, not an error
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def run_node(name: str, make_node: Callable[[], Any], args: list[str] | None = None, *,
             executor_kind: Callable[[Any], str] = lambda node: "events") -> int:
    """The body of a node's console entry point (``ros2 run robot_dynamics_ros <name>``).

    Initialises rclpy with ``args``, builds the node with ``make_node()``, spins it on
    ``make_executor(executor_kind(node))`` with :func:`spin_until_shutdown` until SIGINT / SIGTERM, then
    shuts the executor, the node and rclpy down.

    Returns:
        0 after a clean stop; 1 on a bad URDF or parameter (a
        :class:`~robot_dynamics_ros.errors.UserError`, ``ValueError`` or rclpy's invalid-parameter
        exceptions, typically from the node's constructor), after printing ``<name>: error: <reason>``
        as one line on stderr (no traceback).
    """
    import sys

    import rclpy
    from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException

    from robot_dynamics_ros.errors import UserError

    rclpy.init(args=args)
    node = executor = None
    try:
        node = make_node()
        executor = make_executor(executor_kind(node))
        executor.add_node(node)
        spin_until_shutdown(executor)
    except KeyboardInterrupt:
        pass
    except (UserError, ValueError, InvalidParameterTypeException, InvalidParameterValueException) as exc:
        print(f"{name}: error: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


def stamp_ns(stamp) -> int:
    """``builtin_interfaces/Time`` -> integer ns."""
    return stamp.sec * 1_000_000_000 + stamp.nanosec


# --------------------------------------------------------------------------- logging, statistics
class RateLimitedLog:
    """Log at most one line per ``key`` every ``period`` s; the next line says how many were suppressed.

    Args:
        logger: an rclpy logger (``node.get_logger()``) or anything with ``warning``/``error``/``info``.
        period: seconds between two lines of the same key.
    """

    def __init__(self, logger, period: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self._logger = logger
        self._period = float(period)
        self._clock = clock
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def _emit(self, level: str, key: str, text: str) -> bool:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._period:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        self._last[key] = now
        n = self._suppressed.pop(key, 0)
        if n:
            text = f"{text} ({n} similar suppressed)"
        # one call site per severity: rclpy's logger raises "Logger severity cannot be changed between
        # calls" when the same source line logs at two severities (which killed the node's executor)
        if level == "error":
            self._logger.error(text)
        elif level == "warning":
            self._logger.warning(text)
        else:
            self._logger.info(text)
        return True

    def info(self, key: str, text: str) -> bool:
        return self._emit("info", key, text)

    def warning(self, key: str, text: str) -> bool:
        return self._emit("warning", key, text)

    def error(self, key: str, text: str) -> bool:
        return self._emit("error", key, text)


class LatencyStats:
    """Ring buffer of the last ``size`` latencies (s) with p50/p99/max; ``add`` is O(1), no allocation."""

    def __init__(self, size: int = 4096):
        self._buf = np.zeros(size)
        self._n = 0
        self._size = size

    def add(self, seconds: float) -> None:
        self._buf[self._n % self._size] = seconds
        self._n += 1

    @property
    def count(self) -> int:
        return self._n

    def summary(self) -> dict[str, float]:
        """``{'p50_us', 'p99_us', 'max_us'}`` over the buffered samples (NaN when empty)."""
        k = min(self._n, self._size)
        if k == 0:
            return {"p50_us": float("nan"), "p99_us": float("nan"), "max_us": float("nan")}
        a = self._buf[:k]
        p50, p99 = np.percentile(a, [50, 99])
        return {"p50_us": p50 * 1e6, "p99_us": p99 * 1e6, "max_us": float(a.max()) * 1e6}


class Diagnostics:
    """Publishes one ``diagnostic_msgs/DiagnosticStatus`` for the node on ``/diagnostics`` every ``period``.

    The node keeps its counters here (:meth:`count`), sets values (:meth:`set`), and the level
    (:meth:`set_level`, OK / WARN / ERROR with a message); the timer adds the message rate of each counter
    since the last report and the latency summary.

    Args:
        node: the rclpy node.
        name: the status name (default ``"<node name>: <hardware_id>"``).
        period: report period, s.
    """

    OK, WARN, ERROR, STALE = 0, 1, 2, 3

    def __init__(self, node, hardware_id: str = "robot_dynamics_ros", period: float = 1.0):
        from diagnostic_msgs.msg import DiagnosticArray

        self._node = node
        self.name = f"{node.get_name()}: {hardware_id}"
        self.hardware_id = hardware_id
        self._pub = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.counters: dict[str, int] = {}
        self._prev_counters: dict[str, int] = {}
        self._prev_time = time.monotonic()
        self.values: dict[str, Any] = {}
        self.level = self.OK
        self.message = "starting"
        self.latency = LatencyStats()
        self.last_status = None
        self._timer = node.create_timer(period, self.publish)

    def count(self, key: str, n: int = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value

    def set_level(self, level: int, message: str) -> None:
        self.level, self.message = level, message

    def status(self):
        """Build the current ``DiagnosticStatus`` (rates are per second since the previous call)."""
        from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

        now = time.monotonic()
        dt = max(now - self._prev_time, 1e-9)
        kv = []
        for key, n in sorted(self.counters.items()):
            kv.append(KeyValue(key=key, value=str(n)))
            kv.append(KeyValue(key=f"{key}_rate_hz", value=f"{(n - self._prev_counters.get(key, 0)) / dt:.1f}"))
        self._prev_counters = dict(self.counters)
        self._prev_time = now
        for key, val in self.latency.summary().items():
            kv.append(KeyValue(key=f"latency_{key}", value=f"{val:.1f}"))
        for key, val in sorted(self.values.items()):
            kv.append(KeyValue(key=key, value=val if isinstance(val, str) else repr(val)))
        return DiagnosticStatus(level=bytes([self.level]), name=self.name, message=self.message,
                                hardware_id=self.hardware_id, values=kv)

    def publish(self) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        st = self.status()
        self.last_status = st
        msg = DiagnosticArray(status=[st])
        msg.header.stamp = self._node.get_clock().now().to_msg()
        try:
            self._pub.publish(msg)
        except Exception:  # noqa: BLE001 - context already shut down
            pass

    def destroy(self) -> None:
        self._node.destroy_timer(self._timer)


def as_float_list(values: Sequence[float]) -> list[float]:
    """Plain Python floats (for ``Float64MultiArray.data`` and parameters)."""
    return [float(v) for v in values]


def existing_file(path: str | Path, what: str) -> Path:
    """Return ``Path(path)`` if it is a file, else raise UserError naming ``what`` and the path."""
    from robot_dynamics_ros.errors import UserError

    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"{what} '{path}': no such file")
    return p
