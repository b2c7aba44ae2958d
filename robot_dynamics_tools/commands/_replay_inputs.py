"""``robot-dynamics replay``'s inputs: the joint states (and trajectories) of a bag, in bag order, as CDR bytes
and rclpy messages, checked against the robot model before anything runs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robot_dynamics_ros.control.joint_mapping import likely_misspellings
from robot_dynamics_ros.errors import UserError
from robot_dynamics_tools import bags


@dataclass
class Record:
    """One input record: bag time, topic, type, CDR bytes and the rclpy message."""

    t_ns: int
    topic: str
    msgtype: str
    raw: bytes
    msg: Any
    index: int = -1  # index among joint states (-1: a trajectory)


def read_inputs(path: str, js_topic: str, traj_topic: str | None) -> tuple[list[Record], str]:
    """Read the joint states (and trajectories) of a bag, in time order; returns ``(records, storage)``.

    Raises:
        BagError: missing topic, wrong type, truncated/corrupt bag (naming bag and topic).
    """
    from rclpy.serialization import deserialize_message

    wanted = {js_topic: bags.JOINT_STATE}
    if traj_topic:
        wanted[traj_topic] = bags.JOINT_TRAJECTORY
    records: list[Record] = []
    with bags.BagReader(path) as bag:
        bag.check_topics(wanted)
        storage = bag.storage
        classes = {t: bags.rclpy_class(m) for t, m in wanted.items()}
        k = 0
        for m in bag.messages(wanted, raw=True):
            try:
                msg = deserialize_message(m.msg, classes[m.topic])
            except Exception as exc:
                raise bags.BagError(f"bag '{path}': topic '{m.topic}': record at t={m.t_ns} ns is not a valid "
                                    f"{m.msgtype} ({type(exc).__name__})") from None
            rec = Record(m.t_ns, m.topic, m.msgtype, m.msg, msg)
            if m.topic == js_topic:
                rec.index = k
                k += 1
            records.append(rec)
    if not any(r.index >= 0 for r in records):
        raise bags.BagError(f"bag '{path}': topic '{js_topic}' has no messages")
    return records, storage


def check_joint_names(records: list[Record], model, js_topic: str) -> list[str]:
    """Every actuated joint of the model must appear in the joint states; names that are not joints of the
    URDF (a gripper finger of joint_state_broadcaster, another robot's joint) are ignored, as the nodes
    ignore them (counted as ``unknown_names``) and ``identify`` does.

    Returns:
        The ignored names, sorted (each once, for the summary).

    Raises:
        UserError: an actuated joint that never appears, naming it and the topic.
    """
    urdf_joints = set(model.description.joints)
    seen: set[str] = set()
    checked: set[tuple] = set()
    for r in records:
        if r.index < 0:
            continue
        names = tuple(r.msg.name)
        if names in checked:
            continue
        checked.add(names)
        seen.update(names)
    ignored = sorted(n for n in seen if n not in urdf_joints)
    missing = [j for j in model.joint_names if j not in seen]
    if missing:
        hint = likely_misspellings(missing, ignored)
        raise UserError(f"topic '{js_topic}': joint '{missing[0]}' of '{model.description.name}' never appears "
                        f"(missing: {missing}); the node would never command"
                        + (f"; likely misspelt: {hint}" if hint else "")
                        + (f" (names not in the model, ignored: {ignored})" if ignored else ""))
    return ignored
