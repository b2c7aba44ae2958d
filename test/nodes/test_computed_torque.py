"""Computed-torque node over real DDS, against Pinocchio called directly on the original Panda URDF.

Independent sources: the desired motion is a closed-form quintic polynomial per joint (numpy), which
the node's quintic interpolation reproduces exactly; expected torques come from ``pinocchio`` built from
the example-robot-data URDF file itself (fingers at their held value), not from our wrapper. Joint
orders differ on purpose: URDF order (model), a shuffled order in joint_states, another in the
trajectory and a reversed order for the command.
"""
from __future__ import annotations

import time

import numpy as np
import pinocchio as pin
import pytest
import rclpy
from numpy.polynomial import Polynomial
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_dynamics_ros import robots
from robot_dynamics_ros.nodes.computed_torque import ComputedTorqueNode

PANDA = robots.ROBOTS["panda"]
pytestmark = pytest.mark.ros
URDF_ORDER = [f"panda_joint{i}" for i in range(1, 8)]
STATE_ORDER = ["panda_joint3", "panda_finger_joint1", "panda_joint7", "panda_joint1", "panda_joint5",
               "panda_joint2", "panda_joint6", "panda_joint4", "panda_finger_joint2"]
TRAJ_ORDER = ["panda_joint6", "panda_joint2", "panda_joint7", "panda_joint4", "panda_joint1",
              "panda_joint3", "panda_joint5"]
COMMAND_ORDER = URDF_ORDER[::-1]
Q_MEASURED = {"panda_joint1": 0.1, "panda_joint2": 0.4, "panda_joint3": -0.2, "panda_joint4": -1.9,
              "panda_joint5": 0.3, "panda_joint6": 1.7, "panda_joint7": 0.6,
              "panda_finger_joint1": 0.02, "panda_finger_joint2": 0.02}
QD_MEASURED = {n: 0.05 * (i + 1) * (-1) ** i for i, n in enumerate(STATE_ORDER)}


class RawPinocchio:
    """pinocchio.buildModelFromUrdf on the original file; finger joints fixed at 0.02 m (by name)."""

    def __init__(self):
        self.m = pin.buildModelFromUrdf(str(PANDA.path))
        self.d = self.m.createData()
        self.iq = {self.m.names[j]: self.m.joints[j].idx_q for j in range(1, self.m.njoints)}
        self.iv = {self.m.names[j]: self.m.joints[j].idx_v for j in range(1, self.m.njoints)}

    def vec(self, values: dict, fingers=0.0, idx=None):
        idx = idx or self.iq
        out = np.zeros(self.m.nq if idx is self.iq else self.m.nv)
        for name, i in idx.items():
            out[i] = values.get(name, fingers)
        return out

    def arm(self, full):  # arm joints in URDF order
        return np.array([full[self.iv[n]] for n in URDF_ORDER])

    def rnea(self, q, qd, qdd):
        return self.arm(pin.rnea(self.m, self.d, self.vec(q, 0.02), self.vec(qd, 0.0, self.iv),
                                 self.vec(qdd, 0.0, self.iv)))

    def friction(self, qd):
        """URDF <dynamics> as Pinocchio's parser reads it (Panda: damping 0.003 N·m·s/rad, friction 0) at the
        velocities ``qd``: damping·qd + friction·sign(qd), arm joints in URDF order (the node's friction
        feedforward at the desired velocity, on by default)."""
        v = np.array([qd.get(n, 0.0) for n in URDF_ORDER])
        ia = [self.iv[n] for n in URDF_ORDER]
        return np.asarray(self.m.damping)[ia] * v + np.asarray(self.m.friction)[ia] * np.sign(v)

    def computed_torque(self, q, qd, a):
        """M(q) a + C(q, qd) qd + g(q) from CRBA, the Coriolis matrix and g separately (arm block)."""
        qf, vf = self.vec(q, 0.02), self.vec(qd, 0.0, self.iv)
        M = pin.crba(self.m, self.d, qf)
        M = np.triu(M) + np.triu(M, 1).T
        C = pin.computeCoriolisMatrix(self.m, self.d, qf, vf)
        g = pin.computeGeneralizedGravity(self.m, self.d, qf)
        ia = [self.iv[n] for n in URDF_ORDER]
        a_vec = np.array([a[n] for n in URDF_ORDER])
        return M[np.ix_(ia, ia)] @ a_vec + (C @ vf)[ia] + g[ia]


