"""The shell a control node composes around its ROS-free core: topics, lifecycle, the per-message path.

:class:`ControlShell` owns what it uses — the command publisher, the joint_states subscription, the
JointState reader, the command writer, the model loader and the core — and the node hands it the topics,
the callbacks and the core through its methods (the node's own attributes are never read or written):

* lifecycle: :meth:`~ControlShell.configure` (topics + loader), :meth:`~ControlShell.attach` (a new core
  from the loader's callback), :attr:`~ControlShell.active`, :meth:`~ControlShell.publish_safe`
  (deactivate), :meth:`~ControlShell.cleanup`;
* per message: :meth:`~ControlShell.receive` (newest state, read, into the core) and
  :meth:`~ControlShell.handle` (receive, step, the node's ``act``, report, latency);
* parameters: :meth:`~ControlShell.set_parameters` (validate, swap model and settings into the core);
* timer: :meth:`~ControlShell.tick` (the safe command on stale input, no-state diagnosis, graph checks).

The joint_states -> command hot path touches only :meth:`~ControlShell.receive`, :func:`take_newest`,
:meth:`LatencyStats.add` and :meth:`Diagnostics.count`.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.qos import QoSCompatibility, qos_check_compatible
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_dynamics_ros.control.core import WAITING_FOR_STATES
from robot_dynamics_ros.nodes.cdr import Float64MultiArrayWriter, JointStateReader
from robot_dynamics_ros.nodes.diagnostics import Diagnostics, RateLimitedLog, reason_key
from robot_dynamics_ros.nodes.model_source import MODEL_PARAMS, model_with_params
from robot_dynamics_ros.nodes.parameters import ParamSpec, merged_parameters, validate_parameters
from robot_dynamics_ros.nodes.wire import (
    GRAPH_CHECK_PERIOD, command_qos, endpoint_node, joint_state_fields, other_publishers, qos_overrides,
    state_subscription_qos, take_newest,
)

__all__ = ["ControlShell", "ShellViews", "ParameterChange", "core_settings_kwargs", "tick_period"]

#: most joint states one callback answers in order (``latest_state_wins`` false) before it yields to the
#: executor, so that timers and services still run beside a flood (~50 µs each: at most ~3 ms)
DRAIN_MAX = 64


def core_settings_kwargs(p: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`~robot_dynamics_ros.control.core.CoreSettings` fields from the shared control parameters
    (``params/control.yaml``)."""
    return {"state_timeout": float(p["state_timeout"]), "clamp_to_effort_limits": bool(p["clamp_to_effort_limits"]),
            "position_margin": float(p["position_margin"]), "prismatic_margin": float(p["prismatic_margin"]),
            "velocity_factor": float(p["velocity_factor"]),
            "allow_partially_massless": bool(p["allow_partially_massless"])}


def tick_period(p: Mapping[str, Any]) -> float:
    """Period of a control node's safety timer, s: half the state timeout (10 ms to 0.5 s)."""
    return min(max(float(p["state_timeout"]) / 2, 0.01), 0.5)


@dataclass(frozen=True)
class ParameterChange:
    """The outcome of :meth:`ControlShell.set_parameters`.

    Attributes:
        result: for the node's ``on_set_parameters`` callback to return.
        values: the node's parameter values after the change (None when refused).
        model: the new model swapped into the core (None when the model did not change).
    """

    result: SetParametersResult
    values: dict[str, Any] | None = None
    model: Any = None


