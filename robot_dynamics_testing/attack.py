"""Attack harness of :mod:`benchmarks.bench_attack`: hostile inputs sent to the nodes from separate processes.

Processes (every one on the private ROS domain of the benchmark, localhost discovery):

* a *target*: ``python -m robot_dynamics_tools.cli run --params <generated yaml> --nodes ...`` — the nodes
  started exactly as ``robot-dynamics run`` starts them, in their own namespace (``__ns:=/<tag>``) with
  ``/diagnostics`` remapped to ``/<tag>/diagnostics`` so that several targets never mix. Its stderr (the
  nodes' log) goes to a file that the analysis reads (line lengths, error lines).
* a *publisher* (``python -m robot_dynamics_testing.attack publish PLAN.json``): joint states at 1 kHz following a
  plan of phases (one hostile kind each, mixed with good states), ``/clock`` when the plan says so, and
  descriptions on the target's description topic; prints one JSON line per phase (times, counts).
* a *client* (``python -m robot_dynamics_testing.attack clients ...``): retiming requests from N concurrent clients
  (threads with one service client each), every request waited for up to a grace period; prints one JSON line.
* this process: records the target's commands (``Float64MultiArray``) with the time the node published
  them (their DDS source timestamp on CLOCK_MONOTONIC, the clock of the publisher's phase times), the same
  for diagnostics, and samples the
  target's resident memory (``/proc/<pid>/status``, also of its child processes).

Every command is classified against g(q) from Pinocchio called directly on the URDF
(:func:`reference.expected_gravity`, never the package's dynamics): with the model joints at
:data:`Q_GOOD` and velocity zero, both the gravity node and the computed-torque node (held position = the
first measured q, so e = 0) must command exactly g(Q_GOOD). Hostile messages carry the other joints at
:data:`Q_MARK` (plausible, with a different g), so any command computed from a hostile message differs from
g(Q_GOOD) and is counted as *caused* by it.
"""
from __future__ import annotations

import json
import math
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_dynamics_testing import child_env
from robot_dynamics_testing.reference import ProbeRobot, expected_gravity, request_path
from robot_dynamics_testing.ros_world import SpinThread

PANDA = ProbeRobot.panda()
NAMES = list(PANDA.joint_names)
N = len(NAMES)
#: the good state (rad): the catalogue's demo pose, inside the limits
Q_GOOD = np.asarray(PANDA.base_pose, dtype=float)
#: the plausible pose of every joint of a hostile message but the attacked one (rad): g differs from Q_GOOD's
Q_MARK = Q_GOOD + np.array([0.0, -0.4, 0.0, 0.4, 0.0, -0.4, 0.0])
#: the good state after a clock jump (rad), distinguishable from Q_GOOD
Q_GOOD2 = Q_GOOD + np.array([0.0, 0.3, 0.0, 0.3, 0.0, 0.3, 0.0])
#: panda.urdf <limit upper=...> of panda_joint2 (rad), the attacked joint (its angle moves g)
J2_UPPER = 1.7628
ATTACKED = 1  # index of panda_joint2
#: tolerance of a command against the reference g(q), N·m: well above the engines' disagreement (~1e-13),
#: well below the difference between the reference poses' torques (> 1 N·m)
TOL = 1e-6
STATE_TIMEOUT = 0.1
FINGERS = {"panda_finger_joint1": 0.02, "panda_finger_joint2": 0.02}


def reference_commands() -> dict[str, np.ndarray]:
    """g(q) (N·m, (7,)) of the reference poses from Pinocchio directly."""
    g = expected_gravity(PANDA, np.vstack([Q_GOOD, Q_GOOD2, Q_MARK]))
    return {"good": g[0], "good2": g[1], "mark": g[2]}


# --------------------------------------------------------------------------- hostile kinds
@dataclass(frozen=True)
class Kind:
    """One hostile joint-state kind.

    ``must_reject``: a message of this kind must never produce a command (its target is 0 caused commands);
    otherwise the message is legal but hostile (its commands are counted, not judged). ``pattern``:
    ``mix`` (each 1 ms tick: one hostile, then one good state), ``every10`` (one hostile every 10 ticks, a good
    state every tick), ``single_then_silence`` (50 good ticks, one hostile, 50 ticks of silence),
    ``flood`` (hostile messages as fast as the publisher goes, one good state per ms).
    """

    name: str
    must_reject: bool
    pattern: str = "mix"
    what: str = ""


