"""Gravity-compensation node over real DDS: torques equal Pinocchio's g(q) by name; safety behaviour.

The reference is Pinocchio called directly on the ORIGINAL Panda URDF (fingers set to their held value in
the full configuration), independent of our URDF reduction and engine wrappers.
"""
from __future__ import annotations


import numpy as np
import pinocchio as pin
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.parameter import Parameter
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool

from robot_dynamics_ros import robots
from robot_dynamics_ros.control.joint_mapping import RejectCode
from robot_dynamics_ros.nodes.wire import description_qos
from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode
from robot_dynamics_testing.ros_world import RosWorld

PANDA = robots.ROBOTS["panda"]
ARM = [f"panda_joint{i}" for i in range(1, 8)]
CMD_ORDER = ["panda_joint4", "panda_joint7", "panda_joint1", "panda_joint3", "panda_joint2", "panda_joint6",
             "panda_joint5"]
#: joint_states order differs from both the URDF and the command order; fingers + an unknown joint included
MSG_ORDER = ["panda_joint6", "panda_finger_joint2", "panda_joint2", "panda_joint7", "panda_joint1",
             "some_other_joint", "panda_joint5", "panda_joint3", "panda_finger_joint1", "panda_joint4"]


class RefPanda:
    """Pinocchio on the unmodified Panda URDF; g(q) by joint name, optionally with payload/gravity."""

    def __init__(self):
        self.m = pin.buildModelFromUrdf(str(PANDA.path))
        self.d = self.m.createData()

    def gravity(self, q_by_name: dict[str, float], names, gravity=(0, 0, -9.81), payload=None):
        m = self.m.copy() if payload else self.m
        m.gravity.linear[:] = gravity
        if payload:
            link, mass, com = payload
            f = m.frames[m.getFrameId(link)]
            m.inertias[f.parentJoint] += f.placement.act(pin.Inertia(mass, np.array(com), np.zeros((3, 3))))
        q = pin.neutral(m)
        for jn, v in {**PANDA.held_joints, **q_by_name}.items():
            if m.existJointName(jn):
                q[m.joints[m.getJointId(jn)].idx_q] = v
        g = pin.computeGeneralizedGravity(m, m.createData(), q)
        return np.array([g[m.joints[m.getJointId(n)].idx_v] for n in names])


class Harness(RosWorld):
    """A gravity node plus a test node (joint_states publisher, command and diagnostics recorder)."""

    def __init__(self, **params):
        super().__init__("test_io")
        overrides = [Parameter("urdf_path", value="panda"),
                     Parameter("joints", Parameter.Type.STRING_ARRAY, CMD_ORDER),
                     Parameter("state_timeout", value=float(params.pop("state_timeout", 5.0)))]
        # (5 s: no safe command of the timer between two exchanges; the staleness tests pass their own)
        overrides += [Parameter(k.replace("__", "."), value=v) for k, v in params.items()]
        self.node = self.add(GravityCompensationNode(context=self.ctx, parameter_overrides=overrides))
        self.io = self.peer
        self.pub = self.io.create_publisher(JointState, "/joint_states", 10)
        self.commands: list[list[float]] = []
        self.io.create_subscription(Float64MultiArray, "/effort_controller/commands",
                                    lambda m: self.commands.append(list(m.data)), 10)
        self.diags: list = []
        self.io.create_subscription(DiagnosticArray, "/diagnostics",
                                    lambda m: self.diags.extend(s for s in m.status
                                                                if s.name.startswith("/gravity_compensation")), 10)
        self.wait(lambda: self.pub.get_subscription_count() > 0 and
                  self.io.count_publishers("/effort_controller/commands") > 0)
        # the start-up cross-check runs on a worker thread; no command until it has passed (or failed)
        self.wait(lambda: self.node.diag.values.get("crossval") is not None or
                  self.node.p["crossval_samples"] == 0, 120)

    def send(self, names, position, velocity=None, effort=None, stamp_offset: float = 0.0, zero_stamp=False):
        msg = JointState()
        msg.name = list(names)
        msg.position = [float(x) for x in position]
        msg.velocity = [float(x) for x in (velocity if velocity is not None else [0.0] * len(names))]
        msg.effort = [float(x) for x in (effort or [])]
        if not zero_stamp:
            now = self.io.get_clock().now().nanoseconds + int(stamp_offset * 1e9)
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 1_000_000_000)
        self.pub.publish(msg)

    def exchange(self, names, position, **kw) -> list[float] | None:
        """Send one JointState, return the command it produced (None if none within 0.3 s)."""
        n0 = len(self.commands)
        self.send(names, position, **kw)
        return self.commands[n0] if self.wait(lambda: len(self.commands) > n0, 0.3) else None

    def call_enable(self, data: bool):
        return self.call(SetBool, "/gravity_compensation/enable", SetBool.Request(data=data))


