"""Publisher conflicts on the ROS graph: the simulator next to another joint_states publisher (a real
driver), two control nodes on one command topic. In-process DDS on the session's private domain."""
from __future__ import annotations

import time

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState

from robot_dynamics_ros.nodes.simulator import SimulatorNode
from robot_dynamics_testing.ros_world import RosWorld


class Recorder:
    """Collects log lines of a node (its logger's error/info/warning) without touching rcutils."""

    def __init__(self, logger):
        self.lines: list[tuple[str, str]] = []
        self._logger = logger

    def __getattr__(self, level):
        def log(text, *a, **k):
            self.lines.append((level, text))
        return log


def _sim(world, topic="/ns_graph/joint_states"):
    node = world.add(SimulatorNode("mujoco_simulator", context=world.ctx, parameter_overrides=[
        Parameter("urdf_path", value="ur5"), Parameter("joint_states_topic", value=topic),
        Parameter("controller_name", value="ns_graph_controller"), Parameter("publish_rate", value=100.0)]))
    return node


def test_simulator_withholds_joint_states_while_a_driver_publishes_and_resumes_after():
    topic = "/ns_graph/joint_states"
    with RosWorld("driver") as w:
        driver = w.peer.create_publisher(JointState, topic, 10)   # the real driver, before the simulator
        sim_states, diags = [], []
        listener = w.peer.create_subscription(JointState, topic, sim_states.append, 100)
        w.peer.create_subscription(DiagnosticArray, "/diagnostics", lambda m: diags.extend(m.status), 100)
        sim = _sim(w, topic)
        rec = Recorder(sim.get_logger())
        sim.get_logger = lambda: rec   # the node's own log lines, as the user sees them
        # discovery: the simulator's graph view holds the driver once its check names it
        assert w.wait(lambda: sim._exclusive.others == ["/driver"], 10.0), sim._exclusive.others
        sim_states.clear()
        w.spin(1.5)
        assert sim_states == []           # none from the simulator (the driver published nothing)
        assert any(lv == "error" and "/driver" in t and topic in t for lv, t in rec.lines), rec.lines
        ours = [s for s in diags if s.name.startswith("/mujoco_simulator:")]
        assert ours and ours[-1].level[0] == 2 and "/driver" in ours[-1].message, ours[-1:]
        # the driver goes away: the simulator publishes again and the condition clears
        w.peer.destroy_publisher(driver)
        assert w.wait(lambda: len(sim_states) >= 5, 10.0)
        assert any(lv == "info" and "publishing" in t for lv, t in rec.lines)
        diags.clear()
        assert w.wait(lambda: any(s.name.startswith("/mujoco_simulator:") and s.level[0] == 0 for s in diags), 5.0)
        del listener


def test_simulator_alone_publishes_from_its_first_state():
    topic = "/ns_graph_alone/joint_states"
    with RosWorld("listener") as w:
        got = []
        w.peer.create_subscription(JointState, topic, got.append, 100)
        sim = _sim(w, topic)
        assert w.wait(lambda: len(got) >= 5, 10.0)
        assert sim._exclusive.others == [] and not sim._exclusive.blocked


def _status_of(probe, prefix):
    for s in reversed(probe.diagnostics):
        if s.name.startswith(prefix):
            return s
    return None


def _values(status):
    return {kv.key: kv.value for kv in status.values}


def test_two_control_nodes_on_one_command_topic_warn_naming_each_other():
    from robot_dynamics_testing.dds_probe import Probe
    from robot_dynamics_ros.nodes.computed_torque import ComputedTorqueNode

    with Probe() as probe:
        grav = probe.gravity_node()
        rec = Recorder(None)
        grav.shell.log._logger = rec
        ct = probe.start(ComputedTorqueNode, "computed_torque",
                         {"mode": "feedforward", "tick_source": "timer", "control_rate": 50.0,
                          "state_timeout": 0.25, "diagnostics_period": 0.05})
        g_name, c_name = f"/{grav.get_name()}", f"/{ct.get_name()}"
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            probe.send()
            g = _status_of(probe, grav.get_fully_qualified_name() + ":")
            c = _status_of(probe, ct.get_fully_qualified_name() + ":")
            if g and c and c_name in g.message and g_name in c.message:
                break
            time.sleep(0.02)
        assert g is not None and c_name in g.message and g.level[0] >= 1, g
        assert c is not None and g_name in c.message and c.level[0] >= 1, c
        assert _values(g)["command_publishers"] == f"2: {c_name}"
        assert _values(g)["joint_states_publishers"] == "1: /fault_probe"
        assert any(lv == "warning" and c_name in t and grav.command_topic in t for lv, t in rec.lines), rec.lines
        # the second controller leaves: the gravity node's level returns to OK with fresh states
        probe.nodes.remove(ct)
        ct.destroy_node()
        deadline = time.monotonic() + 30.0   # on a loaded machine a rate warning may linger a few seconds too
        while time.monotonic() < deadline:
            probe.send()
            g = _status_of(probe, grav.get_fully_qualified_name() + ":")
            if g.level[0] == 0 and _values(g)["command_publishers"] == "1":
                break
            time.sleep(0.02)
        assert g.level[0] == 0 and c_name not in g.message, g


def test_waiting_for_joint_states_is_one_line_per_log_period():
    """computed_torque at 500 Hz with no joint_states publisher: one warning per log_period naming the cause,
    not a per-tick line with a count of suppressed ticks plus a second line for the same condition."""
    from robot_dynamics_ros.nodes.computed_torque import ComputedTorqueNode

    period, seconds = 0.5, 2.2
    with RosWorld("waiting_peer") as w:
        ct = w.add(ComputedTorqueNode(context=w.ctx, parameter_overrides=[
            Parameter("urdf_path", value="ur5"), Parameter("control_rate", value=500.0),
            Parameter("log_period", value=period),
            Parameter("joint_states_topic", value="/ns_waiting/joint_states"),
            Parameter("controller_name", value="ns_waiting_controller")]))
        rec = Recorder(None)
        ct.log._logger = rec
        w.spin(seconds)
    lines = [text for level, text in rec.lines if "joint_states" in text]
    assert lines, rec.lines
    assert len(lines) <= int(seconds / period) + 1, lines            # at most one per log_period
    assert all("similar suppressed" not in t for t in lines), lines
    assert all("no publisher on /ns_waiting/joint_states" in t for t in lines), lines
