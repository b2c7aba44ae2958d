"""Helpers shared by every node: parameters, robot model loading, diagnostics, logging, QoS, executors.

A node is a thin rclpy shell over the pure-Python core; everything two nodes would otherwise copy lives
here:

* :class:`ParamSpec` / :func:`declare_parameters` / :func:`validate_parameters` /
  :func:`merged_parameters` — parameters declared with descriptors (type, description with unit, range),
  validated and merged in an ``on_set_parameters`` callback.
* :func:`robot_source_params` / :class:`ModelLoader` — the robot model from the ``urdf_path`` parameter
  (a file or a name from :data:`robot_dynamics_ros.robots.ROBOTS`), the ``robot_description`` string
  parameter (text, never a path), or the ``robot_description`` topic (``std_msgs/String``, transient-local
  QoS, as robot_state_publisher publishes it; parsed on a worker thread; a new description swaps the model
  at run time), with the identified friction YAML of ``friction_path`` applied when the model is built.
  :func:`shared_model` keeps the few most recent models of the process (LRU).
* :class:`ControlShell`, :data:`CONTROL_PARAMS`, :func:`autostart`, :func:`create_payload_service`
  (with :func:`payload_change_warning` beyond :data:`PAYLOAD_REPLAN_FRACTION`), :func:`payload_request_fields`,
  :func:`model_with_params` — what the control nodes' lifecycle shells share.
* :class:`Diagnostics` — ``diagnostic_msgs/DiagnosticArray`` on ``/diagnostics`` at 1 Hz: message rate,
  latency p50/p99/max, staleness, last error, clamp count and any other key the node sets.
* :class:`RateLimitedLog` — one log line per key and period, with the count of suppressed lines.
* :func:`state_subscription_qos` / :func:`take_newest` / :func:`qos_overrides` / :func:`joint_state_qos` /
  :func:`command_qos` / :func:`description_qos` / :func:`make_executor` / :func:`spin_until_shutdown` (use
  it instead of ``executor.spin()``: the EventsExecutor's ``spin()`` does not return on Ctrl-C) /
  :func:`run_node` (a node's ``main()``).

The joint_states -> command hot path of a node touches only :meth:`ControlShell.receive`,
:func:`take_newest`, :class:`LatencyStats.add` and :meth:`Diagnostics.count` from here.
"""
from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_dynamics_ros.control.core import WAITING_FOR_STATES

