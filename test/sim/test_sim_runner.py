"""The simulator node's stepping policy (robot_dynamics_ros.sim.runner), without rclpy.

The reference for every state is a second MujocoSim on the same model stepped directly with the same
efforts and step counts; times are given to the runner, so nothing sleeps.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from robot_dynamics_ros import robots
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.sim.mujoco_sim import MujocoSim
from robot_dynamics_ros.sim.runner import MAX_STEPS_PER_TICK, SimRunner, inertia_matrix

DT = 0.001


@pytest.fixture(scope="module")
def panda():
    e = robots.ROBOTS["panda"]
    return RobotModel.from_urdf(e.path, held_joints=e.held_joints)


def pair(model):
    """Two identical simulations at the same non-trivial pose: one for the runner, one stepped directly."""
    q0 = np.clip(np.linspace(-0.5, 0.6, model.n), model.lower, model.upper)
    sims = [MujocoSim(model, timestep=DT) for _ in range(2)]
    for s in sims:
        s.reset(q0)
    return sims


def test_lockstep_applies_each_command_in_its_joint_order_then_steps_one_period(panda):
    sim, ref = pair(panda)
    joints = list(panda.joint_names)[::-1]
    runner = SimRunner(sim, joints, lockstep=True, period_s=0.002)
    assert runner.steps_per_command == 2
    tau = np.linspace(-3.0, 4.0, panda.n)             # model order
    for k in range(3):
        assert runner.on_command((tau * (k + 1))[::-1].tolist(), now_s=k * 0.002) is None
        ref.set_effort(tau * (k + 1))
        ref.step(2)
    assert runner.commands == 3
    assert sim.time == pytest.approx(0.006, abs=1e-12)
    np.testing.assert_array_equal(sim.q, ref.q)
    np.testing.assert_array_equal(sim.qd, ref.qd)
    np.testing.assert_array_equal(sim.effort, 3 * tau)


def test_rejected_commands_change_nothing(panda):
    sim, _ = pair(panda)
    runner = SimRunner(sim, lockstep=True, period_s=0.001)
    q = sim.q.copy()
    bad_len = runner.on_command([0.0] * (panda.n - 1), now_s=0.0)
    assert bad_len.kind == "length"
    assert bad_len.message == (f"command rejected: data has {panda.n - 1} entries, expected {panda.n} for "
                               f"joints {list(panda.joint_names)}")
    data = [0.0] * panda.n
    data[2] = math.nan
    bad_value = runner.on_command(data, now_s=0.0)
    assert bad_value.kind == "non_finite" and "nan" in bad_value.message
    assert runner.commands == 0 and sim.time == 0.0
    np.testing.assert_array_equal(sim.q, q)
    np.testing.assert_array_equal(sim.effort, 0.0)


def test_unknown_command_joint_is_refused(panda):
    sim, _ = pair(panda)
    with pytest.raises(ValueError, match="no_such_joint"):
        SimRunner(sim, ["no_such_joint"])


def test_lockstep_resend_after_silence_only(panda):
    sim, _ = pair(panda)
    runner = SimRunner(sim, lockstep=True, period_s=0.001, now_s=10.0, lockstep_resend=0.1)
    assert not runner.resend_due(10.05)
    assert runner.resend_due(10.11) and runner.resent == 1
    assert not runner.resend_due(10.2)                # counted from the last resend
    runner.on_command([0.0] * panda.n, now_s=10.25)
    assert not runner.resend_due(10.34)
    assert runner.resend_due(10.36) and runner.resent == 2


def test_free_running_follows_the_clock_times_the_factor_capped_per_tick(panda):
    sim, ref = pair(panda)
    runner = SimRunner(sim, period_s=0.002, now_s=5.0, real_time_factor=2.0)
    tau = np.full(panda.n, 1.5)
    runner.on_command(tau.tolist(), now_s=5.0)         # free running: a command does not step
    assert sim.time == 0.0
    runner.tick(5.0)                                   # the first tick starts the clock
    runner.tick(5.0106)                                # 10.6 ms × 2 -> 21 whole steps
    ref.set_effort(tau)
    ref.step(21)
    np.testing.assert_array_equal(sim.q, ref.q)
    assert sim.time == pytest.approx(21 * DT, abs=1e-12)
    runner.tick(7.0)                                   # 4 s behind: at most MAX_STEPS_PER_TICK now
    assert sim.time == pytest.approx((21 + MAX_STEPS_PER_TICK) * DT, abs=1e-9)
    runner.tick(7.0001)                                # the skipped time is not made up
    assert sim.time == pytest.approx((21 + MAX_STEPS_PER_TICK) * DT, abs=1e-9)


def test_start_on_first_command_pauses_the_physics(panda):
    sim, _ = pair(panda)
    runner = SimRunner(sim, period_s=0.002, start_on_first_command=True)
    runner.tick(0.0)
    runner.tick(1.0)
    assert sim.time == 0.0
    runner.on_command([0.0] * panda.n, now_s=1.0)
    runner.tick(1.0)
    runner.tick(1.01)
    assert sim.time == pytest.approx(0.010, abs=1e-12)


def test_command_timeout_zeroes_the_efforts_once(panda):
    sim, _ = pair(panda)
    runner = SimRunner(sim, period_s=0.002, command_timeout=0.5)
    runner.on_command([2.0] * panda.n, now_s=0.0)
    assert runner.tick(0.4) is None
    np.testing.assert_array_equal(sim.effort, 2.0)
    assert runner.tick(0.6) == "no command for 0.5 s: efforts set to zero"
    np.testing.assert_array_equal(sim.effort, 0.0)
    assert runner.tick(0.7) is None                    # already zero: no second warning
    never = SimRunner(pair(panda)[0], period_s=0.002)  # timeout 0: hold the last command forever
    never.on_command([2.0] * panda.n, now_s=0.0)
    assert never.tick(1000.0) is None and (never.sim.effort == 2.0).all()


def test_stop_time_ends_stepping(panda):
    sim, _ = pair(panda)
    runner = SimRunner(sim, lockstep=True, period_s=0.001)
    runner.stop_time = 0.003
    for k in range(3):
        assert not runner.done
        runner.on_command([0.0] * panda.n, now_s=k * 0.001)
    assert runner.done and sim.time == pytest.approx(0.003, abs=1e-12)
    runner.on_command([0.0] * panda.n, now_s=0.004)   # applied, but no step after the stop time
    assert sim.time == pytest.approx(0.003, abs=1e-12) and runner.commands == 4
    assert not runner.resend_due(100.0)


def test_set_period_rounds_to_whole_physics_steps(panda):
    sim, _ = pair(panda)
    runner = SimRunner(sim, lockstep=True, period_s=0.001)
    runner.set_period(0.0026)
    assert runner.steps_per_command == 3
    runner.set_period(0.0001)
    assert runner.steps_per_command == 1


@pytest.mark.parametrize("publish_clock, gap_ns", [(False, 0), (True, 1_000_000)])
def test_the_clock_never_goes_back_across_a_reset(panda, publish_clock, gap_ns):
    sim, _ = pair(panda)
    runner = SimRunner(sim, lockstep=True, period_s=0.005, publish_clock=publish_clock,
                       clock_base_ns=1_000_000_000_000)
    runner.stop_time = 0.01
    runner.on_command([1.0] * panda.n, now_s=0.0)
    runner.on_command([1.0] * panda.n, now_s=0.005)
    assert runner.done and runner.now_ns() == 1_000_010_000_000
    runner.reset(np.zeros(panda.n))
    assert not runner.done and sim.time == 0.0
    np.testing.assert_array_equal(sim.q, 0.0)
    np.testing.assert_array_equal(sim.effort, 0.0)
    assert runner.now_ns() == 1_000_010_000_000 + gap_ns


def test_inertia_matrix_of_the_six_parameters():
    np.testing.assert_array_equal(inertia_matrix([1, 0.1, 0.2, 2, 0.3, 3]),
                                  [[1, 0.1, 0.2], [0.1, 2, 0.3], [0.2, 0.3, 3]])
    with pytest.raises(ValueError, match=r"payload.inertia = \[1, 2, 0, 1, 0, 1\]: not positive semi-definite"):
        inertia_matrix([1, 2, 0, 1, 0, 1])