@pytest.fixture(scope="module")
def raw():
    return RawPinocchio()


def _quintics(seed=3, slow=1.0):
    """Per joint a quintic q(t) around the measured pose, moderate speed (≈ 1 rad/s / slow)."""
    rng = np.random.default_rng(seed)
    polys = {}
    for n in URDF_ORDER:
        c = rng.normal(scale=[0.0, 0.8, 0.6, 0.4, 0.2, 0.1])
        c[0] = Q_MEASURED[n]
        c /= slow ** np.arange(6)  # q(t) = p(t / slow)
        polys[n] = Polynomial(c)
    return polys


def _trajectory(polys, times, stamp_ns, names=TRAJ_ORDER):
    m = JointTrajectory()
    m.header.stamp.sec, m.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
    m.joint_names = list(names)
    for t in times:
        p = JointTrajectoryPoint()
        p.positions = [float(polys[n](t)) for n in names]
        p.velocities = [float(polys[n].deriv(1)(t)) for n in names]
        p.accelerations = [float(polys[n].deriv(2)(t)) for n in names]
        sec, nsec = divmod(int(round(t * 1e9)), 1_000_000_000)
        p.time_from_start.sec, p.time_from_start.nanosec = sec, nsec
        m.points.append(p)
    return m


class Harness:
    """One context, the node under test and a peer node publishing joint_states and recording outputs."""

    def __init__(self, **params):
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        overrides = [Parameter("urdf_path", value="panda"), Parameter("joints", value=COMMAND_ORDER),
                     Parameter("control_rate", value=200.0), Parameter("state_timeout", value=5.0),
                     Parameter("unset_gains", value="zero")]   # the laws as written: PD 0 = pure feedforward
        overrides += [Parameter(k, value=v) for k, v in params.items()]
        self.node = ComputedTorqueNode("ct_test", context=self.ctx, parameter_overrides=overrides)
        self.peer = rclpy.create_node("ct_peer", context=self.ctx)
        self.pub_state = self.peer.create_publisher(JointState, "joint_states", 10)
        self.pub_traj = self.peer.create_publisher(JointTrajectory, "/ct_test/joint_trajectory", 10)
        self.commands: list[np.ndarray] = []
        self.desired: list[JointState] = []
        self.peer.create_subscription(Float64MultiArray, "/effort_controller/commands",
                                      lambda m: self.commands.append(np.array(m.data)), 100)
        self.peer.create_subscription(JointState, "/ct_test/desired_state", self.desired.append, 100)
        self.state = JointState(name=STATE_ORDER, position=[Q_MEASURED[n] for n in STATE_ORDER],
                                velocity=[QD_MEASURED[n] for n in STATE_ORDER])
        self.stamped = False
        self.sent_stamps: list[int] = []
        self.peer.create_timer(0.01, self._publish_state)
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(self.node)
        self.executor.add_node(self.peer)

    def _publish_state(self):
        if self.stamped:
            now = self.peer.get_clock().now()
            self.state.header.stamp = now.to_msg()
            self.sent_stamps.append(now.nanoseconds)
        self.pub_state.publish(self.state)

    def spin(self, seconds=None, until=None, timeout=10.0):
        end = time.monotonic() + (seconds if seconds is not None else timeout)
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.005)
            if until is not None and until():
                return True
        return until is None

    def now_ns(self):
        return self.node.get_clock().now().nanoseconds

    def close(self):
        self.executor.shutdown()
        self.node.destroy_node()
        self.peer.destroy_node()
        rclpy.shutdown(context=self.ctx)


