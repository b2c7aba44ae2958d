"""Fault and fuzz tests of the running gravity-compensation node over real DDS (issue 7).

The node runs in-process on its own rclpy context; a probe node publishes ``sensor_msgs/JointState`` and
records every command (``std_msgs/Float64MultiArray``) and ``/diagnostics`` message. Expected torques
are Pinocchio's ``computeGeneralizedGravity`` called here directly on the URDF (Panda, fingers held at
0.02 m), not the node's code. Properties:

* hypothesis-generated JointState messages (random names and lengths, NaN/Inf/huge values, empty arrays,
  duplicates) never kill the node, never make it publish a non-finite or over-limit number, and a good
  message afterwards is answered with exactly g(q) again;
* a publisher that stops -> the state goes stale -> a WARN diagnostic; it restarts -> commands resume;
* stamps older than ``state_timeout`` are not answered; out-of-order stamps are rejected;
* a URDF swapped at run time on ``/robot_description`` (transient local) changes the torques to the new
  robot's g(q); a broken URDF on the topic is rejected and the previous model serves on;
* after shutdown nothing is published (or exactly one zero command when configured).
"""
from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest
from robot_dynamics_testing.dds_probe import NAMES, PANDA, PANDA_EFFORT, Probe, gravity_of
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def probe_with_node():
    probe = Probe()
    node = probe.gravity_node()
    yield probe, node
    probe.close()


@pytest.fixture
def probe():
    with Probe() as p:
        yield p


def _assert_commands_sane(commands):
    for _, data in commands:
        assert data.shape == (7,), data
        assert np.isfinite(data).all(), f"non-finite command published: {data}"
        assert (np.abs(data) <= PANDA_EFFORT + 1e-9).all(), f"command over the effort limits: {data}"


# --------------------------------------------------------------------------------------- fuzzing
text_name = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                    max_size=10)
fuzz_name = st.one_of(st.sampled_from(NAMES), st.sampled_from(["panda_finger_joint1", ""]), text_name)
fuzz_value = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                       st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 0.0]))


@st.composite
def bad_joint_state(draw):
    names = draw(st.lists(fuzz_name, max_size=10))
    lengths = st.one_of(st.just(len(names)), st.integers(0, 12))
    pos = draw(st.lists(fuzz_value, min_size=(n := draw(lengths)), max_size=n))
    vel = draw(st.lists(fuzz_value, min_size=(n := draw(lengths)), max_size=n))
    eff = draw(st.one_of(st.just([]), st.lists(fuzz_value, min_size=len(names), max_size=len(names))))
    stamp = draw(st.sampled_from(["now", "zero"]))
    return names, pos, vel, eff, stamp


