"""The full timing (torque + jerk + rated/peak + margin, ``Retimer.retime`` with jerk and motor limits) against
every limit, checked densely and independently of the solver.

Independent of the code under test: the retimer's own 1 kHz output (t, q, qd, qdd) only; jerk by finite
differences of the returned accelerations; torque by Pinocchio RNEA on a model built from the URDF with the
payload (the solver uses the in-package Newton–Euler engine); RMS by the trapezoidal rule written here;
time above rated from the samples, the crossings interpolated linearly, written here. Limits: velocity and
jerk from the model, acceleration from a joint_limits mapping given here (so that the acceleration check
is not vacuous), |τ| ≤ 0.9 · peak, RMS ≤ rated, every interval above rated ≤ peak_duration, each to 1e-3.

Paths: the case study's line (UR10 + 15 kg, 200 points, jerk 50 rad/s³, rated = 2/3 of peak, 2 s), random
UR10 tool lines (100 points, jerk 50, 0.25 s above rated at most) and random smooth Panda paths (2.5 kg,
jerk 500, 0.05 s above rated) — as many as fit in about a minute (``PATHS``); the 100-path run is
``benchmarks/bench_casestudy.py``.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.retiming.motor_limits import MotorLimits
from robot_dynamics_ros.retiming.request import RetimeOptions
from robot_dynamics_ros.retiming.retimer import Retimer
from robot_dynamics_ros.robots import ROBOTS
from robot_dynamics_testing.jerk_cases import CASES, pinocchio_model, random_panda_waypoints
from robot_dynamics_testing.jerk_dense_cases import longest_above  # noqa: F401

MARGIN = 0.9
TOL = 1e-3
PERIOD = 1e-3
#: (jerk rad/s³, acceleration limit rad/s², peak_duration s) per robot for the random paths
SETTINGS = {"ur10": (50.0, 12.0, 0.25), "panda": (500.0, 15.0, 0.05)}
#: random paths per robot (about a minute of test time in all on the 2 shared cores)
PATHS = {"ur10": 12, "panda": 6}


def limited_model(robot: str, acceleration: float):
    """The robot with its payload and a max_acceleration for every joint (MoveIt joint_limits keys)."""
    urdf, link, mass, com = CASES[robot]
    held = ROBOTS[robot].held_joints if robot in ROBOTS else None
    names = RobotModel.from_urdf(urdf, held_joints=held).joint_names
    limits = {"joint_limits": {n: {"has_acceleration_limits": True, "max_acceleration": acceleration}
                               for n in names}}
    model = RobotModel.from_urdf(urdf, held_joints=held, joint_limits=limits)
    return model.with_settings(payload=(link, mass, com))


def motor_limits(model, peak_duration: float) -> MotorLimits:
    peak = np.asarray(model.effort_limit, float)
    return MotorLimits(peak * 2.0 / 3.0, peak, np.full(model.n, peak_duration), np.ones(model.n, bool))


def check(robot, model, waypoints, jerk, limits, gridpoints=None):
    """Retime with every limit and assert each densely; returns the result (or None if TOPP-RA itself
    stops inside the path, which the full timing refuses)."""
    opts = RetimeOptions(torque_margin=MARGIN, gridpoints=gridpoints, sample_period=PERIOD, jerk_limit=jerk,
                         motor_limits=limits)
    res = Retimer(model).retime(waypoints, options=opts)
    if not res.success:
        return None, res.message
    t, q, qd, qdd = res.t, res.q, res.qd, res.qdd
    assert np.diff(t).max() <= PERIOD * (1 + 1e-9)
    pm = pinocchio_model(robot)
    data = pm.createData()
    tau = np.array([pin.rnea(pm, data, q[k], qd[k], qdd[k]) for k in range(t.shape[0])])
    jerk_fd = np.diff(qdd, axis=0) / np.diff(t)[:, None]
    assert np.abs(jerk_fd).max() <= jerk * (1 + TOL)
    assert (np.abs(qd) / model.velocity_limit).max() <= 1 + TOL
    assert (np.abs(qdd) / model.acceleration_limit).max() <= 1 + TOL
    assert (np.abs(tau) / (MARGIN * limits.peak)).max() <= 1 + TOL
    dt = np.diff(t)
    rms = np.sqrt((0.5 * (tau[1:] ** 2 + tau[:-1] ** 2) * dt[:, None]).sum(axis=0) / (t[-1] - t[0]))
    assert (rms / limits.rated).max() <= 1 + TOL
    for j in range(model.n):
        assert longest_above(t, np.abs(tau[:, j]), limits.rated[j]) <= limits.peak_duration[j] * (1 + TOL)
    # rest to rest, on the path (the last sample is the path's end)
    np.testing.assert_allclose(qd[[0, -1]], 0.0, atol=1e-12)
    np.testing.assert_allclose(q[-1], waypoints[-1], atol=1e-9)
    return res, (np.abs(jerk_fd).max() / jerk, (np.abs(tau) / (MARGIN * limits.peak)).max())


def test_case_study_full_solution_within_every_limit_in_a_dense_pinocchio_check():
    from robot_dynamics_tools.commands.casestudy import case_line, case_motor_limits

    model = limited_model("ur10", SETTINGS["ur10"][1])
    line = case_line(model)
    res, fractions = check("ur10", model, line.q, 50.0, case_motor_limits(model))
    assert res is not None, fractions
    assert fractions[0] >= 0.99  # the jerk limit binds (the result is not merely slow)


def _ur10_line(model, rng):
    from robot_dynamics_tools.commands.casestudy import case_line

    start = np.array([rng.uniform(0.4, 0.8), rng.uniform(-0.5, 0.5), rng.uniform(-0.3, 0.2)])
    direction = rng.normal(size=3)
    return case_line(model, start=start, displacement=rng.uniform(0.5, 1.2) * direction / np.linalg.norm(direction),
                     points=100).q


@pytest.mark.parametrize("robot", ["ur10", "panda"])
def test_random_paths_full_solution_within_every_limit(robot):
    jerk, acc, dur = SETTINGS[robot]
    model = limited_model(robot, acc)
    limits = motor_limits(model, dur)
    want = PATHS[robot]
    rng = np.random.default_rng(7)
    solved, reasons, binds = 0, [], 0
    for k in range(5 * want):  # a quarter of the random UR10 lines is reachable and within gravity
        if solved == want:
            break
        try:
            wp = _ur10_line(model, rng) if robot == "ur10" else random_panda_waypoints(2000 + k)
        except Exception as exc:  # an unreachable random line: draw again
            reasons.append(str(exc))
            continue
        res, info = check(robot, model, wp, jerk, limits, gridpoints=None if robot == "ur10" else 40)
        if res is None:
            reasons.append(info)
            continue
        solved += 1
        binds += info[0] >= 0.99
    assert solved == want, reasons
    assert binds >= want // 2  # the jerk limit binds on most of them


def test_motor_limits_keep_the_velocity_and_acceleration_scaling_and_the_effort_margin():
    """With motor limits the scales still apply (MoveIt's default_*_scaling_factor / --velocity-scale),
    and |τ| stays within margin × the URDF effort even where the motor's peak is above it. Checked on the
    1 kHz output: finite-difference velocity and acceleration, Pinocchio RNEA torque."""
    from robot_dynamics_tools.commands.casestudy import case_line

    model = limited_model("ur10", SETTINGS["ur10"][1])
    line = case_line(model)
    peak = 1.5 * np.asarray(model.effort_limit, float)  # above the drive's limit: the URDF's must still hold
    limits = MotorLimits(np.asarray(model.effort_limit, float), peak, np.full(model.n, 2.0), np.ones(model.n, bool))
    scale = 0.5
    opts = RetimeOptions(torque_margin=MARGIN, sample_period=PERIOD, jerk_limit=50.0, motor_limits=limits,
                         velocity_scale=scale, acceleration_scale=scale)
    res = Retimer(model).retime(line.q, options=opts)
    assert res.success, res.message
    t, q, qd, qdd = res.t, res.q, res.qd, res.qdd
    v_fd = np.diff(q, axis=0) / np.diff(t)[:, None]
    a_fd = np.diff(qd, axis=0) / np.diff(t)[:, None]
    assert (np.abs(v_fd) / (scale * model.velocity_limit)).max() <= 1 + TOL
    assert (np.abs(a_fd) / (scale * model.acceleration_limit)).max() <= 1 + TOL
    pm = pinocchio_model("ur10")
    data = pm.createData()
    tau = np.array([pin.rnea(pm, data, q[k], qd[k], qdd[k]) for k in range(t.shape[0])])
    assert (np.abs(tau) / (MARGIN * np.asarray(model.effort_limit))).max() <= 1 + TOL
    # one of the scaled limits binds: the timing is not merely slow
    assert max((np.abs(v_fd) / (scale * model.velocity_limit)).max(),
               (np.abs(a_fd) / (scale * model.acceleration_limit)).max()) >= 0.95
