"""Gravity-compensation node: ``joint_states`` -> tau = g(q) [+ friction] -> ``<controller_name>/commands``.

A managed (lifecycle) node over :class:`~robot_dynamics_ros.control.gravity_compensator.GravityCompensator`,
which holds the whole policy (readiness, plausibility gates, staleness, clamping, the safe command on stale
input). This module only moves bytes, parameters and diagnostics:

* configure: loads the model (``urdf_path`` > ``robot_description`` parameter > ``robot_description``
  topic), creates the topics; the start-up cross-check (Pinocchio vs Newton–Euler, numba compile) runs on
  a worker thread (in the constructor, before any executor spins the node, it runs in line), commands
  are withheld until it passes;
* activate: commanding starts; deactivate: one safe command (``stale_policy``) and silence;
* ``autostart`` (default true): configure + activate at construction, so ``robot-dynamics run`` and the
  demo need no lifecycle manager.

Topics are relative (``joint_states``, ``<controller_name>/commands``, ``robot_description``): namespaces
and remaps apply. The joint_states callback acts on the newest queued state and counts what it skips
(docs/realtime.md, "Latest state wins"). Parameters, QoS overrides, services: docs/nodes.md and
:data:`PARAMS`.
"""
from __future__ import annotations

import threading
import time

from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.parameter import Parameter
from std_srvs.srv import SetBool

from robot_dynamics_ros.control.cdr import Float64MultiArrayWriter, JointStateReader
from robot_dynamics_ros.control.gravity_compensator import STALE_POLICIES, GravityCompensator, GravitySettings
from robot_dynamics_ros.nodes import common
from robot_dynamics_ros.nodes.common import Diagnostics, ParamSpec, RateLimitedLog

NODE_NAME = "gravity_compensation"

#: parameters of this node besides :func:`common.robot_source_params` and :data:`common.CONTROL_PARAMS`
PARAMS = [
    ParamSpec("enabled", True, "Compensation on/off; ~/enable (std_srvs/SetBool) sets this parameter. "
              "Disabled: zero torques are published (the drive gets an explicit zero)."),
    ParamSpec("gravity", [0.0, 0.0, -9.81], "Gravity vector in the robot base (URDF root) frame, m/s²; "
              "tilted or wall mounts.", length=3, range=(-100.0, 100.0)),
    ParamSpec("friction_compensation", False, "Add viscous + Coulomb friction torque from URDF <dynamics> "
              "(needs joint velocities; a NaN velocity then counts as missing)."),
    ParamSpec("hardware_compensates_gravity", False, "The drives already add g(q): leave it out (only "
              "friction, if enabled, is published)."),
    ParamSpec("stale_policy", "hold", "Command while joint_states are stale: hold = g(q) at the last "
              "accepted state (WARN), zero = zeros (ERROR).", choices=STALE_POLICIES),
    ParamSpec("publish_zero_on_shutdown", False, "Publish one zero-torque command when the node shuts down "
              "(default: publish nothing further)."),
    ParamSpec("crossval_samples", 20, "At configure, compare Pinocchio with the in-package Newton-Euler on "
              "this many random states (0: skip), on a worker thread; no command until it passes, none at "
              "all on a mismatch (ERROR diagnostic).", range=(0, 100000), read_only=True),
]


def settings_from(p) -> GravitySettings:
    """The core's settings from the node's parameter values."""
    return GravitySettings(enabled=bool(p["enabled"]), friction_compensation=bool(p["friction_compensation"]),
                           hardware_compensates_gravity=bool(p["hardware_compensates_gravity"]),
                           stale_policy=p["stale_policy"], **common.core_settings_kwargs(p))


