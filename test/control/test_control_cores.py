"""The ROS-free control cores (control/gravity_compensator.py, control/computed_torque.py): every policy
branch, without rclpy. Torques are checked against Pinocchio called directly on the unmodified URDF
(independent of the package's engine), times and safe commands against closed forms."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros import robots
from robot_dynamics_ros.control.joint_mapping import JointStateFields
from robot_dynamics_ros.control.computed_torque import ComputedTorqueController, ComputedTorqueSettings
from robot_dynamics_ros.control.core import ERROR, OK, WARN, plausibility_bounds, CoreSettings
from robot_dynamics_ros.control.gravity_compensator import GravityCompensator, GravitySettings
from robot_dynamics_ros.control.interpolation import TrajectoryRejected, validate_joint_trajectory
from robot_dynamics_ros.control.joint_mapping import RejectCode
from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_testing.reference import PinByName

S = 1_000_000_000   # ns per s
T0 = 100 * S        # node clock at the start of a test


def _model(name="ur5"):
    return RobotModel.from_urdf(robots.ROBOTS[name].path)   # a private model: tests may change its limits


def _ref(name, joint_names) -> PinByName:
    """Pinocchio straight from the URDF file; arrays mapped by joint name into the package's order."""
    return PinByName.from_urdf(robots.ROBOTS[name].path, joint_names)


@pytest.fixture(scope="module")
def ur5():
    model = _model("ur5")
    return model, _ref("ur5", model.joint_names)


def fields(model, q, qd=None, stamp_ns=0, order=None):
    order = list(model.joint_names) if order is None else list(order)
    q = dict(zip(model.joint_names, q))
    qd = dict(zip(model.joint_names, qd)) if qd is not None else None
    return JointStateFields(stamp_ns, tuple(n.encode() for n in order), tuple(float(q[n]) for n in order),
                            tuple(float(qd[n]) for n in order) if qd is not None else (), ())


Q = np.array([0.3, -1.1, 1.2, -0.4, 0.8, 0.2])
QD = np.array([0.2, -0.1, 0.3, 0.05, -0.2, 0.1])


# ------------------------------------------------------------------------------------------------ gravity
def test_gravity_waits_then_commands_g_in_command_order(ur5):
    model, ref = ur5
    order = list(reversed(model.joint_names))
    core = GravityCompensator(model, GravitySettings(), command_joints=order)
    r = core.step(T0, 0)
    assert r == (None, False, WARN, "waiting for joint_states")
    # a partial state: still waiting, naming the missing joints
    part = JointStateFields(T0, (model.joint_names[0].encode(),), (0.1,), (), ())
    assert core.on_joint_state(part, 0, T0) is None
    r = core.step(T0, 0)
    assert r.command is None and r.level == WARN and model.joint_names[1] in r.reason
    assert core.on_joint_state(fields(model, Q, stamp_ns=T0, order=order), 0, T0) is None
    r = core.step(T0, 0)
    assert r.level == OK and not r.safe and r.reason == "running"
    np.testing.assert_allclose(r.command, ref.gravity(Q)[::-1], atol=1e-10)


def test_a_misspelt_joint_name_is_named_as_the_likely_cause(ur5):
    """issue 24: a misspelt name in JointState was reported only as the right joint "missing"."""
    model, _ = ur5
    core = GravityCompensator(model, GravitySettings())
    wrong = model.joint_names[2][:-2] + model.joint_names[2][-1] + model.joint_names[2][-2]   # last two swapped
    names = [wrong if i == 2 else n for i, n in enumerate(model.joint_names)]
    msg = JointStateFields(T0, tuple(n.encode() for n in names), tuple(float(x) for x in Q), (), ())
    assert core.on_joint_state(msg, 0, T0) is None
    r = core.step(T0, 0)
    assert r.command is None and r.level == WARN
    assert f"likely misspelt: '{wrong}' for '{model.joint_names[2]}'" in r.reason, r.reason


