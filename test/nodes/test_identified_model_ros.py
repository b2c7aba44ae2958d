"""The friction YAML and ~/set_payload on a running node, over DDS (private domain from conftest): the
gravity node with ``friction_path`` commands g(q) + the YAML's Coulomb and viscous friction (g from
Pinocchio on the URDF file, friction from the YAML numbers), and a payload change beyond ±10 % is reported."""
from __future__ import annotations

import time

import numpy as np
import pytest

from robot_dynamics_testing.dds_probe import NAMES, PANDA, gravity_of
from test_control_nodes_ros import World
from robot_dynamics_testing.identified_cases import VALUES, _yaml

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


def test_retiming_service_set_payload_swaps_model_and_retimer_keeping_friction(tmp_path):
    """~/set_payload on the retiming service: the new model (payload, same friction/armature) and its
    retimer are swapped in; the loaded model is not changed; a refused payload changes nothing; a mass
    change beyond ±10 % is reported. The retimer's torques follow: g(q) of its model equals Pinocchio's
    on the unmodified URDF with the payload added directly."""
    import pinocchio as pin
    import rclpy
    from rclpy.parameter import Parameter
    from robot_dynamics_interfaces.srv import SetPayload

    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
    from robot_dynamics_ros.nodes.runtime import make_executor
    from robot_dynamics_ros.nodes.retiming_service import RetimingServiceNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = RetimingServiceNode("retiming_payload", context=ctx, parameter_overrides=[
        Parameter("urdf_path", value="panda"), Parameter("warmup", value=False),
        Parameter("friction_path", value=str(_yaml(tmp_path / "f.yaml")))])
    peer = rclpy.create_node("peer", context=ctx)
    ex = make_executor("events", context=ctx)
    ex.add_node(node)
    ex.add_node(peer)

    def call(req):
        cli = peer.create_client(SetPayload, "/retiming_payload/set_payload")
        end = time.monotonic() + 5.0
        while not cli.service_is_ready() and time.monotonic() < end:
            ex.spin_once(timeout_sec=0.01)
        fut = cli.call_async(req)
        while not fut.done() and time.monotonic() < end + 5.0:
            ex.spin_once(timeout_sec=0.01)
        return fut.result()

    try:
        loaded = node.model
        assert loaded.payload is None and loaded.armature[0] == VALUES["panda_joint1"][3]
        r = call(SetPayload.Request(link="panda_hand", mass=2.0, com=[0.0, 0.01, 0.05], inertia=[0.0] * 6))
        assert r.success and "WARNING" in r.message, r.message
        assert node.model is not loaded and node.retimer.model is node.model and loaded.payload is None
        assert node.model.payload.mass == 2.0 and node.model.armature[0] == VALUES["panda_joint1"][3]
        from robot_dynamics_ros import robots

        entry = robots.ROBOTS["panda"]
        ref = pin.buildModelFromUrdf(str(entry.path))
        f = ref.frames[ref.getFrameId("panda_hand")]
        ref.inertias[f.parentJoint] += f.placement.act(pin.Inertia(2.0, np.array([0.0, 0.01, 0.05]), np.zeros((3, 3))))
        qp = pin.neutral(ref)
        for jn, v in {**entry.held_joints, **dict(zip(NAMES, PANDA.base_pose))}.items():
            qp[ref.joints[ref.getJointId(jn)].idx_q] = v
        g_ref = pin.computeGeneralizedGravity(ref, ref.createData(), qp)
        g_ref = np.array([g_ref[ref.joints[ref.getJointId(n)].idx_v] for n in node.model.joint_names])
        by = dict(zip(NAMES, PANDA.base_pose))
        q = np.array([by[n] for n in node.model.joint_names])
        np.testing.assert_allclose(PinocchioDynamics(node.retimer.model).gravity(q), g_ref, rtol=0, atol=1e-9)
        bad = call(SetPayload.Request(link="no_such_link", mass=1.0))
        assert not bad.success and "no_such_link" in bad.message and node.model.payload.mass == 2.0
        assert call(SetPayload.Request(link="")).success and node.model.payload is None
    finally:
        node.destroy_node()
        peer.destroy_node()
        ex.shutdown()
        rclpy.shutdown(context=ctx)


def test_set_payload_on_computed_torque_and_observer_nodes(world):
    """~/set_payload on the computed-torque and external-torque-observer nodes (the gravity node and the
    retiming service above): each swaps in a new model with the payload (the previous object unchanged)
    and its core runs on it; g(q) of that core equals Pinocchio's on the unmodified URDF with the payload
    added directly; a refused request (unknown link) changes nothing; removing the payload restores g."""
    import pinocchio as pin
    from rclpy.parameter import Parameter
    from robot_dynamics_interfaces.srv import SetPayload

    from robot_dynamics_ros import robots
    from robot_dynamics_ros.nodes.computed_torque import ComputedTorqueNode
    from robot_dynamics_ros.nodes.external_torque_observer import ExternalTorqueObserverNode

    entry = robots.ROBOTS["panda"]
    com = np.array([0.01, -0.02, 0.06])
    ref = pin.buildModelFromUrdf(str(entry.path))
    f = ref.frames[ref.getFrameId("panda_hand")]
    ref_loaded = ref.copy()
    ref_loaded.inertias[f.parentJoint] += f.placement.act(pin.Inertia(3.0, com, np.zeros((3, 3))))
    qp = pin.neutral(ref)
    for jn, v in {**entry.held_joints, **dict(zip(NAMES, PANDA.base_pose))}.items():
        qp[ref.joints[ref.getJointId(jn)].idx_q] = v

    def g_ref(m, names):
        g = pin.computeGeneralizedGravity(m, m.createData(), qp)
        return np.array([g[m.joints[m.getJointId(n)].idx_v] for n in names])

    nodes = {}
    for cls, name in ((ComputedTorqueNode, "computed_torque"), (ExternalTorqueObserverNode, "external_torque_observer")):
        node = cls(name, context=world.ctx, parameter_overrides=[Parameter("urdf_path", value="panda")])
        world.nodes.append(node)
        world.executor.add_node(node)
        nodes[name] = node
    for name, node in nodes.items():
        before = node.model
        assert before is not None and before.payload is None, name
        names = node.model.joint_names
        q = np.array([dict(zip(NAMES, PANDA.base_pose))[n] for n in names])
        r = world.call(SetPayload, f"/{name}/set_payload",
                       SetPayload.Request(link="panda_hand", mass=3.0, com=com.tolist(), inertia=[0.0] * 6))
        assert r.success and "WARNING" in r.message, (name, r.message)
        assert node.model is not before and before.payload is None and node.model.payload.mass == 3.0, name
        assert node.core.model is node.model, name
        np.testing.assert_allclose(node.core.engine.gravity(q), g_ref(ref_loaded, names), rtol=0, atol=1e-9)
        bad = world.call(SetPayload, f"/{name}/set_payload", SetPayload.Request(link="no_such_link", mass=1.0))
        assert not bad.success and "no_such_link" in bad.message and node.model.payload.mass == 3.0, name
        assert world.call(SetPayload, f"/{name}/set_payload", SetPayload.Request(link="")).success
        assert node.model.payload is None and node.core.model is node.model, name
        np.testing.assert_allclose(node.core.engine.gravity(q), g_ref(ref, names), rtol=0, atol=1e-9)
