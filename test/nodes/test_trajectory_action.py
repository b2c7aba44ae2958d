"""``~/follow_joint_trajectory`` of computed_torque driven like MoveIt, on the MuJoCo simulator node, over DDS.

The loop: the simulator in lockstep (each command advances the physics by one 2 ms period) publishing
/clock, computed_torque on sim time ticking on each joint state — deterministic and independent of the
machine's load. The client is rclpy's ``ActionClient`` with MoveIt's habits: empty tolerances, header
stamp 0, feedback ignored, a first point at the measured state. Independent sources: the goal is a
rest-to-rest quintic in closed form (numpy), the feedforward is checked against Pinocchio on the URDF file,
the arm's motion is MuJoCo's.
"""
from __future__ import annotations

import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance, SpeedScalingFactor
from numpy.polynomial import Polynomial
from rclpy.action import ActionClient
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectoryPoint

from robot_dynamics_ros import robots
from robot_dynamics_ros.nodes.computed_torque import ComputedTorqueNode
from robot_dynamics_ros.nodes.simulator import SimulatorNode
from robot_dynamics_testing.reference import PinByName
from robot_dynamics_testing.ros_world import RosWorld
from robot_dynamics_testing.urdf_text import Body, serial_urdf

UR5 = robots.ROBOTS["ur5"]
JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
          "wrist_3_joint"]
Q0 = [0.3, -1.1, 1.2, -0.4, 0.8, 0.2]
MOVE = np.array([0.4, -0.3, 0.35, 0.3, -0.4, 0.5])   # rad, well inside the UR5's 3.15 rad/s over 2 s
RATE = 500.0
EPOCH_S = 1000.0


class World(RosWorld):
    """computed_torque + lockstep simulator (sim time) + a peer with the action client and recorders."""

    def __init__(self, urdf=None, joints=JOINTS, q0=Q0, sim_urdf=None, **params):
        super().__init__("moveit_like")
        urdf = str(urdf or UR5.path)
        sim_urdf = str(sim_urdf or urdf)
        self.joints = list(joints)
        ct = [Parameter("urdf_path", value=urdf), Parameter("tick_source", value="joint_states"),
              Parameter("use_sim_time", value=True), Parameter("velocity_factor", value=1e6),
              Parameter("position_margin", value=100.0), Parameter("friction_compensation", value=False)]
        ct += [Parameter(k, value=v) for k, v in params.items()]
        self.node = self.add(ComputedTorqueNode("computed_torque", context=self.ctx, parameter_overrides=ct))
        self.sim = SimulatorNode(context=self.ctx, parameter_overrides=[
            Parameter("urdf_path", value=sim_urdf), Parameter("lockstep", value=True),
            Parameter("publish_clock", value=True), Parameter("clock_start", value=EPOCH_S),
            Parameter("publish_rate", value=RATE), Parameter("lockstep_resend", value=5.0),
            Parameter("timestep", value=1.0 / RATE / 2),
            Parameter("initial_joint_names", Parameter.Type.STRING_ARRAY, self.joints),
            Parameter("initial_positions", Parameter.Type.DOUBLE_ARRAY, [float(x) for x in q0])])
        self.states: list[tuple[float, np.ndarray, np.ndarray]] = []
        self.sim.on_publish.append(lambda t, q, qd, eff: self.states.append((t, np.array(q), np.array(qd))))
        self.commands: list[tuple[float, np.ndarray]] = []
        self.desired: list[JointState] = []
        p = self.peer
        p.create_subscription(Float64MultiArray, "effort_controller/commands",
                              lambda m: self.commands.append((self.sim_t(), np.array(m.data))), 1000)
        p.create_subscription(JointState, "computed_torque/desired_state", self.desired.append, 1000)
        self.client = ActionClient(p, FollowJointTrajectory, "computed_torque/follow_joint_trajectory")
        qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.pub_k = p.create_publisher(SpeedScalingFactor, "computed_torque/speed_scaling_input", qos)
        assert self.wait(lambda: self.sim.state_pub.get_subscription_count() > 0
                         and self.sim.cmd_sub.get_publisher_count() > 0
                         and self.sim._clock_pub.get_subscription_count() > 0
                         and self.client.server_is_ready(), 10.0), "DDS discovery"
        self.sim.publish_clock()
        assert self.wait(lambda: self.node.get_clock().now().nanoseconds == self.sim.now_ns(), 5.0)
        self.add(self.sim)
        self.sim.publish_state()
        self.run(0.3)    # settle: the controller holds the first measured pose

    def sim_t(self) -> float:
        return self.sim.now_ns() * 1e-9 - EPOCH_S

    def run(self, seconds: float, timeout: float = 60.0) -> None:
        end = self.sim_t() + seconds
        assert self.wait(lambda: self.sim_t() >= end, timeout), f"sim time stuck at {self.sim_t():.3f} s"

    def q(self) -> np.ndarray:
        return self.states[-1][1]

    def goal(self, target, duration=2.0, start=None, **tol) -> FollowJointTrajectory.Goal:
        """MoveIt-like: stamp 0, the measured state at t = 0, a rest-to-rest quintic sampled at 20 points."""
        start = self.q() if start is None else np.asarray(start)
        polys = quintic(start, np.asarray(target), duration)
        g = FollowJointTrajectory.Goal()
        g.trajectory.joint_names = self.joints
        for t in np.linspace(0.0, duration, 21):
            p = JointTrajectoryPoint()
            p.positions = [float(f(t)) for f in polys]
            p.velocities = [float(f.deriv(1)(t)) for f in polys]
            p.accelerations = [float(f.deriv(2)(t)) for f in polys]
            sec, ns = divmod(int(round(t * 1e9)), 1_000_000_000)
            p.time_from_start.sec, p.time_from_start.nanosec = sec, ns
            g.trajectory.points.append(p)
        for kind, value in tol.items():   # path_tolerance=0.001 etc.: the same for every joint
            getattr(g, kind).extend(JointTolerance(name=j, position=value) for j in self.joints)
        return g

    def send(self, goal):
        fut = self.client.send_goal_async(goal)
        assert self.wait(fut.done, 10.0), "no goal response"
        return fut.result()

    def result(self, handle, timeout=60.0):
        fut = handle.get_result_async()
        assert self.wait(fut.done, timeout), "no result"
        return fut.result()