__all__ = [
    "ParamSpec", "declare_parameters", "validate_parameters", "robot_source_params", "ModelLoader",
    "shared_model", "shared_engine", "model_from_text", "source_conflict", "excerpt", "MODEL_CACHE_SIZE",
    "Diagnostics", "LatencyStats", "RateLimitedLog", "joint_state_qos", "state_subscription_qos",
    "STATE_QOS_DEPTH", "command_qos", "description_qos", "qos_overrides", "take_newest", "joint_state_fields",
    "make_executor", "freeze_gc", "spin_until_shutdown", "run_node", "EXECUTORS", "merged_parameters",
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

    An empty array default is declared as a typed empty array (``STRING_ARRAY`` / ``DOUBLE_ARRAY`` with
    value ``[]``), not as an uninitialized parameter: rclpy's ``get_parameters`` service answers a request
    that names an uninitialized parameter with no values at all, which hid every parameter of the request
    from ``ros2 param get/dump`` and rqt_reconfigure.

    Raises:
        ValueError: an overridden value fails its spec's check (naming the parameter and the value).
    """
    from rcl_interfaces.msg import ParameterDescriptor, ParameterType
    from rclpy.parameter import Parameter

    # rclpy declares use_sim_time with an empty description; `ros2 param describe` should explain it too
    node.set_descriptor("use_sim_time", ParameterDescriptor(
        type=ParameterType.PARAMETER_BOOL, description="Use the /clock topic (simulation time) as the node clock."))
    values = {}
    for spec in specs:
        t = spec.ros_type()
        default = spec.default
        if isinstance(default, (list, tuple)) and not default:
            override = getattr(node, "_parameter_overrides", {}).get(spec.name)
            # an empty override ([] in a YAML file or a Parameter) arrives typed BYTE_ARRAY: "not set"
            empty = override is None or override.value is None or len(override.value) == 0
            if empty:
                # rclpy's declare_parameter infers BYTE_ARRAY from []: declare the typed empty value
                # through the same internal step declare_parameters uses
                param = Parameter(spec.name, t, [])
                node._declare_parameter_common([param], {spec.name: spec.descriptor()})
                value = []
            else:
                value = node.declare_parameter(spec.name, t, spec.descriptor()).value
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


def validate_parameters(specs: Mapping[str, ParamSpec], params,
                        current: Mapping[str, Any] | None = None) -> tuple[bool, str]:
    """Check rclpy ``Parameter`` objects against their specs: ``(ok, reason)`` for SetParametersResult.

    Parameters without a spec pass (other code may own them). With ``current`` (the node's values), the
    combination is checked too: setting a non-zero ``payload.mass`` needs a ``payload.link`` (without one
    the mass would be accepted and have no effect). Clearing ``payload.link`` alone removes the payload.
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
    if current is not None and any(p.name == "payload.mass" and p.value for p in params):
        new = merged_parameters(specs, current, params)
        if not new.get("payload.link"):
            return False, (f"parameter 'payload.mass' = {new['payload.mass']!r} kg with 'payload.link' empty: "
                           "set payload.link first, or both at once (~/set_payload)")
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
    """The parameters that say where the robot model comes from (shared by every dynamics node).

    Precedence: ``urdf_path`` (a file), else the ``robot_description`` parameter (XML text), else the
    ``robot_description`` topic. When both parameters are set, ``urdf_path`` wins and the node logs a
    warning naming both (a launch file that passes ``robot_description`` next to a params file with
    ``urdf_path`` is the usual cause).
    """
    return [
        ParamSpec("urdf_path", "", "URDF file path, or a robot name of robot_dynamics_ros.robots.ROBOTS "
                  "(e.g. 'panda'). Takes precedence over robot_description (a warning says so when both are "
                  "set). Empty: use robot_description, else the robot_description topic. Read at start-up "
                  "(read-only: a run-time value would be shown but never loaded).", read_only=True),
        ParamSpec("robot_description", "", "URDF XML text (as robot_state_publisher's parameter; never a path). "
                  "Used when urdf_path is empty. Read-only: a model at run time comes from the "
                  "robot_description topic.", read_only=True),
        ParamSpec("robot_description_topic", "robot_description",
                  "std_msgs/String topic (transient local) read when both urdf_path and robot_description "
                  "are empty; relative names resolve in the node's namespace; a new message swaps the model "
                  "at run time.", read_only=True),
        ParamSpec("held_joint_names", [], "Joints held fixed at held_joint_positions (e.g. gripper fingers); "
                  "empty: the robot catalogue's default for a named robot.", kind="string_array",
                  read_only=True),
        ParamSpec("held_joint_positions", [], "Positions (rad or m) of held_joint_names, same order.",
                  kind="double_array", read_only=True),
        ParamSpec("joint_limits_path", "", "Optional joint_limits.yaml (MoveIt format) overriding URDF "
                  "limits.", read_only=True),
        ParamSpec("friction_path", "", "Optional friction YAML of 'robot-dynamics identify' "
                  "(<out>.friction.yaml): its coulomb/viscous replace the URDF <dynamics>, its armature "
                  "(kg·m²) enters M(q), its offset (N·m) is subtracted from measured efforts. Empty: URDF "
                  "friction, no armature, no offset.", read_only=True),
    ]


def resolve_robot_source(params: Mapping[str, Any]) -> tuple[str | None, dict[str, float] | None, str]:
    """From the :func:`robot_source_params` values: ``(urdf source or None for the topic, held, label)``.

    ``urdf source`` is a file path (``urdf_path``) or XML text (the ``robot_description`` parameter,
    label ``"parameter robot_description"``); ``held`` is None when the parameters give none (the caller
    may then use a catalogue default); ``label`` names the source (the topic name for the topic).

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
    return None, held, str(params.get("robot_description_topic") or "robot_description")


def source_conflict(params: Mapping[str, Any]) -> str | None:
    """The warning when both ``urdf_path`` and ``robot_description`` are set (``urdf_path`` is used)."""
    if str(params.get("urdf_path") or "") and str(params.get("robot_description") or "").strip():
        return (f"both urdf_path ('{params['urdf_path']}') and robot_description "
                f"({len(str(params['robot_description']))} characters) are set: using urdf_path")
    return None


def excerpt(text: str, n: int = 60) -> str:
    """The first ``n`` characters of ``text`` on one line (for a log line about untrusted input)."""
    one = " ".join(str(text)[:4 * n].split())
    return one[:n] + ("..." if len(one) > n or len(text) > 4 * n else "")


def model_from_text(xml: str, *, held_joints=None, joint_limits=None):
    """A :class:`~robot_dynamics_ros.model.RobotModel` from description text (a topic or a parameter):
    data, never a path. ``RobotModel.from_text`` when the model module has it; else the text must start
    with ``<`` before it reaches ``from_urdf`` (which would open anything else as a file).

    Raises:
        URDFError / UserError: not URDF XML (naming the first characters), or an invalid robot.
    """
    from robot_dynamics_ros.errors import URDFError
    from robot_dynamics_ros.model import RobotModel

    from_text = getattr(RobotModel, "from_text", None)
    if from_text is not None:
        return from_text(xml, label="robot_description", held_joints=held_joints, joint_limits=joint_limits)
    if not xml.lstrip().startswith("<"):
        raise URDFError(f"robot_description: not URDF XML (starts with '{excerpt(xml.lstrip())}')")
    return RobotModel.from_urdf(xml, held_joints=held_joints, joint_limits=joint_limits)


#: models kept by :func:`shared_model` (least recently used dropped first)
MODEL_CACHE_SIZE = 4

_SHARED_LOCK = threading.Lock()
_SHARED_MODELS: OrderedDict[tuple, Any] = OrderedDict()
_SHARED_ENGINES: OrderedDict[int, Any] = OrderedDict()


def shared_model(source: str, held_joints: Mapping[str, float] | None = None,
                 joint_limits: str | None = None, *, text: bool | None = None, friction: str | None = None):
    """One :class:`~robot_dynamics_ros.model.RobotModel` per process and (URDF, held joints, limits,
    friction file), for the :data:`MODEL_CACHE_SIZE` most recently used ones.

    Nodes in the same process (``robot-dynamics run``, the demo) share the object; it is never changed
    (run-time gravity or payload changes build a copy with ``model.with_settings``).

    Args:
        source: a URDF file path, or description text.
        text: True for description text (:func:`model_from_text`: never opened as a file), False for a
            path; None: text when it starts with ``<``.
        friction: the friction YAML of ``robot-dynamics identify`` (the ``friction_path`` parameter),
            applied with ``model.with_settings(friction=JointFriction.from_yaml(...))``; None or "": none.

    Raises:
        URDFError / UserError: the URDF or the friction YAML cannot be read (message names the file and
            the problem).
    """
    import hashlib

    from robot_dynamics_ros.model import RobotModel

    is_text = source.lstrip().startswith("<") if text is None else bool(text)
    ident = ("text", hashlib.sha256(source.encode("utf-8", "replace")).hexdigest()) if is_text else ("file", source)
    key = (ident, tuple(sorted((held_joints or {}).items())), joint_limits or "", friction or "")
    with _SHARED_LOCK:
        model = _SHARED_MODELS.get(key)
        if model is not None:
            _SHARED_MODELS.move_to_end(key)
            return model
    # built outside the lock: a slow description must not block another node's load
    if is_text:
        model = model_from_text(source, held_joints=held_joints or None, joint_limits=joint_limits or None)
    else:
        from pathlib import Path as _P

        model = RobotModel.from_urdf(_P(source), held_joints=held_joints or None,
                                     joint_limits=joint_limits or None)
    if friction:
        from robot_dynamics_ros.model import JointFriction

        model = model.with_settings(friction=JointFriction.from_yaml(friction, model.joint_names))
    with _SHARED_LOCK:
        model = _SHARED_MODELS.setdefault(key, model)
        _SHARED_MODELS.move_to_end(key)
        while len(_SHARED_MODELS) > MODEL_CACHE_SIZE:
            _SHARED_MODELS.popitem(last=False)
    return model


def shared_engine(model):
    """One :class:`~robot_dynamics_ros.dynamics.pinocchio_engine.PinocchioDynamics` per model object (for
    the :data:`MODEL_CACHE_SIZE` most recent models).

    Not thread-safe: the engine keeps one Pinocchio ``Data`` and scratch buffers. Two nodes that may run
    concurrently (``MultiThreadedExecutor``) should each build their own engine over the shared model.
    """
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics

    with _SHARED_LOCK:
        eng = _SHARED_ENGINES.get(id(model))
        if eng is None or eng[0] is not model:
            eng = (model, PinocchioDynamics(model))
            _SHARED_ENGINES[id(model)] = eng
        _SHARED_ENGINES.move_to_end(id(model))
        while len(_SHARED_ENGINES) > MODEL_CACHE_SIZE:
            _SHARED_ENGINES.popitem(last=False)
        return eng[1]


class ModelLoader:
    """Gets the robot model for a node from its parameters or from the ``robot_description`` topic.

    Args:
        node: the rclpy node (with :func:`robot_source_params` declared).
        on_model: called with ``(model, label)`` each time a model is (re)loaded — once at start for a
            file/parameter source, after each new message for the topic source — on the executor thread
            (or the constructor's). It may raise to refuse the model (the previous one stays).
        log: a :class:`RateLimitedLog` for load errors from the topic.
        params: the node's parameter values from :func:`declare_parameters` (default: read from the
            node).

    A bad URDF from a file or parameter raises at construction (the node cannot start without a
    robot); a bad description from the topic is logged (one line, an excerpt of the text at most) and
    the previous model stays in use. Descriptions from the topic are parsed and built on a worker thread
    (a large or hostile text never blocks the executor); the newest one wins when several arrive
    meanwhile, and a 20 Hz timer hands the result to ``on_model``.
    """

    def __init__(self, node, on_model: Callable[[Any, str], None], log: RateLimitedLog,
                 params: Mapping[str, Any] | None = None):
        self._node = node
        self._on_model = on_model
        self._log = log
        self.subscription = None
        self.last_error = ""
        self._lock = threading.Lock()
        self._pending_text: bytes | None = None  # the newest serialized description not parsed yet
        self._result = None            # (model or None, error text or None)
        self._worker: threading.Thread | None = None
        self._timer = None
        if params is None:
            params = {s.name: _param_value(node, s.name) for s in robot_source_params()}
        p = {s.name: params.get(s.name, s.default) for s in robot_source_params()}
        conflict = source_conflict(p)
        if conflict:
            node.get_logger().warning(conflict)
        self._joint_limits = p["joint_limits_path"] or None
        self._friction = p["friction_path"] or None
        source, self._held, label = resolve_robot_source(p)
        if source is not None:
            self._hand_over(shared_model(source, self._held, self._joint_limits,
                                         text=label == "parameter robot_description", friction=self._friction),
                            label)
        else:
            from std_msgs.msg import String

            # raw=True: the callback sees the serialized size first, so an oversized message is refused
            # without building a Python string of it on the executor thread
            self.subscription = node.create_subscription(String, label, self._on_description,
                                                         description_qos(), raw=True)
            self._timer = steady_timer(node, 0.05, self._deliver)
            node.get_logger().info(f"waiting for the robot description on {self.subscription.topic_name}")

    def _hand_over(self, model, label: str) -> None:
        """``on_model(model, label)``, after one warning line per thing the lenient loader accepted (a
        massless joint, joint_limits entries for joints the robot lacks): the CLI prints the same lines."""
        for w in model.warnings:
            self._node.get_logger().warning(f"{label}: {w}")
        self._on_model(model, label)

    def _on_description(self, raw: bytes) -> None:
        """A serialized description arrived: refuse it at once when it is larger than any URDF accepted,
        else deserialize and parse it on the worker thread (the newest pending one wins)."""
        from robot_dynamics_ros.description import MAX_URDF_BYTES

        if len(raw) > MAX_URDF_BYTES + 64:
            self.last_error = (f"robot_description rejected: {len(raw)} bytes, more than the {MAX_URDF_BYTES} "
                               "accepted (MAX_URDF_BYTES)")
            self._log.error("robot_description:size", self.last_error + " (keeping the previous model)")
            return
        with self._lock:
            self._pending_text = raw
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="robot_description", daemon=True)
                self._worker.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                raw, self._pending_text = self._pending_text, None
                if raw is None:
                    return
            try:
                from rclpy.serialization import deserialize_message
                from std_msgs.msg import String

                text = deserialize_message(raw, String).data
                result = (shared_model(text, self._held, self._joint_limits, text=True, friction=self._friction),
                          None)
            except Exception as exc:  # noqa: BLE001 - a bad description must not kill the node
                result = (None, " ".join(str(exc).split())[:300])
            with self._lock:
                self._result = result

    def _deliver(self) -> None:
        with self._lock:
            result, self._result = self._result, None
        if result is None:
            return
        model, error = result
        if model is not None:
            try:
                self._hand_over(model, "topic " + self.subscription.topic_name)
                self.last_error = ""
                freeze_gc()  # the new model's objects are long-lived too (see freeze_gc)
                return
            except Exception as exc:  # noqa: BLE001 - e.g. the node's joint list does not fit the new robot
                error = " ".join(str(exc).split())[:300]
        self.last_error = f"robot_description rejected: {error}"
        self._log.error(reason_key("robot_description", error), self.last_error + " (keeping the previous model)")

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until no description is being parsed (tests); True when idle."""
        w = self._worker
        if w is not None:
            w.join(timeout)
        return w is None or not w.is_alive()

    def destroy(self) -> None:
        """Destroy the subscription and the delivery timer (lifecycle cleanup)."""
        for entity, destroy in ((self.subscription, self._node.destroy_subscription),
                                (self._timer, self._node.destroy_timer)):
            if entity is not None:
                try:
                    destroy(entity)
                except Exception:  # noqa: BLE001 - node already gone
                    pass
        self.subscription = self._timer = None


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
#: keep-last depth of the control nodes' joint_states subscription (see :func:`state_subscription_qos`)
STATE_QOS_DEPTH = 10


def state_subscription_qos():
    """Default QoS of a control node's joint_states subscription: best effort, keep last
    :data:`STATE_QOS_DEPTH`, volatile.

    Best effort matches both reliable and best-effort publishers (a reliable reader would not match a
    best-effort driver). The depth is not a backlog to work through: the callback takes the newest
    message and skips what queued behind it (:func:`take_newest`); the depth only bounds how many skipped
    messages are counted. Override with ``qos_overrides.<topic>.subscription.{reliability,depth,history}``
    (:func:`qos_overrides`).
    """
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=STATE_QOS_DEPTH, history=HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.BEST_EFFORT)


#: keep-last depth of every service's request and response queues. rclpy's default (10) is one queue shared by
#: all clients of a service: a burst from many clients pushes requests out before the executor takes them, and
#: their clients wait forever (20 client processes x 50 calls at once to ~/enable: 29 of 1000 answered with
#: depth 10, 1000 of 1000 with 1000)
SERVICE_QOS_DEPTH = 1000


def service_qos():
    """The QoS of every service of the package's nodes: reliable, keep-last :data:`SERVICE_QOS_DEPTH`."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=SERVICE_QOS_DEPTH, reliability=ReliabilityPolicy.RELIABLE)


def qos_overrides():
    """rclpy's standard QoS override parameters (``qos_overrides.<topic>.<publisher|subscription>.<policy>``,
    read-only, set in a params file or with ``-p``) for depth, history, reliability and durability."""
    from rclpy.qos_overriding_options import QoSOverridingOptions

    return QoSOverridingOptions.with_default_policies()


def take_newest(subscription, raw, msg_type) -> tuple[Any, int]:
    """Latest state wins: ``(newest, skipped)`` — the newest serialized message of a ``raw=True``
    ``subscription`` queue, starting from the ``raw`` the callback got, and how many older ones were taken
    and dropped. An empty queue costs one failed take (≈ 0.7 µs); the executor finds the taken messages
    gone and calls no callback for them."""
    handle = subscription.handle
    skipped = 0
    while True:
        nxt = handle.take_message(msg_type, True)
        if nxt is None:
            return raw, skipped
        raw = nxt[0]
        skipped += 1


def joint_state_qos(depth: int = 10, reliable: bool = True):
    """QoS of a joint_states publisher (or a subscription that wants every message): keep-last ``depth``,
    reliable (default) or best effort."""
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


def make_executor(kind: str = "events", context=None, num_threads: int | None = None):
    """Return an rclpy executor: ``events`` (``rclpy.experimental.EventsExecutor``, the fastest measured
    here, see NOTES.md), ``single`` (SingleThreadedExecutor) or ``multi`` (MultiThreadedExecutor of
    ``num_threads`` threads, rclpy's default when None).

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

        return MultiThreadedExecutor(num_threads=num_threads, context=context)
    raise ValueError(f"executor '{kind}': must be one of {list(EXECUTORS)}")


def close_ros(executor, nodes, context) -> None:
    """Shut ``executor`` down, destroy ``nodes`` (None entries skipped; a node already destroyed or whose
    context is gone is passed over), then shut ``context`` down: the end of a process-local rclpy session,
    in the order that leaves no entity of a destroyed node in a running executor.
    """
    import rclpy

    if executor is not None:
        executor.shutdown()
    for n in nodes:
        if n is None:
            continue
        try:
            n.destroy_node()
        except Exception:  # noqa: BLE001 - a node destroyed twice or after its context
            pass
    rclpy.try_shutdown(context=context)


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
             executor_kind: Callable[[Any], str] = lambda node: "events",
             executor_threads: Callable[[Any], int | None] = lambda node: None) -> int:
    """The body of a node's console entry point (``ros2 run robot_dynamics_ros <name>``).

    Initialises rclpy with ``args``, builds the node with ``make_node()``, spins it on
    ``make_executor(executor_kind(node), num_threads=executor_threads(node))`` with :func:`spin_until_shutdown` until SIGINT / SIGTERM, then
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
        executor = make_executor(executor_kind(node), num_threads=executor_threads(node))
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


# --------------------------------------------------------------------------- timers, ROS graph
def steady_timer(node, period: float, callback: Callable[[], None]):
    """A timer on the steady (monotonic) clock: it keeps firing when ``use_sim_time`` is true and /clock
    stops or never starts, so staleness by arrival time still produces the safe command and diagnostics
    keep being published (a timer on the node clock waits for sim time to advance)."""
    from rclpy.clock import Clock, ClockType

    return node.create_timer(period, callback, clock=Clock(clock_type=ClockType.STEADY_TIME))


#: seconds between two ROS-graph checks of a node (publisher counts; off the message path)
GRAPH_CHECK_PERIOD = 1.0


def endpoint_node(info) -> str:
    """The fully qualified name of the node of a graph endpoint (``rclpy.topic_endpoint_info``)."""
    return f"{info.node_namespace.rstrip('/')}/{info.node_name}"


def other_publishers(node, topic: str) -> tuple[list[str], int]:
    """``(names, total)``: the fully qualified node names of the publishers on ``topic`` other than
    ``node``'s own one, and the total publisher count. One endpoint named like ``node`` is the node
    itself (it has one publisher per topic); a further one is another node of the same name."""
    infos = node.get_publishers_info_by_topic(topic)
    me = f"{node.get_namespace().rstrip('/')}/{node.get_name()}"
    names = [endpoint_node(i) for i in infos]
    if me in names:
        names.remove(me)
    return names, len(infos)


class ExclusivePublisher:
    """Guards a publisher that must be the only one on its topic (the simulator's joint states next to a
    real driver would interleave two robots' states): :meth:`check` queries the ROS graph, :attr:`blocked`
    says whether publishing is withheld. A conflict logs one ERROR naming the other publishers' nodes
    and raises an ERROR diagnostic condition; when they are gone, an INFO line and the condition clears.

    Args:
        node: the rclpy node; publisher: the guarded publisher; diag: the node's :class:`Diagnostics`.
    """

    def __init__(self, node, publisher, diag: Diagnostics):
        self._node, self._pub, self._diag = node, publisher, diag
        self.checked = False
        self.others: list[str] = []

    def check(self) -> bool:
        """Query the graph now; True when publishing is allowed."""
        topic = self._pub.topic_name
        others, _ = other_publishers(self._node, topic)
        self.checked = True
        if others and others != self.others:
            text = (f"not publishing on {topic}: another publisher exists there ({', '.join(others[:5])}); "
                    "a real driver and this simulator would interleave two robots' states")
            self._node.get_logger().error(text)
            self._diag.condition("exclusive", Diagnostics.ERROR, text)
        elif not others and self.blocked:
            self._node.get_logger().info(f"{topic}: no other publisher any more, publishing")
            self._diag.condition("exclusive", None)
        self.others = others
        return not self.blocked

    @property
    def blocked(self) -> bool:
        """Publishing is withheld: another publisher was on the topic at the last check."""
        return bool(self.others)

    def allowed(self) -> bool:
        """For the publishing path: the first call checks the graph, later ones return the last verdict."""
        return self.check() if not self.checked else not self.blocked


# --------------------------------------------------------------------------- logging, statistics
class RateLimitedLog:
    """Log at most one line per ``key`` every ``period`` s; the next line says how many were suppressed.

    Args:
        logger: an rclpy logger (``node.get_logger()``) or anything with ``warning``/``error``/``info``.
        period: seconds between two lines of the same key.
    """

    #: keys remembered at most (the oldest is forgotten first): keys derived from input stay bounded
    MAX_KEYS = 256

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
        self._last.pop(key, None)
        self._last[key] = now
        if len(self._last) > self.MAX_KEYS:
            oldest = next(iter(self._last))
            del self._last[oldest]
            self._suppressed.pop(oldest, None)
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

    def due(self, key: str) -> bool:
        """Whether a line of ``key`` would be logged now (nothing is counted): for a condition checked on
        every tick, so that its line, once per ``period``, carries no count of the ticks in between."""
        last = self._last.get(key)
        return last is None or self._clock() - last >= self._period

    def info(self, key: str, text: str) -> bool:
        return self._emit("info", key, text)

    def warning(self, key: str, text: str) -> bool:
        return self._emit("warning", key, text)

    def error(self, key: str, text: str) -> bool:
        return self._emit("error", key, text)


#: the parts of a reason that vary between occurrences of one reason: quoted text and numbers
_VARYING = re.compile(r"'[^']*'|\"[^\"]*\"|[-+]?\d[\d.eE+-]*")


def reason_key(prefix: str, text: str, n: int = 60) -> str:
    """A rate-limited log key for a free-text reason: ``prefix`` and the text without its quoted parts and
    numbers (which vary between occurrences of one reason), cut to ``n`` characters; distinct reasons
    (a DOCTYPE refusal, a missing joint) get distinct keys."""
    shape = _VARYING.sub("", text)
    return f"{prefix}:{' '.join(shape.split())[:n]}"


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
        name: the status name, ``"<fully qualified node name>: <hardware_id>"`` (diagnostic_updater's
            ``"<node name>: <task>"`` shape, with the namespace, so that ``/r1/gravity_compensation`` and
            ``/r2/gravity_compensation`` stay two entries in diagnostic_aggregator / rqt_robot_monitor).
        period: report period, s.
        timer: publish from a timer of its own; False for a node whose safety timer calls
            :meth:`publish_due` after it evaluated the state, so that a report never carries a level older
            than that evaluation (after a stall both timers are overdue, and a report sent first would say OK
            for an input that went stale meanwhile).
    """

    OK, WARN, ERROR, STALE = 0, 1, 2, 3

    def __init__(self, node, hardware_id: str = "robot_dynamics_ros", period: float = 1.0, timer: bool = True):
        from diagnostic_msgs.msg import DiagnosticArray

        self._node = node
        self.name = f"{node.get_fully_qualified_name()}: {hardware_id}"
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
        #: standing conditions (key -> (level, text)) raised above :attr:`level` until cleared; per-message
        #: reports set the level, these persist across them (see :meth:`condition`)
        self.conditions: dict[str, tuple[int, str]] = {}
        self.period = float(period)
        self._next_at = time.monotonic() + self.period
        self._timer = steady_timer(node, period, self.publish) if timer else None

    def publish_due(self) -> None:
        """Publish when the period has elapsed since the last report was due (never more often than
        called: a safety timer at ``state_timeout / 2`` bounds the rate from above)."""
        now = time.monotonic()
        if now < self._next_at:
            return
        self._next_at += self.period
        if self._next_at <= now:   # after a stall: the next report one period from now, no burst
            self._next_at = now + self.period
        self.publish()

    def count(self, key: str, n: int = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value

    def set_level(self, level: int, message: str) -> None:
        self.level, self.message = level, message

    def condition(self, key: str, level: int | None, text: str = "") -> None:
        """Raise (``level``) or clear (None) a standing condition: the published status takes the highest
        level of :attr:`level` and the conditions, and its message appends each condition's text."""
        if level is None:
            self.conditions.pop(key, None)
        else:
            self.conditions[key] = (level, text)

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
        level, message = self.level, self.message
        for lvl, text in self.conditions.values():
            level, message = max(level, lvl), f"{message}; {text}"
        return DiagnosticStatus(level=bytes([level]), name=self.name, message=message,
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
        if self._timer is not None:
            self._node.destroy_timer(self._timer)


# --------------------------------------------------------------------------- control node shells
def payload_params(what: str, *, service: bool = True) -> list[ParamSpec]:
    """The four ``payload.*`` parameters (link, mass kg, CoM m in the link frame, inertia kg·m² about the CoM
    in link axes), run-time settable (``service``: also by ``~/set_payload``); ``what`` names the payload
    in the descriptions."""
    also = "; also ~/set_payload" if service else ""
    return [
        ParamSpec("payload.link", "", f"Link carrying {what} ('' = no payload){also}."),
        ParamSpec("payload.mass", 0.0, f"Mass of {what}, kg.", range=(0.0, 1000.0)),
        ParamSpec("payload.com", [0.0, 0.0, 0.0], f"Centre of mass of {what} in the link frame, m.", length=3,
                  range=(-10.0, 10.0)),
        ParamSpec("payload.inertia", [0.0, 0.0, 0.0, 0.0, 0.0, 0.0], f"Inertia of {what} about its centre "
                  "of mass, link axes: ixx ixy ixz iyy iyz izz, kg·m².", length=6, range=(-1000.0, 1000.0)),
    ]


#: parameters both control nodes (gravity compensation, computed torque) declare
CONTROL_PARAMS = [
    ParamSpec("autostart", True, "Configure and activate at start-up (no lifecycle manager needed); false: "
              "wait in 'unconfigured' for the lifecycle services (~/change_state).", read_only=True),
    ParamSpec("joints", [], "Command joint order of the published Float64MultiArray (the effort "
              "controller's 'joints'). Empty: all actuated joints in URDF order.", kind="string_array",
              read_only=True),
    ParamSpec("controller_name", "effort_controller", "Commands go to <controller_name>/commands (relative: "
              "in the node's namespace).", read_only=True),
    ParamSpec("joint_states_topic", "joint_states", "sensor_msgs/JointState input topic (relative: in the "
              "node's namespace; remapping 'joint_states' works as well).", read_only=True),
    ParamSpec("clamp_to_effort_limits", True, "Clamp each torque to ± the URDF effort limit (counted in "
              "diagnostics as clamp_count)."),
    ParamSpec("latest_state_wins", True, "Act on the newest queued joint state and skip (count) the older "
              "ones; false: answer every state in order (offline comparisons such as replay).", read_only=True),
    ParamSpec("state_timeout", 0.1, "A joint state older than this (s; by header stamp against the node "
              "clock and by arrival time) is stale: the safe command is published instead.",
              range=(1e-4, 3600.0)),
    ParamSpec("position_margin", 0.1, "A measured revolute position beyond its URDF limits by more than "
              "this (rad) rejects the message as implausible (continuous joints are not gated).",
              range=(0.0, 100.0)),
    ParamSpec("prismatic_margin", 0.01, "The same margin for prismatic joints, m.", range=(0.0, 100.0)),
    ParamSpec("velocity_factor", 10.0, "A measured |qd| above this multiple of the URDF velocity limit "
              "rejects the message as implausible.", range=(1.0, 1e6)),
    *payload_params("the payload the model adds"),
    ParamSpec("log_period", 1.0, "Minimum seconds between two log lines of the same kind.", range=(0.0, 3600.0)),
    ParamSpec("diagnostics_period", 1.0, "Seconds between two /diagnostics messages, sent by the safety timer "
              "after it checked the input (so at most every state_timeout/2).", range=(0.01, 3600.0),
              read_only=True),
]

#: parameters whose change builds a new model (``model.with_settings``) and swaps it in
MODEL_PARAMS = ("gravity", "payload.link", "payload.mass", "payload.com", "payload.inertia")


def core_settings_kwargs(p: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`~robot_dynamics_ros.control.core.CoreSettings` fields from :data:`CONTROL_PARAMS` values."""
    return {"state_timeout": float(p["state_timeout"]), "clamp_to_effort_limits": bool(p["clamp_to_effort_limits"]),
            "position_margin": float(p["position_margin"]), "prismatic_margin": float(p["prismatic_margin"]),
            "velocity_factor": float(p["velocity_factor"])}


def model_with_params(model, p: Mapping[str, Any]):
    """``model.with_settings`` with the node's ``gravity`` (if it has one) and ``payload.*`` values: a new
    model object, or ``model`` itself when these equal its own (``model`` is never changed).

    Raises:
        UserError: unknown payload link, non-physical inertia, bad gravity.
    """
    payload = None
    if p.get("payload.link"):
        payload = (p["payload.link"], float(p["payload.mass"]), list(p["payload.com"]), list(p["payload.inertia"]))
    gravity = p.get("gravity")
    if payload is None and model.payload is None and (
            gravity is None or np.array_equal(np.asarray(gravity, dtype=float), model.gravity)):
        return model
    return model.with_settings(gravity=list(gravity) if gravity is not None else None, payload=payload)


def tick_period(p: Mapping[str, Any]) -> float:
    """Period of a control node's safety timer, s: half the state timeout (10 ms to 0.5 s)."""
    return min(max(float(p["state_timeout"]) / 2, 0.01), 0.5)


def autostart(node) -> None:
    """Configure and activate a lifecycle ``node`` when its ``autostart`` parameter is true.

    Raises:
        the configure error (UserError, URDFError, ValueError): the node cannot start.
    """
    from rclpy.lifecycle import TransitionCallbackReturn

    if not node.p.get("autostart", True):
        return
    if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
        raise node.shell.config_error or RuntimeError(f"{node.get_name()}: configure failed")
    node.trigger_activate()


#: relative payload-mass change above which ``~/set_payload`` warns that retimed trajectories need a replan
#: (the case study's ±10 %)
PAYLOAD_REPLAN_FRACTION = 0.10


def payload_change_warning(old_link: str, old_mass: float, new_link: str, new_mass: float,
                           fraction: float = PAYLOAD_REPLAN_FRACTION) -> str | None:
    """The one-line warning when a payload change moves the mass by more than ``fraction`` of the old
    mass (kg; no payload counts as 0 kg, so adding or removing any payload warns), else None.

    Trajectories retimed at the torque limits with the old payload may then exceed them: replan.
    """
    m0 = float(old_mass) if old_link else 0.0
    m1 = float(new_mass) if new_link else 0.0
    if abs(m1 - m0) <= fraction * m0:
        return None
    rel = f"{(m1 - m0) / m0:+.0%}" if m0 > 0 else "from none"
    return (f"payload mass changed {m0:g} kg ('{old_link}') -> {m1:g} kg ('{new_link}'), {rel}: more than "
            f"±{fraction:.0%}, replan trajectories retimed with the old payload")


def payload_request_fields(path) -> dict[str, Any]:
    """The ``SetPayload`` request fields from the JSON of ``robot-dynamics identify --payload LINK``:
    ``{"link": str, "mass": kg, "com": [x, y, z] m (link frame), "inertia": [ixx, ixy, ixz, iyy, iyz, izz]
    kg·m² about the COM, link axes}`` (the JSON's 3×3 ``inertia`` is taken row-wise from its upper
    triangle; 6 values are taken as they are).

    Raises:
        UserError: unreadable file, missing field, or values of the wrong count or not finite (naming the
            file and the field).
    """
    import json
    import math as _math

    from robot_dynamics_ros.errors import UserError

    try:
        doc = json.loads(open(path, encoding="utf-8").read())
    except (OSError, ValueError) as exc:
        raise UserError(f"payload JSON '{path}': cannot read: {exc}") from None
    if isinstance(doc, dict) and isinstance(doc.get("payload"), dict):  # the <out>.report.json layout
        doc = doc["payload"]
    try:
        link, mass = str(doc["link"]), float(doc["mass"])
        com = [float(x) for x in doc["com"]]
        inertia = np.asarray(doc.get("inertia", [0.0] * 6), dtype=float)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"payload JSON '{path}': expected link, mass, com, inertia ({exc})") from None
    if inertia.shape == (3, 3):
        inertia = inertia[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]]
    if len(com) != 3 or inertia.shape != (6,):
        raise UserError(f"payload JSON '{path}': com needs 3 values and inertia 3x3 or 6, got {len(com)} and "
                        f"{list(inertia.shape)}")
    if not all(_math.isfinite(v) for v in [mass, *com, *inertia.tolist()]):
        raise UserError(f"payload JSON '{path}': mass, com and inertia must be finite")
    return {"link": link, "mass": mass, "com": com, "inertia": inertia.tolist()}


def create_payload_service(node):
    """``~/set_payload`` (robot_dynamics_interfaces/srv/SetPayload): sets the ``payload.*`` parameters in one
    atomic change (the node builds the new model and swaps it in; a refused request changes nothing).

    A change of the payload mass by more than :data:`PAYLOAD_REPLAN_FRACTION` of the previous one
    (:func:`payload_change_warning`), through this service or through ``set_parameters`` (a post-set
    callback sees both), is logged as a warning and kept in the node's diagnostics as ``payload_change``
    (with the count ``payload_replan_warnings``); the service also appends it to its response message."""
    from rclpy.parameter import Parameter
    from robot_dynamics_interfaces.srv import SetPayload

    # the warning follows every accepted payload change, from this service or from set_parameters
    seen = {"link": str(node.p.get("payload.link", "")), "mass": float(node.p.get("payload.mass", 0.0)),
            "warning": None}

    def after_set(params) -> None:
        if not any(p.name in ("payload.link", "payload.mass") for p in params):
            return
        link, mass = str(node.p.get("payload.link", "")), float(node.p.get("payload.mass", 0.0))
        warning = payload_change_warning(seen["link"], seen["mass"], link, mass)
        seen.update(link=link, mass=mass, warning=warning)
        if warning:
            node.get_logger().warning(f"payload: {warning}")
            diag = getattr(node, "diag", None)
            if diag is not None:
                diag.set("payload_change", f"WARN: {warning}")
                diag.count("payload_replan_warnings")

    node.add_post_set_parameters_callback(after_set)

    def on_request(request, response):
        seen["warning"] = None
        params = [Parameter("payload.link", value=str(request.link)),
                  Parameter("payload.mass", value=float(request.mass)),
                  Parameter("payload.com", value=[float(x) for x in request.com]),
                  Parameter("payload.inertia", value=[float(x) for x in request.inertia])]
        result = node.set_parameters_atomically(params)
        response.success = bool(result.successful)
        response.message = (f"payload {request.mass:g} kg on '{request.link}'" if request.link else
                            "payload removed") if result.successful else f"refused: {result.reason}"
        node.get_logger().info(f"set_payload: {response.message}")
        if result.successful and seen["warning"]:
            response.message += f"; WARNING: {seen['warning']}"
        return response

    return node.create_service(SetPayload, "~/set_payload", on_request, qos_profile=service_qos())


def create_collision_reaction(node):
    """The computed-torque node's collision reaction: ``collision_topic`` (``std_msgs/Bool``, reliable +
    transient local, as ``external_torque_observer`` publishes ``~/collision``; empty: no reaction) latches
    the core's gravity-only command on ``True``; ``~/reset_collision`` (``std_srvs/Trigger``) resumes, and is
    refused while the last flag heard is still ``True`` (the observer publishes only on change, so resuming
    then would ignore an ongoing contact)."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Bool
    from std_srvs.srv import Trigger

    state = {"flag": False}

    def on_flag(msg) -> None:
        state["flag"] = bool(msg.data)
        if msg.data and node.core is not None and not node.core.collision:
            node.core.set_collision()
            node.get_logger().error("collision reported: commanding gravity only until ~/reset_collision")

    def on_reset(request, response):
        if state["flag"]:
            response.success, response.message = False, "refused: the observer still reports a collision"
        elif node.core is None:
            response.success, response.message = False, "no robot model yet"
        else:
            node.core.reset_collision()
            response.success, response.message = True, "resumed: holding the measured position"
        node.get_logger().info(f"reset_collision: {response.message}")
        return response

    topic = str(node.p.get("collision_topic") or "")
    if topic:
        node.create_subscription(Bool, topic, on_flag, QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    return node.create_service(Trigger, "~/reset_collision", on_reset, qos_profile=service_qos())


class ControlShell:
    """The parts of a control node's shell both control nodes share: topics, lifecycle configure/cleanup,
    the safe command, rejection logging, diagnostics. The node keeps ``core``, ``pub``, ``sub``, ``loader``
    and ``_writer`` (a :class:`~robot_dynamics_ros.control.cdr.Float64MultiArrayWriter`) attributes; this
    class sets ``pub``/``sub``/``loader``.
    """

    def __init__(self, node, diag: Diagnostics, log: RateLimitedLog):
        from sensor_msgs.msg import JointState

        self.node = node
        self.diag = diag
        self.log = log
        self._state_type = JointState
        self._latest_wins = bool(node.p.get("latest_state_wins", True))
        self._clock = node.get_clock()
        #: the node's use_sim_time (the node updates it): without sim time, ROS time is the system time and
        #: time.time_ns() saves ~3 µs per message over the clock's now()
        self.sim_time = bool(node.get_parameter("use_sim_time").value)
        self.config_error: Exception | None = None
        self.last_error = ""
        self.incompatible_qos = 0
        self._configured_at = None
        self._last_accepted = -1
        self._jumps = 0
        self._last_state_at = None
        self._graph_at = -GRAPH_CHECK_PERIOD

    # ------------------------------------------------------------------ lifecycle
    def configure(self, make_loader: Callable[[], Any]):
        """Create ``<controller_name>/commands`` (reliable), ``joint_states`` (:func:`state_subscription_qos`,
        both with :func:`qos_overrides`) and the model loader; FAILURE (error kept in :attr:`config_error`)
        when the model cannot be loaded."""
        from rclpy.lifecycle import TransitionCallbackReturn
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        node = self.node
        self.config_error = None
        try:
            topic = f"{str(node.p['controller_name']).rstrip('/')}/commands"
            node.pub = node.create_publisher(Float64MultiArray, topic, command_qos(),
                                             qos_overriding_options=qos_overrides())
            # raw=True: the callback gets the serialized JointState and reads the fields it needs itself
            # (control/cdr.py); the command goes out as bytes: no Python message objects per message
            node.sub = node.create_subscription(JointState, node.p["joint_states_topic"], node._on_joint_state_raw,
                                                state_subscription_qos(), raw=True,
                                                qos_overriding_options=qos_overrides())
            node.command_topic = node.pub.topic_name
            self.diag.set("command_topic", node.pub.topic_name)
            self.diag.set("joint_states_topic", node.sub.topic_name)
            self.diag.set_level(Diagnostics.WARN, "waiting for the robot model")
            node.loader = make_loader()
        except Exception as exc:  # noqa: BLE001 - reported as a failed transition
            self.config_error = exc
            node.get_logger().error(f"configure failed: {exc}")
            self.cleanup()
            return TransitionCallbackReturn.FAILURE
        self._configured_at = time.monotonic()
        return TransitionCallbackReturn.SUCCESS

    def cleanup(self) -> None:
        """Destroy topics and loader, forget the model (back to 'unconfigured')."""
        node = self.node
        if node.loader is not None:
            node.loader.destroy()
        for attr, destroy in (("sub", node.destroy_subscription), ("pub", node.destroy_publisher)):
            entity = getattr(node, attr, None)
            if entity is not None:
                try:
                    destroy(entity)
                except Exception:  # noqa: BLE001 - node already gone
                    pass
        node.pub = node.sub = node.loader = None
        node.core = None
        self._configured_at = None
        self.diag.set_level(Diagnostics.WARN, "unconfigured")

    def publish_safe(self, why: str) -> None:
        """Publish the core's safe command once (deactivate)."""
        node, core = self.node, self.node.core
        if core is None or node.pub is None or node._writer is None:
            return
        res = core.safe_command(why)
        if res.command is not None:
            node.pub.publish(node._writer.write(res.command))
        self.diag.set_level(Diagnostics.WARN, f"inactive ({res.reason})")
        node.get_logger().info(f"{why}: {res.reason}")

    # ------------------------------------------------------------------ parameters
    def set_parameters(self, params, settings_of: Callable[[dict], Any]):
        """The node's ``on_set_parameters`` policy: validate against ``node._specs``; build the new model
        (``model_with_params`` on ``node.base_model``) when a :data:`MODEL_PARAMS` entry changes and the
        core's settings from ``settings_of(new_values)``, swap both into the core; only then adopt the
        values (``node.p``) and ``use_sim_time``. Any error refuses the whole change, the core unchanged.

        Returns:
            ``rcl_interfaces.msg.SetParametersResult``.
        """
        from rcl_interfaces.msg import SetParametersResult

        node = self.node
        ok, reason = validate_parameters(node._specs, params, node.p)
        if not ok:
            return SetParametersResult(successful=False, reason=reason)
        new = merged_parameters(node._specs, node.p, params)
        core = node.core
        try:
            settings = settings_of(new)
            if core is not None:
                if any(prm.name in MODEL_PARAMS for prm in params):
                    model = model_with_params(node.base_model, new)
                    core.set_model(model)
                    node.model = model
                core.set_settings(settings)
        except Exception as exc:  # noqa: BLE001 - refused; the core keeps its model and settings
            return SetParametersResult(successful=False, reason=str(exc))
        node.p = new
        for prm in params:
            if prm.name == "use_sim_time":
                self.sim_time = bool(prm.value)
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------ per message
    def receive(self, raw: bytes):
        """The joint_states hot path up to the core: take the newest queued state (counting the skipped),
        read its fields (``node._reader``, rclpy's deserializer as the fallback), hand them to the core.

        Returns:
            ``(fields, arrival_ns, now_ns)`` for an accepted state (counted as ``received``); None when it
            was rejected (counted, logged) or the node has no core or is not active.
        """
        node = self.node
        core = node.core
        if core is None or not node._active:
            return None
        if self._latest_wins:
            raw, skipped = take_newest(node.sub, raw, self._state_type)
            if skipped:
                self.diag.count("skipped", skipped)
        fields = node._reader.read(raw)
        if fields is None:   # an encoding the CDR reader does not read, or a broken message
            fields = self.read(node._reader, raw)
            if fields is None:
                return None
        arrival = time.monotonic_ns()
        now_ns = self._clock.now().nanoseconds if self.sim_time else time.time_ns()
        rej = core.on_joint_state(fields, arrival, now_ns)
        if rej is not None:
            self.rejected(rej)
            return None
        self.diag.count("received")
        return fields, arrival, now_ns

    def handle(self, raw: bytes, act: Callable[[Any, Any, int], None]) -> None:
        """A node's whole joint_states callback: :meth:`receive`, ``core.step``, ``act(result, fields, now_ns)``
        (what the node publishes), :meth:`report` of a result that is not plain OK, and the callback's
        latency in the diagnostics."""
        t0 = time.perf_counter()
        got = self.receive(raw)
        if got is None:
            return
        fields, arrival, now_ns = got
        res = self.node.core.step(now_ns, arrival)
        act(res, fields, now_ns)
        diag = self.diag
        if res.level != Diagnostics.OK or diag.level != Diagnostics.OK:
            self.report(res)
        diag.latency.add(time.perf_counter() - t0)

    def read(self, reader, raw: bytes):
        """The JointState fields of ``raw``, or None (counted, logged) when it cannot be deserialized."""
        try:
            return joint_state_fields(reader, raw)
        except Exception as exc:  # noqa: BLE001 - a node never dies on one message
            self.diag.count("rejected")
            self.last_error = f"joint_states: cannot deserialize {len(raw)} bytes: {exc}"
            self.log.warning("deserialize", self.last_error)
            return None

    def rejected(self, rej) -> None:
        self.diag.count("rejected")
        self.last_error = f"joint_states rejected: {rej}"
        if self.waiting_for_clock():
            self.last_error += "; no /clock received while use_sim_time is true"
        self.log.warning(rej.key or rej.code.name, self.last_error)

    def report(self, res) -> None:
        """Diagnostic level and (rate-limited) log line of a step result that is not plain OK."""
        self.diag.set_level(res.level, res.reason)
        if res.level == Diagnostics.OK:
            return
        self.last_error = res.reason
        if res.reason == WAITING_FOR_STATES:
            return      # the no-joint-state condition: one line per log_period from tick(), naming the cause
        key = reason_key("step", res.reason)
        if res.level >= Diagnostics.ERROR:
            self.log.error(key, res.reason)
        else:
            self.log.warning(key, res.reason)

    # ------------------------------------------------------------------ timer
    def tick(self, active: bool, writer: Callable[[], Any], *, publish_safe: bool = True) -> None:
        """Safety and diagnostics timer: the safe command when the state went stale without a new message
        (``publish_safe``), a WARN when no joint state arrives (with the publishers' QoS compatibility),
        the core's counters as diagnostic values."""
        node, core, diag = self.node, self.node.core, self.diag
        if core is None or not active:
            return
        if time.monotonic() - self._graph_at >= GRAPH_CHECK_PERIOD:
            self._graph_at = time.monotonic()
            self.check_graph()
        mapper = core.mapper
        now_ns = node.get_clock().now().nanoseconds
        res = core.step(now_ns, time.monotonic_ns()) if mapper.ready else None
        if res is not None and res.safe:
            w = writer()
            if publish_safe and res.command is not None and w is not None and node.pub is not None:
                node.pub.publish(w.write(res.command))
                diag.count("safe")
            self.report(res)
        if mapper.clock_jumps != self._jumps:
            self._jumps = mapper.clock_jumps
            node.get_logger().warning(f"node clock jumped back ({mapper.clock_jumps} so far): joint-state stamp "
                                      "ordering restarted")
        if mapper.accepted != self._last_accepted:
            self._last_accepted, self._last_state_at = mapper.accepted, time.monotonic()
        since = self._last_state_at or self._configured_at
        if since is not None and time.monotonic() - since > max(float(node.p["state_timeout"]), 1.0) \
                and not core.fault:
            text = self.no_state_text()
            if self.log.due("no_state"):
                self.log.warning("no_state", text)
            if res is not None and res.safe:   # keep the safe command's reason (and level) first
                diag.set_level(max(res.level, Diagnostics.WARN), f"{res.reason}; {text}")
            else:
                diag.set_level(Diagnostics.WARN, text)
        elif mapper.accepted == 0 and not core.fault and self.log.due("no_state"):
            self.log.warning("no_state", f"{WAITING_FOR_STATES}: {self.no_state_text()}")
        diag.set("state_age_s", round(mapper.age(now_ns, time.monotonic_ns()), 6) if mapper.ready else "never")
        diag.set("clamp_count", core.clamped)
        diag.set("rejected_by_joint", dict(mapper.rejected_joints))
        diag.set("unknown_names", mapper.unknown_name_count)
        diag.set("clock_jumps", mapper.clock_jumps)
        diag.set("last_error", self.last_error)
        if res is not None and res.level == Diagnostics.OK and diag.level != Diagnostics.OK:
            diag.set_level(res.level, res.reason)

    def check_graph(self) -> None:
        """Publishers of the command topic besides this node: a WARN condition and a rate-limited warning
        naming them (two controllers' commands interleave, and disabling one changes nothing). The
        joint_states publishers are only a diagnostic value: several partial publishers are legitimate."""
        node = self.node
        if node.pub is None or node.sub is None:
            return
        topic = node.pub.topic_name
        others, total = other_publishers(node, topic)
        self.diag.set("command_publishers", f"{total}: {', '.join(others[:5])}" if others else f"{total}")
        if others:
            text = (f"{total} publishers on {topic}: also {', '.join(others[:5])}; their commands interleave "
                    "(disabling this node does not silence them)")
            self.diag.condition("command_publishers", Diagnostics.WARN, text)
            self.log.warning("command_publishers", text)
        else:
            self.diag.condition("command_publishers", None)
        states, total = other_publishers(node, node.sub.topic_name)
        self.diag.set("joint_states_publishers", f"{total}: {', '.join(states[:5])}")

    def waiting_for_clock(self) -> bool:
        """``use_sim_time`` and no /clock yet (sim time reads 0 until the first one arrives)."""
        return self.sim_time and self._clock.now().nanoseconds == 0

    def no_state_text(self) -> str:
        """Why no joint state drives the command: no publisher, or publishers whose QoS does not match."""
        from rclpy.qos import QoSCompatibility, qos_check_compatible

        sub = self.node.sub
        topic = sub.topic_name
        infos = self.node.get_publishers_info_by_topic(topic)
        if self.waiting_for_clock():
            return f"no /clock received while use_sim_time is true ({len(infos)} publisher(s) on {topic})"
        if not infos:
            return f"no joint_states received: no publisher on {topic}"
        bad = []
        for info in infos:
            compat, why = qos_check_compatible(info.qos_profile, sub.qos_profile)
            if compat == QoSCompatibility.ERROR:
                bad.append(f"{endpoint_node(info)}: {why}")
        if bad:
            self.incompatible_qos = len(bad)
            self.diag.set("incompatible_qos", "; ".join(bad)[:300])
            return (f"no joint_states received on {topic}: incompatible QoS with {len(bad)} of {len(infos)} "
                    f"publisher(s) (qos_overrides.{topic}.subscription.*): {bad[0][:160]}")
        mapper = self.node.core.mapper if self.node.core is not None else None
        if mapper is not None and sum(mapper.rejected.values()):
            return (f"no joint state accepted on {topic} from {len(infos)} publisher(s): "
                    f"{self.last_error[:160]}")
        return f"no joint_states received on {topic} from {len(infos)} publisher(s)"
