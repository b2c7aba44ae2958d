"""Gravity-compensation node: ``joint_states`` -> tau = g(q) [+ friction] -> ``<controller_name>/commands``.

A managed (lifecycle) node over :class:`~robot_dynamics_ros.control.gravity_compensator.GravityCompensator`,
which holds the whole policy (readiness, plausibility gates, staleness, clamping, the safe command on stale
input). This module only moves bytes, parameters and diagnostics:

* configure: loads the model (``urdf_path`` > ``robot_description`` parameter > ``robot_description``
  topic), creates the topics; the start-up cross-check (Pinocchio vs Newton–Euler, numba compile) runs in
  a child process (:mod:`~robot_dynamics_ros.nodes.startup_check`) waited for on a worker thread (in the
  constructor, before any executor spins the node, in line), commands are withheld until it passes;
* activate: commanding starts; deactivate: one safe command (``stale_policy``) and silence;
* ``autostart`` (default true): configure + activate at construction, so ``robot-dynamics run`` and the
  demo need no lifecycle manager.

Topics are relative (``joint_states``, ``<controller_name>/commands``, ``robot_description``): namespaces
and remaps apply. The joint_states callback acts on the newest queued state and counts what it skips
(docs/realtime.md, "Latest state wins"). Parameters, QoS overrides, services: docs/nodes.md and
:data:`SCHEMA`.
"""
from __future__ import annotations

import threading

from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.parameter import Parameter
from std_srvs.srv import SetBool

from robot_dynamics_ros.control.gravity_compensator import GravityCompensator, GravitySettings
from robot_dynamics_ros.nodes import startup_check
from robot_dynamics_ros.nodes.control_shell import ControlShell, ShellViews, core_settings_kwargs, tick_period
from robot_dynamics_ros.nodes.diagnostics import Diagnostics, RateLimitedLog
from robot_dynamics_ros.nodes.model_source import ModelLoader, model_with_params
from robot_dynamics_ros.nodes.parameters import declare_parameters, node_schema
from robot_dynamics_ros.nodes.runtime import autostart, run_node, steady_timer
from robot_dynamics_ros.nodes.services import create_payload_service
from robot_dynamics_ros.nodes.wire import service_qos

NODE_NAME = "gravity_compensation"

#: the node's parameters (``params/gravity_compensation.yaml``: the robot source, the shared control
#: parameters and this node's own)
SCHEMA = node_schema(NODE_NAME)


def settings_from(p) -> GravitySettings:
    """The core's settings from the node's parameter values."""
    return GravitySettings(enabled=bool(p["enabled"]), friction_compensation=bool(p["friction_compensation"]),
                           hardware_compensates_gravity=bool(p["hardware_compensates_gravity"]),
                           stale_policy=p["stale_policy"], **core_settings_kwargs(p))


