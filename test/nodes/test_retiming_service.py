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

from robot_dynamics_testing.polyline import max_polyline_distance
from robot_dynamics_testing.retiming_cases import pinocchio_reference, smooth_waypoints

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def ros():
    from robot_dynamics_interfaces.srv import RetimeTrajectory

    from robot_dynamics_ros.nodes import runtime
    from robot_dynamics_ros.nodes.retiming_service import RetimingServiceNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = RetimingServiceNode("retiming_test", context=ctx,
                               parameter_overrides=[Parameter("urdf_path", value="panda"),
                                                    Parameter("acceleration_limit", value=10.0)])
    client_node = rclpy.create_node("retiming_test_client", context=ctx)
    # another node's 500 Hz timer, on an executor of its own (not the client's: that one also turns the
    # responses, thousands of points, into Python objects, which is the client's cost, not the service's)
    ticker_node = rclpy.create_node("retiming_test_ticker", context=ctx)
    ticks = []
    ticker_node.create_timer(0.002, lambda: ticks.append(time.monotonic()))
    # composed in one process: the node on the executor its own process uses (its entry point), the client
    # and the ticker nodes on executors of their own
    executor = runtime.make_executor("multi", context=ctx, num_threads=node.executor_threads)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    client_executor = runtime.make_executor("single", context=ctx)
    client_executor.add_node(client_node)
    client_thread = threading.Thread(target=client_executor.spin, daemon=True)
    client_thread.start()
    ticker_executor = runtime.make_executor("single", context=ctx)
    ticker_executor.add_node(ticker_node)
    ticker_thread = threading.Thread(target=ticker_executor.spin, daemon=True)
    ticker_thread.start()
    assert node.warm.wait(timeout=300), "retiming warm-up (first compile) did not finish"
    client = client_node.create_client(RetimeTrajectory, "/retiming_test/retime")
    from sensor_msgs.msg import JointState

    js_pub = client_node.create_publisher(JointState, "/joint_states", 10)
    assert client.wait_for_service(timeout_sec=10.0)
    yield {"node": node, "client": client, "type": RetimeTrajectory, "ticks": ticks, "js_pub": js_pub}
    for ex, th in ((executor, thread), (client_executor, client_thread), (ticker_executor, ticker_thread)):
        ex.shutdown(timeout_sec=2.0)
        th.join(timeout=2.0)
    node.destroy_node()
    client_node.destroy_node()
    ticker_node.destroy_node()
    rclpy.shutdown(context=ctx)


def _request(ros, names, waypoints, **fields):
    """A RetimeTrajectory request (``ros["type"]``) along ``waypoints`` (N, len(names)) with ``fields``."""
    from trajectory_msgs.msg import JointTrajectoryPoint

    req = ros["type"].Request()
    req.path.joint_names = list(names)
    req.path.points = [JointTrajectoryPoint(positions=[float(v) for v in row]) for row in waypoints]
    for key, value in fields.items():
        setattr(req, key, value)
    return req


def _wait(fut, timeout=30.0):
    """The response of ``fut`` (a client call), failing after ``timeout`` s."""
    end = time.monotonic() + timeout
    while not fut.done() and time.monotonic() < end:
        time.sleep(0.002)
    assert fut.done(), "no response from the retiming service"
    return fut.result()


def _call(ros, names, waypoints, timeout=30.0, **fields):
    return _wait(ros["client"].call_async(_request(ros, names, waypoints, **fields)), timeout)


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
    assert "no acceleration limits" not in resp.message  # acceleration_limit = 10 configures every joint


