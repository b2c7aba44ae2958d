"""rosbag2 read/write (robot_dynamics_tools.bags) in both storage formats, checked against rosbags itself."""
from __future__ import annotations

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.serialization import serialize_message
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_dynamics_tools import bags
from robot_dynamics_tools.bags import BagError, BagReader, BagWriter, read_messages, write_bag
from robot_dynamics_ros.errors import UserError

STORAGES = ["sqlite3", "mcap"]
NAMES = [f"panda_joint{i}" for i in range(1, 8)]


def joint_state(k: int) -> JointState:
    m = JointState(name=NAMES, position=[0.01 * k + j for j in range(7)], velocity=[-0.5 * j for j in range(7)])
    m.header.stamp.sec, m.header.stamp.nanosec, m.header.frame_id = 12 + k // 500, (k % 500) * 2_000_000, "base"
    return m


def command(k: int) -> Float64MultiArray:
    m = Float64MultiArray(data=[np.pi * k, -1e-300, 1e300, 0.0, 2.5, -7.0, float(k)])
    m.layout.dim = [MultiArrayDimension(label="joints", size=7, stride=7)]
    return m


def trajectory() -> JointTrajectory:
    m = JointTrajectory(joint_names=NAMES[:2])
    for i in range(3):
        p = JointTrajectoryPoint(positions=[0.1 * i, 0.2 * i], velocities=[1.0, 2.0], accelerations=[], effort=[])
        p.time_from_start.sec, p.time_from_start.nanosec = i, 500_000_000
        m.points.append(p)
    return m


def diagnostics() -> DiagnosticArray:
    return DiagnosticArray(status=[DiagnosticStatus(level=DiagnosticStatus.WARN, name="gravity_compensation",
                                                    message="stale", hardware_id="panda",
                                                    values=[KeyValue(key="rate_hz", value="499.8")])])


def records():
    out = [("/joint_states", 1_000_000_000 + 2_000_000 * k, joint_state(k)) for k in range(50)]
    out += [("/effort_commands", 1_000_000_500 + 2_000_000 * k, command(k)) for k in range(50)]
    out += [("/trajectory", 1_050_000_000, trajectory()), ("/diagnostics", 1_060_000_000, diagnostics())]
    return sorted(out, key=lambda r: r[1])


def same_msg(a, b) -> bool:
    """Equal as messages: same type and every field equal (rclpy's generated ``__eq__``)."""
    return type(a) is type(b) and a == b and a is not b


@pytest.mark.parametrize("storage", STORAGES)
def test_round_trip_all_message_types(tmp_path, storage):
    recs = records()
    assert write_bag(tmp_path / "bag", recs, storage=storage) == len(recs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bag"]  # no temporary directory left behind
    with BagReader(tmp_path / "bag") as bag:
        assert bag.storage == storage
        assert bag.topics == {"/joint_states": bags.JOINT_STATE, "/effort_commands": bags.FLOAT64_MULTI_ARRAY,
                              "/trajectory": bags.JOINT_TRAJECTORY, "/diagnostics": bags.DIAGNOSTIC_ARRAY}
        assert bag.counts == {"/joint_states": 50, "/effort_commands": 50, "/trajectory": 1, "/diagnostics": 1}
        got = list(bag.messages())
    assert [(m.topic, m.t_ns) for m in got] == [(t, ns) for t, ns, _ in recs]
    for m, (_, _, sent) in zip(got, recs):
        assert type(m.msg) is type(sent) and same_msg(m.msg, sent)
    js = [m.msg for m in got if m.topic == "/joint_states"]
    assert list(js[7].name) == NAMES and js[7].position[3] == 0.07 + 3 and js[7].header.frame_id == "base"
    cmd = [m.msg for m in got if m.topic == "/effort_commands"][3]
    assert list(cmd.data) == [np.pi * 3, -1e-300, 1e300, 0.0, 2.5, -7.0, 3.0]  # doubles bit-exact


@pytest.mark.parametrize("storage", STORAGES)
def test_our_bags_read_by_plain_rosbags(tmp_path, storage):
    write_bag(tmp_path / "bag", records(), storage=storage)
    store = bags.typestore("latest")
    with Reader(tmp_path / "bag") as reader:
        conns = [c for c in reader.connections if c.topic == "/joint_states"]
        decoded = [store.deserialize_cdr(raw, c.msgtype) for c, _, raw in reader.messages(connections=conns)]
    assert len(decoded) == 50
    assert list(decoded[9].name) == NAMES
    np.testing.assert_array_equal(decoded[9].position, [0.09 + j for j in range(7)])
    assert decoded[9].header.stamp.nanosec == 18_000_000


@pytest.mark.parametrize("storage", STORAGES)
def test_bags_written_by_plain_rosbags_read_as_rclpy(tmp_path, storage):
    store = bags.typestore("jazzy")
    T = store.types
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(tmp_path / "bag", version=9, storage_plugin=plugin) as w:
        conn = w.add_connection("/robot/joint_states", bags.JOINT_STATE, typestore=store)
        for k in range(20):
            msg = T[bags.JOINT_STATE](
                header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=k, nanosec=7),
                                                frame_id=""),
                name=["b", "a"], position=np.array([k, -k], float), velocity=np.zeros(0), effort=np.array([1.5, 2.5]))
            w.write(conn, 10 + k, store.serialize_cdr(msg, bags.JOINT_STATE))
    got = read_messages(tmp_path / "bag", {"/robot/joint_states": JointState})
    assert [m.t_ns for m in got] == list(range(10, 30))
    m = got[4].msg
    assert isinstance(m, JointState) and list(m.name) == ["b", "a"] and list(m.position) == [4.0, -4.0]
    assert list(m.velocity) == [] and list(m.effort) == [1.5, 2.5] and m.header.stamp.nanosec == 7