KINDS = {k.name: k for k in [
    Kind("good_only", False, what="good states only, 2 kHz (the baseline of every other row)"),
    Kind("pos_1e308", True, what="panda_joint2 position ±1e308 rad"),
    Kind("pos_1e300", True, what="panda_joint2 position 1e300 rad"),
    Kind("pos_100rad_out", True, what="panda_joint2 position 100 rad above its upper limit"),
    Kind("vel_1e308", True, what="panda_joint2 velocity 1e308 rad/s"),
    Kind("nan_inf", True, what="NaN / +Inf / -Inf position of panda_joint2 (rotating)"),
    # a NaN velocity is how some drivers say "not measured": gravity compensation does not need it (the
    # mapper's documented require_velocity=False), computed torque counts the joint as missing; reported
    Kind("nan_velocity", False, what="NaN velocity of panda_joint2"),
    Kind("wrong_length", True, what="position 6 entries for 7 names / velocity 3 / effort 2 (rotating)"),
    Kind("duplicate_names", True, what="panda_joint2 named twice (second value at the good pose)"),
    Kind("names_changing", False, what="the 7 joints + 50 unknown names, new names every message"),
    Kind("names_10000", False, "flood", what="the 7 joints + 9 993 unknown names, new every message"),
    Kind("future_stamp", False, "every10", what="stamp 0.9 x state_timeout in the future, every 10 ms"),
    Kind("single_100rad", True, "single_then_silence",
         what="one panda_joint2 reading 100 rad above the limit, then 50 ms without data"),
    Kind("rss_flood", False, "flood", what="names_changing as fast as possible (RSS over 100 000 messages)"),
]}


def hostile_fields(kind: str, k: int) -> dict:
    """The ``k``-th hostile message of ``kind``: dict(names, position, velocity, effort, stamp_offset_s)."""
    names = list(NAMES)
    q = Q_MARK.copy().tolist()
    qd = [0.0] * N
    effort: list[float] = []
    off = 0.0
    if kind == "good_only":
        q = Q_GOOD.tolist()
    elif kind == "pos_1e308":
        q[ATTACKED] = 1e308 if k % 2 == 0 else -1e308
    elif kind == "pos_1e300":
        q[ATTACKED] = 1e300
    elif kind in ("pos_100rad_out", "single_100rad"):
        q[ATTACKED] = J2_UPPER + 100.0
    elif kind == "vel_1e308":
        qd[ATTACKED] = 1e308
    elif kind == "nan_inf":
        q[ATTACKED] = (math.nan, math.inf, -math.inf)[k % 3]
    elif kind == "nan_velocity":
        qd[ATTACKED] = math.nan
    elif kind == "wrong_length":
        sub = k % 3
        if sub == 0:
            q = q[:6]
        elif sub == 1:
            qd = qd[:3]
        else:
            effort = [0.0, 0.0]
    elif kind == "duplicate_names":
        names.append(NAMES[ATTACKED])
        q.append(float(Q_GOOD[ATTACKED]))
        qd.append(0.0)
    elif kind in ("names_changing", "rss_flood"):
        names += [f"x{k}_{i}" for i in range(50)]
        q += [0.0] * 50
        qd += [0.0] * 50
    elif kind == "names_10000":
        extra = 10_000 - N
        names += [f"u{k}_{i}" for i in range(extra)]
        q += [0.0] * extra
        qd += [0.0] * extra
    elif kind == "future_stamp":
        off = 0.9 * STATE_TIMEOUT
    else:
        raise ValueError(f"unknown kind {kind!r}")
    return {"names": names, "position": q, "velocity": qd, "effort": effort, "stamp_offset_s": off}


def joint_state_cdr(names, position, velocity, stamp_ns: int) -> bytes:
    """``sensor_msgs/JointState`` (empty ``frame_id`` and ``effort``) as the little-endian CDR bytes rclpy
    would serialize, built with ``struct``: the flood's 100 000 messages are then limited by the nodes that
    receive them, not by this publisher's Python (a ``JointState`` object costs ~65 µs, these bytes ~10 µs)."""
    out = [b"\x00\x01\x00\x00", struct.pack("<iII", *divmod(int(stamp_ns), 1_000_000_000), 1), b"\x00\x00\x00\x00"]
    size = 20   # bytes so far: encapsulation 4, stamp 8, frame_id "" (length 4, NUL 1, padding 3)
    out.append(struct.pack("<I", len(names)))
    size += 4
    for name in names:
        text = name.encode()
        pad = -(len(text) + 1) % 4
        out.append(struct.pack("<I", len(text) + 1) + text + b"\x00" * (1 + pad))
        size += 4 + len(text) + 1 + pad
    for values in (position, velocity):
        n = len(values)
        pad = -(size - 4 + 4) % 8 if n else 0
        out.append(struct.pack(f"<I{pad}x{n}d", n, *values))
        size += 4 + pad + 8 * n
    out.append(struct.pack("<I", 0))
    return b"".join(out)


# --------------------------------------------------------------------------- target process
def _yaml_list(values) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


