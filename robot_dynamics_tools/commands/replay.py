"""``robot-dynamics replay``: replay a rosbag2 file through the nodes over real DDS and record what they publish.

    robot-dynamics replay run1 --out run1_replayed --urdf panda --params config/panda.yaml --as-fast-as-possible
    robot-dynamics replay run1.mcap --out out/replay --urdf ur5 --rate 0.5 --joint-states-topic /ur/joint_states

``sensor_msgs/JointState`` records (topic ``--joint-states-topic``; any joint order, by name) are read from
IN_BAG (a rosbag2 directory, sqlite3 or mcap, a bare ``.mcap``/``.db3`` file, or a ROS 1 ``.bag``, its records
converted to ROS 2 by rosbags: :class:`robot_dynamics_tools.bags.BagReader`) and published, in bag order,
into the node (``--node``, default ``gravity_compensation``) started in this process as ``robot-dynamics run``
starts it (the params file's ``<node name>`` section, ``--urdf`` as ``urdf_path``). With ``--node
computed_torque`` the bag's ``trajectory_msgs/JointTrajectory`` records (``--trajectory-topic``, found by type
when not given) are published too, and the node ticks once per joint state (``tick_source: joint_states``).
With ``--node external_torque_observer`` the output matched per joint state is the node's
``~/external_torque`` (τ_ext, ``sensor_msgs/JointState`` efforts, from the states' efforts as the measured
joint torque), OUT_BAG holds it with ``~/collision`` and ``~/external_wrench``, and the summary adds
``collision_onsets`` (how often the recorded flag turned true) and ``output_topic``; the offline
recomputation is a separate ``ExternalTorqueCore`` with the node's settings, so replay runs the observer
law of the node, not one of its own. (A bag without efforts gives no τ_ext unless the node's
``torque_source`` finds a command: replay publishes only joint states and trajectories.)

Time: like ``ros2 bag play --clock``, each record's bag time is published on ``/clock`` just before the
record, and the node runs with ``use_sim_time: true``, so its staleness checks see the recorded timing
whatever the replay speed.

Speed: ``--rate R`` publishes at R × the recorded pace (default 1.0); ``--as-fast-as-possible`` is flow
controlled: the next joint state is published when the command for the previous one has arrived (or
``--timeout`` s passed: that input counts as dropped), so it never overruns the node's queues.

OUT_BAG (a new rosbag2 directory, ``--storage`` as IN_BAG's unless given, mcap for a ROS 1 IN_BAG) receives the replayed inputs and
every message the node publishes (commands, ``/diagnostics``, ...), stamped with the bag time of the input
being replayed. OUT_BAG is checked before any work (it and ``OUT_BAG.partial`` must not exist, its folder
must be writable, it must not be IN_BAG or inside it) and IN_BAG is size-capped (``--max-input-mb``;
devices and FIFOs refused): the records are held in memory. OUT_BAG is written when the replay ends,
atomically (a temporary sibling folder renamed when complete: a failure leaves nothing). Ctrl-C (or SIGTERM)
during the replay keeps what was recorded and writes it to ``OUT_BAG.partial``, saying so; a Ctrl-C during
that write is held until the bag is complete.

DDS: the node under test and the replayer run on a private domain chosen by the code (never
``$ROS_DOMAIN_ID``) with localhost-only discovery, as ``demo`` and ``track`` do: the replayed effort commands
use the standard topic names a robot listens on. ``--domain-id N`` runs on domain N with the environment's
discovery range, to watch the replay with other tools.

The summary gives messages in/out, dropped inputs (a command was expected and none came), latency
percentiles (publish of the joint state to receipt of its command, wall clock) and the max difference
between the recorded commands and an offline recomputation of the same inputs by the node's own ROS-free
control core (:class:`CoreRecomputation`: a separate ``GravityCompensator`` / ``ComputedTorqueController`` /
``ExternalTorqueCore`` with the running node's parameter values, fed the records at their bag time); for
the observer, "command" in the summary means its τ_ext message. Replay has no control law of
its own; the comparison checks what lies between the core and the wire (transport, ordering, parameters,
trajectory timing). The last stdout line is the JSON summary.
Exit status: 0, or 2 when inputs were dropped or a command differs from the recomputation by more than
``--tolerance`` (N·m); 130 on Ctrl-C.

Errors naming the topic/joint (exit status 1, nothing written): a topic missing from the bag or holding
another message type, a truncated or corrupt bag, a robot joint that never appears in the joint states.
Joint state names that are not joints of the URDF (a gripper of joint_state_broadcaster) are ignored, as
the nodes ignore them; the summary lists them once (``ignored_joint_names``).
"""
from __future__ import annotations