@pytest.fixture
def harness(request):
    h = Harness(**getattr(request, "param", {}))
    yield h
    h.close()


def _stamp_ns(msg):
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def _by_name(msg, field):
    return dict(zip(msg.name, getattr(msg, field)))


def test_holds_measured_pose_with_gravity_before_any_trajectory(harness, raw):
    assert harness.spin(until=lambda: len(harness.desired) >= 5)
    d = harness.desired[-1]
    assert list(d.name) == COMMAND_ORDER
    for name, value in _by_name(d, "position").items():
        assert value == pytest.approx(Q_MEASURED[name], abs=1e-12)
    assert np.all(np.array(d.velocity) == 0)
    g = raw.rnea(Q_MEASURED, {}, {})  # URDF order
    ff = _by_name(d, "effort")
    np.testing.assert_allclose([ff[n] for n in URDF_ORDER], g, atol=1e-9)
    # feedforward mode with zero PD gains: the command is g(q_d) in command (reversed) order
    np.testing.assert_allclose(harness.commands[-1], g[::-1], atol=1e-9)


def _desired_inside(desired, polys, times, start_ns):
    """Each desired_state message stamped strictly inside the trajectory (times[0], times[-1]) s after
    start_ns, with the polynomials' q, qd, qdd (by joint name) at its stamp."""
    for d in desired:
        t = (_stamp_ns(d) - start_ns) * 1e-9
        if times[0] < t < times[-1]:
            yield (d, {n: polys[n](t) for n in URDF_ORDER}, {n: polys[n].deriv(1)(t) for n in URDF_ORDER},
                   {n: polys[n].deriv(2)(t) for n in URDF_ORDER})

def test_feedforward_equals_pinocchio_rnea_of_the_sampled_desired_motion(harness, raw):
    polys = _quintics(slow=1.5)   # within the Panda's velocity limits (an infeasible one is refused)
    assert harness.spin(until=lambda: len(harness.desired) >= 2)
    start_ns = harness.now_ns() + 100_000_000
    times = [0.1, 0.3, 0.45, 0.7, 0.9]
    harness.pub_traj.publish(_trajectory(polys, times, start_ns))
    harness.spin(seconds=1.3)
    assert harness.node.trajectories_accepted == 1 and harness.node.trajectories_rejected == 0
    checked = 0
    for d, q, qd, qdd in _desired_inside(harness.desired, polys, times, start_ns):
        pos, vel, eff = _by_name(d, "position"), _by_name(d, "velocity"), _by_name(d, "effort")
        np.testing.assert_allclose([pos[n] for n in URDF_ORDER], [q[n] for n in URDF_ORDER], atol=1e-9)
        np.testing.assert_allclose([vel[n] for n in URDF_ORDER], [qd[n] for n in URDF_ORDER], atol=1e-9)
        np.testing.assert_allclose([eff[n] for n in URDF_ORDER], raw.rnea(q, qd, qdd) + raw.friction(qd), atol=1e-9)
        checked += 1
    assert checked >= 50, checked  # 200 Hz over 0.8 s
    # each published command (reversed = desired_state order) is the feedforward of one tick, clamped to
    # the URDF effort limits (Panda: 87 N·m joints 1-4, 12 N·m joints 5-7)
    limit = np.array([87, 87, 87, 87, 12, 12, 12.0])[::-1]
    desired_eff = np.clip(np.array([d.effort for d in harness.desired]), -limit, limit)
    matched = [c for c in harness.commands if np.min(np.abs(desired_eff - c).max(axis=1)) == 0.0]
    assert len(matched) == len(harness.commands) > 50
    # after the last point: hold the last position, zero velocity
    last = harness.desired[-1]
    pos = _by_name(last, "position")
    np.testing.assert_allclose([pos[n] for n in URDF_ORDER], [polys[n](times[-1]) for n in URDF_ORDER],
                               atol=1e-12)
    assert np.all(np.array(last.velocity) == 0.0)