def quintic(q0, q1, duration):
    """Per joint q0 + (q1 − q0)(10u³ − 15u⁴ + 6u⁵), u = t / duration."""
    s = Polynomial([0, 0, 0, 10, -15, 6])(Polynomial([0, 1 / duration]))
    return [Polynomial([a]) + (b - a) * s for a, b in zip(q0, q1)]


@pytest.fixture
def world(request):
    w = World(**getattr(request, "param", {}))
    yield w
    w.close()


def _max_step(cmds) -> float:
    c = np.array([x for _, x in cmds])
    return float(np.abs(np.diff(c, axis=0)).max()) if len(c) > 1 else 0.0


def test_moveit_like_goal_succeeds_in_time_and_ends_within_0_01_rad(world):
    q_start = world.q().copy()
    target = q_start + MOVE
    t0 = world.sim_t()
    handle = world.send(world.goal(target))
    assert handle.accepted
    res = world.result(handle)
    elapsed = world.sim_t() - t0
    assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.error_string
    assert res.result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
    assert elapsed <= 2.0 * 1.1 + 0.5, elapsed
    assert np.abs(world.q() - target).max() <= 0.01
    world.run(0.2)
    assert np.abs(world.q() - target).max() <= 0.01   # and it stays there


def test_goal_starting_0_2_rad_away_is_refused_and_the_arm_stays(world):
    q_start = world.q().copy()
    off = q_start.copy()
    off[1] += 0.2
    handle = world.send(world.goal(off + MOVE, start=off))
    assert not handle.accepted
    why = world.node.last_rejection
    assert "points[0]" in why and "0.2 rad" in why and "shoulder_lift_joint" in why, why
    world.run(0.5)
    assert np.abs(world.q() - q_start).max() < 1e-3


def test_cancel_stops_smoothly_then_holds(world):
    q_start = world.q().copy()
    handle = world.send(world.goal(q_start + MOVE))
    world.run(0.8)
    n_cmd = len(world.commands)
    step_tracking = _max_step(world.commands[n_cmd - 150:n_cmd])
    t_cancel = world.sim_t()
    fut = handle.cancel_goal_async()
    assert world.wait(fut.done, 10.0)
    res = world.result(handle)
    assert res.status == GoalStatus.STATUS_CANCELED
    world.run(max(0.0, t_cancel + 1.2 - world.sim_t()))
    at_rest = [np.abs(qd).max() for t, _, qd in world.states if t >= t_cancel + 1.0]
    assert at_rest and max(at_rest) <= 0.05, max(at_rest)
    # no step: a stop by holding the desired position at once would step the PD damping term by
    # d·|q̇| (tens of N·m here); the commands change by a small fraction of that per tick
    qd_cancel = next(np.abs(qd) for t, _, qd in world.states if t >= t_cancel)
    hard_stop = float((world.node.core.gains.d * qd_cancel).max())
    stop = [c for c in world.commands[n_cmd:] if c[0] <= t_cancel + 1.0]
    assert hard_stop > 5.0 and _max_step(stop) <= 0.02 * hard_stop, (_max_step(stop), hard_stop)
    assert _max_step(stop) <= 4 * step_tracking   # as smooth as the tracking itself
    moved = np.abs(world.q() - q_start)
    assert (moved < np.abs(MOVE) - 0.05).all()     # stopped short of the target, on the way there