import argparse
import json
import math
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robot_dynamics_tools import bags
from robot_dynamics_tools.commands._recompute import CoreRecomputation
from robot_dynamics_tools.commands._replay_inputs import Record, check_joint_names, read_inputs
from robot_dynamics_tools.paths import check_input_size, check_new_folder
from robot_dynamics_ros.errors import UserError

#: nodes replay can drive: node name (= section of the params file)
REPLAY_NODES = ("gravity_compensation", "computed_torque", "external_torque_observer")
#: topics a node has that are not its output
_INFRA_TOPICS = {"/rosout", "/parameter_events"}
#: default cap on the size of IN_BAG (bytes, all its files): the records are held in memory
MAX_INPUT_BYTES = 1 << 30


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("in_bag", metavar="IN_BAG",
                        help="rosbag2 directory (sqlite3 or mcap), .mcap/.db3 file, or ROS 1 .bag")
    parser.add_argument("--out", required=True, metavar="OUT_BAG", help="rosbag2 directory to create")
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument("--rate", type=float, default=None,
                       help="publish at RATE x the recorded pace (default 1.0)")
    speed.add_argument("--as-fast-as-possible", action="store_true",
                       help="flow controlled: next input as soon as the command for the previous one arrived")
    parser.add_argument("--urdf", required=True, help="URDF file or bundled robot name (panda, ur5, ...)")
    parser.add_argument("--params", action="append", default=[], metavar="YAML",
                        help="rcl parameter file, as for 'robot-dynamics run' (may be repeated)")
    parser.add_argument("--node", choices=REPLAY_NODES, default="gravity_compensation",
                        help="node to replay into (default gravity_compensation)")
    parser.add_argument("--joint-states-topic", default="/joint_states",
                        help="sensor_msgs/JointState topic in IN_BAG (default /joint_states)")
    parser.add_argument("--trajectory-topic", default=None,
                        help="trajectory_msgs/JointTrajectory topic in IN_BAG (computed_torque; default: the "
                             "bag's topic of that type, if any)")
    parser.add_argument("--storage", choices=bags.STORAGE_FORMATS, default=None,
                        help="storage of OUT_BAG (default: IN_BAG's; mcap for a ROS 1 bag)")
    parser.add_argument("--timeout", type=float, default=1.0,
                        help="s to wait for a command before an input counts as dropped (default 1)")
    parser.add_argument("--tolerance", type=float, default=1e-9,
                        help="max |command - recomputation|, N·m, for exit status 0 (default 1e-9)")
    parser.add_argument("--max-input-mb", type=float, default=MAX_INPUT_BYTES / 2**20, metavar="MB",
                        help=f"refuse an IN_BAG larger than this (default {MAX_INPUT_BYTES // 2**20} MiB): the "
                             "replay holds every input record in memory")
    parser.add_argument("--domain-id", type=int, default=None,
                        help="DDS domain (default: a private one chosen by the code, never $ROS_DOMAIN_ID, "
                             "localhost-only discovery: the replayed commands never reach a robot; an explicit "
                             "id keeps the environment's discovery range, to watch the replay from other tools)")


