"""The jerk limit inside the retimer (RetimeOptions.jerk_limit / jerk_scale, model.jerk_limit, CLI
--jerk-limit): the same dense independent check as test_jerk.py on the retimer's own output."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from robot_dynamics_ros.retiming.request import RetimeOptions, RetimeStatus
from robot_dynamics_ros.retiming.retimer import Retimer
from robot_dynamics_testing.jerk_cases import TOL, UR10, dense_check, package_model, pinocchio_model


@pytest.fixture(scope="module")
def ur10_line():
    from robot_dynamics_tools.commands.casestudy import case_line

    model = package_model("ur10")
    return model, case_line(model, points=60)


def test_retimer_with_a_jerk_limit_outputs_a_jerk_limited_trajectory(ur10_line):
    model, line = ur10_line
    retimer = Retimer(model)
    opts = RetimeOptions(torque_margin=0.9, sample_period=1e-3, jerk_limit=50.0)
    res = retimer.retime(line.q, options=opts)
    assert res.success, res.message
    plain = retimer.retime(line.q, options=RetimeOptions(torque_margin=0.9, sample_period=1e-3))
    assert plain.duration < res.duration
    jerk, tau = dense_check(pinocchio_model("ur10"), res.t, res.q, res.qd, res.qdd)
    assert np.abs(jerk).max() <= 50.0 * (1 + TOL)
    assert (np.abs(tau) <= 0.9 * model.effort_limit * (1 + TOL)).all()
    np.testing.assert_allclose(res.tau, tau, rtol=1e-6, atol=1e-6)  # the efforts reported are the RNEA ones
    np.testing.assert_allclose(res.qdd[[0, -1]], 0.0, atol=1e-9)
    np.testing.assert_allclose(res.q[-1], line.q[-1], atol=1e-9)
    # jerk_scale scales a configured limit (model.jerk_limit from joint_limits.yaml)
    half = model.with_settings()
    half.jerk_limit = np.full(6, 100.0)
    res2 = Retimer(half).retime(line.q, options=RetimeOptions(torque_margin=0.9, sample_period=1e-3,
                                                               jerk_scale=0.5))
    assert res2.success and res2.duration == pytest.approx(res.duration, rel=1e-6)


def test_jerk_limit_refuses_a_moving_start_and_bad_values(ur10_line):
    model, line = ur10_line
    retimer = Retimer(model)
    v = (line.q[1] - line.q[0]) / np.linalg.norm(line.q[1] - line.q[0]) * 0.1
    res = retimer.retime(line.q, start_velocity=v, options=RetimeOptions(jerk_limit=50.0))
    assert res.status == RetimeStatus.INVALID_REQUEST and "starts and ends at rest" in res.message
    res = retimer.retime(line.q, options=RetimeOptions(jerk_limit=-1.0))
    assert res.status == RetimeStatus.INVALID_REQUEST and "jerk_limit=-1.0" in res.message
    res = retimer.retime(line.q, options=RetimeOptions(jerk_scale=0.0))
    assert res.status == RetimeStatus.INVALID_REQUEST and "jerk_scale" in res.message


def test_cli_jerk_limit(ur10_line, tmp_path, capsys):
    from robot_dynamics_tools.cli import main

    model, line = ur10_line
    wp = tmp_path / "wp.csv"
    with wp.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(model.joint_names)
        w.writerows(line.q.tolist())
    out = tmp_path / "traj.csv"
    code = main(["retime", "--urdf", str(UR10), "--payload", "tool0,15,0,0,0.05", "--waypoints", str(wp),
                 "--out", str(out), "--torque-margin", "0.9", "--dt", "0.001", "--jerk-limit", "50"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and summary["success"]
    rows = np.genfromtxt(out, delimiter=",", names=True)
    t = rows[rows.dtype.names[0]]
    cols = [n for n in rows.dtype.names if "acc" in n or "qdd" in n]
    assert cols, rows.dtype.names
    qdd = np.stack([rows[c] for c in cols], axis=1)
    assert np.abs(np.diff(qdd, axis=0) / np.diff(t)[:, None]).max() <= 50.0 * (1 + 2e-3)


def test_retimer_with_motor_limits_keeps_them_and_reports_per_joint(ur10_line, tmp_path, capsys):
    from pathlib import Path

    from robot_dynamics_tools.cli import main
    from robot_dynamics_ros.retiming.motor_limits import MotorLimits

    model, line = ur10_line
    peak = model.effort_limit.copy()
    rated = 2.0 / 3.0 * peak
    rated[0] = 80.0  # the base joint (no gravity load) limited to 0.05 s above 80 N·m
    duration = np.full(6, 2.0)
    duration[0] = 0.05
    limits = MotorLimits(rated, peak, duration, np.ones(6, dtype=bool))
    res = Retimer(model).retime(line.q, options=RetimeOptions(torque_margin=0.9, sample_period=1e-3,
                                                               jerk_limit=50.0, motor_limits=limits))
    assert res.success, res.message
    _, tau = dense_check(pinocchio_model("ur10"), res.t, res.q, res.qd, res.qdd)
    above = np.abs(tau[:, 0]) > rated[0]
    run = best = 0
    for a in above:
        run = run + 1 if a else 0
        best = max(best, run)
    assert best * 1e-3 <= 0.05 + 1e-3
    assert (np.abs(tau) <= 0.9 * peak * (1 + TOL)).all()
    summary = res.summary()["motor_limits"]
    assert set(summary) == set(model.joint_names) and all(v["ok"] for v in summary.values())
    assert summary["shoulder_pan_joint"]["longest_above_rated_s"] <= 0.05 * (1 + 1e-9)

    wp = tmp_path / "wp.csv"
    with wp.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(model.joint_names)
        w.writerows(line.q.tolist())
    config = Path(__file__).resolve().parents[2] / "config" / "ur10_motor_limits.yaml"
    code = main(["retime", "--urdf", str(UR10), "--payload", "tool0,15,0,0,0.05", "--waypoints", str(wp),
                 "--out", str(tmp_path / "traj.csv"), "--torque-margin", "0.9", "--jerk-limit", "50",
                 "--motor-limits", str(config)])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and out["success"]
    assert out["motor_limits"]["shoulder_lift_joint"]["ok"] and "binding" in out["motor_limits"]["elbow_joint"]


def test_reported_jerk_fraction_at_gridpoint_output_matches_a_dense_finite_difference():
    """peak_fraction.jerk of the default (gridpoint) output on a path through a reversal: gridpoints sit on
    the path's knots, where q''' jumps, and a sample time a rounding error off one must take the third
    derivative of its own stage. Reference: finite differences of the accelerations of the same timing
    sampled at 20 µs."""
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.robots import example_robot_data_dir

    urdf = example_robot_data_dir() / "z1_description" / "urdf" / "z1.urdf"
    model = RobotModel.from_urdf(str(urdf), held_joints={"jointGripper": 0.0})
    base = np.array([0.0, 0.8, -1.0, 0.0, 0.0, 0.0])
    wp = np.array([base, base + [0.5, 0, 0, 0, 0, 0], base, base + [0, 0.5, 0, 0, 0, 0]])
    jerk = 100.0
    coarse = Retimer(model).retime(wp, options=RetimeOptions(jerk_limit=jerk))
    assert coarse.success, coarse.message
    fine = Retimer(model).retime(wp, options=RetimeOptions(jerk_limit=jerk, sample_period=2e-5))
    assert fine.duration == pytest.approx(coarse.duration, rel=1e-12)
    fd = np.abs(np.diff(fine.qdd, axis=0) / np.diff(fine.t)[:, None]).max() / jerk
    assert fd == pytest.approx(1.0, abs=2e-3)           # the limit binds, and holds
    assert coarse.peak_fraction["jerk"] <= fd + 2e-3, (coarse.peak_fraction, fd)


def test_panda_jerk_limited_timing_sampled_at_any_period_is_accepted_and_holds_its_limits():
    """A first-time user's Panda path (10 waypoints, jerk 500 rad/s³) was refused whenever an output period
    was given: the jerk solver accepted 1.00015 of an acceleration limit between its verification samples, the
    retimer's own check allows 1 + 1e-4. Now every period gives the same timing, and its acceleration, by
    finite differences of the velocities at 0.1 ms (independent of the output's qdd), stays within 1 + 1e-4."""
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.robots import ROBOTS, bundled_joint_limits

    # as `robot-dynamics retime --urdf panda` builds it: the bundled joint_limits.yaml's acceleration limits
    entry = ROBOTS["panda"]
    model = RobotModel.from_file(entry.path, held_joints=dict(entry.held_joints),
                                 joint_limits=bundled_joint_limits("panda"))
    wp = np.array([[0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785], [0.2, -0.6, 0.1, -2.2, 0.1, 1.7, 0.8],
                   [0.5, -0.4, 0.2, -2.0, 0.2, 1.9, 0.9], [0.8, -0.3, 0.25, -1.8, 0.3, 2.0, 1.0],
                   [1.0, -0.1, 0.2, -1.6, 0.2, 2.1, 1.1], [1.1, 0.1, 0.1, -1.5, 0.0, 2.0, 1.0],
                   [0.9, 0.3, -0.1, -1.4, -0.2, 1.8, 0.8], [0.6, 0.2, -0.3, -1.6, -0.3, 1.6, 0.6],
                   [0.3, 0.0, -0.2, -1.9, -0.1, 1.5, 0.7], [0.0, -0.3, 0.0, -2.2, 0.0, 1.6, 0.785]])
    retimer = Retimer(model)
    durations = []
    for period in (1e-2, 2e-3, 1e-4):
        res = retimer.retime(wp, options=RetimeOptions(jerk_limit=500.0, sample_period=period))
        assert res.success, (period, res.message)
        durations.append(res.duration)
    assert max(durations) == pytest.approx(min(durations), rel=1e-12)
    acc = np.diff(res.qd, axis=0) / np.diff(res.t)[:, None]
    assert (np.abs(acc) / model.acceleration_limit).max() <= 1.0 + 1e-4


def test_a_jerk_excess_is_located_by_joint_and_time(ur10_line):
    """exceeded_limit named neither joint nor time for the jerk ("the jerk-limited timing reaches 1.00018 of
    it"). Judged against limits 1 % below the ones solved for, it now names the joint and time where the
    jerk peaks; reference: finite differences of the output's accelerations at 0.1 ms."""
    from robot_dynamics_ros.retiming.output import exceeded_limit, peak_fractions
    from robot_dynamics_ros.retiming.request import PEAK_TOLERANCE

    model, line = ur10_line
    retimer = Retimer(model)
    res = retimer.retime(line.q, options=RetimeOptions(torque_margin=0.9, sample_period=1e-4, jerk_limit=50.0))
    assert res.success, res.message
    tight = np.full(model.n, 50.0 * 0.99)
    limits = retimer.checks.limits(retimer.resolved_options(RetimeOptions(torque_margin=0.9)))
    res.peak_fraction = peak_fractions(res, limits, tight)
    kind, j, frac, at = exceeded_limit(res, limits, PEAK_TOLERANCE, tight)
    fd = np.abs(np.diff(res.qdd, axis=0) / np.diff(res.t)[:, None]) / tight
    k_ref, j_ref = np.unravel_index(int(np.argmax(fd)), fd.shape)
    assert kind == "jerk" and j == j_ref, (kind, j, j_ref)
    assert frac == pytest.approx(fd.max(), rel=2e-3)
    assert abs(at - res.t[k_ref]) <= 2e-3, (at, res.t[k_ref])


@pytest.mark.parametrize("urdf, seed", [("solo.urdf", 1), ("solo12.urdf", 0), ("bolt.urdf", 0)])
def test_legged_robots_of_example_robot_data_get_a_jerk_limited_timing(urdf, seed):
    """Their 6-waypoint paths at jerk 200 rad/s³ were refused ("no profile with positive speed found") when
    the first LP became a time-gradient step from the TOPP-RA profile: it took one of the LPs whose
    tangents come down towards a moving profile, and these paths need 7 or more. Their timings hold every
    limit: jerk by finite differences of the 1 kHz accelerations, torque by Pinocchio RNEA on the URDF."""
    import pinocchio as pin

    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.robots import example_robot_data_dir
    from robot_dynamics_testing.retiming_cases import smooth_waypoints

    path = next(example_robot_data_dir().rglob(urdf))
    model = RobotModel.from_urdf(path)
    res = Retimer(model).retime(smooth_waypoints(model, 6, seed=seed),
                                options=RetimeOptions(jerk_limit=200.0, torque_margin=0.9, sample_period=1e-3))
    assert res.success, res.message
    pm = pin.buildModelFromUrdf(str(path))
    assert pm.nq == model.n and [pm.names[i] for i in range(1, pm.njoints)] == list(model.joint_names)
    jerk, tau = dense_check(pm, res.t, res.q, res.qd, res.qdd)
    assert np.abs(jerk).max() <= 200.0 * (1 + TOL)
    limited = np.isfinite(model.effort_limit)
    assert (np.abs(tau[:, limited]) <= 0.9 * model.effort_limit[limited] * (1 + TOL)).all()
