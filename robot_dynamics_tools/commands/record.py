"""``robot-dynamics record``: record named topics of the running nodes into a rosbag2 (the ``ros2 bag record``
this venv lacks).

    robot-dynamics record /joint_states /effort_controller/commands --out run1 --duration 10

Each topic's type is taken from the ROS graph (waiting up to ``--discovery-timeout`` s for a publisher);
messages are stored as received (serialized CDR, ``raw=True`` subscriptions, no re-encoding), stamped with
the receive time on the system clock, like ``ros2 bag record``. QoS: best effort and volatile, which
match any publisher, except a topic all of whose publishers are reliable and transient local
(``robot_description``), which is subscribed so too, so that the latched message is recorded. The bag is written with
:class:`~robot_dynamics_tools.bags.BagWriter` (mcap by default, the rosbag2 default since Jazzy): readable
by ``rosbags`` and by ``robot-dynamics replay``. It joins the caller's ROS domain (``ROS_DOMAIN_ID``), or
``--domain-id``. Ends after ``--duration`` s or at Ctrl-C (the bag is kept either way); a message of a type
the bag's typestore lacks makes that topic refused at start with one line.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import time

from robot_dynamics_ros.errors import UserError
from robot_dynamics_tools import bags

__all__ = ["configure_parser", "run", "record"]


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topics", nargs="+", metavar="TOPIC", help="topics to record (absolute names)")
    parser.add_argument("--out", required=True, metavar="BAG", help="rosbag2 directory to create (must not exist)")
    parser.add_argument("--duration", type=float, required=True, help="seconds to record (wall clock)")
    parser.add_argument("--storage", choices=bags.STORAGE_FORMATS, default="mcap", help="bag storage format")
    parser.add_argument("--discovery-timeout", type=float, default=5.0,
                        help="seconds to wait for each topic to have a publisher")
    parser.add_argument("--domain-id", type=int, default=None, help="ROS domain (default: ROS_DOMAIN_ID)")


def _message_class(msgtype: str):
    pkg, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), name)


def _qos(node, topic: str):
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # rclpy: heavy, only when recording

    infos = node.get_publishers_info_by_topic(topic)
    latched = bool(infos) and all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
                                  and i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
    if latched:   # the stored message reaches only a reliable transient-local reader
        return QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    return QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT, durability=DurabilityPolicy.VOLATILE)


def _discover(node, executor, topics: list[str], timeout: float) -> dict[str, str]:
    end = time.monotonic() + timeout
    found: dict[str, str] = {}
    while True:
        graph = dict(node.get_topic_names_and_types())
        for t in topics:
            if t not in found and graph.get(t) and node.count_publishers(t) > 0:
                types = graph[t]
                if len(types) != 1:
                    raise UserError(f"topic '{t}' is published with several types {types}; cannot record it")
                found[t] = types[0]
        if len(found) == len(topics) or time.monotonic() > end:
            break
        executor.spin_once(timeout_sec=0.05)
    missing = [t for t in topics if t not in found]
    if missing:
        raise UserError(f"no publisher of {missing} within {timeout:g} s (is the node running, on this "
                        "ROS_DOMAIN_ID?)")
    return found


def record(topics: list[str], out: str, duration: float, *, storage: str = "mcap", discovery_timeout: float = 5.0,
           context=None) -> dict:
    """Record ``topics`` for ``duration`` s into the bag ``out``; returns ``{topic: message count}``.

    Args:
        context: an initialised rclpy context (default: a new one on the environment's domain).

    Raises:
        UserError: a bad duration or topic name, no publisher in time, a type the typestore lacks, the
            bag exists (:class:`~robot_dynamics_tools.bags.BagError`).
    """
    import rclpy  # heavy: imported only when recording (the CLI stays light)

    from robot_dynamics_ros.nodes.runtime import make_executor

    if not (math.isfinite(duration) and duration > 0):
        raise UserError(f"--duration {duration!r}: must be a positive number of seconds")
    bad = [t for t in topics if not t.startswith("/")]
    if bad:
        raise UserError(f"topic names must be absolute (start with '/'): {bad}")
    own = context is None
    if own:
        context = rclpy.Context()
        rclpy.init(context=context)
    node = executor = None
    counts = {t: 0 for t in topics}
    try:
        node = rclpy.create_node("robot_dynamics_record", context=context)
        executor = make_executor("single", context=context)
        executor.add_node(node)
        types = _discover(node, executor, list(topics), discovery_timeout)
        store = bags.typestore("latest")
        lacking = [f"{t} ({m})" for t, m in types.items() if m not in store.types]
        if lacking:
            raise UserError(f"cannot record {lacking}: type not in the bag's typestore")
        with bags.BagWriter(out, storage=storage, on_error="keep") as bag:
            for t, m in types.items():
                bag.add_topic(t, m)

                def on_msg(raw, t=t, m=m):
                    bag.write_serialized(t, m, raw, time.time_ns())
                    counts[t] += 1

                node.create_subscription(_message_class(m), t, on_msg, _qos(node, t), raw=True)
            end = time.monotonic() + duration
            try:
                while time.monotonic() < end:
                    executor.spin_once(timeout_sec=min(0.05, max(0.0, end - time.monotonic())))
            except KeyboardInterrupt:
                pass
    finally:
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        if own:
            rclpy.try_shutdown(context=context)
    return counts


def run(args) -> int:
    import rclpy  # heavy: imported only when recording (the CLI stays light)

    ctx = rclpy.Context()
    rclpy.init(context=ctx, **({} if args.domain_id is None else {"domain_id": args.domain_id}))
    try:
        counts = record(args.topics, args.out, args.duration, storage=args.storage,
                        discovery_timeout=args.discovery_timeout, context=ctx)
    finally:
        rclpy.try_shutdown(context=ctx)
    print(json.dumps({"bag": args.out, "storage": args.storage, "messages": counts}))
    return 0
