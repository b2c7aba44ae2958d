"""Fault tests of the running computed-torque node with its timer tick (issue 7): it publishes on a timer,
so staleness is what stops it when the joint-state publisher stops.

* publisher runs -> commands at the control rate, equal to g(q) at rest (feedforward, P = D = 0,
  Pinocchio called directly);
* publisher stops -> once the newest state is older than ``state_timeout`` the command is the safe one,
  gravity only at the last state (no PD, no feedforward), with an ERROR diagnostic;
* publisher restarts -> commands resume; with zero stamps (staleness by arrival time) the same;
* a state stamped 1 h in the future (a wrong clock) is rejected and does not stop later good states.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
from robot_dynamics_testing.dds_probe import NAMES, PANDA, Probe, gravity_of

pytestmark = pytest.mark.ros

TIMEOUT = 0.1  # s, state_timeout
RATE = 200.0  # Hz, control_rate


@pytest.fixture
def ct():
    from robot_dynamics_ros.nodes.computed_torque import ComputedTorqueNode

    probe = Probe()
    node = probe.start(ComputedTorqueNode, "computed_torque",
                       {"mode": "feedforward", "tick_source": "timer", "control_rate": RATE,
                        "state_timeout": TIMEOUT})
    yield probe, node
    probe.close()


def _publish_for(probe, seconds: float, stamped: bool = True, rate: float = 100.0):
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        probe.send(NAMES[::-1], PANDA.base_pose[::-1], [0.0] * 7, stamp_ns=None if stamped else 0)
        time.sleep(1.0 / rate)


@pytest.mark.parametrize("stamped", [True, False], ids=["stamped", "zero-stamp"])
def test_publisher_stops_commands_stop_restart_recovers(ct, stamped):
    probe, node = ct
    expected = gravity_of(PANDA.base_pose)
    _publish_for(probe, 0.4, stamped)
    running = [d for _, d in probe.commands]
    assert len(running) >= 0.4 * RATE * 0.5, f"only {len(running)} commands while the states flowed"
    np.testing.assert_allclose(running[-1], expected, atol=1e-9)
    # the publisher stops: after state_timeout (+ one tick + DDS) the safe command, at the control rate
    time.sleep(TIMEOUT + 0.2)  # margin for a late last message on a busy machine
    safe0, normal0, ticks0 = (node.diag.counters.get("safe", 0), node.diag.counters.get("commands", 0),
                              node.ticks_published)
    n = len(probe.commands)
    time.sleep(0.3)
    assert node.diag.level == 2 and "gravity only" in node.diag.message, node.diag.message
    # the control timer keeps publishing, and only the safe command (counted against the node's own control
    # ticks: a loaded machine delays ticks, which a count per wall-clock window would blame on the node)
    ticks = node.ticks_published - ticks0
    assert ticks >= 5, ticks
    assert node.diag.counters.get("commands", 0) == normal0
    assert node.diag.counters.get("safe", 0) - safe0 >= ticks
    for _, d in probe.commands[n:]:
        np.testing.assert_allclose(d, expected, atol=1e-9)    # g(q) at the last state
    # restart: commands resume, still g(q)
    n = len(probe.commands)
    _publish_for(probe, 0.3, stamped)
    assert len(probe.commands) - n >= 0.3 * RATE * 0.5
    np.testing.assert_allclose(probe.commands[-1][1], expected, atol=1e-9)
    assert node.diag.level == 0
    assert all(np.isfinite(d).all() for _, d in probe.commands)


def test_future_stamped_state_is_rejected_and_later_states_still_work(ct):
    probe, node = ct
    _publish_for(probe, 0.2)
    rejected = node.diagnostics.counters.get("rejected", 0)
    probe.send(NAMES, PANDA.base_pose + 0.3, [0.0] * 7, stamp_ns=time.time_ns() + 3600 * 10**9)
    time.sleep(0.05)
    n = len(probe.commands)
    _publish_for(probe, 0.2)
    assert node.diagnostics.counters.get("rejected", 0) == rejected + 1
    assert len(probe.commands) - n >= 0.2 * RATE * 0.5, "good states after a future stamp were not used"
    np.testing.assert_allclose(probe.commands[-1][1], gravity_of(PANDA.base_pose), atol=1e-9)