class ControlShell:
    """Topics, lifecycle, the per-message path and the safety timer of a control node (module docstring).

    Args:
        node: the rclpy (lifecycle) node; only its public API is used (``create_*``/``destroy_*``,
            ``get_clock``, ``get_logger``, ``get_publishers_info_by_topic``, ``get_parameter``).
        diag: the node's :class:`Diagnostics`; log: its :class:`RateLimitedLog` (replace :attr:`log` when
            ``log_period`` changes).
        latest_state_wins: act on the newest queued joint state and count the skipped ones.

    Attributes:
        core: the ROS-free core (``on_joint_state``, ``step``, ``safe_command``, ``set_model``,
            ``set_settings``, ``mapper``, ``clamped``, ``fault``) or None before a model (:meth:`attach`).
        pub: the command publisher (None: none, or not configured); sub: the joint_states subscription.
        loader: the :class:`~robot_dynamics_ros.nodes.model_source.ModelLoader` (None: not configured).
        reader: the :class:`~robot_dynamics_ros.nodes.cdr.JointStateReader` of the subscription.
        writer: the :class:`~robot_dynamics_ros.nodes.cdr.Float64MultiArrayWriter` of the commands (None
            before a core with command joints).
        active: the lifecycle state is 'active' (commands flow); the node sets it.
        sim_time: the node's ``use_sim_time``: without sim time, ROS time is the system time and
            ``time.time_ns()`` saves ~3 µs per message over the clock's ``now()``.
        config_error: why the last :meth:`configure` failed (None: it did not).
    """

    def __init__(self, node, diag: Diagnostics, log: RateLimitedLog, *, latest_state_wins: bool = True,
                 arrival_clock: str = "steady"):
        self.node = node
        self.diag = diag
        self.log = log
        self.core = None
        self.pub = self.sub = self.loader = self.writer = None
        self.reader = JointStateReader()
        self.active = False
        self._latest_wins = bool(latest_state_wins)
        #: ``arrival_clock`` 'node': arrival ages on the node clock (replay under use_sim_time at any rate)
        self._arrival_on_node_clock = arrival_clock == "node"
        self._clock = node.get_clock()
        self.sim_time = bool(node.get_parameter("use_sim_time").value)
        self.config_error: Exception | None = None
        self.last_error = ""
        self.incompatible_qos = 0
        self._configured_at = None
        self._last_accepted = -1
        self._jumps = 0
        self._last_state_at = None
        self._graph_at = -GRAPH_CHECK_PERIOD

    @property
    def command_topic(self) -> str:
        """The resolved command topic ("" without a publisher)."""
        return self.pub.topic_name if self.pub is not None else ""

    def arrival_now_ns(self) -> int:
        """"Now" on the clock of arrival ages (``arrival_clock``): monotonic ns, or the node clock's ns."""
        return self._clock.now().nanoseconds if self._arrival_on_node_clock else time.monotonic_ns()

    # ------------------------------------------------------------------ lifecycle
    def configure(self, *, joint_states_topic: str, on_joint_state: Callable[[bytes], None],
                  make_loader: Callable[[], Any], command_topic: str | None = None):
        """Create the command publisher on ``command_topic`` (reliable, :func:`command_qos`; None: no
        publisher), the ``raw=True`` subscription of ``joint_states_topic`` calling ``on_joint_state`` with
        the serialized JointState (:func:`state_subscription_qos`; both with :func:`qos_overrides`), then the
        model loader ``make_loader()`` (which may call :meth:`attach` before it returns).

        Returns:
            SUCCESS, or FAILURE with the error in :attr:`config_error` (everything created is destroyed).
        """
        self.config_error = None
        try:
            if command_topic is not None:
                self.pub = self.node.create_publisher(Float64MultiArray, command_topic, command_qos(),
                                                      qos_overriding_options=qos_overrides())
                self.diag.set("command_topic", self.pub.topic_name)
            # raw=True: the callback gets the serialized JointState and reads the fields it needs itself
            # (nodes/cdr.py); the command goes out as bytes: no Python message objects per message
            self.sub = self.node.create_subscription(JointState, joint_states_topic, on_joint_state,
                                                     state_subscription_qos(), raw=True,
                                                     qos_overriding_options=qos_overrides())
            self.diag.set("joint_states_topic", self.sub.topic_name)
            self.diag.set_level(Diagnostics.WARN, "waiting for the robot model")
            self.loader = make_loader()
        except Exception as exc:  # noqa: BLE001 - reported as a failed transition
            self.config_error = exc
            self.node.get_logger().error(f"configure failed: {exc}")
            self.cleanup()
            return TransitionCallbackReturn.FAILURE
        self._configured_at = time.monotonic()
        return TransitionCallbackReturn.SUCCESS

    def attach(self, core, command_joints: list[str] | None = None) -> None:
        """Use ``core`` from now on; with ``command_joints``, commands are written for them (in that order)."""
        if command_joints is not None:
            n = len(command_joints)
            self.writer = Float64MultiArrayWriter(n, [(",".join(command_joints), n, n)])
        self.core = core

    def cleanup(self) -> None:
        """Destroy topics and loader, forget the core (back to 'unconfigured')."""
        if self.loader is not None:
            self.loader.destroy()
        for entity, destroy in ((self.sub, self.node.destroy_subscription), (self.pub, self.node.destroy_publisher)):
            if entity is not None:
                try:
                    destroy(entity)
                except Exception:  # noqa: BLE001 - node already gone
                    pass
        self.pub = self.sub = self.loader = self.core = None
        self._configured_at = None
        self.diag.set_level(Diagnostics.WARN, "unconfigured")

    def publish(self, command) -> bool:
        """Publish ``command`` (one value per command joint) as a serialized Float64MultiArray; False when
        there is no publisher or writer."""
        if self.pub is None or self.writer is None:
            return False
        self.pub.publish(self.writer.write(command))
        return True

    def publish_safe(self, why: str) -> None:
        """Publish the core's safe command once (deactivate)."""
        core = self.core
        if core is None or self.pub is None or self.writer is None:
            return
        res = core.safe_command(why)
        if res.command is not None:
            self.publish(res.command)
        self.diag.set_level(Diagnostics.WARN, f"inactive ({res.reason})")
        self.node.get_logger().info(f"{why}: {res.reason}")

    # ------------------------------------------------------------------ parameters
    def set_parameters(self, params, specs: Mapping[str, ParamSpec], current: Mapping[str, Any],
                       settings_of: Callable[[dict], Any], base_model=None) -> ParameterChange:
        """The node's ``on_set_parameters`` policy: validate ``params`` against ``specs`` (with the node's
        ``current`` values); build the new model (``model_with_params`` on ``base_model``, the model as
        loaded) when a :data:`MODEL_PARAMS` entry changes and the core's settings from
        ``settings_of(new_values)``, swap both into the core; only then adopt ``use_sim_time``. Any error
        refuses the whole change, the core unchanged. The node adopts :attr:`ParameterChange.values`."""
        ok, reason = validate_parameters(specs, params, current)
        if not ok:
            return ParameterChange(SetParametersResult(successful=False, reason=reason))
        new = merged_parameters(specs, current, params)
        core = self.core
        model = None
        try:
            settings = settings_of(new)
            if core is not None:
                if any(prm.name in MODEL_PARAMS for prm in params):
                    model = model_with_params(base_model, new)
                    core.set_model(model)
                core.set_settings(settings)
        except Exception as exc:  # noqa: BLE001 - refused; the core keeps its model and settings
            return ParameterChange(SetParametersResult(successful=False, reason=str(exc)))
        for prm in params:
            if prm.name == "use_sim_time":
                self.sim_time = bool(prm.value)
        return ParameterChange(SetParametersResult(successful=True), new, model)

    # ------------------------------------------------------------------ per message
    def receive(self, raw: bytes):
        """The joint_states hot path up to the core: take the newest queued state (counting the skipped),
        read its fields (:attr:`reader`, rclpy's deserializer as the fallback), hand them to the core.

        Returns:
            ``(fields, arrival_ns, now_ns)`` for an accepted state (counted as ``received``); None when it
            was rejected (counted, logged) or there is no core or the shell is not active.
        """
        core = self.core
        if core is None or not self.active:
            return None
        if self._latest_wins:
            raw, skipped = take_newest(self.sub, raw, JointState)
            if skipped:
                self.diag.count("skipped", skipped)
        fields = self.read(raw)
        if fields is None:   # a broken message (counted, logged)
            return None
        arrival = self.arrival_now_ns()
        now_ns = self._clock.now().nanoseconds if self.sim_time else time.time_ns()
        rej = core.on_joint_state(fields, arrival, now_ns)
        if rej is not None:
            self.rejected(rej)
            return None
        self.diag.count("received")
        return fields, arrival, now_ns

    def handle(self, raw: bytes, act: Callable[[Any, Any, int], None]) -> None:
        """A node's whole joint_states callback: :meth:`handle_one` for ``raw`` and, when every state is
        answered in order (``latest_state_wins`` false), for the states queued behind it, up to
        :data:`DRAIN_MAX` per call. Taking them here spares each one a pass through rclpy's executor (its
        wait set costs more than the node's own work on a 7-joint state), which is what keeps a node at
        1 kHz answering beside a flood of other messages on its topic."""
        self.handle_one(raw, act)
        if self._latest_wins:
            return
        for _ in range(DRAIN_MAX - 1):
            sub = self.sub
            nxt = sub.handle.take_message(JointState, True) if sub is not None else None
            if nxt is None:
                return
            self.handle_one(nxt[0], act)

    def handle_one(self, raw: bytes, act: Callable[[Any, Any, int], None]) -> None:
        """One joint_states message: :meth:`receive`, ``core.step``, ``act(result, fields, now_ns)`` (what the
        node publishes), :meth:`report` of a result that is not plain OK, and the latency in the diagnostics."""
        t0 = time.perf_counter()
        got = self.receive(raw)
        if got is None:
            return
        fields, arrival, now_ns = got
        res = self.core.step(now_ns, arrival)
        act(res, fields, now_ns)
        diag = self.diag
        if res.level != Diagnostics.OK or diag.level != Diagnostics.OK:
            self.report(res)
        diag.latency.add(time.perf_counter() - t0)

    def read(self, raw: bytes):
        """The JointState fields of ``raw``, or None (counted, logged) when it cannot be deserialized."""
        try:
            return joint_state_fields(self.reader, raw)
        except Exception as exc:  # noqa: BLE001 - a node never dies on one message
            self.diag.count("rejected")
            # the key is fixed: a flood of distinct broken messages still gives one line per log_period
            self.last_error = f"joint_states: cannot deserialize {len(raw)} bytes: {str(exc)[:200]}"
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
    def tick(self, state_timeout: float, *, publish_safe: bool = True) -> None:
        """Safety and diagnostics timer: the safe command when the state went stale without a new message
        (``publish_safe``), a WARN when no joint state arrives for ``max(state_timeout, 1)`` s (with the
        publishers' QoS compatibility), the core's counters as diagnostic values. Nothing while inactive."""
        core, diag = self.core, self.diag
        if core is None or not self.active:
            return
        if time.monotonic() - self._graph_at >= GRAPH_CHECK_PERIOD:
            self._graph_at = time.monotonic()
            self.check_graph()
        mapper = core.mapper
        now_ns = self._clock.now().nanoseconds
        res = core.step(now_ns, self.arrival_now_ns()) if mapper.ready else None
        if res is not None and res.safe:
            if publish_safe and res.command is not None and self.publish(res.command):
                diag.count("safe")
            self.report(res)
        self._note_clock_jumps(mapper)
        if mapper.accepted != self._last_accepted:
            self._last_accepted, self._last_state_at = mapper.accepted, time.monotonic()
        since = self._last_state_at or self._configured_at
        if since is not None and time.monotonic() - since > max(float(state_timeout), 1.0) and not core.fault:
            text = self.no_state_text()
            if self.log.due("no_state"):
                self.log.warning("no_state", text)
            if res is not None and res.safe:   # keep the safe command's reason (and level) first
                diag.set_level(max(res.level, Diagnostics.WARN), f"{res.reason}; {text}")
            else:
                diag.set_level(Diagnostics.WARN, text)
        elif mapper.accepted == 0 and not core.fault and self.log.due("no_state"):
            self.log.warning("no_state", f"{WAITING_FOR_STATES}: {self.no_state_text()}")
        diag.set("state_age_s", round(mapper.age(now_ns, self.arrival_now_ns()), 6) if mapper.ready else "never")
        diag.set("clamp_count", core.clamped)
        diag.set("rejected_by_joint", dict(mapper.rejected_joints))
        diag.set("unknown_names", mapper.unknown_name_count)
        diag.set("clock_jumps", mapper.clock_jumps)
        diag.set("last_error", self.last_error)
        if res is not None and res.level == Diagnostics.OK and diag.level != Diagnostics.OK:
            diag.set_level(res.level, res.reason)

    def _note_clock_jumps(self, mapper) -> None:
        if mapper.clock_jumps != self._jumps:
            self._jumps = mapper.clock_jumps
            self.log.warning("clock_jump", f"node clock jumped back ({mapper.clock_jumps} so far): joint-state "
                             "stamp ordering restarted")

    def check_graph(self) -> None:
        """Publishers of the command topic besides this node: a WARN condition and a rate-limited warning
        naming them (two controllers' commands interleave, and disabling one changes nothing). The
        joint_states publishers are only a diagnostic value: several partial publishers are legitimate."""
        if self.pub is None or self.sub is None:
            return
        topic = self.pub.topic_name
        others, total = other_publishers(self.node, topic)
        self.diag.set("command_publishers", f"{total}: {', '.join(others[:5])}" if others else f"{total}")
        if others:
            text = (f"{total} publishers on {topic}: also {', '.join(others[:5])}; their commands interleave "
                    "(disabling this node does not silence them)")
            self.diag.condition("command_publishers", Diagnostics.WARN, text)
            self.log.warning("command_publishers", text)
        else:
            self.diag.condition("command_publishers", None)
        states, total = other_publishers(self.node, self.sub.topic_name)
        self.diag.set("joint_states_publishers", f"{total}: {', '.join(states[:5])}")

    def waiting_for_clock(self) -> bool:
        """``use_sim_time`` and no /clock yet (sim time reads 0 until the first one arrives)."""
        return self.sim_time and self._clock.now().nanoseconds == 0

    def no_state_text(self) -> str:
        """Why no joint state drives the command: no publisher, or publishers whose QoS does not match."""
        sub = self.sub
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
        mapper = self.core.mapper if self.core is not None else None
        if mapper is not None and sum(mapper.rejected.values()):
            return (f"no joint state accepted on {topic} from {len(infos)} publisher(s): "
                    f"{self.last_error[:160]}")
        return f"no joint_states received on {topic} from {len(infos)} publisher(s)"


class ShellViews:
    """Read-only views of a control node's :class:`ControlShell` (the node's ``shell`` attribute), for the
    node's callers (tools, tests): the shell owns these, the node never assigns them."""

    shell: ControlShell

    @property
    def core(self):
        """The ROS-free core (None before a model)."""
        return self.shell.core

    @property
    def mapper(self):
        """The core's :class:`~robot_dynamics_ros.control.joint_mapping.JointStateMapper` (None before a model)."""
        return None if self.shell.core is None else self.shell.core.mapper

    @property
    def pub(self):
        """The command publisher (None when not configured, or for a node without one)."""
        return self.shell.pub

    @property
    def sub(self):
        """The joint_states subscription (None when not configured)."""
        return self.shell.sub

    @property
    def loader(self):
        """The :class:`~robot_dynamics_ros.nodes.model_source.ModelLoader` (None when not configured)."""
        return self.shell.loader

    @property
    def command_topic(self) -> str:
        """The resolved command topic ("" when not configured, or for a node without one)."""
        return self.shell.command_topic
