"""The control nodes as ROS 2 users drive them, over DDS: lifecycle transitions, parameter services for
every parameter, namespaces and remaps, reliable and best-effort publishers, the no-state diagnostic,
latest state wins, run-time payload. Expected torques: Pinocchio on the URDF file (dds_probe.gravity_of)."""
from __future__ import annotations

import time

import numpy as np
import pytest
import rclpy
from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rcl_interfaces.srv import DescribeParameters, GetParameters, ListParameters
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_dynamics_testing.dds_probe import NAMES, PANDA, gravity_of
from robot_dynamics_testing.ros_world import RosWorld

pytestmark = pytest.mark.ros


class World(RosWorld):
    """One context: the nodes under test, a peer publishing joint states and recording commands."""

    def __init__(self):
        super().__init__("peer")
        self.commands: dict[str, list] = {}

    def gravity(self, name="gravity_compensation", namespace=None, **params):
        from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode

        params = {"urdf_path": "panda", "crossval_samples": 0, "state_timeout": 0.5, **params}
        return self.add(GravityCompensationNode(name, namespace=namespace, context=self.ctx,
                                                parameter_overrides=[Parameter(k, value=v)
                                                                     for k, v in params.items()]))

    def record(self, topic):
        self.commands[topic] = []
        self.peer.create_subscription(Float64MultiArray, topic,
                                      lambda m: self.commands[topic].append(np.array(m.data)), 100)
        return self.commands[topic]

    def state_pub(self, topic="/joint_states", reliable=True, depth=10):
        qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE if reliable
                         else ReliabilityPolicy.BEST_EFFORT)
        return self.peer.create_publisher(JointState, topic, qos)

    def send(self, pub, q=None, order=NAMES):
        q = PANDA.base_pose if q is None else q
        by = dict(zip(NAMES, q))
        msg = JointState(name=list(order), position=[float(by[n]) for n in order], velocity=[0.0] * len(order))
        msg.header.stamp = self.peer.get_clock().now().to_msg()
        pub.publish(msg)


@pytest.fixture
def world():
    with World() as w:
        yield w


def test_lifecycle_transitions_configure_activate_deactivate_cleanup(world):
    node = world.gravity(autostart=False)
    got = world.record("/effort_controller/commands")
    state = world.call(GetState, "/gravity_compensation/get_state", GetState.Request())
    assert state.current_state.id == State.PRIMARY_STATE_UNCONFIGURED and node.core is None

    def change(tid):
        return world.call(ChangeState, "/gravity_compensation/change_state",
                          ChangeState.Request(transition=Transition(id=tid))).success

    assert change(Transition.TRANSITION_CONFIGURE) and node.core is not None
    pub = world.state_pub()
    assert world.wait(lambda: pub.get_subscription_count() > 0)
    world.send(pub)
    world.wait(lambda: False, 0.3)
    assert got == []                                # inactive: no command
    assert change(Transition.TRANSITION_ACTIVATE)
    world.send(pub)
    assert world.wait(lambda: len(got) > 0)
    np.testing.assert_allclose(got[-1], gravity_of(PANDA.base_pose), atol=1e-9)
    # deactivate: one safe command (hold: g at the last state), then silence
    n = len(got)
    assert change(Transition.TRANSITION_DEACTIVATE)
    assert world.wait(lambda: len(got) == n + 1)
    np.testing.assert_allclose(got[-1], gravity_of(PANDA.base_pose), atol=1e-9)
    world.send(pub, PANDA.base_pose + 0.1)
    world.wait(lambda: False, 0.3)
    assert len(got) == n + 1
    assert change(Transition.TRANSITION_CLEANUP) and node.core is None and node.sub is None
    assert change(Transition.TRANSITION_CONFIGURE) and change(Transition.TRANSITION_ACTIVATE)
    assert world.wait(lambda: pub.get_subscription_count() > 0)
    world.send(pub, PANDA.base_pose + 0.1)
    assert world.wait(lambda: len(got) > n + 1)
    np.testing.assert_allclose(got[-1], gravity_of(PANDA.base_pose + 0.1), atol=1e-9)


