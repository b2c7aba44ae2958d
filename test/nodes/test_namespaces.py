"""Two robots in one process, each in its own namespace (what launch/two_robots.launch.py starts as separate
processes): a Panda under /r1 from a file, a UR10 under /r2 from its namespaced robot_description topic with
no robot-specific parameter at all. Checked over DDS: every topic and service is namespaced, nothing is left
at the root, each robot's joint states carry its own joints, and a partial retiming request under /r1 holds
the unnamed joints at the /r1 simulator's published state.
"""
from __future__ import annotations

import threading
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import rclpy
from rclpy.parameter import Parameter

from robot_dynamics_ros import robots

pytestmark = pytest.mark.ros

UR10 = robots.example_robot_data_dir() / "ur_description" / "urdf" / "ur10_robot.urdf"
PANDA_POSE = robots.ROBOTS["panda"].demo_pose


def _actuated_joints(xml_text: str) -> list[str]:
    """Joint names of a URDF that are not fixed, in file order (read with ElementTree, independently)."""
    return [j.get("name") for j in ET.fromstring(xml_text).findall("joint") if j.get("type") != "fixed"]


@pytest.fixture(scope="module")
def cell():
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    from robot_dynamics_interfaces.srv import RetimeTrajectory
    from robot_dynamics_ros.nodes.runtime import make_executor
    from robot_dynamics_ros.nodes.wire import description_qos
    from robot_dynamics_ros.nodes.retiming_service import RetimingServiceNode
    from robot_dynamics_ros.nodes.simulator import SimulatorNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    ur10_xml = UR10.read_text()
    io = rclpy.create_node("cell_observer", context=ctx)
    desc = io.create_publisher(String, "/r2/robot_description", description_qos())
    desc.publish(String(data=ur10_xml))
    states = {"r1": [], "r2": []}
    for ns in states:
        io.create_subscription(JointState, f"/{ns}/joint_states", states[ns].append, 10)
    nodes = [
        SimulatorNode(context=ctx, namespace="/r1", parameter_overrides=[
            Parameter("urdf_path", value="panda"), Parameter("publish_rate", value=100.0),
            Parameter("start_on_first_command", value=True),  # paused at the pose: no controller here
            Parameter("initial_joint_names", Parameter.Type.STRING_ARRAY, list(PANDA_POSE)),
            Parameter("initial_positions", Parameter.Type.DOUBLE_ARRAY, list(PANDA_POSE.values()))]),
        RetimingServiceNode(context=ctx, namespace="/r1", parameter_overrides=[
            Parameter("urdf_path", value="panda"), Parameter("joint_limits_path", value="panda_joint_limits.yaml"),
            Parameter("joint_state_timeout", value=2.0)]),
        SimulatorNode(context=ctx, namespace="/r2", parameter_overrides=[Parameter("publish_rate", value=100.0)]),
        RetimingServiceNode(context=ctx, namespace="/r2", parameter_overrides=[Parameter("warmup", value=False)]),
    ]
    ex = make_executor("single", context=ctx)
    for n in [*nodes, io]:
        ex.add_node(n)
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ex.spin_once(timeout_sec=0.02)

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    assert nodes[1].warm.wait(timeout=300), "retiming warm-up (first compile) did not finish"
    clients = {ns: io.create_client(RetimeTrajectory, f"/{ns}/retiming_service/retime") for ns in ("r1", "r2")}
    for c in clients.values():
        assert c.wait_for_service(timeout_sec=20)
    deadline = time.monotonic() + 20
    while not (states["r1"] and states["r2"]):
        assert time.monotonic() < deadline, "no joint states in a namespace"
        time.sleep(0.05)
    yield {"io": io, "states": states, "clients": clients, "nodes": nodes, "ur10": ur10_xml,
           "type": RetimeTrajectory}
    stop.set()
    thread.join(5)
    for n in [*nodes, io]:
        n.destroy_node()
    ex.shutdown()
    rclpy.try_shutdown(context=ctx)


#: topics ROS 2 keeps global by design (absolute names in rclpy and the diagnostics convention)
GLOBAL_TOPICS = {"/parameter_events", "/rosout", "/diagnostics", "/clock"}


def test_every_topic_and_service_is_namespaced(cell):
    io = cell["io"]
    time.sleep(0.3)
    # the topics of this cell's own nodes (the domain may still list endpoints of processes another test
    # killed, until their DDS lease runs out)
    topics = set()
    for node in cell["nodes"]:
        for query in (io.get_publisher_names_and_types_by_node, io.get_subscriber_names_and_types_by_node):
            topics |= {name for name, _ in query(node.get_name(), node.get_namespace())}
    for ns in ("r1", "r2"):
        assert {f"/{ns}/joint_states", f"/{ns}/effort_controller/commands"} <= topics, topics
    assert "/r2/robot_description" in topics
    assert not {"/joint_states", "/effort_controller/commands", "/robot_description"} & topics, topics
    assert all(t.startswith(("/r1/", "/r2/")) or t in GLOBAL_TOPICS for t in topics), topics
    services = {name for name, _ in io.get_service_names_and_types()}
    assert {"/r1/retiming_service/retime", "/r2/retiming_service/retime"} <= services
    graph = io.get_node_names_and_namespaces()
    for ns in ("/r1", "/r2"):
        assert ("mujoco_simulator", ns) in graph and ("retiming_service", ns) in graph, graph


def test_each_namespace_carries_its_own_robot(cell):
    ur10_joints = _actuated_joints(cell["ur10"])
    assert len(ur10_joints) == 6
    assert list(cell["states"]["r2"][-1].name) == ur10_joints
    assert list(cell["states"]["r1"][-1].name)[:7] == [f"panda_joint{i}" for i in range(1, 8)]
    r2_service = cell["nodes"][3]
    assert list(r2_service.model.joint_names) == ur10_joints  # from /r2/robot_description


def test_partial_request_in_r1_holds_the_r1_simulators_state(cell):
    from trajectory_msgs.msg import JointTrajectoryPoint

    msg = cell["states"]["r1"][-1]
    measured = dict(zip(msg.name, msg.position))
    req = cell["type"].Request()
    req.path.joint_names = ["panda_joint1"]
    q1 = measured["panda_joint1"]
    req.path.points = [JointTrajectoryPoint(positions=[q1]), JointTrajectoryPoint(positions=[q1 + 0.5])]
    req.sample_period = 0.01
    fut = cell["clients"]["r1"].call_async(req)
    deadline = time.monotonic() + 30
    while not fut.done():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    resp = fut.result()
    assert resp.success, resp.message
    names = list(resp.trajectory.joint_names)
    q = np.array([p.positions for p in resp.trajectory.points])
    for j in names[1:]:  # exactly what the /r1 simulator published (it is paused at its pose)
        np.testing.assert_array_equal(q[:, names.index(j)], measured[j])
    assert measured["panda_joint4"] == PANDA_POSE["panda_joint4"]
    np.testing.assert_allclose(q[[0, -1], 0], [q1, q1 + 0.5], atol=1e-9)
