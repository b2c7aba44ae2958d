"""Collision reaction of computed torque: the core (no ROS) and the node over DDS. On a collision flag the
command is g(q) at the measured state only (Pinocchio on the unmodified URDF as the reference) until a reset,
which the node refuses while the observer still reports the collision."""
from __future__ import annotations

import numpy as np
import pytest
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from test_computed_torque import COMMAND_ORDER, Q_MEASURED, QD_MEASURED, URDF_ORDER, Harness, RawPinocchio

D_GAIN = 5.0


@pytest.fixture
def h():
    gains = {f"gains.{j}.d": D_GAIN for j in URDF_ORDER}
    harness = Harness(mode="feedforward", collision_topic="/obs/collision", **gains)
    yield harness
    harness.close()


def _reset(h):
    cli = h.peer.create_client(Trigger, "/ct_test/reset_collision")
    assert h.spin(until=cli.service_is_ready)
    fut = cli.call_async(Trigger.Request())
    assert h.spin(until=fut.done)
    return fut.result()


def test_flag_latches_gravity_only_and_reset_waits_for_the_release(h):
    raw = RawPinocchio()
    g = raw.rnea(Q_MEASURED, {}, {})  # URDF order
    qd = np.array([QD_MEASURED[n] for n in URDF_ORDER])
    normal = (g - D_GAIN * qd)[::-1]  # feedforward at the held pose, D on the measured velocity, command order
    assert COMMAND_ORDER == URDF_ORDER[::-1]
    assert h.spin(until=lambda: len(h.commands) >= 3)
    np.testing.assert_allclose(h.commands[-1], normal, atol=1e-9)
    flag = h.peer.create_publisher(Bool, "/obs/collision", QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    flag.publish(Bool(data=True))
    assert h.spin(until=lambda: h.node.core.collision)
    n0 = len(h.commands)
    assert h.spin(until=lambda: len(h.commands) >= n0 + 3)
    np.testing.assert_allclose(h.commands[-1], g[::-1], atol=1e-9)
    res = _reset(h)
    assert not res.success and "still reports" in res.message
    flag.publish(Bool(data=False))
    h.spin(0.2)
    assert _reset(h).success and not h.node.core.collision
    n0 = len(h.commands)
    assert h.spin(until=lambda: len(h.commands) >= n0 + 3)
    np.testing.assert_allclose(h.commands[-1], normal, atol=1e-9)


def test_core_collision_latch_without_ros():
    from robot_dynamics_ros import robots
    from robot_dynamics_ros.control.joint_mapping import JointStateFields
    from robot_dynamics_ros.control.computed_torque import ComputedTorqueController, ComputedTorqueSettings
    from robot_dynamics_ros.model import RobotModel

    entry = robots.resolve("panda")
    model = RobotModel.from_urdf(entry.path, held_joints=entry.held_joints)
    gains = {j: {"d": D_GAIN} for j in URDF_ORDER}
    core = ComputedTorqueController(model, ComputedTorqueSettings(mode="feedforward", gains=gains))
    t = 10**12
    fields = JointStateFields(t, tuple(n.encode() for n in URDF_ORDER), tuple(Q_MEASURED[n] for n in URDF_ORDER),
                              tuple(QD_MEASURED[n] for n in URDF_ORDER), ())
    assert core.on_joint_state(fields, t, t) is None
    g = RawPinocchio().rnea(Q_MEASURED, {}, {})
    qd = np.array([QD_MEASURED[n] for n in URDF_ORDER])
    np.testing.assert_allclose(core.step(t, t).command, g - D_GAIN * qd, atol=1e-9)
    core.set_collision()
    res = core.step(t, t)
    assert res.safe and res.level == 2 and "collision" in res.reason
    np.testing.assert_allclose(res.command, g, atol=1e-9)
    core.reset_collision()
    res = core.step(t, t)
    assert not res.safe and res.level == 0