@dataclass
class TargetConfig:
    """What a target process runs: ``nodes`` (names of ``robot-dynamics run``), model source, options."""

    tag: str
    nodes: tuple[str, ...]
    topic_description: bool = False   # model from the description topic (else urdf_path: panda)
    use_sim_time: bool = False
    request_deadline: float = 30.0
    extra_args: tuple[str, ...] = ()

    @property
    def joint_states(self) -> str:
        return f"/{self.tag}/joint_states"

    @property
    def description_topic(self) -> str:
        return f"/{self.tag}/robot_description"

    def command_topic(self, node: str) -> str:
        """The key under which the recorder stores ``node``'s commands (see :meth:`command_topics`)."""
        return f"{self.tag}_{'gc' if node == 'gravity_compensation' else 'ct'}"

    def command_topics(self, node: str) -> tuple[str, str]:
        """Where ``node`` may publish: ``/<controller_name>/commands`` (absolute) or, resolved in the
        target's namespace, ``/<tag>/<controller_name>/commands``; the recorder listens on both."""
        name = self.command_topic(node)
        return f"/{name}/commands", f"/{self.tag}/{name}/commands"

    @property
    def service(self) -> str:
        return f"/{self.tag}/retiming_service/retime"

    def params_yaml(self) -> str:
        source = ['urdf_path: ""' if self.topic_description else "urdf_path: panda",
                  f"robot_description_topic: {self.description_topic}",
                  f"held_joint_names: {_yaml_list(FINGERS)}",
                  f"held_joint_positions: {_yaml_list(FINGERS.values())}",
                  f"use_sim_time: {'true' if self.use_sim_time else 'false'}"]
        control = [f"joints: {_yaml_list(NAMES)}", f"joint_states_topic: {self.joint_states}",
                   f"state_timeout: {STATE_TIMEOUT}"]
        sections = {
            "gravity_compensation": source + control + [f"controller_name: {self.tag}_gc",
                                                         "crossval_samples: 0", "diagnostics_period: 0.1"],
            "computed_torque": source + control + [f"controller_name: {self.tag}_ct", "mode: computed_torque",
                                                   "tick_source: timer", "control_rate: 500.0"],
            "retiming_service": source + ["joint_limits_path: panda_joint_limits.yaml",
                                          f"request_deadline: {self.request_deadline}"],
        }
        out = []
        for node in self.nodes:
            out.append(f"/{self.tag}/{node}:\n  ros__parameters:")
            out += [f"    {line}" for line in sections[node]]
        return "\n".join(out) + "\n"


def status_mb(pid: int, *fields: str) -> tuple[float, ...]:
    """The memory ``fields`` of process ``pid`` from ``/proc/<pid>/status`` (e.g. "VmRSS", "RssAnon",
    "RssFile"; kB there), MB each, NaN for a field absent or a process gone."""
    found = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in fields:
                    found[key] = int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return tuple(found.get(key, math.nan) for key in fields)


def rss_mb(pid: int) -> float:
    """Resident memory (MB) of process ``pid`` (VmRSS), NaN when it is gone."""
    return status_mb(pid, "VmRSS")[0]


def child_pids(pid: int) -> list[int]:
    """The child processes of ``pid`` (from every thread's ``/proc/<pid>/task/<tid>/children``); a thread or a
    process that ends while they are read is skipped, not an error."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            continue
    return out


class Target:
    """One ``robot-dynamics run`` process (see the module docstring); memory sampled every 20 ms.

    ``rss_limit_mb``: the process is killed (and reported) above this resident size, so that an attack
    that makes a node read without bound cannot take the machine down.
    """

    def __init__(self, cfg: TargetConfig, workdir: Path, rss_limit_mb: float = 6000.0):
        self.cfg = cfg
        self.workdir = workdir
        self.rss_limit_mb = rss_limit_mb
        self.proc: subprocess.Popen | None = None
        self.samples: list[tuple[float, float, float]] = []  # (t, rss MB of run, rss MB of its children)
        self.killed_by_guard = False
        self.starts = 0
        self.deaths: list[dict] = []
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None
        self.log_path = workdir / f"{cfg.tag}.log"
        self.death_time: float | None = None
        self._log = None

    def start(self) -> None:
        params = self.workdir / f"{self.cfg.tag}.yaml"
        params.write_text(self.cfg.params_yaml())
        cmd = [sys.executable, "-m", "robot_dynamics_tools.cli", "run", "--params", str(params),
               "--nodes", *self.cfg.nodes]
        cmd += [*self.cfg.extra_args, "--ros-args", "-r", f"__ns:=/{self.cfg.tag}",
                "-r", f"/diagnostics:=/{self.cfg.tag}/diagnostics"]
        if self._log is not None:
            self._log.close()
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=child_env(),
                                     start_new_session=True)
        self.starts += 1
        self.start_time = time.monotonic()
        self.death_time: float | None = None
        if self._sampler is None:
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _sample(self) -> None:
        while not self._stop.is_set():
            p = self.proc
            if p is not None and p.poll() is not None and self.death_time is None:
                self.death_time = time.monotonic()
            if p is not None and p.poll() is None:
                own = rss_mb(p.pid)
                kids = sum(rss_mb(c) for c in child_pids(p.pid))
                self.samples.append((time.monotonic(), own, kids))
                if own + (kids if kids == kids else 0.0) > self.rss_limit_mb and not self.killed_by_guard:
                    self.killed_by_guard = True
                    os.killpg(p.pid, signal.SIGKILL)
            self._stop.wait(0.02)

    def check_death(self, phase: str) -> dict | None:
        """If the process has ended, record and return {phase, exit}; None while alive."""
        if self.proc is None or self.proc.poll() is None:
            return None
        d = {"phase": phase, "exit": self.proc.returncode, "killed_by_memory_guard": self.killed_by_guard,
             "after_start_s": round((self.death_time or time.monotonic()) - self.start_time, 1)}
        self.deaths.append(d)
        self.proc = None
        return d

    def rss_window(self, t0: float, t1: float) -> dict:
        """RSS of the run process over [t0, t1]: first, last, peak (MB); children's peak separately."""
        s = [x for x in self.samples if t0 <= x[0] <= t1]
        if not s:
            return {"rss_start_mb": None, "rss_end_mb": None, "rss_peak_mb": None, "rss_growth_mb": None}
        own = [x[1] for x in s]
        kids = [x[2] for x in s]
        return {"rss_start_mb": round(own[0], 1), "rss_end_mb": round(own[-1], 1),
                "rss_peak_mb": round(max(own), 1), "rss_growth_mb": round(own[-1] - own[0], 1),
                "children_rss_peak_mb": round(max(kids), 1) if any(kids) else None}

    def log_lines_between(self, start_byte: int) -> list[bytes]:
        with open(self.log_path, "rb") as f:
            f.seek(start_byte)
            return f.read().split(b"\n")

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def stop(self) -> int | None:
        self._stop.set()
        p = self.proc
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)
        # the retiming child of a run (its own session) ends with the parent; make sure of it
        if p is not None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._log is not None:
            self._log.close()
        return None if p is None else p.returncode


