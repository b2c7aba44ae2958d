"""URDF joint friction (``<dynamics damping friction>``) on the stock example-robot-data xArm7
(damping 10/10/5/5/5/2/2 N·m·s/rad, friction 1 N·m on every joint): the computed-torque friction
feedforward, the simulator's dry friction, and the momentum observer at rest and in the push scenario.

Independent references: Pinocchio called directly on the URDF file (``pin.rnea``, and the damping / friction
vectors Pinocchio's own URDF parser reads) with the friction term written out here; the Coulomb + viscous
law of a joint at rest or in steady sliding (τ − F sign(v) − b v = 0, so a joint holds for |τ| < F and
slides at v = (τ − F)/b above it); the frictionless copy of the URDF for the observer.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros import robots
from robot_dynamics_ros.control.computed_torque import (ComputedTorqueController, ComputedTorqueSettings,
                                                        Gains, control_torque)
from robot_dynamics_ros.control.interpolation import DesiredState
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.model import RobotModel

XARM = robots.ROBOTS["xarm7"]


@pytest.fixture(scope="module")
def xarm():
    return RobotModel.from_urdf(XARM.path)


@pytest.fixture(scope="module")
def raw():
    m = pin.buildModelFromUrdf(str(XARM.path))
    return m, m.createData()


def _friction_reference(pm, qd):
    """damping · qd + friction · sign(qd) with Pinocchio's own URDF damping / friction vectors."""
    return np.asarray(pm.damping) * qd + np.asarray(pm.friction) * np.sign(qd)


def test_xarm7_urdf_has_friction_as_pinocchio_reads_it(xarm, raw):
    pm, _ = raw
    np.testing.assert_array_equal(xarm.damping, [10, 10, 5, 5, 5, 2, 2])
    np.testing.assert_array_equal(np.asarray(pm.damping), xarm.damping)
    np.testing.assert_array_equal(np.asarray(pm.friction), np.ones(7))


@pytest.mark.parametrize("mode", ["feedforward", "computed_torque"])
def test_law_adds_friction_at_the_desired_velocity(xarm, raw, mode):
    pm, pd = raw
    rng = np.random.default_rng(7)
    engine = PinocchioDynamics(xarm)
    gains = Gains.default(7)
    gains.p[:], gains.d[:] = 50.0, 5.0
    for _ in range(5):
        q = xarm.random_configuration(rng)
        qd = rng.normal(size=7)
        des = DesiredState(q + 0.01 * rng.normal(size=7), rng.normal(size=7), rng.normal(size=7), True)
        des.qd[0] = 0.0  # at qd_d = 0 the feedforward adds no Coulomb term
        tau, ff = control_torque(mode, engine, q, qd, des, gains, friction=True)
        tau0, ff0 = control_torque(mode, engine, q, qd, des, gains, friction=False)
        fr = _friction_reference(pm, des.qd)  # at the DESIRED velocity, not the measured one
        assert fr[0] == 0.0
        ff_ref = pin.rnea(pm, pd, des.q, des.qd, des.qdd) + fr
        np.testing.assert_allclose(ff, ff_ref, atol=1e-9)
        if mode == "feedforward":
            want = ff_ref + 50.0 * (des.q - q) + 5.0 * (des.qd - qd)
        else:
            a = des.qdd + 40.0 * (des.qd - qd) + 400.0 * (des.q - q)
            want = pin.rnea(pm, pd, q, qd, a) + fr
        np.testing.assert_allclose(tau, want, atol=1e-9)
        np.testing.assert_allclose(tau - tau0, fr, atol=1e-9)
    # the gravity baseline has no feedforward of the desired motion: unchanged
    t1, _ = control_torque("gravity", engine, q, qd, des, gains, friction=True)
    t2, _ = control_torque("gravity", engine, q, qd, des, gains, friction=False)
    np.testing.assert_array_equal(t1, t2)


def test_controller_setting_defaults_on_and_switches_off(xarm):
    core = ComputedTorqueController(xarm, ComputedTorqueSettings(mode="computed_torque"))
    assert core.settings.friction_compensation and core._friction
    core.with_settings(friction_compensation=False)
    assert not core._friction
    # a model without friction: nothing to add, whatever the setting
    bare = RobotModel.from_urdf(robots.ROBOTS["ur5"].path)
    assert not ComputedTorqueController(bare)._friction


