"""The retiming service with its worker process (``solver_process``, the default) over real DDS.

* A 100 000-point request does not hold the node's process: a 500 Hz timer in the node's own executor
  keeps its rate while the request is taken, solved and answered (with the in-process server the request's
  deserialization alone holds the interpreter lock for about a second).
* Parameters reach the worker: ``request_deadline`` set on the node bounds the worker's answer.
* The answer is the retimer's: the trajectory starts and ends at the path's ends and respects the URDF
  velocity limits read here from the URDF with Pinocchio (``test_topp_ra.pinocchio_reference``).
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import rclpy
from rclpy.parameter import Parameter

from robot_dynamics_testing.dds_probe import NAMES
from robot_dynamics_testing.reference import request_path
from test_retiming_service import _request, _wait
from robot_dynamics_testing.retiming_cases import pinocchio_reference

pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.fixture(scope="module")
def ros():
    from robot_dynamics_interfaces.srv import RetimeTrajectory

    from robot_dynamics_ros.nodes import runtime
    from robot_dynamics_ros.nodes.retiming_service import RetimingServiceNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = RetimingServiceNode("rt_worker_test", context=ctx, parameter_overrides=[
        Parameter("urdf_path", value="panda"), Parameter("joint_limits_path", value="panda_joint_limits.yaml")])
    assert node.worker is not None and node.server is None
    ticks: list[float] = []
    node.create_timer(0.002, lambda: ticks.append(time.monotonic()))  # in the node's own executor
    client_node = rclpy.create_node("rt_worker_test_client", context=ctx)
    executor = runtime.make_executor("single", context=ctx)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    client_executor = runtime.make_executor("single", context=ctx)
    client_executor.add_node(client_node)
    client_thread = threading.Thread(target=client_executor.spin, daemon=True)
    client_thread.start()
    assert node.warm.wait(timeout=300), "retiming warm-up in the worker did not finish"
    client = client_node.create_client(RetimeTrajectory, "/rt_worker_test/retime")
    assert client.wait_for_service(timeout_sec=30.0)
    yield {"node": node, "client": client, "type": RetimeTrajectory, "ticks": ticks}
    executor.shutdown(timeout_sec=2.0)
    client_executor.shutdown(timeout_sec=2.0)
    node.destroy_node()
    client_node.destroy_node()
    rclpy.shutdown(context=ctx)


def test_100000_point_request_leaves_the_nodes_executor_its_rate(ros):
    rows = request_path(0, 100_000)
    req = _request(ros, NAMES, rows, torque_margin=0.9, sample_period=0.01)  # built before the windows
    ticks = ros["ticks"]
    t0 = time.monotonic()
    time.sleep(2.0)
    t1 = time.monotonic()
    fut = ros["client"].call_async(req)
    res = _wait(fut, 60.0)
    t2 = time.monotonic()
    assert res.success, res.message
    before = [t for t in ticks if t0 <= t < t1]
    during = [t for t in ticks if t1 <= t <= t2]
    rate_before, rate_during = len(before) / (t1 - t0), len(during) / (t2 - t1)
    gaps = np.diff([t1, *during, t2])
    print(f"500 Hz timer: {rate_before:.0f} Hz without a request, {rate_during:.0f} Hz over the {t2 - t1:.1f} s "
          f"100 000-point request, largest gap {gaps.max() * 1e3:.0f} ms")
    assert t2 - t1 > 0.3  # the request took long enough to be measured
    # the machine's load sets both rates; the request, solved in another process, must not lower the rate
    assert rate_during >= 0.7 * rate_before, (rate_during, rate_before)
    # the answer is a trajectory along the path (ends exact) within the URDF velocity limits
    q = np.array([p.positions for p in res.trajectory.points])
    qd = np.array([p.velocities for p in res.trajectory.points])
    np.testing.assert_allclose(q[[0, -1]], rows[[0, -1]], atol=1e-9)
    pm = pinocchio_reference("panda", payload=False)
    assert (np.abs(qd) <= pm.velocityLimit * (1 + 1e-6) + 1e-9).all()


def test_request_deadline_set_on_the_node_bounds_the_workers_answer(ros):
    node = ros["node"]
    # 30 000 gridpoints: the solve takes well over the 0.1 s deadline (at the default grid it can finish first)
    huge = _request(ros, NAMES, request_path(1, 100_000), torque_margin=0.9, sample_period=0.01, gridpoints=30_000)
    small = _request(ros, NAMES, request_path(2, 20), sample_period=0.05)
    node.set_parameters([Parameter("request_deadline", value=0.1)])
    try:
        time.sleep(0.2)  # the parameter message reaches the worker
        res = _wait(ros["client"].call_async(huge), 60.0)
        assert not res.success and res.message.startswith("timed out"), res.message
        assert "request_deadline (0.1 s)" in res.message
        print(f"100 000 points, request_deadline 0.1 s: answered {res.solve_time:.3f} s after being taken")
        # taken -> answered, measured by the worker (0.100–0.127 s on an idle machine); the slack is for the
        # stretches in which the solve holds the interpreter lock (the answering thread waits for it) on a
        # loaded 2-core machine (0.74 s seen under a full suite beside other work)
        assert res.solve_time <= 0.1 + 0.9, res.solve_time
    finally:
        node.set_parameters([Parameter("request_deadline", value=30.0)])
    time.sleep(0.2)
    deadline = time.monotonic() + 30.0
    while True:  # the discarded solve finishes, then the worker serves again
        ok = _wait(ros["client"].call_async(small), 40.0)
        if ok.success:
            break
        assert ok.message.startswith("busy") and time.monotonic() < deadline, ok.message
    assert node.requests >= 2 and node.timeouts >= 1  # the worker's answers are counted by the node


def test_motor_limits_path_set_on_the_node_reaches_the_worker(ros, tmp_path):
    """A bad motor_limits.yaml (peak below rated) set on the node refuses the worker's answers, naming the
    file and the joint; cleared, requests succeed again."""
    node = ros["node"]
    bad = tmp_path / "motor_limits.yaml"
    bad.write_text("motor_limits:\n  panda_joint1: {rated_torque: 80.0, peak_torque: 50.0, peak_duration: 1.0}\n")
    req = _request(ros, NAMES, request_path(3, 20), sample_period=0.05)
    node.set_parameters([Parameter("motor_limits_path", value=str(bad))])
    try:
        time.sleep(0.2)  # the parameter message reaches the worker
        res = _wait(ros["client"].call_async(req), 30.0)
    finally:
        node.set_parameters([Parameter("motor_limits_path", value="")])
    assert not res.success and str(bad) in res.message and "panda_joint1" in res.message, res.message
    time.sleep(0.2)
    ok = _wait(ros["client"].call_async(req), 30.0)
    assert ok.success, ok.message
