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

Topics are relative (namespaces and remaps apply). Parameters: :data:`SCHEMA`, docs/nodes.md.
"""
from __future__ import annotations


import numpy as np
from geometry_msgs.msg import WrenchStamped
from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray
from std_srvs.srv import Trigger

from robot_dynamics_ros.control.external_torque import ExternalTorqueCore, ObserverSettings
from robot_dynamics_ros.nodes.cdr import JointStateEffortWriter
from robot_dynamics_ros.nodes.control_shell import ControlShell, ShellViews, tick_period
from robot_dynamics_ros.nodes.diagnostics import Diagnostics, RateLimitedLog
from robot_dynamics_ros.nodes.model_source import ModelLoader, model_with_params
from robot_dynamics_ros.nodes.parameters import declare_parameters, node_schema
from robot_dynamics_ros.nodes.runtime import autostart, run_node, steady_timer
from robot_dynamics_ros.nodes.services import create_payload_service
from robot_dynamics_ros.nodes.wire import collision_qos, service_qos

NODE_NAME = "external_torque_observer"

#: the node's parameters (``params/external_torque_observer.yaml``: the robot source, part of the shared
#: control parameters and this node's own)
SCHEMA = node_schema(NODE_NAME)


def settings_from(p) -> ObserverSettings:
    return ObserverSettings(gain=float(p["gain"]), threshold=tuple(float(x) for x in p["threshold"]) or (10.0,),
                            release=float(p["release"]), min_duration=float(p["min_duration"]),
                            torque_source=p["torque_source"], friction=bool(p["friction"]),
                            coulomb_velocity=float(p["coulomb_velocity"]),
                            state_timeout=float(p["state_timeout"]), position_margin=float(p["position_margin"]),
                            prismatic_margin=float(p["prismatic_margin"]),
                            velocity_factor=float(p["velocity_factor"]), effort_factor=float(p["effort_factor"]),
                            allow_partially_massless=bool(p["allow_partially_massless"]))


class ExternalTorqueObserverNode(ShellViews, LifecycleNode):
    """The external-torque observer node (see the module docstring).

    Raises (with ``autostart``): UserError / URDFError for an unreadable URDF; ValueError for a bad
    parameter or a ``command_joints`` entry that is not a model joint.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        self.model = self.base_model = None
        self.sub_cmd = None
        super().__init__(node_name, **kwargs)
        self._specs = SCHEMA.by_name
        self.p = declare_parameters(self, self._specs.values())
        self.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        self.diag = Diagnostics(self, hardware_id=NODE_NAME, period=self.p["diagnostics_period"], timer=False)
        self.diag.set_level(Diagnostics.WARN, "unconfigured")
        self.shell = ControlShell(self, self.diag, self.log, latest_state_wins=self.p["latest_state_wins"],
                                  arrival_clock=self.p["arrival_clock"])
        self.pub_tau = self.create_publisher(JointState, "~/external_torque", 10)
        self.pub_wrench = self.create_publisher(WrenchStamped, "~/external_wrench", 10)
        self.pub_collision = self.create_publisher(Bool, "~/collision", collision_qos())
        self._tau_writer: JointStateEffortWriter | None = None
        self._wrench = WrenchStamped()
        self._collision = None
        self.published = 0
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.create_service(Trigger, "~/reset_collision", self._on_reset, qos_profile=service_qos())
        create_payload_service(self, lambda: self.p, self.diag)
        self._timer = steady_timer(self, tick_period(self.p), self._tick)
        autostart(self, self.p["autostart"], lambda: self.shell.config_error)

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state) -> TransitionCallbackReturn:
        result = self.shell.configure(joint_states_topic=self.p["joint_states_topic"],
                                      on_joint_state=self._on_joint_state_raw, make_loader=self._inputs)
        if result != TransitionCallbackReturn.SUCCESS:
            self._teardown()
        return result

    def _inputs(self) -> ModelLoader:
        """The commanded-torque subscription (``torque_source`` not ``measured``), then the model loader (run
        by :meth:`ControlShell.configure`: an error here fails the transition)."""
        if self.p["torque_source"] != "measured":
            self.sub_cmd = self.create_subscription(Float64MultiArray, self.p["command_topic"], self._on_command, 10)
        return ModelLoader(self, self._on_model, self.log, self.p)

    def on_activate(self, state) -> TransitionCallbackReturn:
        self.shell.active = True
        return super().on_activate(state)

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        self.shell.active = False
        self.diag.set_level(Diagnostics.WARN, "inactive")
        return super().on_deactivate(state)

    def on_cleanup(self, state) -> TransitionCallbackReturn:
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state) -> TransitionCallbackReturn:
        self.shell.active = False
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def _teardown(self) -> None:
        if self.sub_cmd is not None:
            try:
                self.destroy_subscription(self.sub_cmd)
            except Exception:  # noqa: BLE001 - node already gone
                pass
        self.sub_cmd = None
        self.shell.cleanup()

    # ------------------------------------------------------------------ model
    def _on_model(self, model, label: str) -> None:
        used = model_with_params(model, self.p)
        joints = list(self.p["command_joints"]) or None
        core = ExternalTorqueCore(used, settings_from(self.p), joints)
        if self.p["wrench_frame"]:
            core.engine.frame_placement(used.neutral(), self.p["wrench_frame"])  # unknown frame: refuse now
        self._tau_writer = JointStateEffortWriter(used.joint_names)
        self.shell.attach(core)
        self.base_model, self.model = model, used
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

        change = self.shell.set_parameters(params, self._specs, self.p, checked_settings, self.base_model)
        if change.result.successful:
            self.p = change.values
            if change.model is not None:
                self.model = change.model
        return change.result

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
        if core is not None and self.shell.active:
            res = core.step(self.get_clock().now().nanoseconds, self.shell.arrival_now_ns()) if core.mapper.ready else None
            if res is not None and res.tau_ext is None:
                self.shell.report(res)
            self.diag.set("collision", bool(core.detector.collision))
            self.diag.set("collisions", core.detector.count)
            self.diag.set("published", self.published)
            self.diag.set("no_torque", core.no_torque)
            self.diag.set("nonfinite_withheld", core.nonfinite)
            self.diag.set("implausible_torque_samples", core.bad_torque)
            self.diag.set("rejected_by_joint", dict(core.mapper.rejected_joints))
        self.diag.publish_due()


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_dynamics_ros external_torque_observer`` entry point (SIGINT stops it)."""
    return run_node(NODE_NAME, ExternalTorqueObserverNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
