"""ROS 1 bags (written here by rosbags' own rosbag1 Writer with the ROS 1 Noetic message definitions, as
``rosbag record`` writes them) read by the project's bag layer and by ``identify``'s recording reader: the
values come back as written, the header's ROS 1 ``seq`` dropped; and the stamp fallback of a recording."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag1 import Writer as Ros1Writer
from rosbags.typesys import Stores, get_typestore

from robot_dynamics_tools import bags
from robot_dynamics_tools.recordings import read_recording

#: the Panda's arm and finger joints, as franka_ros publishes them on /joint_states
PANDA = [*(f"panda_joint{i}" for i in range(1, 8)), "panda_finger_joint1", "panda_finger_joint2"]
T0 = 1_600_000_000_000_000_000


def write_ros1_joint_states(path: Path, n: int = 50, hz: float = 100.0, *, topic="/joint_states") -> dict:
    """A ROS 1 bag of ``n`` JointState messages (Panda names, efforts); returns what was written."""
    store = get_typestore(Stores.ROS1_NOETIC)
    T = store.types
    k = np.arange(n)[:, None]
    q = 0.3 * np.sin(2 * np.pi * 0.5 * k / hz + np.arange(9))
    qd = 0.3 * np.pi * np.cos(2 * np.pi * 0.5 * k / hz + np.arange(9))
    tau = 5.0 + 2.0 * np.cos(k / hz + np.arange(9))
    stamps = T0 + (np.arange(n) * 1e9 / hz).astype(np.int64)
    with Ros1Writer(path) as w:
        conn = w.add_connection(topic, "sensor_msgs/msg/JointState", typestore=store)
        for i in range(n):
            ns = int(stamps[i])
            msg = T["sensor_msgs/msg/JointState"](
                header=T["std_msgs/msg/Header"](seq=i, stamp=T["builtin_interfaces/msg/Time"](
                    sec=ns // 10**9, nanosec=ns % 10**9), frame_id=""),
                name=PANDA, position=q[i], velocity=qd[i], effort=tau[i])
            w.write(conn, ns + 300_000, store.serialize_ros1(msg, "sensor_msgs/msg/JointState"))
    return {"q": q, "qd": qd, "tau": tau, "stamps": stamps}


def test_a_ros1_bag_reads_as_ros2_messages(tmp_path):
    sent = write_ros1_joint_states(tmp_path / "panda.bag", n=20)
    with bags.BagReader(tmp_path / "panda.bag") as bag:
        assert bag.ros1 and bag.storage == "ros1"
        assert bag.topics == {"/joint_states": bags.JOINT_STATE} and bag.counts == {"/joint_states": 20}
        msgs = list(bag.messages({"/joint_states": bags.JOINT_STATE}))
    assert [m.t_ns for m in msgs] == [int(s) + 300_000 for s in sent["stamps"]]
    for i, m in enumerate(msgs):
        assert list(m.msg.name) == PANDA
        assert m.msg.header.stamp.sec * 10**9 + m.msg.header.stamp.nanosec == sent["stamps"][i]
        assert np.array_equal(m.msg.position, sent["q"][i]) and np.array_equal(m.msg.effort, sent["tau"][i])


def test_a_ros1_bag_under_any_name_is_recognised_by_its_header(tmp_path):
    write_ros1_joint_states(tmp_path / "recording.db3", n=5)  # a misleading suffix
    assert bags.is_ros1_bag(tmp_path / "recording.db3")
    assert len(bags.read_messages(tmp_path / "recording.db3", ["/joint_states"])) == 5


def test_a_corrupt_ros1_bag_is_one_error_naming_it(tmp_path):
    path = tmp_path / "cut.bag"
    write_ros1_joint_states(path, n=50)
    path.write_bytes(path.read_bytes()[:600])
    with pytest.raises(bags.BagError, match="ROS 1 bag '.*cut.bag'"):
        bags.read_messages(path, ["/joint_states"])


def test_identify_reads_a_ros1_recording(tmp_path):
    sent = write_ros1_joint_states(tmp_path / "panda.bag", n=30)
    rec = read_recording(tmp_path / "panda.bag")
    assert list(rec.joint_names) == PANDA
    np.testing.assert_array_equal(rec.q, sent["q"])
    np.testing.assert_array_equal(rec.tau, sent["tau"])
    np.testing.assert_allclose(rec.t, (sent["stamps"] - sent["stamps"][0]) * 1e-9, rtol=0, atol=1e-12)


def test_a_recording_with_an_unstamped_message_uses_record_times_throughout(tmp_path):
    """A simulator clock at 0 stamps the first message 0 and the next ones with simulated time: mixing the
    record time (wall clock) of the first with the stamps of the others would make time run backwards."""
    from sensor_msgs.msg import JointState

    with bags.BagWriter(tmp_path / "sim", storage="mcap") as w:
        for k in range(10):
            m = JointState(name=["j1"], position=[0.1 * k], velocity=[0.0], effort=[1.0])
            m.header.stamp.nanosec = k * 1_000_000  # 0 for the first message
            w.write("/joint_states", m, T0 + k * 2_000_000)
    rec = read_recording(tmp_path / "sim")
    np.testing.assert_allclose(rec.t, np.arange(10) * 2e-3, rtol=0, atol=1e-12)
