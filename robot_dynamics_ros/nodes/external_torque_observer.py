"""External-torque observer node: ``joint_states`` -> τ_ext, the external wrench and a collision flag.

A managed (lifecycle) node over :class:`~robot_dynamics_ros.control.external_torque.ExternalTorqueCore`
(the generalized-momentum observer, De Luca & Mattone 2003 / Haddadin et al. 2017, with the control
nodes' input policy: readiness, plausibility gates, staleness, clock jumps). This module moves bytes,
parameters and diagnostics:

* subscribes ``joint_states`` (positions, velocities, and efforts as the measured joint torque; the newest
  queued state wins) and, for ``torque_source`` ``commanded``/``auto``, ``command_topic``
  (``std_msgs/Float64MultiArray`` in ``command_joints`` order: what the drives were told to apply);
* publishes ``~/external_torque`` (``sensor_msgs/JointState``, effort = τ_ext by joint name, N·m / N,
  stamped with the joint state's time; the generalized force the environment applies, so Jᵀf for a contact
  force f, and g(q) − τ_measured for a robot at rest — the opposite sign of a "measured minus model"
  residual such as Franka's ``tau_ext_hat_filtered``), ``~/external_wrench`` (``geometry_msgs/WrenchStamped`` at the
  origin of ``wrench_frame``, in that frame's axes; not published when ``wrench_frame`` is empty) and
  ``~/collision`` (``std_msgs/Bool``, reliable + transient local, on every change); never a non-finite
  value: on stale or bad input nothing is published and the diagnostic says why;
* services ``~/reset_collision`` (``std_srvs/Trigger``: clear the flag) and ``~/set_payload``;
* lifecycle and ``autostart`` as the control nodes'.

Topics are relative (namespaces and remaps apply). Parameters: :data:`PARAMS`, docs/nodes.md.
"""
from __future__ import annotations

import time

import numpy as np
from geometry_msgs.msg import WrenchStamped
from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray
from std_srvs.srv import Trigger

from robot_dynamics_ros.control.cdr import JointStateEffortWriter, JointStateReader
from robot_dynamics_ros.control.external_torque import TORQUE_SOURCES, ExternalTorqueCore, ObserverSettings
from robot_dynamics_ros.nodes import common
from robot_dynamics_ros.nodes.common import CONTROL_PARAMS, Diagnostics, ParamSpec, RateLimitedLog

NODE_NAME = "external_torque_observer"

_SHARED = ("autostart", "joint_states_topic", "latest_state_wins", "state_timeout", "position_margin",
           "prismatic_margin", "velocity_factor", "payload.link", "payload.mass", "payload.com",
           "payload.inertia", "log_period", "diagnostics_period")

#: parameters of this node besides :func:`common.robot_source_params` and the shared control parameters
PARAMS = [
    ParamSpec("gain", 50.0, "Observer gain K_O, 1/s: τ_ext is seen through a first-order low-pass of time "
              "constant 1/K_O (faster detection, more noise).", range=(0.01, 10000.0)),
    ParamSpec("threshold", [10.0], "Collision threshold on |τ_ext|, N·m (N): one value for all joints or one "
              "per joint in model order.", kind="double_array"),
    ParamSpec("release", 0.5, "Fraction of the threshold below which a joint counts as released "
              "(hysteresis).", range=(0.01, 1.0)),
    ParamSpec("min_duration", 0.002, "Seconds a threshold must be exceeded (or all joints released) before the "
              "flag changes.", range=(0.0, 10.0)),
    ParamSpec("torque_source", "auto", "Joint torque balanced by the observer: measured (joint_states "
              "effort), commanded (command_topic), auto (measured when every effort is finite).",
              choices=TORQUE_SOURCES),
    ParamSpec("friction", True, "Subtract the model's friction torque (URDF <dynamics>)."),
    ParamSpec("coulomb_velocity", 0.02, "v_c, rad/s (m/s): for a sign-law Coulomb model (URDF <dynamics "
              "friction>) the observer uses F_c*clip(qd/v_c, -1, 1), zero at rest where static friction is "
              "indeterminate, and a joint slower than v_c has its collision threshold widened by its F_c. "
              "0: bare sign(qd), no widening.", range=(0.0, 100.0)),
    ParamSpec("command_topic", "effort_controller/commands", "Float64MultiArray effort commands read for the "
              "commanded torque source (relative).", read_only=True),
    ParamSpec("command_joints", [], "Joint order of command_topic (empty: the model's joint order).",
              kind="string_array", read_only=True),
    ParamSpec("wrench_frame", "", "Link whose origin the external wrench is given at, in its axes (empty: no "
              "wrench published).", read_only=True),
]


