"""MuJoCo simulator node, the Gazebo stand-in: effort commands in, ``sensor_msgs/JointState`` out.

It loads the robot from the same URDF as the controllers (:class:`~robot_dynamics_ros.sim.mujoco_sim.MujocoSim`:
inertias, axes, limits, damping kept; geometry dropped; held joints welded), steps MuJoCo at ``timestep``,
publishes JointState (names, positions, velocities, applied efforts, header stamp from the node clock) at
``publish_rate``, and applies ``std_msgs/Float64MultiArray`` effort commands received on
``<controller_name>/commands``, ordered by the ``joints`` parameter — the interface a ros2_control
``forward_command_controller`` for efforts gives on a real robot or in Gazebo. Held joints are published
too, at their held positions with zero velocity (as a joint_state_broadcaster reports a gripper).

Two stepping modes:

* free running (default): a timer at ``publish_rate`` advances the physics to ``real_time_factor`` × the
  wall time elapsed; the last command is held (zero before the first one, and after ``command_timeout``
  without commands when that is > 0).
* ``lockstep``: every received command is applied, then the physics advances ``1 / publish_rate`` s and the
  new state is published — a deterministic closed loop over DDS whatever the machine load (the demo uses
  it). The state is re-published every ``lockstep_resend`` s (0.1) while no command arrives (start-up, a
  lost message).

Names are relative (``joint_states``, ``<controller_name>/commands``, ``robot_description``), so a
namespace (``-r __ns:=/r1``, a namespaced launch) moves every topic of the node; ``/clock`` stays global,
as ROS time is. Nothing in the defaults names a robot: the robot comes from ``urdf_path``,
``robot_description`` or the description topic, its joints in URDF order.

Topics and parameters: docs/nodes.md and :data:`PARAMS`.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from rclpy.node import Node
from rcl_interfaces.msg import SetParametersResult
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_dynamics_ros.control.joint_mapping import index_map
from robot_dynamics_ros.nodes import common, naming
from robot_dynamics_ros.nodes.common import Diagnostics, ParamSpec, RateLimitedLog
from robot_dynamics_ros.sim.mujoco_sim import MujocoSim

NODE_NAME = "mujoco_simulator"

PARAMS = [
    ParamSpec("joints", [], "Joint order of the received Float64MultiArray effort commands. Empty: all "
              "actuated joints in URDF order.", kind="string_array", read_only=True),
    ParamSpec("controller_name", "effort_controller", "Commands are read from <controller_name>/commands "
              "(relative to the node's namespace unless it starts with '/').", read_only=True),
    ParamSpec("joint_states_topic", "joint_states", "sensor_msgs/JointState output topic (relative to the "
              "node's namespace unless it starts with '/').", read_only=True),
    ParamSpec("publish_rate", 500.0, "JointState publication rate, Hz (lockstep: control rate). Run-time "
              "settable.", range=(1.0, 10000.0)),
    ParamSpec("timestep", 0.001, "Physics step, s.", range=(1e-5, 0.1), read_only=True),
    ParamSpec("integrator", "implicitfast", "MuJoCo integrator.",
              choices=("Euler", "implicitfast", "implicit", "RK4"), read_only=True),
    ParamSpec("lockstep", False, "Step only when a command arrives (1/publish_rate s per command).",
              read_only=True),
    ParamSpec("lockstep_resend", 0.1, "Lockstep: seconds without a command after which the last state is "
              "published again (start-up, a lost message).", range=(0.01, 3600.0), read_only=True),
    ParamSpec("start_on_first_command", False, "Free running: keep the physics paused (state still "
              "published) until the first command after start or reset() arrives.", read_only=True),
    ParamSpec("publish_clock", False, "Publish the simulated time on /clock (rosgraph_msgs/Clock) and stamp "
              "JointState with it, as Gazebo does; run the other nodes with use_sim_time: true. The clock "
              "never goes back (reset() continues from the last time).", read_only=True),
    ParamSpec("clock_start", 0.0, "publish_clock: the published time (s) at the start of the simulation (a "
              "zero stamp means 'now' to many ROS tools; e.g. 1000).", range=(0.0, 1e9), read_only=True),
    ParamSpec("real_time_factor", 1.0, "Free running: simulated seconds per wall second.",
              range=(0.01, 100.0)),
    ParamSpec("initial_joint_names", [], "Joints given an initial position (others start at 0 clipped to "
              "their limits).", kind="string_array", read_only=True),
    ParamSpec("initial_positions", [], "Initial positions of initial_joint_names, rad or m.",
              kind="double_array", read_only=True),
    ParamSpec("gravity", [0.0, 0.0, -9.81], "Gravity in the world (= URDF root) frame, m/s².", length=3,
              range=(-100.0, 100.0)),
    ParamSpec("payload.link", "", "Link carrying a simulated payload ('' = none); run-time settable."),
    ParamSpec("payload.mass", 0.0, "Simulated payload mass, kg.", range=(0.0, 1000.0)),
    ParamSpec("payload.com", [0.0, 0.0, 0.0], "Payload centre of mass in the link frame, m.", length=3,
              range=(-10.0, 10.0)),
    ParamSpec("payload.inertia", [0.0, 0.0, 0.0, 0.0, 0.0, 0.0], "Payload inertia about its centre of mass, "
              "link axes: ixx ixy ixz iyy iyz izz, kg·m².", length=6, range=(-1000.0, 1000.0)),
    ParamSpec("clamp_effort", True, "Clamp applied efforts to the URDF effort limits."),
    ParamSpec("command_timeout", 0.0, "Free running: seconds without a command before efforts drop to "
              "zero (0: hold the last command forever, like a forward controller).", range=(0.0, 3600.0)),
    ParamSpec("log_period", 1.0, "Minimum seconds between two log lines of the same kind.",
              range=(0.0, 3600.0)),
]


class SimulatorNode(Node):
    """The MuJoCo simulator node (see the module docstring).

    Attributes useful in-process (demo, tests):
        sim: the :class:`MujocoSim`.
        stop_time: simulated time (s) at which stepping stops (None: never); :attr:`done` turns True.
        on_publish: callbacks ``f(t, q, qd, effort)`` called after each JointState publication
            (model-order arrays, copies).

    Raises:
        UserError / URDFError: the URDF cannot be read. ValueError: bad parameter override or joint name.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        self._shut = False
        super().__init__(node_name, **kwargs)
        self._specs = {s.name: s for s in [*common.robot_source_params(), *PARAMS]}
        self.p = common.declare_parameters(self, self._specs.values())
        self.log = RateLimitedLog(self.get_logger(), self.p["log_period"])
        self.diag = Diagnostics(self, hardware_id="mujoco_simulator")
        self.sim: MujocoSim | None = None
        self.stop_time: float | None = None
        self.done = False
        self.on_publish: list[Callable] = []
        self._shut = False
        self._lockstep = bool(self.p["lockstep"])
        # QoS: reliable keep-last 10 on both endpoints, changed with rclpy's standard overrides
        # (qos_overrides.<topic>.publisher|subscription.depth/reliability/history/durability)
        self.state_pub = self.create_publisher(JointState, self.p["joint_states_topic"], common.joint_state_qos(),
                                               qos_overriding_options=common.qos_overrides())
        self._clock_pub = None
        self._time_base_ns = int(round(float(self.p["clock_start"]) * 1e9))
        if self.p["publish_clock"]:
            from rosgraph_msgs.msg import Clock

            self._clock_pub = self.create_publisher(Clock, "/clock", 10)
            self._clock_msg = Clock()
        controller = str(self.p["controller_name"]).rstrip("/")
        self.cmd_sub = self.create_subscription(Float64MultiArray, f"{controller}/commands", self._on_command,
                                                common.command_qos(),
                                                qos_overriding_options=common.qos_overrides())
        #: the resolved (namespaced, remapped) command topic
        self.command_topic = self.cmd_sub.topic_name
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._period = 1.0 / self.p["publish_rate"]
        self.loader = common.ModelLoader(self, self._on_model, self.log, naming.loader_params(self.p))
        if self._lockstep:
            self._timer = self.create_timer(min(0.1, float(self.p["lockstep_resend"])), self._kick)
        else:
            self._timer = self.create_timer(self._period, self._tick)

    # ------------------------------------------------------------------ model
    def _on_model(self, model, label: str) -> None:
        sim = MujocoSim(model, timestep=self.p["timestep"], integrator=self.p["integrator"],
                        clamp_effort=self.p["clamp_effort"])
        joints = self.p["joints"] or list(model.joint_names)
        self._cmd_index = index_map(model.joint_names, joints, what="command joint")
        self.joints = tuple(joints)
        names = list(self.p["initial_joint_names"])
        pos = list(self.p["initial_positions"])
        if len(names) != len(pos):
            raise ValueError(f"initial_joint_names has {len(names)} entries but initial_positions {len(pos)}")
        self.initial = dict(zip(names, pos))
        sim.set_gravity(self.p["gravity"])
        self._apply_payload(sim, self.p)
        sim.reset(self.initial)
        self.sim = sim
        self._steps_per_publish = max(1, int(round(self._period / sim.timestep)))
        held = dict(model.held_joints)
        self._held_names = list(held)
        self._held_pos = [float(v) for v in held.values()]
        self._msg = JointState()
        self._msg.name = [*model.joint_names, *self._held_names]
        n_all = len(self._msg.name)
        self._zeros_held = [0.0] * len(held)
        self._tau = np.zeros(model.n)
        self._q, self._qd, self._eff = np.zeros(model.n), np.zeros(model.n), np.zeros(model.n)
        self._last_cmd = time.monotonic()
        self._wall0 = None
        self._got_command = False
        self._sim_steps_done = 0
        self.commands = 0
        #: lockstep: states published again after lockstep_resend s without a command
        self.resent = 0
        self.diag.set("robot", model.description.name)
        self.diag.set_level(Diagnostics.OK, "running")
        self.get_logger().info(f"simulating '{model.description.name}' ({model.n} joints + {len(held)} held, "
                               f"{n_all} in JointState) from {label}; commands on {self.command_topic} "
                               f"for {list(joints)}; {'lockstep' if self._lockstep else 'free running'}")

    @staticmethod
    def _apply_payload(sim: MujocoSim, p) -> None:
        """Attach the payload parameters to the MuJoCo model (raises ValueError on an unknown link)."""
        link = p["payload.link"]
        if not link:
            sim.set_payload(None)
            return
        a = p["payload.inertia"]
        inertia = np.array([[a[0], a[1], a[2]], [a[1], a[3], a[4]], [a[2], a[4], a[5]]])
        if np.linalg.eigvalsh(inertia).min() < -1e-12:
            raise ValueError(f"payload.inertia = {list(a)}: not positive semi-definite")
        sim.set_payload(link, p["payload.mass"], p["payload.com"], inertia)

    def reset(self, q=None, qd=None) -> None:
        """Reset the simulation (time 0, efforts 0) to ``q`` (default: the initial positions)."""
        self._time_base_ns += int(round(self.sim.time * 1e9)) + (1_000_000 if self._clock_pub else 0)
        self.sim.reset(self.initial if q is None else q, qd)
        self._tau[:] = 0.0
        self._wall0 = None
        self._got_command = False
        self._sim_steps_done = 0
        self.done = False

    # ------------------------------------------------------------------ parameters
    def _on_set_parameters(self, params) -> SetParametersResult:
        ok, reason = common.validate_parameters(self._specs, params)
        if not ok:
            return SetParametersResult(successful=False, reason=reason)
        new = common.merged_parameters(self._specs, self.p, params)
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
        return SetParametersResult(successful=True)

    def _set_rate(self, rate_hz: float) -> None:
        """Change the publication (lockstep: control) rate at run time; the physics time base is kept."""
        self._period = 1.0 / rate_hz
        if self.sim is not None:
            self._steps_per_publish = max(1, int(round(self._period / self.sim.timestep)))
        if not self._lockstep:
            self.destroy_timer(self._timer)
            self._timer = self.create_timer(self._period, self._tick)

    # ------------------------------------------------------------------ commands
    def _on_command(self, msg: Float64MultiArray) -> None:
        if self._shut or self.sim is None:
            return
        data = msg.data
        if len(data) != len(self._cmd_index):
            self.diag.count("rejected_commands")
            self.log.warning("cmd_len", f"command rejected: data has {len(data)} entries, expected "
                             f"{len(self._cmd_index)} for joints {list(self.joints)}")
            return
        tau = np.asarray(data, dtype=float)
        if not np.isfinite(tau).all():
            self.diag.count("rejected_commands")
            self.log.warning("cmd_nan", f"command rejected: non-finite value in data {tau.tolist()}")
            return
        self._tau[self._cmd_index] = tau
        self.sim.set_effort(self._tau)
        self.commands += 1
        self._got_command = True
        self._last_cmd = time.monotonic()
        self.diag.count("commands")
        if self._lockstep and not self.done:
            self.sim.step(self._steps_per_publish)
            self._check_stop()
            self._publish()

    # ------------------------------------------------------------------ stepping
    def _check_stop(self) -> None:
        if self.stop_time is not None and self.sim.time >= self.stop_time - 1e-9:
            self.done = True

    def _kick(self) -> None:
        """Lockstep: re-publish the state when no command came for ``lockstep_resend`` s."""
        if self.sim is not None and not self.done and not self._shut \
                and time.monotonic() - self._last_cmd > self.p["lockstep_resend"]:
            self.resent += 1
            self._last_cmd = time.monotonic()
            self._publish()

    def _tick(self) -> None:
        """Free running: advance to real time × real_time_factor, then publish."""
        if self.sim is None or self._shut or self.done:
            return
        now = time.monotonic()
        if self._wall0 is None:
            if self.p["start_on_first_command"] and not self._got_command:
                self._publish()
                return
            self._wall0 = now
        timeout = self.p["command_timeout"]
        if timeout > 0 and now - self._last_cmd > timeout and self._tau.any():
            self._tau[:] = 0.0
            self.sim.set_effort(self._tau)
            self.log.warning("cmd_timeout", f"no command for {timeout} s: efforts set to zero")
        target = int((now - self._wall0) * self.p["real_time_factor"] / self.sim.timestep)
        n = min(target - self._sim_steps_done, 1000)   # never more than 1000 steps per tick
        if n > 0:
            self.sim.step(n)
            self._sim_steps_done = target
        self._check_stop()
        self._publish()

    def now_ns(self) -> int:
        """The simulated time as published on /clock (ns): ``clock_start`` + the physics time."""
        return self._time_base_ns + int(round(self.sim.time * 1e9))

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
    return common.run_node("mujoco_simulator", SimulatorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
