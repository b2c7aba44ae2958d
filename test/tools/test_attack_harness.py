"""The attack benchmark's harness without DDS: hostile messages are what their kind says (checked against
the URDF's limits read by Pinocchio, not by the package), commands are told apart by value, gaps, log
lines and the FIFO probe are measured as documented."""
from __future__ import annotations

import math
import os
import threading

import numpy as np
import pytest

from robot_dynamics_testing import attack
from robot_dynamics_testing.attack import parse_log


@pytest.fixture(scope="module")
def limits():
    import pinocchio as pin

    model = pin.buildModelFromUrdf(attack.PANDA.urdf)
    idx = [model.joints[model.getJointId(n)].idx_q for n in attack.NAMES]
    return model.lowerPositionLimit[idx], model.upperPositionLimit[idx], model.velocityLimit[idx]


def test_reference_poses_are_plausible_and_distinguishable(limits):
    lower, upper, _ = limits
    ref = attack.reference_commands()
    for q in (attack.Q_GOOD, attack.Q_MARK, attack.Q_GOOD2):
        assert np.all(q > lower) and np.all(q < upper)
    # a command computed from a hostile message (other joints at Q_MARK) is far from g(Q_GOOD)
    assert np.abs(ref["mark"] - ref["good"]).max() > 1e3 * attack.TOL
    assert np.abs(ref["good2"] - ref["good"]).max() > 1e3 * attack.TOL
    assert attack.J2_UPPER == pytest.approx(upper[attack.ATTACKED])


def test_implausible_kinds_are_implausible(limits):
    lower, upper, vmax = limits
    j = attack.ATTACKED
    assert abs(attack.hostile_fields("pos_1e308", 0)["position"][j]) == 1e308
    assert attack.hostile_fields("pos_1e308", 1)["position"][j] == -1e308
    assert attack.hostile_fields("pos_1e300", 0)["position"][j] == 1e300
    for kind in ("pos_100rad_out", "single_100rad"):
        assert attack.hostile_fields(kind, 0)["position"][j] - upper[j] == pytest.approx(100.0)
    assert attack.hostile_fields("vel_1e308", 0)["velocity"][j] / vmax[j] > 1e300
    bad = [attack.hostile_fields("nan_inf", k) for k in range(3)]
    assert math.isnan(bad[0]["position"][j]) and bad[1]["position"][j] == math.inf
    assert bad[2]["position"][j] == -math.inf
    assert math.isnan(attack.hostile_fields("nan_velocity", 0)["velocity"][j])
    lengths = [attack.hostile_fields("wrong_length", k) for k in range(3)]
    assert [len(m["position"]) for m in lengths] == [6, 7, 7]
    assert [len(m["velocity"]) for m in lengths] == [7, 3, 7]
    assert [len(m["effort"]) for m in lengths] == [0, 0, 2]
    dup = attack.hostile_fields("duplicate_names", 0)["names"]
    assert len(dup) == len(set(dup)) + 1
    # every other joint of a hostile message sits at the marker pose
    m = attack.hostile_fields("pos_1e300", 0)["position"]
    assert np.array_equal(np.delete(m, j), np.delete(attack.Q_MARK, j))


def test_name_kinds_bring_new_names_every_message():
    a, b = (attack.hostile_fields("names_changing", k)["names"] for k in (0, 1))
    assert len(a) == 57 and a[:7] == attack.NAMES and not set(a[7:]) & set(b[7:])
    big = attack.hostile_fields("names_10000", 3)
    assert len(big["names"]) == len(set(big["names"])) == 10_000 == len(big["position"])
    assert attack.hostile_fields("future_stamp", 0)["stamp_offset_s"] == pytest.approx(0.9 * attack.STATE_TIMEOUT)
    good = attack.hostile_fields("good_only", 0)
    assert good["names"] == attack.NAMES and np.array_equal(good["position"], attack.Q_GOOD)


def test_classify_tells_commands_apart():
    ref = attack.reference_commands()
    assert attack.classify(ref["good"] + 0.5 * attack.TOL, ref) == 0
    assert attack.classify(ref["good2"], ref) == 1
    assert attack.classify(np.zeros(7), ref) == 2
    assert attack.classify(ref["mark"], ref) == -1
    assert attack.classify(ref["good"] + 2 * attack.TOL, ref) == -1
    assert attack.classify(np.r_[ref["good"][:6], np.nan], ref) == -2
    assert attack.classify(ref["good"][:6], ref) == -1


def test_command_stats_gap_and_counts():
    cmds = [(1.00, 0), (1.01, -1), (1.30, 0), (1.31, -2), (1.32, 2)]
    st = attack.command_stats(cmds, 0.95, 1.50)
    assert st == {"commands": 5, "good": 2, "caused": 1, "nonfinite": 1, "zero": 1, "max_gap_ms": 290.0}
    assert attack.command_stats([], 2.0, 2.4)["max_gap_ms"] == 400.0  # nothing at all: the whole window


def test_parse_log_lengths_nodes_and_continuations():
    import time

    wall = time.time()
    lines = [f"[ERROR] [{wall:.9f}] [atkA.gravity_compensation]: robot_description rejected: x".encode(),
             b"a continuation line", f"[INFO] [{wall:.9f}] [atkA.computed_torque]: model from topic /t".encode()]
    out = parse_log(lines)
    assert [o[1] for o in out] == ["ERROR", "CONT", "INFO"]
    assert [o[2] for o in out] == [len(x) for x in lines]
    assert out[0][3] == "gravity_compensation" and out[2][3] == "computed_torque"
    assert out[0][4] == "robot_description rejected: x"
    assert abs(out[0][0] - time.monotonic()) < 1.0


def test_fifo_probe_sees_a_reader_only_while_one_is_open(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    assert not attack.fifo_has_reader(str(fifo))
    opened = threading.Event()
    got = []

    def reader():
        with open(fifo, "rb") as f:   # blocks until a writer opens: the probe's open releases it
            opened.set()
            got.append(f.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    for _ in range(200):
        if attack.fifo_has_reader(str(fifo)):
            break
        threading.Event().wait(0.01)
    else:
        pytest.fail("the probe never saw the reader")
    t.join(2)
    assert opened.is_set() and got == [b""]
    assert not attack.fifo_has_reader(str(fifo))


@pytest.mark.parametrize("kind", ["rss_flood", "names_10000", "good_only", "duplicate_names"])
def test_flood_bytes_are_the_joint_state_rclpy_reads(kind):
    """The flood publishes hand-built CDR bytes: rclpy's own deserializer reads back every field."""
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState

    for k in (0, 1, 7):
        h = attack.hostile_fields(kind, k)
        msg = deserialize_message(attack.joint_state_cdr(h["names"], h["position"], h["velocity"],
                                                         1_700_000_001_000_012_345), JointState)
        assert list(msg.name) == h["names"] and msg.header.frame_id == "" and len(msg.effort) == 0
        assert msg.position.tolist() == list(h["position"]) and msg.velocity.tolist() == list(h["velocity"])
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (1_700_000_001, 12_345)