# ----------------------------------------------------------------------------------------- parameters
def node_parameters(params_files: list[str], node: str) -> dict[str, Any]:
    """The node's parameters as the files set them to the node ``/<node>`` (every section that applies, as
    rclpy applies it: :func:`robot_dynamics_tools.commands.run.section_applies`; later ones win), nested keys
    dotted (``gains.j1.kp``). Only what the files set; the node's defaults are not included.

    Raises:
        UserError: unreadable / invalid file (see :func:`robot_dynamics_tools.commands.run.check_params_file`).
    """
    import yaml

    from robot_dynamics_tools.commands.run import check_params_file, section_parameters

    out: dict[str, Any] = {}
    for path in params_files:
        data = yaml.safe_load(check_params_file(path).read_text()) or {}
        out.update(section_parameters(data, f"/{node}", path))
    return out


# ----------------------------------------------------------------------------------------- files
def check_output(out: Path, in_bag: str | Path) -> None:
    """Refuse, before any work, an OUT_BAG that cannot be created: it (or its ``.partial``) exists, its
    folder is missing or does not take new files (:func:`robot_dynamics_tools.paths.check_new_folder`), or
    it is IN_BAG or inside it.

    Raises:
        UserError: naming ``--out`` and the reason.
    """
    check_new_folder(out, "--out")
    partial = out.with_name(out.name + ".partial")
    if partial.exists() or partial.is_symlink():
        raise UserError(f"--out '{out}': '{partial}' exists already; not overwriting")
    src = Path(in_bag).resolve()
    dst = out.resolve()
    if dst == src or src in dst.parents:
        raise UserError(f"--out '{out}': is IN_BAG '{in_bag}' or inside it")


def write_recording(path: Path, recorded: list, storage: str) -> tuple[int, bool]:
    """Write ``(topic, msgtype, t_ns, raw)`` records, in time order (stable), as a new bag at ``path``.

    Atomic (:class:`robot_dynamics_tools.bags.BagWriter`: a temporary sibling folder renamed to ``path``
    when complete), so ``path`` is either absent or a whole bag. A Ctrl-C during the write is held until
    the bag is complete (then reported as the second value, True).

    Returns:
        ``(messages written, interrupted during the write)``.

    Raises:
        UserError: the bag cannot be written (one line naming it; nothing is left behind).
    """
    import signal

    recorded = sorted(recorded, key=lambda r: r[2])
    late = []
    previous = signal.getsignal(signal.SIGINT)
    in_main = threading_is_main()
    if in_main:
        signal.signal(signal.SIGINT, lambda *_: late.append(True))
    try:
        with bags.BagWriter(path, storage=storage) as bag:
            for topic, mtype, t_ns, raw in recorded:
                bag.write_serialized(topic, mtype, raw, t_ns)
    except OSError as exc:
        raise UserError(f"--out '{path}': cannot write the bag: {exc.strerror or exc}") from None
    finally:
        if in_main:
            signal.signal(signal.SIGINT, previous)
    return len(recorded), bool(late)


def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


# ----------------------------------------------------------------------------------------- replay
def _close(data: np.ndarray, expected: np.ndarray) -> bool:
    """``np.allclose(data, expected, rtol=1e-9, atol=1e-6)`` without its overhead (it runs per command)."""
    return bool((np.abs(data - expected) <= 1e-6 + 1e-9 * np.abs(expected)).all())