@settings(max_examples=25 if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci" else 500)  # DDS round trips
@given(batch=st.lists(bad_joint_state(), min_size=1, max_size=8), order=st.permutations(NAMES),
       dq=st.lists(st.floats(-0.5, 0.5), min_size=7, max_size=7))
def test_fuzzed_joint_states_never_kill_the_node_nor_produce_bad_commands(probe_with_node, batch, order, dq):
    probe, node = probe_with_node
    since = len(probe.commands)
    for names, pos, vel, eff, stamp in batch:
        probe.send(names, pos, vel, eff, stamp_ns=0 if stamp == "zero" else None)
    # a good message after the garbage is answered with exactly g(q): the node is alive and recovered
    q = PANDA.base_pose + np.asarray(dq)
    assert probe.sentinel(q, order), "no (correct) command for a good message after fuzzed input"
    _assert_commands_sane(probe.commands[since:])


def test_huge_finite_positions_give_finite_clamped_torques(probe_with_node):
    probe, node = probe_with_node
    since = len(probe.commands)
    from robot_dynamics_ros.control.joint_mapping import RejectCode

    n0 = node.mapper.rejected[RejectCode.IMPLAUSIBLE]
    probe.send(NAMES, [1e308, -1e308, 1e300, 4e18, -7.5e15, 1e10, 3.0])
    deadline = time.monotonic() + 2
    while node.mapper.rejected[RejectCode.IMPLAUSIBLE] == n0 and time.monotonic() < deadline:
        time.sleep(0.005)
    # outside the plausible range (limits + 0.1 rad): rejected, counted per joint, nothing commanded from it
    assert node.mapper.rejected[RejectCode.IMPLAUSIBLE] == n0 + 1
    assert node.mapper.rejected_joints.get("panda_joint1", 0) >= 1
    assert len(probe.commands) == since or all(np.abs(d).max() < 100 for _, d in probe.commands[since:])
    assert probe.sentinel(PANDA.base_pose)
    _assert_commands_sane(probe.commands[since:])


def test_torques_beyond_the_effort_limits_are_clamped_and_counted(probe):
    """Gravity of 100 m/s² (the parameter's maximum) scales g(q) by 100/9.81: the shoulder joints exceed
    their 87 N·m limit; the command is the clamped value and diagnostics count the clamps."""
    node = probe.gravity_node(gravity=[0.0, 0.0, -100.0])
    q = PANDA.base_pose
    tau = gravity_of(q) * (100.0 / 9.81)  # g(q) is linear in the gravity vector
    assert (np.abs(tau) > PANDA_EFFORT).any()  # the case really clamps
    since = len(probe.commands)
    probe.send(position=q)
    assert probe.wait_command(np.clip(tau, -PANDA_EFFORT, PANDA_EFFORT), since=since)
    n_over = int((np.abs(tau) > PANDA_EFFORT).sum())
    assert node.core.clamped >= n_over
    deadline = time.monotonic() + 2
    value = None
    while time.monotonic() < deadline and not value:
        st_ = probe.last_status()
        kv = {k.key: k.value for k in st_.values} if st_ else {}
        value = int(kv.get("clamp_count", "0")) or None
        time.sleep(0.02)
    assert value is not None and value >= n_over, "clamp count missing from /diagnostics"


# ---------------------------------------------------------------------------------------- faults
def test_publisher_stops_goes_stale_holds_and_recovers_on_restart(probe):
    """The publisher stops: the node keeps commanding g(q) at the last accepted state (stale_policy hold,
    WARN); restarted, it commands the fresh state again with an OK level."""
    node = probe.gravity_node(state_timeout=0.15)
    for k in range(20):  # 200 Hz for 0.1 s
        probe.send(position=PANDA.base_pose + 1e-3 * k)
        time.sleep(0.005)
    assert probe.sentinel(PANDA.base_pose)
    time.sleep(0.6)  # the publisher stops
    st_ = probe.last_status()
    assert st_ is not None and st_.level == bytes([1]) and "stale" in st_.message, st_
    n_before = len(probe.commands)
    time.sleep(0.3)
    held = [d for _, d in probe.commands[n_before:]]
    assert held, "no safe command while the state is stale"
    for d in held:
        np.testing.assert_allclose(d, gravity_of(PANDA.base_pose), atol=1e-9)
    # restart: fresh data -> commands again, diagnostics back to OK
    assert probe.sentinel(PANDA.base_pose + 0.05)
    deadline = time.monotonic() + 2
    while probe.last_status().level != bytes([0]) and time.monotonic() < deadline:
        probe.send(position=PANDA.base_pose + 0.05)
        time.sleep(0.02)
    assert probe.last_status().level == bytes([0]), probe.last_status()
    _assert_commands_sane(probe.commands)
    assert node.diag.counters.get("safe", 0) >= 1


def test_no_ok_report_for_an_input_that_went_stale_during_a_stall(probe):
    """The executor stalls (here: a 0.4 s callback on the same executor) right after the last state: both the
    safety timer and the diagnostics are overdue when it returns. No report published after the state went
    stale may say OK, and the first one after the stall already says stale."""
    timeout = 0.1
    probe.gravity_node(state_timeout=timeout, diagnostics_period=0.05)
    for k in range(30):
        probe.send(position=PANDA.base_pose + 1e-3 * k)
        time.sleep(0.005)
    assert probe.sentinel(PANDA.base_pose)
    t_last = time.monotonic()  # the last state's publication (it was answered)
    stalled = []

    def stall():
        timer.cancel()
        time.sleep(0.4)
        stalled.append(time.monotonic())

    timer = probe.node.create_timer(0.001, stall)
    deadline = time.monotonic() + 3.0
    while not stalled and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stalled, "the stall callback never ran"
    time.sleep(0.3)
    name = f"/gravity_compensation_{probe.tag}:"
    after = [(round(t - t_last, 3), s.level[0], s.message) for t, s in list(probe.diagnostics_log)
             if t > t_last + timeout + 0.01 and s.name.startswith(name)]
    assert after, "no diagnostics after the stall"
    assert all(level != 0 for _, level, _ in after), after
    assert "stale" in after[0][2], after[0]


def test_old_and_out_of_order_stamps_are_not_answered_with_their_own_torque(probe):
    node = probe.gravity_node(state_timeout=0.1, stale_policy="zero")
    # the first message is stamped 0.5 s ago (a delayed stream): too old -> the safe command (zeros)
    since = len(probe.commands)
    probe.send(position=PANDA.base_pose + 0.1, stamp_ns=time.time_ns() - 500_000_000)
    assert probe.wait_command(np.zeros(7), since=since)
    assert probe.sentinel(PANDA.base_pose)
    since = len(probe.commands)
    # out of order: within the timeout but older than what the node already has -> rejected
    now = time.time_ns()
    probe.send(position=PANDA.base_pose + 0.2, stamp_ns=now)
    assert probe.wait_command(gravity_of(PANDA.base_pose + 0.2), since=since)
    probe.send(position=PANDA.base_pose + 0.3, stamp_ns=now - 20_000_000)
    deadline = time.monotonic() + 2
    while node.diag.counters.get("rejected", 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert probe.sentinel(PANDA.base_pose - 0.1)
    got = [d for _, d in probe.commands]
    assert not any(np.abs(d - gravity_of(PANDA.base_pose + 0.1)).max() < 1e-6 for d in got), "stale answered"
    assert not any(np.abs(d - gravity_of(PANDA.base_pose + 0.3)).max() < 1e-6 for d in got), \
        "out-of-order answered"
    assert node.diag.counters.get("rejected", 0) == 1 and node.diag.counters.get("safe", 0) >= 1


def test_future_stamp_does_not_block_later_good_data(probe):
    """One message stamped far in the future (a bad clock) must not make every later, correctly stamped
    message 'out of order' for ever: good data must be answered again."""
    probe.gravity_node(state_timeout=0.1)
    assert probe.sentinel(PANDA.base_pose)
    probe.send(position=PANDA.base_pose + 0.2, stamp_ns=time.time_ns() + 3600 * 10**9)
    time.sleep(0.05)
    ok = False
    for k in range(20):
        ok = probe.sentinel(PANDA.base_pose + 0.01 * k, timeout=0.1)
        if ok:
            break
    assert ok, "after one future-stamped message the node never answered good data again"


def _scaled_mass_urdf(factor: float) -> str:
    text = Path(PANDA.urdf).read_text()
    return re.sub(r'(<mass\s+value=")([^"]+)(")', lambda m: f"{m[1]}{float(m[2]) * factor!r}{m[3]}", text)


def _wait_checked(node, old_model, timeout: float = 30.0) -> None:
    """Until a model other than ``old_model`` is in use and its start-up cross-check (a child process, 1-2 s
    on a loaded machine) has finished; the assertions that follow say whether it serves."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (node.core is None or node.model is old_model
                                           or node.core.fault == "start-up cross-check running"):
        time.sleep(0.01)


def test_urdf_swapped_at_run_time_through_robot_description(probe, tmp_path):
    from std_msgs.msg import String

    # the node starts without a robot: it waits for /robot_description (transient local)
    node = probe.gravity_node(urdf_path="", held_joint_names=list(PANDA.held_joints),
                              held_joint_positions=list(PANDA.held_joints.values()))
    probe.send()
    time.sleep(0.1)
    assert not probe.commands, "commands before any robot model"
    probe.desc_pub.publish(String(data=Path(PANDA.urdf).read_text()))
    _wait_checked(node, None)
    q = PANDA.base_pose
    assert probe.sentinel(q)
    # all link masses doubled: g(q) is linear in the masses, so the torques double exactly
    heavy = tmp_path / "panda_heavy.urdf"
    heavy.write_text(_scaled_mass_urdf(2.0))
    first = node.model
    probe.desc_pub.publish(String(data=heavy.read_text()))
    _wait_checked(node, first)
    g2 = gravity_of(q, str(heavy))
    np.testing.assert_allclose(g2, 2.0 * gravity_of(q), rtol=1e-12, atol=1e-12)
    deadline = time.monotonic() + 5
    answered = False
    while not answered and time.monotonic() < deadline:
        since = len(probe.commands)
        probe.send(position=q)
        answered = probe.wait_command(np.clip(g2, -PANDA_EFFORT, PANDA_EFFORT), timeout=0.2, since=since)
    assert answered, "torques did not follow the new robot description"
    # a broken description: rejected, the heavy model keeps serving
    probe.desc_pub.publish(String(data="<robot name='broken'><link name='a'/><joint"))
    time.sleep(0.2)
    since = len(probe.commands)
    probe.send(position=q)
    assert probe.wait_command(np.clip(g2, -PANDA_EFFORT, PANDA_EFFORT), since=since)
    assert "robot_description" in node.loader.last_error
    _assert_commands_sane(probe.commands)


@pytest.mark.parametrize("zero_on_shutdown", [False, True])
def test_nothing_published_after_shutdown(probe, zero_on_shutdown):
    node = probe.gravity_node(publish_zero_on_shutdown=zero_on_shutdown)
    assert probe.sentinel(PANDA.base_pose)
    since = len(probe.commands)
    probe.nodes.remove(node)
    probe.executor.remove_node(node)
    node.destroy_node()
    for _ in range(10):
        probe.send()
        time.sleep(0.01)
    time.sleep(0.2)
    after = [d for _, d in probe.commands[since:]]
    if zero_on_shutdown:
        assert len(after) == 1 and np.array_equal(after[0], np.zeros(7)), after
    else:
        assert after == [], f"published after shutdown: {after}"