def test_configure_fails_cleanly_on_a_bad_urdf(world, tmp_path):
    node = world.gravity(autostart=False, urdf_path=str(tmp_path / "missing.urdf"))
    ok = world.call(ChangeState, "/gravity_compensation/change_state",
                    ChangeState.Request(transition=Transition(id=Transition.TRANSITION_CONFIGURE))).success
    assert not ok and "missing.urdf" in str(node.shell.config_error) and node.core is None


@pytest.mark.parametrize("kind", ["gravity", "computed_torque"])
def test_parameter_services_return_every_parameter(world, kind):
    """ros2 param list/get/describe through the services: every declared parameter, empty arrays included
    (a get naming an unset empty array used to return nothing for the whole request)."""
    if kind == "gravity":
        node = world.gravity()
    else:
        from robot_dynamics_ros.nodes.computed_torque import ComputedTorqueNode

        node = ComputedTorqueNode("computed_torque", context=world.ctx,
                                  parameter_overrides=[Parameter("urdf_path", value="panda")])
        world.add(node)
    name = f"/{node.get_name()}"
    names = list(world.call(ListParameters, f"{name}/list_parameters", ListParameters.Request()).result.names)
    for expected in ("joints", "held_joint_names", "held_joint_positions", "state_timeout", "autostart",
                     "qos_overrides./joint_states.subscription.reliability"):
        assert expected in names
    values = world.call(GetParameters, f"{name}/get_parameters", GetParameters.Request(names=names)).values
    assert len(values) == len(names)
    by_name = dict(zip(names, values))
    assert by_name["joints"].type == 9 and list(by_name["joints"].string_array_value) == []   # STRING_ARRAY
    assert list(by_name["held_joint_names"].string_array_value) == []   # the catalogue default is applied
    assert by_name["qos_overrides./joint_states.subscription.reliability"].string_value == "best_effort"
    desc = world.call(DescribeParameters, f"{name}/describe_parameters",
                      DescribeParameters.Request(names=names)).descriptors
    assert len(desc) == len(names) and all(d.name == n for d, n in zip(desc, names))
    assert next(d for d in desc if d.name == "joints").read_only


def test_namespaces_and_remaps_apply_to_every_topic(world):
    a = world.gravity(namespace="/r1")
    b = world.gravity(namespace="/r2", controller_name="arm")
    got_a, got_b = world.record("/r1/effort_controller/commands"), world.record("/r2/arm/commands")
    pub_a, pub_b = world.state_pub("/r1/joint_states"), world.state_pub("/r2/joint_states")
    assert a.sub.topic_name == "/r1/joint_states" and b.pub.topic_name == "/r2/arm/commands"
    assert world.wait(lambda: pub_a.get_subscription_count() == 1 and pub_b.get_subscription_count() == 1)
    world.send(pub_a, PANDA.base_pose)
    world.send(pub_b, PANDA.base_pose + 0.2)
    assert world.wait(lambda: got_a and got_b)
    np.testing.assert_allclose(got_a[-1], gravity_of(PANDA.base_pose), atol=1e-9)
    np.testing.assert_allclose(got_b[-1], gravity_of(PANDA.base_pose + 0.2), atol=1e-9)
    # a remap of joint_states
    from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode

    c = GravityCompensationNode("gc3", context=world.ctx, cli_args=["--ros-args", "-r", "joint_states:=/js3"],
                                parameter_overrides=[Parameter("urdf_path", value="panda"),
                                                     Parameter("crossval_samples", value=0)])
    world.nodes.append(c)
    assert c.sub.topic_name == "/js3"


@pytest.mark.parametrize("reliable", [True, False], ids=["reliable", "best_effort"])
def test_reliable_and_best_effort_publishers_both_work(world, reliable):
    world.gravity()
    got = world.record("/effort_controller/commands")
    pub = world.state_pub(reliable=reliable)
    assert world.wait(lambda: pub.get_subscription_count() > 0)
    world.send(pub)
    assert world.wait(lambda: got)
    np.testing.assert_allclose(got[-1], gravity_of(PANDA.base_pose), atol=1e-9)


