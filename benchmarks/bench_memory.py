"""Resident memory of every node in its own process on the Panda: RSS after start and after a few seconds of
1 kHz joint states, against the 150 MB target (issue 23, "lean nodes").

    python benchmarks/bench_memory.py [--settle S] [--nodes NAME ...] [--json OUT] [--domain-id N]

Each node of ``robot-dynamics run`` (:data:`robot_dynamics_tools.commands.run.NODES`) is started, one after the
other, exactly as ``run`` starts it (:func:`~robot_dynamics_tools.commands.run.child_command`: ``python -m
robot_dynamics_ros.nodes.<module> --ros-args --params-file config/panda.yaml``, in a namespace of its own),
while this process publishes Panda joint states at 1 kHz (the demo pose, velocity 0, effort = g(q) from
Pinocchio on the URDF) on the node's ``joint_states`` (not to the simulator: it publishes them itself and
refuses to share the topic with another publisher). The node counts as started when it answers: a command
on ``effort_controller/commands`` (gravity, computed torque), a ``~/external_torque`` (observer), a joint
state of its own (simulator), a retime request answered (retiming service; the lifecycle nodes configure and
activate themselves, ``autostart``). Then ``VmRSS`` of its process (``/proc/<pid>/status``, its child
processes separately: the peak of the gravity node's start-up cross-check, from start to end) is read at
once (``start``), sampled every 20 ms over ``--settle`` s of joint states (``peak``) and read at the end
(``settled``, the figure judged against the target), with its split into private memory (``RssAnon``) and touched
pages of mapped files (``RssFile``: shared libraries, shared between processes). Also printed: which
heavy libraries the process has mapped (``/proc/<pid>/maps``: numba's LLVM, scipy, mujoco, matplotlib).

DDS: a private ``ROS_DOMAIN_ID`` (``--domain-id`` to choose it), localhost discovery. Exit status 0 when
every node started and stayed ≤ :data:`TARGET_MB` (settled), else 1.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from robot_dynamics_testing import REPO, child_env
from robot_dynamics_testing.attack import build_request, child_pids, rss_mb, status_mb
from robot_dynamics_testing.latency import isolate_dds, machine_description
from robot_dynamics_testing.reference import ProbeRobot, expected_gravity
from robot_dynamics_testing.ros_world import SpinThread
from robot_dynamics_tools.commands.run import NODES, child_command

#: the issue's target for the resident memory of each node after start, MB
TARGET_MB = 150.0
PARAMS = REPO / "config" / "panda.yaml"
#: a heavy library counts as loaded when a mapped file's path contains this
HEAVY = {"numba/llvm": "llvmlite", "scipy": "/scipy/", "mujoco": "/mujoco/", "matplotlib": "/matplotlib/"}
PANDA = ProbeRobot.panda()
#: parameters the bundled config/panda.yaml has no section for
EXTRA = {"external_torque_observer": ["-p", "urdf_path:=panda"]}


def heavy_mapped(pid: int) -> list[str]:
    """The :data:`HEAVY` libraries mapped into process ``pid``."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            text = f.read()
    except OSError:
        return []
    return [name for name, mark in HEAVY.items() if mark in text]


class Probe:
    """This process's side: a 1 kHz joint-state publisher (``publish``) and the readiness check of one node's
    namespace."""

    def __init__(self, ns: str, publish: bool = True):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        self.node = rclpy.create_node("memory_probe", context=self.ctx)
        self.ns = ns
        self.answered = threading.Event()
        mark = lambda *_: self.answered.set()  # noqa: E731
        self.node.create_subscription(Float64MultiArray, f"/{ns}/effort_controller/commands", mark, 10)
        self.node.create_subscription(Float64MultiArray, "/effort_controller/commands", mark, 10)
        self.node.create_subscription(JointState, f"/{ns}/external_torque_observer/external_torque", mark, 10)
        self._own = self.node.create_subscription(JointState, f"/{ns}/joint_states", self._on_state, 10)
        self._pub = self.node.create_publisher(JointState, f"/{ns}/joint_states", 10) if publish else None
        self._msg = JointState(name=list(PANDA.joint_names), position=PANDA.base_pose.tolist(),
                               velocity=[0.0] * len(PANDA.joint_names),
                               effort=expected_gravity(PANDA, PANDA.base_pose[None])[0].tolist())
        self._frame = "memory_probe"
        self._msg.header.frame_id = self._frame
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(self.node)
        self._spin = SpinThread(self.executor, self.ctx)
        self._stop = threading.Event()
        self.sent = 0
        self._thread = threading.Thread(target=self._publish, daemon=True)
        if publish:
            self._thread.start()

    def _on_state(self, msg) -> None:
        if msg.header.frame_id != self._frame:  # the simulator's own joint state
            self.answered.set()

    def _publish(self) -> None:
        t0 = time.monotonic()
        while not self._stop.is_set():
            wait = t0 + self.sent * 1e-3 - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            now = time.time_ns()
            self._msg.header.stamp.sec, self._msg.header.stamp.nanosec = divmod(now, 1_000_000_000)
            self._pub.publish(self._msg)
            self.sent += 1

    def retime_answered(self, timeout: float) -> bool:
        """A small retime request (100 Panda waypoints) answered with success within ``timeout`` s (asked again
        while the service answers ``busy``: its warm-up compiles the retiming kernels)."""
        from robot_dynamics_interfaces.srv import RetimeTrajectory

        client = self.node.create_client(RetimeTrajectory, f"/{self.ns}/retiming_service/retime")
        deadline = time.monotonic() + timeout
        try:
            if not client.wait_for_service(timeout_sec=timeout):
                return False
            while time.monotonic() < deadline:
                future = client.call_async(build_request("normal", 0))
                while not future.done() and time.monotonic() < deadline:
                    time.sleep(0.02)
                if future.done() and future.result().success:
                    return True
                time.sleep(1.0)
            return False
        finally:
            self.node.destroy_client(client)

    def close(self) -> None:
        import rclpy

        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(5.0)
        self._spin.stop()
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.ctx)


