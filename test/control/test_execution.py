"""Trajectory goals, speed scaling and gravity-compensating drives on the computed-torque core (no ROS).

Independent sources: the desired motion is a closed-form quintic per joint (numpy Polynomial) that the
node's quintic interpolation reproduces exactly from its boundary values; virtual time at a constant
factor is τ = k (t − t_start) by hand; expected torques come from Pinocchio on the URDF file
(``PinByName``), the mass-matrix diagonal from Pinocchio's CRBA.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from numpy.polynomial import Polynomial

from robot_dynamics_ros.control.joint_mapping import JointStateFields
from robot_dynamics_ros.control.computed_torque import ComputedTorqueController, ComputedTorqueSettings
from robot_dynamics_ros.control.execution import (
    ABORTED, CANCELED, GOAL_TOLERANCE_VIOLATED, INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP,
    PATH_TOLERANCE_VIOLATED, SUCCEEDED, ExecutionSettings, GoalRejected, TrajectoryExecution, goal_tolerances,
)
from robot_dynamics_ros.control.speed_scaling import VirtualClock
from robot_dynamics_testing.execution_cases import DT, Q0, S, T0, ur5_with_reference



@pytest.fixture(scope="module")
def ur5():
    return ur5_with_reference()


def _fields(model, q, qd, stamp_ns):
    names = tuple(n.encode() for n in model.joint_names)
    return JointStateFields(stamp_ns, names, tuple(map(float, q)), tuple(map(float, qd)), ())


def _polys(duration=2.0, amplitude=0.4):
    """Per joint a rest-to-rest quintic from Q0 by ``amplitude`` (rad) over ``duration`` (s)."""
    out = []
    for i, q0 in enumerate(Q0):
        a = amplitude * (1 if i % 2 else -1) * (0.5 + 0.1 * i)
        s = Polynomial([0, 0, 0, 10, -15, 6]) * a   # 10u³ − 15u⁴ + 6u⁵: zero velocity/acc at both ends
        out.append(Polynomial([q0]) + s(Polynomial([0, 1 / duration])))
    return out


def _point(polys, t, names_idx=None):
    idx = range(len(polys)) if names_idx is None else names_idx
    sec, ns = divmod(int(round(t * 1e9)), S)
    return SimpleNamespace(positions=[float(polys[i](t)) for i in idx],
                           velocities=[float(polys[i].deriv(1)(t)) for i in idx],
                           accelerations=[float(polys[i].deriv(2)(t)) for i in idx],
                           time_from_start=SimpleNamespace(sec=sec, nanosec=ns))


def _msg(model, polys, times, stamp_ns=0, joints=None):
    idx = list(range(model.n)) if joints is None else joints
    sec, ns = divmod(stamp_ns, S)
    return SimpleNamespace(header=SimpleNamespace(stamp=SimpleNamespace(sec=sec, nanosec=ns)),
                           joint_names=[model.joint_names[i] for i in idx],
                           points=[_point(polys, t, idx) for t in times])


class Loop:
    """A controller fed a measured state by the test (ideal tracking unless told otherwise)."""

    def __init__(self, model, **settings):
        self.core = ComputedTorqueController(model, ComputedTorqueSettings(state_timeout=1.0, **settings),
                                             epoch_ns=T0)
        self.exe = TrajectoryExecution(self.core, ExecutionSettings(path_tolerance=0.05, goal_time=0.3))
        self.model = model
        self.t = 0.0
        self.q, self.qd = Q0.copy(), np.zeros(model.n)
        self.outcomes = []
        self.commands, self.desired, self.clock = [], [], []

    def tick(self, follow=True):
        self.t += DT
        ns = T0 + int(round(self.t * 1e9))
        self.core.on_joint_state(_fields(self.model, self.q, self.qd, ns), ns, ns)
        r = self.core.step(ns, ns)
        d = self.core.desired
        self.commands.append(np.array(r.command))
        self.desired.append(d)
        c = self.core.clock
        self.clock.append((self.t, c.k, c.k_dot, self.core.virtual_time))
        out = self.exe.update(self.t)
        if out is not None:
            self.outcomes.append(out)
        if follow:
            self.q, self.qd = d.q.copy(), d.qd.copy()
        return r

    def run(self, seconds, **kw):
        for _ in range(int(round(seconds / DT))):
            self.tick(**kw)


def _start_goal(loop, polys, times, **tol):
    spec = loop.exe.prepare(_msg(loop.model, polys, times), loop.t)
    tols = goal_tolerances(loop.exe.settings, loop.model.joint_names, **tol)
    return loop.exe.start(spec, tols, loop.t)


# ------------------------------------------------------------------------------- speed scaling
def test_scaled_feedforward_is_rnea_of_k_qprime_and_k2_qsecond(ur5):
    model, ref = ur5
    loop = Loop(model, speed_scaling=0.5, friction_compensation=False)
    loop.run(0.01)
    polys = _polys()
    t_sub = loop.t
    _start_goal(loop, polys, [0.0, 1.0, 2.0])
    worst, checked = 0.0, 0
    for _ in range(2200):
        loop.tick()
        rel = 0.5 * (loop.t - t_sub)     # τ at the constant factor k = 0.5
        if rel >= 2.0:
            continue
        q = np.array([p(rel) for p in polys])
        dq = np.array([p.deriv(1)(rel) for p in polys])
        ddq = np.array([p.deriv(2)(rel) for p in polys])
        np.testing.assert_allclose(loop.desired[-1].q, q, atol=1e-9)
        worst = max(worst, np.abs(loop.core.feedforward - ref.rnea(q, 0.5 * dq, 0.25 * ddq)).max())
        checked += 1
    assert checked > 1990 and worst < 1e-9, (checked, worst)   # 4 s of real time for the 2 s trajectory
    # the unscaled derivatives would be far off somewhere along it: the check can fail
    rel = 0.5
    q, dq, ddq = ([p.deriv(r)(rel) for p in polys] for r in (0, 1, 2))
    assert np.abs(ref.rnea(q, dq, ddq) - ref.rnea(q, 0.5 * np.array(dq), 0.25 * np.array(ddq))).max() > 0.1
    assert [o.state for o in loop.outcomes] == [SUCCEEDED]


def test_scaled_trajectory_takes_twice_as_long(ur5):
    model, _ = ur5
    durations = {}
    for k in (1.0, 0.5):
        loop = Loop(model, speed_scaling=k)
        loop.run(0.01)
        t_sub = loop.t
        _start_goal(loop, _polys(), [0.0, 2.0])
        loop.run(5.0)
        assert loop.outcomes[0].state == SUCCEEDED
        moving = [t for (t, *_), d in zip(loop.clock, loop.desired) if d.tracking]
        durations[k] = moving[-1] - t_sub
    assert durations[1.0] == pytest.approx(2.0, abs=2 * DT)
    assert durations[0.5] == pytest.approx(4.0, abs=2 * DT)


def test_step_in_k_is_rate_and_jerk_limited_and_acceleration_follows_the_chain_rule(ur5):
    model, _ = ur5
    rate, jerk = 2.0, 20.0
    loop = Loop(model, speed_scaling_rate=rate, speed_scaling_jerk=jerk, friction_compensation=False)
    loop.run(0.01)
    polys = _polys(duration=3.0)
    t_sub = loop.t
    _start_goal(loop, polys, [0.0, 3.0])
    loop.run(0.5)
    n0 = len(loop.clock)
    loop.core.clock.set_target(0.3)     # a step request 1 → 0.3
    loop.run(1.0)
    ts, ks, kds, taus = (np.array(x) for x in zip(*loop.clock[n0 - 1:]))
    assert ks[-1] == 0.3 and kds[-1] == 0.0
    assert np.abs(kds).max() == pytest.approx(rate)           # the rate limit binds ...
    assert np.abs(np.diff(kds)).max() <= jerk * DT + 1e-12     # ... and k̇ never steps
    # τ integrates k (trapezoid) and the desired derivatives follow the chain rule at the clock's k, k̇
    np.testing.assert_allclose(np.diff(taus), 0.5 * (ks[1:] + ks[:-1]) * DT, atol=1e-12)
    for i in range(n0, len(loop.clock)):
        t, k, kd, tau = loop.clock[i]
        rel = tau - t_sub    # τ = t while k was 1, so the goal started at τ = t_sub
        dq = np.array([p.deriv(1)(rel) for p in polys])
        ddq = np.array([p.deriv(2)(rel) for p in polys])
        d = loop.desired[i]
        np.testing.assert_allclose(d.qd, k * dq, atol=1e-9)
        np.testing.assert_allclose(d.qdd, k * k * ddq + kd * dq, atol=1e-9)
    # the commanded acceleration moves by no more than rate·|q′| from the k² q″ a constant k would give
    qdd = np.array([d.qdd for d in loop.desired[n0:]])
    assert np.abs(np.diff(qdd, axis=0)).max() < 0.05   # rad/s² per 2 ms tick: no step


def test_virtual_clock_reads_an_earlier_time_back_without_moving():
    """A control node's safety timer samples at "now", then the next state at its (earlier) stamp: τ at the
    stamp must not depend on whether the timer ticked in between (replay found commands differing run to run)."""
    clock = VirtualClock()
    assert clock.advance(10.000) == pytest.approx(10.000)
    assert clock.advance(10.005) == pytest.approx(10.005)          # the safety timer's tick
    assert clock.advance(10.002) == pytest.approx(10.002, abs=1e-15)  # the state stamped before it
    assert clock.advance(10.006) == pytest.approx(10.006)          # and the clock went on from 10.005


def test_virtual_clock_refuses_bad_factors():
    c = VirtualClock()
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="speed scaling factor"):
            c.set_target(bad)
    with pytest.raises(ValueError, match="rate"):
        VirtualClock(rate=0.0)


# ------------------------------------------------------------------------------- gravity, defaults
def test_hardware_compensates_gravity_subtracts_g_of_the_measured_q(ur5):
    model, ref = ur5
    a = Loop(model, speed_scaling=1.0)
    b = Loop(model, hardware_compensates_gravity=True)
    for loop in (a, b):
        loop.q, loop.qd = Q0 + 0.01, np.full(model.n, 0.02)
        loop.tick(follow=False)
    np.testing.assert_allclose(a.commands[-1] - b.commands[-1], ref.gravity(Q0 + 0.01), atol=1e-9)
    assert np.abs(ref.gravity(Q0 + 0.01)).max() > 1.0
    # the safe command (stale state) is then zero, not g
    ns = T0 + int(round((b.t + 5.0) * 1e9))
    r = b.core.step(ns, ns)
    assert r.safe and r.command == [0.0] * model.n


def test_unset_gains_become_critically_damped_on_the_inertia_diagonal(ur5):
    model, ref = ur5
    loop = Loop(model, unset_gains="model", model_gain_bandwidth=15.0)
    loop.tick(follow=False)
    pin = ref.pin
    M = pin.crba(ref.m, ref.d, ref._q(Q0))
    m = np.diag(M)[ref.idx_v]
    assert loop.core.model_gains
    np.testing.assert_allclose(loop.core.gains.p, 225.0 * m, rtol=1e-12)
    np.testing.assert_allclose(loop.core.gains.d, 30.0 * m, rtol=1e-12)
    # a later settings change (any parameter) keeps them; configuring gains replaces them
    loop.core.with_settings(speed_scaling=0.7)
    assert loop.core.model_gains
    np.testing.assert_allclose(loop.core.gains.p, 225.0 * m, rtol=1e-12)
    loop.core.with_settings(gains={"elbow_joint": {"p": 5.0}})
    assert not loop.core.model_gains and loop.core.gains.p[2] == 5.0 and loop.core.gains.p[0] == 0.0
    # configured gains are kept
    kept = Loop(model, unset_gains="model", gains={"elbow_joint": {"p": 5.0}})
    kept.tick(follow=False)
    assert not kept.core.model_gains and kept.core.gains.p[2] == 5.0


# ------------------------------------------------------------------------------- goals
def _rejected(loop, msg):
    with pytest.raises(GoalRejected) as info:
        loop.exe.prepare(msg, loop.t)
    return info.value


def test_goal_rejections_name_joint_and_point(ur5):
    model, _ = ur5
    loop = Loop(model)
    loop.run(0.01)
    polys = _polys()
    partial = _rejected(loop, _msg(model, polys, [0.0, 2.0], joints=[0, 1, 2]))
    assert partial.code == INVALID_JOINTS and "wrist_1_joint" in str(partial)
    far = [Polynomial([0.2]) + p for p in polys]
    off = _rejected(loop, _msg(model, far, [0.0, 2.0]))
    assert off.code == INVALID_GOAL and "points[0]" in str(off) and "0.2 rad" in str(off)
    moving = _msg(model, polys, [0.0, 1.0])     # ends mid-motion
    end = _rejected(loop, moving)
    assert "points[1].velocities" in str(end) and "zero velocity" in str(end)
    nan = _msg(model, polys, [0.0, 2.0])
    nan.points[1].positions[3] = float("nan")
    assert "points[1].positions[3]" in str(_rejected(loop, nan))
    order = _msg(model, polys, [0.0, 2.0, 1.5])
    assert "points[2].time_from_start" in str(_rejected(loop, order))
    fast = _msg(model, _polys(duration=0.1, amplitude=2.0), [0.0, 0.1])
    assert "velocity limit" in str(_rejected(loop, fast))
    assert _rejected(loop, _msg(model, polys, [])).code == INVALID_GOAL


def test_partial_goal_holds_the_other_joints_when_allowed(ur5):
    model, _ = ur5
    loop = Loop(model)
    loop.exe.settings = ExecutionSettings(allow_partial_joints_goal=True)
    loop.run(0.01)
    polys = _polys()
    spec = loop.exe.prepare(_msg(model, polys, [0.0, 2.0], joints=[0, 2]), loop.t)
    np.testing.assert_allclose(spec.positions[:, [1, 3, 4, 5]], np.tile(Q0[[1, 3, 4, 5]], (2, 1)), atol=1e-12)
    np.testing.assert_allclose(spec.positions[-1, [0, 2]], [polys[0](2.0), polys[2](2.0)], atol=1e-12)


def test_past_stamp_drops_due_points(ur5):
    model, _ = ur5
    loop = Loop(model)
    loop.run(1.0)
    polys = _polys()
    stamp = T0 + int(round((loop.t - 0.5) * 1e9))   # started 0.5 s ago
    msg = _msg(model, polys, [0.0, 0.4, 1.0, 2.0], stamp_ns=stamp)
    loop.q = np.array([p(0.5) for p in polys])      # the arm is where the trajectory is now
    spec = loop.exe.prepare(msg, loop.t)
    assert spec.start_ns == 0
    np.testing.assert_allclose(spec.times, [0.5, 1.5], atol=1e-9)
    old = _msg(model, polys, [0.0, 0.4], stamp_ns=stamp)
    assert _rejected(loop, old).code == OLD_HEADER_TIMESTAMP


def test_tolerance_defaults_and_unchecked():
    s = ExecutionSettings(path_tolerance=0.1, goal_tolerance=0.02)
    names = ["a", "b", "c"]
    tol = [SimpleNamespace(name="b", position=0.0, velocity=-1.0, acceleration=0.0),
           SimpleNamespace(name="c", position=-1.0, velocity=0.5, acceleration=0.0)]
    t = goal_tolerances(s, names, path_tolerance=tol, goal_tolerance=[], goal_time_tolerance=0.0)
    assert t.path_position.tolist() == [0.1, 0.1, np.inf]
    assert t.path_velocity.tolist() == [np.inf, np.inf, 0.5]
    assert t.goal_position.tolist() == [0.02] * 3 and t.goal_time == s.goal_time
    with pytest.raises(GoalRejected, match="not a controlled joint"):
        goal_tolerances(s, names, path_tolerance=[SimpleNamespace(name="x", position=0, velocity=0)])
    with pytest.raises(GoalRejected, match="-2"):
        goal_tolerances(s, names, goal_tolerance=[SimpleNamespace(name="a", position=-2, velocity=0)])


def test_path_violation_aborts_and_holds_the_measured_position(ur5):
    model, _ = ur5
    loop = Loop(model)
    loop.run(0.01)
    _start_goal(loop, _polys(), [0.0, 2.0])
    loop.run(0.8, follow=False)     # the arm does not move: the error grows past 0.05 rad
    assert [(o.state, o.code) for o in loop.outcomes] == [(ABORTED, PATH_TOLERANCE_VIOLATED)]
    assert "path tolerance violated" in loop.outcomes[0].text
    loop.tick(follow=False)
    np.testing.assert_allclose(loop.desired[-1].q, Q0, atol=1e-12)
    assert not loop.desired[-1].qd.any()


def test_goal_violation_after_goal_time(ur5):
    model, _ = ur5
    loop = Loop(model)
    loop.run(0.01)
    polys = _polys()
    _start_goal(loop, polys, [0.0, 2.0], path_tolerance=[
        SimpleNamespace(name=n, position=-1.0, velocity=-1.0) for n in model.joint_names])
    loop.run(1.9)
    loop.q, loop.qd = np.array([p(2.0) for p in polys]) + 0.02, np.zeros(model.n)  # beyond the 0.01 default
    loop.run(0.8, follow=False)
    assert [(o.state, o.code) for o in loop.outcomes] == [(ABORTED, GOAL_TOLERANCE_VIOLATED)]
    assert "goal tolerance violated" in loop.outcomes[0].text


def test_cancel_stops_along_the_path_then_holds(ur5):
    model, _ = ur5
    loop = Loop(model)
    loop.run(0.01)
    polys = _polys()
    t_sub = loop.t
    _start_goal(loop, polys, [0.0, 2.0])
    loop.run(1.0)
    n0 = len(loop.desired)
    loop.exe.cancel()
    loop.run(1.0)
    assert [o.state for o in loop.outcomes] == [CANCELED]
    d = loop.desired[n0 - 1:]
    # on the path: each desired position is the polynomial at some τ in the trajectory
    speed = np.array([np.abs(x.qd).max() for x in d])
    assert speed[0] > 0.2 and speed[-1] == 0.0
    stopped_at = next(i for i, s in enumerate(speed) if s == 0.0)
    assert stopped_at * DT < 1.0
    # on the path until it stops, then holding there (τ runs on once held, the position does not)
    taus = [c[3] - t_sub for c in loop.clock[n0 - 1:]]
    for di, tau in zip(d[:stopped_at + 1], taus):
        np.testing.assert_allclose(di.q, [p(tau) for p in polys], atol=1e-9)
    for di in d[stopped_at:]:
        np.testing.assert_allclose(di.q, d[stopped_at].q, atol=0)
    assert taus[stopped_at] < 1.9     # it stopped well before the end of the path
    assert np.abs(np.diff([x.qdd for x in d], axis=0)).max() < 0.1   # no acceleration step
    assert loop.core.clock.k == 1.0     # the next goal runs at full speed again


def test_preemption_aborts_with_invalid_goal(ur5):
    model, _ = ur5
    loop = Loop(model)
    loop.run(0.01)
    polys = _polys()
    _start_goal(loop, polys, [0.0, 2.0])
    loop.run(0.5)
    here = [Polynomial([loop.q[i] - Q0[i]]) + p for i, p in enumerate(_polys(duration=1.0, amplitude=0.1))]
    old = _start_goal(loop, here, [0.0, 1.0])
    assert (old.state, old.code, old.text) == (ABORTED, INVALID_GOAL, "preempted")
    loop.run(1.5)
    assert [o.state for o in loop.outcomes] == [SUCCEEDED]