def test_conversion_rclpy_rosbags_both_ways():
    store = bags.typestore("humble")
    for msg in (joint_state(3), command(2), trajectory(), diagnostics()):
        obj = bags.rclpy_to_rosbags(msg, store)
        assert obj.__msgtype__ == bags.msgtype_name(msg)
        back = bags.rosbags_to_rclpy(obj, store)
        assert type(back) is type(msg) and same_msg(back, msg)
    obj = bags.rclpy_to_rosbags(trajectory(), store)
    assert obj.points[2].time_from_start.sec == 2 and list(obj.points[1].positions) == [0.1, 0.2]


def test_raw_serialized_records_round_trip(tmp_path):
    with BagWriter(tmp_path / "raw", storage="mcap") as w:
        for k in range(5):
            w.write_serialized("/joint_states", JointState, bytes(serialize_message(joint_state(k))), 100 + k)
    got = read_messages(tmp_path / "raw", ["/joint_states"])
    assert [same_msg(m.msg, joint_state(k)) for k, m in enumerate(got)] == [True] * 5


@pytest.mark.parametrize("distro", ["humble", "jazzy", "latest"])
def test_distro_typestores(tmp_path, distro):
    write_bag(tmp_path / "b", [("/c", 1, command(1))], storage="sqlite3", distro=distro)
    text = (tmp_path / "b" / "metadata.yaml").read_text()
    assert ("version: 8" in text) == (distro == "humble")
    assert same_msg(read_messages(tmp_path / "b")[0].msg, command(1))


# ------------------------------------------------------------------------------------------------ errors
def test_missing_topic_and_wrong_type_name_the_topic(tmp_path):
    write_bag(tmp_path / "b", [("/joint_states", 5, command(0))], storage="mcap")
    with BagReader(tmp_path / "b") as bag:
        with pytest.raises(BagError, match=r"topic '/joint_states' holds std_msgs/msg/Float64MultiArray, "
                                           r"expected sensor_msgs/msg/JointState"):
            list(bag.messages({"/joint_states": JointState}))
        with pytest.raises(BagError, match=r"topic '/robot/joint_states' is not in the bag \(topics: "
                                           r"/joint_states \(std_msgs/msg/Float64MultiArray\)\)"):
            list(bag.messages({"/robot/joint_states": "sensor_msgs/JointState"}))
    with BagWriter(tmp_path / "w") as w:
        w.write("/x", command(0), 1)
        with pytest.raises(BagError, match="topic '/x' holds std_msgs/msg/Float64MultiArray; cannot write a "
                                           "sensor_msgs/msg/JointState"):
            w.write("/x", joint_state(0), 2)
    assert isinstance(BagError("x"), UserError)


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("fraction", [0.97, 0.5, 0.05])
def test_truncated_storage_file(tmp_path, storage, fraction):
    write_bag(tmp_path / "b", records(), storage=storage)
    f = next(p for p in (tmp_path / "b").iterdir() if p.suffix in (".db3", ".mcap"))
    data = f.read_bytes()
    f.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(BagError, match=r"bag '.*b'.*(truncated or corrupt)"):
        read_messages(tmp_path / "b", {"/joint_states": JointState})


