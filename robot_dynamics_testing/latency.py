"""Joint-state -> command latency of the control path, measured over real DDS.

What is measured (one *scenario*):

- A publisher *process* of its own (``python -m robot_dynamics_testing.latency publish``, see
  :func:`publish`) sends ``sensor_msgs/JointState`` for the 7 arm joints of a Panda at a fixed rate
  (default 1 kHz), names in reversed URDF order (joint order is by name, so the node under test must map
  them). Every message carries a distinct pose ``q_k`` (a smooth multi-sine around a demo pose) and its send
  time (``time.time_ns()``, the ROS system clock) in ``header.stamp``.
- The node under test turns it into a ``std_msgs/Float64MultiArray`` command: either a bare rclpy relay
  (positions copied, no dynamics: the baseline) or our gravity-compensation node.
- A receiver node stores the arrival time (``time.time_ns()``) and the data of every command.
- Afterwards every command is matched to the message it answers by its *value*: the relay must return
  ``q_k``, the gravity node ``g(q_k)`` computed here with Pinocchio directly (independent of the node's
  code). The matched sequence number gives the latency ``t_arrival - t_send``, the messages never answered
  (``dropped``) and the largest deviation of a command from the expected value (``max_output_error``).
  Commands not matching any message within tolerance are counted as ``unmatched``.

Why the publisher is a separate process: as a thread of the measuring process it would share the GIL with
the executor thread that runs the node's and the receiver's callbacks. (An A/B on this machine did not show
a difference beyond the run-to-run spread; the multi-ms tails come from the VM, see docs/realtime.md.)

CPU of the node under test: in-process, the CPU time of the whole measuring process (``/proc/self/stat``,
utime + stime: executor thread(s), DDS threads); it therefore includes the receiver's callbacks. Across two processes, the child process's CPU time from
``/proc/<pid>/stat`` (all its threads). Both are divided by the wall time of the measurement window
(``cpu_percent``, 100 = one core) and by the number of commands (``cpu_ms_per_1000_msgs``). The kernel
counts in clock ticks (10 ms), so short windows are coarse.

Interleaved blocks (:func:`run_suite`): scenarios compared with each other run round-robin in several
blocks, each a fresh :func:`run_scenario`, and are pooled (:func:`pool_blocks`), because this VM's speed
changes over minutes and a ratio of two back-to-back windows would compare two machine phases.

Isolation: the caller gives the process its own ``ROS_DOMAIN_ID`` and localhost discovery
(:func:`isolate_dds`); each scenario uses its own ``rclpy.Context`` and topic names.
"""
from __future__ import annotations

import array
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import numpy as np

from robot_dynamics_testing import child_env
from robot_dynamics_testing.attack import hostile_fields, rss_mb
from robot_dynamics_testing.reference import ProbeRobot, expected_gravity  # test/reference.py: Pinocchio called directly

from robot_dynamics_ros.nodes.runtime import make_executor as common_make_executor
from robot_dynamics_ros.nodes.runtime import spin_until_shutdown, middleware_environment

#: the node-under-test kinds :func:`make_node_under_test` knows
NODE_KINDS = ("relay", "gravity")
#: executor kinds :func:`make_executor` knows
EXECUTOR_KINDS = ("single", "multi", "events")
TOPOLOGIES = ("inproc", "twoproc")

JOINT_STATES_TOPIC = "joint_states"
COMMAND_TOPIC = "bench_effort_controller/commands"
#: a command matches the expected value when every component is within this (rad or N·m)
MATCH_TOL = 1e-6
#: a rate step of the ramp counts as sustained if at most this fraction of its messages is dropped
SWEEP_MAX_DROP_FRACTION = 0.01


# --------------------------------------------------------------------------------------------- environment
def isolate_dds(domain_id: int | None = None) -> int:
    """Give this process (and its children) a private ROS_DOMAIN_ID and localhost-only discovery.

    Must run before ``rclpy.init``. ``domain_id`` None: a private domain chosen by
    :func:`robot_dynamics_tools.commands.isolation.private_environment`, never the caller's. Also sets
    ``MALLOC_TOP_PAD_`` (64 MiB) for children when unset (glibc trimming slows numpy code; see
    shared/NOTES.md, "Benchmarks"). Returns the domain id in use.
    """
    from robot_dynamics_tools.commands import isolation

    os.environ.update(isolation.private_environment(domain_id))
    os.environ.setdefault("MALLOC_TOP_PAD_", "67108864")
    return int(os.environ["ROS_DOMAIN_ID"])


def machine_description() -> dict:
    """CPU model, core count, kernel, Python, rclpy and RMW, load average: what a result table needs."""
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        from importlib.metadata import version

        rclpy_version = version("rclpy")
    except Exception:  # noqa: BLE001 - informational only
        rclpy_version = "unknown"
    try:
        from rclpy.utilities import get_rmw_implementation_identifier

        rmw = get_rmw_implementation_identifier()
    except Exception:  # noqa: BLE001
        rmw = "unknown"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "rclpy": rclpy_version,
        "rmw": rmw,
        "loadavg_1min_at_start": round(os.getloadavg()[0], 2),
        "malloc_top_pad": os.environ.get("MALLOC_TOP_PAD_"),
    }


#: environment variable through which a node-under-test child learns the SCHED_FIFO priority
RT_ENV = "ROBOT_DYNAMICS_BENCH_RT_PRIORITY"
#: environment variable with the keep-last depth of the joint_states and command endpoints (publisher,
#: node under test; the receiver keeps at least 1000), default 100 (the gravity node's default)
QOS_ENV = "ROBOT_DYNAMICS_BENCH_QOS_DEPTH"
#: environment variable by which a node-under-test child learns the DDS transports to use: ``node`` (default:
#: the nodes' own set-up, ``runtime.middleware_environment``: UDP only) or ``default`` (Fast DDS's SHM + UDP)
TRANSPORT_ENV = "ROBOT_DYNAMICS_BENCH_TRANSPORT"


def qos_depth() -> int:
    """Keep-last depth of the benchmark's joint_states / command endpoints (:data:`QOS_ENV`, default 100)."""
    return int(os.environ.get(QOS_ENV, "100"))


def set_realtime_priority(priority: int | None) -> None:
    """SCHED_FIFO at ``priority`` for this process's calling thread and the threads it creates later
    (rclpy's DDS threads, the publisher and executor threads); children forked afterwards start with
    normal scheduling (SCHED_RESET_ON_FORK) unless they set it themselves. ``None``/0: normal scheduling.

    Raises:
        PermissionError: the process may not use real-time scheduling (needs CAP_SYS_NICE / rtprio limit).
    """
    if not priority:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        return
    os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(int(priority)))


