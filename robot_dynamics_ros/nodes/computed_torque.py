"""Computed-torque node: follows a ``trajectory_msgs/JointTrajectory`` with model-based effort commands.

A managed (lifecycle) node over :class:`~robot_dynamics_ros.control.computed_torque.ComputedTorqueController`
(the laws, ``joint_trajectory_controller`` semantics, the input policy and the safe command on stale input:
gravity only at the last known state, ERROR). This module moves bytes, parameters and diagnostics:

* subscribes ``joint_states`` (``sensor_msgs/JointState``, any order, subsets allowed; the newest queued
  state wins) and ``~/joint_trajectory`` (header stamp zero = start now; a new trajectory replaces the old
  one from its start time; an empty one cancels);
* publishes ``<controller_name>/commands`` (``std_msgs/Float64MultiArray``, one effort per entry of
  ``joints``, N·m) and ``~/desired_state`` (``position`` q_d, ``velocity`` qd_d, ``effort`` the feedforward
  RNEA(q_d, qd_d, qdd_d), for the command joints, stamped with the sampling time);
* ticks (``tick_source``): ``timer`` at ``control_rate`` Hz on the node clock, or ``joint_states``, one tick
  per accepted state sampled at its header stamp (a deterministic closed loop with a lockstep simulator);
  the timer's achieved rate is measured each diagnostics period (``control_rate_achieved_hz``) and a rate
  below :data:`ACHIEVED_RATE_FRACTION` of ``control_rate`` is a WARN naming both;
* friction feedforward ``friction_compensation`` (default on): the model's friction torque at the desired
  velocity added in the feedforward and computed_torque modes (``control/computed_torque.py``);
* gains ``gains.<joint>.{p,d}`` (N·m/rad, N·m·s/rad; feedforward/gravity), ``.{kp,kd}`` (1/s², 1/s;
  computed_torque), checked on set; lifecycle and ``autostart`` as the gravity node's;
* collision reaction: ``collision_topic`` True → gravity only until ``~/reset_collision``;
* ``~/follow_joint_trajectory`` (FollowJointTrajectory action), ``~/speed_scaling_input``,
  ``hardware_compensates_gravity`` and ``unset_gains``: :mod:`robot_dynamics_ros.nodes.trajectory_action`;
* topics are relative (namespaces and remaps apply). Parameters and QoS overrides: docs/nodes.md.
"""
from __future__ import annotations

import sys
import time

from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics_ros.control.computed_torque import (  # noqa: F401 - re-exported for callers
    DEFAULT_GAINS, MODES, ComputedTorqueController, ComputedTorqueSettings, Gains, control_torque,
)
from robot_dynamics_ros.control.core import OK
from robot_dynamics_ros.control.execution import GoalRejected
from robot_dynamics_ros.nodes import trajectory_action
from robot_dynamics_ros.nodes.control_shell import ControlShell, ShellViews, core_settings_kwargs, tick_period
from robot_dynamics_ros.nodes.diagnostics import Diagnostics, RateLimitedLog, RateMeter
from robot_dynamics_ros.nodes.model_source import ModelLoader, model_with_params
from robot_dynamics_ros.nodes.parameters import declare_parameters, node_schema
from robot_dynamics_ros.nodes.runtime import autostart, run_node, steady_timer
from robot_dynamics_ros.nodes.services import create_collision_reaction, create_payload_service

__all__ = ["MODES", "Gains", "control_torque", "ComputedTorqueNode", "main", "SCHEMA"]

NODE_NAME = "computed_torque"
#: below this fraction of ``control_rate`` the achieved timer rate is a WARN (a Python timer on a loaded
#: machine reaches a few kHz: 10 kHz requested ran at 5.4 kHz)
ACHIEVED_RATE_FRACTION = 0.9

#: the node's parameters (``params/computed_torque.yaml``); ``gains.<joint>.*`` are declared per model joint
#: from its ``joint`` template when a model arrives
SCHEMA = node_schema(NODE_NAME)


