"""Trajectories the controller must not follow blindly (issue 25): a stamp in the past never makes the
desired motion jump, accelerations are checked like speeds, and the message size is capped before any
per-point work.

Independent sources: the desired motion is a closed-form quintic (numpy Polynomial); torques come from
Pinocchio on the URDF file (``PinByName``); the velocity limits from the URDF text.
"""
from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
from numpy.polynomial import Polynomial

from robot_dynamics_ros import robots
from robot_dynamics_ros.control.joint_mapping import JointStateFields
from robot_dynamics_ros.control.computed_torque import ComputedTorqueController, ComputedTorqueSettings
from robot_dynamics_ros.control.execution import (INVALID_GOAL, OLD_HEADER_TIMESTAMP, ExecutionSettings,
                                                  GoalRejected, TrajectoryExecution)
from robot_dynamics_ros.control.interpolation import (MAX_TRAJECTORY_POINTS, TrajectoryRejected,
                                                      validate_joint_trajectory)
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_testing.execution_cases import DT, Q0, S, T0, ur5_with_reference



@pytest.fixture(scope="module")
def ur5():
    return ur5_with_reference()


def _duration(t):
    sec, ns = divmod(int(round(t * 1e9)), S)
    return SimpleNamespace(sec=sec, nanosec=ns)


def _msg(model, times, positions, stamp_ns=0, velocities=None, accelerations=None):
    sec, ns = divmod(stamp_ns, S)
    pts = [SimpleNamespace(positions=list(map(float, p)),
                           velocities=[] if velocities is None else list(map(float, velocities[k])),
                           accelerations=[] if accelerations is None else list(map(float, accelerations[k])),
                           time_from_start=_duration(t))
           for k, (t, p) in enumerate(zip(times, positions))]
    return SimpleNamespace(header=SimpleNamespace(stamp=SimpleNamespace(sec=sec, nanosec=ns)),
                           joint_names=list(model.joint_names), points=pts)


def _move(model, amplitude=2.0, duration=2.0, step=0.02):
    """Joint 1 (shoulder pan) rest-to-rest quintic by ``amplitude`` rad over ``duration`` s."""
    s = Polynomial([0, 0, 0, 10, -15, 6])(Polynomial([0, 1 / duration])) * amplitude
    times = np.arange(0.0, duration + 1e-9, step)
    pos = np.tile(Q0, (len(times), 1))
    pos[:, 0] += s(times)
    vel = np.zeros_like(pos)
    vel[:, 0] = s.deriv()(times)
    return times, pos, vel


class Loop:
    def __init__(self, model):
        self.core = ComputedTorqueController(model, ComputedTorqueSettings(state_timeout=1.0), epoch_ns=T0)
        self.exe = TrajectoryExecution(self.core, ExecutionSettings())
        self.model = model
        self.t = 0.0
        self.q, self.qd = Q0.copy(), np.zeros(model.n)
        self.commands, self.desired = [], []

    @property
    def now_ns(self):
        return T0 + int(round(self.t * 1e9))

    def tick(self):
        self.t += DT
        ns = self.now_ns
        names = tuple(n.encode() for n in self.model.joint_names)
        self.core.on_joint_state(JointStateFields(ns, names, tuple(map(float, self.q)), tuple(map(float, self.qd)),
                                                  ()), ns, ns)
        r = self.core.step(ns, ns)
        self.commands.append(np.array(r.command))
        d = self.core.desired
        self.desired.append(d.q.copy())
        self.q, self.qd = d.q.copy(), d.qd.copy()     # ideal tracking


def _settled(model):
    """A controller holding Q0 for 50 ticks, and the 2 rad move of :func:`_move`."""
    loop = Loop(model)
    for _ in range(50):
        loop.tick()
    return loop, _move(model)


