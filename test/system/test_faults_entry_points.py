"""The nodes' console entry points (``ros2 run`` executables) as real processes: they serve, and Ctrl-C
(SIGINT) ends them promptly with status 0.

Regression test for a fault found while benchmarking: ``rclpy.experimental.EventsExecutor.spin()`` of the
rclpy wheels used here runs no callback at all, spins a core and ignores SIGINT, so an entry point that
called ``executor.spin()`` published nothing and could not be stopped.
"""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from robot_dynamics_testing.dds_probe import NAMES, PANDA, Probe, gravity_of

pytestmark = [pytest.mark.ros, pytest.mark.slow]

BIN = Path(sys.executable).parent


def _start(exe: str, *params: str) -> subprocess.Popen:
    path = BIN / exe
    if not path.exists():  # installed elsewhere (colcon): fall back to PATH
        path = Path(shutil.which(exe) or exe)
    args = [str(path), "--ros-args"]
    for p in params:
        args += ["-p", p]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("the entry point did not exit within 10 s of SIGINT")


@pytest.fixture
def probe():
    p = Probe()
    yield p
    p.close()


@pytest.mark.parametrize("exe", ["gravity_compensation", "computed_torque"])
def test_control_entry_point_publishes_and_stops_on_sigint(probe, exe):
    proc = _start(exe, "urdf_path:=panda", f"joint_states_topic:={probe.topics['joint_states']}",
                  f"controller_name:={probe.topics['controller']}")
    try:
        deadline = time.monotonic() + 30
        while probe.js_pub.get_subscription_count() < 1:
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the node never subscribed to joint_states"
            time.sleep(0.05)
        # at rest at q: gravity node -> g(q); computed torque (feedforward, holds the first measured q)
        # -> RNEA(q, 0, 0) = g(q) as well
        expected = gravity_of(PANDA.base_pose)
        answered = False
        while not answered and time.monotonic() < deadline:
            probe.send(NAMES[::-1], PANDA.base_pose[::-1], [0.0] * 7)
            answered = probe.wait_command(expected, timeout=0.05)
        assert answered, f"{exe}: no command equal to g(q) from the running entry point"
        assert all(np.isfinite(d).all() for _, d in probe.commands)
    finally:
        status = _stop(proc)
    assert status == 0, proc.stderr.read()[-2000:]


def test_retiming_entry_point_serves_and_stops_on_sigint(probe):
    from trajectory_msgs.msg import JointTrajectoryPoint

    from robot_dynamics_interfaces.srv import RetimeTrajectory
    from robot_dynamics_testing.reference import request_path

    name = f"/retiming_service_{probe.tag}"  # a node name of its own: no other test answers
    proc = subprocess.Popen([str(BIN / "retiming_service"), "--ros-args", "-r", f"__node:={name[1:]}", "-p",
                             "urdf_path:=panda"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        client = probe.node.create_client(RetimeTrajectory, f"{name}/retime")
        assert client.wait_for_service(timeout_sec=30), "retime service never appeared"
        req = RetimeTrajectory.Request()
        req.path.joint_names = list(NAMES)
        for row in request_path(0, 100):
            p = JointTrajectoryPoint()
            p.positions = row.tolist()
            req.path.points.append(p)
        deadline = time.monotonic() + 30
        while True:
            fut = client.call_async(req)
            while not fut.done() and time.monotonic() < deadline:
                time.sleep(0.01)
            # the service is up before the model is loaded (a loaded machine: seconds); it says so, and a
            # client asks again
            if not (fut.done() and "no robot model loaded yet" in fut.result().message) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert fut.done() and fut.result().success, fut.result() if fut.done() else "no response"
        assert fut.result().duration > 0
    finally:
        status = _stop(proc)
    assert status == 0, proc.stderr.read()[-2000:]


def test_a_stop_during_configure_is_a_clean_exit_not_a_crash():
    """rclpy's signal handler shuts the context down under a node being configured; configure then fails:
    run_node reports a stop (status 0, no traceback), while the same failure with the context up is raised."""
    script = (
        "import rclpy, sys\n"
        "from robot_dynamics_ros.nodes.runtime import run_node\n"
        "def stopped():\n"
        "    rclpy.shutdown()\n"
        "    raise RuntimeError('gravity_compensation: configure failed')\n"
        "def broken():\n"
        "    raise RuntimeError('a real defect')\n"
        "code = run_node('n', stopped, [])\n"
        "print('stopped', code, flush=True)\n"
        "run_node('n', broken, [])\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "stopped 0" in proc.stdout, proc.stderr[-2000:]
    assert proc.returncode != 0 and "RuntimeError: a real defect" in proc.stderr