def cpu_seconds(pid: int | str = "self", tid: int | None = None) -> float:
    """User + system CPU time (s) of a process (all threads) or of one of its threads, from /proc."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15 (1-based) of the stat line
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------------------------ the robot
def probe_positions(robot: ProbeRobot, count: int) -> np.ndarray:
    """(count, n) joint positions (rad), one distinct pose per message, in ``robot.joint_names`` order.

    A multi-sine around the base pose, 0.25 rad amplitude, a different prime period per joint, so that
    consecutive poses differ by ~1e-3 rad in every joint and no pose repeats within thousands of messages.
    """
    k = np.arange(count, dtype=float)[:, None]
    periods = np.array([997.0, 1009.0, 1013.0, 1019.0, 1021.0, 1031.0, 1033.0, 1039.0, 1049.0])[: robot.base_pose.size]
    phases = np.linspace(0.0, 2.0, robot.base_pose.size)
    return robot.base_pose[None, :] + 0.25 * np.sin(2.0 * np.pi * k / periods[None, :] + phases[None, :])


# ---------------------------------------------------------------------------------------------- the nodes
# one executor factory for the nodes and the benchmark: the node under test runs on what it ships with
make_executor = common_make_executor


def make_relay(context, *, input_topic: str = JOINT_STATES_TOPIC, output_topic: str = COMMAND_TOPIC):
    """The baseline: a bare rclpy node, JointState in -> Float64MultiArray (its positions) out, no dynamics.

    QoS: reliable, keep last :func:`qos_depth` both ways (the same as the gravity node under test).
    """
    from rclpy.node import Node
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    class Relay(Node):
        def __init__(self):
            super().__init__("bench_relay", context=context)
            self._out = Float64MultiArray()
            self._pub = self.create_publisher(Float64MultiArray, output_topic, qos_depth())
            self.create_subscription(JointState, input_topic, self._on_joint_state, qos_depth())

        def _on_joint_state(self, msg):
            self._out.data = msg.position
            self._pub.publish(self._out)

    return Relay()


def make_gravity_node(context, robot: ProbeRobot, *, input_topic: str = JOINT_STATES_TOPIC,
                      output_topic: str = COMMAND_TOPIC):
    """Our gravity-compensation node, configured for ``robot`` and the benchmark's topics."""
    from rclpy.parameter import Parameter

    from robot_dynamics_ros.nodes import gravity_compensation as gc

    controller, _, leaf = output_topic.strip("/").rpartition("/")
    if leaf != "commands" or not controller:
        raise ValueError(f"output topic '{output_topic}': the gravity node publishes on /<controller>/commands")
    overrides = [
        Parameter("urdf_path", value=robot.urdf),
        Parameter("joints", value=list(robot.joint_names)),
        Parameter("held_joint_names", value=list(robot.held_joints)),
        Parameter("held_joint_positions", value=[float(v) for v in robot.held_joints.values()]),
        Parameter("joint_states_topic", value="/" + input_topic.strip("/")),
        Parameter("controller_name", value=controller),
        # like for like with the relay, which answers every message: the node answers every state too
        # (the shipped default, latest_state_wins, would skip states queued behind a stall and count as drops)
        Parameter("latest_state_wins", value=False),
        # depth and reliability through rclpy's standard QoS overrides
        Parameter(f"qos_overrides./{input_topic.strip('/')}.subscription.depth", value=qos_depth()),
        Parameter(f"qos_overrides./{input_topic.strip('/')}.subscription.reliability", value="reliable"),
        Parameter(f"qos_overrides./{output_topic.strip('/')}.publisher.depth", value=qos_depth()),
        Parameter(f"qos_overrides./{output_topic.strip('/')}.publisher.reliability", value="reliable"),
    ]
    return gc.GravityCompensationNode(context=context, parameter_overrides=overrides)


def make_node_under_test(kind: str, context, robot: ProbeRobot):
    if kind == "relay":
        return make_relay(context)
    if kind == "gravity":
        return make_gravity_node(context, robot)
    raise ValueError(f"node '{kind}': not one of {NODE_KINDS}")


class _Spinner:
    """Spins an executor in a background thread until :meth:`stop`, with the nodes' own
    :func:`~robot_dynamics_ros.nodes.runtime.spin_until_shutdown` (so the in-process scenarios run the
    node as it ships, garbage-collector freeze included)."""

    def __init__(self, executor, context):
        self._executor = executor
        self._context = context
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-spin", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        spin_until_shutdown(self._executor, self._context, until=self._stop.is_set, period=0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)


class StampedPublisher:
    """A thread that publishes the probe poses at ``rate_hz`` with the send time in ``header.stamp``.

    Deadlines are absolute (``t0 + k / rate``), so a late wake-up does not lower the average rate.
    ``send_ns[k]`` holds the ``time.time_ns()`` written into message k (0 = not sent).
    """

    def __init__(self, node, topic: str, names: tuple[str, ...], positions: np.ndarray, rate_hz: float,
                 *, mark: int = 0, cpu_probe: Callable[[], float] = lambda: 0.0):
        from sensor_msgs.msg import JointState

        self._pub = node.create_publisher(JointState, topic, qos_depth())
        self._names = list(names)
        # message order is the reverse of URDF order: the node under test must map by name
        self._rows = [array.array("d", row[::-1]) for row in positions]
        self._rate = float(rate_hz)
        self._mark = mark
        self._cpu_probe = cpu_probe
        #: (cpu_probe(), this thread's CPU time, time.monotonic()) when message ``mark`` is due and at the end
        self.at_mark: tuple[float, float, float] | None = None
        self.at_end: tuple[float, float, float] | None = None
        self.send_ns = np.zeros(len(positions), dtype=np.int64)
        self.count = 0
        self.tid: int | None = None
        self._stop = threading.Event()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-publisher", daemon=True)

    @property
    def publisher(self):
        return self._pub

    def start(self) -> None:
        self._thread.start()
        self._started.wait(5.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        from sensor_msgs.msg import JointState

        self.tid = threading.get_native_id()
        self._started.set()
        msg = JointState()
        msg.name = self._names[::-1]
        msg.header.frame_id = "bench"
        zeros = array.array("d", [0.0] * len(self._names))
        msg.velocity = zeros
        period_ns = 1e9 / self._rate
        t0 = time.monotonic_ns()
        send_ns = self.send_ns
        for k, row in enumerate(self._rows):
            if self._stop.is_set():
                break
            if k == self._mark:
                self.at_mark = (self._cpu_probe(), time.thread_time(), time.monotonic())
            wait = t0 + int(k * period_ns) - time.monotonic_ns()
            if wait > 0:
                time.sleep(wait * 1e-9)
            now = time.time_ns()
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 1_000_000_000)
            msg.position = row
            self._pub.publish(msg)
            send_ns[k] = now
            self.count = k + 1
        self.at_end = (self._cpu_probe(), time.thread_time(), time.monotonic())


def make_receiver(context, topic: str = COMMAND_TOPIC):
    """A node that records ``(time.time_ns(), serialized message)`` of every command, nothing else in the
    callback: it subscribes ``raw=True`` and the commands are deserialized after the window
    (:meth:`Receiver.commands`), so its cost per message is the same whichever node is measured (the
    gravity node's command carries a ``layout`` labelled with the joint names, the relay's none; turning
    that into Python objects in the window would be charged to the node in-process)."""
    from rclpy.node import Node
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Float64MultiArray

    class Receiver(Node):
        def __init__(self):
            super().__init__("bench_receiver", context=context)
            self.arrival_ns: list[int] = []
            self.data: list[bytes] = []
            self.sub = self.create_subscription(Float64MultiArray, topic, self._on_command,
                                                max(1000, qos_depth()), raw=True)

        def _on_command(self, raw: bytes):
            self.arrival_ns.append(time.time_ns())
            self.data.append(raw)

        def commands(self, n: int, width: int) -> np.ndarray:
            """``(n, width)`` the ``data`` of the first ``n`` commands received; a command of another
            length (the relay's answer to a flood message with more names) is a row of NaN (unmatched)."""
            out = np.full((n, width), np.nan)
            for i, b in enumerate(self.data[:n]):
                row = deserialize_message(b, Float64MultiArray).data
                if len(row) == width:
                    out[i] = row
            return out

    return Receiver()


