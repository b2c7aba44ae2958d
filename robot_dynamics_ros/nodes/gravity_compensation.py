"""Gravity-compensation node: joint_states -> tau = g(q) [+ friction] -> ``/<controller>/commands``.

For every accepted ``sensor_msgs/JointState`` it computes the gravity torque g(q) (Pinocchio,
``RNEA(q, 0, 0)``, Featherstone 2008 §5.3) in the robot model's joint order, optionally adds the viscous +
Coulomb friction torque of URDF ``<dynamics>``, clamps to the URDF effort limits and publishes a
``std_msgs/Float64MultiArray`` in the configured ``joints`` order, the interface of a ros2_control
``forward_command_controller`` for efforts (``effort_controllers/JointGroupEffortController``).

Safety (issue 7): joint states older than ``state_timeout`` (by header stamp, by arrival time when the stamp
is zero) produce no command and a WARN diagnostic; bad messages (wrong lengths, NaN/Inf positions,
duplicate names, out-of-order stamps) are rejected with a rate-limited log and the node serves on; a joint
missing from joint_states (or with a NaN velocity when friction compensation needs it) blocks commands
until it arrives; a non-finite torque is never published; after shutdown nothing is published (unless
``publish_zero_on_shutdown``).

Topics, services and parameters: see docs/nodes.md and :data:`PARAMS`.
"""
from __future__ import annotations

import time
from math import isfinite

import numpy as np
from rclpy.node import Node
from rcl_interfaces.msg import SetParametersResult
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool

from robot_dynamics_ros.control import laws
from robot_dynamics_ros.control.cdr import Float64MultiArrayWriter, JointStateReader
from robot_dynamics_ros.control.joint_mapping import JointStateMapper
from robot_dynamics_ros.nodes import common
from robot_dynamics_ros.nodes.common import Diagnostics, ParamSpec, RateLimitedLog

NODE_NAME = "gravity_compensation"

#: parameters of this node besides :func:`common.robot_source_params`
PARAMS = [
    ParamSpec("joints", [], "Command joint order of the published Float64MultiArray (the effort "
              "controller's 'joints'). Empty: all actuated joints in URDF order.", kind="string_array",
              read_only=True),
    ParamSpec("controller_name", "effort_controller", "Commands go to /<controller_name>/commands.",
              read_only=True),
    ParamSpec("joint_states_topic", "/joint_states", "sensor_msgs/JointState input topic.", read_only=True),
    ParamSpec("enabled", True, "Compensation on/off; ~/enable (std_srvs/SetBool) sets this parameter. "
              "Disabled: zero torques are published (the drive gets an explicit zero)."),
    ParamSpec("gravity", [0.0, 0.0, -9.81], "Gravity vector in the robot base (URDF root) frame, m/s²; "
              "tilted or wall mounts.", length=3, range=(-100.0, 100.0)),
    ParamSpec("payload.link", "", "Link carrying the payload ('' = no payload)."),
    ParamSpec("payload.mass", 0.0, "Payload mass, kg.", range=(0.0, 1000.0)),
    ParamSpec("payload.com", [0.0, 0.0, 0.0], "Payload centre of mass in the link frame, m.", length=3,
              range=(-10.0, 10.0)),
    ParamSpec("payload.inertia", [0.0, 0.0, 0.0, 0.0, 0.0, 0.0], "Payload inertia about its centre of "
              "mass, link axes: ixx ixy ixz iyy iyz izz, kg·m².", length=6, range=(-1000.0, 1000.0)),
    ParamSpec("friction_compensation", False, "Add viscous + Coulomb friction torque from URDF <dynamics> "
              "(needs joint velocities; a NaN velocity then counts as missing)."),
    ParamSpec("hardware_compensates_gravity", False, "The drives already add g(q): leave it out (only "
              "friction, if enabled, is published)."),
    ParamSpec("clamp_to_effort_limits", True, "Clamp each torque to ± the URDF effort limit (counted in "
              "diagnostics as clamp_count)."),
    ParamSpec("state_timeout", 0.1, "Joint states older than this (s) produce no command.",
              range=(1e-4, 3600.0)),
    ParamSpec("publish_zero_on_shutdown", False, "Publish one zero-torque command when the node shuts down "
              "(default: publish nothing further)."),
    ParamSpec("crossval_samples", 20, "At model load, compare Pinocchio with the in-package Newton-Euler on "
              "this many random states (0: skip); on a mismatch the node publishes nothing (ERROR diagnostic).",
              range=(0, 100000), read_only=True),
    ParamSpec("qos_depth", 100, "Keep-last depth of the joint_states subscription and the command publisher. "
              "100 = state_timeout x 1 kHz: a scheduling stall shorter than state_timeout loses no joint state "
              "(with 10, every state beyond the 10th that arrives during a stall is overwritten unread).",
              range=(1, 1000), read_only=True),
    ParamSpec("best_effort", False, "Subscribe joint_states best-effort instead of reliable.", read_only=True),
    ParamSpec("log_period", 1.0, "Minimum seconds between two log lines of the same kind.", range=(0.0, 3600.0)),
    ParamSpec("diagnostics_period", 1.0, "Seconds between two /diagnostics messages.", range=(0.01, 3600.0),
              read_only=True),
]