def test_no_state_diagnostic_names_incompatible_qos(world):
    node = world.gravity(**{"qos_overrides./joint_states.subscription.reliability": "reliable"})
    pub = world.state_pub(reliable=False)      # a best-effort driver cannot feed a reliable subscription
    world.send(pub)
    assert world.wait(lambda: "incompatible QoS" in node.diag.message, 5.0), node.diag.message
    assert node.diag.level == 1 and "qos_overrides./joint_states.subscription" in node.diag.message


@pytest.mark.parametrize("latest", [True, False])
def test_latest_state_wins_and_skips_are_counted(world, latest):
    node = world.gravity(latest_state_wins=latest)
    got = world.record("/effort_controller/commands")
    pub = world.state_pub()
    assert world.wait(lambda: pub.get_subscription_count() > 0)
    # a burst of 8 states while the node is not spun: only the newest is answered, 7 counted as skipped
    for k in range(8):
        world.send(pub, PANDA.base_pose + 0.01 * k)
    time.sleep(0.2)
    assert world.wait(lambda: got)
    world.wait(lambda: False, 0.2)
    if not latest:   # every state answered in order
        assert len(got) == 8 and node.diag.counters.get("skipped", 0) == 0
        for k in range(8):
            np.testing.assert_allclose(got[k], gravity_of(PANDA.base_pose + 0.01 * k), atol=1e-9)
        return
    assert len(got) == 1 and node.diag.counters.get("skipped", 0) == 7
    np.testing.assert_allclose(got[0], gravity_of(PANDA.base_pose + 0.07), atol=1e-9)


def test_every_state_in_order_is_answered_from_one_callback_up_to_the_drain_bound(world):
    """latest_state_wins false: one joint_states callback answers the states queued behind its own, in order
    (each would otherwise pay a pass through rclpy's executor, the larger cost beside a flood), and stops
    at control_shell.DRAIN_MAX so that the executor still gets a turn."""
    from sensor_msgs.msg import JointState

    from robot_dynamics_ros.nodes.control_shell import DRAIN_MAX

    n = DRAIN_MAX + 6
    node = world.gravity(latest_state_wins=False, **{"qos_overrides./joint_states.subscription.depth": 2 * n,
                                                     "qos_overrides./effort_controller/commands.publisher.depth": 2 * n})
    got = world.record("/effort_controller/commands")
    pub = world.state_pub(depth=2 * n)
    assert world.wait(lambda: pub.get_subscription_count() > 0)
    for k in range(n):
        world.send(pub, PANDA.base_pose + 0.001 * k)
    sub = node.shell.sub
    deadline = time.monotonic() + 5.0
    while (first := sub.handle.take_message(JointState, True)) is None:   # the node is not spun meanwhile
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.3)                                  # the rest of the burst has arrived
    published = node.published
    node.shell.handle(first[0], node._publish)       # the one callback the executor would make
    assert node.published - published == DRAIN_MAX
    assert world.wait(lambda: len(got) == n, 5.0), len(got)
    for k in range(n):
        np.testing.assert_allclose(got[k], gravity_of(PANDA.base_pose + 0.001 * k), atol=1e-9)


def test_set_payload_service_swaps_the_model_not_the_shared_one(world):
    from robot_dynamics_interfaces.srv import SetPayload

    node = world.gravity()
    shared = node.base_model
    got = world.record("/effort_controller/commands")
    pub = world.state_pub()
    assert world.wait(lambda: pub.get_subscription_count() > 0)
    world.send(pub)
    assert world.wait(lambda: got)
    before = got[-1]
    r = world.call(SetPayload, "/gravity_compensation/set_payload",
                   SetPayload.Request(link="panda_hand", mass=1.5, com=[0.0, 0.0, 0.05], inertia=[0.0] * 6))
    assert r.success and node.model is not shared and shared.payload is None and node.model.payload.mass == 1.5
    world.send(pub)
    assert world.wait(lambda: len(got) > 1)
    assert np.abs(got[-1] - before).max() > 0.1
    bad = world.call(SetPayload, "/gravity_compensation/set_payload",
                     SetPayload.Request(link="no_such_link", mass=1.0))
    assert not bad.success and "no_such_link" in bad.message and node.model.payload.mass == 1.5
    assert world.call(SetPayload, "/gravity_compensation/set_payload", SetPayload.Request(link="")).success
    assert node.model.payload is None


