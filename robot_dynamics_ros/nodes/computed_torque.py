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
* friction feedforward ``friction_compensation`` (default on): the model's friction torque at the desired
  velocity added in the feedforward and computed_torque modes (``control/computed_torque.py``);
* gains ``gains.<joint>.{p,d}`` (N·m/rad, N·m·s/rad; feedforward/gravity), ``.{kp,kd}`` (1/s², 1/s;
  computed_torque), checked on set; lifecycle and ``autostart`` as the gravity node's;
* collision reaction: ``collision_topic`` True → gravity only until ``~/reset_collision``;
* topics are relative (namespaces and remaps apply). Parameters and QoS overrides: docs/nodes.md.
"""
from __future__ import annotations

import sys
import time

from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics_ros.control.cdr import Float64MultiArrayWriter, JointStateReader
from robot_dynamics_ros.control.computed_torque import (  # noqa: F401 - re-exported for callers
    DEFAULT_GAINS, GAIN_TEXT, GAIN_UNITS, MODES, ComputedTorqueController, ComputedTorqueSettings, Gains,
    control_torque,
)
from robot_dynamics_ros.control.core import OK
from robot_dynamics_ros.control.interpolation import TrajectoryRejected
from robot_dynamics_ros.nodes import common
from robot_dynamics_ros.nodes.common import CONTROL_PARAMS, ParamSpec, robot_source_params

__all__ = ["MODES", "Gains", "control_torque", "ComputedTorqueNode", "main"]


def _node_params():
    return robot_source_params() + CONTROL_PARAMS + [
        ParamSpec("mode", "feedforward", "Control law: feedforward (RNEA of the desired motion + joint PD), "
                  "computed_torque (M(q)(qdd_d + kd*de + kp*e) + C qd + g; needs every joint to move mass), or "
                  "gravity (g(q) + joint PD).", choices=MODES),
        ParamSpec("tick_source", "timer", "What triggers a control tick: a timer at control_rate on the "
                  "node clock, or each accepted joint_states message (sampled at its header stamp).",
                  choices=("timer", "joint_states"), read_only=True),
        ParamSpec("control_rate", 500.0, "Timer ticks per second (Hz) when tick_source is timer. Run-time "
                  "settable.", range=(1.0, 10000.0)),
        ParamSpec("check_position_limits", True, "Reject trajectories with positions outside the URDF "
                  "limits."),
        ParamSpec("friction_compensation", True, "feedforward and computed_torque modes: add the model's "
                  "friction torque at the desired velocity, damping*qd_d + friction*sign(qd_d) from URDF "
                  "<dynamics> (or the identified friction YAML of friction_path, with its tanh(qd/v_s) law); "
                  "a no-op without friction in the model. false: leave friction to the feedback. Run-time "
                  "settable."),
        ParamSpec("executor", "events", "rclpy executor for main(): events, single or multi.",
                  choices=("events", "single", "multi"), read_only=True),
        ParamSpec("collision_topic", "", "std_msgs/Bool collision flag (e.g. external_torque_observer/collision); "
                  "True: gravity only until ~/reset_collision. Empty: no reaction.", read_only=True),
    ]


class ComputedTorqueNode(LifecycleNode):
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
        self.core: ComputedTorqueController | None = None
        self.model = self.base_model = None
        self.pub = self.sub = self.loader = self.pub_desired = self.sub_traj = self.timer = None
        self._writer = None
        self._active = False
        self.command_topic = ""
        super().__init__(node_name, **kwargs)
        self._specs = {s.name: s for s in _node_params()}
        self.p = common.declare_parameters(self, self._specs.values())
        self.log = common.RateLimitedLog(self.get_logger(), self.p["log_period"])
        self.diag = self.diagnostics = common.Diagnostics(self, hardware_id="computed_torque",
                                                          period=self.p["diagnostics_period"], timer=False)
        self.shell = common.ControlShell(self, self.diag, self.log)
        self._clock = self.get_clock()
        self._epoch_ns = self._clock.now().nanoseconds
        self._on_states = self.p["tick_source"] == "joint_states"
        self._reader = JointStateReader()
        self._desired_msg = JointState()
        #: the last rejection reason of a trajectory (also in diagnostics), "" if none
        self.last_rejection = ""
        self.trajectories_accepted = self.trajectories_rejected = self.ticks_published = 0
        self._control_ticks = self._ticks_seen = 0
        self.add_on_set_parameters_callback(self._on_set_parameters)
        common.create_payload_service(self)
        common.create_collision_reaction(self)
        self._safety = common.steady_timer(self, common.tick_period(self.p), self._tick)
        common.autostart(self)

    @property
    def mapper(self):
        return None if self.core is None else self.core.mapper

    # -------------------------------------------------------------- lifecycle
    def on_configure(self, state):
        result = self.shell.configure(lambda: common.ModelLoader(self, self._on_model, self.log, self.p))
        if result == TransitionCallbackReturn.SUCCESS:
            self.pub_desired = self.create_publisher(JointState, "~/desired_state", 10)
            self.sub_traj = self.create_subscription(JointTrajectory, "~/joint_trajectory",
                                                     self._on_trajectory, 10)
        return result

    def on_activate(self, state):
        self._active = True
        if not self._on_states:
            self.timer = self.create_timer(1.0 / float(self.p["control_rate"]), self._on_timer)
        return super().on_activate(state)

    def on_deactivate(self, state):
        self._active = False
        self._stop_timer()
        self.shell.publish_safe("deactivated")
        return super().on_deactivate(state)

    def on_cleanup(self, state):
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state):
        self._active = False
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def _stop_timer(self):
        if self.timer is not None:
            self.destroy_timer(self.timer)
            self.timer = None

    def _teardown(self):
        self._stop_timer()
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
                                      **common.core_settings_kwargs(p))

    def _on_model(self, model, label: str) -> None:
        self._declare_gains(model)
        used = common.model_with_params(model, self.p)
        core = ComputedTorqueController(used, self._settings(self.p, model.joint_names),
                                        list(self.p["joints"]) or None, epoch_ns=self._epoch_ns)
        names = list(core.mapper.command_joints)
        self._writer = Float64MultiArrayWriter(len(names), [(",".join(names), len(names), len(names))])
        self._desired_msg = JointState()
        self._desired_msg.name = names
        self.base_model, self.model, self.core = model, used, core
        self.diag.set("model", label)
        self.get_logger().info(f"model from {label}: {model.n} joints {list(model.joint_names)}; "
                               f"command joints {names}; mode {self.p['mode']}")

    def _declare_gains(self, model) -> None:
        specs = []
        for joint in model.joint_names:
            for kind in ("p", "d", "kp", "kd"):
                name = f"gains.{joint}.{kind}"
                spec = ParamSpec(name, float(DEFAULT_GAINS[kind]),
                                 f"{GAIN_TEXT[kind]} of joint '{joint}', {GAIN_UNITS[kind]}.", range=(0.0, 1e9))
                self._specs[name] = spec
                if not self.has_parameter(name):
                    specs.append(spec)
        self.p.update(common.declare_parameters(self, specs))
        for joint in model.joint_names:
            for kind in ("p", "d", "kp", "kd"):
                self.p[f"gains.{joint}.{kind}"] = float(self.get_parameter(f"gains.{joint}.{kind}").value)

    def _on_set_parameters(self, params):
        def settings_of(new):
            return None if self.core is None else self._settings(new, self.core.model.joint_names)

        result = self.shell.set_parameters(params, settings_of)
        if not result.successful:
            self.log.warning("param", f"parameter change rejected: {result.reason}")
            return result
        if any(p.name == "control_rate" for p in params) and self.timer is not None:
            self._stop_timer()
            self.timer = self.create_timer(1.0 / float(self.p["control_rate"]), self._on_timer)
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
            spec = core.trajectory_from_message(msg)
        except TrajectoryRejected as exc:
            self._reject(str(exc))
            return
        now_s = core.time_s(self._clock.now().nanoseconds)
        t_start = core.submit_trajectory(spec, now_s)
        self.trajectories_accepted += 1
        self.diag.count("trajectories_accepted")
        what = "cancel (hold)" if spec.empty else f"{len(spec.times)} points over {spec.times[-1]:.3f} s"
        self.get_logger().info(f"trajectory accepted: {what}, starts in {t_start - now_s:+.3f} s")

    def _reject(self, reason: str) -> None:
        self.last_rejection = reason
        self.trajectories_rejected += 1
        self.diag.count("trajectories_rejected")
        self.diag.set("last_rejection", reason)
        self.get_logger().error(f"trajectory rejected: {reason}; keeping the previous trajectory")

    # -------------------------------------------------------------- control tick
    def _on_timer(self) -> None:
        self._control_ticks += 1
        if self.core is None or not self._active:
            return
        now = self._clock.now().nanoseconds
        self._control(now, self.shell.arrival_now_ns(), now)

    def _control(self, now_ns: int, arrival_ns: int, sample_ns: int) -> None:
        """One control tick: the core's command (or safe command) at ``sample_ns``, published."""
        t0 = time.perf_counter()
        core = self.core
        res = core.step(now_ns, arrival_ns, sample_ns)
        if res.command is not None:
            self.pub.publish(self._writer.write(res.command))
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
        self.shell.tick(self._active, lambda: self._writer, publish_safe=self._on_states or quiet)
        self.diag.publish_due()

    def destroy_node(self):
        self._active = False
        super().destroy_node()


def main(args=None) -> int:
    """``ros2 run robot_dynamics_ros computed_torque`` entry point: spin (on the executor of the
    ``executor`` parameter) until Ctrl-C."""
    return common.run_node("computed_torque", ComputedTorqueNode, args,
                           executor_kind=lambda node: node.p["executor"])


if __name__ == "__main__":
    sys.exit(main())
