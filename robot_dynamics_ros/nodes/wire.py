"""The ROS wire as the nodes use it: QoS profiles, the joint_states read path, ROS-graph checks.

* QoS: :func:`state_subscription_qos` (:data:`STATE_QOS_DEPTH`), :func:`joint_state_qos`,
  :func:`command_qos`, :func:`description_qos`, :func:`collision_qos`, :func:`qos_overrides`.
* :func:`take_newest` (latest state wins) and :func:`joint_state_fields` (the CDR reader of
  :mod:`robot_dynamics_ros.nodes.cdr`, rclpy's deserializer as the fallback).
* Graph: :func:`other_publishers`, :func:`endpoint_node`, :class:`ExclusivePublisher`
  (:data:`GRAPH_CHECK_PERIOD`).
"""
from __future__ import annotations

from typing import Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.qos_overriding_options import QoSOverridingOptions
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState

from robot_dynamics_ros.nodes.cdr import fields_from_message
from robot_dynamics_ros.nodes.diagnostics import Diagnostics

__all__ = ["STATE_QOS_DEPTH", "state_subscription_qos", "qos_overrides", "take_newest", "joint_state_qos",
           "command_qos", "description_qos", "collision_qos", "joint_state_fields", "GRAPH_CHECK_PERIOD",
           "endpoint_node", "other_publishers", "ExclusivePublisher"]


def joint_state_fields(reader, raw: bytes):
    """The fields of a serialized ``sensor_msgs/JointState`` from a ``raw=True`` subscription:
    ``reader.read`` (:class:`~robot_dynamics_ros.nodes.cdr.JointStateReader`), or rclpy's deserializer
    for an encoding the reader does not read.

    Raises:
        Exception: rclpy cannot deserialize ``raw`` either (the caller logs it and serves on).
    """
    fields = reader.read(raw)
    if fields is None:
        fields = fields_from_message(deserialize_message(raw, JointState))
    return fields


#: keep-last depth of the control nodes' joint_states subscription (see :func:`state_subscription_qos`)
STATE_QOS_DEPTH = 10


def state_subscription_qos():
    """Default QoS of a control node's joint_states subscription: best effort, keep last
    :data:`STATE_QOS_DEPTH`, volatile.

    Best effort matches both reliable and best-effort publishers (a reliable reader would not match a
    best-effort driver). The depth is not a backlog to work through: the callback takes the newest
    message and skips what queued behind it (:func:`take_newest`); the depth only bounds how many skipped
    messages are counted. Override with ``qos_overrides.<topic>.subscription.{reliability,depth,history}``
    (:func:`qos_overrides`).
    """
    return QoSProfile(depth=STATE_QOS_DEPTH, history=HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.BEST_EFFORT)



#: keep-last depth of every service's request and response queues. rclpy's default (10) is one queue shared by
#: all clients of a service: a burst from many clients pushes requests out before the executor takes them, and
#: their clients wait forever (20 client processes x 50 calls at once to ~/enable: 29 of 1000 answered with
#: depth 10, 1000 of 1000 with 1000)
SERVICE_QOS_DEPTH = 1000


def service_qos():
    """The QoS of every service of the package's nodes: reliable, keep-all (a response is never replaced in
    the writer's history before its client acknowledged it: with keep-last, a burst of answers to many clients
    could overwrite one that a slow client had not read yet; :data:`SERVICE_QOS_DEPTH` is the depth rclpy
    records)."""
    return QoSProfile(depth=SERVICE_QOS_DEPTH, history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE)


def qos_overrides():
    """rclpy's standard QoS override parameters (``qos_overrides.<topic>.<publisher|subscription>.<policy>``,
    read-only, set in a params file or with ``-p``) for depth, history, reliability and durability."""
    return QoSOverridingOptions.with_default_policies()


