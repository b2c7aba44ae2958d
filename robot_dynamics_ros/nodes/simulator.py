"""MuJoCo simulator node, the Gazebo stand-in: effort commands in, ``sensor_msgs/JointState`` out.

It loads the robot from the same URDF as the controllers (:class:`~robot_dynamics_ros.sim.mujoco_sim.MujocoSim`:
inertias, axes, limits, damping kept; geometry dropped; held joints welded), steps MuJoCo at ``timestep``,
publishes JointState (names, positions, velocities, applied efforts, header stamp from the node clock) at
``publish_rate``, and applies ``std_msgs/Float64MultiArray`` effort commands received on
``<controller_name>/commands``, ordered by the ``joints`` parameter — the interface a ros2_control
``forward_command_controller`` for efforts gives on a real robot or in Gazebo. Held joints are published
too, at their held positions with zero velocity (as a joint_state_broadcaster reports a gripper).

Stepping (policy in the ROS-free :class:`~robot_dynamics_ros.sim.runner.SimRunner`): free running by
default (physics follows ``real_time_factor`` × the wall time), or ``lockstep``: each command advances
``1 / publish_rate`` s, then the state is published — a deterministic closed loop over DDS (the demo).

Names are relative (``joint_states``, ``<controller_name>/commands``, ``robot_description``), so a
namespace (``-r __ns:=/r1``, a namespaced launch) moves every topic of the node; ``/clock`` stays global,
as ROS time is. Nothing in the defaults names a robot: the robot comes from ``urdf_path``,
``robot_description`` or the description topic, its joints in URDF order.

Topics and parameters: docs/nodes.md and :data:`SCHEMA`.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from rclpy.node import Node
from rcl_interfaces.msg import SetParametersResult
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_dynamics_ros.nodes import naming
from robot_dynamics_ros.nodes.diagnostics import Diagnostics, RateLimitedLog
from robot_dynamics_ros.nodes.model_source import ModelLoader
from robot_dynamics_ros.nodes.parameters import declare_parameters, merged_parameters, node_schema, validate_parameters
from robot_dynamics_ros.nodes.runtime import run_node, steady_timer
from robot_dynamics_ros.nodes.wire import GRAPH_CHECK_PERIOD, ExclusivePublisher, command_qos, joint_state_qos, qos_overrides
from robot_dynamics_ros.sim.mujoco_sim import MujocoSim
from robot_dynamics_ros.sim.runner import SimRunner, inertia_matrix

NODE_NAME = "mujoco_simulator"

#: the node's parameters (``params/mujoco_simulator.yaml``: the robot source and this node's own)
SCHEMA = node_schema("mujoco_simulator")


class SimulatorNode(Node):
    """The MuJoCo simulator node (see the module docstring).

    Attributes useful in-process (demo, tests):
        sim: the :class:`MujocoSim`; runner: its stepping policy (:class:`SimRunner`; None before the model).
        stop_time: simulated time (s) at which stepping stops (None: never); :attr:`done` turns True.
        on_publish: callbacks ``f(t, q, qd, effort)`` called after each JointState publication
            (model-order arrays, copies).

    Raises:
        UserError / URDFError: the URDF cannot be read. ValueError: bad parameter override or joint name.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        self._shut = False
        super().__init__(node_name, **kwargs)
        self._specs = SCHEMA.by_name
        self.p = declare_parameters(self, self._specs.values())
        self.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        self.diag = Diagnostics(self, hardware_id="mujoco_simulator")
        self.sim: MujocoSim | None = None
        self.runner: SimRunner | None = None
        self._stop_time: float | None = None
        self.on_publish: list[Callable] = []
        self._lockstep = bool(self.p["lockstep"])
        # QoS: reliable keep-last 10 on both endpoints, changed with rclpy's standard overrides
        # (qos_overrides.<topic>.publisher|subscription.depth/reliability/history/durability)
        self.state_pub = self.create_publisher(JointState, self.p["joint_states_topic"], joint_state_qos(),
                                               qos_overriding_options=qos_overrides())
        # never next to another joint_states publisher (a real driver): before the first state, then at 1 Hz
        self._exclusive = ExclusivePublisher(self, self.state_pub, self.diag)
        self._graph_timer = steady_timer(self, GRAPH_CHECK_PERIOD, self._exclusive.check)
        self._clock_pub = None
        if self.p["publish_clock"]:
            from rosgraph_msgs.msg import Clock

            self._clock_pub = self.create_publisher(Clock, "/clock", 10)
            self._clock_msg = Clock()
        controller = str(self.p["controller_name"]).rstrip("/")
        self.cmd_sub = self.create_subscription(Float64MultiArray, f"{controller}/commands", self._on_command,
                                                command_qos(),
                                                qos_overriding_options=qos_overrides())
        self.command_topic = self.cmd_sub.topic_name  # resolved: namespaced, remapped
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._period = 1.0 / self.p["publish_rate"]
        self.loader = ModelLoader(self, self._on_model, self.log, naming.loader_params(self.p))
        if self._lockstep:
            self._timer = steady_timer(self, min(0.1, float(self.p["lockstep_resend"])), self._kick)
        else:
            self._timer = steady_timer(self, self._period, self._tick)

    # ------------------------------------------------------------------ model
    def _on_model(self, model, label: str) -> None:
        sim = MujocoSim(model, timestep=self.p["timestep"], integrator=self.p["integrator"],
                        clamp_effort=self.p["clamp_effort"])
        names, pos = list(self.p["initial_joint_names"]), list(self.p["initial_positions"])
        if len(names) != len(pos):
            raise ValueError(f"initial_joint_names has {len(names)} entries but initial_positions {len(pos)}")
        # the clock continues across a new model (it never goes back)
        base = self.runner.clock_base_ns if self.runner else int(round(float(self.p["clock_start"]) * 1e9))
        runner = SimRunner(sim, self.p["joints"], lockstep=self._lockstep, period_s=self._period,
                           now_s=time.monotonic(), lockstep_resend=self.p["lockstep_resend"],
                           command_timeout=self.p["command_timeout"], real_time_factor=self.p["real_time_factor"],
                           start_on_first_command=self.p["start_on_first_command"],
                           publish_clock=self._clock_pub is not None, clock_base_ns=base)
        runner.stop_time = self._stop_time
        self.joints = runner.joints
        self.initial = dict(zip(names, pos))
        sim.set_gravity(self.p["gravity"])
        self._apply_payload(sim, self.p)
        sim.reset(self.initial)
        self.sim, self.runner = sim, runner
        held = dict(model.held_joints)
        self._held_pos, self._zeros_held = [float(v) for v in held.values()], [0.0] * len(held)
        self._msg = JointState(name=[*model.joint_names, *held])
        self._q, self._qd, self._eff = np.zeros(model.n), np.zeros(model.n), np.zeros(model.n)
        self.diag.set("robot", model.description.name)
        self.diag.set_level(Diagnostics.OK, "running")
        mode = "lockstep" if self._lockstep else "free running"
        self.get_logger().info(f"simulating '{model.description.name}' ({model.n} joints + {len(held)} held, "
                               f"{len(self._msg.name)} in JointState) from {label}; commands on "
                               f"{self.command_topic} for {list(self.joints)}; {mode}")

    def _set_stop_time(self, value: float | None) -> None:
        self._stop_time = value
        if self.runner is not None:
            self.runner.stop_time = value

    stop_time = property(lambda self: self._stop_time, _set_stop_time, doc="see the class docstring")
    done = property(lambda self: self.runner is not None and self.runner.done, doc="stop_time reached")
    commands = property(lambda self: self.runner.commands if self.runner else 0, doc="commands applied")
    resent = property(lambda self: self.runner.resent if self.runner else 0, doc="lockstep: states resent")

    @staticmethod
    def _apply_payload(sim: MujocoSim, p) -> None:
        """Attach the payload parameters to the MuJoCo model (raises ValueError: unknown link, bad inertia)."""
        link = p["payload.link"]
        if not link:
            return sim.set_payload(None)
        sim.set_payload(link, p["payload.mass"], p["payload.com"], inertia_matrix(p["payload.inertia"]))

    def reset(self, q=None, qd=None) -> None:
        """Reset the simulation (time 0, efforts 0) to ``q`` (default: the initial positions)."""
        self.runner.reset(self.initial if q is None else q, qd)

    # ------------------------------------------------------------------ parameters
    def _on_set_parameters(self, params) -> SetParametersResult:
        ok, reason = validate_parameters(self._specs, params, self.p)
        if not ok:
            return SetParametersResult(successful=False, reason=reason)
        new = merged_parameters(self._specs, self.p, params)
        if self.sim is not None and any(prm.name.startswith("payload.") for prm in params):
            try:
                self._apply_payload(self.sim, new)
            except ValueError as exc:
                self._apply_payload(self.sim, self.p)
                return SetParametersResult(successful=False, reason=str(exc))
        for prm in params:
            if prm.name in self._specs:
                self.p[prm.name] = new[prm.name]
                if prm.name == "gravity" and self.sim is not None:
                    self.sim.set_gravity(self.p["gravity"])
                if prm.name == "clamp_effort" and self.sim is not None:
                    self.sim.clamp = bool(prm.value)
                if prm.name == "log_period":
                    self.log = RateLimitedLog(self.get_logger(), float(prm.value))
                if prm.name == "publish_rate":
                    self._set_rate(float(prm.value))
                if prm.name in ("real_time_factor", "command_timeout") and self.runner is not None:
                    setattr(self.runner, prm.name, float(self.p[prm.name]))
        return SetParametersResult(successful=True)

    def _set_rate(self, rate_hz: float) -> None:
        """Change the publication (lockstep: control) rate at run time; the physics time base is kept."""
        self._period = 1.0 / rate_hz
        if self.runner is not None:
            self.runner.set_period(self._period)
        if not self._lockstep:
            self.destroy_timer(self._timer)
            self._timer = steady_timer(self, self._period, self._tick)

    # ------------------------------------------------------------------ commands and stepping
    def _on_command(self, msg: Float64MultiArray) -> None:
        runner = self.runner
        if self._shut or runner is None:
            return
        was_done = runner.done
        rejection = runner.on_command(msg.data, time.monotonic())
        if rejection is not None:
            self.diag.count("rejected_commands")
            self.log.warning(f"cmd_{rejection.kind}", rejection.message)
            return
        self.diag.count("commands")
        if self._lockstep and not was_done:
            self._publish()
        self._report_health()

    def _kick(self) -> None:
        """Lockstep: re-publish the state when no command came for ``lockstep_resend`` s."""
        if self.runner is not None and not self._shut and self.runner.resend_due(time.monotonic()):
            self._publish()

    def _tick(self) -> None:
        """Free running: advance to real time × real_time_factor, then publish."""
        if self.runner is None or self._shut or self.runner.done:
            return
        warning = self.runner.tick(time.monotonic())
        if warning:
            self.log.warning("cmd_timeout", warning)
        self._publish()
        self._report_health()

    def _report_health(self) -> None:
        """The physics' health in diagnostics: ERROR right after an instability was undone (the runner
        restored the last good state and zeroed the efforts), WARN while any happened since the last reset."""
        level, message = self.runner.status()
        if level != self.diag.level or message != self.diag.message:
            self.diag.set_level(level, message)
            if level == Diagnostics.ERROR:
                self.log.error("unstable", message)
        self.diag.set("instabilities_undone", self.runner.unstable)

    def clock_subscribers(self) -> int:
        """How many subscriptions match this node's ``/clock`` publisher (0 without ``publish_clock``)."""
        return 0 if self._clock_pub is None else self._clock_pub.get_subscription_count()

    def now_ns(self) -> int:
        """The simulated time as published on /clock (ns): ``clock_start`` + the physics time."""
        return self.runner.now_ns()

    def publish_clock(self) -> None:
        """Publish the current simulated time on /clock only (``publish_clock``), e.g. so that the other
        nodes' clocks read simulated time before the first state."""
        if self._clock_pub is not None and self.sim is not None:
            st = self._clock_msg.clock
            st.sec, st.nanosec = divmod(self.now_ns(), 1_000_000_000)
            self._clock_pub.publish(self._clock_msg)

    def publish_state(self) -> None:
        """Publish the current state now (and the clock): lockstep, this starts the loop."""
        if self.sim is not None and not self._shut:
            self._publish()

    def _publish(self) -> None:
        if not self._exclusive.allowed():
            return
        sim, msg = self.sim, self._msg
        sim.read(self._q, self._qd, self._eff)
        if self._clock_pub is not None:
            self.publish_clock()
            st = self._clock_msg.clock
            msg.header.stamp.sec, msg.header.stamp.nanosec = st.sec, st.nanosec
        else:
            msg.header.stamp = self.get_clock().now().to_msg()
        msg.position = [*self._q.tolist(), *self._held_pos]
        msg.velocity = [*self._qd.tolist(), *self._zeros_held]
        msg.effort = [*self._eff.tolist(), *self._zeros_held]
        self.state_pub.publish(msg)
        self.diag.count("published")
        if self.on_publish:
            t = sim.time
            for f in self.on_publish:
                f(t, self._q.copy(), self._qd.copy(), self._eff.copy())

    def destroy_node(self) -> None:
        self._shut = True
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_dynamics_ros mujoco_simulator`` entry point (SIGINT stops it)."""
    return run_node("mujoco_simulator", SimulatorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