# --------------------------------------------------------------------------- recorder (this process)
def classify(data: np.ndarray, ref: dict[str, np.ndarray]) -> int:
    """Class of one command (N·m, command joint order) against :func:`reference_commands` ``ref``:
    0 = g(Q_GOOD), 1 = g(Q_GOOD2) (within :data:`TOL`), 2 = all zero, -1 = any other finite command,
    -2 = a non-finite entry. A command of another length is -1 (or -2 when non-finite)."""
    data = np.asarray(data, dtype=float)
    if not np.isfinite(data).all():
        return -2
    if data.shape != (N,):
        return -1
    if np.abs(data - ref["good"]).max() <= TOL:
        return 0
    if np.abs(data - ref["good2"]).max() <= TOL:
        return 1
    if not data.any():
        return 2
    return -1


class Recorder:
    """Records commands of the targets' control nodes and their diagnostics (own rclpy context).

    Each command is stored as (publication time, class): 0 = g(Q_GOOD), 1 = g(Q_GOOD2), 2 = all zero,
    -1 = any other finite command, -2 = non-finite. The publication time is the DDS source timestamp on
    this process's monotonic clock (the node and this recorder run on one machine).
    """

    def __init__(self):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node

        self.ref = reference_commands()
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        self.node = Node("attack_recorder", context=self.ctx)
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(self.node)
        self.commands: dict[str, list[tuple[float, int]]] = {}
        self.topics: dict[str, tuple[str, ...]] = {}
        #: the first commands of class -1 per topic (time, values): what a hostile message made a node do
        self.other_examples: dict[str, list[tuple[float, list[float]]]] = {}
        self.diagnostics: dict[str, list[tuple[float, int, str, dict]]] = {}
        self._subs = []
        self._realtime_minus_monotonic = time.time() - time.monotonic()
        self._spinner = SpinThread(self.executor, self.ctx)

    def classify(self, data: np.ndarray) -> int:
        return classify(data, self.ref)

    def watch(self, key: str, topics) -> None:
        """Record the commands published on any of ``topics`` under ``key``."""
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Float64MultiArray

        store = self.commands.setdefault(key, [])
        others = self.other_examples.setdefault(key, [])
        self.topics[key] = tuple(topics)

        def cb(msg, info, store=store, others=others):
            # the time the node published it (DDS source timestamp, CLOCK_REALTIME, mapped to this machine's
            # monotonic clock of the phase times): a stall of this recorder delays arrivals, not this time, so
            # a late command is still judged in the phase whose messages caused it
            t = info["source_timestamp"] * 1e-9 - self._realtime_minus_monotonic
            data = np.asarray(msg.data, dtype=float)
            c = self.classify(data)
            store.append((t, c))
            if c == -1 and len(others) < 2000:
                others.append((t, data.round(4).tolist()))

        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        for topic in topics:
            self._subs.append(self.node.create_subscription(Float64MultiArray, topic, cb, qos))

    def watch_diagnostics(self, topic: str) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        store = self.diagnostics.setdefault(topic, [])

        def cb(msg, info, store=store):
            t = info["source_timestamp"] * 1e-9 - self._realtime_minus_monotonic  # publication time, as commands
            for s in msg.status:
                store.append((t, s.level[0] if isinstance(s.level, bytes) else int(s.level), s.name,
                              {kv.key: kv.value for kv in s.values}))

        self._subs.append(self.node.create_subscription(DiagnosticArray, topic, cb, 100))

    def wait_for_publishers(self, keys, timeout: float) -> bool:
        """True once each key's node publishes on one of its topics (False after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(any(self.node.count_publishers(t) > 0 for t in self.topics[k]) for k in keys):
                return True
            time.sleep(0.05)
        return False

    def window(self, topic: str, t0: float, t1: float) -> list[tuple[float, int]]:
        # in publication order (one key may gather several writers, e.g. a node and its restart)
        return sorted(c for c in self.commands.get(topic, []) if t0 <= c[0] < t1)

    def close(self):
        self._spinner.stop()
        self.node.destroy_node()
        import rclpy

        rclpy.try_shutdown(context=self.ctx)


def command_stats(cmds: list[tuple[float, int]], t0: float, t1: float) -> dict:
    """Counts and the largest gap between consecutive commands in [t0, t1] (gap from t0 to the first too)."""
    classes = [c for _, c in cmds]
    times = [t0] + [t for t, _ in cmds] + [t1]
    gap = max(b - a for a, b in zip(times, times[1:])) if len(times) > 1 else t1 - t0
    return {"commands": len(cmds), "good": classes.count(0) + classes.count(1),
            "caused": classes.count(-1), "nonfinite": classes.count(-2), "zero": classes.count(2),
            "max_gap_ms": round(gap * 1e3, 1)}


# --------------------------------------------------------------------------- publisher (child process)
def _wait_go() -> None:
    """Block until a line arrives on stdin, read unbuffered (later signals are read the same way)."""
    buf = b""
    while b"\n" not in buf:
        chunk = os.read(0, 4096)
        if not chunk:
            return
        buf += chunk


def publish_main(plan_path: str) -> int:
    """Run the plan of phases in ``plan_path`` (JSON) and print one JSON line per phase.

    Plan: {"joint_states": topic, "description_topic": topic, "wait_subscribers": n, "sim_time": bool,
    "phases": [{"name", "kind" | "description" | "good", "duration", "count"?, "clock_jump_s"?}]}.
    """
    import rclpy
    from rclpy.node import Node
    from rclpy.duration import Duration as RclDuration
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    from robot_dynamics_ros.nodes.wire import description_qos

    plan = json.loads(Path(plan_path).read_text())
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = Node("attack_publisher", context=ctx)
    pub = node.create_publisher(JointState, plan["joint_states"], 100)
    desc_pub = node.create_publisher(String, plan["description_topic"], description_qos())
    clock_pub = node.create_publisher(Clock, "/clock", 10) if plan.get("sim_time") else None
    deadline = time.monotonic() + 30
    while pub.get_subscription_count() < plan.get("wait_subscribers", 1):
        if time.monotonic() > deadline:
            print(json.dumps({"error": f"no subscriber on {plan['joint_states']}"}), flush=True)
            return 1
        time.sleep(0.01)
    sim = {"t_ns": 1_000_000 * 1_000_000_000}  # sim time starts at 1e6 s

    def stamp_now(offset_s: float = 0.0) -> int:
        base = sim["t_ns"] if clock_pub is not None else time.time_ns()
        return base + int(offset_s * 1e9)

    def make(names, q, qd, effort=(), offset_s=0.0):
        m = JointState()
        m.name = names
        m.position = q
        m.velocity = qd
        m.effort = list(effort)
        m.header.stamp.sec, m.header.stamp.nanosec = divmod(stamp_now(offset_s), 1_000_000_000)
        return m

    good_q = Q_GOOD.tolist()
    zeros = [0.0] * N

    def send_good(q=None):
        pub.publish(make(NAMES, good_q if q is None else q, zeros))

    def tick_clock():
        if clock_pub is not None:
            sim["t_ns"] += 1_000_000
            c = Clock()
            c.clock.sec, c.clock.nanosec = divmod(sim["t_ns"], 1_000_000_000)
            clock_pub.publish(c)

    print("READY", flush=True)
    _wait_go()  # "GO" from the benchmark (started early, so its start-up is off the clock)
    for ph in plan["phases"]:
        name = ph["name"]
        duration = float(ph.get("duration", 1.0))
        count_cap = ph.get("count")
        kind = ph.get("kind")
        info = {"name": name, "kind": kind, "t_start": time.monotonic(), "sent_hostile": 0, "sent_good": 0}
        # before the description goes out: the benchmark reads the nodes' log from this time on
        info["t_announce"] = time.monotonic()
        print(f"START {name} {info['t_announce']:.6f}", flush=True)
        if "description" in ph:
            text = Path(ph["description"]).read_text() if ph.get("description_is_file") else ph["description"]
            desc_pub.publish(String(data=text))
            info["description_bytes"] = len(text.encode())
            # acknowledged by every matched reader before the phase's clock starts: with keep-last 1 the next
            # description would otherwise replace one whose fragments are still on the way
            info["description_acked"] = bool(desc_pub.wait_for_all_acked(RclDuration(seconds=20.0)))
            info["t_description"] = time.monotonic()
        info["t_start"] = time.monotonic()  # after the description was delivered
        q_after = Q_GOOD2.tolist() if ph.get("good_pose") == "good2" else good_q
        if ph.get("clock_jump_s"):
            sim["t_ns"] -= int(ph["clock_jump_s"] * 1e9)
            info["t_jump"] = time.monotonic()
        pattern = KINDS[kind].pattern if kind else "good"
        t0 = time.monotonic()
        next_t = t0
        k = 0
        period = 1e-3
        # a phase with "until_signal": ends "after_signal" s after the benchmark writes a line on stdin (it
        # has seen every node handle the description), or after "duration" s without one
        signal_wait = "until_signal" in ph
        if signal_wait:
            import select
        while True:
            now = time.monotonic()
            if now - t0 >= duration or (count_cap is not None and info["sent_hostile"] >= count_cap):
                break
            if signal_wait and "t_signal" not in info and k % 10 == 0 and select.select([0], [], [], 0)[0]:
                # unbuffered: every pending line is consumed; only this phase's own signal counts
                if f"NEXT {name}\n" in os.read(0, 65536).decode():
                    info["t_signal"] = time.monotonic()
                    duration = info["t_signal"] - t0 + float(ph["after_signal"])
            if pattern == "flood":
                h = hostile_fields(kind, k)
                pub.publish(joint_state_cdr(h["names"], h["position"], h["velocity"], stamp_now()))
                info["sent_hostile"] += 1
                k += 1
                if now >= next_t:
                    tick_clock()
                    send_good(q_after)
                    info["sent_good"] += 1
                    next_t += period
                continue
            if now < next_t:
                time.sleep(max(0.0, next_t - now - 0.0002))
                continue
            next_t += period
            if next_t < now - 0.05:   # far behind (a stall): do not send a burst to catch up
                next_t = now + period
            tick_clock()
            if pattern == "mix":
                h = hostile_fields(kind, k)
                pub.publish(make(h["names"], h["position"], h["velocity"], h["effort"], h["stamp_offset_s"]))
                info["sent_hostile"] += 1
                send_good(q_after)
                info["sent_good"] += 1
            elif pattern == "every10":
                if k % 10 == 0:
                    h = hostile_fields(kind, k)
                    pub.publish(make(h["names"], h["position"], h["velocity"], h["effort"],
                                     h["stamp_offset_s"]))
                    info["sent_hostile"] += 1
                else:
                    send_good(q_after)
                    info["sent_good"] += 1
            elif pattern == "single_then_silence":
                j = k % 101
                if j < 50:
                    send_good(q_after)
                    info["sent_good"] += 1
                elif j == 50:
                    h = hostile_fields(kind, k)
                    pub.publish(make(h["names"], h["position"], h["velocity"]))
                    info["sent_hostile"] += 1
                    info.setdefault("t_hostile", []).append(time.monotonic())
                # j > 50: silence (the clock still runs)
            else:  # good only
                send_good(q_after)
                info["sent_good"] += 1
            k += 1
        info["t_end"] = time.monotonic()
        print(json.dumps(info), flush=True)
    node.destroy_node()
    rclpy.try_shutdown(context=ctx)
    return 0


class Child:
    """A child process of this module (``publish`` or ``clients``) started early and held at READY until
    :meth:`go`, so that its start-up (interpreter, rclpy, discovery) is not part of a measured window."""

    def __init__(self, args: list[str]):
        self.proc = subprocess.Popen([sys.executable, "-m", "robot_dynamics_testing.attack", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=child_env())
        self.ready_line = None
        self._seen: list[str] = []
        self._buf = ""

    def go(self, timeout: float = 60.0) -> bool:
        """Wait for READY (an error line instead: False), then release the child."""
        if self.ready_line is None:
            line = self.readline(timeout)
            self.ready_line = line or ""
            if self._seen and self._seen[-1] == line:
                self._seen.pop()  # READY (or an error line) is not a record
        if not self.ready_line.startswith("READY"):
            return False
        self.proc.stdin.write("GO\n")
        self.proc.stdin.flush()
        return True

    def signal(self, phase: str) -> None:
        """``NEXT <phase>`` on the child's stdin (ends that publisher phase if it has ``until_signal``)."""
        try:
            self.proc.stdin.write(f"NEXT {phase}\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def readline(self, timeout: float) -> str | None:
        """The next stdout line within ``timeout`` s (None: none yet; '' at the end). Reads the pipe
        unbuffered (a buffered reader would hold lines that select() no longer reports)."""
        import select

        fd = self.proc.stdout.fileno()
        while "\n" not in self._buf:
            r, _, _ = select.select([fd], [], [], timeout)
            if not r:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                line, self._buf = self._buf, ""
                self._seen.append(line)
                return line
            self._buf += chunk.decode()
        line, self._buf = self._buf.split("\n", 1)
        self._seen.append(line + "\n")
        return line + "\n"

    def lines(self, timeout: float) -> list[dict]:
        """The child's JSON lines once it has ended (killed after ``timeout`` s)."""
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        out = "".join(self._seen) + self._buf + out
        found = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
        if self.ready_line and self.ready_line.startswith("{"):
            found.insert(0, json.loads(self.ready_line))
        return found


def start_publisher(plan: dict, workdir: Path) -> Child:
    """A :func:`publish_main` child on ``plan`` (held at READY until ``go()``)."""
    path = workdir / f"plan_{time.monotonic_ns()}.json"
    path.write_text(json.dumps(plan))
    return Child(["publish", str(path)])


# --------------------------------------------------------------------------- retiming clients (child)
REQUEST_MIX = ("normal", "nan", "normal", "huge", "normal", "inf", "normal", "unknown_joint", "normal", "empty")


def build_request(kind: str, k: int, huge_points: int = 100_000):
    """A RetimeTrajectory request of ``kind`` (see :data:`REQUEST_MIX`)."""
    from trajectory_msgs.msg import JointTrajectoryPoint

    from robot_dynamics_interfaces.srv import RetimeTrajectory

    req = RetimeTrajectory.Request()
    req.path.joint_names = list(NAMES)
    if kind == "empty":
        return req
    rows = request_path(k, huge_points if kind == "huge" else 100)
    if kind == "nan":
        rows[len(rows) // 2, 3] = math.nan
    elif kind == "inf":
        rows[1, 0] = math.inf
    elif kind == "unknown_joint":
        req.path.joint_names = [*NAMES[:6], "no_such_joint"]
    pts = []
    for row in rows.tolist():
        p = JointTrajectoryPoint()
        p.positions = row
        pts.append(p)
    req.path.points = pts
    req.torque_margin = 0.9
    req.sample_period = 0.01
    return req


def clients_main(argv: list[str]) -> int:
    """``clients SERVICE N DURATION GRACE MIX [DELAY]``: N concurrent clients, each sending requests back to
    back for DURATION s (MIX: comma-separated kinds cycled per client, offset by the client index), each
    request waited for up to GRACE s, the first sent DELAY s (default 0) after "GO". Prints one JSON line:
    per kind sent/answered/success, unanswered, RTTs."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node

    from robot_dynamics_interfaces.srv import RetimeTrajectory

    service, n, duration, grace, mix = argv[0], int(argv[1]), float(argv[2]), float(argv[3]), argv[4].split(",")
    delay = float(argv[5]) if len(argv) > 5 else 0.0
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = Node("attack_clients", context=ctx)
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    # a response history deeper than the clients: in rmw_fastrtps every client's reader of the service's
    # reply topic may receive the other clients' replies too, and a keep-last 10 reader of a loaded client
    # could lose its own behind them
    qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    clients = [node.create_client(RetimeTrajectory, service, qos_profile=qos) for _ in range(n)]
    executor = MultiThreadedExecutor(num_threads=2, context=ctx)
    executor.add_node(node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    # every client, not only the first: each has request and response endpoints of its own, and a request
    # written before its writer matched the service's reader is never delivered (volatile durability)
    if not all(c.wait_for_service(timeout_sec=30.0) for c in clients):
        print(json.dumps({"error": f"service {service} not available"}), flush=True)
        return 1
    cache: dict[str, object] = {}
    lock = threading.Lock()
    stats: dict[str, dict] = {}
    lost: list[dict] = []
    rtts: list[float] = []
    for kind in set(mix) & {"huge"}:
        cache[kind] = build_request(kind, 0)
    print("READY", flush=True)
    _wait_go()  # "GO" from the benchmark
    time.sleep(delay)
    t_end = time.monotonic() + duration

    def worker(i: int):
        k = i
        while time.monotonic() < t_end:
            kind = mix[k % len(mix)]
            with lock:
                req = cache.get(kind) if kind in ("huge",) else None
            if req is None:
                req = build_request(kind, k)
                if kind == "huge":
                    with lock:
                        cache[kind] = req
            t0 = time.monotonic()
            fut = clients[i].call_async(req)
            # polled (no done-callback: nothing between the executor and this thread can lose the answer)
            give_up = t0 + grace
            while not fut.done() and time.monotonic() < give_up:
                time.sleep(0.005)
            answered = fut.done()
            with lock:
                s = stats.setdefault(kind, {"sent": 0, "answered": 0, "success": 0, "busy": 0,
                                            "max_rtt_s": 0.0})
                s["sent"] += 1
                if answered and fut.result() is not None:
                    res = fut.result()
                    s["answered"] += 1
                    s["success"] += int(res.success)
                    s["busy"] += int("busy" in res.message.lower() or "timed out" in res.message.lower())
                    rtt = time.monotonic() - t0
                    s["max_rtt_s"] = round(max(s["max_rtt_s"], rtt), 3)
                    rtts.append(rtt)
                    if kind not in ("normal", "huge") and res.success:
                        s.setdefault("unexpected_success", 0)
                        s["unexpected_success"] += 1
                else:
                    lost.append({"client": i, "kind": kind, "k": k})
                    clients[i].remove_pending_request(fut)
            k += 1

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out = {"clients": n, "duration_s": duration, "grace_s": grace, "per_kind": stats,
           "requests": sum(s["sent"] for s in stats.values()),
           "answered": sum(s["answered"] for s in stats.values()), "unanswered": len(lost),
           "unanswered_examples": lost[:5],
           "rtt_p50_s": round(float(np.median(rtts)), 3) if rtts else None,
           "rtt_max_s": round(max(rtts), 3) if rtts else None}
    print(json.dumps(out), flush=True)
    executor.shutdown(timeout_sec=1.0)
    node.destroy_node()
    rclpy.try_shutdown(context=ctx)
    return 0


def start_clients(service: str, n: int, duration: float, grace: float, mix, delay: float = 0.0) -> Child:
    """A :func:`clients_main` child (held at READY, its requests built, until ``go()``; the first request
    ``delay`` s after it)."""
    return Child(["clients", service, str(n), str(duration), str(grace), ",".join(mix), str(delay)])


def finish_clients(child: Child, timeout: float) -> dict:
    lines = child.lines(timeout)
    if not lines:
        return {"error": "no output from the client process", "unanswered": None}
    return lines[-1]


# --------------------------------------------------------------------------- descriptions
def hostile_descriptions(workdir: Path, quick: bool) -> list[dict]:
    """The hostile ``robot_description`` texts: dicts(name, text | file, what, bait?).

    ``bait`` is a file a node must never open: an existing URDF whose model would differ from the Panda's
    (every link mass doubled: every gravity torque doubles), so a node that opened it would command g ≠
    g(Q_GOOD); the FIFO is checked by opening it for writing without blocking afterwards (ENXIO = no reader).
    """
    panda = Path(PANDA.urdf).read_text()
    heavy = workdir / "heavy_panda.urdf"

    def named(text: str, kind: str) -> str:
        # its own robot name: a node that loads it says so in its log ("robot 'attack_...' from topic")
        return re.sub(r'<robot name="[^"]*"', f'<robot name="attack_{kind}"', text, count=1)

    heavy.write_text(named(re.sub(r'<mass value="([0-9.eE+-]+)"',
                                  lambda m: f'<mass value="{2 * float(m.group(1))!r}"', panda),
                           "path_existing_urdf"))
    fifo = workdir / "description.fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    depth = 150_000
    nested = named(panda.replace("<visual>", "<visual>" + "<a>" * depth + "</a>" * depth, 1), "nested_150k")
    # panda_link4: its weight loads panda_joint2 and panda_joint4
    i4 = panda.index('<link name="panda_link4"')
    huge_mass = named(panda[:i4] + re.sub(r'<mass value="[0-9.eE+-]+"', '<mass value="1e300"', panda[i4:],
                                          count=1), "mass_1e300")
    junk_mb = 50
    junk_path = workdir / "junk.txt"
    rng = np.random.default_rng(16)
    junk = "J" + "".join(chr(c) for c in rng.integers(33, 127, 4096))
    junk_path.write_text((junk * (junk_mb * 1024 * 1024 // len(junk) + 1))[: junk_mb * 1024 * 1024])
    nested_path = workdir / "nested.urdf"
    nested_path.write_text(nested)
    return [
        {"name": "path_existing_urdf", "text": str(heavy), "what": "the path of an existing URDF (heavier panda)",
         "bait": str(heavy)},
        {"name": "path_dev_zero", "text": "/dev/zero", "what": "/dev/zero"},
        {"name": "path_fifo", "text": str(fifo), "what": "a FIFO path", "fifo": str(fifo)},
        {"name": "junk_50mb", "file": str(junk_path), "what": f"{junk_mb} MB of printable junk (no '<')"},
        {"name": "mass_1e300", "text": huge_mass, "what": "panda with a 1e300 kg panda_link4"},
        {"name": "nested_150k", "file": str(nested_path), "what": f"panda with {depth} nested elements in <visual>"},
    ]


def fifo_has_reader(path: str) -> bool:
    """True when some process holds ``path`` (a FIFO) open for reading: a non-blocking open for writing
    then succeeds (it fails with ENXIO when there is no reader). The reader is released by closing."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return False
    os.close(fd)
    return True


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "publish":
        sys.exit(publish_main(sys.argv[2]))
    if cmd == "clients":
        sys.exit(clients_main(sys.argv[2:]))
    print("usage: python -m robot_dynamics_testing.attack publish PLAN.json | clients SERVICE N DURATION GRACE MIX",
          file=sys.stderr)
    sys.exit(2)


_LOG_RE = re.compile(rb"^\[(DEBUG|INFO|WARN|ERROR|FATAL)\] \[(\d+\.\d+)\] \[([^\]]*)\]: ")


def parse_log(lines: list[bytes]) -> list[tuple[float, str, int, str, str]]:
    """rcutils console lines -> (monotonic time, severity, length in characters, node name, first 200
    characters of the text). A line without the ``[LEVEL] [time] [logger]: `` prefix (the continuation of a
    multi-line message) is its own entry at the previous line's time, severity ``CONT``."""
    offset = time.time() - time.monotonic()
    out = []
    last_t = 0.0
    for raw in lines:
        if not raw:
            continue
        m = _LOG_RE.match(raw)
        if m:
            last_t = float(m.group(2)) - offset
            node = m.group(3).decode(errors="replace").rpartition(".")[2]
            out.append((last_t, m.group(1).decode(), len(raw), node,
                        raw[m.end():m.end() + 200].decode(errors="replace")))
        else:
            out.append((last_t, "CONT", len(raw), "", ""))
    return out