class ComputedTorqueNode(ShellViews, LifecycleNode):
    """Trajectory sampling + feedforward / computed-torque effort commands (see the module docstring).

    Args:
        node_name: the ROS node name.
        **kwargs: passed to ``rclpy.lifecycle.LifecycleNode`` (``context``, ``parameter_overrides``, ...).

    Raises (at construction, with ``autostart``):
        UserError / URDFError: a missing or invalid URDF; mode computed_torque with massless joints.
        ValueError: a parameter override fails its check (naming the parameter and the value).
    """

    def __init__(self, node_name: str = "computed_torque", **kwargs):
        kwargs.setdefault("automatically_declare_parameters_from_overrides", False)
        kwargs.setdefault("allow_undeclared_parameters", False)
        self.model = self.base_model = None
        self.pub_desired = self.sub_traj = self.timer = None
        super().__init__(node_name, **kwargs)
        self._specs = SCHEMA.by_name
        self.p = declare_parameters(self, self._specs.values())
        self.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        self.diag = self.diagnostics = Diagnostics(self, hardware_id=NODE_NAME, period=self.p["diagnostics_period"],
                                                   timer=False)
        self.shell = ControlShell(self, self.diag, self.log, latest_state_wins=self.p["latest_state_wins"],
                                  arrival_clock=self.p["arrival_clock"])
        self.actions = trajectory_action.TrajectoryActions(self, is_active=lambda: self.shell.active,
                                                         reject=self._reject)
        self._clock = self.get_clock()
        self._epoch_ns = self._clock.now().nanoseconds
        self._on_states = self.p["tick_source"] == "joint_states"
        self._desired_msg = JointState()
        #: the last rejection reason of a trajectory (also in diagnostics), "" if none
        self.last_rejection = ""
        self.trajectories_accepted = self.trajectories_rejected = self.ticks_published = 0
        self._control_ticks = self._ticks_seen = 0
        self.add_on_set_parameters_callback(self._on_set_parameters)
        create_payload_service(self, lambda: self.p, self.diag)
        create_collision_reaction(self, str(self.p["collision_topic"] or ""), lambda: self.shell.core)
        self._rate = RateMeter(float(self.p["diagnostics_period"]))
        self._safety = steady_timer(self, tick_period(self.p), self._tick)
        autostart(self, self.p["autostart"], lambda: self.shell.config_error)

    # -------------------------------------------------------------- lifecycle
    def on_configure(self, state):
        result = self.shell.configure(
            command_topic=f"{str(self.p['controller_name']).rstrip('/')}/commands",
            joint_states_topic=self.p["joint_states_topic"], on_joint_state=self._on_joint_state_raw,
            make_loader=lambda: ModelLoader(self, self._on_model, self.log, self.p))
        if result == TransitionCallbackReturn.SUCCESS:
            self.pub_desired = self.create_publisher(JointState, "~/desired_state", 10)
            self.sub_traj = self.create_subscription(JointTrajectory, "~/joint_trajectory",
                                                     self._on_trajectory, 10)
            self.actions.configure()
        return result

    def on_activate(self, state):
        self.shell.active = True
        if not self._on_states:
            self.timer = self.create_timer(1.0 / float(self.p["control_rate"]), self._on_timer)
            self._rate.reset()
        return super().on_activate(state)

    def on_deactivate(self, state):
        self.shell.active = False
        self._stop_timer()
        self.actions.deactivate()
        self.shell.publish_safe("deactivated")
        return super().on_deactivate(state)

    def on_cleanup(self, state):
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state):
        self.shell.active = False
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def _stop_timer(self):
        if self.timer is not None:
            self.destroy_timer(self.timer)
            self.timer = None

    def _teardown(self):
        self._stop_timer()
        self.actions.teardown()
        for entity, destroy in ((self.pub_desired, self.destroy_publisher),
                                (self.sub_traj, self.destroy_subscription)):
            if entity is not None:
                destroy(entity)
        self.pub_desired = self.sub_traj = None
        self.shell.cleanup()

    # -------------------------------------------------------------- model and parameters
    def _settings(self, p, joints) -> ComputedTorqueSettings:
        """The core's settings from parameter values ``p``, gains of the model joints ``joints``."""
        gains: dict[str, dict[str, float]] = {}
        for joint in joints:
            for kind in ("p", "d", "kp", "kd"):
                gains.setdefault(joint, {})[kind] = float(p.get(f"gains.{joint}.{kind}", DEFAULT_GAINS[kind]))
        return ComputedTorqueSettings(mode=p["mode"], gains=gains,
                                      check_position_limits=bool(p["check_position_limits"]),
                                      friction_compensation=bool(p["friction_compensation"]),
                                      **trajectory_action.core_settings_kwargs(p),
                                      **core_settings_kwargs(p))

    def _on_model(self, model, label: str) -> None:
        self._declare_gains(model)
        used = model_with_params(model, self.p)
        core = ComputedTorqueController(used, self._settings(self.p, model.joint_names),
                                        list(self.p["joints"]) or None, epoch_ns=self._epoch_ns)
        names = list(core.mapper.command_joints)
        self._desired_msg = JointState()
        self._desired_msg.name = names
        self.shell.attach(core, names)
        self.base_model, self.model = model, used
        self.diag.set("model", label)
        self.get_logger().info(f"model from {label}: {model.n} joints {list(model.joint_names)}; "
                               f"command joints {names}; mode {self.p['mode']}")

    def _declare_gains(self, model) -> None:
        """Declare ``gains.<joint>.*`` (the schema's ``joint`` template) for the joints of ``model`` not
        declared yet; the values of all of them into the node's parameter values."""
        specs = []
        for joint in model.joint_names:
            for spec in SCHEMA.template("joint", joint):
                self._specs[spec.name] = spec
                if not self.has_parameter(spec.name):
                    specs.append(spec)
                else:
                    self.p[spec.name] = float(self.get_parameter(spec.name).value)
        self.p.update(declare_parameters(self, specs))

    def _on_set_parameters(self, params):
        def settings_of(new):
            return None if self.core is None else self._settings(new, self.core.model.joint_names)

        change = self.shell.set_parameters(params, self._specs, self.p, settings_of, self.base_model)
        result = change.result
        if not result.successful:
            self.log.warning("param", f"parameter change rejected: {result.reason}")
            return result
        self.p = change.values
        if change.model is not None:
            self.model = change.model
        if any(p.name == "control_rate" for p in params) and self.timer is not None:
            self._stop_timer()
            self.timer = self.create_timer(1.0 / float(self.p["control_rate"]), self._on_timer)
            self._rate.reset()
        return result

    # -------------------------------------------------------------- subscriptions
    def _on_joint_state_raw(self, raw: bytes) -> None:
        """The joint_states callback: a serialized ``sensor_msgs/JointState`` (``raw=True``)."""
        got = self.shell.receive(raw)
        if got is None:
            return
        fields, arrival, now_ns = got
        if self._on_states:
            self._control(now_ns, arrival, fields.stamp_ns or now_ns)

    def _on_trajectory(self, msg) -> None:
        core = self.core
        if core is None:
            self._reject("no robot model loaded yet")
            return
        try:
            spec, t_start, now_s = self.actions.submit_topic(msg)
        except GoalRejected as exc:
            self._reject(str(exc))
            return
        except Exception as exc:  # a message must never stop the node: refused, named, and the node serves on
            self._reject(f"could not be handled ({type(exc).__name__}: {exc})")
            return
        self.trajectories_accepted += 1
        self.diag.count("trajectories_accepted")
        what = "cancel (hold)" if spec.empty else f"{len(spec.times)} points over {spec.times[-1]:.3f} s"
        self.log.info("trajectory_accepted", f"trajectory accepted: {what}, starts in {t_start - now_s:+.3f} s")

    def _reject(self, reason: str, what: str = "trajectory") -> None:
        self.last_rejection = reason
        self.trajectories_rejected += 1
        self.diag.count("trajectories_rejected")
        self.diag.set("last_rejection", reason)
        self.log.error("trajectory_rejected", f"{what} rejected: {reason}; keeping the previous trajectory")

    # -------------------------------------------------------------- control tick
    def _on_timer(self) -> None:
        self._control_ticks += 1
        if self.core is None or not self.shell.active:
            return
        now = self._clock.now().nanoseconds
        self._control(now, self.shell.arrival_now_ns(), now)

    def _control(self, now_ns: int, arrival_ns: int, sample_ns: int) -> None:
        """One control tick: the core's command (or safe command) at ``sample_ns``, published."""
        t0 = time.perf_counter()
        core = self.core
        res = core.step(now_ns, arrival_ns, sample_ns)
        self.actions.tick(sample_ns)
        if res.command is not None and self.shell.publish(res.command):
            self.ticks_published += 1
            self.diag.count("safe" if res.safe else "commands")
            if not res.safe:
                d, idx = core.desired, core.mapper.command_index
                ds = self._desired_msg
                ds.header.stamp.sec, ds.header.stamp.nanosec = divmod(sample_ns, 1_000_000_000)
                ds.position = d.q[idx].tolist()
                ds.velocity = d.qd[idx].tolist()
                ds.effort = core.feedforward[idx].tolist()
                self.pub_desired.publish(ds)
                self.diag.set("tracking", d.tracking)
        if res.level != OK or self.diag.level != OK:
            self.shell.report(res)
        self.diag.latency.add(time.perf_counter() - t0)

    def _tick(self) -> None:
        """Safety timer: the safe command when the state goes stale between joint-state ticks, and
        diagnostics (timer ticks publish the safe command themselves)."""
        # the control timer runs on the node clock: when sim time stops, this steady timer publishes
        quiet, self._ticks_seen = self._control_ticks == self._ticks_seen, self._control_ticks
        self.shell.tick(self.p["state_timeout"], publish_safe=self._on_states or quiet)
        self.check_rate(self._clock.now().nanoseconds * 1e-9)
        self.diag.publish_due()

    def check_rate(self, now_s: float) -> float | None:
        """The control timer's achieved rate (ticks per second of the node clock, the clock it runs on) once
        per diagnostics period, in the diagnostics (``control_rate_achieved_hz``); below
        :data:`ACHIEVED_RATE_FRACTION` of ``control_rate``: the WARN condition ``"control_rate X Hz requested,
        Y Hz achieved"`` (logged rate-limited) until a period reaches it again. None between measurements
        or without a running control timer."""
        if self.timer is None or not self.shell.active:
            self._rate.reset()
            self.diag.condition("control_rate", None)
            return None
        rate = self._rate.sample(self._control_ticks, now_s)
        if rate is None:
            return None
        requested = float(self.p["control_rate"])
        self.diag.set("control_rate_achieved_hz", round(rate, 1))
        if rate < ACHIEVED_RATE_FRACTION * requested:
            text = f"control_rate {requested:g} Hz requested, {rate:.0f} Hz achieved"
            self.diag.condition("control_rate", Diagnostics.WARN, text)
            self.log.warning("control_rate", text)
        else:
            self.diag.condition("control_rate", None)
        return rate

    def destroy_node(self):
        self.shell.active = False
        super().destroy_node()


def main(args=None) -> int:
    """``ros2 run robot_dynamics_ros computed_torque`` entry point: spin (on the executor of the
    ``executor`` parameter) until Ctrl-C."""
    return run_node(NODE_NAME, ComputedTorqueNode, args,
                           executor_kind=lambda node: node.p["executor"])


if __name__ == "__main__":
    sys.exit(main())
