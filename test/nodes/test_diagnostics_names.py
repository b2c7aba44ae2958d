"""/diagnostics status names carry the node's namespace: the same node in two namespaces (two robots) must
publish two distinguishable statuses, as diagnostic_aggregator / rqt_robot_monitor key entries by name.
In-process DDS on the session's private domain."""
from __future__ import annotations

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.parameter import Parameter

from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode
from robot_dynamics_testing.ros_world import RosWorld


def test_same_node_in_two_namespaces_publishes_two_status_names():
    with RosWorld("diag_names") as w:
        names = set()
        w.peer.create_subscription(DiagnosticArray, "/diagnostics",
                                   lambda m: names.update(s.name for s in m.status), 100)
        for ns in ("/", "/diag_t2"):
            w.add(GravityCompensationNode(context=w.ctx, namespace=ns, parameter_overrides=[
                Parameter("urdf_path", value="ur5"), Parameter("diagnostics_period", value=0.1)]))
        # the expected names are written out by hand: "<namespace>/<node name>: <hardware_id>"
        expected = {"/gravity_compensation: gravity_compensation",
                    "/diag_t2/gravity_compensation: gravity_compensation"}
        assert w.wait(lambda: expected <= names, 10.0), names
