"""Fuzz tests of the running retiming service over DDS (issue 7): hypothesis-generated
``RetimeTrajectory`` requests (random joint names, ragged points, NaN/Inf/huge positions, out-of-range
options and start/end velocities) and a 100 000-waypoint request.

Properties: every request gets a response (``success`` with a finite trajectory, or ``success: false`` with
a message), the service serves on, and a valid request afterwards is answered correctly: its trajectory
starts and ends at the first and last waypoint (by name) and its efforts at rest match Pinocchio's g(q).
"""
from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest
from robot_dynamics_testing.dds_probe import NAMES, Probe, gravity_of
from hypothesis import given, note, settings
from hypothesis import strategies as st

from robot_dynamics_testing.reference import request_path

pytestmark = [pytest.mark.ros, pytest.mark.slow]

value = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-2.0, 2.0),
                  st.sampled_from([math.nan, math.inf, 1e308, 0.0]))
option = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(0.05, 1.0),
                   st.sampled_from([0.0, -1.0, 1.0, 2.0]))


@pytest.fixture(scope="module")
def service():
    from rclpy.parameter import Parameter

    from robot_dynamics_interfaces.srv import RetimeTrajectory
    from robot_dynamics_ros.nodes.retiming_service import RetimingServiceNode

    probe = Probe()
    node = probe.add(RetimingServiceNode(f"retiming_{probe.tag}", context=probe.ctx,
                                         parameter_overrides=[Parameter("urdf_path", value="panda")]))
    assert node.warm.wait(timeout=300), "retiming warm-up (first compile) did not finish"
    client = probe.node.create_client(RetimeTrajectory, f"/retiming_{probe.tag}/retime")
    assert client.wait_for_service(timeout_sec=30)
    yield probe, node, client
    probe.close()


def _call(client, request, timeout=60.0):
    fut = client.call_async(request)
    deadline = time.monotonic() + timeout
    while not fut.done():
        assert time.monotonic() < deadline, "no response from the retiming service"
        time.sleep(0.002)
    return fut.result()


def _request(names, rows, **options):
    from trajectory_msgs.msg import JointTrajectoryPoint

    from robot_dynamics_interfaces.srv import RetimeTrajectory

    req = RetimeTrajectory.Request()
    req.path.joint_names = list(names)
    for row in rows:
        p = JointTrajectoryPoint()
        p.positions = [float(x) for x in row]
        req.path.points.append(p)
    for k, v in options.items():
        setattr(req, k, v)
    return req


def _check_valid_answer(res, names, rows):
    """A successful answer: finite, from the first to the last waypoint by name, efforts at rest = g(q)."""
    assert res.success, res.message
    traj = res.trajectory
    idx = [list(traj.joint_names).index(n) for n in names]
    first, last = traj.points[0], traj.points[-1]
    np.testing.assert_allclose(np.array(first.positions)[idx], rows[0], atol=1e-6)
    np.testing.assert_allclose(np.array(last.positions)[idx], rows[-1], atol=1e-6)
    for p in (first, last):  # at rest at both ends: effort = g(q)
        q = np.array(p.positions)[[list(traj.joint_names).index(n) for n in NAMES]]
        np.testing.assert_allclose(np.array(p.velocities), 0.0, atol=1e-6)
        g = gravity_of(q)
        eff = np.array(p.effort)[[list(traj.joint_names).index(n) for n in NAMES]]
        # accelerations at the ends are not zero (time-optimal start): compare only where qdd ~ 0
        if np.abs(np.array(p.accelerations)).max() < 1e-9:
            np.testing.assert_allclose(eff, g, atol=1e-6)
    assert all(np.isfinite(pt.positions).all() and np.isfinite(pt.effort).all() for pt in traj.points)


@settings(max_examples=20 if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci" else 300)  # DDS round trips
@given(data=st.data())
def test_fuzzed_requests_are_answered_and_the_service_serves_on(service, data):
    probe, node, client = service
    names = data.draw(st.one_of(st.permutations(NAMES).map(list),
                                st.lists(st.one_of(st.sampled_from(NAMES), st.text(max_size=6)), max_size=9)))
    w = data.draw(st.integers(0, 6))
    rows = [data.draw(st.lists(value, min_size=(k := data.draw(st.one_of(st.just(len(names)),
                                                                          st.integers(0, 9)))),
                               max_size=k)) for _ in range(w)]
    sample_period = data.draw(st.one_of(st.just(0.0), st.floats(0.005, 0.5), st.sampled_from([-1.0, math.nan])))
    req = _request(names, rows, velocity_scaling=data.draw(option), acceleration_scaling=data.draw(option),
                   torque_margin=data.draw(option), sample_period=sample_period,
                   gridpoints=data.draw(st.sampled_from([0, 1, 2, 50, 4_000_000_000])),
                   start_velocity=data.draw(st.lists(value, max_size=8)))
    res = _call(client, req)
    note(f"{res.success}: {res.message}")
    if res.success:
        assert all(np.isfinite(p.positions).all() and np.isfinite(p.effort).all() for p in res.trajectory.points)
    else:
        assert res.message
    # still serving, and correctly
    rows_ok = request_path(3, 10)
    _check_valid_answer(_call(client, _request(NAMES[::-1], rows_ok[:, ::-1], torque_margin=0.9,
                                               sample_period=0.01)), NAMES[::-1], rows_ok[:, ::-1])


def test_100000_waypoints_answered_in_bounded_time(service):
    probe, node, client = service
    rows = request_path(0, 100_000)
    req = _request(NAMES, rows, torque_margin=0.9, sample_period=0.01)
    t0 = time.monotonic()
    res = _call(client, req, timeout=60.0)
    elapsed = time.monotonic() - t0
    assert elapsed < 30.0, f"100 000 waypoints: {elapsed:.1f} s"
    _check_valid_answer(res, NAMES, rows)
    # one more waypoint than the service's max_waypoints (100 000): refused with a reason, not attempted
    res2 = _call(client, _request(NAMES, request_path(0, 100_001), sample_period=0.01))
    assert not res2.success and "100001" in res2.message.replace(" ", "").replace(",", "")
