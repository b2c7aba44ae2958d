"""The simulator never applies an absurd effort and never goes on after the physics went unstable with its
status OK (issues 24/25: a 1e300 effort gave MuJoCo's "Nan, Inf or huge value in QACC", 3–4 rad jumps and
diagnostics OK).

The reference for "no jump" is a second simulation on the same model, stepped with the same good efforts.
"""
from __future__ import annotations

import numpy as np
import pytest

from robot_dynamics_ros import robots
from robot_dynamics_ros.control.core import ERROR, OK, WARN
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.sim.mujoco_sim import MAX_SIM_EFFORT, MujocoSim
from robot_dynamics_ros.sim.runner import SimRunner

DT = 0.001
Q0 = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.7])


@pytest.fixture(scope="module")
def panda():
    e = robots.ROBOTS["panda"]
    return RobotModel.from_urdf(e.path, held_joints=e.held_joints)


@pytest.fixture(autouse=True)
def _scratch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # MuJoCo appends its warnings to MUJOCO_LOG.TXT in the working directory


def _pair(model, clamp):
    sims = [MujocoSim(model, timestep=DT, clamp_effort=clamp) for _ in range(2)]
    for s in sims:
        s.reset(Q0)
    return sims


@pytest.mark.parametrize("clamp", [True, False])
def test_a_1e300_effort_is_rejected_and_changes_nothing(panda, clamp):
    sim, ref = _pair(panda, clamp)
    runner = SimRunner(sim, lockstep=True, period_s=0.002)
    g = [0.0, -3.0, 0.0, 20.0, 0.0, 2.0, 0.0]
    assert runner.on_command(g, 0.0) is None
    ref.set_effort(g)
    ref.step(2)
    bad = list(g)
    bad[3] = 1e300
    rej = runner.on_command(bad, 0.01)
    assert rej is not None and rej.kind == "implausible" and "'panda_joint4'" in rej.message
    with pytest.raises(ValueError, match="MAX_SIM_EFFORT"):
        sim.set_effort(bad)
    np.testing.assert_array_equal(sim.effort, ref.effort)
    assert runner.on_command(g, 0.02) is None
    ref.step(2)
    np.testing.assert_allclose(sim.q, ref.q, atol=1e-12)
    assert runner.status() == (OK, "running")


def test_an_unstable_step_is_undone_reported_and_cleared_by_reset(panda):
    sim, ref = _pair(panda, clamp=False)   # no clamping: 1e6 N·m on the wrist (inertia ~1e-3 kg·m²) explodes
    runner = SimRunner(sim, lockstep=True, period_s=0.002)
    for k in range(5):
        assert runner.on_command([0.0] * 7, k * 0.002) is None
        ref.set_effort([0.0] * 7)
        ref.step(2)
    before, t_before = sim.q, sim.time
    spike = [0.0] * 6 + [MAX_SIM_EFFORT]
    assert runner.on_command(spike, 0.012) is None       # plausible in size, unstable in the physics
    level, text = runner.status()
    assert level == ERROR and "physics unstable" in text and "'panda_joint7'" in text and "\n" not in text
    assert sim.time == t_before and np.array_equal(sim.q, before)      # restored: no jump
    assert np.array_equal(sim.effort, np.zeros(7)) and sim.instabilities == 1
    # the next command runs from the restored state as the reference does (same efforts)
    assert runner.on_command([0.0] * 7, 0.014) is None
    ref.step(2)
    np.testing.assert_allclose(sim.q, ref.q, atol=1e-12)
    level, text = runner.status()
    assert level == WARN and text.startswith("1 physics instabilities")
    runner.reset(Q0)
    assert runner.status() == (OK, "running")


def test_free_running_ticks_undo_an_instability_too(panda):
    sim, _ = _pair(panda, clamp=False)
    runner = SimRunner(sim, period_s=0.002)
    runner.tick(0.0)
    runner.on_command([0.0] * 6 + [MAX_SIM_EFFORT], 0.0)
    runner.tick(0.005)
    assert runner.status()[0] == ERROR and np.abs(sim.q - Q0).max() < 1e-3 and np.isfinite(sim.qd).all()
    runner.tick(0.010)                                   # the offending command is no longer applied
    assert runner.status()[0] == WARN and np.abs(sim.qd).max() < 1.0


@pytest.mark.parametrize("name", ["panda", "kinova"])
def test_an_arm_falling_freely_is_physics_not_an_instability(name):
    """Zero effort from the demo pose for 3 s: the Panda's wrist reaches 11× its URDF velocity limit and the
    Kinova's 274× (make demo's second stage): nothing is undone (a bound relative to the velocity limit had
    restored the same state forever and stalled the demo)."""
    from robot_dynamics_tools.commands.demo import demo_pose

    entry = robots.resolve(name)
    model = RobotModel.from_urdf(str(entry.path), held_joints=entry.held_joints)
    sim = MujocoSim(model, timestep=0.001)
    sim.reset(demo_pose(entry, model))
    fastest = 0.0
    for _ in range(3000):
        sim.set_effort([0.0] * model.n)
        assert sim.step(1), sim.instability
        fastest = max(fastest, float(np.max(np.abs(sim.qd) / model.velocity_limit)))
    assert sim.instabilities == 0 and fastest > 5.0   # it did fall fast
