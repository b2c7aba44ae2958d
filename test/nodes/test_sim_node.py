"""MuJoCo simulator node over real DDS: JointState out, effort commands in (ordered by its joint list)."""
from __future__ import annotations

import time

import numpy as np
import pinocchio as pin
import pytest
import rclpy
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_dynamics_ros import robots
from robot_dynamics_ros.nodes.simulator import SimulatorNode
from robot_dynamics_testing.ros_world import RosWorld

UR5 = robots.ROBOTS["ur5"]
URDF_ORDER = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
              "wrist_3_joint"]
CMD_ORDER = ["wrist_3_joint", "elbow_joint", "shoulder_pan_joint", "wrist_2_joint", "shoulder_lift_joint",
             "wrist_1_joint"]


class SimHarness(RosWorld):
    def __init__(self, **extra):
        super().__init__("sim_io")
        pose = UR5.demo_pose
        self.node = self.add(SimulatorNode(context=self.ctx, parameter_overrides=[
            Parameter("urdf_path", value="ur5"), Parameter("joints", Parameter.Type.STRING_ARRAY, CMD_ORDER),
            Parameter("initial_joint_names", Parameter.Type.STRING_ARRAY, list(pose)),
            Parameter("initial_positions", Parameter.Type.DOUBLE_ARRAY, list(pose.values())),
            *[Parameter(k, value=v) for k, v in extra.items()]]))
        self.io = self.peer
        self.states: list[JointState] = []
        self.io.create_subscription(JointState, "/joint_states", self.states.append, 10)
        self.cmd = self.io.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
        self.ex = self.executor


def _ref_gravity(q_by_name):
    m = pin.buildModelFromUrdf(str(UR5.path))
    q = pin.neutral(m)
    for jn, v in q_by_name.items():
        q[m.joints[m.getJointId(jn)].idx_q] = v
    g = pin.computeGeneralizedGravity(m, m.createData(), q)
    return {jn: g[m.joints[m.getJointId(jn)].idx_v] for jn in q_by_name}


def test_free_running_publishes_full_joint_states_at_rate():
    h = SimHarness(publish_rate=200.0)
    try:
        assert h.wait(lambda: len(h.states) >= 40, 5.0)
        t0 = time.monotonic()
        n0 = len(h.states)
        h.wait(lambda: False, 0.5)
        rate = (len(h.states) - n0) / (time.monotonic() - t0)
        assert 80 < rate < 260   # 200 Hz nominal; generous for a loaded 2-core CI machine
        msg = h.states[-1]
        assert list(msg.name) == URDF_ORDER
        assert len(msg.position) == len(msg.velocity) == len(msg.effort) == 6
        stamps = [s.header.stamp.sec + 1e-9 * s.header.stamp.nanosec for s in h.states[-20:]]
        assert np.all(np.diff(stamps) > 0) and abs(stamps[-1] - time.time()) < 1.0
        # no command: the arm falls from its initial pose
        assert abs(msg.position[1] - UR5.demo_pose["shoulder_lift_joint"]) > 1e-3
    finally:
        h.close()


def test_publish_rate_reconfigured_at_run_time():
    """`publish_rate` is dynamically reconfigurable (free running: the timer period follows it)."""
    h = SimHarness(publish_rate=200.0)
    try:
        assert h.wait(lambda: len(h.states) >= 10, 5.0)
        assert h.node.set_parameters([Parameter("publish_rate", value=25.0)])[0].successful
        h.wait(lambda: False, 0.1)                       # let the old timer's last ticks pass
        n0, t0 = len(h.states), time.monotonic()
        h.wait(lambda: False, 0.8)
        rate = (len(h.states) - n0) / (time.monotonic() - t0)
        assert 10 < rate < 40    # 25 Hz now (200 Hz before); generous for a loaded CI machine
    finally:
        h.close()


