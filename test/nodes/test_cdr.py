"""nodes/cdr.py against rclpy's own (de)serialization, the independent reference.

JointState: every hypothesis-generated message rclpy serializes must read back with the fields rclpy
deserializes (names, stamp, position/velocity/effort, bit for bit incl. NaN/Inf/huge values and empty
arrays); random or truncated bytes must never raise. Float64MultiArray: what the writer produces must
deserialize (rclpy) to the message it stands for. The mapper's raw path must leave the same state and
return the same verdict as its message path.
"""
from __future__ import annotations

import array
import math
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from robot_dynamics_ros.nodes.cdr import Float64MultiArrayWriter, JointStateReader, fields_from_message, read_joint_state
from robot_dynamics_ros.control.joint_mapping import JointStateMapper

ARM = [f"panda_joint{i}" for i in range(1, 8)]

names_st = st.lists(st.one_of(st.sampled_from(ARM), st.text(max_size=12)), max_size=9)
floats_st = st.floats(allow_nan=True, allow_infinity=True, width=64)


def _msg(names, pos, vel, eff, sec, nanosec, frame_id) -> JointState:
    m = JointState()
    m.name = list(names)
    m.position = array.array("d", pos)
    m.velocity = array.array("d", vel)
    m.effort = array.array("d", eff)
    m.header.stamp.sec = sec
    m.header.stamp.nanosec = nanosec
    m.header.frame_id = frame_id
    return m


@st.composite
def joint_states(draw):
    names = draw(names_st)
    n = len(names)

    def field():
        k = draw(st.sampled_from([n, 0, n + 1, max(n - 1, 0)]))
        return draw(st.lists(floats_st, min_size=k, max_size=k))

    return _msg(names, field(), field(), field(), draw(st.integers(-2**31, 2**31 - 1)),
                draw(st.integers(0, 2**32 - 1)), draw(st.text(max_size=20)))


def _same_floats(a, b) -> bool:
    return len(a) == len(b) and all(struct.pack("<d", x) == struct.pack("<d", y) for x, y in zip(a, b))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(joint_states())
def test_read_joint_state_equals_rclpy_deserialization(msg):
    raw = serialize_message(msg)
    ref = deserialize_message(raw, JointState)
    got = read_joint_state(raw)
    assert got is not None
    assert [b.decode("utf-8") for b in got.names] == list(ref.name)
    assert got.stamp_ns == ref.header.stamp.sec * 1_000_000_000 + ref.header.stamp.nanosec
    assert _same_floats(got.position, ref.position)
    assert _same_floats(got.velocity, ref.velocity)
    assert _same_floats(got.effort, ref.effort)
    # the object path (a message that arrived deserialized) gives the same fields
    assert _same_fields(fields_from_message(ref), got)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_never_raise(data):
    got = read_joint_state(data)
    assert got is None or isinstance(got.names, tuple)
    got = read_joint_state(b"\x00\x01\x00\x00" + data)
    assert got is None or isinstance(got.names, tuple)


def test_truncated_and_foreign_encapsulations_are_not_read():
    msg = _msg(ARM, [0.1] * 7, [0.2] * 7, [], 5, 6, "base")
    raw = serialize_message(msg)
    # every prefix that cuts into the last field (effort's count is at len - 8 .. len - 4 before the
    # trailing padding) is refused rather than read short
    cut_at = [len(raw) - k for k in range(9, len(raw) - 4, 7)]
    assert all(read_joint_state(raw[:n]) is None for n in cut_at)
    assert read_joint_state(b"\x00\x00\x00\x00" + raw[4:]) is None   # big-endian CDR: rclpy's job
    assert read_joint_state(b"\x00\x07\x00\x00" + raw[4:]) is None   # XCDR2
    assert read_joint_state(b"") is None