class _Matcher:
    """Receives the node's outputs (raw CDR, as they came off the wire): records each, and matches it to the
    oldest pending input whose recomputation it equals (older pending inputs count as dropped), keeping the
    largest difference with its input."""

    def __init__(self, res: ReplayResult, expected: list, pending: deque, now_ns: list, command):
        self.res, self.expected, self.pending, self.now_ns = res, expected, pending, now_ns
        self.topic, self.cls, self.values = command
        self.type = bags.msgtype_name(self.cls)
        self.input_over = False

    def on_command(self, raw: bytes) -> None:
        from rclpy.serialization import deserialize_message

        t = time.perf_counter()
        res, pending, expected = self.res, self.pending, self.expected
        if self.input_over:
            # the input has ended: the node holds its safe command on stale input (by design, on the
            # steady clock); that is not an answer to the replayed states, so it is only counted
            res.after_input += 1
            return
        res.commands += 1
        # the bytes the node wrote, as they came off the wire: re-serializing the message with rclpy
        # (rmw_fastrtps' serialize) gives a length 8 bytes too long for a JointState with empty arrays,
        # the excess uninitialized memory, which rosbags rightly refuses to read
        res.recorded.append((self.topic, self.type, self.now_ns[0], bytes(raw)))
        data = np.asarray(self.values(deserialize_message(raw, self.cls)), dtype=float)
        if not pending:
            res.unmatched_commands += 1
            return
        k = 0
        for j, (i, _) in enumerate(pending):  # the first pending input whose recomputation it matches
            e = expected[i]
            if isinstance(e, np.ndarray) and e.shape == data.shape and _close(data, e):
                k = j
                break
        for _ in range(k):  # older inputs the node skipped
            pending.popleft()
            res.dropped += 1
        i, t_pub = pending.popleft()
        res.matched += 1
        res.latencies.append(t - t_pub)
        e = expected[i]
        if isinstance(e, np.ndarray):
            if e.shape == data.shape:
                j = int(np.argmax(np.abs(data - e))) if data.size else -1
                diff = float(abs(data[j] - e[j])) if data.size else 0.0
            else:
                j, diff = -1, math.inf
            if diff > res.max_abs_diff or res.worst is None:
                res.max_abs_diff = max(res.max_abs_diff, diff)
                res.worst = (i, j, float(data[j]) if j >= 0 else None, float(e[j]) if j >= 0 else None)


@dataclass
class ReplayResult:
    published: int = 0
    trajectories: int = 0
    commands: int = 0
    matched: int = 0
    dropped: int = 0
    unmatched_commands: int = 0
    no_command_expected: int = 0
    #: commands after the last input was answered (the node's safe command on stale input): not replay output
    after_input: int = 0
    latencies: list = field(default_factory=list)
    max_abs_diff: float = 0.0
    #: where max_abs_diff is: (joint state index, output entry (-1: shapes differ), command, recomputation)
    worst: tuple | None = None
    recorded: list = field(default_factory=list)  # (topic, msgtype, t_ns, raw bytes)
    interrupted: bool = False
    wall_s: float = 0.0