class ChildPeak(threading.Thread):
    """Samples, every 20 ms until :meth:`stop`, the summed RSS (MB) of process ``pid``'s children (the gravity
    node's start-up cross-check runs in one): their peak, which is not the node's own memory."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak_mb = pid, 0.0
        self._stop_event = threading.Event()
        self.start()

    def run(self) -> None:
        while not self._stop_event.wait(0.02):
            self.peak_mb = max(self.peak_mb, sum(rss_mb(c) for c in child_pids(self.pid)))

    def stop(self) -> float:
        self._stop_event.set()
        self.join(2.0)
        return round(self.peak_mb, 1)


def measure(node: str, settle_s: float, timeout_s: float) -> dict:
    """Start ``node`` in its own process, wait until it answers, read its RSS (module docstring)."""
    ns = f"memory_{node}_{os.getpid()}"
    cmd = child_command(node, ["--params-file", str(PARAMS), *EXTRA.get(node, []), "-r", f"__ns:=/{ns}"])
    probe = Probe(ns, publish=node != "mujoco_simulator")
    log = tempfile.TemporaryFile()   # the node's log: a pipe nobody reads could fill and block the node
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=child_env(), start_new_session=True)
    kids = ChildPeak(proc.pid)
    row = {"node": node, "started": False}
    try:
        t0 = time.monotonic()
        if node == "retiming_service":
            ok = probe.retime_answered(timeout_s)
        else:
            ok = probe.answered.wait(timeout_s)
        row["start_s"] = round(time.monotonic() - t0, 2)
        if not ok or proc.poll() is not None:
            row["error"] = f"no answer within {timeout_s:g} s (exit {proc.poll()})"
            return row
        row.update(started=True, rss_start_mb=round(rss_mb(proc.pid), 1))
        sent0, peak, end = probe.sent, 0.0, time.monotonic() + settle_s
        while time.monotonic() < end and proc.poll() is None:
            peak = max(peak, rss_mb(proc.pid))
            time.sleep(0.02)
        settled = rss_mb(proc.pid)
        anon, file_backed = status_mb(proc.pid, "RssAnon", "RssFile")
        row.update(rss_settled_mb=round(settled, 1), rss_peak_mb=round(peak, 1), states_sent=probe.sent - sent0,
                   rss_anon_mb=round(anon, 1), rss_file_mb=round(file_backed, 1),
                   heavy=heavy_mapped(proc.pid), meets_target=settled <= TARGET_MB)
        return row
    finally:
        row["children_peak_mb"] = kids.stop()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if not row["started"]:
            log.seek(0)
            row["log_tail"] = log.read().decode(errors="replace")[-400:]
        log.close()
        probe.close()


def print_table(rows: list[dict]) -> None:
    print(f"\n{'node':<26} {'start MB':>8} {'settled':>8} {'private':>7} {'files':>6} {'peak':>7} {'children peak':>13}  "
          f"{'≤ 150 MB':<8} heavy libs")
    for r in rows:
        if not r["started"]:
            print(f"{r['node']:<26} not started: {r.get('error')}")
            continue
        print(f"{r['node']:<26} {r['rss_start_mb']:>8.1f} {r['rss_settled_mb']:>8.1f} {r['rss_anon_mb']:>7.1f} "
              f"{r['rss_file_mb']:>6.1f} {r['rss_peak_mb']:>7.1f} "
              f"{r['children_peak_mb']:>13.1f}  {'met' if r['meets_target'] else 'NOT met':<8} "
              f"{', '.join(r['heavy']) or '-'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", nargs="+", default=list(NODES), choices=list(NODES), metavar="NODE",
                        help="nodes to measure (default: all)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds of joint states after start (default 5)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a node may take to answer")
    parser.add_argument("--json", help="write the result here")
    parser.add_argument("--domain-id", type=int, default=None,
                        help="ROS_DOMAIN_ID (default: a private one chosen by the code, never $ROS_DOMAIN_ID)")
    args = parser.parse_args(argv)
    domain = isolate_dds(args.domain_id)
    print(f"ROS_DOMAIN_ID {domain}", flush=True)
    rows = []
    for node in args.nodes:
        row = measure(node, args.settle, args.timeout)
        print(json.dumps(row), flush=True)
        rows.append(row)
    print_table(rows)
    ok = all(r["started"] and r["meets_target"] for r in rows)
    print(f"\ntarget: every node ≤ {TARGET_MB:g} MB RSS after start: {'met' if ok else 'NOT met'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"target_mb": TARGET_MB, "rows": rows, "machine": machine_description(),
                       "settle_s": args.settle, "params": str(PARAMS.relative_to(REPO))}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