def test_corrupt_record_names_topic_and_index(tmp_path):
    from rosbags.rosbag2 import Writer

    from robot_dynamics_tools.bags import typestore

    good = bytes(serialize_message(joint_state(0)))
    with Writer(tmp_path / "b", version=9) as w:  # rosbags' writer: ours refuses the cut record
        conn = w.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=typestore("latest"))
        w.write(conn, 1, good)
        w.write(conn, 2, good[:40])
    with pytest.raises(BagError, match=r"topic '/joint_states': record 1 at t=2 ns is not a valid "
                                       r"sensor_msgs/msg/JointState"):
        read_messages(tmp_path / "b")


def test_the_writer_cuts_rclpy_slack_and_refuses_bytes_that_are_not_the_type(tmp_path):
    """rclpy's serialize_message of a JointState with empty position and velocity reports 8 bytes more than
    the message (uninitialized memory, different run to run): rosbags refuses such a record as a size
    mismatch. What BagWriter writes is what rosbags reads."""
    msg = JointState(name=[f"j{i}" for i in range(7)], effort=[1.0] * 7)
    raw = bytes(serialize_message(msg))
    store = typestore_latest()
    with BagWriter(tmp_path / "b") as w:
        w.write_serialized("/t", JointState, raw, 1)
        with pytest.raises(BagError, match="JointState"):
            w.write_serialized("/t", JointState, raw[:40], 2)
    from rosbags.rosbag2 import Reader

    with Reader(tmp_path / "b") as r:
        (_, _, data), = list(r.messages())
    assert list(store.deserialize_cdr(data, "sensor_msgs/msg/JointState").effort) == [1.0] * 7
    assert bytes(data) == raw[:len(data)]


def typestore_latest():
    from robot_dynamics_tools.bags import typestore

    return typestore("latest")


def test_missing_or_unreadable_metadata(tmp_path):
    with pytest.raises(BagError, match="no such file"):
        BagReader(tmp_path / "nope")
    write_bag(tmp_path / "b", records()[:3])
    (tmp_path / "b" / "metadata.yaml").write_text("rosbag2_bagfile_information: {version: 9, storage_id")
    with pytest.raises(BagError, match="cannot be opened"):
        BagReader(tmp_path / "b")


def test_writer_refuses_to_overwrite(tmp_path):
    (tmp_path / "b").mkdir()
    with pytest.raises(BagError, match="exists already"):
        BagWriter(tmp_path / "b").open()


@pytest.mark.parametrize("storage", STORAGES)
def test_failed_write_discards_and_says_so(tmp_path, storage, caplog):
    with pytest.raises(RuntimeError) as info:
        with BagWriter(tmp_path / "b", storage=storage) as w:
            w.write("/joint_states", joint_state(0), 1)
            raise RuntimeError("node died")
    assert list(tmp_path.iterdir()) == []
    assert any("nothing was written to" in n for n in info.value.__notes__)
    assert "nothing was written" in caplog.text


@pytest.mark.parametrize("storage", STORAGES)
def test_failed_write_keeps_partial_when_asked(tmp_path, storage, caplog):
    with pytest.raises(KeyboardInterrupt):
        with BagWriter(tmp_path / "b", storage=storage, on_error="keep") as w:
            for k in range(10):
                w.write("/joint_states", joint_state(k), k)
            raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.partial"]
    assert "10 messages written so far are kept in" in caplog.text
    got = read_messages(tmp_path / "b.partial", {"/joint_states": JointState})
    assert [same_msg(m.msg, joint_state(k)) for k, m in enumerate(got)] == [True] * 10


def test_bad_arguments():
    with pytest.raises(BagError, match="storage 'rosbag1'"):
        BagWriter("x", storage="rosbag1")
    with pytest.raises(BagError, match="distro 'rolling'"):
        BagWriter("x", distro="rolling")
    with pytest.raises(BagError, match="message type 'JointState'"):
        bags.normalize_msgtype("JointState")
    with pytest.raises(BagError, match="not installed"):
        bags.rclpy_class("no_such_msgs/msg/Thing")