# -------------------------------------------------------------------------------------------- the analysis
def match_outputs(outputs: np.ndarray, expected: np.ndarray, *, back: int = 64, forward: int = 2048,
                  tol: float = MATCH_TOL) -> tuple[np.ndarray, np.ndarray]:
    """Sequence number of the expected row each output equals, searching a window around the last match.

    Returns ``(seq, err)``: ``seq[i]`` is the matched row (-1 if no row is within ``tol``, max-norm) and
    ``err[i]`` the max-norm distance to the nearest row found. The first output and any output after a
    failed match are searched against all rows.
    """
    m = len(outputs)
    seq = np.full(m, -1, dtype=np.int64)
    err = np.full(m, np.inf)
    ptr = None
    for i in range(m):
        out = outputs[i]
        if not np.all(np.isfinite(out)):
            continue
        lo, hi = (0, len(expected)) if ptr is None else (max(0, ptr - back), min(len(expected), ptr + forward))
        d = np.abs(expected[lo:hi] - out).max(axis=1)
        k = int(np.argmin(d))
        if d[k] > tol and ptr is not None:  # out of the window: search everywhere
            lo, hi = 0, len(expected)
            d = np.abs(expected - out).max(axis=1)
            k = int(np.argmin(d))
        err[i] = d[k]
        if d[k] <= tol:
            seq[i] = lo + k
            ptr = lo + k + 1
    return seq, err


def window_latencies_us(send_ns: np.ndarray, window: tuple[int, int], arrival_ns: np.ndarray,
                        seq: np.ndarray) -> np.ndarray:
    """Latencies (µs, float64, in arrival order) of the first command answering each message in ``window``.

    ``window = (first, last)``: message indices [first, last) are measured; ``seq`` from
    :func:`match_outputs`, ``send_ns``/``arrival_ns`` in ns of the same clock (``time.time_ns()``).
    Only a message's first answer is its latency: a repeat of the same command (the gravity node's hold
    command when the input goes stale repeats g(q) of the last state) is counted as a ``duplicate`` by
    :func:`summarize`, not timed from a message sent long before.
    """
    first, last = window
    in_window = np.flatnonzero((seq >= first) & (seq < last))
    _, first_idx = np.unique(seq[in_window], return_index=True)
    keep = np.sort(in_window[first_idx])
    return (arrival_ns[keep] - send_ns[seq[keep]]) / 1e3


def latency_stats(lat_us: np.ndarray) -> dict:
    """p50/p99/p999 (numpy's linear-interpolation percentiles), max, mean and min of latencies (µs),
    rounded to 0.1 µs; all ``None`` for an empty array."""
    lat_us = np.asarray(lat_us, dtype=float)
    if not lat_us.size:
        return {k: None for k in ("p50_us", "p99_us", "p999_us", "max_us", "mean_us", "min_us")}
    p50, p99, p999 = np.percentile(lat_us, [50, 99, 99.9])
    return {"p50_us": round(float(p50), 1), "p99_us": round(float(p99), 1),
            "p999_us": round(float(p999), 1), "max_us": round(float(lat_us.max()), 1),
            "mean_us": round(float(lat_us.mean()), 1), "min_us": round(float(lat_us.min()), 1)}


def summarize(send_ns: np.ndarray, window: tuple[int, int], arrival_ns: np.ndarray, seq: np.ndarray,
              err: np.ndarray) -> dict:
    """Latency percentiles (µs), dropped/unmatched/duplicate counts and output rate for seqs in ``window``."""
    first, last = window  # message indices [first, last) are measured
    in_window = (seq >= first) & (seq < last)
    seq_w = seq[in_window]
    lat_us = window_latencies_us(send_ns, window, arrival_ns, seq)
    answered = np.unique(seq_w)
    sent = last - first
    span_s = _send_span_s(send_ns, window)
    sent_rate = (sent - 1) / span_s if sent > 1 else 0.0
    stats = latency_stats(lat_us)
    matched_err = err[in_window]
    return {
        **stats,
        "sent": int(sent),
        "received": int(in_window.sum()),
        "dropped": int(sent - answered.size),
        "duplicates": int(seq_w.size - answered.size),
        "unmatched": int((seq < 0).sum()),
        "sent_rate_hz": round(sent_rate, 1),
        # commands answered per second of sending: equals sent_rate_hz when nothing is dropped
        "sustained_rate_hz": round(sent_rate * answered.size / sent, 1) if sent > 1 else 0.0,
        "max_output_error": float(matched_err.max()) if matched_err.size else None,
    }


def _send_span_s(send_ns: np.ndarray, window: tuple[int, int]) -> float:
    """Time (s) from the first to the last message sent in ``window`` (1e-9 for fewer than 2 messages)."""
    first, last = window
    return max((send_ns[last - 1] - send_ns[first]) / 1e9, 1e-9) if last - first > 1 else 1e-9


# --------------------------------------------------------------------------------------------- a scenario
@dataclass
class Scenario:
    """One measurement: which node, executor, process topology, rate, duration and background load."""

    node: str = "relay"
    executor: str = "events"
    topology: str = "inproc"
    rate_hz: float = 1000.0
    duration_s: float = 10.0
    warmup_s: float = 1.0
    #: None, "retiming" (service in the node-under-test's process, same executor) or "retiming-sep"
    #: (service in its own process); both with back-to-back 100-waypoint requests from a client process
    load: str | None = None
    #: messages per second of the ``flood`` load
    flood_rate_hz: float = 5000.0
    #: header stamps of the flood's messages (:data:`FLOOD_STAMPS`)
    flood_stamp: str = "none"
    label: str = ""

    @property
    def name(self) -> str:
        base = f"{self.node}-{self.topology}-{self.executor}"
        if self.rate_hz != 1000.0:
            base += f"-{int(self.rate_hz)}hz"
        if self.load:
            base += f"-{self.load}"
        return self.label or base


@dataclass
class RawWindow:
    """The raw measurement of one window, kept in memory to pool blocks (never written to JSON).

    ``latency_us``: per-command latencies (µs) of the window (:func:`window_latencies_us`); ``cpu_s``: CPU
    time (s) of the node under test over the window; ``wall_s``: wall time (s) of the window;
    ``send_span_s``: first to last message sent in the window (s).
    """

    latency_us: np.ndarray
    cpu_s: float
    wall_s: float
    send_span_s: float


