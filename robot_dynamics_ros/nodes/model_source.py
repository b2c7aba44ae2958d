"""Where a node's robot model comes from: a file, a description string, or the ``robot_description`` topic.

* :func:`model_from_text` — description text (never a path) to a model.
* :func:`shared_model` / :func:`shared_engine` — one model (and one Pinocchio engine) per process and
  source, for the :data:`MODEL_CACHE_SIZE` most recently used ones.
* :class:`ModelLoader` — the model from the :func:`~robot_dynamics_ros.nodes.parameters.robot_source_params`
  values (``urdf_path`` > ``robot_description`` parameter > the ``robot_description`` topic, parsed on a
  worker thread; a new description swaps the model at run time), with ``friction_path`` applied.
* :func:`model_with_params` — the model with the node's ``gravity`` and ``payload.*`` values.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from rclpy.serialization import deserialize_message
from std_msgs.msg import String

from robot_dynamics_ros.urdf_reader import MAX_URDF_BYTES, quote_name
from robot_dynamics_ros.errors import URDFError, UserError
from robot_dynamics_ros.friction import JointFriction
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.nodes.diagnostics import RateLimitedLog, reason_key
from robot_dynamics_ros.nodes.parameters import param_value, resolve_robot_source, robot_source_params, source_conflict
from robot_dynamics_ros.nodes.runtime import freeze_gc, steady_timer
from robot_dynamics_ros.nodes.wire import description_qos

__all__ = ["excerpt", "model_from_text", "shared_model", "shared_engine", "ModelLoader", "MODEL_CACHE_SIZE",
           "MODEL_PARAMS", "model_with_params"]


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
        model = RobotModel.from_urdf(Path(source), held_joints=held_joints or None,
                                     joint_limits=joint_limits or None)
    if friction:
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
    # pinocchio is heavy (~48 MB resident) and optional here: the simulator node loads models through this
    # module and builds no engine, so it is imported with the first engine (issue 23, lean nodes)
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
            params = {s.name: param_value(node, s.name) for s in robot_source_params()}
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


#: parameters whose change builds a new model (``model.with_settings``) and swaps it in
MODEL_PARAMS = ("gravity", "payload.link", "payload.mass", "payload.com", "payload.inertia")


def model_with_params(model, p: Mapping[str, Any]):
    """``model.with_settings`` with the node's ``gravity`` (if it has one) and ``payload.*`` values: a new
    model object, or ``model`` itself when these equal its own (``model`` is never changed).

    Raises:
        UserError: unknown payload link (naming the parameter), non-physical inertia, a mass above
            ``PAYLOAD_MASS_RATIO`` × the robot's moving mass, bad gravity.
    """
    payload = None
    link = p.get("payload.link")
    if link and link not in model.description.links:
        # accepted while no model was loaded (unconfigured): refused here in one line naming the parameter
        raise UserError(f"parameter 'payload.link' = {quote_name(link)} is not a link of "
                        f"{quote_name(model.description.name)} (set one of its links, or '' for no payload)")
    if link:
        payload = (p["payload.link"], float(p["payload.mass"]), list(p["payload.com"]), list(p["payload.inertia"]))
    gravity = p.get("gravity")
    if payload is None and model.payload is None and (
            gravity is None or np.array_equal(np.asarray(gravity, dtype=float), model.gravity)):
        return model
    return model.with_settings(gravity=list(gravity) if gravity is not None else None, payload=payload)