def test_lockstep_commands_applied_by_name_and_hold_the_arm():
    h = SimHarness(publish_rate=500.0, lockstep=True)
    try:
        assert h.wait(lambda: h.cmd.get_subscription_count() > 0 and len(h.states) > 0)
        for _ in range(50):   # 50 closed-loop steps of 2 ms with g(q) from an independent Pinocchio
            last = h.states[-1]
            q = dict(zip(last.name, last.position))
            g = _ref_gravity(q)
            n0 = len(h.states)
            h.cmd.publish(Float64MultiArray(data=[float(g[j]) for j in CMD_ORDER]))
            assert h.wait(lambda: len(h.states) > n0, 2.0)
        last = h.states[-1]
        assert h.node.sim.time == pytest.approx(0.1)
        drift = max(abs(p - UR5.demo_pose[n]) for n, p in zip(last.name, last.position))
        assert drift < 1e-9
        # the efforts reported are the command, mapped by name (not by position in the array)
        np.testing.assert_allclose(dict(zip(last.name, last.effort))["wrist_3_joint"],
                                   _ref_gravity(dict(zip(h.states[-2].name, h.states[-2].position)))["wrist_3_joint"],
                                   atol=1e-12)
        # bad commands are rejected; the node stays up and keeps the last good effort
        n_rej = h.node.diag.counters.get("rejected_commands", 0)
        h.cmd.publish(Float64MultiArray(data=[1.0, 2.0]))
        h.cmd.publish(Float64MultiArray(data=[float("nan")] * 6))
        assert h.wait(lambda: h.node.diag.counters.get("rejected_commands", 0) == n_rej + 2, 2.0)
        assert np.isfinite(h.node.sim.effort).all()
    finally:
        h.close()


def test_publish_clock_stamps_joint_states_with_simulated_time():
    from rosgraph_msgs.msg import Clock

    h = SimHarness(publish_rate=500.0, lockstep=True, publish_clock=True)
    try:
        clocks = []
        h.io.create_subscription(Clock, "/clock", clocks.append, 10)
        assert h.wait(lambda: h.cmd.get_subscription_count() > 0 and len(h.states) > 0 and clocks)
        for _ in range(5):
            n0 = len(h.states)
            h.cmd.publish(Float64MultiArray(data=[0.0] * 6))
            assert h.wait(lambda: len(h.states) > n0, 2.0)
        stamp = h.states[-1].header.stamp
        # the clock starts at clock_start (default 1000 s: positive, never the "unstamped" 0)
        assert h.node.get_parameter("clock_start").value == 1000.0
        assert stamp.sec == 1000 and stamp.nanosec == round(h.node.sim.time * 1e9) == 10_000_000   # 5 x 2 ms
        assert h.wait(lambda: clocks[-1].clock == stamp, 1.0)
        assert clocks[0].clock.sec == 1000                # the very first /clock too
        h.node.reset()                                   # time goes on from where it was (+1 ms)
        h.node._publish()
        assert h.wait(lambda: h.states[-1].header.stamp.nanosec == 11_000_000, 1.0)
    finally:
        h.close()


def test_closed_loop_on_simulated_time_holds_the_arm():
    """Gazebo-style: the simulator publishes /clock, the gravity node runs with use_sim_time."""
    from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode

    h = SimHarness(publish_rate=500.0, lockstep=True, publish_clock=True)
    try:
        grav = h.add(GravityCompensationNode(context=h.ctx, parameter_overrides=[
            Parameter("urdf_path", value="ur5"), Parameter("use_sim_time", value=True),
            Parameter("joints", Parameter.Type.STRING_ARRAY, CMD_ORDER), Parameter("crossval_samples", value=0)]))
        assert h.wait(lambda: h.node.sim.time >= 0.2, 10.0)    # 100 commands, each answering a state
        assert grav.get_clock().now().nanoseconds > 0           # the node follows /clock
        q = h.node.sim.q
        drift = max(abs(q[i] - UR5.demo_pose[n]) for i, n in enumerate(h.node.sim.joint_names))
        assert drift < 1e-6 and grav.diag.counters.get("stale", 0) == 0
    finally:
        h.close()


def test_qos_through_the_standard_overrides():
    """Depth and reliability of both endpoints come from rclpy's qos_overrides parameters (defaults:
    reliable keep-last 10); the resolved names carry the namespace."""
    from rclpy.qos import ReliabilityPolicy

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        node = SimulatorNode(context=ctx, namespace="/cell", parameter_overrides=[
            Parameter("urdf_path", value="ur5"),
            Parameter("qos_overrides./cell/joint_states.publisher.depth", value=37),
            Parameter("qos_overrides./cell/joint_states.publisher.reliability", value="best_effort"),
            Parameter("qos_overrides./cell/effort_controller/commands.subscription.depth", value=3)])
        try:
            assert node.state_pub.topic_name == "/cell/joint_states"
            assert node.state_pub.qos_profile.depth == 37
            assert node.state_pub.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
            assert node.cmd_sub.qos_profile.depth == 3
            assert node.cmd_sub.qos_profile.reliability == ReliabilityPolicy.RELIABLE
        finally:
            node.destroy_node()
        plain = SimulatorNode(context=ctx, parameter_overrides=[Parameter("urdf_path", value="ur5")])
        try:
            assert plain.state_pub.qos_profile.depth == 10 == plain.cmd_sub.qos_profile.depth
        finally:
            plain.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