@dataclass
class ScenarioResult:
    name: str
    scenario: dict
    stats: dict = field(default_factory=dict)
    cpu_percent: float | None = None
    cpu_ms_per_1000_msgs: float | None = None
    extra: dict = field(default_factory=dict)
    #: raw latencies and CPU/wall time of the window (for pooling blocks); not part of :meth:`as_dict`
    raw: RawWindow | None = None

    def as_dict(self) -> dict:
        return {"name": self.name, **self.scenario, **self.stats, "cpu_percent": self.cpu_percent,
                "cpu_ms_per_1000_msgs": self.cpu_ms_per_1000_msgs, **self.extra}


def _pool_load_stats(stats: list[dict]) -> dict:
    """Load statistics of several blocks as one: counts summed, means weighted by the answered
    requests, maxima maxed (the flood's: messages summed, rate averaged); the per-block dicts under
    ``per_block``."""
    if len(stats) == 1:
        return stats[0]
    if "flood_sent" in stats[0]:
        rates = [s["flood_rate_hz"] for s in stats if "flood_rate_hz" in s]
        return {"flood_sent": sum(int(s.get("flood_sent", 0)) for s in stats),
                "flood_rate_hz": round(float(np.mean(rates)), 1) if rates else None, "per_block": stats}
    out: dict = {"service_process": stats[0].get("service_process")}
    for key in ("requests", "answered", "success"):
        out[key] = sum(int(s.get(key, 0)) for s in stats)
    for key in ("rtt_ms_mean", "solve_ms_mean"):
        pairs = [(s[key], s.get("answered", 0)) for s in stats
                 if s.get(key) is not None and np.isfinite(s[key]) and s.get("answered")]
        w = sum(n for _, n in pairs)
        out[key] = round(sum(v * n for v, n in pairs) / w, 2) if w else None
    maxima = [s["rtt_ms_max"] for s in stats if s.get("rtt_ms_max") is not None and np.isfinite(s["rtt_ms_max"])]
    out["rtt_ms_max"] = max(maxima) if maxima else None
    out["errors"] = [e for s in stats for e in s.get("errors", []) + ([s["error"]] if "error" in s else [])][:3]
    out["per_block"] = stats
    return out


def pool_blocks(blocks: list[ScenarioResult]) -> ScenarioResult:
    """One result for a scenario measured in several blocks (windows) of the same run.

    Latency statistics over the concatenation of the blocks' per-message latencies (so the pooled p99 is
    ``numpy.percentile`` of all latencies, not a mean of block p99s); ``sent``/``received``/``dropped``/
    ``duplicates``/``unmatched`` summed; ``max_output_error`` the largest; ``sent_rate_hz`` = Σ(sent - 1) /
    Σ send span, ``sustained_rate_hz`` = sent rate × answered / sent; ``cpu_percent`` and
    ``cpu_ms_per_1000_msgs`` from the summed CPU time and wall time; ``duration_s`` = the total measured
    window (s). Adds ``blocks``: per block ``p50_us``, ``p99_us``, ``dropped``, ``sent``, ``max_us``, ``cpu_ms_per_1000_msgs``. A single block
    gives the same statistics as the block itself.

    Raises:
        ValueError: no blocks, a block without ``raw`` data, or blocks of different scenarios.
    """
    if not blocks:
        raise ValueError("blocks: none to pool")
    missing = [i for i, b in enumerate(blocks) if b.raw is None]
    if missing:
        raise ValueError(f"blocks {missing}: no raw latencies to pool")
    names = {b.name for b in blocks}
    if len(names) != 1:
        raise ValueError(f"blocks of different scenarios cannot be pooled: {sorted(names)}")
    lat = np.concatenate([b.raw.latency_us for b in blocks])
    sums = {k: sum(int(b.stats[k]) for b in blocks)
            for k in ("sent", "received", "dropped", "duplicates", "unmatched")}
    span = sum(b.raw.send_span_s for b in blocks)
    sent_minus_one = sum(max(int(b.stats["sent"]) - 1, 0) for b in blocks)
    sent_rate = sent_minus_one / span if sent_minus_one else 0.0
    errs = [b.stats["max_output_error"] for b in blocks if b.stats.get("max_output_error") is not None]
    stats = {
        **latency_stats(lat),
        **sums,
        "sent_rate_hz": round(sent_rate, 1),
        "sustained_rate_hz": round(sent_rate * (sums["sent"] - sums["dropped"]) / sums["sent"], 1)
        if sent_minus_one else 0.0,
        "max_output_error": max(errs) if errs else None,
    }
    cpu = sum(b.raw.cpu_s for b in blocks)
    wall = sum(b.raw.wall_s for b in blocks)
    scenario = dict(blocks[0].scenario)
    scenario["duration_s"] = round(sum(float(b.scenario["duration_s"]) for b in blocks), 6)
    extra = {k: v for k, v in blocks[0].extra.items() if k not in ("load_stats", "rss_mb")}
    loads = [b.extra["load_stats"] for b in blocks if "load_stats" in b.extra]
    if loads:
        extra["load_stats"] = _pool_load_stats(loads)
    extra["blocks"] = [{"p50_us": b.stats["p50_us"], "p99_us": b.stats["p99_us"], "dropped": b.stats["dropped"],
                        "sent": b.stats["sent"], "max_us": b.stats.get("max_us"),
                        "cpu_ms_per_1000_msgs": round(b.raw.cpu_s * 1e6 / max(int(b.stats["received"]), 1), 1),
                        **({"rss_mb": b.extra["rss_mb"]} if "rss_mb" in b.extra else {})}
                       for b in blocks]
    result = ScenarioResult(blocks[0].name, scenario, stats, extra=extra,
                            raw=RawWindow(lat, cpu, wall, span))
    result.cpu_percent = round(100.0 * cpu / wall, 1) if wall > 0 else None
    result.cpu_ms_per_1000_msgs = round(cpu * 1e6 / max(sums["received"], 1), 1)
    return result


def interleaved_rounds(n_scenarios: int, blocks: int) -> list[list[int]]:
    """The order in which ``n_scenarios`` compared scenarios run their ``blocks`` blocks: round r runs all
    of them, forwards in even rounds and backwards in odd ones (AB BA AB ..., ABCD DCBA ABCD ...), so a
    drift of the machine's speed over the run affects every scenario alike.

    Raises:
        ValueError: ``blocks`` < 1 or ``n_scenarios`` < 0.
    """
    if blocks < 1:
        raise ValueError(f"blocks {blocks}: must be >= 1")
    if n_scenarios < 0:
        raise ValueError(f"n_scenarios {n_scenarios}: must be >= 0")
    forward = list(range(n_scenarios))
    return [forward if r % 2 == 0 else forward[::-1] for r in range(blocks)]


def _wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    t_end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > t_end:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)


#: background loads of the two-process scenarios: back-to-back retiming requests (service in the node's process
#: or its own), or a flood of hostile-name joint states on the node's input topic (:class:`FloodLoad`)
LOADS = (None, "retiming", "retiming-sep", "flood")


def _child_command(sc: Scenario) -> list[str]:
    cmd = [sys.executable, "-m", "robot_dynamics_testing.latency", "serve",
           "--node", sc.node, "--executor", sc.executor]
    return cmd + (["--with-retiming"] if sc.load == "retiming" else [])


