"""Computed-torque node: follows a ``trajectory_msgs/JointTrajectory`` with model-based effort commands.

Topics (names relative, remap as usual):

* subscribes ``joint_states_topic`` (default ``/joint_states``, ``sensor_msgs/JointState``; any joint
  order, subsets allowed) and ``~/joint_trajectory`` (``trajectory_msgs/JointTrajectory``, the ros2_control
  ``joint_trajectory_controller`` topic interface: header stamp zero = start now, ``time_from_start``,
  a new trajectory replaces the old one from its start time, an empty one cancels);
* publishes, on every control tick, ``/<controller_name>/commands`` (``std_msgs/Float64MultiArray``, one
  effort per entry of ``joints``, N·m — the same interface and parameters as the gravity-compensation
  node) and ``~/desired_state`` (``sensor_msgs/JointState``: ``position`` q_d, ``velocity`` qd_d,
  ``effort`` the feedforward torque RNEA(q_d, qd_d, qdd_d), for the command joints, stamped with the time
  the trajectory was sampled at).

Control ticks (``tick_source``): ``timer`` — a timer at ``control_rate`` Hz on the node's clock (ROS time,
so ``use_sim_time`` works), sampling at the clock's time; ``joint_states`` — one tick per accepted
JointState, sampling at its header stamp (the measurement time; the clock when the stamp is zero), the
lowest-latency choice and a deterministic closed loop with a lockstep simulator.

Control laws (``mode`` parameter; e = q_d − q, ė = qd_d − qd; arrays in model joint order):

* ``feedforward``:     τ = RNEA(q_d, qd_d, qdd_d) + P e + D ė
  (Lynch & Park 2017, *Modern Robotics*, §11.4.1, feedforward control, plus joint PD; with P = D = 0,
  feedforward only);
* ``computed_torque``: τ = M(q)(qdd_d + K_d ė + K_p e) + C(q, qd) qd + g(q)
  (Lynch & Park 2017, §11.4.1, computed-torque control without the integral term; one RNEA call);
* ``gravity``:         τ = g(q) + P e + D ė  (PD with gravity compensation, Spong, Hutchinson &
  Vidyasagar 2006, *Robot Modeling and Control*, §8.2; the baseline of ``robot-dynamics track``).

Gains are per joint, by name, as in ``joint_trajectory_controller``: ``gains.<joint>.p`` (N·m/rad) and
``gains.<joint>.d`` (N·m·s/rad) for the PD of ``feedforward``/``gravity``; ``gains.<joint>.kp`` (1/s²) and
``gains.<joint>.kd`` (1/s) for ``computed_torque`` (so switching mode never reinterprets a gain in the
wrong unit). All are validated on set (finite, ≥ 0) and take effect on the next tick.

Before the first trajectory, after the last point and after a cancel, the desired state is the held
position (the first measured q, then the last desired position) with qd_d = qdd_d = 0: gravity
compensation plus the mode's feedback. A bad trajectory is rejected with a logged reason naming the
field, index and value; the previous trajectory continues. No command is published until every model
joint has been reported in ``joint_states`` (with a finite velocity: a NaN velocity counts as missing),
or while the state is older than ``state_timeout``.

The joint-state matching is :class:`robot_dynamics_ros.control.joint_mapping.JointStateMapper`, the laws
are :mod:`robot_dynamics_ros.control.laws`, sampling is :mod:`robot_dynamics_ros.control.interpolation`,
parameters / model loading / diagnostics are :mod:`robot_dynamics_ros.nodes.common`.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

from robot_dynamics_ros.control import laws
from robot_dynamics_ros.control.interpolation import (
    DesiredState,
    TrajectoryExecutor,
    TrajectoryRejected,
    validate_joint_trajectory,
)

__all__ = ["MODES", "Gains", "control_torque", "ComputedTorqueNode", "main"]

#: values of the ``mode`` parameter
MODES = ("feedforward", "computed_torque", "gravity")

#: default gains (per joint): PD in N·m/rad, N·m·s/rad; computed torque in 1/s², 1/s (ω = 20 rad/s,
#: critically damped: kd = 2ω, kp = ω²)
DEFAULT_GAINS = {"p": 0.0, "d": 0.0, "kp": 400.0, "kd": 40.0}
GAIN_UNITS = {"p": "N·m/rad", "d": "N·m·s/rad", "kp": "1/s²", "kd": "1/s"}
GAIN_TEXT = {"p": "PD position gain of the feedforward and gravity modes",
             "d": "PD velocity gain of the feedforward and gravity modes",
             "kp": "computed-torque position gain (acceleration per rad of error)",
             "kd": "computed-torque velocity gain (acceleration per rad/s of error)"}


@dataclass
class Gains:
    """Per-joint gains in model joint order, each ``(n,)``.

    Attributes:
        p: N·m/rad. d: N·m·s/rad (PD of ``feedforward`` / ``gravity``).
        kp: 1/s². kd: 1/s (``computed_torque``).
    """

    p: np.ndarray
    d: np.ndarray
    kp: np.ndarray
    kd: np.ndarray

    @classmethod
    def default(cls, n: int) -> Gains:
        return cls(*(np.full(n, DEFAULT_GAINS[k]) for k in ("p", "d", "kp", "kd")))


def control_torque(mode: str, engine, q: np.ndarray, qd: np.ndarray, desired: DesiredState,
                   gains: Gains) -> tuple[np.ndarray, np.ndarray]:
    """The effort command of one tick and the feedforward torque of the desired motion.

    Args:
        mode: one of :data:`MODES` (see the module docstring for each law and its source).
        engine: dynamics engine (``PinocchioDynamics``), arrays in model joint order.
        q, qd: ``(n,)`` measured positions (rad) and velocities (rad/s).
        desired: q_d, qd_d, qdd_d ``(n,)`` (rad, rad/s, rad/s²).
        gains: per-joint :class:`Gains`.

    Returns:
        ``(tau, tau_ff)``, both ``(n,)`` N·m: the command (not yet clamped) and RNEA(q_d, qd_d, qdd_d).

    Raises:
        ValueError: unknown mode.
    """
    tau_ff = laws.feedforward(engine, desired.q, desired.qd, desired.qdd)
    if mode == "feedforward":
        tau = tau_ff + gains.p * (desired.q - q) + gains.d * (desired.qd - qd)
    elif mode == "computed_torque":
        tau = laws.computed_torque(engine, q, qd, desired.q, desired.qd, desired.qdd, gains.kp, gains.kd)
    elif mode == "gravity":
        tau = laws.gravity_compensation(engine, q) + gains.p * (desired.q - q) + gains.d * (desired.qd - qd)
    else:
        raise ValueError(f"mode '{mode}': must be one of {list(MODES)}")
    return tau, tau_ff


def _node_params():
    from robot_dynamics_ros.nodes.common import ParamSpec, robot_source_params

    return robot_source_params() + [
        ParamSpec("mode", "feedforward", "Control law: feedforward (RNEA of the desired motion + joint PD), "
                  "computed_torque (M(q)(qdd_d + kd*de + kp*e) + C qd + g), or gravity (g(q) + joint PD).",
                  choices=MODES),
        ParamSpec("joints", [], "Command joint order of the published Float64MultiArray (the effort "
                  "controller's 'joints'). Empty: all actuated joints in URDF order.", kind="string_array",
                  read_only=True),
        ParamSpec("controller_name", "effort_controller", "Commands go to /<controller_name>/commands.",
                  read_only=True),
        ParamSpec("joint_states_topic", "/joint_states", "sensor_msgs/JointState input topic.",
                  read_only=True),
        ParamSpec("tick_source", "timer", "What triggers a control tick: a timer at control_rate on the "
                  "node clock, or each accepted joint_states message (sampled at its header stamp).",
                  choices=("timer", "joint_states"), read_only=True),
        ParamSpec("control_rate", 500.0, "Timer ticks per second (Hz) when tick_source is timer. Run-time "
                  "settable.", range=(1.0, 10000.0)),
        ParamSpec("state_timeout", 0.1, "Joint states older than this (s, header stamp against the node "
                  "clock; arrival time when unstamped) produce no command.", range=(1e-4, 3600.0)),
        ParamSpec("clamp_to_effort_limits", True, "Clamp each command to ± the URDF effort limit (N·m)."),
        ParamSpec("check_position_limits", True, "Reject trajectories with positions outside the URDF "
                  "limits."),
        ParamSpec("executor", "events", "rclpy executor for main(): events, single or multi.",
                  choices=("events", "single", "multi"), read_only=True),
    ]


def _make_node_class():
    from rcl_interfaces.msg import SetParametersResult
    from rclpy.node import Node
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray, MultiArrayDimension
    from trajectory_msgs.msg import JointTrajectory

    from robot_dynamics_ros.control.cdr import JointStateReader
    from robot_dynamics_ros.control.joint_mapping import JointStateMapper
    from robot_dynamics_ros.nodes import common

    class ComputedTorqueNode(Node):
        """Trajectory sampling + feedforward / computed-torque effort commands (see the module docstring).

        Args:
            node_name: the ROS node name.
            **kwargs: passed to ``rclpy.node.Node`` (``context``, ``parameter_overrides``, ``cli_args``,
                ...).

        Raises (at construction):
            UserError / URDFError: the robot source parameters name a missing or invalid URDF.
            ValueError: a parameter override fails its check (naming the parameter and the value).
        """

        def __init__(self, node_name: str = "computed_torque", **kwargs):
            kwargs.setdefault("automatically_declare_parameters_from_overrides", False)
            kwargs.setdefault("allow_undeclared_parameters", False)
            super().__init__(node_name, **kwargs)
            self._specs = {s.name: s for s in _node_params()}
            self.params = common.declare_parameters(self, self._specs.values())
            self.log = common.RateLimitedLog(self.get_logger(), period=1.0)
            self.diagnostics = common.Diagnostics(self, hardware_id="computed_torque")
            self.mode: str = self.params["mode"]
            self.model = None
            self.engine = None
            self.mapper: JointStateMapper | None = None
            self.executor_traj: TrajectoryExecutor | None = None
            self.gains: Gains | None = None
            self._gain_index: dict[str, tuple[str, int]] = {}  # parameter name -> (kind, model index)
            self._epoch_ns = self.get_clock().now().nanoseconds
            #: the last rejection reason of a trajectory (also in diagnostics), "" if none
            self.last_rejection = ""
            self.trajectories_accepted = 0
            self.trajectories_rejected = 0
            self.ticks_published = 0

            self._clock = self.get_clock()
            self._on_states = self.params["tick_source"] == "joint_states"

            self.add_on_set_parameters_callback(self._on_set_parameters)
            self.command_topic = f"/{self.params['controller_name'].strip('/')}/commands"
            self.pub_command = self.create_publisher(Float64MultiArray, self.command_topic,
                                                     common.command_qos())
            self.pub_desired = self.create_publisher(JointState, "~/desired_state", 10)
            # raw=True: the serialized JointState is read by control/cdr.py (no Python message objects)
            self._reader = JointStateReader()
            self.sub_state = self.create_subscription(JointState, self.params["joint_states_topic"],
                                                      self._on_joint_state_raw, common.joint_state_qos(),
                                                      raw=True)
            self.sub_traj = self.create_subscription(JointTrajectory, "~/joint_trajectory",
                                                     self._on_trajectory, 10)
            self._cmd_msg = Float64MultiArray()
            self._desired_msg = JointState()
            self.loader = common.ModelLoader(self, self._on_model, self.log, self.params)
            self.timer = None
            if not self._on_states:
                self.timer = self.create_timer(1.0 / float(self.params["control_rate"]), self._on_timer)

        # -------------------------------------------------------------- model and parameters
        def _on_model(self, model, label: str) -> None:
            command_joints = list(self.params["joints"]) or None
            try:
                mapper = JointStateMapper(model.joint_names, command_joints, require_velocity=True)
            except ValueError as exc:
                if getattr(self, "loader", None) is None:  # at construction (urdf_path / robot_description)
                    raise
                # a model from the topic that lacks a configured command joint: keep the previous one
                self.log.error("model", f"robot model from {label} rejected: {exc}")
                return
            self.model = model
            self._effort_limit_list = model.effort_limit.tolist()
            self.engine = common.shared_engine(model)
            self.mapper = mapper
            self.executor_traj = TrajectoryExecutor(model.n, epoch_ns=self._epoch_ns)
            self.gains = Gains.default(model.n)
            self._declare_gains(model)
            names = mapper.command_names()
            self._cmd_msg = Float64MultiArray()
            self._cmd_msg.layout.dim = [MultiArrayDimension(label=",".join(names), size=len(names),
                                                            stride=len(names))]
            self._desired_msg = JointState()
            self._desired_msg.name = names
            self.diagnostics.set("model", label)
            self.get_logger().info(f"model from {label}: {model.n} joints {list(model.joint_names)}; "
                                   f"command joints {names}; mode {self.mode}")

        def _declare_gains(self, model) -> None:
            from robot_dynamics_ros.nodes.common import ParamSpec

            self._gain_index = {}
            for i, joint in enumerate(model.joint_names):
                for kind in ("p", "d", "kp", "kd"):
                    name = f"gains.{joint}.{kind}"
                    spec = ParamSpec(name, float(DEFAULT_GAINS[kind]),
                                     f"{GAIN_TEXT[kind]} of joint '{joint}', {GAIN_UNITS[kind]}.",
                                     range=(0.0, 1e9))
                    self._specs[name] = spec
                    self._gain_index[name] = (kind, i)
                    if self.has_parameter(name):
                        value = self.get_parameter(name).value
                    else:
                        value = common.declare_parameters(self, [spec])[name]
                    getattr(self.gains, kind)[i] = float(value)

        def _on_set_parameters(self, params):
            ok, reason = common.validate_parameters(self._specs, params)
            if not ok:
                self.log.warning("param", f"parameter change rejected: {reason}")
                return SetParametersResult(successful=False, reason=reason)
            for p in params:
                if p.name == "mode":
                    self.mode = p.value
                elif p.name in self._gain_index and self.gains is not None:
                    kind, i = self._gain_index[p.name]
                    getattr(self.gains, kind)[i] = float(p.value)
                if p.name in self.params:
                    self.params[p.name] = p.value
                if p.name == "control_rate" and self.timer is not None:
                    self.destroy_timer(self.timer)
                    self.timer = self.create_timer(1.0 / float(p.value), self._on_timer)
            return SetParametersResult(successful=True)

        # -------------------------------------------------------------- subscriptions
        def _on_joint_state_raw(self, raw: bytes) -> None:
            """The joint_states callback: a serialized ``sensor_msgs/JointState`` (``raw=True``)."""
            if self.mapper is None:
                return
            try:
                fields = common.joint_state_fields(self._reader, raw)
            except Exception as exc:  # noqa: BLE001 - a node never dies on one message
                self.diagnostics.count("joint_states_rejected")
                self.log.warning("deserialize", f"joint_states: cannot deserialize {len(raw)} bytes: {exc}")
                return
            arrival = time.monotonic_ns()
            # stamps further ahead of the node clock than state_timeout are rejected (a wrong clock must
            # not block every later message as out of order)
            rejection = self.mapper.update_fields(fields, arrival, now_stamp_ns=self._clock.now().nanoseconds,
                                                  max_future_ns=int(float(self.params["state_timeout"]) * 1e9))
            if rejection is not None:
                self.diagnostics.count("joint_states_rejected")
                self.log.warning(f"joint_states:{rejection.code.name}", f"joint_states rejected: {rejection}")
                return
            self.diagnostics.count("joint_states")
            if self._on_states:
                now_ns = self._clock.now().nanoseconds
                self._control(now_ns, arrival, fields.stamp_ns or now_ns)

        def _now_s(self, now_ns: int) -> float:
            return (now_ns - self._epoch_ns) * 1e-9

        def _on_trajectory(self, msg) -> None:
            if self.model is None:
                self._reject("no robot model loaded yet")
                return
            check = bool(self.params["check_position_limits"])
            try:
                spec = validate_joint_trajectory(msg, self.model.joint_names,
                                                 lower=self.model.lower if check else None,
                                                 upper=self.model.upper if check else None)
            except TrajectoryRejected as exc:
                self._reject(str(exc))
                return
            now_ns = self.get_clock().now().nanoseconds
            t_start = self.executor_traj.submit(spec, self._now_s(now_ns))
            self.trajectories_accepted += 1
            self.diagnostics.count("trajectories_accepted")
            what = "cancel (hold)" if spec.empty else f"{len(spec.times)} points over {spec.times[-1]:.3f} s"
            self.get_logger().info(f"trajectory accepted: {what}, starts in "
                                   f"{t_start - self._now_s(now_ns):+.3f} s")

        def _reject(self, reason: str) -> None:
            self.last_rejection = reason
            self.trajectories_rejected += 1
            self.diagnostics.count("trajectories_rejected")
            self.diagnostics.set("last_rejection", reason)
            self.get_logger().error(f"trajectory rejected: {reason}; keeping the previous trajectory")

        # -------------------------------------------------------------- control tick
        def _on_timer(self) -> None:
            if self.mapper is None:
                return
            now = self._clock.now()
            self._control(now.nanoseconds, time.monotonic_ns(), now.nanoseconds)

        def _control(self, now_ns: int, arrival_ns: int, sample_ns: int) -> None:
            """One control tick: sample the desired motion at ``sample_ns``, compute, clamp, publish."""
            mapper = self.mapper
            t0 = time.perf_counter()
            if not mapper.ready:
                self.diagnostics.set_level(self.diagnostics.WARN, "waiting for joint_states")
                if mapper.accepted:  # before the first message there is nothing to complain about yet
                    self.log.warning("missing", f"no command: joints missing from joint_states (or without a "
                                     f"finite velocity): {mapper.missing()}")
                return
            age = mapper.age(now_ns, arrival_ns)
            if age > float(self.params["state_timeout"]):
                self.diagnostics.set_level(self.diagnostics.WARN, f"joint_states stale ({age:.3f} s)")
                self.log.warning("stale", f"no command: joint_states are {age:.3f} s old "
                                 f"(state_timeout {self.params['state_timeout']} s)")
                return
            ex = self.executor_traj
            if not ex.has_hold_position:
                ex.set_hold_position(mapper.q)
            desired = ex.sample(self._now_s(sample_ns))
            q, qd = mapper.q, mapper.qd
            try:
                tau, tau_ff = control_torque(self.mode, self.engine, q, qd, desired, self.gains)
            except Exception as exc:  # noqa: BLE001 - a numerical failure must not kill the node
                self.log.error("law", f"no command: control law failed: {exc}")
                return
            if not np.isfinite(tau).all():
                self.diagnostics.count("nonfinite_torque")
                self.log.error("nonfinite", f"non-finite torque {tau.tolist()} not published")
                return
            tau = tau.tolist()
            if self.params["clamp_to_effort_limits"]:
                clamped = laws.clamp_effort_list(tau, self._effort_limit_list)
                if clamped:
                    self.diagnostics.count("clamped", clamped)
            cmd = self._cmd_msg
            cmd.data = mapper.to_command_list(tau)
            self.pub_command.publish(cmd)
            ds = self._desired_msg
            ds.header.stamp.sec, ds.header.stamp.nanosec = divmod(sample_ns, 1_000_000_000)
            idx = mapper.command_index
            ds.position = desired.q[idx].tolist()
            ds.velocity = desired.qd[idx].tolist()
            ds.effort = tau_ff[idx].tolist()
            self.pub_desired.publish(ds)
            self.ticks_published += 1
            self.diagnostics.count("commands")
            self.diagnostics.latency.add(time.perf_counter() - t0)
            self.diagnostics.set("tracking", desired.tracking)
            self.diagnostics.set_level(self.diagnostics.OK, f"{self.mode}: "
                                       + ("tracking" if desired.tracking else "holding"))

    return ComputedTorqueNode


def __getattr__(name):  # ComputedTorqueNode is built lazily so that importing this module needs no rclpy
    if name == "ComputedTorqueNode":
        cls = _make_node_class()
        globals()["ComputedTorqueNode"] = cls
        return cls
    raise AttributeError(name)


def main(args=None) -> int:
    """``ros2 run robot_dynamics_ros computed_torque`` entry point: spin (on the executor of the
    ``executor`` parameter) until Ctrl-C."""
    from robot_dynamics_ros.nodes import common

    return common.run_node("computed_torque", __getattr__("ComputedTorqueNode"), args,
                           executor_kind=lambda node: node.params["executor"])


if __name__ == "__main__":
    sys.exit(main())