class Replayer:
    """The replay node, the node under test and one EventsExecutor, all driven from the calling thread.

    ``window``: inputs in flight without their command in flow-controlled mode. 1 (the default) was the
    fastest measured here (60 s of 500 Hz: 11.2 s at 1, 15.8 s at 2, 16.9 s at 4, 17.5 s at 8).
    """

    def __init__(self, node_name: str, urdf: str, params_files: list[str], *, timeout: float, window: int = 1,
                 domain_id: int | None = None):
        import rclpy
        from rclpy.signals import SignalHandlerOptions

        from robot_dynamics_tools.commands import isolation
        from robot_dynamics_tools.commands.run import check_params_file
        from robot_dynamics_ros.nodes import runtime

        ros_args = []
        for path in params_files:
            ros_args += ["--params-file", str(check_params_file(path))]
        self.ctx = None
        self.ctx, self.domain_id = isolation.init_context(
            domain_id, args=["robot-dynamics-replay", "--ros-args", *ros_args],
            signal_handler_options=SignalHandlerOptions.NO)
        self.timeout = timeout
        self.window = int(window)
        self.node = None
        self.rep = None
        self.executor = None
        try:
            self.node = _start_node(node_name, self.ctx, urdf)
            self.rep = rclpy.create_node("robot_dynamics_replay", context=self.ctx)
            self.executor = runtime.make_executor("events", context=self.ctx)
            self.executor.add_node(self.node)
            self.executor.add_node(self.rep)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        import rclpy

        for n in (self.rep, self.node):
            if n is not None:
                try:
                    n.destroy_node()
                except Exception:  # noqa: BLE001
                    pass
        if self.executor is not None:
            self.executor.shutdown()
        if self.ctx is not None:
            rclpy.try_shutdown(context=self.ctx)

    def run(self, records: list[Record], expected: list, *, rate: float | None) -> ReplayResult:
        """Publish ``records``; ``expected[i]`` is the recomputed command of joint state i (None: no command
        expected). ``rate`` None = flow controlled."""
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState
        from trajectory_msgs.msg import JointTrajectory

        from robot_dynamics_ros.nodes import runtime, wire

        node, rep = self.node, self.rep
        res = ReplayResult()
        now_ns = [records[0].t_ns]  # bag time of the input being replayed (stamps the recording)
        pending: deque = deque()  # (joint state index, publish perf_counter)

        command_topic, command_class, command_values = output_of(node)
        js_in_topic = node.get_parameter("joint_states_topic").value
        traj_in_topic = f"/{node.get_name()}/joint_trajectory"

        matcher = _Matcher(res, expected, pending, now_ns, (command_topic, command_class, command_values))
        on_command = matcher.on_command

        rep.create_subscription(command_class, command_topic, on_command, wire.command_qos(1000), raw=True)
        # every other topic the node publishes is recorded as it comes (raw CDR)
        for pub in list(node.publishers):
            topic = pub.topic_name
            if topic in _INFRA_TOPICS or topic == command_topic:
                continue
            mtype = bags.msgtype_name(pub.msg_type)
            rep.create_subscription(pub.msg_type, topic,
                                    lambda raw, topic=topic, mtype=mtype:
                                    res.recorded.append((topic, mtype, now_ns[0], bytes(raw))),
                                    100, raw=True)
        pub_js = rep.create_publisher(JointState, js_in_topic, wire.joint_state_qos(1000))
        pub_traj = rep.create_publisher(JointTrajectory, traj_in_topic, 10)
        pub_clock = rep.create_publisher(Clock, "/clock", 10)
        clock = Clock()

        def publish_clock(t_ns: int) -> None:
            clock.clock.sec, clock.clock.nanosec = divmod(t_ns, 1_000_000_000)
            pub_clock.publish(clock)

        spin_once = self.executor.spin_once
        _Interrupt.in_loop = True  # from here on a signal is noted and raised from Python code (spin)

        def spin(timeout_sec: float) -> None:
            spin_once(timeout_sec=timeout_sec)
            if _Interrupt.hit:
                raise KeyboardInterrupt

        # discovery, and the node's clock at the first record's time before anything is published
        deadline = time.monotonic() + 10.0
        while True:
            publish_clock(records[0].t_ns)
            spin(timeout_sec=0.01)
            if (node.get_clock().now().nanoseconds >= records[0].t_ns and pub_js.get_subscription_count() > 0
                    and rep.count_publishers(command_topic) > 0):
                break
            if time.monotonic() > deadline:
                raise UserError(f"replay: node '{node.get_name()}' did not connect to {js_in_topic} / "
                                f"{command_topic} within 10 s")
        # as the node runs when it ships (spin_until_shutdown): long-lived objects out of the collector's way.
        # A full collection over this process's heap stalls the node for 0.1 s or more, longer than its
        # state_timeout by arrival, and the node would rightly treat its input as stale
        runtime.freeze_gc()
        t_wall0 = time.perf_counter()
        t_bag0 = records[0].t_ns
        try:
            for r in records:
                if rate is not None:  # recorded pace: wait (spinning) until this record's wall time
                    due = t_wall0 + (r.t_ns - t_bag0) * 1e-9 / rate
                    while (left := due - time.perf_counter()) > 0:
                        spin(timeout_sec=min(left, 0.005))
                now_ns[0] = r.t_ns
                publish_clock(r.t_ns)
                # the node must read this record's time before the record reaches it: /clock and the input
                # are different topics, and DDS does not order them, so the node could otherwise stamp the
                # record (a trajectory's start, a state's age) with the previous time, differently run to run
                wait_until = time.perf_counter() + self.timeout
                while node.get_clock().now().nanoseconds < r.t_ns and time.perf_counter() < wait_until:
                    spin(timeout_sec=0.001)
                res.recorded.append((r.topic, r.msgtype, r.t_ns, r.raw))
                if r.index < 0:
                    accepted = getattr(node, "trajectories_accepted", 0) + getattr(node, "trajectories_rejected", 0)
                    pub_traj.publish(r.msg)
                    res.trajectories += 1
                    # the node must hold the trajectory before the next joint state is sampled
                    wait_until = time.perf_counter() + self.timeout
                    while (getattr(node, "trajectories_accepted", 0) + getattr(node, "trajectories_rejected", 0)
                           == accepted and time.perf_counter() < wait_until):
                        spin(timeout_sec=0.001)
                    continue
                e = expected[r.index]
                if e is None:
                    res.no_command_expected += 1
                else:
                    pending.append((r.index, time.perf_counter()))
                pub_js.publish(r.msg)
                res.published += 1
                if rate is None:  # flow control: at most `window` inputs without their command
                    wait_until = time.perf_counter() + self.timeout
                    while len(pending) >= self.window and time.perf_counter() < wait_until:
                        spin(timeout_sec=0.001)
                    while len(pending) >= self.window:  # timed out: a late command counts as unmatched
                        pending.popleft()
                        res.dropped += 1
                else:
                    spin(timeout_sec=0)
            wait_until = time.perf_counter() + self.timeout  # drain
            while pending and time.perf_counter() < wait_until:
                spin(timeout_sec=0.001)
            matcher.input_over = True
            settle = time.perf_counter() + 0.2  # what the node publishes after its last command
            while time.perf_counter() < settle:
                spin(timeout_sec=0.01)
        except KeyboardInterrupt:
            res.interrupted = True
        finally:
            _Interrupt.in_loop = False
        res.dropped += len(pending)
        pending.clear()
        res.wall_s = time.perf_counter() - t_wall0
        return res