def _publisher_command(sc: Scenario, count: int, mark: int, out: str) -> list[str]:
    return [sys.executable, "-m", "robot_dynamics_testing.latency", "publish",
            "--rate", repr(float(sc.rate_hz)), "--count", str(count), "--mark", str(mark), "--out", out]


def run_scenario(sc: Scenario, robot: ProbeRobot | None = None) -> ScenarioResult:
    """Run one scenario over real DDS and return its statistics (see the module docstring).

    With ``sc.load`` set, back-to-back retiming requests (:mod:`robot_dynamics_testing.retiming_load`) or
    the hostile-name flood (:class:`FloodLoad`) run during the whole run; only across two processes. Across
    two processes the node's RSS (MB) at the start and the end of the run is reported (``rss_mb``).
    """
    import rclpy

    if sc.load not in LOADS:
        raise ValueError(f"load '{sc.load}': not one of {LOADS}")
    if sc.load and sc.topology != "twoproc":
        raise ValueError("the retiming load scenarios run across two processes (topology 'twoproc')")

    robot = robot or ProbeRobot.panda()
    n_warm = int(round(sc.warmup_s * sc.rate_hz))
    n_meas = int(round(sc.duration_s * sc.rate_hz))
    positions = probe_positions(robot, n_warm + n_meas)
    expected = positions[:, ::-1] if sc.node == "relay" else expected_gravity(robot, positions)

    ctx = rclpy.Context()
    rclpy.init(context=ctx, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    child = None
    pub_proc = None
    nodes = []
    spinner = None
    load = None
    send_file = None
    try:
        executor = make_executor(sc.executor, ctx)
        if sc.topology == "inproc":
            nut = make_node_under_test(sc.node, ctx, robot)
            nodes.append(nut)
            executor.add_node(nut)
        else:
            child = subprocess.Popen(_child_command(sc), stdout=subprocess.PIPE, text=True,
                                     env=child_env())
            line = child.stdout.readline()
            if not line.startswith("READY"):
                raise RuntimeError(f"node-under-test process did not start (said {line!r}, "
                                   f"exit {child.poll()})")
        receiver = make_receiver(ctx)
        nodes.append(receiver)
        executor.add_node(receiver)
        if child is not None:
            pid = child.pid

            def cpu_probe() -> float:
                return cpu_seconds(pid)
        else:
            cpu_probe = cpu_seconds  # this process: node under test + receiver + DDS threads
        spinner = _Spinner(executor, ctx)
        spinner.start()
        # the joint-state publisher runs in a process of its own: in this process its thread would share
        # the GIL with the executor thread that runs the node's and the receiver's callbacks
        import tempfile

        fd, send_file = tempfile.mkstemp(prefix="bench_send_", suffix=".npy")
        os.close(fd)
        pub_proc = subprocess.Popen(_publisher_command(sc, n_warm + n_meas, n_warm, send_file),
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                    env=child_env())
        line = pub_proc.stdout.readline()
        if not line.startswith("READY"):
            raise RuntimeError(f"publisher process did not start (said {line!r}, exit {pub_proc.poll()})")
        _wait_for(lambda: receiver.count_publishers(COMMAND_TOPIC) >= 1, 20.0, "DDS discovery")
        time.sleep(0.2)
        rss_start = rss_mb(child.pid) if child is not None else None
        if sc.load == "flood":
            load = FloodLoad(sc.flood_rate_hz, sc.flood_stamp)
            load.start()
        elif sc.load:
            from robot_dynamics_testing.retiming_load import make_retiming_load

            load = make_retiming_load(separate=sc.load == "retiming-sep")
            load.start()
        pub_proc.stdin.write("GO\n")
        pub_proc.stdin.flush()
        marks = []  # (cpu of the node under test, time.monotonic()) when message n_warm is due, at the end
        t_limit = time.monotonic() + sc.warmup_s + sc.duration_s + 30.0
        while len(marks) < 2 and time.monotonic() < t_limit:
            line = pub_proc.stdout.readline()
            if not line:
                break
            if line.startswith("TICK"):
                marks.append((cpu_probe(), time.monotonic()))
        if len(marks) < 2 or pub_proc.wait(timeout=30.0) != 0:
            raise RuntimeError("the publisher process did not finish its messages")
        pub_proc = None
        pub = np.load(send_file)
        send_ns, count = pub["send_ns"], int(pub["count"])
        (p0, t0), (p1, t1) = marks
        wall = t1 - t0
        cpu = p1 - p0
        time.sleep(0.3)  # stragglers
        rss_end = rss_mb(child.pid) if child is not None else None
        load_info = load.stop() if load is not None else {}
        load = None
        spinner.stop()
        spinner = None
        arrival = np.array(receiver.arrival_ns, dtype=np.int64)
        n_out = len(receiver.data)
        outputs = receiver.commands(n_out, expected.shape[1])
        arrival = arrival[:n_out]
        if n_out and not np.isfinite(outputs).all(axis=1).any():
            raise RuntimeError(f"node '{sc.node}' published no command of {expected.shape[1]} values")
        seq, err = match_outputs(outputs, expected)
        stats = summarize(send_ns, (n_warm, count), arrival, seq, err)
        raw = RawWindow(window_latencies_us(send_ns, (n_warm, count), arrival, seq), cpu, wall,
                        _send_span_s(send_ns, (n_warm, count)))
        result = ScenarioResult(sc.name, {k: v for k, v in asdict(sc).items() if k != "label"}, stats, raw=raw)
        result.cpu_percent = round(100.0 * cpu / wall, 1)
        result.cpu_ms_per_1000_msgs = round(cpu * 1e6 / max(stats["received"], 1), 1)
        result.extra["cpu_measured_as"] = ("child process (all threads)" if child else
                                           "measuring process (node + receiver + DDS threads; the "
                                           "publisher runs in its own process)")
        if load_info:
            result.extra["load_stats"] = load_info
        if rss_start is not None:
            result.extra["rss_mb"] = {"start": round(rss_start, 1), "end": round(rss_end, 1)}
        return result
    finally:
        if load is not None:
            load.stop()
        if spinner is not None:
            spinner.stop()
        if pub_proc is not None:
            _stop_child(pub_proc)
        if child is not None:
            _stop_child(child)
        if send_file is not None and os.path.exists(send_file):
            os.unlink(send_file)
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown(context=ctx)


#: header stamps of the flood's messages. "none" (0, not stamped): the node takes every flood message through
#: its whole path (names, gates, g(q), a command) and the flood does not interact with the good states' order,
#: so what is compared with the relay is the work a hostile-name message costs. "now" (stamped when sent, by
#: another process's clock): a good state sent just before a flood message but arriving after it is older
#: than a state already received and the node refuses it (the out-of-order gate), which a relay cannot do.
#: Measured on a quiet machine: 87 % of the good states answered with "now" against 100 % with "none" or
#: with the flood stamped 200 ms in the past, the relay 100 % in each: the difference is those refusals.
FLOOD_STAMPS = ("none", "now")


class FloodLoad:
    """The ``flood`` load: a process (``python -m robot_dynamics_testing.latency flood``) publishing
    ``sensor_msgs/JointState`` on the node's input topic at up to ``rate_hz``: the 7 Panda joints at a
    plausible pose (``attack.Q_MARK``, whose command matches no probe pose) plus 50 unknown names, new ones
    every message (``attack.hostile_fields("names_changing")``, the attack benchmark's hostile-name flood),
    stamped as ``stamp`` says (:data:`FLOOD_STAMPS`). start() returns once a subscriber is matched; stop() ->
    ``{"flood_sent", "flood_rate_hz"}``."""

    def __init__(self, rate_hz: float, stamp: str = "none"):
        if stamp not in FLOOD_STAMPS:
            raise ValueError(f"flood stamp '{stamp}': not one of {FLOOD_STAMPS}")
        self.rate_hz = float(rate_hz)
        self.stamp = stamp
        self._proc: subprocess.Popen | None = None

    def start(self) -> None:
        self._proc = subprocess.Popen([sys.executable, "-m", "robot_dynamics_testing.latency", "flood",
                                       "--rate", repr(self.rate_hz), "--stamp", self.stamp],
                                      stdout=subprocess.PIPE, text=True, env=child_env())
        line = self._proc.stdout.readline()
        if not line.startswith("READY"):
            self._proc.kill()
            raise RuntimeError(f"flood process did not start (said {line.strip()!r})")

    def stop(self) -> dict:
        proc, self._proc = self._proc, None
        if proc is None:
            return {}
        _stop_child(proc)
        lines = [ln for ln in (proc.stdout.read() or "").splitlines() if ln.startswith("{")]
        return json.loads(lines[-1]) if lines else {"error": "no statistics from the flood process"}


def flood(rate_hz: float, stamp: str = "none") -> int:
    """The flood process of :class:`FloodLoad`: publishes until SIGINT, then prints one JSON line."""
    import rclpy
    from rclpy.node import Node
    from sensor_msgs.msg import JointState

    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    ctx = rclpy.Context()
    rclpy.init(context=ctx, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    node = Node("bench_flood", context=ctx)
    pub = node.create_publisher(JointState, JOINT_STATES_TOPIC, qos_depth())
    sent, t0 = 0, time.monotonic()
    try:
        _wait_for(lambda: pub.get_subscription_count() >= 1, 20.0, "DDS discovery")
        print("READY", flush=True)
        t0 = next_t = time.monotonic()
        msg = JointState()
        while not stop.is_set():
            f = hostile_fields("names_changing", sent)
            msg.name, msg.position, msg.velocity = f["names"], f["position"], f["velocity"]
            if stamp == "now":
                msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(time.time_ns(), 1_000_000_000)
            pub.publish(msg)
            sent += 1
            next_t += 1.0 / rate_hz
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_t = time.monotonic()   # behind: as fast as it goes, no catch-up burst
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    elapsed = max(time.monotonic() - t0, 1e-9)
    print(json.dumps({"flood_sent": sent, "flood_rate_hz": round(sent / elapsed, 1)}), flush=True)
    return 0


def _stop_child(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=5.0)


# ---------------------------------------------------------------------------------------------- the suite
@dataclass
class SuiteConfig:
    """What ``benchmarks/bench_latency.py`` runs (see :func:`run_suite`)."""

    duration_s: float = 60.0
    rate_hz: float = 1000.0
    executors: tuple[str, ...] = EXECUTOR_KINDS
    nodes: tuple[str, ...] = NODE_KINDS
    topologies: tuple[str, ...] = TOPOLOGIES
    compare_duration_s: float | None = None  # executor comparison; None = duration_s
    sweep: bool = True  # maximum sustainable rate
    sweep_duration_s: float = 3.0
    sweep_rates_hz: tuple[float, ...] = (1000, 2000, 3000, 4000, 6000, 8000, 10000)
    retiming_load: bool = True
    #: relay and gravity node across two processes beside the hostile-name flood (:class:`FloodLoad`) at
    #: ``flood_rate_hz``, in the same rotation as the unloaded ones
    flood: bool = False
    flood_rate_hz: float = 5000.0
    flood_stamp: str = "none"
    warmup_s: float = 1.0
    #: SCHED_FIFO priority (1..99) for the measuring process and the node under test, None = normal
    #: scheduling; the retiming load processes always run at normal priority
    rt_priority: int | None = None
    #: keep-last depth of the joint_states and command endpoints of publisher, relay and gravity node (the
    #: same for both nodes; 100 = the gravity node's default)
    qos_depth: int = 100
    #: interleaved blocks per compared group (>= 1; 1 = each scenario in one window, one after the other)
    blocks: int = 6


def _ratio(p99: float | None, ref: float | None) -> float | None:
    if p99 is None or not ref:
        return None
    return round(p99 / ref, 3)


def _pick_executor(results: list[dict], executors: tuple[str, ...], node: str) -> str:
    """The executor with the lowest p99 for ``node`` in-process, among those with the lowest drop rate
    (rounded to 1 %)."""
    best, best_key = executors[0], None
    for r in results:
        if r.get("node") != node or r.get("topology") != "inproc" or r.get("load") or "error" in r \
                or r.get("rate_hz") is None or r.get("p99_us") is None:
            continue
        key = (round(r["dropped"] / max(r["sent"], 1), 2), r["p99_us"])  # drop rate (1 %) first
        if best_key is None or key < best_key:
            best, best_key = r["executor"], key
    return best


def run_suite(cfg: SuiteConfig, *, progress: Callable[[dict], None] = lambda r: None) -> dict:
    """Run the scenarios of ``cfg`` and return the result document (``machine``, ``config``,
    ``scenarios``, ``recommended_executor``, ``max_sustained_rate_hz``, ``targets``).

    1. executor comparison, in-process, relay and gravity node alternately, each executor;
    2. with the recommended executor (lowest gravity-node drop rate, then p99): both nodes in-process
       (``-main``, when the comparison used a shorter window) and across two processes;
    3. (``cfg.retiming_load``) the gravity node across two processes while back-to-back 100-waypoint
       retiming requests run: service in the node's process (added to the same executor; it serves from
       its own worker thread by default) and service in its own process;
    4. maximum sustainable rate: the rate ramp of ``cfg.sweep_rates_hz`` until a step drops more than
       :data:`SWEEP_MAX_DROP_FRACTION` of its messages or the publisher cannot keep the rate.

    Interleaved blocks: scenarios compared with each other run round-robin in ``cfg.blocks`` blocks of
    ``duration_s / blocks`` (each with its own warm-up and fresh processes), in the order of
    :func:`interleaved_rounds` (AB BA ..., ABCD DCBA ...), so that the VM's speed changing over minutes
    affects all of them alike. The groups: in-process relay + gravity on the recommended executor (the
    ``-main`` pair, or each executor's comparison pair when ``compare_duration_s`` equals ``duration_s``);
    across two processes relay + gravity + gravity with each retiming load. The short-window executor
    comparison and the rate ramp run one block each. A scenario's result pools its blocks
    (:func:`pool_blocks`) and lists them under ``blocks``; block results are also passed to ``progress``
    (with a ``block`` key "i/N") when there is more than one.

    ``p99_ratio_vs_relay`` is the pooled p99 over the pooled p99 of the relay with the same executor,
    topology, rate and duration without load; for the load scenarios, of the relay across two processes on
    the recommended executor (``relay_reference`` names it). With equal block counts also
    ``p99_ratio_per_block`` (each block over the relay's block of the same round) and
    ``p99_ratio_median_of_blocks``.

    Raises:
        ValueError: ``cfg.blocks`` < 1.
    """
    if int(cfg.blocks) != cfg.blocks or cfg.blocks < 1:
        raise ValueError(f"blocks {cfg.blocks}: must be an integer >= 1")
    robot = ProbeRobot.panda()
    results: list[dict] = []
    load_at_start = round(os.getloadavg()[0], 2)
    os.environ[QOS_ENV] = str(int(cfg.qos_depth))  # children (publisher, node under test) read it
    if cfg.rt_priority:
        set_realtime_priority(cfg.rt_priority)
        os.environ[RT_ENV] = str(cfg.rt_priority)  # the node-under-test child applies it too
    else:
        os.environ.pop(RT_ENV, None)

    def failure(sc: Scenario, exc: Exception, where: str = "") -> dict:
        return {"name": sc.name, **{k: v for k, v in asdict(sc).items() if k != "label"},
                "error": f"{where}{type(exc).__name__}: {exc}"}

    def run_group(scenarios: list[Scenario], blocks: int) -> list[dict]:
        """Run ``scenarios`` interleaved in ``blocks`` blocks; append their pooled results."""
        per_block: list[list[ScenarioResult]] = [[] for _ in scenarios]
        failed: dict[int, dict] = {}
        for rnd, order in enumerate(interleaved_rounds(len(scenarios), blocks)):
            for i in order:
                if i in failed:  # one failing block ends its scenario; the others go on
                    continue
                sc = scenarios[i]
                block_sc = replace(sc, duration_s=sc.duration_s / blocks)
                try:
                    res = run_scenario(block_sc, robot)
                except Exception as exc:  # noqa: BLE001 - one failing scenario must not hide the others
                    failed[i] = failure(sc, exc, f"block {rnd + 1}/{blocks}: " if blocks > 1 else "")
                    continue
                per_block[i].append(res)
                if blocks > 1:
                    progress({**res.as_dict(), "block": f"{rnd + 1}/{blocks}"})
        out = []
        for i, sc in enumerate(scenarios):
            r = failed.get(i) or pool_blocks(per_block[i]).as_dict()
            results.append(r)
            progress(r)
            out.append(r)
        return out

    compare_s = cfg.compare_duration_s or cfg.duration_s
    compare_blocks = cfg.blocks if compare_s == cfg.duration_s else 1
    for ex in cfg.executors:
        run_group([Scenario(node=node, executor=ex, topology="inproc", rate_hz=cfg.rate_hz,
                            duration_s=compare_s, warmup_s=cfg.warmup_s) for node in cfg.nodes], compare_blocks)
    best = _pick_executor(results, cfg.executors, "gravity" if "gravity" in cfg.nodes else cfg.nodes[0])
    if compare_s != cfg.duration_s and "inproc" in cfg.topologies:
        run_group([Scenario(node=node, executor=best, topology="inproc", rate_hz=cfg.rate_hz,
                            duration_s=cfg.duration_s, warmup_s=cfg.warmup_s,
                            label=f"{node}-inproc-{best}-main") for node in cfg.nodes], cfg.blocks)
    twoproc: list[Scenario] = []
    if "twoproc" in cfg.topologies:
        twoproc += [Scenario(node=node, executor=best, topology="twoproc", rate_hz=cfg.rate_hz,
                             duration_s=cfg.duration_s, warmup_s=cfg.warmup_s) for node in cfg.nodes]
    if cfg.retiming_load and "gravity" in cfg.nodes:
        # compared with the two-process relay: in the same rotation
        twoproc += [Scenario(node="gravity", executor=best, topology="twoproc", rate_hz=cfg.rate_hz,
                             duration_s=cfg.duration_s, warmup_s=cfg.warmup_s, load=load)
                    for load in ("retiming", "retiming-sep")]
    if cfg.flood:
        twoproc += [Scenario(node=node, executor=best, topology="twoproc", rate_hz=cfg.rate_hz,
                             duration_s=cfg.duration_s, warmup_s=cfg.warmup_s, load="flood",
                             flood_rate_hz=cfg.flood_rate_hz, flood_stamp=cfg.flood_stamp) for node in cfg.nodes]
    if twoproc:
        run_group(twoproc, cfg.blocks)
    max_rate: dict[str, float | None] = {}
    if cfg.sweep:
        for node in cfg.nodes:
            max_rate[node] = None
            for rate in cfg.sweep_rates_hz:
                (r,) = run_group([Scenario(node=node, executor=best, topology="inproc", rate_hz=float(rate),
                                           duration_s=cfg.sweep_duration_s, warmup_s=0.5,
                                           label=f"{node}-inproc-{best}-sweep-{int(rate)}hz")], 1)
                r["sweep"] = True
                # sustained (a throughput criterion, robust to a shared machine's scheduling noise): at
                # least 99 % of the messages answered, and the publisher itself kept the rate (else the
                # step measures the publisher, not the node)
                ok = "error" not in r and r["dropped"] <= SWEEP_MAX_DROP_FRACTION * r["sent"] \
                    and r["p99_us"] is not None and r["sent_rate_hz"] >= 0.98 * rate
                if not ok:
                    break
                max_rate[node] = float(rate)

    # p99 relative to the relay under the same conditions (same executor, topology, rate, duration; no load)
    for r in results:
        if "error" in r:
            continue
        ex = best if r.get("load") else r["executor"]
        refs = [x for x in results if x.get("node") == "relay" and "error" not in x and not x.get("load")
                and x["executor"] == ex and x["topology"] == r["topology"]
                and x["rate_hz"] == r["rate_hz"] and x.get("sweep") == r.get("sweep")
                and x["duration_s"] == r["duration_s"]]
        ref = refs[-1] if refs else None
        r["p99_ratio_vs_relay"] = _ratio(r["p99_us"], ref["p99_us"]) if ref else None
        r["relay_reference"] = ref["name"] if ref else None
        r["p99_ratio_per_block"], r["p99_ratio_median_of_blocks"] = block_ratios(r, ref)

    machine = machine_description()
    machine["loadavg_1min_at_end"] = machine.pop("loadavg_1min_at_start")
    machine["loadavg_1min_at_start"] = load_at_start
    return {
        "benchmark": "latency",
        "machine": machine,
        "config": asdict(cfg),
        "recommended_executor": best,
        "max_sustained_rate_hz": max_rate,
        "scenarios": results,
        "targets": evaluate_targets(results, best, cfg),
    }


def block_ratios(result: dict, ref: dict | None) -> tuple[list | None, float | None]:
    """Per-block p99 of ``result`` over the p99 of the reference's block of the same round, and the median
    of those ratios; ``(None, None)`` without a reference or when the block counts differ."""
    blocks, ref_blocks = result.get("blocks"), (ref or {}).get("blocks")
    if not blocks or not ref_blocks or len(blocks) != len(ref_blocks):
        return None, None
    ratios = [_ratio(b["p99_us"], rb["p99_us"]) for b, rb in zip(blocks, ref_blocks)]
    finite = [x for x in ratios if x is not None]
    return ratios, (round(float(np.median(finite)), 3) if finite else None)


def evaluate_targets(results: list[dict], best: str, cfg: SuiteConfig) -> dict:
    """The control-path targets on the main scenarios (recommended executor, cfg.rate_hz): in-process p99 and
    CPU per message against the bare relay of the same run, drops, the two-process and loaded p99s."""
    def find(node, topology, load=None):
        c = [r for r in results if r.get("node") == node and r.get("topology") == topology
             and r.get("executor") == best and r.get("load") == load and r.get("rate_hz") == cfg.rate_hz
             and not r.get("sweep") and "error" not in r]
        return max(c, key=lambda r: r["duration_s"]) if c else None

    out: dict = {}
    g_in, relay_in = find("gravity", "inproc"), find("relay", "inproc")
    if g_in and relay_in:
        out["inproc_p99_ratio_le_1.2"] = bool(g_in["p99_us"] <= 1.2 * relay_in["p99_us"])
        g_cpu, r_cpu = g_in.get("cpu_ms_per_1000_msgs"), relay_in.get("cpu_ms_per_1000_msgs")
        if g_cpu and r_cpu:
            out["inproc_cpu_ratio"] = round(g_cpu / r_cpu, 3)
            out["inproc_cpu_ratio_le_1.1"] = bool(g_cpu <= 1.1 * r_cpu)
        out["inproc_zero_dropped"] = bool(g_in["dropped"] == 0)
        out["inproc_duration_s"] = g_in["duration_s"]
    g_two = find("gravity", "twoproc")
    if g_two:
        out["twoproc_p99_lt_1ms"] = bool(g_two["p99_us"] < 1000.0)
        out["twoproc_zero_dropped"] = bool(g_two["dropped"] == 0)
    relay_two = find("relay", "twoproc")
    for load in ("retiming", "retiming-sep"):
        g_load = find("gravity", "twoproc", load)
        if g_load and relay_two:
            out[f"{load}_load_p99_le_2x_relay"] = bool(g_load["p99_us"] <= 2.0 * relay_two["p99_us"])
    g_flood, relay_flood = find("gravity", "twoproc", "flood"), find("relay", "twoproc", "flood")
    if g_flood and relay_flood:
        out.update(flood_target(g_flood, relay_flood))
    return out


#: the gravity node's share of answered good states beside the flood may be at most this much below the relay's
FLOOD_SHARE_MARGIN = 0.05


def answered_share(result: dict) -> float:
    """The share of the window's good states answered by a command (1 - dropped / sent)."""
    return 1.0 - result["dropped"] / max(result["sent"], 1)


def flood_target(gravity: dict, relay: dict) -> dict:
    """Issue 25's load target from the two flood scenarios of one run: the gravity node's share of answered
    good states beside the hostile-name flood within :data:`FLOOD_SHARE_MARGIN` of the bare relay's, and both
    node processes' RSS (MB, start and end of each block)."""
    g, r = answered_share(gravity), answered_share(relay)
    return {"flood_answered_share": {"gravity": round(g, 4), "relay": round(r, 4)},
            "flood_share_within_5pct_of_relay": bool(g >= r - FLOOD_SHARE_MARGIN),
            "flood_rss_mb": {"gravity": [b.get("rss_mb") for b in gravity.get("blocks") or [gravity]],
                             "relay": [b.get("rss_mb") for b in relay.get("blocks") or [relay]]}}


# ------------------------------------------------------------------------------------- child process entry
def serve(node_kind: str, executor_kind: str, with_retiming: bool = False) -> int:
    """Run one node under test with the given executor until SIGINT (the two-process scenarios' child);
    ``with_retiming``: the retiming service node on the same executor, in this process."""
    import rclpy

    if os.environ.get(RT_ENV):
        set_realtime_priority(int(os.environ[RT_ENV]))
    if os.environ.get(TRANSPORT_ENV, "node") == "node":
        os.environ.update(middleware_environment())   # as run_node does, before rclpy.init
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    nodes = [make_node_under_test(node_kind, ctx, ProbeRobot.panda())]
    if with_retiming:
        from robot_dynamics_testing.retiming_load import make_retiming_node

        nodes.append(make_retiming_node(ctx))
    executor = make_executor(executor_kind, ctx)
    for node in nodes:
        executor.add_node(node)
    print("READY", flush=True)
    try:
        spin_until_shutdown(executor, ctx)   # as the nodes' main(): EventsExecutor.spin() ignores SIGINT here
    finally:
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    return 0


def publish(rate_hz: float, count: int, mark: int, out: str) -> int:
    """The joint-state publisher process of a scenario: the probe poses of :func:`probe_positions` at
    ``rate_hz`` (see :class:`StampedPublisher`).

    Protocol on stdin/stdout: prints ``READY`` once a subscriber is matched, starts on a ``GO`` line,
    prints ``TICK`` when message ``mark`` is due and again after the last message (the parent samples the
    node's CPU time then), and saves ``send_ns`` (int64 ns, ``time.time_ns()`` stamped into each message,
    0 = not sent) and ``count`` to ``out`` (``numpy.savez``) before exiting 0.
    """
    import rclpy
    from rclpy.node import Node

    if os.environ.get(RT_ENV):
        set_realtime_priority(int(os.environ[RT_ENV]))
    robot = ProbeRobot.panda()
    positions = probe_positions(robot, count)
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = Node("bench_joint_state_publisher", context=ctx)

    def tick() -> float:
        print("TICK", flush=True)
        return 0.0

    try:
        publisher = StampedPublisher(node, JOINT_STATES_TOPIC, robot.joint_names, positions, rate_hz,
                                     mark=mark, cpu_probe=tick)
        _wait_for(lambda: publisher.publisher.get_subscription_count() >= 1, 20.0, "DDS discovery")
        print("READY", flush=True)
        if sys.stdin.readline().strip() != "GO":
            return 1
        publisher.start()
        publisher.join()
        with open(out, "wb") as f:
            np.savez(f, send_ns=publisher.send_ns, count=np.int64(publisher.count))
    except KeyboardInterrupt:
        return 1
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    return 0


def _main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="latency benchmark helper (child process)")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--node", choices=NODE_KINDS, required=True)
    s.add_argument("--executor", choices=EXECUTOR_KINDS, required=True)
    s.add_argument("--with-retiming", action="store_true")
    b = sub.add_parser("publish")
    b.add_argument("--rate", type=float, required=True)
    b.add_argument("--count", type=int, required=True)
    b.add_argument("--mark", type=int, required=True)
    b.add_argument("--out", required=True)
    f = sub.add_parser("flood")
    f.add_argument("--rate", type=float, required=True)
    f.add_argument("--stamp", choices=FLOOD_STAMPS, default="none")
    args = p.parse_args(argv)
    if args.cmd == "flood":
        return flood(args.rate, args.stamp)
    if args.cmd == "publish":
        return publish(args.rate, args.count, args.mark, args.out)
    return serve(args.node, args.executor, args.with_retiming)


if __name__ == "__main__":
    sys.exit(_main())