@pytest.mark.parametrize("harness", [{"mode": "computed_torque"}], indirect=True)
def test_computed_torque_law_and_gains_set_at_run_time(harness, raw):
    polys = _quintics(seed=5, slow=2.0)   # the motion of seed 5 over 0.6 s, at half speed
    kp = {n: 100.0 + 10 * i for i, n in enumerate(URDF_ORDER)}
    kd = {n: 20.0 + i for i, n in enumerate(URDF_ORDER)}
    result = harness.node.set_parameters(
        [Parameter(f"gains.{n}.kp", value=kp[n]) for n in URDF_ORDER]
        + [Parameter(f"gains.{n}.kd", value=kd[n]) for n in URDF_ORDER])
    assert all(r.successful for r in result)
    # invalid values are refused, naming the parameter and the value; gains unchanged
    bad = harness.node.set_parameters([Parameter("gains.panda_joint3.kp", value=-1.0)])
    assert not bad[0].successful and "gains.panda_joint3.kp" in bad[0].reason and "-1.0" in bad[0].reason
    bad = harness.node.set_parameters([Parameter("mode", value="torque")])
    assert not bad[0].successful and "torque" in bad[0].reason
    assert harness.spin(until=lambda: len(harness.desired) >= 2)
    start_ns = harness.now_ns() + 50_000_000
    # 1.15 s inside the trajectory: at least 40 ticks even on a machine loaded enough to tick at a third of
    # the rate (a 0.55 s window gave 32 once, in a full parallel run beside other work)
    times = [0.05, 0.6, 1.2]
    harness.pub_traj.publish(_trajectory(polys, times, start_ns))
    n_before = len(harness.desired)
    harness.spin(seconds=1.4)
    limit = np.array([87, 87, 87, 87, 12, 12, 12.0])
    expected = []
    for d in harness.desired[n_before:]:
        t = (_stamp_ns(d) - start_ns) * 1e-9
        if not times[0] < t < times[-1]:
            continue
        a = {n: polys[n].deriv(2)(t) + kd[n] * (polys[n].deriv(1)(t) - QD_MEASURED[n])
             + kp[n] * (polys[n](t) - Q_MEASURED[n]) for n in URDF_ORDER}
        arm_qd = {n: QD_MEASURED[n] for n in URDF_ORDER}  # the fingers are held: no velocity in the model
        qd_d = {n: polys[n].deriv(1)(t) for n in URDF_ORDER}
        expected.append(np.clip(raw.computed_torque(Q_MEASURED, arm_qd, a) + raw.friction(qd_d), -limit, limit))
    expected = np.array(expected)
    # a command carries no stamp: each command of the window must equal the law at one sampled tick
    checked = 0
    for c in harness.commands:
        cmd = dict(zip(COMMAND_ORDER, c))
        err = np.abs(expected - [cmd[n] for n in URDF_ORDER]).max(axis=1)
        if err.min() < 1e-8:
            checked += 1
    assert len(expected) >= 40 and checked >= len(expected) - 1, (checked, len(expected))


def _bad(polys, stamp_ns, kind):
    m = _trajectory(polys, [0.2, 0.4, 0.6], stamp_ns)
    if kind == "unknown":
        m.joint_names[2] = "elbow_joint"
    elif kind == "order":
        m.points[2].time_from_start.sec, m.points[2].time_from_start.nanosec = 0, 300_000_000
    elif kind == "length":
        m.points[1].velocities = m.points[1].velocities[:5]
    elif kind == "nan":
        pos = list(m.points[1].positions)
        pos[4] = float("nan")
        m.points[1].positions = pos
    return m


