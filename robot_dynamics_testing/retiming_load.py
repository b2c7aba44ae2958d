"""Background load for the latency benchmark: back-to-back 100-waypoint retiming requests.

A *client process* (``python -m robot_dynamics_testing.retiming_load client``) calls the
``RetimeTrajectory`` service in a loop, each call as soon as the previous one returned, with a smooth
100-waypoint Panda path (a different one each time). It runs until SIGINT and prints one JSON line:
requests answered, successes, mean/max round-trip time.

Where the service runs is the scenario's choice (see :mod:`robot_dynamics_testing.latency`):

* ``retiming`` — in the same process as the node under test, added to the same executor (the
  node-under-test child is started with ``--with-retiming``): in-process composition; on a single-threaded
  executor a request holds that executor until it is answered;
* ``retiming-sep`` — in a process of its own (``... retiming_load serve``), on the multi-threaded executor of
  its entry point: what ``robot-dynamics run`` starts.

Keeping the client in its own process keeps its CPU and GIL use out of the measuring process.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np

from robot_dynamics_testing import child_env
from robot_dynamics_testing.reference import WAYPOINTS, request_path  # noqa: F401 - test/reference.py (request_path: the paths sent)

SERVICE_NAME = "/bench_retiming/retime"
#: waypoints of each request of :class:`RetimingLoad`'s client (a benchmark may set it before a run)
LOAD_WAYPOINTS = WAYPOINTS


def available() -> bool:
    """True when the retiming service node and the service type can be imported."""
    try:
        import robot_dynamics_ros.nodes.retiming_service  # noqa: F401
        from robot_dynamics_interfaces.srv import RetimeTrajectory  # noqa: F401
    except ImportError:
        return False
    return hasattr(robot_dynamics_ros.nodes.retiming_service, "RetimingServiceNode")


def make_retiming_node(context):
    """The package's retiming service node serving :data:`SERVICE_NAME` for the Panda."""
    from rclpy.parameter import Parameter

    from robot_dynamics_ros.nodes import retiming_service as rs

    node_name = SERVICE_NAME.strip("/").rpartition("/")[0]
    overrides = [Parameter("urdf_path", value="panda")]
    return rs.RetimingServiceNode(node_name, context=context, parameter_overrides=overrides)