@pytest.mark.parametrize("case, expect", [
    ("nan", r"waypoint 3: joint 'panda_joint4' position is nan"),
    ("unknown", r"unknown joint 'elbow'"),
    ("ragged", r"path.points\[2\].positions has 6 values for 7 joint_names"),
    ("outside", r"waypoint 1: joint 'panda_joint4' position .* outside its position limits \[-3.0718, -0.0698\]"),
    ("gravity", None),  # expected message built from Pinocchio below
    ("start_velocity", r"start_velocity: joint 'panda_joint1' at 9 rad/s exceeds its velocity limit 2.175"),
    ("empty", r"path.points is empty"),
    ("scaling", r"^velocity_scaling=1.5: must be in \[0.001, 1\]"),  # the request's field name
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
    # the ticker node's 500 Hz timer, in the service node's process: it kept running
    assert t1 - t0 > 0.05
    assert len(during) >= 0.2 * (t1 - t0) / 0.002, (len(during), t1 - t0)


def test_partial_request_holds_unnamed_joints_at_the_measured_state(ros):
    from sensor_msgs.msg import JointState

    node = ros["node"]
    model = node.model
    names = list(model.joint_names)
    wp = smooth_waypoints(model, 6, seed=3)
    # no joint state yet (or only stale ones): refused, naming the joints it cannot hold
    node.set_parameters([Parameter("joint_state_timeout", value=0.3)])
    time.sleep(0.35)
    resp = _call(ros, names[:3], wp[:, :3], sample_period=0.01)
    assert not resp.success
    assert "['panda_joint4', 'panda_joint5', 'panda_joint6', 'panda_joint7']" in resp.message, resp.message
    assert "/joint_states" in resp.message
    # measured state (in another joint order, with an unknown extra joint): joints 4-7 stay exactly there
    q_meas = smooth_waypoints(model, 2, seed=9)[1]
    msg = JointState(name=["gripper", *names[::-1]], position=[0.5, *q_meas[::-1].tolist()])
    deadline = time.monotonic() + 5
    while node.measured_hold(names)[1]:
        assert time.monotonic() < deadline, "the node never received the joint state"
        ros["js_pub"].publish(msg)
        time.sleep(0.02)
    resp = _call(ros, names[:3], wp[:, :3], sample_period=0.01)
    assert resp.success, resp.message
    t, q, qd, qdd, _ = _arrays(resp.trajectory)
    assert list(resp.trajectory.joint_names) == names
    np.testing.assert_array_equal(q[:, 3:], np.broadcast_to(q_meas[3:], q[:, 3:].shape))
    np.testing.assert_array_equal(qd[:, 3:], 0.0)
    np.testing.assert_allclose(q[[0, -1], :3], wp[[0, -1], :3], atol=1e-9)
    assert "held at the measured state" in resp.message
    # the measurement goes stale: refused again
    time.sleep(0.4)
    resp = _call(ros, names[:3], wp[:, :3], sample_period=0.01)
    assert not resp.success and "joint_state_timeout 0.3 s" in resp.message
    node.set_parameters([Parameter("joint_state_timeout", value=0.5)])


def test_zero_fields_take_the_nodes_default_scaling_factors(ros):
    node = ros["node"]
    model = node.model
    wp = smooth_waypoints(model, 5, seed=4)
    names = list(model.joint_names)
    full = _call(ros, names, wp, sample_period=0.01)
    node.set_parameters([Parameter("default_velocity_scaling_factor", value=0.25)])
    try:
        slow = _call(ros, names, wp, sample_period=0.01)
        explicit = _call(ros, names, wp, sample_period=0.01, velocity_scaling=1.0)
    finally:
        node.set_parameters([Parameter("default_velocity_scaling_factor", value=1.0)])
    assert full.success and slow.success and explicit.success
    pm = pinocchio_reference("panda", payload=False)
    _, _, qd_slow, _, _ = _arrays(slow.trajectory)
    assert (np.abs(qd_slow) / pm.velocityLimit).max() <= 0.25 * (1 + 1e-3)
    assert slow.duration > 1.5 * full.duration
    assert explicit.duration == pytest.approx(full.duration, rel=1e-12)


def test_every_request_is_answered_within_the_deadline_busy_or_timed_out(ros):
    """A solve that outlasts request_deadline (a retimer standing in for a huge request: it sleeps 1 s)
    gets "timed out" at the deadline; a request arriving meanwhile gets "busy" at its own deadline."""
    from trajectory_msgs.msg import JointTrajectoryPoint

    node = ros["node"]
    model = node.model
    names = list(model.joint_names)
    small = smooth_waypoints(model, 5)
    real = node.retimer

    class SlowRetimer:
        def retime(self, *args, **kwargs):
            time.sleep(1.0)
            return real.retime(*args, **kwargs)

    node.set_parameters([Parameter("request_deadline", value=0.2)])
    node.retimer = SlowRetimer()
    try:
        t0 = time.monotonic()
        futures = []
        for _ in range(2):
            req = ros["type"].Request()
            req.path.joint_names = names
            req.path.points = [JointTrajectoryPoint(positions=row.tolist()) for row in small]
            futures.append(ros["client"].call_async(req))
            time.sleep(0.05)
        while not all(f.done() for f in futures):
            assert time.monotonic() - t0 < 3.0, "a request was not answered within the deadline (+ slack)"
            time.sleep(0.005)
        answered_s = time.monotonic() - t0
        messages = sorted(f.result().message.split(":")[0] for f in futures)
    finally:
        node.retimer = real
        node.set_parameters([Parameter("request_deadline", value=30.0)])
    assert messages == ["busy", "timed out"], messages
    assert answered_s < 0.9  # both answered at their deadline, long before the 1 s solve ended
    # the solver finishes the discarded request, then serves again
    deadline = time.monotonic() + 30
    while True:
        ok = _call(ros, names, small, sample_period=0.05)
        if ok.success:
            break
        assert ok.message.startswith("busy") and time.monotonic() < deadline, ok.message


def test_node_remap_renames_the_one_node_that_serves_and_reads_joint_states():
    from robot_dynamics_ros.nodes.retiming_service import RetimingServiceNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=["--ros-args", "-r", "__node:=rt_renamed", "-r", "__ns:=/cell"])
    try:
        node = RetimingServiceNode(context=ctx, parameter_overrides=[Parameter("urdf_path", value="panda"),
                                                                     Parameter("warmup", value=False)])
        observer = rclpy.create_node("rt_observer", context=ctx, use_global_arguments=False)
        deadline = time.monotonic() + 10.0
        while True:
            graph = observer.get_node_names_and_namespaces()
            readers = [(i.node_name, i.node_namespace)
                       for i in observer.get_subscriptions_info_by_topic("/cell/joint_states")]
            if readers or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        names = [n for n, ns in graph]
        assert names.count("rt_renamed") == 1 and not any(n.startswith("rt_renamed_") for n in names), graph
        assert ("rt_renamed", "/cell") in graph
        assert node.service_name == "/cell/rt_renamed/retime"
        assert node.joint_state_topic == "/cell/joint_states"
        assert readers == [("rt_renamed", "/cell")], readers   # the node itself, on the remapped name
        assert node.loader.subscription is None  # a file source: no description topic
        observer.destroy_node()
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)