def test_bad_trajectories_rejected_previous_one_kept_and_commands_continue(harness):
    polys = _quintics(seed=8, slow=3.0)
    assert harness.spin(until=lambda: len(harness.desired) >= 2)
    start_ns = harness.now_ns()
    good = _trajectory(polys, [0.1, 1.0, 2.0], start_ns)
    harness.pub_traj.publish(good)
    assert harness.spin(until=lambda: harness.node.trajectories_accepted == 1)
    expected = {"unknown": "joint_names[2] = 'elbow_joint' is not a controlled joint",
                "order": "points[2].time_from_start = 0.3 s is not after points[1]",
                "length": "points[1].velocities has 5 values; expected 0 or 7",
                "nan": "points[1].positions[4] (joint 'panda_joint1') = nan is not finite"}
    for i, (kind, reason) in enumerate(expected.items(), start=1):
        harness.pub_traj.publish(_bad(polys, harness.now_ns(), kind))
        assert harness.spin(until=lambda i=i: harness.node.trajectories_rejected == i)
        assert reason in harness.node.last_rejection
    n_cmd = len(harness.commands)
    harness.spin(seconds=0.2)
    assert len(harness.commands) > n_cmd + 20  # still publishing at 200 Hz
    # still following the first trajectory
    d = harness.desired[-1]
    t = (_stamp_ns(d) - start_ns) * 1e-9
    assert 0.1 < t < 2.0
    pos = _by_name(d, "position")
    np.testing.assert_allclose([pos[n] for n in URDF_ORDER], [polys[n](t) for n in URDF_ORDER], atol=1e-9)


def test_no_command_until_every_joint_reported(harness):
    harness.state = JointState(name=STATE_ORDER[:-3], position=[Q_MEASURED[n] for n in STATE_ORDER[:-3]],
                               velocity=[QD_MEASURED[n] for n in STATE_ORDER[:-3]])
    harness.state.velocity[2] = float("nan")  # panda_joint7: NaN velocity counts as missing
    harness.spin(seconds=0.3)
    assert harness.commands == [] and harness.desired == []
    assert set(harness.node.mapper.missing()) == {"panda_joint7", "panda_joint6", "panda_joint4"}


@pytest.mark.parametrize("harness", [{"tick_source": "joint_states"}], indirect=True)
def test_joint_states_tick_samples_at_the_measurement_stamp(harness, raw):
    harness.stamped = True
    polys = _quintics(seed=11, slow=2.0)   # the motion of seed 11 over 0.6 s, at half speed
    harness.spin(seconds=0.1)
    start_ns = harness.now_ns() + 50_000_000
    # 1.15 s inside the trajectory: ~230 joint states at 200 Hz, at least 30 of them even on a machine
    # loaded enough to publish at a quarter of the rate (a 0.55 s window gave 25 once)
    times = [0.05, 0.6, 1.2]
    harness.pub_traj.publish(_trajectory(polys, times, start_ns))
    harness.spin(seconds=1.4)
    assert harness.node.timer is None
    # one tick per joint state, stamped with (and sampled at) that joint state's stamp
    stamps = [_stamp_ns(d) for d in harness.desired]
    assert len(stamps) >= 50 and set(stamps) <= set(harness.sent_stamps)
    checked = 0
    for d, q, qd, qdd in _desired_inside(harness.desired, polys, times, start_ns):
        eff = _by_name(d, "effort")
        np.testing.assert_allclose([eff[n] for n in URDF_ORDER], raw.rnea(q, qd, qdd) + raw.friction(qd), atol=1e-9)
        checked += 1
    assert checked >= 30


def test_control_rate_reconfigured_at_run_time(harness):
    """`control_rate` is dynamically reconfigurable: the tick period follows the new value."""

    def median_period_after(n0: int, count: int = 12) -> float:
        assert harness.spin(until=lambda: len(harness.desired) >= n0 + count + 2)
        stamps = [_stamp_ns(m) for m in harness.desired[n0 + 2:]]   # skip ticks of the old timer
        return float(np.median(np.diff(stamps))) * 1e-9

    assert median_period_after(0) == pytest.approx(1 / 200.0, rel=0.2)
    assert harness.node.set_parameters([Parameter("control_rate", value=50.0)])[0].successful
    assert median_period_after(len(harness.desired)) == pytest.approx(1 / 50.0, rel=0.2)
    bad = harness.node.set_parameters([Parameter("control_rate", value=0.0)])[0]
    assert not bad.successful and "control_rate" in bad.reason
