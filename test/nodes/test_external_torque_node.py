"""External-torque observer node over real DDS: a robot at rest whose measured efforts differ from the
model's g(q) by P gives τ_ext = −P (Pinocchio on the unmodified URDF as the reference; at rest
M q̈ + C q̇ + g = τ_m + τ_ext gives τ_ext = g − τ_m), the collision flag and its reset, the
commanded-torque source, and no output from bad input."""
from __future__ import annotations

import math
import time

import numpy as np
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray
from std_srvs.srv import Trigger

from robot_dynamics_ros.nodes.external_torque_observer import ExternalTorqueObserverNode
from robot_dynamics_testing.ros_world import RosWorld
from test_gravity_node import ARM, RefPanda

Q = {"panda_joint1": 0.3, "panda_joint2": 0.6, "panda_joint3": -0.4, "panda_joint4": -1.6,
     "panda_joint5": 0.5, "panda_joint6": 1.9, "panda_joint7": 0.7}
PUSH = np.array([0.0, 6.0, 0.0, -4.0, 0.0, 0.5, 0.0])  # N·m the drives add to hold the arm at rest


class Harness(RosWorld):
    def __init__(self, **params):
        super().__init__("test_io")
        overrides = [Parameter("urdf_path", value="panda"), Parameter("gain", value=200.0),
                     Parameter("threshold", value=[3.0]), Parameter("state_timeout", value=0.5),
                     Parameter("wrench_frame", value="panda_link7")]
        overrides += [Parameter(k, value=v) for k, v in params.items()]
        self.node = self.add(ExternalTorqueObserverNode(context=self.ctx, parameter_overrides=overrides))
        self.io = self.peer
        self.pub = self.io.create_publisher(JointState, "/joint_states", 10)
        self.cmd_pub = self.io.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
        self.tau: list[np.ndarray] = []
        self.io.create_subscription(JointState, "/external_torque_observer/external_torque",
                                    lambda m: self.tau.append(np.array(m.effort)), 100)
        self.flags: list[bool] = []
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        self.io.create_subscription(Bool, "/external_torque_observer/collision",
                                    lambda m: self.flags.append(m.data),
                                    QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE,
                                               durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self.wait(lambda: self.pub.get_subscription_count() > 0)
        self.t = time.time()

    def send(self, q, effort=None, dt=0.002):
        self.t += dt
        msg = JointState()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(self.t * 1e9), 1_000_000_000)
        msg.name = list(ARM)
        msg.position = [float(q[j]) for j in ARM]
        msg.velocity = [0.0] * 7
        msg.effort = [] if effort is None else [float(x) for x in effort]
        n0 = len(self.tau)
        self.pub.publish(msg)
        self.wait(lambda: len(self.tau) > n0, 0.2)



def test_at_rest_external_torque_is_measured_minus_model_and_collision_resets():
    g = RefPanda().gravity(Q, ARM)
    h = Harness()
    try:
        for _ in range(20):           # measured = model: no external torque
            h.send(Q, g)
        assert len(h.tau) >= 15 and np.abs(h.tau[-1]).max() < 1e-9
        assert not any(h.flags)
        for _ in range(60):           # 60 samples of 2 ms = 24 time constants at K_O = 200/s
            h.send(Q, g + PUSH)
        np.testing.assert_allclose(h.tau[-1], -PUSH, atol=1e-6)
        assert h.wait(lambda: h.flags and h.flags[-1], 1.0)
        assert h.node.diag.level == 2
        w = h.node.core.wrench("panda_link7")
        assert w is not None and np.all(np.isfinite(w))
        for _ in range(60):           # contact gone: flag released by the hysteresis rule
            h.send(Q, g)
        assert h.wait(lambda: h.flags[-1] is False, 1.0)
        for _ in range(60):
            h.send(Q, g + PUSH)
        assert h.wait(lambda: h.flags[-1] is True, 1.0)
        cli = h.io.create_client(Trigger, "/external_torque_observer/reset_collision")
        assert h.wait(cli.service_is_ready)
        fut = cli.call_async(Trigger.Request())
        assert h.wait(fut.done) and fut.result().success
        assert h.wait(lambda: h.flags[-1] is False, 1.0)
        # bad input: a NaN position publishes nothing
        n0 = len(h.tau)
        h.send({**Q, "panda_joint3": math.nan}, g)
        assert len(h.tau) == n0
        assert all(np.all(np.isfinite(t)) for t in h.tau)
    finally:
        h.close()


def test_commanded_source_when_joint_states_carry_no_effort():
    g = RefPanda().gravity(Q, ARM)
    h = Harness()
    try:
        n0 = len(h.tau)
        h.send(Q)                     # no effort and no command heard: nothing published
        assert len(h.tau) == n0 and "no joint torque" in h.node.diag.message
        h.wait(lambda: h.cmd_pub.get_subscription_count() > 0)
        h.cmd_pub.publish(Float64MultiArray(data=[float(x) for x in g + PUSH]))
        h.wait(lambda: h.node.core is not None and np.all(np.isfinite(h.node.core._commanded)), 1.0)
        for _ in range(60):
            h.send(Q)
        np.testing.assert_allclose(h.tau[-1], -PUSH, atol=1e-6)
    finally:
        h.close()


def test_non_finite_effort_and_stale_states_publish_nothing_and_are_diagnosed():
    g = RefPanda().gravity(Q, ARM)
    h = Harness(torque_source="measured")
    try:
        for _ in range(10):
            h.send(Q, g)
        n0 = len(h.tau)
        assert n0 >= 5
        h.send(Q, np.where(np.arange(7) == 3, np.nan, g))  # one joint's effort NaN: no torque to balance
        assert len(h.tau) == n0 and "panda_joint4" in h.node.diag.message and h.node.core.no_torque == 1
        # the states stop: past state_timeout (0.5 s) the timer reports them stale, level ERROR, nothing sent
        assert h.wait(lambda: "stale" in h.node.diag.message, 3.0), h.node.diag.message
        assert h.node.diag.level == 2 and len(h.tau) == n0
        assert all(np.all(np.isfinite(t)) for t in h.tau)
    finally:
        h.close()


def test_external_torque_writer_bytes_deserialize_to_the_message():
    """The preallocated CDR of ~/external_torque against rclpy's own deserializer."""
    from rclpy.serialization import deserialize_message

    from robot_dynamics_ros.nodes.cdr import JointStateEffortWriter

    for names in ([], ["a"], ARM, ["j_ü", "abc", "de"]):
        w = JointStateEffortWriter(names)
        effort = [0.25 * i - 1.0 for i in range(len(names))]
        for stamp in (0, 1_700_000_123_456_789_012):
            m = deserialize_message(w.write(stamp, effort), JointState)
            assert (m.header.stamp.sec, m.header.stamp.nanosec) == divmod(stamp, 1_000_000_000)
            assert m.header.frame_id == "" and list(m.name) == list(names)
            assert list(m.position) == [] and list(m.velocity) == [] and list(m.effort) == effort