def test_gravity_friction_and_hardware_gravity(ur5):
    model, ref = ur5
    m = _model()
    m.damping[:] = np.linspace(0.5, 1.0, m.n)
    m.friction[:] = np.linspace(2.0, 1.0, m.n)
    core = GravityCompensator(m, GravitySettings(friction_compensation=True))
    core.on_joint_state(fields(m, Q), 0, T0)      # no velocity: not ready (friction needs it)
    assert core.step(T0, 0).command is None
    core.on_joint_state(fields(m, Q, QD), 0, T0)
    fr = np.linspace(0.5, 1.0, m.n) * QD + np.linspace(2.0, 1.0, m.n) * np.sign(QD)
    np.testing.assert_allclose(core.step(T0, 0).command, ref.gravity(Q) + fr, atol=1e-10)
    core.with_settings(hardware_compensates_gravity=True)
    np.testing.assert_allclose(core.step(T0, 0).command, fr, atol=1e-12)
    # switching friction off keeps the state (readiness no longer needs velocities) -> a fresh mapper
    core.with_settings(friction_compensation=False, hardware_compensates_gravity=False)
    assert core.step(T0, 0).command is None        # readiness changed: wait for a state again
    core.on_joint_state(fields(m, Q), 0, T0)
    np.testing.assert_allclose(core.step(T0, 0).command, ref.gravity(Q), atol=1e-10)


def test_gravity_clamp_counts(ur5):
    _, ref = ur5
    m = _model()
    m.effort_limit[:] = 5.0
    core = GravityCompensator(m)
    core.on_joint_state(fields(m, Q), 0, T0)
    r = core.step(T0, 0)
    g = ref.gravity(Q)
    np.testing.assert_allclose(r.command, np.clip(g, -5, 5), atol=1e-10)
    assert core.clamped == int((np.abs(g) > 5).sum()) > 0
    core.with_settings(clamp_to_effort_limits=False)
    np.testing.assert_allclose(core.step(T0, 0).command, g, atol=1e-10)