class GravityCompensationNode(Node):
    """The gravity-compensation node (see the module docstring).

    Args:
        node_name: ROS node name.
        **kwargs: passed to ``rclpy.node.Node`` (``context``, ``parameter_overrides``, ...).

    Raises:
        UserError / URDFError: the URDF from ``urdf_path`` / ``robot_description`` cannot be read.
        ValueError: a parameter override fails its check, or a ``joints`` entry is not a model joint.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        self._shut = False
        self.mapper: JointStateMapper | None = None
        super().__init__(node_name, **kwargs)
        self._specs = {s.name: s for s in [*common.robot_source_params(), *PARAMS]}
        self.p = common.declare_parameters(self, self._specs.values())
        self.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        self.diag = Diagnostics(self, hardware_id="gravity_compensation", period=self.p["diagnostics_period"])
        self.enabled = bool(self.p["enabled"])
        self.model = None
        self.engine = None
        self.crossval_ok = False
        self.clamp_count = 0
        self.last_error = ""
        self.published = 0
        self._timeout_ns = int(self.p["state_timeout"] * 1e9)
        self._friction = bool(self.p["friction_compensation"])
        self._hw_gravity = bool(self.p["hardware_compensates_gravity"])
        self._clamp = bool(self.p["clamp_to_effort_limits"])
        self._clock = self.get_clock()
        # ROS time is the system time unless use_sim_time: then time.time_ns() saves ~3 µs per message
        self._sim_time = bool(self.get_parameter("use_sim_time").value)
        self._stale = False

        qos_depth = int(self.p["qos_depth"])
        topic = f"/{self.p['controller_name'].strip('/')}/commands"
        self.command_topic = topic
        self.pub = self.create_publisher(Float64MultiArray, topic, common.command_qos(qos_depth))
        self._writer: Float64MultiArrayWriter | None = None
        self._reader = JointStateReader()
        # raw=True: the callback gets the serialized JointState and reads the fields it needs itself
        # (control/cdr.py), the command goes out as bytes: no Python message objects per message
        self.sub = self.create_subscription(
            JointState, self.p["joint_states_topic"], self._on_joint_state_raw,
            common.joint_state_qos(qos_depth, reliable=not self.p["best_effort"]), raw=True)
        self.srv = self.create_service(SetBool, "~/enable", self._on_enable)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.diag.set("command_topic", topic)
        self.diag.set_level(Diagnostics.WARN, "waiting for the robot model")
        # staleness seen even when joint_states stop altogether; also refreshes the diagnostic values
        self._stale_timer = self.create_timer(min(max(self.p["state_timeout"], 0.01), 0.5), self._check_stale)
        self.loader = common.ModelLoader(self, self._on_model, self.log, self.p)

    # ------------------------------------------------------------------ model
    def _on_model(self, model, label: str) -> None:
        joints = self.p["joints"] or list(model.joint_names)
        mapper = JointStateMapper(model.joint_names, joints, require_velocity=self._friction)
        # its own engine (Pinocchio Data + buffers) over the shared model: no data race with another node
        # of the process under a multi-threaded executor; payload/gravity changes still reach it
        from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics

        engine = PinocchioDynamics(model)
        crossval_ok, crossval_text = self._crossval(model)
        old = self.model
        try:
            self.model = model
            self._apply_model_params(self.p)
        except Exception:
            self.model = old
            raise
        self.engine = engine
        # the command writer before the mapper: a callback never pairs a new mapper with an old writer
        self._writer = Float64MultiArrayWriter(len(joints), [(",".join(joints), len(joints), len(joints))])
        self.mapper = mapper
        self.crossval_ok = crossval_ok
        self.diag.set("crossval", crossval_text)
        self._effort_limit = np.asarray(model.effort_limit, dtype=float)
        self._effort_limit_list = self._effort_limit.tolist()
        self._tau_zero = [0.0] * model.n
        self.diag.set("robot", model.description.name)
        self.diag.set("model_source", label)
        if not crossval_ok:
            self.last_error = crossval_text
            self.diag.set_level(Diagnostics.ERROR, crossval_text)
            self.get_logger().error(crossval_text + ": not publishing")
        else:
            self.diag.set_level(Diagnostics.WARN, "waiting for joint_states")
        self.get_logger().info(f"robot '{model.description.name}' from {label}: {model.n} joints, "
                               f"commands for {joints} on {self.command_topic}")

    def _crossval(self, model) -> tuple[bool, str]:
        """Pinocchio vs in-package Newton-Euler on random states (:func:`dynamics.crossval.crossvalidate`)."""
        samples = int(self.p["crossval_samples"])
        if samples <= 0:
            return True, "skipped"
        try:
            from robot_dynamics_ros.dynamics.crossval import crossvalidate

            report = crossvalidate(model, samples=samples, mujoco=False)
        except Exception as exc:  # noqa: BLE001 - a failing check must not take the node down
            return False, f"crossval could not run: {exc}"
        worst = report.worst("newton-euler")
        if report.passed:
            return True, f"passed: {samples} states, max |NE - Pinocchio| {worst:.1e}"
        return False, f"crossval FAILED: max |NE - Pinocchio| {worst:.3e} on {samples} states"

    def _apply_model_params(self, p) -> None:
        """Apply gravity and payload parameters to the model (raises UserError on a bad value)."""
        m = self.model
        if m is None:
            return
        if not np.array_equal(m.gravity, np.asarray(p["gravity"], dtype=float)):
            m.gravity = p["gravity"]
        link = p["payload.link"]
        if link:
            a = p["payload.inertia"]
            inertia = np.array([[a[0], a[1], a[2]], [a[1], a[3], a[4]], [a[2], a[4], a[5]]])
            m.set_payload(link, p["payload.mass"], p["payload.com"], inertia)
        else:
            m.clear_payload()

    # ------------------------------------------------------------------ parameters / service
    def _on_set_parameters(self, params) -> SetParametersResult:
        ok, reason = common.validate_parameters(self._specs, params)
        if not ok:
            return SetParametersResult(successful=False, reason=reason)
        for prm in params:
            if prm.name == "use_sim_time":
                self._sim_time = bool(prm.value)
        new = common.merged_parameters(self._specs, self.p, params)
        model_keys = {"gravity", "payload.link", "payload.mass", "payload.com", "payload.inertia"}
        if any(prm.name in model_keys for prm in params) and self.model is not None:
            try:
                self._apply_model_params(new)
            except Exception as exc:  # noqa: BLE001 - reject, restore the previous values
                self._apply_model_params(self.p)
                return SetParametersResult(successful=False, reason=str(exc))
        self.p = new
        self.enabled = bool(new["enabled"])
        self._friction = bool(new["friction_compensation"])
        self._hw_gravity = bool(new["hardware_compensates_gravity"])
        self._clamp = bool(new["clamp_to_effort_limits"])
        self._timeout_ns = int(new["state_timeout"] * 1e9)
        if self.mapper is not None and self.mapper.require_velocity != self._friction:
            self.mapper.require_velocity = self._friction
            self.mapper.reset()  # readiness depends on it: wait for a complete state again
        self.log = RateLimitedLog(self.get_logger(), new["log_period"])
        return SetParametersResult(successful=True)

    def _on_enable(self, request, response):
        from rclpy.parameter import Parameter

        result = self.set_parameters([Parameter("enabled", value=bool(request.data))])[0]
        response.success = bool(result.successful)
        if result.successful:
            response.message = "gravity compensation " + ("enabled" if self.enabled else
                                                          "disabled (publishing zeros)")
            self.get_logger().info(response.message)
        else:
            response.message = f"refused: {result.reason}"
        return response

    # ------------------------------------------------------------------ hot path
    def _on_joint_state_raw(self, raw: bytes) -> None:
        """The joint_states callback: a serialized ``sensor_msgs/JointState`` (``raw=True`` subscription)."""
        t0 = time.perf_counter()
        if self._shut:
            return
        mapper = self.mapper
        if mapper is None:
            self.log.warning("no_model", "joint_states received but no robot model loaded yet")
            return
        try:
            fields = common.joint_state_fields(self._reader, raw)
        except Exception as exc:  # noqa: BLE001 - a node never dies on one message
            self.diag.count("rejected")
            self.last_error = f"joint_states: cannot deserialize {len(raw)} bytes: {exc}"
            self.log.warning("deserialize", self.last_error)
            return
        arrival = time.monotonic_ns()
        now_ns = self._clock.now().nanoseconds if self._sim_time else time.time_ns()
        rej = mapper.update_fields(fields, arrival, now_stamp_ns=now_ns, max_future_ns=self._timeout_ns)
        if rej is not None:
            self.diag.count("rejected")
            self.last_error = f"joint_states rejected: {rej}"
            self.log.warning(rej.code.name, self.last_error)
            return
        self.diag.count("received")
        if not mapper.ready:
            self.last_error = f"joint_states: missing joints {mapper.missing()}"
            self.log.warning("missing", self.last_error + " (no command until they arrive)")
            return
        age_ns = mapper.age(now_ns, arrival) * 1e9
        if age_ns > self._timeout_ns:
            self._set_stale(age_ns * 1e-9)
            return
        if not self.crossval_ok:
            return
        if self._stale:
            self._stale = False
            self.diag.set_level(Diagnostics.OK, "running")
        if self.enabled:
            tau = laws.gravity_compensation(self.engine, mapper.q, qd=mapper.qd, friction=self._friction,
                                            hardware_compensates_gravity=self._hw_gravity)
            tau = tau.tolist()  # 7 floats: Python list ops beat numpy calls (per-call overhead)
            if self._clamp:
                n_clamped = laws.clamp_effort_list(tau, self._effort_limit_list)
                if n_clamped:
                    self.clamp_count += n_clamped
                    self.log.warning("clamp", f"torque clamped to the URDF effort limits on {n_clamped} "
                                     f"joint(s) (total {self.clamp_count})")
        else:
            tau = self._tau_zero  # zeros (list)
        data = mapper.to_command_list(tau)
        if not isfinite(sum(data)):    # (a sum of 7 floats is cheaper than numpy's isfinite().all())
            if not all(isfinite(x) for x in data):
                self.diag.count("nonfinite_torque")
                self.last_error = f"non-finite torque {data} not published"
                self.log.error("nonfinite", self.last_error)
                return
        self.pub.publish(self._writer.write(data))
        self.published += 1
        self.diag.latency.add(time.perf_counter() - t0)

    def _set_stale(self, age_s: float) -> None:
        self.diag.count("stale")
        if not self._stale:
            self._stale = True
            self.diag.set_level(Diagnostics.WARN, f"joint_states stale ({age_s * 1e3:.1f} ms old): "
                                "not publishing")
        self.last_error = f"joint_states {age_s * 1e3:.1f} ms old > state_timeout " \
                          f"{self._timeout_ns * 1e-6:.1f} ms: no command"
        self.log.warning("stale", self.last_error)

    def _check_stale(self) -> None:
        mapper = self.mapper
        if mapper is None or not mapper.ready or self._shut:
            return
        age = mapper.age(self._clock.now().nanoseconds, time.monotonic_ns())
        if age * 1e9 > self._timeout_ns and not self._stale:
            self._set_stale(age)
        self.diag.set("state_age_s", round(age, 6))
        self.diag.set("clamp_count", self.clamp_count)
        self.diag.set("enabled", self.enabled)
        self.diag.set("last_error", self.last_error)
        self.diag.set("published", self.published)
        if not self._stale and self.diag.level != Diagnostics.OK and mapper.ready and self.crossval_ok:
            self.diag.set_level(Diagnostics.OK, "running")

    # ------------------------------------------------------------------ shutdown
    def destroy_node(self) -> None:
        """Stop publishing for good (optionally after one zero-torque command), then destroy the node."""
        if not self._shut:
            self._shut = True
            if getattr(self, "p", {}).get("publish_zero_on_shutdown") and self.mapper is not None:
                try:
                    self.pub.publish(self._writer.write([0.0] * self._writer.n))
                except Exception:  # noqa: BLE001 - context may already be gone
                    pass
            try:
                if getattr(self, "sub", None) is not None:
                    self.destroy_subscription(self.sub)
            except Exception:  # noqa: BLE001
                pass
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_dynamics_ros gravity_compensation`` entry point (SIGINT stops it)."""
    return common.run_node("gravity_compensation", GravityCompensationNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
