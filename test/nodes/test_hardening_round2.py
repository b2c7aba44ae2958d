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