def take_newest(subscription, raw, msg_type) -> tuple[Any, int]:
    """Latest state wins: ``(newest, skipped)`` — the newest serialized message of a ``raw=True``
    ``subscription`` queue, starting from the ``raw`` the callback got, and how many older ones were taken
    and dropped. An empty queue costs one failed take (≈ 0.7 µs); the executor finds the taken messages
    gone and calls no callback for them."""
    handle = subscription.handle
    skipped = 0
    while True:
        nxt = handle.take_message(msg_type, True)
        if nxt is None:
            return raw, skipped
        raw = nxt[0]
        skipped += 1


def joint_state_qos(depth: int = 10, reliable: bool = True):
    """QoS of a joint_states publisher (or a subscription that wants every message): keep-last ``depth``,
    reliable (default) or best effort."""
    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE if reliable
                      else ReliabilityPolicy.BEST_EFFORT)


def command_qos(depth: int = 10):
    """QoS of an effort command publisher: keep-last ``depth``, reliable, volatile (as a ros2_control
    forward_command_controller subscribes)."""
    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)


def description_qos():
    """QoS of ``/robot_description``: keep-last 1, reliable, transient local (robot_state_publisher's)."""
    return QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


def collision_qos():
    """QoS of the observer's ``~/collision`` flag and its subscribers: keep-last 1, reliable, transient local
    (the observer publishes on change only: a late subscriber must still get the current flag)."""
    return QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


#: seconds between two ROS-graph checks of a node (publisher counts; off the message path)
GRAPH_CHECK_PERIOD = 1.0


def endpoint_node(info) -> str:
    """The fully qualified name of the node of a graph endpoint (``rclpy.topic_endpoint_info``)."""
    return f"{info.node_namespace.rstrip('/')}/{info.node_name}"


def other_publishers(node, topic: str) -> tuple[list[str], int]:
    """``(names, total)``: the fully qualified node names of the publishers on ``topic`` other than
    ``node``'s own one, and the total publisher count. One endpoint named like ``node`` is the node
    itself (it has one publisher per topic); a further one is another node of the same name."""
    infos = node.get_publishers_info_by_topic(topic)
    me = f"{node.get_namespace().rstrip('/')}/{node.get_name()}"
    names = [endpoint_node(i) for i in infos]
    if me in names:
        names.remove(me)
    return names, len(infos)


class ExclusivePublisher:
    """Guards a publisher that must be the only one on its topic (the simulator's joint states next to a
    real driver would interleave two robots' states): :meth:`check` queries the ROS graph, :attr:`blocked`
    says whether publishing is withheld. A conflict logs one ERROR naming the other publishers' nodes
    and raises an ERROR diagnostic condition; when they are gone, an INFO line and the condition clears.

    Args:
        node: the rclpy node; publisher: the guarded publisher; diag: the node's :class:`Diagnostics`.
    """

    def __init__(self, node, publisher, diag: Diagnostics):
        self._node, self._pub, self._diag = node, publisher, diag
        self.checked = False
        self.others: list[str] = []

    def check(self) -> bool:
        """Query the graph now; True when publishing is allowed."""
        topic = self._pub.topic_name
        others, _ = other_publishers(self._node, topic)
        self.checked = True
        if others and others != self.others:
            text = (f"not publishing on {topic}: another publisher exists there ({', '.join(others[:5])}); "
                    "a real driver and this simulator would interleave two robots' states")
            self._node.get_logger().error(text)
            self._diag.condition("exclusive", Diagnostics.ERROR, text)
        elif not others and self.blocked:
            self._node.get_logger().info(f"{topic}: no other publisher any more, publishing")
            self._diag.condition("exclusive", None)
        self.others = others
        return not self.blocked

    @property
    def blocked(self) -> bool:
        """Publishing is withheld: another publisher was on the topic at the last check."""
        return bool(self.others)

    def allowed(self) -> bool:
        """For the publishing path: the first call checks the graph, later ones return the last verdict."""
        return self.check() if not self.checked else not self.blocked