@pytest.mark.parametrize("n", [0, 1, 7, 12])
@pytest.mark.parametrize("dims", [(), (("panda_joint1,panda_joint2", 2, 2),), (("a", 3, 3), ("bé", 1, 1))])
def test_writer_deserializes_to_the_message(n, dims):
    values = [math.pi * (i + 1) * (-1) ** i for i in range(n)]
    if n:
        values[0] = 1e308
    w = Float64MultiArrayWriter(n, dims, data_offset=3)
    for vals in (values, [v / 3.0 for v in values]):   # the buffer is reused: the second call overwrites
        m = deserialize_message(w.write(vals), Float64MultiArray)
        assert list(m.data) == vals
        assert [(d.label, d.size, d.stride) for d in m.layout.dim] == list(dims)
        assert m.layout.data_offset == 3
    ref = Float64MultiArray(data=values)
    ref.layout.dim = [MultiArrayDimension(label=a, size=b, stride=c) for a, b, c in dims]
    ref.layout.data_offset = 3
    assert len(w.write(values)) <= len(serialize_message(ref))   # (rclpy may append padding)
    with pytest.raises(ValueError, match=f"built for {n}"):
        w.write([0.0] * (n + 1))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(joint_states(), min_size=1, max_size=6))
def test_mapper_fields_path_equals_update_with_rclpy_fields(msgs):
    a = JointStateMapper(ARM, require_velocity=True)
    b = JointStateMapper(ARM, require_velocity=True)
    for k, msg in enumerate(msgs):
        raw = serialize_message(msg)
        ref = deserialize_message(raw, JointState)
        ra = a.update(list(ref.name), ref.position, ref.velocity, ref.effort, arrival_ns=1000 + k,
                      stamp_ns=ref.header.stamp.sec * 1_000_000_000 + ref.header.stamp.nanosec,
                      now_stamp_ns=2**62, max_future_ns=0)
        rb = b.update_fields(read_joint_state(raw), 1000 + k, now_stamp_ns=2**62, max_future_ns=0)
        assert ra == rb
        for f in ("q", "qd", "effort", "stamp_ns", "arrival_ns"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
        assert a.ready == b.ready and a.unknown_name_count == b.unknown_name_count


def _same_fields(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return (a.stamp_ns == b.stamp_ns and a.names == b.names and _same_floats(a.position, b.position)
            and _same_floats(a.velocity, b.velocity) and _same_floats(a.effort, b.effort))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(joint_states(), min_size=1, max_size=5), st.lists(st.text(max_size=9), min_size=3, max_size=3),
       st.binary(min_size=64, max_size=64))
def test_reader_remembering_the_ordering_equals_a_full_parse(msgs, frame_ids, junk):
    """Same names again (the pattern path) with other frame_id lengths (other alignment of the names),
    other values and arbitrary padding bytes; then a different ordering; always == read_joint_state."""
    reader = JointStateReader()
    for msg in msgs:
        for frame_id in [msg.header.frame_id, *frame_ids]:
            msg.header.frame_id = frame_id
            raw = serialize_message(msg)
            assert _same_fields(reader.read(raw), read_joint_state(raw))
            # padding bytes are undefined in CDR: overwrite every byte that is not part of a field
            ref = read_joint_state(raw)
            if ref is not None and ref.names:
                buf = bytearray(raw)
                off = 16 + struct.unpack_from("<I", raw, 12)[0]   # (rclpy cuts a frame_id at a NUL)
                off += -(off - 4) % 4 + 4
                for name in ref.names:
                    end = off + 4 + len(name) + 1
                    pad = -(end - 4) % 4
                    buf[end:end + pad] = junk[:pad]
                    off = end + pad
                assert _same_fields(reader.read(bytes(buf)), ref)
    assert reader.read(b"\x00\x00\x00\x00" + raw[4:]) is None


def test_joint_state_fields_falls_back_to_rclpy_for_what_the_reader_does_not_read():
    """wire.joint_state_fields: the reader's fields when it reads the buffer; rclpy's deserialization
    when it returns None; an exception (which the nodes log) when rclpy cannot read it either."""
    from robot_dynamics_ros.nodes.wire import joint_state_fields

    msg = _msg(ARM[::-1], [0.1 * i for i in range(7)], [float("nan")] * 7, [], 12, 34, "base")
    raw = serialize_message(msg)
    no_reader = type("NoReader", (), {"read": staticmethod(lambda buf: None)})()
    via_rclpy = joint_state_fields(no_reader, raw)
    assert _same_fields(via_rclpy, read_joint_state(raw))
    assert via_rclpy.names == tuple(n.encode() for n in ARM[::-1]) and via_rclpy.stamp_ns == 12_000_000_034
    assert _same_fields(joint_state_fields(JointStateReader(), raw), via_rclpy)
    with pytest.raises(Exception):
        joint_state_fields(no_reader, b"\x00\x01\x00\x00\xff")
