"""``robot-dynamics record`` over DDS: what a publisher sent is what the bag holds, read back by rosbags'
own reader (not our writer's code) and by the reader ``replay`` uses."""
from __future__ import annotations

import json

import numpy as np
import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosbags.highlevel import AnyReader
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from robot_dynamics_ros.nodes.runtime import make_executor
from robot_dynamics_testing.ros_world import SpinThread
from robot_dynamics_tools import bags, cli


def test_record_writes_an_mcap_bag_readable_by_rosbags_and_replay(tmp_path, capfd):
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("talker", context=ctx)
    pub = node.create_publisher(JointState, "/joint_states", 10)
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    node.create_publisher(String, "/robot_description", latched).publish(String(data="<robot name='x'/>"))
    sent: list[float] = []

    def tick():
        msg = JointState(name=["a", "b"], position=[len(sent) * 0.01, -len(sent) * 0.01], velocity=[0.0, 0.0])
        sent.append(msg.position[0])
        pub.publish(msg)

    node.create_timer(0.01, tick)
    executor = make_executor("single", context=ctx)
    executor.add_node(node)
    spin = SpinThread(executor, ctx)
    out = tmp_path / "run1"
    try:
        status = cli.main(["record", "/joint_states", "/robot_description", "--out", str(out), "--duration", "1.0"])
    finally:
        spin.stop()
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=ctx)
    assert status == 0
    summary = json.loads(capfd.readouterr().out.strip().splitlines()[-1])
    assert summary["messages"]["/robot_description"] == 1      # the latched message too
    assert list(out.glob("*.mcap"))
    with AnyReader([out]) as reader:
        got = {c.topic: c.msgtype for c in reader.connections}
        assert got == {"/joint_states": "sensor_msgs/msg/JointState", "/robot_description": "std_msgs/msg/String"}
        positions = [reader.deserialize(raw, c.msgtype).position[0]
                     for c, _, raw in reader.messages() if c.topic == "/joint_states"]
    assert 80 <= len(positions) == summary["messages"]["/joint_states"]
    # consecutive messages as sent (none reordered or altered), a contiguous run of what was published
    np.testing.assert_allclose(np.diff(positions), 0.01, atol=1e-12)
    assert set(np.round(positions, 9)) <= set(np.round(sent, 9))
    ours = bags.read_messages(out, {"/joint_states": bags.JOINT_STATE})
    assert [m.msg.position[0] for m in ours] == positions
