"""Benchmark: the external-torque observer against gravity compensation, per joint state, in one run.

Run:  .venv/bin/python benchmarks/bench_observer.py [--json out.json] [--duration S] [--blocks N]

Two comparisons on the 7-DoF Panda (fingers held), each interleaved (ABAB..., :func:`robot_dynamics_testing.latency.
interleaved_rounds`) so that the machine's speed drifting over the run hits both alike:

(a) **core step**: the ROS-free cores a node calls per message — ``GravityCompensator`` and
    ``ExternalTorqueCore`` (``on_joint_state`` + ``step``) — fed the same joint states: the probe poses of
    :func:`robot_dynamics_testing.latency.probe_positions` at 1 kHz stamps, velocities and accelerations from their
    differences, efforts their inverse dynamics and friction, so the observer runs its ordinary
    no-collision branch with its default thresholds. ``--blocks`` × ``--core-repeats`` rounds of one timed
    pass per core (µs per message); the ratio observer / gravity of each round (back to back) and its
    median and quartiles, and the ratio of the two fastest passes.
(b) **node per message**: the gravity-compensation node (:func:`robot_dynamics_testing.latency.make_gravity_node`) and
    the ``external_torque_observer`` node, each alone in a fresh ``rclpy.Context`` with the events executor,
    under the same 1 kHz ``joint_states`` stream (:class:`robot_dynamics_testing.latency.StampedPublisher`, the probe
    poses, zero velocities, no efforts: the observer balances a commanded torque, sent once before the
    stream, with thresholds above any residual so that it stays in the no-collision branch as the gravity
    node stays in its normal one), every output received by a raw subscription that only counts. CPU per
    message of the executor thread (the node's callbacks, the receiver's and rclpy's executor; /proc clock
    ticks of that thread) over the window after a warm-up, divided by the messages the node received; also
    the whole process minus the publisher thread, and the node's own callback wall time (its diagnostics
    latency window, p50).

The last stdout line is a JSON summary with ``core_us`` / ``core_ratio`` and ``node_cpu_us_per_msg`` /
``node_cpu_ratio`` (pooled) / ``node_cpu_ratio_median_of_rounds`` (observer / gravity; the issue's target:
ratio ≤ 1). Timings depend on the machine and
its load: run it alone for publishable numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np  # noqa: E402

from robot_dynamics_testing import latency

KINDS = ("gravity", "observer")
OBSERVER_TOPIC = "/external_torque_observer/external_torque"
#: the command topic the observer reads its (commanded) torque from in (b)
OBSERVER_COMMANDS = "/bench_observer/commands"


# ------------------------------------------------------------------------------------------ (a) the cores
def core_states(robot, count: int, rate_hz: float = 1000.0):
    """``count`` JointStateFields (model joint order names) of the probe poses: stamps at ``rate_hz``,
    velocities and accelerations by central differences, efforts the inverse dynamics plus friction of
    those (``PinocchioDynamics.rnea`` + ``friction_torque``), so τ_ext ≈ 0 and the observer runs the branch
    it runs almost always: no collision, default thresholds."""
    from robot_dynamics_ros.control.joint_mapping import JointStateFields
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics

    engine = PinocchioDynamics(_model(robot))
    q = latency.probe_positions(robot, count + 2)
    qd = (q[2:] - q[:-2]) * (rate_hz / 2)
    qdd = (q[2:] - 2 * q[1:-1] + q[:-2]) * rate_hz**2
    q = q[1:-1]
    tau = [engine.rnea(q[k], qd[k], qdd[k]) + engine.friction_torque(qd[k]) for k in range(count)]
    names = tuple(n.encode() for n in robot.joint_names)
    t0 = 10**12
    return [JointStateFields(t0 + int(k * 1e9 / rate_hz), names, tuple(q[k].tolist()), tuple(qd[k].tolist()),
                             tuple(tau[k].tolist())) for k in range(count)]


def _model(robot):
    from robot_dynamics_ros.model import RobotModel

    return RobotModel.from_urdf(robot.urdf, held_joints=robot.held_joints)


def make_core(kind: str, robot):
    from robot_dynamics_ros.control.external_torque import ExternalTorqueCore
    from robot_dynamics_ros.control.gravity_compensator import GravityCompensator

    model = _model(robot)
    return GravityCompensator(model) if kind == "gravity" else ExternalTorqueCore(model)


def time_core(core, states) -> float:
    """µs per message of ``on_joint_state`` + ``step`` over ``states``; each pass continues the stamps of
    the previous one (shifted copies made before the clock starts), so every state is a fresh sample."""
    shift = getattr(core, "_bench_shift", 0)
    span = states[-1].stamp_ns - states[0].stamp_ns + 1_000_000
    fields = [f._replace(stamp_ns=f.stamp_ns + shift) for f in states] if shift else states
    stamps = [f.stamp_ns for f in fields]
    on_js, step = core.on_joint_state, core.step
    t0 = time.perf_counter()
    for f, t in zip(fields, stamps):
        on_js(f, t, t)
        step(t, t)
    dt = time.perf_counter() - t0
    core._bench_shift = shift + span
    return dt / len(states) * 1e6


def bench_cores(robot, count: int, blocks: int, repeats: int) -> dict:
    """``blocks · repeats`` rounds, each one timed pass of every core over the same states (order ABBA...):
    the ratio of each round's two passes (run back to back, so the machine's drift over the run cancels)
    and its median; per core the median and the minimum pass (the least disturbed one)."""
    states = core_states(robot, count)
    cores = {k: make_core(k, robot) for k in KINDS}
    for k in KINDS:  # warm-up: compile / load the kernels, fill caches
        time_core(cores[k], states[:200])
    check = cores["observer"].step(states[-1].stamp_ns, states[-1].stamp_ns)
    passes = {k: [] for k in KINDS}
    for order in latency.interleaved_rounds(len(KINDS), blocks * repeats):
        for i in order:
            passes[KINDS[i]].append(time_core(cores[KINDS[i]], states))
    ratios = [o / g for g, o in zip(passes["gravity"], passes["observer"])]
    last = cores["observer"]._last  # the shifted stamps: the last step must still have run normally
    med = {k: round(statistics.median(v), 2) for k, v in passes.items()}
    low = {k: round(min(v), 2) for k, v in passes.items()}
    return {"core_us": med, "core_us_min": low,
            "core_ratio": round(statistics.median(ratios), 3),
            "core_ratio_of_minima": round(low["observer"] / low["gravity"], 3),
            "core_ratio_quartiles": [round(float(x), 3) for x in np.percentile(ratios, [25, 75])],
            "core_rounds": len(ratios),
            "observer_last_level": None if last is None else int(last.level),
            "observer_max_abs_tau_ext_nm": None if last is None or last.tau_ext is None
            else round(float(np.abs(last.tau_ext).max()), 4),
            "observer_warmup_reason": check.reason, "messages_per_pass": count}


# ------------------------------------------------------------------------------------------- (b) the nodes
def make_observer_node(context, robot):
    """The external-torque observer node configured like :func:`robot_dynamics_testing.latency.make_gravity_node`
    (same robot, topics through QoS overrides, every state answered)."""
    from rclpy.parameter import Parameter

    from robot_dynamics_ros.nodes.external_torque_observer import ExternalTorqueObserverNode

    topic = latency.JOINT_STATES_TOPIC.strip("/")
    overrides = [
        Parameter("urdf_path", value=robot.urdf),
        Parameter("held_joint_names", value=list(robot.held_joints)),
        Parameter("held_joint_positions", value=[float(v) for v in robot.held_joints.values()]),
        Parameter("joint_states_topic", value="/" + topic),
        Parameter("latest_state_wins", value=False),
        Parameter("torque_source", value="commanded"),
        Parameter("command_topic", value=OBSERVER_COMMANDS),
        Parameter("threshold", value=[1e9]),
        Parameter(f"qos_overrides./{topic}.subscription.depth", value=latency.qos_depth()),
        Parameter(f"qos_overrides./{topic}.subscription.reliability", value="reliable"),
    ]
    return ExternalTorqueObserverNode(context=context, parameter_overrides=overrides)


class _Counter:
    """A node with one raw subscription that counts what arrives (the same cost for either output type)."""

    def __init__(self, context, msg_type, topic: str):
        import rclpy

        self.node = rclpy.create_node("bench_observer_counter", context=context)
        self.count = 0
        self.node.create_subscription(msg_type, topic, self._on, max(1000, latency.qos_depth()), raw=True)

    def _on(self, raw) -> None:
        self.count += 1


def _received(node) -> int:
    diag = getattr(node, "diag", None)
    return int((getattr(diag, "counters", None) or {}).get("received", 0))


def run_node_block(kind: str, robot, duration_s: float, warmup_s: float, rate_hz: float) -> dict:
    """One window of one node under the 1 kHz stream; CPU per message of the executor thread."""
    import rclpy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from robot_dynamics_ros.nodes.runtime import spin_until_shutdown

    n_warm, n_meas = int(round(warmup_s * rate_hz)), int(round(duration_s * rate_hz))
    positions = latency.probe_positions(robot, n_warm + n_meas)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    nodes, executor, thread = [], None, None
    stop = threading.Event()
    try:
        executor = latency.make_executor("events", ctx)
        if kind == "gravity":
            nut = latency.make_gravity_node(ctx, robot)
            counter = _Counter(ctx, Float64MultiArray, "/" + latency.COMMAND_TOPIC)
        else:
            nut = make_observer_node(ctx, robot)
            counter = _Counter(ctx, JointState, OBSERVER_TOPIC)
        nodes += [nut, counter.node]
        for n in nodes:
            executor.add_node(n)
        io = rclpy.create_node("bench_observer_io", context=ctx)
        nodes.append(io)
        tid = []

        def spin():
            tid.append(threading.get_native_id())
            spin_until_shutdown(executor, ctx, until=stop.is_set, period=0.05)

        thread = threading.Thread(target=spin, name="bench-observer-spin", daemon=True)
        thread.start()
        if kind == "observer":
            cmd = io.create_publisher(Float64MultiArray, OBSERVER_COMMANDS, 10)
            deadline = time.monotonic() + 20
            while cmd.get_subscription_count() < 1 and time.monotonic() < deadline:
                time.sleep(0.02)
            cmd.publish(Float64MultiArray(data=[0.0] * len(robot.joint_names)))
        while not tid:
            time.sleep(0.01)
        marks: dict[str, tuple] = {}

        def probe() -> float:
            cpu = latency.cpu_seconds("self", tid[0])
            marks["mark" if "mark" not in marks else "end"] = (cpu, latency.cpu_seconds("self"), _received(nut),
                                                              counter.count)
            return cpu

        pub = latency.StampedPublisher(io, latency.JOINT_STATES_TOPIC, robot.joint_names, positions, rate_hz,
                                       mark=n_warm, cpu_probe=probe)
        deadline = time.monotonic() + 20
        while pub.publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)
        pub.start()
        pub.join(warmup_s + duration_s + 30)
        time.sleep(0.2)  # the last outputs arrive
        if pub.at_mark is None or pub.at_end is None:
            raise RuntimeError("the publisher did not finish its messages")
        cpu0, proc0, recv0, out0 = marks["mark"]
        cpu1, proc1, recv1, out1 = marks["end"]
        pub_cpu = pub.at_end[1] - pub.at_mark[1]
        wall = pub.at_end[2] - pub.at_mark[2]
        received = recv1 - recv0
        lat = getattr(getattr(nut, "diag", None), "latency", None)
        p50 = round(float(lat.summary()["p50_us"]), 2) if lat is not None else None
        return {"kind": kind, "window_s": round(wall, 3), "sent": n_meas, "received": received,
                "outputs": out1 - out0,
                "executor_cpu_us_per_msg": round((cpu1 - cpu0) * 1e6 / max(received, 1), 2),
                "process_cpu_us_per_msg": round((proc1 - proc0 - pub_cpu) * 1e6 / max(received, 1), 2),
                "callback_p50_us": p50}
    finally:
        stop.set()
        if thread is not None:
            thread.join(5.0)
        for n in nodes:
            try:
                n.destroy_node()
            except Exception:  # noqa: BLE001 - teardown
                pass
        if executor is not None:
            executor.shutdown()
        rclpy.shutdown(context=ctx)


def _pool(blocks: list[dict], key: str) -> float | None:
    """Σ CPU / Σ messages over blocks, from the per-block rates."""
    total = sum(b["received"] for b in blocks)
    if not total:
        return None
    return round(sum(b[key] * b["received"] for b in blocks) / total, 2)


def bench_nodes(robot, duration_s: float, blocks: int, warmup_s: float, rate_hz: float, progress) -> dict:
    per = {k: [] for k in KINDS}
    for order in latency.interleaved_rounds(len(KINDS), blocks):
        for i in order:
            k = KINDS[i]
            r = run_node_block(k, robot, duration_s / blocks, warmup_s, rate_hz)
            per[k].append(r)
            progress(f"node {k} block {len(per[k])}: {r['executor_cpu_us_per_msg']} us CPU/msg (executor "
                     f"thread), {r['process_cpu_us_per_msg']} us (process), {r['received']}/{r['sent']} "
                     f"received, {r['outputs']} outputs")
    cpu = {k: _pool(v, "executor_cpu_us_per_msg") for k, v in per.items()}
    proc = {k: _pool(v, "process_cpu_us_per_msg") for k, v in per.items()}
    # the ratio within each round (the two blocks run back to back): less exposed to the machine's drift
    rounds = [o["executor_cpu_us_per_msg"] / g["executor_cpu_us_per_msg"]
              for g, o in zip(per["gravity"], per["observer"]) if g["executor_cpu_us_per_msg"]]
    return {"node_cpu_us_per_msg": cpu, "node_process_cpu_us_per_msg": proc,
            "node_cpu_ratio_per_round": [round(x, 3) for x in rounds],
            "node_cpu_ratio_median_of_rounds": round(statistics.median(rounds), 3) if rounds else None,
            "node_cpu_ratio": round(cpu["observer"] / cpu["gravity"], 3) if cpu["gravity"] else None,
            "node_process_cpu_ratio": round(proc["observer"] / proc["gravity"], 3) if proc["gravity"] else None,
            "node_blocks": per}


# ------------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_observer.py", description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the result document here")
    parser.add_argument("--duration", type=float, default=24.0,
                        help="total measured window per node, s, split over the blocks (default 24)")
    parser.add_argument("--blocks", type=int, default=4, help="interleaved blocks per comparison (default 4)")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up per node block, s (default 1)")
    parser.add_argument("--rate", type=float, default=1000.0, help="joint-state rate, Hz (default 1000)")
    parser.add_argument("--core-messages", type=int, default=5000, help="states per timed core pass")
    parser.add_argument("--core-repeats", type=int, default=5, help="timed core passes per block (median)")
    parser.add_argument("--no-nodes", action="store_true", help="only (a), the cores")
    parser.add_argument("--domain-id", type=int, default=None,
                        help="DDS domain (default: a private one chosen by the code, never $ROS_DOMAIN_ID)")
    args = parser.parse_args(argv)
    if not (args.duration > 0 and args.blocks >= 1 and args.rate > 0 and args.core_messages >= 10):
        parser.error("--duration, --rate must be > 0, --blocks ≥ 1, --core-messages ≥ 10")
    domain = latency.isolate_dds(args.domain_id)
    from robot_dynamics_testing.reference import ProbeRobot

    robot = ProbeRobot.panda()

    def progress(line: str) -> None:
        print(line, flush=True)

    doc = {"benchmark": "observer", "machine": latency.machine_description(), "domain_id": domain,
           "config": {k: v for k, v in vars(args).items() if k != "json"} | {"json": str(args.json)}}
    doc.update(bench_cores(robot, args.core_messages, args.blocks, args.core_repeats))
    progress(f"core step (median pass): gravity {doc['core_us']['gravity']} us, observer "
             f"{doc['core_us']['observer']} us; ratio per round: median {doc['core_ratio']}, quartiles "
             f"{doc['core_ratio_quartiles']} over {doc['core_rounds']} rounds; ratio of the minima "
             f"{doc['core_ratio_of_minima']} ({doc['core_us_min']['gravity']} / {doc['core_us_min']['observer']} us)")
    if not args.no_nodes:
        doc.update(bench_nodes(robot, args.duration, args.blocks, args.warmup, args.rate, progress))
        progress(f"node CPU per message (executor thread): gravity {doc['node_cpu_us_per_msg']['gravity']} us, "
                 f"observer {doc['node_cpu_us_per_msg']['observer']} us, ratio {doc['node_cpu_ratio']} (per round "
                 f"{doc['node_cpu_ratio_per_round']}, median {doc['node_cpu_ratio_median_of_rounds']}); "
                 f"process: ratio {doc['node_process_cpu_ratio']}")
    doc["machine"]["loadavg_1min_at_end"] = round(os.getloadavg()[0], 2)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    summary = {k: doc.get(k) for k in ("core_us", "core_us_min", "core_ratio", "core_ratio_of_minima",
                                       "node_cpu_us_per_msg", "node_cpu_ratio",
                                       "node_cpu_ratio_median_of_rounds", "node_process_cpu_us_per_msg",
                                       "node_process_cpu_ratio")}
    summary["benchmark"] = "observer"
    summary["loadavg"] = [doc["machine"]["loadavg_1min_at_start"], doc["machine"]["loadavg_1min_at_end"]]
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
