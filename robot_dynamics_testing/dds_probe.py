"""A DDS probe for the fault and fuzz tests of the nodes (issue 7): publishes joint states and robot
descriptions, records commands and diagnostics, on its own rclpy context and its own topic names.

Expected torques come from Pinocchio called directly on the URDF (Panda, fingers held at 0.02 m) via
:func:`reference.expected_gravity`, never from the nodes' code.
"""
from __future__ import annotations

import time

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from robot_dynamics_testing.reference import ProbeRobot, expected_gravity
from robot_dynamics_testing.ros_world import SpinThread

PANDA = ProbeRobot.panda()
NAMES = PANDA.joint_names
PANDA_EFFORT = np.array([87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0])  # panda.urdf <limit effort=...>
TOL = 1e-9


def gravity_of(q, urdf: str | None = None) -> np.ndarray:
    robot = PANDA if urdf is None else ProbeRobot(urdf, NAMES, PANDA.held_joints, PANDA.base_pose)
    return expected_gravity(robot, np.atleast_2d(np.asarray(q, dtype=float)))[0]


class Probe:
    """A test-side node on its own context: publishes joint states, records commands and diagnostics."""

    _count = 0

    def __init__(self):
        from diagnostic_msgs.msg import DiagnosticArray
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray, String

        from robot_dynamics_ros.nodes.wire import description_qos

        # unique topics and node name per probe: fixtures alive at the same time never cross-talk
        Probe._count += 1
        self.tag = f"f{Probe._count}"
        self.topics = {"joint_states": f"/{self.tag}/joint_states", "controller": f"{self.tag}_controller",
                       "description": f"/{self.tag}/robot_description"}
        command_topic = f"/{self.topics['controller']}/commands"
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.node = Node("fault_probe", context=self.ctx)
        self.executor.add_node(self.node)
        self.JointState = JointState
        self.js_pub = self.node.create_publisher(JointState, self.topics["joint_states"], 100)
        self.desc_pub = self.node.create_publisher(String, self.topics["description"], description_qos())
        #: CLOCK_REALTIME - CLOCK_MONOTONIC: maps a DDS source timestamp (realtime) to this machine's monotonic
        #: clock, on which the tests read their own times
        self.realtime_minus_monotonic = time.time() - time.monotonic()
        #: (when the node published it, monotonic s; the command): the DDS source timestamp, which a stall of
        #: this process does not move (an arrival time would)
        self.commands: list[tuple[float, np.ndarray]] = []
        self.diagnostics: list = []
        #: (publication time as for :attr:`commands`, DiagnosticStatus) of every status on /diagnostics
        self.diagnostics_log: list = []
        self.node.create_subscription(Float64MultiArray, command_topic,
                                      lambda m, info: self.commands.append((self.published_at(info),
                                                                            np.array(m.data))), 1000)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 100)
        self.nodes = []
        self._spinner = SpinThread(self.executor, self.ctx)

    def published_at(self, info) -> float:
        """The publication time of a received message (its ``MessageInfo``) on this machine's monotonic clock."""
        return info["source_timestamp"] * 1e-9 - self.realtime_minus_monotonic

    def _on_diagnostics(self, msg, info) -> None:
        self.diagnostics.extend(msg.status)
        t = self.published_at(info)
        self.diagnostics_log.extend((t, s) for s in msg.status)

    def add(self, node):
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def gravity_node(self, **params):
        from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode

        defaults = {"state_timeout": 0.25, "diagnostics_period": 0.05, "log_period": 10.0}
        return self.start(GravityCompensationNode, "gravity_compensation", {**defaults, **params})

    def start(self, node_class, name: str, params: dict):
        """Construct ``node_class`` on this probe's context and topics, wait until DDS has matched it."""
        defaults = {"urdf_path": "panda", "joint_states_topic": self.topics["joint_states"],
                    "controller_name": self.topics["controller"],
                    "robot_description_topic": self.topics["description"]}
        overrides = [Parameter(k, value=v) for k, v in {**defaults, **params}.items()]
        node = self.add(node_class(f"{name}_{self.tag}", context=self.ctx, parameter_overrides=overrides))
        deadline = time.monotonic() + 10
        while self.js_pub.get_subscription_count() < 1 or self.node.count_publishers(node.command_topic) < 1:
            assert time.monotonic() < deadline, "DDS discovery of the gravity node timed out"
            time.sleep(0.01)
        return node

    def send(self, names=NAMES, position=None, velocity=None, effort=(), stamp_ns: int | None = None):
        """Publish one JointState; stamp_ns None = now (ROS clock), 0 = unstamped."""
        msg = self.JointState()
        msg.name = list(names)
        msg.position = [float(x) for x in (position if position is not None else PANDA.base_pose)]
        msg.velocity = [float(x) for x in (velocity if velocity is not None else [0.0] * len(msg.name))]
        msg.effort = [float(x) for x in effort]
        t = time.time_ns() if stamp_ns is None else stamp_ns
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t, 1_000_000_000)
        self.js_pub.publish(msg)

    def wait_command(self, expected: np.ndarray, timeout: float = 3.0, since: int = 0) -> bool:
        """Wait until a command equal to ``expected`` (1e-9) arrives after index ``since``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for _, data in self.commands[since:]:
                if data.shape == expected.shape and np.abs(data - expected).max() <= TOL:
                    return True
            time.sleep(0.005)
        return False

    def sentinel(self, q, order=NAMES, timeout: float = 3.0) -> bool:
        """Send a good message with pose ``q`` (model order), names in ``order``; True when answered with
        g(q). Messages are processed in order, so every earlier message has been handled by then."""
        since = len(self.commands)
        by_name = dict(zip(NAMES, q))
        self.send(order, [by_name[n] for n in order])
        return self.wait_command(gravity_of(q), timeout, since)

    def last_status(self):
        for s in reversed(self.diagnostics):
            if s.name.startswith(f"/gravity_compensation_{self.tag}:"):
                return s
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self):
        for n in self.nodes:
            try:
                n.destroy_node()
            except Exception:  # noqa: BLE001 - already destroyed by the test
                pass
        self._spinner.stop()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.ctx)