def test_a_2_rad_move_stamped_10_s_ago_gives_no_command_step(ur5):
    model, _ = ur5
    loop, (times, pos, vel) = _settled(model)
    with pytest.raises(GoalRejected) as info:   # every point already due: refused, nothing moves
        loop.exe.submit_topic(_msg(model, times, pos, loop.now_ns - 10 * S, vel), loop.t)
    assert info.value.code == OLD_HEADER_TIMESTAMP
    # stamped 1 s ago: the points still due start 1 rad away from the measured state: refused, no jump
    with pytest.raises(GoalRejected) as info:
        loop.exe.submit_topic(_msg(model, times, pos, loop.now_ns - 1 * S, vel), loop.t)
    assert info.value.code == INVALID_GOAL and "measured -> points[0]" in str(info.value)
    for _ in range(200):
        loop.tick()
    cmds = np.array(loop.commands)
    assert np.abs(np.diff(cmds, axis=0)).max() < 1e-9       # held still throughout: no step at all
    assert np.abs(np.array(loop.desired) - Q0).max() < 1e-12


def test_a_move_stamped_just_in_the_past_starts_from_the_measured_state(ur5):
    model, _ = ur5
    loop, (times, pos, vel) = _settled(model)
    loop.exe.submit_topic(_msg(model, times, pos, loop.now_ns - 5_000_000, vel), loop.t)   # 5 ms ago
    for _ in range(1100):
        loop.tick()
    q = np.array(loop.desired)
    vmax = model.velocity_limit
    assert np.abs(q[50] - Q0).max() < 0.05     # the first desired position after the submission: measured
    assert (np.abs(np.diff(q, axis=0)) <= 1.05 * vmax * DT + 1e-9).all()
    assert q[-1, 0] == pytest.approx(Q0[0] + 2.0, abs=1e-9)


def test_a_zigzag_within_the_speeds_is_refused_for_its_accelerations(ur5):
    model, pin_ref = ur5
    vmax = model.velocity_limit[1]      # shoulder lift, 150 N·m
    step = 0.01
    times = np.arange(0.0, 1.0 + 1e-9, step)
    pos = np.tile(Q0, (len(times), 1))
    pos[:, 1] += 0.9 * vmax * step * (np.arange(len(times)) % 2)    # 0.9 × the speed limit, sign flips
    loop = Loop(model)
    loop.tick()
    # at rest at every point (cubic segments): average speeds and given velocities pass the speed check
    msg = _msg(model, times, pos, 0, velocities=np.zeros_like(pos))
    with pytest.raises(GoalRejected) as info:
        loop.exe.submit_topic(msg, loop.t)
    assert "'shoulder_lift_joint'" in str(info.value) and "effort limit" in str(info.value)
    # independent check that the refusal is right: executed anyway (validated fields only), the commands
    # computed by Pinocchio from the sampled desired motion are far beyond the effort limits
    spec = validate_joint_trajectory(msg, model.joint_names)
    loop.core.submit_trajectory(spec, loop.t)
    beyond = 0
    for _ in range(450):
        loop.tick()
        d = loop.core.desired
        beyond += abs(pin_ref.rnea(d.q, d.qd, d.qdd)[1]) > model.effort_limit[1]
    assert beyond > 0.5 * 450
    # a smooth move at the same speeds is accepted
    times, pos, vel = _move(model, amplitude=1.0, duration=1.5)
    pos[:, [0, 1]] = pos[:, [1, 0]]
    pos[:, 0] = Q0[0]
    loop.exe.submit_topic(_msg(model, times, pos + (Q0 - pos[0]), 0), loop.t)