@pytest.mark.parametrize("joint", [0, 3, 6])
def test_simulator_dry_friction_holds_below_f_and_slides_at_coulomb_plus_viscous(xarm, joint):
    from robot_dynamics_ros.sim.mujoco_sim import MujocoSim

    engine = PinocchioDynamics(xarm)
    F, b = xarm.friction[joint], xarm.damping[joint]
    for extra in (0.5, 3.0):
        sim = MujocoSim(xarm, timestep=0.001)
        sim.reset(xarm.neutral())
        for _ in range(1000):
            tau = engine.gravity(sim.q)
            tau[joint] += extra
            sim.set_effort(tau)
            sim.step()
        v = sim.qd[joint]
        if extra < F:   # static friction holds (MuJoCo default soft constraint: joint 7 crept at 0.23, joint 1 at 0.026 rad/s)
            assert abs(v) < 5e-3, v
        else:           # steady sliding: (3 − 1)/b (before: joint 7 at 1.41 rad/s, i.e. 0.18 N·m of friction)
            assert v == pytest.approx((extra - F) / b, rel=0.02)


def test_observer_at_rest_reports_no_phantom_coulomb_torque(xarm):
    """At rest under exact gravity compensation the true external torque is 0 and the simulator's static
    friction ≈ 0; the observer used to report ±F = ±1 N·m (sign of ~1e-10 rad/s velocity noise)."""
    from robot_dynamics_ros.control.external_torque import ExternalTorqueCore  # noqa: F401 (the node's core)
    from robot_dynamics_ros.control.momentum_observer import CollisionDetector, MomentumObserver
    from robot_dynamics_ros.sim.mujoco_sim import MujocoSim

    engine = PinocchioDynamics(xarm)
    sim = MujocoSim(xarm, timestep=0.001)
    q0 = xarm.neutral() + 0.3
    sim.reset(q0)
    obs = MomentumObserver(engine, 50.0, friction=True)
    det = CollisionDetector(7, 0.05 * xarm.effort_limit, friction_band=xarm.friction,
                            band_velocity=obs.coulomb_velocity)
    rmax = 0.0
    for k in range(2000):
        q, qd = sim.q, sim.qd
        sim.set_effort(engine.gravity(q))
        r = obs.update(k * 1e-3, q, qd, sim.effort)
        assert not det.update(k * 1e-3, r, qd).collision
        if k > 200:
            rmax = max(rmax, float(np.abs(r).max()))
        sim.step()
    assert np.abs(sim.qd).max() < 1e-6
    assert rmax < 0.05 * xarm.friction.min(), rmax   # well inside the friction band [−F, F]
    # the threshold of a joint at rest is widened by its friction band, not in motion
    np.testing.assert_allclose(det.thresholds(np.zeros(7)), 0.05 * xarm.effort_limit + 1.0)
    np.testing.assert_allclose(det.thresholds(np.ones(7)), 0.05 * xarm.effort_limit)


def test_push_on_xarm7_no_false_collision_and_the_push_is_detected(tmp_path):
    from robot_dynamics_tools.commands.push import push

    s = push("xarm7", quiet=10.0, out=None)   # before: 11 false collisions, max |r| 1.9 N·m
    assert s["false_collisions"] == 0 and s["contact_free_s"] >= 10.0
    # within the friction band of the 1 N·m Coulomb friction (frictionless copy: 0.13 N·m)
    assert s["contact_free_max_residual_Nm"] < 1.0 + 0.05 * 20.0
    assert s["detection_delay_ms"] is not None and s["detection_delay_ms"] <= 20.0
    assert s["estimate_error_ratio"] <= 0.1 and s["pass"]


@pytest.mark.ros
@pytest.mark.slow
def test_track_on_xarm7_follows_with_the_friction_feedforward(tmp_path):
    from robot_dynamics_tools.commands import track as track_cmd

    s = track_cmd.track("xarm7", out_dir=tmp_path, modes=("feedforward", "computed_torque"), bag=False,
                        plot=False)
    m = s["modes"]
    # before (friction left out of the law): feedforward + PD 399 mm, computed torque 87 mm; on the
    # frictionless copy of the URDF 0.68 / 0.09 mm
    assert m["feedforward"]["tool_error_max_mm"] < 2.0, m["feedforward"]
    assert m["computed_torque"]["tool_error_max_mm"] < 1.0, m["computed_torque"]
    assert s["criteria"]["computed_torque_under_1mm"]


def test_track_exits_2_when_a_criterion_is_false(monkeypatch, capsys):
    from robot_dynamics_tools import cli
    from robot_dynamics_tools.commands import track as track_cmd

    def fake(ok):
        def fake_track(urdf, **kw):
            return {"robot": "x", "modes": {}, "criteria": {"feedforward_vs_gravity_max_error_ratio": 3.0,
                                                              "feedforward_5x_better": ok,
                                                              "uses_80pct_of_a_limit": True}}
        return fake_track

    monkeypatch.setattr(track_cmd, "track", fake(False))
    assert cli.main(["track", "--json", "--no-bag", "--no-plot"]) == 2
    monkeypatch.setattr(track_cmd, "track", fake(True))
    assert cli.main(["track", "--json", "--no-bag", "--no-plot"]) == 0
    capsys.readouterr()