def test_new_goal_preempts_with_invalid_goal(world):
    q_start = world.q().copy()
    first = world.send(world.goal(q_start + MOVE))
    world.run(0.5)
    desired_now = np.array(world.desired[-1].position)
    second = world.send(world.goal(desired_now, duration=0.5, start=desired_now))
    assert second.accepted
    r1 = world.result(first)
    assert r1.status == GoalStatus.STATUS_ABORTED
    assert (r1.result.error_code, r1.result.error_string) == (FollowJointTrajectory.Result.INVALID_GOAL,
                                                              "preempted")
    assert world.result(second).status == GoalStatus.STATUS_SUCCEEDED


def test_path_and_goal_tolerance_violations_give_jtc_codes(world):
    q_start = world.q().copy()
    h = world.send(world.goal(q_start + MOVE, path_tolerance=1e-6))
    r = world.result(h)
    assert r.status == GoalStatus.STATUS_ABORTED
    assert r.result.error_code == FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED, r.result.error_string
    world.run(0.5)
    g = world.goal(world.q() + 0.3 * MOVE, duration=1.0, goal_tolerance=1e-9)
    g.goal_time_tolerance.nanosec = 50_000_000
    r = world.result(world.send(g))
    assert r.status == GoalStatus.STATUS_ABORTED
    assert r.result.error_code == FollowJointTrajectory.Result.GOAL_TOLERANCE_VIOLATED, r.result.error_string


@pytest.mark.parametrize("world", [{"speed_scaling": 0.5}], indirect=True)
def test_speed_scaling_half_takes_twice_as_long_with_the_scaled_feedforward(world):
    ref = PinByName.from_urdf(UR5.path, JOINTS)
    q_start = world.q().copy()
    target = q_start + MOVE
    polys = quintic(q_start, target, 2.0)
    n0 = len(world.desired)
    t0 = world.sim_t()
    r = world.result(world.send(world.goal(target)))
    elapsed = world.sim_t() - t0
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.error_string
    assert 4.0 <= elapsed <= 4.0 + 0.5, elapsed
    # every desired state inside the motion: its trajectory time τ from joint 0 (monotone), then all joints
    # on the quintic at τ and the feedforward equal to RNEA(q, k q', k² q'') with k = 0.5
    checked = 0
    for d in world.desired[n0:]:
        q_d = np.array(d.position)
        if abs(q_d[0] - q_start[0]) < 1e-3 or abs(q_d[0] - target[0]) < 1e-3:
            continue
        roots = (polys[0] - q_d[0]).roots()
        tau = float(next(x.real for x in roots if abs(x.imag) < 1e-9 and -1e-9 <= x.real <= 2.0 + 1e-9))
        np.testing.assert_allclose(q_d, [f(tau) for f in polys], atol=1e-9)
        dq = np.array([f.deriv(1)(tau) for f in polys])
        ddq = np.array([f.deriv(2)(tau) for f in polys])
        np.testing.assert_allclose(d.velocity, 0.5 * dq, atol=1e-9)
        np.testing.assert_allclose(d.effort, ref.rnea(q_d, 0.5 * dq, 0.25 * ddq), atol=1e-9)
        checked += 1
    assert checked > 1500, checked


@pytest.mark.parametrize("world", [{"hardware_compensates_gravity": True}], indirect=True)
def test_hardware_compensates_gravity_commands_the_law_minus_g(world):
    ref = PinByName.from_urdf(UR5.path, JOINTS)
    # the simulator adds no gravity for the drives: the arm sags, the command is PD + g(q_d) − g(q)
    world.run(0.3)
    desired = {m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec: m for m in world.desired}
    gains = world.node.core.gains
    laws = []
    for t, q, qd in world.states[-60:]:
        d = desired.get(int(round((EPOCH_S + t) * 1e9)))
        if d is None:
            continue
        law = np.array(d.effort) + gains.p * (np.array(d.position) - q) + gains.d * (np.array(d.velocity) - qd)
        laws.append(law - ref.gravity(q))
    laws = np.array(laws)
    # a command carries no stamp: each recent one must equal the law at one of the recorded states
    cmds = [c for _, c in world.commands[-40:]]
    matched = sum(np.abs(laws - c).max(axis=1).min() < 1e-9 for c in cmds)
    assert len(laws) > 40 and matched == len(cmds), (matched, len(cmds))
    assert np.abs(ref.gravity(world.q())).max() > 10.0    # what counting gravity twice would add