def test_backward_sim_time_jump_and_future_stamp_over_dds(world):
    """use_sim_time: /clock jumps back 50 s (a bag restarting): the next states, stamped on the new clock,
    are commanded (not "out of order" for 50 s) and the jump is reported; a stamp slightly ahead of the
    clock does not block the correct state after it."""
    from rosgraph_msgs.msg import Clock

    node = world.gravity(use_sim_time=True, state_timeout=2.0)
    got = world.record("/effort_controller/commands")
    clock = world.peer.create_publisher(Clock, "/clock", 10)
    pub = world.state_pub()
    assert world.wait(lambda: pub.get_subscription_count() > 0 and clock.get_subscription_count() > 0)

    def at(t_clock, t_stamp, q):
        clock.publish(Clock(clock=rclpy.time.Time(seconds=t_clock).to_msg()))
        assert world.wait(lambda: node.get_clock().now().nanoseconds == int(t_clock * 1e9))
        by = dict(zip(NAMES, q))
        msg = JointState(name=list(NAMES), position=[float(by[n]) for n in NAMES], velocity=[0.0] * 7)
        msg.header.stamp = rclpy.time.Time(seconds=t_stamp).to_msg()
        n = len(got)
        pub.publish(msg)
        return world.wait(lambda: len(got) > n, 1.0)

    assert at(100.0, 100.0, PANDA.base_pose)
    assert at(50.0, 50.0, PANDA.base_pose + 0.1)             # the jump back, then a state on the new clock
    np.testing.assert_allclose(got[-1], gravity_of(PANDA.base_pose + 0.1), atol=1e-9)
    assert node.core.mapper.clock_jumps == 1 and node.diag.level == 0
    assert at(50.5, 50.6, PANDA.base_pose + 0.2)             # 0.1 s ahead of /clock: accepted (skew)
    assert at(50.55, 50.55, PANDA.base_pose + 0.3)           # the correct next state is not blocked
    np.testing.assert_allclose(got[-1], gravity_of(PANDA.base_pose + 0.3), atol=1e-9)


def test_description_text_is_data_never_a_path_and_a_bad_one_keeps_the_model(world):
    """A description naming an existing URDF file is refused as 'not URDF XML' (the file is not opened),
    the node keeps its model; a valid one swaps it. Both parameters set: urdf_path wins, with a warning."""
    from std_msgs.msg import String

    from robot_dynamics_ros import robots
    from robot_dynamics_ros.nodes.parameters import source_conflict
    from robot_dynamics_ros.nodes.wire import description_qos

    node = world.gravity(urdf_path="")
    desc = world.peer.create_publisher(String, "/robot_description", description_qos())
    desc.publish(String(data=robots.ROBOTS["panda"].path.read_text()))
    assert world.wait(lambda: node.model is not None)
    first = node.model
    desc.publish(String(data=str(robots.ROBOTS["ur5"].path)))       # a path to a real URDF file
    assert world.wait(lambda: "not URDF XML" in node.loader.last_error), node.loader.last_error
    assert node.model is first and len(node.loader.last_error) < 400
    desc.publish(String(data="<robot name='x'>" + "<link name='a'/>" * 10 + "<broken"))
    assert world.wait(lambda: node.loader.last_error and node.loader.last_error != "", 2.0)
    assert node.model is first
    text = source_conflict({"urdf_path": "panda", "robot_description": "<robot/>"})
    assert "using urdf_path" in text and source_conflict({"urdf_path": "panda", "robot_description": ""}) is None