def client_main(waypoints: int = WAYPOINTS) -> int:
    """Call the retiming service back to back with ``waypoints``-point paths until SIGINT; print a JSON line
    with the counts."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from trajectory_msgs.msg import JointTrajectoryPoint

    from robot_dynamics_interfaces.srv import RetimeTrajectory
    from robot_dynamics_testing.latency import ProbeRobot

    names = list(ProbeRobot.panda().joint_names)
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = Node("bench_retiming_client", context=ctx)
    client = node.create_client(RetimeTrajectory, SERVICE_NAME)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    stats = {"requests": 0, "answered": 0, "success": 0, "rtt_ms": [], "solve_ms": [], "errors": []}
    if not client.wait_for_service(timeout_sec=20.0):
        print(json.dumps({"error": f"service {SERVICE_NAME} not available"}), flush=True)
        return 1
    print("READY", flush=True)
    k = 0
    while not stop.is_set():
        req = RetimeTrajectory.Request()
        req.path.joint_names = names
        for row in request_path(k, waypoints):
            p = JointTrajectoryPoint()
            p.positions = row.tolist()
            req.path.points.append(p)
        req.torque_margin = 0.9
        req.sample_period = 0.01
        t0 = time.perf_counter()
        fut = client.call_async(req)
        stats["requests"] += 1
        while not fut.done() and not stop.is_set():
            executor.spin_once(timeout_sec=0.05)
        if fut.done():
            res = fut.result()
            stats["answered"] += 1
            stats["rtt_ms"].append((time.perf_counter() - t0) * 1e3)
            stats["solve_ms"].append(res.solve_time * 1e3)
            if res.success:
                stats["success"] += 1
            elif len(stats["errors"]) < 3:
                stats["errors"].append(res.message)
        k += 1
    rtt = np.array(stats.pop("rtt_ms") or [np.nan])
    solve = np.array(stats.pop("solve_ms") or [np.nan])
    stats.update(rtt_ms_mean=round(float(rtt.mean()), 2), rtt_ms_max=round(float(rtt.max()), 2),
                 solve_ms_mean=round(float(solve.mean()), 2))
    node.destroy_node()
    rclpy.try_shutdown(context=ctx)
    print(json.dumps(stats), flush=True)
    return 0


def serve_main() -> int:
    """Run only the retiming service node until SIGINT, on the executor of its entry point (multi-threaded,
    ``node.executor_threads``)."""
    import rclpy

    from robot_dynamics_ros.nodes.runtime import make_executor, spin_until_shutdown

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = make_retiming_node(ctx)
    executor = make_executor("multi", ctx, num_threads=node.executor_threads)
    executor.add_node(node)
    print("READY", flush=True)
    try:
        spin_until_shutdown(executor, ctx)
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    return 0


def _service_request(kind: str, args):
    """``(service type, request)`` for ``calls --type``: a ``--points``-waypoint retiming request, or the
    small services' requests (``enable``: SetBool true, ``set_payload``: an empty SetPayload, ``trigger``:
    Trigger)."""
    if kind == "retime":
        from trajectory_msgs.msg import JointTrajectoryPoint

        from robot_dynamics_interfaces.srv import RetimeTrajectory
        from robot_dynamics_testing.dds_probe import NAMES

        req = RetimeTrajectory.Request()
        req.path.joint_names = list(NAMES)
        req.path.points = [JointTrajectoryPoint(positions=row.tolist())
                           for row in request_path(args.seed, args.points)]
        req.sample_period = 0.01
        return RetimeTrajectory, req
    if kind == "enable":
        from std_srvs.srv import SetBool

        return SetBool, SetBool.Request(data=True)
    if kind == "set_payload":
        from robot_dynamics_interfaces.srv import SetPayload

        return SetPayload, SetPayload.Request()
    from std_srvs.srv import Trigger

    return Trigger, Trigger.Request()


def calls_main(argv: list[str]) -> int:
    """A client process for the service-fault tests: ``calls SERVICE --mode loop|burst|victim ...``
    (``--type retime|enable|set_payload|trigger``, default retime).

    * ``loop``: one request at a time (``--points`` waypoints) for ``--seconds``, each waited for up to
      ``--timeout`` s;
    * ``burst``: ``--count`` requests sent at once, then all waited for (``--timeout`` s in total);
    * ``victim``: one request of ``--points`` waypoints, prints ``SENT`` once it is sent, then waits
      (to be killed mid-request).

    Prints ``READY`` once the service is discovered, waits for a ``GO`` line on stdin, and at the end one JSON
    line: ``sent``, ``answered``, ``success``, ``messages`` (first word of each refusal, counted),
    ``answers`` (wall-clock time of each answer, s) and ``rtt_max`` (s). The client's request and
    response queues are keep-last ``--depth`` (default ``--count``, at least 10) deep, so that a burst is not
    dropped by this client. rmw_fastrtps sends every answer of a service to every client's response reader
    (each client keeps those for its own requests): a reader shallower than the answers in flight to all
    clients loses its own (20 x 50 concurrent calls to the small services with depth 50: 1-2.4 % lost);
    deep readers of large answers (retiming) slow the service's reliable writer down instead (20 x 50
    ``~/retime`` calls with depth 1000: 1-4 of 1000 unanswered after 60 s, 0 with depth 50).
    """
    import argparse
    from collections import Counter

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    parser = argparse.ArgumentParser(prog="retiming_load calls")
    parser.add_argument("service")
    parser.add_argument("--type", choices=("retime", "enable", "set_payload", "trigger"), default="retime")
    parser.add_argument("--mode", choices=("loop", "burst", "victim"), required=True)
    parser.add_argument("--points", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--depth", type=int, default=None)
    args = parser.parse_args(argv)
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = Node(f"calls_{os.getpid()}", context=ctx)
    depth = args.depth or max(10, args.count)
    srv_type, req = _service_request(args.type, args)
    client = node.create_client(srv_type, args.service,
                                qos_profile=QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE))
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    if not client.wait_for_service(timeout_sec=60.0):
        print(json.dumps({"error": f"service {args.service} not available"}), flush=True)
        return 1
    print("READY", flush=True)
    sys.stdin.readline()
    stats = {"sent": 0, "answered": 0, "success": 0, "answers": [], "rtt_max": 0.0}
    messages: Counter = Counter()

    def collect(futures, t_sent, until):
        while any(not f.done() for f in futures) and time.monotonic() < until:
            executor.spin_once(timeout_sec=0.01)
        for f in futures:
            if f.done():
                stats["answered"] += 1
                res = f.result()
                stats["success"] += bool(res.success)
                if not res.success:
                    messages[res.message.split(":")[0][:60]] += 1

    def call(count):
        t0 = time.monotonic()
        futures = []
        for _ in range(count):
            fut = client.call_async(req)
            fut.add_done_callback(lambda _f: stats["answers"].append(time.time()))
            futures.append(fut)
        stats["sent"] += count
        return t0, futures

    if args.mode == "victim":
        call(1)
        executor.spin_once(timeout_sec=0.0)
        print("SENT", flush=True)
        time.sleep(3600)
    elif args.mode == "burst":
        t0, futures = call(args.count)
        collect(futures, t0, t0 + args.timeout)
        stats["rtt_max"] = time.monotonic() - t0
        stats["unanswered_calls"] = [k for k, f in enumerate(futures) if not f.done()]   # 0 = the first sent
    else:
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            t0, futures = call(1)
            collect(futures, t0, t0 + args.timeout)
            stats["rtt_max"] = max(stats["rtt_max"], time.monotonic() - t0)
    stats["messages"] = dict(messages)
    print(json.dumps(stats), flush=True)   # before the middleware's shutdown, which is not what is measured
    node.destroy_node()
    rclpy.try_shutdown(context=ctx)
    return 0


def _start(args: list[str]) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "robot_dynamics_testing.retiming_load", *args],
                            stdout=subprocess.PIPE, text=True, env=child_env())
    line = proc.stdout.readline()
    if not line.startswith("READY"):
        proc.kill()
        raise RuntimeError(f"retiming load '{args[0]}' did not start: {line.strip()!r}")
    return proc


def _stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


class RetimingLoad:
    """start(): the client process (and, if ``separate``, the service process); stop() -> the stats."""

    def __init__(self, separate: bool, waypoints: int | None = None):
        self.separate = separate
        self.waypoints = int(waypoints or LOAD_WAYPOINTS)
        self._server = None
        self._client = None

    def start(self) -> None:
        if self.separate:
            self._server = _start(["serve"])
        self._client = _start(["client", str(self.waypoints)])
        time.sleep(0.5)  # the first requests compile/warm the retiming; keep them out of the window

    def stop(self) -> dict:
        out = _stop(self._client) if self._client else ""
        if self._server:
            _stop(self._server)
        self._client = self._server = None
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        info = json.loads(lines[-1]) if lines else {"error": "no statistics from the retiming client"}
        info["service_process"] = "separate" if self.separate else "same as the node under test"
        info["waypoints"] = self.waypoints
        return info


def make_retiming_load(separate: bool) -> RetimingLoad:
    return RetimingLoad(separate)


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "client":
        sys.exit(client_main(int(sys.argv[2]) if len(sys.argv) > 2 else WAYPOINTS))
    if cmd == "serve":
        sys.exit(serve_main())
    if cmd == "calls":
        sys.exit(calls_main(sys.argv[2:]))
    print("usage: python -m robot_dynamics_testing.retiming_load client|serve|calls", file=sys.stderr)
    sys.exit(2)