def test_acceleration_limits_from_the_shipped_joint_limits_or_a_warning_in_every_answer():
    import yaml

    from robot_dynamics_interfaces.srv import RetimeTrajectory
    from trajectory_msgs.msg import JointTrajectoryPoint

    from robot_dynamics_ros.nodes.retiming_service import RetimingServiceNode
    from robot_dynamics_ros.share import data_file

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        limits = yaml.safe_load(data_file("config", "panda_joint_limits.yaml").read_text())["joint_limits"]
        with_limits = RetimingServiceNode("rt_limits", context=ctx, parameter_overrides=[
            Parameter("urdf_path", value="panda"), Parameter("joint_limits_path", value="panda_joint_limits.yaml"),
            Parameter("warmup", value=False)])
        expected = [limits[j]["max_acceleration"] for j in with_limits.model.joint_names]
        assert with_limits.model.acceleration_limit.tolist() == expected
        assert with_limits.accel_warning == ""
        bare = RetimingServiceNode("rt_bare", context=ctx, parameter_overrides=[
            Parameter("urdf_path", value="panda"), Parameter("warmup", value=False)])
        assert bare.model is not with_limits.model
        wp = smooth_waypoints(bare.model, 4)
        for rows in (wp, wp[:, :3] * np.nan):  # a success and a failure both carry the warning
            req = RetimeTrajectory.Request()
            req.path.joint_names = list(bare.model.joint_names)[: rows.shape[1]]
            req.path.points = [JointTrajectoryPoint(positions=r.tolist()) for r in rows]
            resp = bare.on_request(req, RetimeTrajectory.Response())  # answered on this thread
            assert "no acceleration limits configured for joints ['panda_joint1', 'panda_joint2', " in resp.message
        for n in (with_limits, bare):
            n.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)


def test_path_tolerance_field_bounds_the_measured_deviation_from_the_polyline(ros):
    model = ros["node"].model
    names = list(model.joint_names)
    rng = np.random.default_rng(5)
    lo, hi = model.lower, model.upper
    wp = lo + (hi - lo) * rng.uniform(0.3, 0.7, (5, model.n))  # an RRT-like path: straight legs, sharp corners
    for tol in (0.0, 0.02):  # 0: the node's default_path_tolerance
        resp = _call(ros, names, wp, sample_period=0.002, path_tolerance=tol)
        assert resp.success, resp.message
        limit = tol or ros["node"].p["default_path_tolerance"]
        _, q, _, _, _ = _arrays(resp.trajectory)
        measured = max_polyline_distance(q, wp)
        assert 0.0 <= resp.max_path_deviation <= limit * (1 + 1e-9)
        assert measured <= limit + 5e-5, (measured, limit)
        assert measured <= resp.max_path_deviation + 5e-5  # the reported figure is not an underestimate
