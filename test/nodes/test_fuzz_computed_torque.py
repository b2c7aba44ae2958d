"""Fuzz tests of the running computed-torque node over DDS with hypothesis-generated JointTrajectory
messages (issue 7): random joint names (duplicates, unknown, missing), random point counts and field
lengths, NaN/Inf/huge values, negative or non-increasing times, stamps in the past, now or far future.

Properties: the node never dies (its executor keeps serving), never publishes a non-finite command or one
beyond the URDF effort limits, and recovers: after the garbage, a valid one-point trajectory to q* is
followed, so that with the measured state q = q*, qd = 0 the command in feedforward mode (P = D = 0) is
RNEA(q*, 0, 0) = g(q*), which is checked against Pinocchio called directly (1e-9 N·m).
"""
from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest
from robot_dynamics_testing.dds_probe import NAMES, PANDA, PANDA_EFFORT, Probe, gravity_of
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.ros

int32 = st.integers(-(2**31), 2**31 - 1)
uint32 = st.integers(0, 2**32 - 1)
value = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-3.0, 3.0),
                  st.sampled_from([math.nan, math.inf, 1e308, -1e308, 0.0]))
names = st.one_of(st.permutations(NAMES).map(list),
                  st.lists(st.one_of(st.sampled_from(NAMES), st.text(max_size=8)), max_size=9))


@st.composite
def trajectory(draw):
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    msg = JointTrajectory()
    msg.joint_names = draw(names)
    stamp = draw(st.sampled_from(["zero", "now", "future", "past", "random"]))
    now = time.time_ns()
    t = {"zero": 0, "now": now, "future": now + 3600 * 10**9, "past": now - 3600 * 10**9}.get(stamp)
    if t is None:
        msg.header.stamp.sec, msg.header.stamp.nanosec = draw(int32), draw(uint32)
    else:
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t, 1_000_000_000)
    k = len(msg.joint_names)
    length = st.one_of(st.just(k), st.just(0), st.integers(0, 10))
    for _ in range(draw(st.integers(0, 5))):
        p = JointTrajectoryPoint()
        # mostly plausible positions (so that some trajectories are valid and executed), sometimes not
        pos = st.one_of(st.lists(st.floats(-1.0, 1.0), min_size=k, max_size=k),
                        st.lists(value, min_size=(n := draw(length)), max_size=n))
        p.positions = draw(pos)
        p.velocities = draw(st.lists(value, min_size=(n := draw(length)), max_size=n))
        p.accelerations = draw(st.lists(value, min_size=(n := draw(length)), max_size=n))
        p.time_from_start.sec = draw(st.one_of(st.integers(-2, 3), int32))
        p.time_from_start.nanosec = draw(st.one_of(st.integers(0, 999_999_999), uint32))
        msg.points.append(p)
    return msg


@pytest.fixture(scope="module")
def ct():
    from rclpy.qos import QoSProfile
    from trajectory_msgs.msg import JointTrajectory

    from robot_dynamics_ros.nodes.computed_torque import ComputedTorqueNode

    probe = Probe()
    node = probe.start(ComputedTorqueNode, "computed_torque",
                       {"mode": "feedforward", "tick_source": "joint_states", "state_timeout": 0.5,
                        "check_position_limits": True})
    pub = probe.node.create_publisher(JointTrajectory, f"/{node.get_name()}/joint_trajectory", QoSProfile(depth=100))
    deadline = time.monotonic() + 10
    while pub.get_subscription_count() < 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    yield probe, node, pub
    probe.close()


def _assert_sane(commands):
    for _, data in commands:
        assert data.shape == (7,), data
        assert np.isfinite(data).all(), f"non-finite command published: {data}"
        assert (np.abs(data) <= PANDA_EFFORT + 1e-9).all(), f"command beyond the effort limits: {data}"


def _go_to(probe, pub, q_target, order=NAMES):
    """Send a valid one-point trajectory (start on receipt, reach q_target in 0.2 s: up to 0.3 rad from
    the measured pose is within the Panda's velocity limits), by name."""
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    by_name = dict(zip(NAMES, q_target))
    msg = JointTrajectory()
    msg.joint_names = list(order)
    p = JointTrajectoryPoint()
    p.positions = [float(by_name[n]) for n in order]
    p.time_from_start.nanosec = 200_000_000
    msg.points = [p]
    pub.publish(msg)


def _answered_with_gravity(probe, q_target, timeout=3.0) -> bool:
    """Measured state = q_target at rest; in feedforward mode the command must become g(q_target)."""
    expected = gravity_of(q_target)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        since = len(probe.commands)
        probe.send(NAMES[::-1], list(q_target[::-1]), [0.0] * 7)
        if probe.wait_command(expected, timeout=0.05, since=since):
            return True
    return False


@settings(max_examples=20 if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci" else 500)  # DDS round trips
@given(batch=st.lists(trajectory(), min_size=1, max_size=6), order=st.permutations(NAMES),
       dq=st.lists(st.floats(-0.3, 0.3), min_size=7, max_size=7))
def test_fuzzed_trajectories_never_kill_the_node_nor_produce_bad_commands(ct, batch, order, dq):
    probe, node, pub = ct
    since = len(probe.commands)
    for msg in batch:
        pub.publish(msg)
        probe.send()  # a control tick with each
    q_target = PANDA.base_pose + np.asarray(dq)
    _go_to(probe, pub, q_target, order)
    assert _answered_with_gravity(probe, q_target), "the node did not follow a valid trajectory after fuzzing"
    _assert_sane(probe.commands[since:])


def test_rejected_trajectory_reason_names_field_and_index(ct):
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    probe, node, pub = ct
    msg = JointTrajectory()
    msg.joint_names = list(NAMES)
    p = JointTrajectoryPoint()
    p.positions = [0.0, math.nan, 0.0, -1.5, 0.0, 1.5, 0.0]
    p.time_from_start.sec = 1
    msg.points = [p]
    # messages of the previous (fuzz) test may still be in flight: wait until the counters are quiet
    quiet_since, last = time.monotonic(), None
    while time.monotonic() - quiet_since < 0.3:
        now = (node.trajectories_rejected, node.trajectories_accepted)
        if now != last:
            quiet_since, last = time.monotonic(), now
        time.sleep(0.01)
    before = node.trajectories_rejected
    pub.publish(msg)
    deadline = time.monotonic() + 3
    while node.trajectories_rejected == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert node.trajectories_rejected == before + 1
    assert "points[0].positions[1]" in node.last_rejection and "panda_joint2" in node.last_rejection
    _go_to(probe, pub, PANDA.base_pose)
    assert _answered_with_gravity(probe, PANDA.base_pose)
