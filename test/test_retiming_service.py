"""Retiming service node over real DDS: a 100-waypoint round trip, bad requests, serving on, not blocking.

The returned trajectory is checked against an independent Pinocchio model (built here from the URDF):
velocity, acceleration (10 rad/s² set through the node's parameter) and 0.9-margin torque limits.
"""
from __future__ import annotations

import math
import threading
import time

import numpy as np
import pinocchio as pin
import pytest
import rclpy
from rclpy.parameter import Parameter

from test_topp_ra import pinocchio_reference, smooth_waypoints

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def ros():
    from robot_dynamics_interfaces.srv import RetimeTrajectory

    from robot_dynamics_ros.nodes import common
    from robot_dynamics_ros.nodes.retiming_service import RetimingServiceNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = RetimingServiceNode("retiming_test", context=ctx,
                               parameter_overrides=[Parameter("urdf_path", value="panda"),
                                                    Parameter("acceleration_limit", value=10.0)])
    client_node = rclpy.create_node("retiming_test_client", context=ctx)
    ticks = []
    client_node.create_timer(0.002, lambda: ticks.append(time.monotonic()))
    executor = common.make_executor("single", context=ctx)
    executor.add_node(node)
    executor.add_node(client_node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    client = client_node.create_client(RetimeTrajectory, "/retiming_test/retime")
    assert client.wait_for_service(timeout_sec=10.0)
    yield {"node": node, "client": client, "type": RetimeTrajectory, "ticks": ticks}
    executor.shutdown(timeout_sec=2.0)
    thread.join(timeout=2.0)
    node.destroy_node()
    client_node.destroy_node()
    rclpy.shutdown(context=ctx)


def _call(ros, names, waypoints, timeout=30.0, **fields):
    from trajectory_msgs.msg import JointTrajectoryPoint

    req = ros["type"].Request()
    req.path.joint_names = list(names)
    req.path.points = [JointTrajectoryPoint(positions=[float(v) for v in row]) for row in waypoints]
    for key, value in fields.items():
        setattr(req, key, value)
    fut = ros["client"].call_async(req)
    end = time.monotonic() + timeout
    while not fut.done() and time.monotonic() < end:
        time.sleep(0.002)
    assert fut.done(), "no response from the retiming service"
    return fut.result()


def _arrays(traj):
    t = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in traj.points])
    q, qd, qdd, tau = (np.array([getattr(p, f) for p in traj.points])
                       for f in ("positions", "velocities", "accelerations", "effort"))
    return t, q, qd, qdd, tau


def test_round_trip_100_waypoints_gives_a_valid_trajectory(ros):
    model = ros["node"].model
    names = list(model.joint_names)
    wp = smooth_waypoints(model, 100)
    order = [6, 2, 0, 5, 1, 3, 4]  # joint order of the request is not the model's: matched by name
    resp = _call(ros, [names[i] for i in order], wp[:, order], torque_margin=0.9, sample_period=0.01)
    assert resp.success, resp.message
    assert list(resp.trajectory.joint_names) == names
    t, q, qd, qdd, tau = _arrays(resp.trajectory)
    assert t[0] == 0.0 and np.all(np.diff(t) > 0)
    assert resp.duration == pytest.approx(t[-1], abs=1e-9)
    np.testing.assert_allclose(q[0], wp[0], atol=1e-9)
    np.testing.assert_allclose(q[-1], wp[-1], atol=1e-9)
    np.testing.assert_allclose(qd[[0, -1]], 0.0, atol=1e-9)
    # independent check: Pinocchio model from the URDF file, limits from Pinocchio's parser
    pm = pinocchio_reference("panda", payload=False)
    data = pm.createData()
    tau_pin = np.array([pin.rnea(pm, data, q[k], qd[k], qdd[k]) for k in range(len(t))])
    np.testing.assert_allclose(tau, tau_pin, atol=1e-7)
    assert (np.abs(qd) / pm.velocityLimit).max() <= 1 + 1e-3
    assert (np.abs(qdd) / 10.0).max() <= 1 + 1e-3
    assert (np.abs(tau_pin) / (0.9 * pm.effortLimit)).max() <= 1 + 1e-3
    assert resp.solve_time > 0 and "peak fraction" in resp.message


@pytest.mark.parametrize("case, expect", [
    ("nan", r"waypoint 3: joint 'panda_joint4' position is nan"),
    ("unknown", r"unknown joint 'elbow'"),
    ("ragged", r"path.points\[2\].positions has 6 values for 7 joint_names"),
    ("outside", r"waypoint 1: joint 'panda_joint4' position .* outside its position limits \[-3.0718, -0.0698\]"),
    ("gravity", None),  # expected message built from Pinocchio below
    ("start_velocity", r"start_velocity: joint 'panda_joint1' at 9 rad/s exceeds its velocity limit 2.175"),
    ("empty", r"path.points is empty"),
    ("scaling", r"velocity_scale=1.5: must be in \(0, 1\]"),
])
def test_bad_requests_are_refused_precisely_and_the_node_serves_on(ros, case, expect):
    import re

    model = ros["node"].model
    names = list(model.joint_names)
    wp = smooth_waypoints(model, 6)
    fields = {}
    if case == "nan":
        wp[3, 3] = math.nan
    elif case == "unknown":
        names[1] = "elbow"
    elif case == "ragged":
        wp = [list(r) for r in wp]
        wp[2] = wp[2][:6]
    elif case == "outside":
        wp[1, 3] = 0.5
    elif case == "gravity":
        fields["torque_margin"] = 0.01
        pm = pinocchio_reference("panda", payload=False)
        g = pin.computeGeneralizedGravity(pm, pm.createData(), wp[0])
        j = int(np.argmax(np.abs(g) / pm.effortLimit))
        expect = (rf"waypoint 0: gravity alone needs {g[j]:.4f}\d* N·m at joint '{names[j]}', above its torque "
                  rf"limit {0.01 * pm.effortLimit[j]:g} N·m \(effort {pm.effortLimit[j]:g} × torque_margin 0.01\)")
    elif case == "start_velocity":
        fields["start_velocity"] = [9.0] + [0.0] * 6
    elif case == "empty":
        wp = []
    elif case == "scaling":
        fields["velocity_scaling"] = 1.5
    resp = _call(ros, names, wp, **fields)
    assert not resp.success
    assert re.search(expect, resp.message), resp.message
    assert len(resp.trajectory.points) == 0
    # and the node still answers a good request
    ok = _call(ros, list(model.joint_names), smooth_waypoints(model, 5), sample_period=0.05)
    assert ok.success, ok.message


def test_long_request_does_not_block_the_other_nodes_executor(ros):
    model = ros["node"].model
    wp = smooth_waypoints(model, 3000, amplitude=0.3)
    ticks = ros["ticks"]
    t0 = time.monotonic()
    resp = _call(ros, list(model.joint_names), wp, sample_period=0.0005, gridpoints=20000, timeout=60.0)
    t1 = time.monotonic()
    assert resp.success, resp.message
    during = [t for t in ticks if t0 <= t <= t1]
    # the client node's 500 Hz timer shares the executor with the service node: it kept running
    assert t1 - t0 > 0.05
    assert len(during) >= 0.2 * (t1 - t0) / 0.002, (len(during), t1 - t0)