class GravityCompensationNode(LifecycleNode):
    """The gravity-compensation node (see the module docstring).

    Args:
        node_name: ROS node name.
        **kwargs: passed to ``rclpy.lifecycle.LifecycleNode`` (``context``, ``parameter_overrides``, ...).

    Raises (with ``autostart``):
        UserError / URDFError: the URDF from ``urdf_path`` / ``robot_description`` cannot be read.
        ValueError: a parameter override fails its check, or a ``joints`` entry is not a model joint.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        self.core: GravityCompensator | None = None
        self.model = None
        self._active = self._shut = False
        self.pub = self.sub = self.loader = None
        self.command_topic = ""
        self._constructing = False
        super().__init__(node_name, **kwargs)
        self._specs = {s.name: s for s in [*common.robot_source_params(), *common.CONTROL_PARAMS, *PARAMS]}
        self.p = common.declare_parameters(self, self._specs.values())
        self.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        self.diag = Diagnostics(self, hardware_id=NODE_NAME, period=self.p["diagnostics_period"], timer=False)
        self.diag.set_level(Diagnostics.WARN, "unconfigured")
        self._clock = self.get_clock()
        self._reader = JointStateReader()
        self._writer: Float64MultiArrayWriter | None = None
        self.published = 0
        self._kick = False
        self.shell = common.ControlShell(self, self.diag, self.log)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.create_service(SetBool, "~/enable", self._on_enable, qos_profile=common.service_qos())
        common.create_payload_service(self)
        self._timer = common.steady_timer(self, common.tick_period(self.p), self._tick)
        self._constructing = True
        try:
            common.autostart(self)
        finally:
            self._constructing = False

    @property
    def mapper(self):
        """The core's :class:`~robot_dynamics_ros.control.joint_mapping.JointStateMapper` (None before a model)."""
        return None if self.core is None else self.core.mapper

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state) -> TransitionCallbackReturn:
        return self.shell.configure(lambda: common.ModelLoader(self, self._on_model, self.log, self.p))

    def on_activate(self, state) -> TransitionCallbackReturn:
        self._active = True
        return super().on_activate(state)

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        self._active = False
        self.shell.publish_safe("deactivated")
        return super().on_deactivate(state)

    def on_cleanup(self, state) -> TransitionCallbackReturn:
        self.shell.cleanup()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state) -> TransitionCallbackReturn:
        self._stop()
        return TransitionCallbackReturn.SUCCESS

    # ------------------------------------------------------------------ model
    def _on_model(self, model, label: str) -> None:
        joints = self.p["joints"] or list(model.joint_names)
        used = common.model_with_params(model, self.p)
        core = GravityCompensator(used, settings_from(self.p), joints)
        samples = int(self.p["crossval_samples"])
        if samples:
            core.fault = "start-up cross-check running"
            if self._constructing:   # no executor spins this node yet: nothing to block
                self._crossval(core, used, samples)
            else:
                threading.Thread(target=self._crossval, args=(core, used, samples), daemon=True,
                                 name="crossval").start()
        self._writer = Float64MultiArrayWriter(len(joints), [(",".join(joints), len(joints), len(joints))])
        self.base_model, self.model, self.core = model, used, core
        self.diag.set("robot", model.description.name)
        self.diag.set("model_source", label)
        self.get_logger().info(f"robot '{model.description.name}' from {label}: {model.n} joints, "
                               f"commands for {joints} on {self.pub.topic_name}")

    def _crossval(self, core, model, samples: int) -> None:
        """Pinocchio vs in-package Newton-Euler (:func:`dynamics.crossval.crossvalidate`), worker thread."""
        try:
            from robot_dynamics_ros.dynamics.crossval import crossvalidate

            report = crossvalidate(model, samples=samples, mujoco=False)
            worst = report.worst("newton-euler")
            ok = report.passed
            text = (f"passed: {samples} states, max |NE - Pinocchio| {worst:.1e}" if ok else
                    f"crossval FAILED: max |NE - Pinocchio| {worst:.3e} on {samples} states")
        except Exception as exc:  # noqa: BLE001 - a failing check must not take the node down
            ok, text = False, f"crossval could not run: {exc}"
        core.fault = "" if ok else text
        self._kick = ok and not self._constructing   # the timer answers the last state (a lockstep simulator waits)
        self.diag.set("crossval", text)
        if not ok:
            self.get_logger().error(text + ": not publishing")

    # ------------------------------------------------------------------ parameters / services
    def _on_set_parameters(self, params) -> SetParametersResult:
        result = self.shell.set_parameters(params, settings_from)
        if result.successful:
            self.log = self.shell.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        return result

    def _on_enable(self, request, response):
        result = self.set_parameters([Parameter("enabled", value=bool(request.data))])[0]
        response.success = bool(result.successful)
        response.message = ("gravity compensation " + ("enabled" if request.data else "disabled (publishing "
                            "zeros)")) if result.successful else f"refused: {result.reason}"
        self.get_logger().info(response.message)
        return response

    # ------------------------------------------------------------------ hot path
    def _on_joint_state_raw(self, raw: bytes) -> None:
        """The joint_states callback: a serialized ``sensor_msgs/JointState`` (``raw=True`` subscription)."""
        self.shell.handle(raw, self._publish)

    def _publish(self, res, fields, now_ns: int) -> None:
        if res.command is not None:
            self.pub.publish(self._writer.write(res.command))
            self.published += 1
            if res.safe:
                self.diag.count("safe")

    def _tick(self) -> None:
        """Timer: staleness seen when joint_states stop altogether (the safe command), diagnostics; the
        first command after the start-up cross-check passed."""
        core = self.core
        if self._kick and core is not None and self._active and core.mapper.ready:
            self._kick = False
            res = core.step(self._clock.now().nanoseconds, time.monotonic_ns())
            if res.command is not None and not res.safe:
                self.pub.publish(self._writer.write(res.command))
                self.published += 1
        self.shell.tick(self._active and not self._shut, lambda: self._writer)
        self.diag.set("enabled", bool(self.p["enabled"]))
        self.diag.set("published", self.published)
        self.diag.publish_due()

    # ------------------------------------------------------------------ shutdown
    def _stop(self) -> None:
        if self._shut or not hasattr(self, "shell"):
            self._shut = True
            return
        self._shut = True
        self._active = False
        if getattr(self, "p", {}).get("publish_zero_on_shutdown") and self._writer is not None and self.pub is not None:
            try:
                self.pub.publish(self._writer.write([0.0] * self._writer.n))
            except Exception:  # noqa: BLE001 - context may already be gone
                pass
        self.shell.cleanup()

    def destroy_node(self) -> None:
        """Stop publishing for good (optionally after one zero-torque command), then destroy the node."""
        self._stop()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_dynamics_ros gravity_compensation`` entry point (SIGINT stops it)."""
    return common.run_node(NODE_NAME, GravityCompensationNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