@pytest.fixture(scope="module")
def ref():
    return RefPanda()


@pytest.fixture
def h():
    with Harness() as harness:
        yield harness


def _state(rng):
    q = {jn: float(v) for jn, v in zip(ARM, [0.3, -0.5, 0.2, -2.0, 0.4, 1.5, 0.6] + rng.uniform(-0.3, 0.3, 7))}
    q.update({"panda_finger_joint1": 0.04, "panda_finger_joint2": 0.04, "some_other_joint": 5.0})
    return q


def test_torques_equal_pinocchio_gravity_in_command_order(h, ref):
    rng = np.random.default_rng(0)
    for _ in range(3):
        q = _state(rng)
        cmd = h.exchange(MSG_ORDER, [q[n] for n in MSG_ORDER])
        assert cmd is not None and len(cmd) == 7
        # fingers are held at 0.02 in the model whatever joint_states reports
        np.testing.assert_allclose(cmd, ref.gravity(q, CMD_ORDER), rtol=0, atol=1e-9)
    assert h.node.mapper.unknown_name_count > 0 and "some_other_joint" in h.node.mapper.last_unknown
    # diagnostics: counters, rates, latency, staleness, crossval status
    h.node._tick()
    kv = {v.key: v.value for v in h.node.diag.status().values}
    assert kv["received"] == "3" and kv["crossval"].startswith("passed: 20 states")
    assert float(kv["latency_p99_us"]) > 0 and float(kv["state_age_s"]) < 0.5 and kv["clamp_count"] == "0"
    assert h.node.diag.level == 0


def test_bad_messages_rejected_node_serves_on(h, ref):
    q = _state(np.random.default_rng(1))
    pos = [q[n] for n in MSG_ORDER]
    bad = [
        dict(names=MSG_ORDER, position=pos[:-1]),                                     # wrong length
        dict(names=MSG_ORDER, position=[np.nan] + pos[1:]),                           # NaN position
        dict(names=MSG_ORDER[:-1] + [MSG_ORDER[0]], position=pos),                    # duplicate name
        dict(names=MSG_ORDER, position=pos, velocity=[0.0] * 3),                      # wrong velocity length
        dict(names=MSG_ORDER, position=[1e308 * 10] + pos[1:]),                       # Inf
        dict(names=[n for n in MSG_ORDER if n != "panda_joint3"],                     # a joint missing (first msg)
             position=[q[n] for n in MSG_ORDER if n != "panda_joint3"]),
    ]
    for b in bad:
        assert h.exchange(b["names"], b["position"], velocity=b.get("velocity")) is None
    assert sum(h.node.mapper.rejected.values()) == 5
    cmd = h.exchange(MSG_ORDER, pos)
    np.testing.assert_allclose(cmd, ref.gravity(q, CMD_ORDER), atol=1e-9)


def test_stale_states_give_the_safe_command_and_recover(ref):
    h = Harness(state_timeout=0.5)
    try:
        _stale_states_give_the_safe_command_and_recover(h, ref)
    finally:
        h.close()