def settings_from(p) -> ObserverSettings:
    return ObserverSettings(gain=float(p["gain"]), threshold=tuple(float(x) for x in p["threshold"]) or (10.0,),
                            release=float(p["release"]), min_duration=float(p["min_duration"]),
                            torque_source=p["torque_source"], friction=bool(p["friction"]),
                            coulomb_velocity=float(p["coulomb_velocity"]),
                            state_timeout=float(p["state_timeout"]), position_margin=float(p["position_margin"]),
                            prismatic_margin=float(p["prismatic_margin"]),
                            velocity_factor=float(p["velocity_factor"]))


class ExternalTorqueObserverNode(LifecycleNode):
    """The external-torque observer node (see the module docstring).

    Raises (with ``autostart``): UserError / URDFError for an unreadable URDF; ValueError for a bad
    parameter or a ``command_joints`` entry that is not a model joint.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        self.core: ExternalTorqueCore | None = None
        self.model = self.base_model = None
        self._active = False
        self.sub = self.sub_cmd = self.loader = None
        self.pub = None  # the control shell's command publisher slot: unused here
        super().__init__(node_name, **kwargs)
        shared = [s for s in CONTROL_PARAMS if s.name in _SHARED]
        self._specs = {s.name: s for s in [*common.robot_source_params(), *shared, *PARAMS]}
        self.p = common.declare_parameters(self, self._specs.values())
        self.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        self.diag = Diagnostics(self, hardware_id=NODE_NAME, period=self.p["diagnostics_period"], timer=False)
        self.diag.set_level(Diagnostics.WARN, "unconfigured")
        self._reader = JointStateReader()
        self.shell = common.ControlShell(self, self.diag, self.log)
        self.pub_tau = self.create_publisher(JointState, "~/external_torque", 10)
        self.pub_wrench = self.create_publisher(WrenchStamped, "~/external_wrench", 10)
        self.pub_collision = self.create_publisher(
            Bool, "~/collision", QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                            durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self._tau_writer: JointStateEffortWriter | None = None
        self._wrench = WrenchStamped()
        self._collision = None
        self.published = 0
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.create_service(Trigger, "~/reset_collision", self._on_reset, qos_profile=common.service_qos())
        common.create_payload_service(self)
        self._timer = common.steady_timer(self, common.tick_period(self.p), self._tick)
        common.autostart(self)

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state) -> TransitionCallbackReturn:
        try:
            self.sub = self.create_subscription(JointState, self.p["joint_states_topic"], self._on_joint_state_raw,
                                                common.state_subscription_qos(), raw=True,
                                                qos_overriding_options=common.qos_overrides())
            if self.p["torque_source"] != "measured":
                self.sub_cmd = self.create_subscription(Float64MultiArray, self.p["command_topic"],
                                                        self._on_command, 10)
            self.loader = common.ModelLoader(self, self._on_model, self.log, self.p)
        except Exception as exc:  # noqa: BLE001 - a failed transition, not a dead node
            self.shell.config_error = exc
            self.get_logger().error(f"configure failed: {exc}")
            self._teardown()
            return TransitionCallbackReturn.FAILURE
        self.shell._configured_at = time.monotonic()
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state) -> TransitionCallbackReturn:
        self._active = True
        return super().on_activate(state)

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        self._active = False
        self.diag.set_level(Diagnostics.WARN, "inactive")
        return super().on_deactivate(state)

    def on_cleanup(self, state) -> TransitionCallbackReturn:
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state) -> TransitionCallbackReturn:
        self._active = False
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def _teardown(self) -> None:
        if self.loader is not None:
            self.loader.destroy()
        for entity in (self.sub, self.sub_cmd):
            if entity is not None:
                try:
                    self.destroy_subscription(entity)
                except Exception:  # noqa: BLE001 - node already gone
                    pass
        self.sub = self.sub_cmd = self.loader = self.core = None

    # ------------------------------------------------------------------ model
    def _on_model(self, model, label: str) -> None:
        used = common.model_with_params(model, self.p)
        joints = list(self.p["command_joints"]) or None
        core = ExternalTorqueCore(used, settings_from(self.p), joints)
        if self.p["wrench_frame"]:
            core.engine.frame_placement(used.neutral(), self.p["wrench_frame"])  # unknown frame: refuse now
        self._tau_writer = JointStateEffortWriter(used.joint_names)
        self.base_model, self.model, self.core = model, used, core
        self.diag.set("robot", model.description.name)
        self.diag.set("model_source", label)
        self.get_logger().info(f"robot '{model.description.name}' from {label}: observing {model.n} joints, "
                               f"gain {core.settings.gain} 1/s")

    # ------------------------------------------------------------------ parameters / services
    def _on_set_parameters(self, params) -> SetParametersResult:
        def checked_settings(new):
            settings = settings_from(new)
            settings.check()
            return settings

        return self.shell.set_parameters(params, checked_settings)

    def _on_reset(self, request, response):
        if self.core is None:
            response.success, response.message = False, "no robot model yet"
            return response
        self.core.reset_collision()
        self._publish_collision(False)
        response.success, response.message = True, "collision flag cleared"
        return response

    # ------------------------------------------------------------------ hot path
    def _on_command(self, msg) -> None:
        core = self.core
        if core is not None and not core.on_command(msg.data):
            self.diag.count("commands_rejected")

    def _on_joint_state_raw(self, raw: bytes) -> None:
        self.shell.handle(raw, self._publish)

    def _publish(self, res, fields, now_ns: int) -> None:
        if res.tau_ext is not None:
            stamp = fields.stamp_ns or now_ns
            self.pub_tau.publish(self._tau_writer.write(stamp, res.tau_ext))
            self.published += 1
            if self.p["wrench_frame"]:
                self._publish_wrench(stamp)
        if res.collision != self._collision:
            self._publish_collision(res.collision)

    def _publish_wrench(self, stamp_ns: int) -> None:
        core = self.core
        F = core.wrench(self.p["wrench_frame"])
        if F is None or not np.all(np.isfinite(F)):
            return
        R = core.engine.frame_placement(core.mapper.q, self.p["wrench_frame"])[:3, :3]
        f, m = R.T @ F[:3], R.T @ F[3:]   # base axes -> the frame's own axes
        w = self._wrench
        w.header.stamp.sec, w.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
        w.header.frame_id = self.p["wrench_frame"]
        w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = (float(x) for x in f)
        w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z = (float(x) for x in m)
        self.pub_wrench.publish(w)

    def _publish_collision(self, value: bool) -> None:
        self._collision = bool(value)
        self.pub_collision.publish(Bool(data=bool(value)))

    def _tick(self) -> None:
        """Safety timer: staleness when joint_states stop (the observer restarts), then the diagnostics."""
        core = self.core
        if core is not None and self._active:
            res = core.step(self.get_clock().now().nanoseconds, time.monotonic_ns()) if core.mapper.ready else None
            if res is not None and res.tau_ext is None:
                self.shell.report(res)
            self.diag.set("collision", bool(core.detector.collision))
            self.diag.set("collisions", core.detector.count)
            self.diag.set("published", self.published)
            self.diag.set("no_torque", core.no_torque)
            self.diag.set("nonfinite_withheld", core.nonfinite)
            self.diag.set("rejected_by_joint", dict(core.mapper.rejected_joints))
        self.diag.publish_due()


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_dynamics_ros external_torque_observer`` entry point (SIGINT stops it)."""
    return common.run_node(NODE_NAME, ExternalTorqueObserverNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