def output_of(node):
    """``(topic, message class, values of a message)`` of the output replay matches per joint state: the
    effort command of a control node, the ``~/external_torque`` efforts (τ_ext) of the observer node."""
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    pub_tau = getattr(node, "pub_tau", None)
    if pub_tau is not None:
        return pub_tau.topic_name, JointState, lambda m: m.effort
    topic = getattr(node, "command_topic", None) or \
        f"/{node.get_parameter('controller_name').value.strip('/')}/commands"
    return topic, Float64MultiArray, lambda m: m.data


def collision_onsets(recorded: list, topic: str) -> int:
    """How many times the ``std_msgs/Bool`` records of ``topic`` turn true (the observer's ``~/collision``)."""
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Bool

    onsets, last = 0, False
    for t, _, _, raw in sorted((r for r in recorded if r[0] == topic), key=lambda r: r[2]):
        value = bool(deserialize_message(raw, Bool).data)
        onsets += int(value and not last)
        last = value
    return onsets


def _start_node(name: str, ctx, urdf: str):
    """Create node ``name`` as ``robot-dynamics run`` does, with use_sim_time (and per-message ticks)."""
    from rclpy.parameter import Parameter

    from robot_dynamics_tools.commands.run import node_class

    cls = node_class(name)
    # latest_state_wins false: the node answers every state in order (not only the newest queued one), so
    # each replayed input has its own command to compare
    # arrival_clock node: the node's staleness by arrival follows the bag's /clock, so a replay at any
    # speed (or a stall of this machine) ages the input as the recording did
    overrides = [Parameter("urdf_path", value=str(urdf)), Parameter("use_sim_time", value=True),
                 Parameter("latest_state_wins", value=False), Parameter("arrival_clock", value="node")]
    if name == "computed_torque":
        overrides.append(Parameter("tick_source", value="joint_states"))
    try:
        return cls(context=ctx, parameter_overrides=overrides)
    except UserError as exc:
        raise UserError(f"node '{name}': {exc}") from None
    except (ValueError, TypeError) as exc:
        raise UserError(f"node '{name}': {exc}") from None