def _stale_states_give_the_safe_command_and_recover(h, ref):
    q = _state(np.random.default_rng(2))
    pos = [q[n] for n in MSG_ORDER]
    assert h.exchange(MSG_ORDER, pos) is not None
    assert h.node.diag.level == 0 or h.wait(lambda: h.node.diag.level == 0, 1.0)
    # the publisher stops: the timer notices within state_timeout (0.5 s) + its period and publishes the
    # hold command, g(q) at the last accepted state, with a WARN
    n0 = len(h.commands)
    assert h.wait(lambda: "stale" in h.node.diag.message and len(h.commands) > n0, 2.0)
    np.testing.assert_allclose(h.commands[-1], ref.gravity(q, CMD_ORDER), atol=1e-9)
    assert h.node.diag.level == 1 and "holding" in h.node.diag.message
    assert h.wait(lambda: any(s.level == b"\x01" and "stale" in s.message for s in h.diags), 3.0)
    # stale_policy zero: zeros, ERROR
    assert h.node.set_parameters([Parameter("stale_policy", value="zero")])[0].successful
    n1 = len(h.commands)
    assert h.wait(lambda: len(h.commands) > n1 and h.commands[-1] == [0.0] * 7, 2.0)
    assert h.node.diag.level == 2
    # fresh data: back to normal
    np.testing.assert_allclose(h.exchange(MSG_ORDER, pos), ref.gravity(q, CMD_ORDER), atol=1e-9)
    assert h.node.diag.level == 0
    rejected = h.node.diag.counters.get("rejected", 0)
    h.send(MSG_ORDER, pos, stamp_offset=-2.0)                            # out of order: rejected
    assert h.wait(lambda: h.node.diag.counters.get("rejected", 0) == rejected + 1, 1.0)
    h.node.mapper.reset()
    assert h.exchange(MSG_ORDER, pos, stamp_offset=-2.0) == [0.0] * 7   # 2 s old > 0.5 s: the safe zeros
    assert h.exchange(MSG_ORDER, pos, zero_stamp=True) is not None      # unstamped: judged by arrival time
    assert h.node.diag.level == 0
    # a stamp from a clock 5 s ahead is rejected and does not block the correct messages after it
    h.send(MSG_ORDER, pos, stamp_offset=5.0)
    assert h.wait(lambda: h.node.mapper.rejected[RejectCode.FUTURE] == 1, 1.0)
    np.testing.assert_allclose(h.exchange(MSG_ORDER, pos), ref.gravity(q, CMD_ORDER), atol=1e-9)


def test_enable_service_gravity_and_payload_parameters(h, ref):
    q = _state(np.random.default_rng(3))
    pos = [q[n] for n in MSG_ORDER]
    assert h.call_enable(False).success
    assert h.node.get_parameter("enabled").value is False
    assert h.exchange(MSG_ORDER, pos) == [0.0] * 7
    h.call_enable(True)
    assert h.node.get_parameter("enabled").value is True
    tilted = [0.0, -9.81 * np.sin(0.5), -9.81 * np.cos(0.5)]
    assert h.node.set_parameters([Parameter("gravity", value=tilted)])[0].successful
    np.testing.assert_allclose(h.exchange(MSG_ORDER, pos), ref.gravity(q, CMD_ORDER, gravity=tilted), atol=1e-9)
    res = h.node.set_parameters_atomically([Parameter("payload.link", value="panda_hand"),
                                            Parameter("payload.mass", value=1.2),
                                            Parameter("payload.com", value=[0.0, 0.01, 0.1])])
    assert res.successful
    np.testing.assert_allclose(h.exchange(MSG_ORDER, pos),
                               ref.gravity(q, CMD_ORDER, gravity=tilted,
                                           payload=("panda_hand", 1.2, [0.0, 0.01, 0.1])), atol=1e-9)
    # invalid values are rejected and change nothing
    assert not h.node.set_parameters([Parameter("gravity", value=[0.0, 9.81])])[0].successful
    assert not h.node.set_parameters([Parameter("payload.mass", value=-1.0)])[0].successful
    bad_link = h.node.set_parameters([Parameter("payload.link", value="no_such_link")])[0]
    assert not bad_link.successful and "no_such_link" in bad_link.reason
    np.testing.assert_allclose(h.exchange(MSG_ORDER, pos),
                               ref.gravity(q, CMD_ORDER, gravity=tilted,
                                           payload=("panda_hand", 1.2, [0.0, 0.01, 0.1])), atol=1e-9)
    h.node.set_parameters([Parameter("payload.link", value=""), Parameter("gravity", value=[0.0, 0.0, -9.81])])


