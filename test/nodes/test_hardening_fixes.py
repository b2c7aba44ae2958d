"""Regressions found by the attack benchmark (benchmarks/bench_attack.py), checked without DDS."""
from __future__ import annotations

import time

import pytest
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from robot_dynamics_ros.nodes.cdr import MAX_PATTERN_NAMES, JointStateReader
from robot_dynamics_ros.control.joint_mapping import JointStateMapper, RejectCode

NAMES = [f"j{i}" for i in range(7)]
MS = 1_000_000


@pytest.mark.parametrize("ordering", ["model", "reversed"])
def test_a_state_stamped_ahead_does_not_block_the_correct_states_after_it(ordering):
    m = JointStateMapper(NAMES)
    now = 10**12
    names = NAMES if ordering == "model" else NAMES[::-1]  # read as it is, or through the cached permutation
    kw = dict(max_future_ns=100 * MS)
    assert m.update(names, [0.1] * 7, [0.0] * 7, stamp_ns=now, arrival_ns=1, now_stamp_ns=now, **kw) is None
    assert m.update(names, [0.2] * 7, [0.0] * 7, stamp_ns=now + 90 * MS, arrival_ns=2,
                    now_stamp_ns=now + 1 * MS, **kw) is None      # 89 ms ahead: accepted
    # the next correct state, sent after that one arrived, is accepted (it used to be "out of order")
    assert m.update(names, [0.3] * 7, [0.0] * 7, stamp_ns=now + 2 * MS, arrival_ns=3,
                    now_stamp_ns=now + 3 * MS, **kw) is None
    assert list(m.q) == [0.3] * 7
    # a state genuinely older than what was accepted is still refused
    rej = m.update(names, [0.4] * 7, [0.0] * 7, stamp_ns=now + 1 * MS // 2, arrival_ns=4,
                   now_stamp_ns=now + 4 * MS, **kw)
    assert rej is not None and rej.code == RejectCode.OUT_OF_ORDER
    # and one beyond the tolerated skew is refused as from the future
    rej = m.update(names, [0.5] * 7, [0.0] * 7, stamp_ns=now + 200 * MS, arrival_ns=5,
                   now_stamp_ns=now + 5 * MS, **kw)
    assert rej is not None and rej.code == RejectCode.FUTURE


def test_ever_changing_huge_name_orderings_are_read_without_compiling_a_pattern_each():
    reader = JointStateReader()
    msgs = []
    for k in range(10):
        msg = JointState()
        msg.name = [f"x{k}_{i}" for i in range(10_000)]
        msg.position = [0.0] * 10_000
        msgs.append(serialize_message(msg))
    t0 = time.perf_counter()
    for b in msgs:
        assert len(reader.read(b).names) == 10_000
    per_msg = (time.perf_counter() - t0) / len(msgs)
    assert reader._match is None and 10_000 > MAX_PATTERN_NAMES
    assert per_msg < 0.05  # a regex compile of 10 000 names alone takes ~0.1 s
    # a repeated ordering of a real robot's size still gets its pattern (the 1 kHz fast path)
    small = JointState()
    small.name = NAMES
    small.position = [0.0] * 7
    b = serialize_message(small)
    reader.read(b)
    reader.read(b)
    assert reader._match is not None and reader.read(b).names == tuple(n.encode() for n in NAMES)


def test_deeply_nested_description_is_one_line_error_and_real_urdfs_are_far_below_the_depth_cap():
    import glob
    import xml.etree.ElementTree as ET

    from robot_dynamics_ros import robots
    from robot_dynamics_ros.urdf_reader import MAX_URDF_DEPTH
    from robot_dynamics_ros.errors import URDFError
    from robot_dynamics_ros.model import RobotModel

    text = robots.resolve("panda").path.read_text()
    nested = "<visual>" + "<a>" * 150_000 + "</a>" * 150_000 + "</visual>"
    with pytest.raises(URDFError, match="nested more than") as exc:
        RobotModel.from_text(text.replace('<link name="panda_link1">', '<link name="panda_link1">' + nested, 1))
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 200

    def depth(e, d=1):
        return max([d, *(depth(c, d + 1) for c in e)])

    files = glob.glob(str(robots.example_robot_data_dir() / "**" / "*.urdf"), recursive=True)
    deepest = max(depth(ET.parse(f).getroot()) for f in files if ET.parse(f).getroot().tag == "robot")
    assert len(files) >= 60 and deepest * 5 < MAX_URDF_DEPTH


def test_oversized_description_is_refused_by_its_size_before_deserialization():
    """The loader's raw callback: a 50 MB message is refused at once with one short line, nothing parsed."""
    from std_msgs.msg import String

    from robot_dynamics_ros.nodes.model_source import ModelLoader

    loader = ModelLoader.__new__(ModelLoader)   # only the callback's state, no node
    lines = []
    loader._log = type("L", (), {"error": staticmethod(lambda key, text: lines.append(text))})()
    loader._pending_text = None
    raw = serialize_message(String(data="x" * (50 * 1024 * 1024)))
    t0 = time.perf_counter()
    loader._on_description(raw)
    assert time.perf_counter() - t0 < 0.05 and loader._pending_text is None
    assert len(lines) == 1 and "MAX_URDF_BYTES" in lines[0] and len(lines[0]) < 200
