"""The friction YAML and ~/set_payload on a running node, over DDS (private domain from conftest): the
gravity node with ``friction_path`` commands g(q) + the YAML's Coulomb and viscous friction (g from
Pinocchio on the URDF file, friction from the YAML numbers), and a payload change beyond ±10 % is reported."""
from __future__ import annotations

import numpy as np
import pytest

from dds_probe import NAMES, PANDA, gravity_of
from test_control_nodes_ros import World
from test_identified_model import VALUES, _yaml

pytestmark = pytest.mark.ros


@pytest.fixture
def world():
    w = World()
    yield w
    w.close()


def test_gravity_node_with_friction_path_and_payload_warning(world, tmp_path):
    from robot_dynamics_interfaces.srv import SetPayload
    from sensor_msgs.msg import JointState

    path = str(_yaml(tmp_path / "panda.friction.yaml"))
    node = world.gravity(friction_path=path, friction_compensation=True, state_timeout=5.0)
    assert node.model.armature[node.model.index["panda_joint1"]] == VALUES["panda_joint1"][3]
    got = world.record("/effort_controller/commands")
    pub = world.state_pub()
    assert world.wait(lambda: pub.get_subscription_count() > 0)
    q = PANDA.base_pose
    qd = np.linspace(-0.3, 0.3, len(NAMES))
    qd[3] = 0.0  # sign(0) = 0: no Coulomb term on that joint
    msg = JointState(name=list(NAMES), position=[float(x) for x in q], velocity=[float(x) for x in qd])
    msg.header.stamp = world.peer.get_clock().now().to_msg()
    pub.publish(msg)
    assert world.wait(lambda: got)
    fc = np.array([VALUES.get(j, (0, 0, 0, 0))[0] for j in NAMES])
    fv = np.array([VALUES.get(j, (0, 0, 0, 0))[1] for j in NAMES])
    np.testing.assert_allclose(got[-1], gravity_of(q) + fc * np.sign(qd) + fv * qd, rtol=0, atol=1e-9)

    def set_payload(mass):
        return world.call(SetPayload, "/gravity_compensation/set_payload",
                          SetPayload.Request(link="panda_hand", mass=mass, com=[0.0, 0.0, 0.05], inertia=[0.0] * 6))

    r = set_payload(2.0)                       # none -> 2 kg: warns
    assert r.success and "WARNING" in r.message and node.diag.counters["payload_replan_warnings"] == 1
    r = set_payload(2.1)                       # +5 %: no warning
    assert r.success and "WARNING" not in r.message and node.diag.counters["payload_replan_warnings"] == 1
    r = set_payload(2.5)                       # +19 %
    assert r.success and "WARNING" in r.message and node.diag.counters["payload_replan_warnings"] == 2
    assert "2.1 kg" in node.diag.values["payload_change"] and "2.5 kg" in node.diag.values["payload_change"]
    assert node.model.armature[0] == VALUES["panda_joint1"][3]  # the payload copy keeps the friction


def test_observer_node_with_friction_path_subtracts_the_sensor_offset(tmp_path):
    """At rest τ_ext = g − (τ_measured − offset): a sensor reading g(q) + offset (g: Pinocchio on the
    unmodified URDF) gives τ_ext = 0 with the YAML, and −offset without it."""
    from test_external_torque_node import ARM, Q, Harness, RefPanda

    g = RefPanda().gravity(Q, ARM)
    offset = np.array([VALUES.get(j, (0, 0, 0, 0))[2] for j in ARM])
    for friction_path, expected in ((str(_yaml(tmp_path / "f.yaml")), np.zeros(7)), ("", -offset)):
        h = Harness(friction_path=friction_path, threshold=[100.0])
        try:
            for _ in range(60):       # 60 samples of 2 ms = 24 time constants at K_O = 200/s
                h.send(Q, g + offset)
            assert len(h.tau) >= 50
            np.testing.assert_allclose(h.tau[-1], expected, rtol=0, atol=1e-6)
        finally:
            h.close()