def test_clamping_friction_and_hardware_gravity_options(h, ref):
    q = _state(np.random.default_rng(4))
    pos = [q[n] for n in MSG_ORDER]
    qd = {n: 0.1 * (i + 1) for i, n in enumerate(MSG_ORDER)}
    vel = [qd[n] for n in MSG_ORDER]
    h.node.set_parameters([Parameter("friction_compensation", value=True)])
    damping = 0.003  # Panda URDF <dynamics damping="0.003"/> on every arm joint, friction 0
    expected = ref.gravity(q, CMD_ORDER) + damping * np.array([qd[n] for n in CMD_ORDER])
    np.testing.assert_allclose(h.exchange(MSG_ORDER, pos, velocity=vel), expected, atol=1e-9)
    # with friction on, a NaN velocity counts as missing: no command
    nan_vel = [np.nan if n == "panda_joint2" else v for n, v in zip(MSG_ORDER, vel)]
    h.node.mapper.reset()
    assert h.exchange(MSG_ORDER, pos, velocity=nan_vel) is None
    h.node.set_parameters([Parameter("hardware_compensates_gravity", value=True)])
    np.testing.assert_allclose(h.exchange(MSG_ORDER, pos, velocity=vel),
                               damping * np.array([qd[n] for n in CMD_ORDER]), atol=1e-12)
    h.node.set_parameters([Parameter("hardware_compensates_gravity", value=False),
                           Parameter("friction_compensation", value=False),
                           Parameter("gravity", value=[0.0, 0.0, -60.0])])
    cmd = np.array(h.exchange(MSG_ORDER, pos))
    unclamped = ref.gravity(q, CMD_ORDER, gravity=[0, 0, -60.0])
    limits = np.array([87, 12, 87, 87, 87, 12, 12.0])  # URDF effort limits in CMD_ORDER
    np.testing.assert_allclose(cmd, np.clip(unclamped, -limits, limits), atol=1e-9)
    assert h.node.core.clamped == int(np.sum(np.abs(unclamped) > limits)) > 0
    h.node._tick()
    assert {v.key: v.value for v in h.node.diag.status().values}["clamp_count"] == str(h.node.core.clamped)


def test_nothing_published_after_shutdown(ref):
    h = Harness()
    try:
        q = _state(np.random.default_rng(5))
        pos = [q[n] for n in MSG_ORDER]
        assert h.exchange(MSG_ORDER, pos) is not None
        h.executor.remove_node(h.node)
        h.nodes.remove(h.node)
        h.node.destroy_node()
        n0 = len(h.commands)
        h.send(MSG_ORDER, pos)
        h.spin(0.3)
        assert len(h.commands) == n0
    finally:
        h.close()


def test_model_from_robot_description_topic_transient_local(ref):
    """No urdf_path: the node takes the URDF latched on /robot_description (robot_state_publisher style)."""
    w = RosWorld("rsp")
    try:
        desc_pub = w.peer.create_publisher(String, "/robot_description", description_qos())
        desc_pub.publish(String(data=PANDA.path.read_text()))   # published BEFORE the node exists
        node = w.add(GravityCompensationNode(context=w.ctx, parameter_overrides=[
            Parameter("held_joint_names", Parameter.Type.STRING_ARRAY, list(PANDA.held_joints)),
            Parameter("held_joint_positions", Parameter.Type.DOUBLE_ARRAY, list(PANDA.held_joints.values()))]))
        w.wait(lambda: node.model is not None)
        assert node.model is not None and node.model.joint_names == tuple(ARM)
        assert node.mapper.command_joints == tuple(ARM)
        # a broken description later is rejected, the model stays
        desc_pub.publish(String(data="<robot name='broken'><link name='a'/>"))
        w.wait(lambda: bool(node.loader.last_error), 1.0)
        assert "robot_description rejected" in node.loader.last_error
        assert node.model.joint_names == tuple(ARM)
    finally:
        w.close()


