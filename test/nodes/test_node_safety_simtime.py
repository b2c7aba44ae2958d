"""use_sim_time: the safety timer runs on the steady clock, so stopping /clock and joint states together
still produces the documented safe command; no /clock at all is named in the rejection reason."""
from __future__ import annotations

import time

import numpy as np
from rosgraph_msgs.msg import Clock

from robot_dynamics_testing.dds_probe import PANDA, Probe, gravity_of

T0_NS = 1000 * 1_000_000_000   # the simulated time the test's /clock starts at


def _clock_msg(t_ns):
    m = Clock()
    m.clock.sec, m.clock.nanosec = divmod(t_ns, 1_000_000_000)
    return m


def _run_sim_time(probe, clock_pub, q, steps=100):
    """One second of /clock (10 ms steps from T0_NS) with a joint state at q stamped with each."""
    t = T0_NS
    for _ in range(steps):
        clock_pub.publish(_clock_msg(t))
        probe.send(position=q, stamp_ns=t)
        t += 10_000_000
        time.sleep(0.01)


def _commands_after_stop(probe, n=3):
    """The commands that arrive from 0.5 s after /clock and joint states stopped (at least n, else fail)."""
    time.sleep(0.5)
    since = len(probe.commands)
    deadline = time.monotonic() + 5.0
    while len(probe.commands) < since + n and time.monotonic() < deadline:
        time.sleep(0.02)
    later = probe.commands[since:]
    assert len(later) >= n, "no safe command after /clock and joint states stopped"
    return later


def test_safe_hold_command_continues_when_clock_and_states_stop():
    with Probe() as probe:
        clock_pub = probe.node.create_publisher(Clock, "/clock", 10)
        node = probe.gravity_node(use_sim_time=True, stale_policy="hold")
        # no /clock yet: a wall-stamped state is "in the future"; the reason says why
        probe.send()
        deadline = time.monotonic() + 5.0
        while "no /clock" not in node.shell.last_error and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "ahead of the node clock" in node.shell.last_error
        assert "no /clock received while use_sim_time is true" in node.shell.last_error
        # sim time runs: states stamped with it are answered with g(q)
        q = np.array(PANDA.base_pose)
        _run_sim_time(probe, clock_pub, q)
        expected = gravity_of(q)
        assert probe.wait_command(expected, 5.0)
        # /clock and joint states stop together: the hold command keeps coming (steady-clock timer)
        later = _commands_after_stop(probe)
        assert all(np.abs(c - expected).max() <= 1e-9 for _, c in later)
        status = probe.last_status()
        assert status is not None and status.level[0] >= 1


def test_computed_torque_safe_command_continues_when_clock_and_states_stop():
    from robot_dynamics_ros.nodes.computed_torque import ComputedTorqueNode

    with Probe() as probe:
        clock_pub = probe.node.create_publisher(Clock, "/clock", 10)
        node = probe.start(ComputedTorqueNode, "computed_torque",
                           {"mode": "feedforward", "tick_source": "timer", "control_rate": 100.0,
                            "state_timeout": 0.25, "use_sim_time": True})
        q = np.array(PANDA.base_pose)
        _run_sim_time(probe, clock_pub, q)
        assert node.core.mapper.ready
        later = _commands_after_stop(probe)
        # the safe command holds the last measured pose against gravity (feedforward: g(q_last))
        assert all(np.abs(c - gravity_of(q)).max() <= 1e-9 for _, c in later), later[:1]