def worst_difference(worst: tuple | None, records: list[Record], names: list[str]) -> dict | None:
    """Where the largest |command - recomputation| is: the joint state (its index among the replayed joint
    states and its bag time, s), the joint, and both values; None when no command was compared."""
    if worst is None:
        return None
    i, j, got, want = worst
    t_ns = next(r.t_ns for r in records if r.index == i)
    return {"input": i, "t_s": t_ns * 1e-9, "joint": names[j] if 0 <= j < len(names) else None,
            "command": got, "recomputed": want}


def percentiles_us(latencies: list[float]) -> dict[str, float | None]:
    if not latencies:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    a = np.asarray(latencies) * 1e6
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"p50": round(float(p50), 1), "p90": round(float(p90), 1), "p99": round(float(p99), 1),
            "max": round(float(a.max()), 1)}


class _Interrupt:
    """SIGINT and SIGTERM during ``replay``. Inside the replay loop the handler only takes note (an
    exception raised while the executor runs native code would surface as a RuntimeError); the loop checks
    after every spin and stops as on Ctrl-C, keeping what was recorded. Outside the loop it raises
    KeyboardInterrupt."""

    in_loop = False
    hit = False

    @classmethod
    def handler(cls, signum, frame):
        if cls.in_loop:
            cls.hit = True
            return
        raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    import signal

    previous = {}
    if threading_is_main():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, _Interrupt.handler)
    _Interrupt.in_loop = _Interrupt.hit = False
    try:
        return _run(args)
    except KeyboardInterrupt:  # before the replay loop (which keeps what it has) or after the write
        if Path(args.out).exists() or Path(args.out + ".partial").exists():
            print("interrupted after the recording was written", flush=True)
        else:
            print(f"interrupted before the replay started: nothing was written to '{args.out}'", flush=True)
        return 130
    finally:
        _Interrupt.in_loop = False
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(args: argparse.Namespace) -> int:
    from robot_dynamics_ros import robots
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.nodes import parameters

    if args.rate is not None and not (args.rate > 0 and math.isfinite(args.rate)):
        raise UserError(f"--rate {args.rate}: must be a positive number")
    if not args.timeout > 0:
        raise UserError(f"--timeout {args.timeout}: must be > 0 s")
    rate = None if args.as_fast_as_possible else (args.rate if args.rate is not None else 1.0)
    out = Path(args.out)
    if not Path(args.in_bag).exists():
        raise UserError(f"IN_BAG '{args.in_bag}': no such file or directory")
    check_output(out, args.in_bag)
    if not args.max_input_mb > 0:
        raise UserError(f"--max-input-mb {args.max_input_mb}: must be > 0")
    check_input_size(args.in_bag, args.max_input_mb * 2**20, "IN_BAG", "--max-input-mb")
    robots.resolve(args.urdf)  # UserError naming the file

    params = node_parameters(args.params, args.node)
    params["urdf_path"] = args.urdf
    traj_topic = args.trajectory_topic
    if traj_topic is None and args.node == "computed_torque":
        with bags.BagReader(args.in_bag) as bag:
            found = [t for t, m in bag.topics.items() if m == bags.JOINT_TRAJECTORY]
        traj_topic = found[0] if found else None
    records, in_storage = read_inputs(args.in_bag, args.joint_states_topic, traj_topic)
    storage = args.storage or (in_storage if in_storage in bags.STORAGE_FORMATS else "mcap")  # ROS 1 in: mcap

    source, held, _ = parameters.resolve_robot_source(params)
    model = RobotModel.from_urdf(source, held_joints=held, joint_limits=params.get("joint_limits_path") or None)
    ignored_names = check_joint_names(records, model, args.joint_states_topic)
    replayer = Replayer(args.node, args.urdf, args.params, timeout=args.timeout, domain_id=args.domain_id)
    try:
        node = replayer.node
        node_params = {k: v.value for k, v in node.get_parameters_by_prefix("").items()}
        # the node's trajectory clock counts from its start time (sim time: 0 before any /clock)
        epoch = int(getattr(getattr(node, "core", None), "epoch_ns", getattr(node, "_epoch_ns", 0)))
        recomputation = CoreRecomputation(args.node, model, node_params, epoch_ns=epoch)
        expected = recomputation.expected(records)
        res = replayer.run(records, expected, rate=rate)
        output_topic = output_of(node)[0]
        collision_topic = getattr(getattr(node, "pub_collision", None), "topic_name", None)
        counters = dict(getattr(getattr(replayer.node, "diag", None), "counters", {}) or
                        getattr(getattr(replayer.node, "diagnostics", None), "counters", {}) or {})
    finally:
        replayer.close()

    target = out.with_name(out.name + ".partial") if res.interrupted else out
    n_written, interrupted_writing = write_recording(target, res.recorded, storage)
    res.interrupted = res.interrupted or interrupted_writing
    outputs = sum(1 for r in res.recorded if r[0] not in (args.joint_states_topic, traj_topic))
    summary = {
        "in_bag": str(args.in_bag), "out_bag": str(target), "storage": storage, "node": args.node,
        "mode": "as_fast_as_possible" if rate is None else f"rate {rate:g}",
        "messages_in": res.published, "trajectories_in": res.trajectories, "messages_out": outputs,
        "commands": res.commands, "dropped": res.dropped, "unmatched_commands": res.unmatched_commands,
        "no_command_expected": res.no_command_expected, "commands_after_input": res.after_input,
        "latency_us": percentiles_us(res.latencies),
        "max_abs_diff_nm": res.max_abs_diff if res.matched else None,
        "max_abs_diff_at": worst_difference(res.worst, records, recomputation.output_names),
        "bag_duration_s": round((records[-1].t_ns - records[0].t_ns) * 1e-9, 6),
        "wall_s": round(res.wall_s, 3), "node_counters": counters, "interrupted": res.interrupted,
        "domain_id": replayer.domain_id,
        "recorded": n_written, "output_topic": output_topic, "ignored_joint_names": ignored_names,
    }
    if collision_topic is not None:
        summary["collision_onsets"] = collision_onsets(res.recorded, collision_topic)
    ok = res.dropped == 0 and (summary["max_abs_diff_nm"] is None or summary["max_abs_diff_nm"] <= args.tolerance)
    summary["ok"] = bool(ok and not res.interrupted)
    lat = summary["latency_us"]
    print(f"replayed {res.published} joint states ({res.trajectories} trajectories) from {args.in_bag} into "
          f"{args.node} in {res.wall_s:.2f} s ({summary['mode']})")
    print(f"  commands {res.commands}, dropped {res.dropped}, unmatched {res.unmatched_commands}, "
          f"no command expected {res.no_command_expected}")
    if ignored_names:
        print(f"  joint state names not in the model, ignored (as the node ignores them): {ignored_names}")
    if lat["p50"] is not None:
        print(f"  latency p50 {lat['p50']} us, p90 {lat['p90']} us, p99 {lat['p99']} us, max {lat['max']} us")
    at = summary["max_abs_diff_at"]
    where = "" if at is None else (
        f" at input {at['input']} (bag time {at['t_s']:.6f} s), joint {at['joint']}: command {at['command']}, "
        f"recomputed {at['recomputed']}" if at["joint"] is not None else
        f" at input {at['input']} (bag time {at['t_s']:.6f} s): the command has another length")
    print(f"  max |command - offline recomputation| = {summary['max_abs_diff_nm']} N·m{where} "
          f"(tolerance {args.tolerance:g})")
    if interrupted_writing:
        print(f"  interrupted while writing: the write was completed first; all {n_written} messages are in "
              f"'{target}'")
    elif res.interrupted:
        print(f"  interrupted: the {n_written} messages recorded so far are in '{target}' (not '{out}')")
    else:
        print(f"  recorded {n_written} messages to {target} ({storage})")
    print(json.dumps(summary), flush=True)
    if res.interrupted:
        return 130
    return 0 if ok else 2