class GravityCompensationNode(ShellViews, LifecycleNode):
    """The gravity-compensation node (see the module docstring).

    Args:
        node_name: ROS node name.
        **kwargs: passed to ``rclpy.lifecycle.LifecycleNode`` (``context``, ``parameter_overrides``, ...).

    Raises (with ``autostart``):
        UserError / URDFError: the URDF from ``urdf_path`` / ``robot_description`` cannot be read.
        ValueError: a parameter override fails its check, or a ``joints`` entry is not a model joint.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        self.model = self.base_model = None
        self._shut = False
        self._constructing = False
        super().__init__(node_name, **kwargs)
        self._specs = SCHEMA.by_name
        self.p = declare_parameters(self, self._specs.values())
        self.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        self.diag = Diagnostics(self, hardware_id=NODE_NAME, period=self.p["diagnostics_period"], timer=False)
        self.diag.set_level(Diagnostics.WARN, "unconfigured")
        self._clock = self.get_clock()
        self.published = 0
        self._kick = False
        self.shell = ControlShell(self, self.diag, self.log, latest_state_wins=self.p["latest_state_wins"],
                                  arrival_clock=self.p["arrival_clock"])
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.create_service(SetBool, "~/enable", self._on_enable, qos_profile=service_qos())
        create_payload_service(self, lambda: self.p, self.diag)
        self._timer = steady_timer(self, tick_period(self.p), self._tick)
        self._constructing = True
        try:
            autostart(self, self.p["autostart"], lambda: self.shell.config_error)
        finally:
            self._constructing = False

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state) -> TransitionCallbackReturn:
        return self.shell.configure(
            command_topic=f"{str(self.p['controller_name']).rstrip('/')}/commands",
            joint_states_topic=self.p["joint_states_topic"], on_joint_state=self._on_joint_state_raw,
            make_loader=lambda: ModelLoader(self, self._on_model, self.log, self.p))

    def on_activate(self, state) -> TransitionCallbackReturn:
        self.shell.active = True
        return super().on_activate(state)

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        self.shell.active = False
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
        used = model_with_params(model, self.p)
        core = GravityCompensator(used, settings_from(self.p), joints)
        samples = int(self.p["crossval_samples"])
        if samples:
            core.fault = "start-up cross-check running"
            if self._constructing:   # no executor spins this node yet: nothing to block
                self._crossval(core, used, samples)
            else:
                threading.Thread(target=self._crossval, args=(core, used, samples), daemon=True,
                                 name="crossval").start()
        self.shell.attach(core, joints)
        self.base_model, self.model = model, used
        self.diag.set("robot", model.description.name)
        self.diag.set("model_source", label)
        self.get_logger().info(f"robot '{model.description.name}' from {label}: {model.n} joints, "
                               f"commands for {joints} on {self.shell.command_topic}")

    def _crossval(self, core, model, samples: int) -> None:
        """Pinocchio vs in-package Newton-Euler in a child process (:mod:`~robot_dynamics_ros.nodes.startup_check`:
        this process never imports numba), from a worker thread or, at construction, in line."""
        try:
            spec = startup_check.model_spec(model, joint_limits=self.p["joint_limits_path"],
                                            friction=self.p["friction_path"])
            ok, text = startup_check.run_in_child(spec, samples)
        except Exception as exc:  # noqa: BLE001 - a failing check must not take the node down
            ok, text = False, f"crossval could not run: {exc}"
        core.fault = "" if ok else text
        self._kick = ok and not self._constructing   # the timer answers the last state (a lockstep simulator waits)
        self.diag.set("crossval", text)
        if not ok:
            self.get_logger().error(text + ": not publishing")

    # ------------------------------------------------------------------ parameters / services
    def _on_set_parameters(self, params) -> SetParametersResult:
        change = self.shell.set_parameters(params, self._specs, self.p, settings_from, self.base_model)
        if change.result.successful:
            self.p = change.values
            if change.model is not None:
                self.model = change.model
            self.log = self.shell.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        return change.result

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
        if res.command is not None and self.shell.publish(res.command):
            self.published += 1
            if res.safe:
                self.diag.count("safe")

    def _tick(self) -> None:
        """Timer: staleness seen when joint_states stop altogether (the safe command), diagnostics; the
        first command after the start-up cross-check passed."""
        core = self.core
        if self._kick and core is not None and self.shell.active and core.mapper.ready:
            self._kick = False
            res = core.step(self._clock.now().nanoseconds, self.shell.arrival_now_ns())
            if res.command is not None and not res.safe and self.shell.publish(res.command):
                self.published += 1
        self.shell.tick(self.p["state_timeout"])
        self.diag.set("enabled", bool(self.p["enabled"]))
        self.diag.set("published", self.published)
        self.diag.publish_due()

    # ------------------------------------------------------------------ shutdown
    def _stop(self) -> None:
        if self._shut or not hasattr(self, "shell"):
            self._shut = True
            return
        self._shut = True
        shell = self.shell
        shell.active = False
        if self.p.get("publish_zero_on_shutdown") and shell.writer is not None:
            try:
                shell.publish([0.0] * shell.writer.n)
            except Exception:  # noqa: BLE001 - context may already be gone
                pass
        self.shell.cleanup()

    def destroy_node(self) -> None:
        """Stop publishing for good (optionally after one zero-torque command), then destroy the node."""
        self._stop()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_dynamics_ros gravity_compensation`` entry point (SIGINT stops it)."""
    return run_node(NODE_NAME, GravityCompensationNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