def test_failed_crossval_means_no_commands(monkeypatch):
    from robot_dynamics_ros.nodes import startup_check

    def broken(*a, **k):
        raise RuntimeError("engines disagree")

    monkeypatch.setattr(startup_check, "run_in_child", broken)
    h = Harness()
    try:
        q = _state(np.random.default_rng(6))
        assert h.exchange(MSG_ORDER, [q[n] for n in MSG_ORDER]) is None
        assert h.node.diag.level == 2 and "engines disagree" in h.node.diag.message
    finally:
        h.close()


def test_model_joint_outside_command_list_enters_dynamics_at_its_reported_position(ref):
    """joints = 6 arm joints: panda_joint7 is not commanded but its reported position still counts."""
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        six = ["panda_joint3", "panda_joint1", "panda_joint2", "panda_joint6", "panda_joint4", "panda_joint5"]
        node = GravityCompensationNode(context=ctx, parameter_overrides=[
            Parameter("urdf_path", value="panda"), Parameter("joints", Parameter.Type.STRING_ARRAY, six),
            Parameter("crossval_samples", value=0)])
        out = []
        # the hot path up to the publisher call; it publishes serialized bytes
        node.pub.publish = lambda m: out.append(deserialize_message(m, Float64MultiArray))
        for k, q7 in enumerate((-2.0, 1.5, 0.7)):
            q = {jn: v for jn, v in zip(ARM, [0.3, -0.5, 0.2, -2.0, 0.4, 1.5, q7])}
            msg = JointState(name=ARM[::-1], position=[q[n] for n in ARM[::-1]], velocity=[0.0] * 7)
            msg.header.stamp = node.get_clock().now().to_msg()
            if k == 2:   # an encoding the CDR reader does not read: rclpy's deserializer takes over
                node._reader = type("NoReader", (), {"read": staticmethod(lambda raw: None)})()
            node._on_joint_state_raw(serialize_message(msg))
            np.testing.assert_allclose(out[-1].data, ref.gravity(q, six), atol=1e-9)
            assert out[-1].layout.dim[0].label == ",".join(six) and out[-1].layout.dim[0].size == 6
        assert list(out[0].data) != list(out[1].data)  # panda_joint7's position changes the torques below it
        # a robot_description that does not fit the configured joints is refused; the node keeps its model
        node.loader.subscription = type("S", (), {"topic_name": "/robot_description"})()
        node.loader._held = None   # (with the Panda's held fingers the UR5 would be refused even earlier)
        node.loader._on_description(serialize_message(String(data=robots.ROBOTS["ur5"].path.read_text())))
        assert node.loader.wait_idle()        # parsed on the worker thread...
        node.loader._deliver()                # ...handed over on the executor's (here: this) thread
        assert "panda_joint3" in node.loader.last_error and node.model.n == 7
        node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)


def test_staleness_on_simulated_time_with_use_sim_time():
    """use_sim_time: stamps are judged against /clock (as under Gazebo), not the wall clock."""
    from rosgraph_msgs.msg import Clock

    h = Harness(use_sim_time=True, state_timeout=2.0)
    try:
        clock_pub = h.io.create_publisher(Clock, "/clock", 10)
        assert h.wait(lambda: clock_pub.get_subscription_count() > 0)
        clock_pub.publish(Clock(clock=rclpy.time.Time(seconds=100).to_msg()))
        assert h.wait(lambda: h.node.get_clock().now().nanoseconds == 100 * 10**9)
        q = _state(np.random.default_rng(7))
        pos = [q[n] for n in MSG_ORDER]

        def send_at(t):
            msg = JointState(name=MSG_ORDER, position=pos, velocity=[0.0] * len(pos))
            msg.header.stamp = rclpy.time.Time(seconds=t).to_msg()
            n0 = len(h.commands)
            h.pub.publish(msg)
            return h.wait(lambda: len(h.commands) > n0, 0.3)

        assert send_at(99.8)          # 0.2 s old in simulated time: fresh (timeout 2 s)
        assert not send_at(110.0)     # 10 s ahead of /clock: rejected as from the future
        h.node.mapper.reset()
        assert send_at(97.0)          # 3 s old: stale, the safe (hold) command
        assert "stale" in h.node.diag.message
        assert send_at(99.9) and h.node.diag.level == 0
    finally:
        h.close()