def test_acceleration_limits_from_joint_limits_are_applied(ur5):
    limits = {"joint_limits": {"shoulder_lift_joint": {"has_acceleration_limits": True, "max_acceleration": 5.0}}}
    limited = RobotModel.from_urdf(robots.ROBOTS["ur5"].path, joint_limits=limits)
    core = ComputedTorqueController(limited, ComputedTorqueSettings())

    def lift(amplitude, duration):
        """Shoulder lift rest-to-rest quintic: peak |q̈| = (10/√3) · amplitude / duration²."""
        s = Polynomial([0, 0, 0, 10, -15, 6])(Polynomial([0, 1 / duration])) * amplitude
        times = np.arange(0.0, duration + 1e-9, 0.01)
        pos, vel, acc = np.tile(Q0, (len(times), 1)), np.zeros((len(times), 6)), np.zeros((len(times), 6))
        pos[:, 1] += s(times)
        vel[:, 1], acc[:, 1] = s.deriv()(times), s.deriv(2)(times)
        return _msg(limited, times, pos, velocities=vel, accelerations=acc)

    with pytest.raises(TrajectoryRejected, match="shoulder_lift_joint.*acceleration limit 5"):
        core.trajectory_from_message(lift(1.0, 1.0))        # 5.77 rad/s² > 1.05 × 5
    core.trajectory_from_message(lift(1.0, 1.2))            # 4.0 rad/s²: accepted


def test_point_count_is_capped_before_any_per_point_work(ur5):
    model, _ = ur5
    core = ComputedTorqueController(model, ComputedTorqueSettings())

    class Points(list):
        """A 1e6-point list whose items may not be touched."""

        def __len__(self):
            return 1_000_000

        def __iter__(self):
            raise AssertionError("per-point work before the size check")

        def __getitem__(self, k):
            raise AssertionError("per-point work before the size check")

    msg = SimpleNamespace(header=SimpleNamespace(stamp=SimpleNamespace(sec=0, nanosec=0)),
                          joint_names=list(model.joint_names), points=Points())
    t0 = time.perf_counter()
    with pytest.raises(TrajectoryRejected, match="MAX_TRAJECTORY_POINTS"):
        core.trajectory_from_message(msg)
    assert time.perf_counter() - t0 < 0.01
    times = np.arange(MAX_TRAJECTORY_POINTS) * 1e-3
    pos = np.tile(Q0, (len(times), 1))
    core.trajectory_from_message(_msg(model, times, pos))       # the cap itself is accepted
    with pytest.raises(TrajectoryRejected, match="joint_names"):
        core.trajectory_from_message(SimpleNamespace(header=msg.header, joint_names=["x"] * 10**6, points=[]))
    # a point with a huge positions array is refused before converting it
    big = _msg(model, [0.0], [Q0])
    big.points[0].positions = type("Huge", (), {"__len__": lambda self: 10**7})()
    with pytest.raises(TrajectoryRejected, match="10000000 values"):
        core.trajectory_from_message(big)


def test_an_empty_trajectory_stamped_in_the_past_cancels_now(ur5):
    model, _ = ur5
    loop = Loop(model)
    for _ in range(20):
        loop.tick()
    times, pos, vel = _move(model, amplitude=0.5, duration=2.0)
    loop.exe.submit_topic(_msg(model, times, pos, 0, vel), loop.t)
    for _ in range(200):
        loop.tick()
    moving = loop.desired[-1].copy()
    cancel = _msg(model, [], [], loop.now_ns - 3 * S)       # no points, stamped 3 s ago
    spec, _, _ = loop.exe.submit_topic(cancel, loop.t)
    assert spec.empty
    for _ in range(100):
        loop.tick()
    held = np.array(loop.desired[-100:])
    assert np.abs(held - held[0]).max() < 1e-12 and np.abs(held[0] - moving).max() < 0.01


def test_a_goal_is_size_checked_before_partial_joints_are_completed(ur5):
    model, _ = ur5
    core = ComputedTorqueController(model, ComputedTorqueSettings())
    exe = TrajectoryExecution(core, ExecutionSettings(allow_partial_joints_goal=True))

    class Points(list):
        def __len__(self):
            return MAX_TRAJECTORY_POINTS + 1

        def __iter__(self):
            raise AssertionError("per-point work before the size check")

    msg = SimpleNamespace(header=SimpleNamespace(stamp=SimpleNamespace(sec=0, nanosec=0)),
                          joint_names=list(model.joint_names[:2]), points=Points())
    with pytest.raises(GoalRejected, match="MAX_TRAJECTORY_POINTS") as info:
        exe.prepare(msg, 0.0)
    assert info.value.code == INVALID_GOAL
