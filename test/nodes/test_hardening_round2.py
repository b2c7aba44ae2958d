"""Issue 25, node layer: no parameter or message can wedge or stall a node.

- a path parameter naming a FIFO is refused at once (a ``stat``, never an open) and the service serves on;
- a huge array parameter is refused from its length before any per-entry work;
- malformed joint_states bytes log at most a few lines per ``log_period``;
- payload parameters are checked as a whole; an unknown payload link is reported by configure in one line;
- a control rate the node cannot reach is reported (WARN, requested vs achieved).
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest
import rclpy
from rclpy.parameter import Parameter

from robot_dynamics_testing.retiming_cases import smooth_waypoints

pytestmark = pytest.mark.ros


@pytest.fixture
def ctx():
    c = rclpy.Context()
    rclpy.init(context=c)
    yield c
    rclpy.shutdown(context=c)


def _retime_request(model, n=5):
    from robot_dynamics_interfaces.srv import RetimeTrajectory
    from trajectory_msgs.msg import JointTrajectoryPoint

    req = RetimeTrajectory.Request()
    req.path.joint_names = list(model.joint_names)
    ends = smooth_waypoints(model, 2)  # a straight segment: no direction reversal (motor limits need none)
    req.path.points = [JointTrajectoryPoint(positions=[float(v) for v in row])
                       for row in np.linspace(ends[0], ends[-1], n)]
    return req


def test_a_fifo_motor_limits_path_is_refused_at_once_and_the_service_serves_on(ctx, tmp_path):
    from robot_dynamics_interfaces.srv import RetimeTrajectory

    from robot_dynamics_ros.nodes.retiming_service import RetimingServiceNode

    fifo = tmp_path / "motor_limits.yaml"
    os.mkfifo(fifo)
    node = RetimingServiceNode("retiming_fifo", context=ctx, parameter_overrides=[
        Parameter("urdf_path", value="ur10"), Parameter("acceleration_limit", value=10.0),
        Parameter("warmup", value=False), Parameter("request_deadline", value=120.0)])
    try:
        assert node.warm.wait(timeout=60) and node.model is not None
        missing = tmp_path / "missing.yaml"
        for path in (fifo, tmp_path, missing):  # a FIFO, a directory, nothing: the same words
            t0 = time.monotonic()
            res = node.set_parameters([Parameter("motor_limits_path", value=str(path))])[0]
            assert time.monotonic() - t0 < 0.5
            assert not res.successful
            assert res.reason == f"parameter 'motor_limits_path' '{path}': not a readable regular file"
        assert node.p["motor_limits_path"] == ""
        resp = node.on_request(_retime_request(node.model), RetimeTrajectory.Response())
        assert resp.success, resp.message
        # a regular file is still accepted, and its rules applied
        good = tmp_path / "good.yaml"
        good.write_text("motor_limits:\n  elbow_joint: {rated_torque: 150.0, peak_torque: 330.0, "
                        "peak_duration: 2.0}\n")
        assert node.set_parameters([Parameter("motor_limits_path", value=str(good))])[0].successful
        resp = node.on_request(_retime_request(node.model), RetimeTrajectory.Response())
        assert resp.success and "rated" in resp.message, resp.message
    finally:
        node.destroy_node()


def test_readers_never_open_a_fifo(tmp_path):
    """Even when a path is swapped for a FIFO after the parameter was accepted, the readers refuse it
    without blocking (the check runs again where the file is read)."""
    from robot_dynamics_ros.errors import UserError
    from robot_dynamics_ros.nodes.services import payload_request_fields
    from robot_dynamics_ros.share import read_yaml

    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(UserError, match=r"^motor limits '.*f.yaml': not a readable regular file$"):
        read_yaml(fifo, "motor limits")
    with pytest.raises(UserError, match=r"^payload JSON '.*f.yaml': not a readable regular file$"):
        payload_request_fields(fifo)
    assert time.monotonic() - t0 < 0.5


@pytest.mark.parametrize("name, value", [
    ("payload.com", [0.0] * 1_000_000),
    ("payload.inertia", [0.0] * 1_000_000),
    ("gravity", [0.0] * 1_000_000),
])
def test_a_huge_array_parameter_is_refused_from_its_length(ctx, name, value):
    """A 10^6-entry array is refused in one line, quickly (< 0.2 s, the rclpy set included), from its length
    (MAX_ARRAY_ENTRIES), before any per-entry check."""
    from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode
    from robot_dynamics_ros.nodes.parameters import MAX_ARRAY_ENTRIES

    node = GravityCompensationNode("gravity_huge", context=ctx, parameter_overrides=[
        Parameter("urdf_path", value="panda"), Parameter("crossval_samples", value=0)])
    try:
        param = Parameter(name, Parameter.Type.DOUBLE_ARRAY, value)
        t0 = time.perf_counter()
        (res,) = node.set_parameters([param])
        elapsed = time.perf_counter() - t0
        assert not res.successful
        assert res.reason == (f"parameter '{name}': 1000000 entries, more than the {MAX_ARRAY_ENTRIES} accepted "
                              "(MAX_ARRAY_ENTRIES)")
        assert elapsed < 0.2, f"refusal took {elapsed:.3f} s"
        assert len(node.get_parameter(name).value) < 10  # unchanged
    finally:
        node.destroy_node()


class Lines:
    """A logger stand-in keeping ``(level, text)`` of every line."""

    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def __getattr__(self, level):
        return lambda text, *a, **k: self.lines.append((level, text))


def _malformed_joint_states(good: bytes, count: int, seed: int = 1) -> list[bytes]:
    """``count`` broken variants of the serialized JointState ``good``: cut short, corrupted at one byte,
    random bytes after a little-endian or big-endian CDR header, and bytes with no header at all."""
    import random

    rnd = random.Random(seed)
    out = []
    for k in range(count):
        kind = k % 5
        if kind == 0:
            raw = good[:rnd.randrange(4, len(good))]
        elif kind == 1:
            b = bytearray(good)
            b[rnd.randrange(12, len(b))] = 0xFF
            raw = bytes(b)
        elif kind == 2:
            raw = good[:4] + bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 80)))
        elif kind == 3:
            raw = b"\x00\x00\x00\x00" + bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 80)))
        else:
            raw = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 60)))
        out.append(raw)
    return out


def test_malformed_joint_states_log_a_few_lines_per_log_period(ctx, capfd):
    """2 000 broken serialized JointStates through the gravity node's read path (what its raw
    subscription hands over): a few log lines in one log_period (fixed keys), none printed by rclpy's
    deserializer (which writes a line to stderr for each little-endian buffer it cannot read), every
    message counted (rejected, or received when a corruption still reads as a JointState), and the node
    still reads the next good message."""
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState

    from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode

    node = GravityCompensationNode("gravity_cdr", context=ctx, parameter_overrides=[
        Parameter("urdf_path", value="panda"), Parameter("crossval_samples", value=0),
        Parameter("log_period", value=60.0)])
    try:
        node.trigger_configure()
        node.trigger_activate()
        names = [f"panda_joint{i}" for i in range(1, 8)]
        good = serialize_message(JointState(name=names, position=[0.1] * 7, velocity=[0.0] * 7,
                                            effort=[0.0] * 7))
        lines = Lines()
        node.shell.log._logger = lines
        capfd.readouterr()
        for raw in _malformed_joint_states(good, 2000):
            node.shell.handle(raw, lambda *a: None)
        err = capfd.readouterr().err
        counters = node.shell.diag.counters
        assert counters.get("rejected", 0) + counters.get("received", 0) == 2000, counters
        assert counters.get("rejected", 0) >= 1500, counters
        assert len(lines.lines) <= 8, lines.lines[:20]
        assert err.count("\n") <= 2, err[:500]
        assert node.shell.read(good) is not None
    finally:
        node.destroy_node()


@pytest.mark.parametrize("inertia, words", [
    ([1.0, 0.0, 0.0, 0.1, 0.0, 0.1], "triangle inequality"),      # moments 1 > 0.1 + 0.1: no rigid body
    ([0.1, 0.0, 0.0, 0.1, 0.0, -0.1], "not positive semi-definite"),
    ([0.1, 0.2, 0.0, 0.1, 0.0, 0.1], "not positive semi-definite"),  # eigenvalues 0.3, 0.1, -0.1
])
def test_an_impossible_payload_inertia_is_refused_while_the_link_is_empty(ctx, inertia, words):
    from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode

    node = GravityCompensationNode("gravity_payload", context=ctx, parameter_overrides=[
        Parameter("urdf_path", value="panda"), Parameter("crossval_samples", value=0)])
    try:
        assert node.get_parameter("payload.link").value == ""
        (res,) = node.set_parameters([Parameter("payload.inertia", value=inertia)])
        assert not res.successful and words in res.reason and "\n" not in res.reason, res.reason
        assert res.reason.startswith("parameter 'payload.inertia'")
        assert list(node.get_parameter("payload.inertia").value) == [0.0] * 6
        # a physical one (a 2 kg solid cube of 0.1 m: I = m a²/6 on the diagonal) is still accepted
        cube = 2.0 * 0.1**2 / 6
        assert node.set_parameters([Parameter("payload.inertia", value=[cube, 0.0, 0.0, cube, 0.0, cube])])[0].successful
    finally:
        node.destroy_node()


def test_an_unknown_payload_link_set_while_unconfigured_is_reported_by_configure_in_one_line(ctx):
    from lifecycle_msgs.msg import State
    from rclpy.lifecycle import TransitionCallbackReturn

    from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode

    node = GravityCompensationNode("gravity_unconfigured", context=ctx, parameter_overrides=[
        Parameter("urdf_path", value="panda"), Parameter("crossval_samples", value=0),
        Parameter("autostart", value=False)])
    try:
        # no model yet: the link cannot be checked, so it is accepted ...
        assert node.set_parameters([Parameter("payload.link", value="gripper_link")])[0].successful
        # ... and configure refuses it, naming the parameter, the link and the robot
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        text = str(node.shell.config_error)
        assert text == ("parameter 'payload.link' = 'gripper_link' is not a link of 'panda' (set one of its "
                        "links, or '' for no payload)")
        assert node._state_machine.current_state[0] == State.PRIMARY_STATE_UNCONFIGURED
        # fixed: configure succeeds
        assert node.set_parameters([Parameter("payload.link", value="panda_link8")])[0].successful
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    finally:
        node.destroy_node()


def test_a_control_rate_the_timer_does_not_reach_is_a_warning_naming_both_rates(ctx):
    """The achieved rate is ticks counted over node-clock time: fed here (5 400 ticks in 1 s while 10 kHz is
    requested, the rate seen on this kind of machine), it raises WARN with both rates; a period that reaches
    the rate clears it."""
    from robot_dynamics_ros.nodes.computed_torque import ComputedTorqueNode
    from robot_dynamics_ros.nodes.diagnostics import Diagnostics

    node = ComputedTorqueNode("ct_rate", context=ctx, parameter_overrides=[
        Parameter("urdf_path", value="panda"), Parameter("tick_source", value="timer"),
        Parameter("control_rate", value=10000.0), Parameter("diagnostics_period", value=1.0)])
    try:
        assert node.timer is not None and node.shell.active   # not spun: the timer never runs by itself here
        node._control_ticks = 100
        assert node.check_rate(50.0) is None                  # the window starts
        node._control_ticks += 3000
        assert node.check_rate(50.5) is None                  # half a window
        node._control_ticks += 2400
        assert node.check_rate(51.0) == pytest.approx(5400.0)
        st = node.diag.status()
        assert st.level == bytes([Diagnostics.WARN])
        assert "control_rate 10000 Hz requested, 5400 Hz achieved" in st.message
        assert dict((kv.key, kv.value) for kv in st.values)["control_rate_achieved_hz"] == "5400.0"
        node._control_ticks += 9950
        assert node.check_rate(52.0) == pytest.approx(9950.0)
        assert "requested" not in node.diag.status().message
    finally:
        node.destroy_node()