@pytest.mark.parametrize("policy, level, expect_zero", [("hold", WARN, False), ("zero", ERROR, True)])
def test_gravity_stale_policy_by_stamp_and_by_arrival_then_recovery(ur5, policy, level, expect_zero):
    model, ref = ur5
    core = GravityCompensator(model, GravitySettings(stale_policy=policy, state_timeout=0.1,
                                                     friction_compensation=False))
    core.on_joint_state(fields(model, Q, stamp_ns=T0), arrival_ns=5 * S, now_ns=T0)
    assert core.step(T0 + S // 10, 5 * S).level == OK               # exactly state_timeout old: fresh
    expected = np.zeros(model.n) if expect_zero else ref.gravity(Q)
    for now, arrival_now in ((T0 + S // 10 + 1, 5 * S),            # stale by stamp
                             (T0 + S // 10, 5 * S + S // 10 + 1)):  # stamp fresh, but it waited: by arrival
        r = core.step(now, arrival_now)
        assert r.safe and r.level == level and "stale" in r.reason
        np.testing.assert_allclose(r.command, expected, atol=1e-10)
    q2 = Q + 0.1
    core.on_joint_state(fields(model, q2, stamp_ns=T0 + S), arrival_ns=6 * S, now_ns=T0 + S)
    r = core.step(T0 + S, 6 * S)
    assert r.level == OK and not r.safe
    np.testing.assert_allclose(r.command, ref.gravity(q2), atol=1e-10)


def test_gravity_disabled_commands_zeros(ur5):
    model, _ = ur5
    core = GravityCompensator(model, GravitySettings(enabled=False))
    core.on_joint_state(fields(model, Q), 0, T0)
    assert core.step(T0, 0) == ([0.0] * model.n, False, OK, "disabled: commanding zeros")
    r = core.step(T0, S)
    assert r.command == [0.0] * model.n and r.safe and r.level == WARN


def test_gravity_backward_clock_jump_resets_ordering_and_is_reported(ur5):
    model, ref = ur5
    core = GravityCompensator(model)
    core.on_joint_state(fields(model, Q, stamp_ns=T0), 0, T0)
    assert core.step(T0, 0).level == OK
    # the clock jumps back 50 s (a bag restarting under use_sim_time)
    back = T0 - 50 * S
    r = core.step(back, 1000)
    assert r.safe and "jumped back" in r.reason and core.mapper.clock_jumps == 1
    np.testing.assert_allclose(r.command, ref.gravity(Q), atol=1e-10)    # hold at the last known state
    r = core.step(back, 2000)
    assert r.safe and r.level != OK                   # still no fresh state: never OK
    # the next state stamped on the new clock is in order (no "out of order" against T0)
    q2 = Q - 0.2
    assert core.on_joint_state(fields(model, q2, stamp_ns=back + 1), 3000, back + 1) is None
    r = core.step(back + 1, 3000)
    assert r.level == OK
    np.testing.assert_allclose(r.command, ref.gravity(q2), atol=1e-10)


def test_gravity_future_stamp_does_not_block_and_far_future_rejected(ur5):
    model, ref = ur5
    core = GravityCompensator(model, GravitySettings(state_timeout=0.1))
    assert core.on_joint_state(fields(model, Q, stamp_ns=T0 + S // 20), 0, T0) is None   # 50 ms ahead: skew
    r = core.on_joint_state(fields(model, Q, stamp_ns=T0 + S), 0, T0)                   # 1 s ahead
    assert r.code is RejectCode.FUTURE
    q2 = Q + 0.05
    assert core.on_joint_state(fields(model, q2, stamp_ns=T0 + 1000), 1000, T0 + 1000) is None
    np.testing.assert_allclose(core.step(T0 + 1000, 1000).command, ref.gravity(q2), atol=1e-10)


def test_gravity_implausible_state_rejected_counted_and_not_commanded(ur5):
    model, ref = ur5
    core = GravityCompensator(model)
    core.on_joint_state(fields(model, Q), 0, T0)
    j = model.joint_names[2]   # elbow: limits ±π
    for bad_q, why in ((1e300, "outside"), (model.upper[2] + 0.1001, "outside")):
        q = Q.copy()
        q[2] = bad_q
        r = core.on_joint_state(fields(model, q), 0, T0)
        assert r.code is RejectCode.IMPLAUSIBLE and why in r.detail and j in r.detail
    q = Q.copy()
    q[2] = model.upper[2] + 0.0999     # within the documented 0.1 rad margin: accepted
    assert core.on_joint_state(fields(model, q), 0, T0) is None
    qd = np.zeros(model.n)
    qd[4] = 10.0 * model.velocity_limit[4] * 1.001   # the documented default factor 10
    r = core.on_joint_state(fields(model, Q, qd), 0, T0)
    assert r.code is RejectCode.IMPLAUSIBLE and "velocity" in r.detail
    qd[4] = math.inf
    assert core.on_joint_state(fields(model, Q, qd), 0, T0).code is RejectCode.NONFINITE
    q = Q.copy()
    q[0] = math.nan
    assert core.on_joint_state(fields(model, q), 0, T0).code is RejectCode.NONFINITE
    assert core.mapper.rejected_joints == {j: 2, model.joint_names[4]: 2, model.joint_names[0]: 1}
    # the command is still the last accepted state's
    q = Q.copy()
    q[2] = model.upper[2] + 0.0999
    np.testing.assert_allclose(core.step(T0, 0).command, ref.gravity(q), atol=1e-10)


def test_plausibility_bounds_margins_and_exceptions():
    m = SimpleNamespace(n=5, lower=np.array([-1.0, -np.inf, 0.0, 2.0, 0.0]),
                        upper=np.array([1.0, np.inf, 0.04, 2.0, 1.0]),
                        velocity_limit=np.array([2.0, 3.0, 0.1, 0.0, np.inf]),
                        joint_types=("revolute", "continuous", "prismatic", "revolute", "continuous"))
    lo, hi, vmax = plausibility_bounds(m, CoreSettings(position_margin=0.1, prismatic_margin=0.01,
                                                       velocity_factor=2.0))
    np.testing.assert_allclose(lo, [-1.1, -np.inf, -0.01, -np.inf, -np.inf])
    np.testing.assert_allclose(hi, [1.1, np.inf, 0.05, np.inf, np.inf])
    np.testing.assert_allclose(vmax, [4.0, 6.0, 0.2, np.inf, np.inf])


def test_gravity_nonfinite_torque_withheld_and_fault():
    model = _model()

    class NanEngine:
        def gravity(self, q):
            return np.full(len(q), np.nan)

    core = GravityCompensator(model, engine=NanEngine())
    core.on_joint_state(fields(model, Q), 0, T0)
    r = core.step(T0, 0)
    assert r.command is None and r.level == ERROR and core.nonfinite == 1
    r = core.step(T0, S)     # stale, hold: the hold torque is not finite either
    assert r.command is None and r.safe and r.level == ERROR
    core.fault = "crossval FAILED"
    assert core.step(T0, 0) == (None, False, ERROR, "crossval FAILED")


def test_gravity_settings_checked():
    model = _model()
    with pytest.raises(ValueError, match="stale_policy"):
        GravityCompensator(model, GravitySettings(stale_policy="drop"))
    core = GravityCompensator(model)
    with pytest.raises(ValueError, match="state_timeout"):
        core.with_settings(state_timeout=-1.0)
    with pytest.raises(ValueError, match="velocity_factor"):
        core.with_settings(velocity_factor=0.5)
    assert core.settings == GravitySettings()
    with pytest.raises(ValueError, match="command joint 'nope'"):
        GravityCompensator(model, command_joints=["nope"])


def test_gravity_payload_swap_keeps_state_and_adds_the_payload_torque(ur5):
    """model.with_settings(payload=...) + set_model: the extra torque equals -J_com^T m g of the point mass
    (Pinocchio kinematics of the unmodified URDF); the shared model is not changed."""
    model, ref = ur5
    core = GravityCompensator(model)
    core.on_joint_state(fields(model, Q), 0, T0)
    before = np.array(core.step(T0, 0).command)
    link, mass, com = "wrist_3_link", 2.0, np.array([0.0, 0.0, 0.1])
    core.set_model(model.with_settings(payload=(link, mass, com)))
    after = np.array(core.step(T0, 0).command)
    assert model.payload is None
    m = ref.m.copy()
    fid = m.getFrameId(link)
    frame = m.frames[fid]
    m.addFrame(pin.Frame("payload_com", frame.parentJoint, fid, frame.placement * pin.SE3(np.eye(3), com),
                         pin.FrameType.OP_FRAME))
    d = m.createData()
    J = pin.computeFrameJacobian(m, d, ref._q(Q), m.getFrameId("payload_com"), pin.LOCAL_WORLD_ALIGNED)[:3]
    expected = -(J.T @ (mass * np.array([0.0, 0.0, -9.81])))[ref.idx_v]
    np.testing.assert_allclose(after - before, expected, atol=1e-9)


# ------------------------------------------------------------------------------------------ computed torque
def _ct(model, **kw):
    gains = kw.pop("gains", {})
    return ComputedTorqueController(model, ComputedTorqueSettings(gains=gains, **kw), epoch_ns=T0)


def _traj(joint_names, points, stamp_ns=0):
    pts = [SimpleNamespace(positions=list(p), velocities=[], accelerations=[],
                           time_from_start=SimpleNamespace(sec=int(t), nanosec=int(round((t % 1) * 1e9))))
           for t, p in points]
    return SimpleNamespace(header=SimpleNamespace(stamp=SimpleNamespace(sec=stamp_ns // S, nanosec=stamp_ns % S)),
                           joint_names=list(joint_names), points=pts)


@pytest.mark.parametrize("mode", ["feedforward", "computed_torque", "gravity"])
def test_ct_holds_first_measured_q_with_each_law(ur5, mode):
    model, ref = ur5
    P, D, KP, KD = 30.0, 3.0, 100.0, 20.0
    gains = {j: {"p": P, "d": D, "kp": KP, "kd": KD} for j in model.joint_names}
    core = _ct(model, mode=mode, gains=gains)
    assert core.step(T0, 0).level == WARN
    core.on_joint_state(fields(model, Q, QD), 0, T0)
    r = core.step(T0, 0)
    assert r.level == OK and r.reason == f"{mode}: holding"
    # a second state moves away from the held q: the PD / computed-torque feedback acts on e = q_d - q
    q2 = Q + np.linspace(-0.02, 0.03, model.n)
    core.on_joint_state(fields(model, q2, QD), 0, T0)
    tau = np.array(core.step(T0, 0).command)
    e, ed = Q - q2, -QD
    if mode == "feedforward":
        expected = ref.rnea(Q, np.zeros(6), np.zeros(6)) + P * e + D * ed
    elif mode == "gravity":
        expected = ref.gravity(q2) + P * e + D * ed
    else:
        expected = ref.computed_torque(q2, QD, KD * ed + KP * e)
    np.testing.assert_allclose(tau, np.clip(expected, -model.effort_limit, model.effort_limit), atol=1e-9)


def test_ct_trajectory_sampled_at_the_stamp_and_linear_interpolation(ur5):
    model, ref = ur5
    core = _ct(model, mode="feedforward")
    core.on_joint_state(fields(model, Q, np.zeros(6), stamp_ns=T0), 0, T0)
    q1 = Q + 0.2
    spec = core.trajectory_from_message(_traj(model.joint_names, [(1.0, q1)]))
    assert core.submit_trajectory(spec, core.time_s(T0)) == 0.0
    t = T0 + S // 4
    core.on_joint_state(fields(model, Q, np.zeros(6), stamp_ns=t), 0, t)
    r = core.step(t + 1000, 0, sample_ns=t)            # sampled at the state's stamp
    assert r.reason == "feedforward: tracking"
    qd_d = (q1 - Q) / 1.0                              # linear segment from the implicit first point
    np.testing.assert_allclose(core.desired.q, Q + 0.25 * (q1 - Q), atol=1e-12)
    np.testing.assert_allclose(core.desired.qd, qd_d, atol=1e-12)
    np.testing.assert_allclose(core.feedforward, ref.rnea(core.desired.q, qd_d, np.zeros(6)), atol=1e-9)
    np.testing.assert_allclose(r.command, core.feedforward, atol=1e-9)   # P = D = 0 by default
    bad = Q.copy()
    bad[1] = 10.0
    with pytest.raises(TrajectoryRejected, match="upper limit"):
        core.trajectory_from_message(_traj(model.joint_names, [(1.0, bad)]))


@pytest.mark.parametrize("mode", ["feedforward", "computed_torque", "gravity"])
def test_ct_stale_is_gravity_only_at_last_state_error_then_recovers(ur5, mode):
    model, ref = ur5
    gains = {j: {"p": 50.0, "d": 5.0} for j in model.joint_names}
    core = _ct(model, mode=mode, gains=gains, state_timeout=0.05)
    core.on_joint_state(fields(model, Q, QD, stamp_ns=T0), 0, T0)
    spec = core.trajectory_from_message(_traj(model.joint_names, [(0.5, Q + 0.3)]))
    core.submit_trajectory(spec, 0.0)
    assert core.step(T0, 0).level == OK
    for now, arr in ((T0 + S // 20, S // 10), (T0 + S // 10, 0)):     # by arrival, then by stamp
        r = core.step(now, arr)
        assert r.safe and r.level == ERROR and "gravity only" in r.reason
        np.testing.assert_allclose(r.command, ref.gravity(Q), atol=1e-10)    # no PD, no feedforward
    core.on_joint_state(fields(model, Q, QD, stamp_ns=T0 + S // 5), S // 5, T0 + S // 5)
    r = core.step(T0 + S // 5, S // 5)
    assert r.level == OK and not r.safe


def test_ct_refuses_computed_torque_on_massless_joints():
    model = _model()
    model.massless_joints = (model.joint_names[5],)
    with pytest.raises(UserError, match="M\\(q\\) > 0.*" + model.joint_names[5]):
        _ct(model, mode="computed_torque")
    core = _ct(model, mode="feedforward")
    with pytest.raises(UserError, match="massless|move no mass"):
        core.with_settings(mode="computed_torque")
    assert core.settings.mode == "feedforward"


def test_ct_settings_and_gain_errors():
    model = _model()
    with pytest.raises(ValueError, match="mode"):
        _ct(model, mode="pid")
    with pytest.raises(ValueError, match="gains.shoulder_pan_joint.kp"):
        _ct(model, gains={"shoulder_pan_joint": {"kp": -1.0}})
    with pytest.raises(ValueError, match="'nope' is not a model joint"):
        _ct(model, gains={"nope": {"p": 1.0}})
    core = _ct(model)
    other = _model("panda")
    with pytest.raises(ValueError, match="differ"):
        core.set_model(other)


def test_continuous_joints_short_way_in_trajectory_and_feedback():
    """Kinova's first joint is continuous: +3.1 -> -3.1 rad is 0.0832 rad the short way (2π - 6.2)."""
    model = _model("kinova")
    c = [i for i, t in enumerate(model.joint_types) if t == "continuous"]
    assert c
    j = c[0]
    names = model.joint_names
    q0 = np.clip(np.zeros(model.n), model.lower, model.upper)
    pts = []
    for t, a in ((1.0, 3.1), (2.0, -3.1), (3.0, 3.0)):
        p = q0.copy()
        p[j] = a
        pts.append((t, p))
    spec = validate_joint_trajectory(_traj(names, pts), names, continuous=[t == "continuous" for t in
                                                                            model.joint_types])
    np.testing.assert_allclose(spec.positions[:, j], [3.1, 2 * np.pi - 3.1, 3.0], atol=1e-12)
    # the controller holds the measured -3.1 rad; a trajectory to +3.1 starts the short way round
    core = ComputedTorqueController(model, ComputedTorqueSettings(
        gains={names[j]: {"p": 10.0}}), epoch_ns=T0)
    qm = q0.copy()
    qm[j] = -3.1
    core.on_joint_state(fields(model, qm, np.zeros(model.n)), 0, T0)
    core.step(T0, 0)
    target = q0.copy()
    target[j] = 3.1
    core.submit_trajectory(core.trajectory_from_message(_traj(names, [(1.0, target)])), 0.0)
    core.step(T0 + S // 2, 0)
    assert core.desired.q[j] == pytest.approx(-3.1 - (2 * np.pi - 6.2) / 2, abs=1e-9)   # half way, short way
    # measured angle reported wrapped on the other side (+3.14): the PD error is the short one
    qm[j] = 3.14
    core.on_joint_state(fields(model, qm, np.zeros(model.n)), 0, T0 + S // 2)
    core.step(T0 + S // 2, 0)
    e = core.desired.q[j] - qm[j]
    assert abs(e) < np.pi and e == pytest.approx((-3.1 - (2 * np.pi - 6.2) / 2 + 2 * np.pi) - 3.14, abs=1e-9)


def _rss_bytes() -> int:
    import os

    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_memory_bounded_under_100000_messages_with_changing_names(ur5):
    """Hostile input: every message carries 50 names never seen before plus the model joints. The caches
    stay at their bound and RSS grows by less than 20 MB over 100 000 messages (issue bound); the good
    states keep being commanded."""
    import gc

    model, ref = ur5
    core = GravityCompensator(model)
    good = [n.encode() for n in model.joint_names]
    q = tuple(float(x) for x in Q)
    for k in range(2000):       # warm-up: allocator pools, caches at their bound
        names = tuple(f"x{k}_{i}".encode() for i in range(50)) + tuple(good)
        core.on_joint_state(JointStateFields(0, names, (0.0,) * 50 + q, (), ()), k, T0)
    gc.collect()
    before = _rss_bytes()
    for k in range(2000, 102000):
        names = tuple(f"x{k}_{i}".encode() for i in range(50)) + tuple(good)
        assert core.on_joint_state(JointStateFields(0, names, (0.0,) * 50 + q, (), ()), k, T0) is None
    gc.collect()
    growth = _rss_bytes() - before
    assert growth < 20 * 2**20, f"RSS grew by {growth / 2**20:.1f} MB"
    assert len(core.mapper._orderings) <= 64
    assert core.mapper.unknown_name_count == 50 * 102000
    np.testing.assert_allclose(core.step(T0, 102000).command, ref.gravity(Q), atol=1e-10)