def _my_arm(tmp_path, mass_factor=1.0, name="my_arm"):
    f = mass_factor
    bodies = [Body("yaw", "revolute", mass=3.0 * f, com=(0.0, 0.0, 0.1), inertia=(0.02, 0.02, 0.01),
                   limit=(-3, 3, 80, 2.0)),
              Body("shoulder", "revolute", mass=2.5 * f, com=(0.2, 0, 0), inertia=(0.01, 0.03, 0.03),
                   limit=(-3, 3, 80, 2.0), axis=(0, 1, 0), origin=(0, 0, 0.2)),
              Body("elbow", "revolute", mass=1.5 * f, com=(0.15, 0, 0), inertia=(0.005, 0.02, 0.02),
                   limit=(-3, 3, 40, 2.0), axis=(0, 1, 0), origin=(0.4, 0, 0))]
    path = tmp_path / f"{name}.urdf"
    path.write_text(serial_urdf("my_arm", bodies))
    return path


def test_user_urdf_without_gains_holds_its_pose_and_follows_a_goal(tmp_path):
    """A robot the package knows nothing about, no gains.* parameters, and a user's URDF whose masses are
    5 % light (the simulator has the true ones): model-based PD gains hold the pose; the zero gains of
    old (open loop, ``unset_gains: zero``) let the arm fall."""
    q0 = np.array([0.2, -0.3, 0.5])
    common = dict(urdf=_my_arm(tmp_path, 0.95, "user"), sim_urdf=_my_arm(tmp_path), joints=["yaw", "shoulder", "elbow"],
                  q0=q0)
    w = World(**common)
    try:
        assert w.node.core.model_gains and (w.node.core.gains.p > 1.0).all()
        w.run(2.0)
        held = np.array([q for _, q, _ in w.states])
        assert np.abs(held - q0).max() < 0.01, np.abs(held - q0).max()
        target = q0 + [0.3, 0.4, -0.5]
        r = w.result(w.send(w.goal(target, duration=1.5)))
        assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.error_string
        assert np.abs(w.q() - target).max() <= 0.01
    finally:
        w.close()
    w = World(unset_gains="zero", **common)
    try:
        w.run(2.0)
        assert np.abs(w.q() - q0).max() > 0.1     # falls without feedback
    finally:
        w.close()


def test_feedback_rate_and_a_goal_while_inactive_is_refused(world):
    import time

    feedback = []
    q_start = world.q().copy()
    fut = world.client.send_goal_async(world.goal(q_start + MOVE), feedback_callback=feedback.append)
    assert world.wait(fut.done, 10.0) and fut.result().accepted
    w0 = time.monotonic()
    res = world.result(fut.result())
    wall = time.monotonic() - w0
    assert res.status == GoalStatus.STATUS_SUCCEEDED
    assert len(feedback) / wall >= 20.0, (len(feedback), wall)
    fb = feedback[-1].feedback
    assert list(fb.joint_names) == JOINTS and len(fb.desired.positions) == 6
    np.testing.assert_allclose(fb.error.positions, np.subtract(fb.desired.positions, fb.actual.positions),
                               atol=1e-12)
    world.node.trigger_deactivate()
    handle = world.send(world.goal(world.q() + 0.2 * MOVE, duration=1.0))
    assert not handle.accepted and "not active" in world.node.last_rejection


def test_step_in_speed_scaling_input_is_rate_limited(world):
    q_start = world.q().copy()
    target = q_start + MOVE
    polys = quintic(q_start, target, 2.0)
    n0 = len(world.desired)
    t0 = world.sim_t()
    handle = world.send(world.goal(target))
    world.run(0.5)
    world.pub_k.publish(SpeedScalingFactor(factor=0.5))      # a step request 1 → 0.5
    r = world.result(handle)
    elapsed = world.sim_t() - t0
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.error_string
    # ≈ 0.5 s at full speed, then the remaining 1.5 s of trajectory at half speed (+ the ramp)
    assert 3.2 <= elapsed <= 3.9, elapsed
    # no velocity step: per 2 ms tick the desired velocity moves by at most (|q''| + rate |q'|) dt, the
    # chain rule's bound with |dk/dt| <= speed_scaling_rate (2/s); a jump of k would move it by 0.5 |q'|
    qd = np.array([d.velocity for d in world.desired[n0:]])
    t = np.linspace(0, 2.0, 2001)
    d1 = max(np.abs(f.deriv(1)(t)).max() for f in polys)
    d2 = max(np.abs(f.deriv(2)(t)).max() for f in polys)
    bound = (d2 + 2.0 * d1) / RATE
    assert np.abs(np.diff(qd, axis=0)).max() <= bound + 1e-9, (np.abs(np.diff(qd, axis=0)).max(), bound)
    assert 0.5 * d1 > 50 * bound      # what an unlimited step would do
