"""The retiming service's request handling with jerk and motor limits (robot_dynamics_ros.retiming.service,
without rclpy): ``jerk_scaling`` scales the model's joint_limits.yaml jerk limits, the node parameter
``motor_limits_path`` turns on the rated/peak rules, and the response message reports per joint peak, RMS,
longest time above rated and the binding limit.

Independent figures: the reported peak / RMS / time above rated against values computed here from the
answer's own 1 kHz samples with Pinocchio RNEA (the solver uses the in-package Newton–Euler engine), and
the answer's finite-difference jerk against the scaled limit.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pinocchio as pin

from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.retiming import service as core
from robot_dynamics_ros.retiming.motor_limits import load_motor_limits
from robot_dynamics_ros.retiming.retimer import Retimer
from robot_dynamics_testing.jerk_cases import UR10, pinocchio_model
from robot_dynamics_testing.jerk_dense_cases import longest_above
from robot_dynamics_testing.service_requests import PARAMS as BASE_PARAMS
from robot_dynamics_testing.service_requests import request

CONFIG = Path(__file__).resolve().parents[2] / "config"
PARAMS = dict(BASE_PARAMS, default_torque_margin=0.9, default_sample_period=1e-3)


def ur10_with_jerk_limits():
    from robot_dynamics_tools.commands.casestudy import PAYLOAD_COM, PAYLOAD_KG, TOOL

    model = RobotModel.from_urdf(UR10, joint_limits=CONFIG / "ur10_joint_limits.yaml")
    return model.with_settings(payload=(TOOL, PAYLOAD_KG, PAYLOAD_COM))


def test_service_applies_scaled_jerk_and_motor_limits_and_reports_them_per_joint():
    from robot_dynamics_tools.commands.casestudy import case_line

    model = ur10_with_jerk_limits()
    assert np.all(model.jerk_limit == 50.0)  # from config/ur10_joint_limits.yaml
    line = case_line(model, points=60)
    params = dict(PARAMS, motor_limits_path=str(CONFIG / "ur10_motor_limits.yaml"))
    answer = core.handle_request(request(model.joint_names, line.q, jerk_scaling=0.5), Retimer(model), model,
                                 params, core.MeasuredPositions(), 0.0)
    assert answer.success, answer.message
    t, q, qd, qdd = answer.t, answer.q, answer.qd, answer.qdd
    jerk_fd = np.diff(qdd, axis=0) / np.diff(t)[:, None]
    assert np.abs(jerk_fd).max() <= 25.0 * (1 + 1e-3)
    assert np.abs(jerk_fd).max() >= 0.99 * 25.0
    pm = pinocchio_model("ur10")
    data = pm.createData()
    tau = np.array([pin.rnea(pm, data, q[k], qd[k], qdd[k]) for k in range(t.shape[0])])
    limits = load_motor_limits(model, CONFIG / "ur10_motor_limits.yaml")
    dt = np.diff(t)
    rms = np.sqrt((0.5 * (tau[1:] ** 2 + tau[:-1] ** 2) * dt[:, None]).sum(axis=0) / (t[-1] - t[0]))
    for j, name in enumerate(model.joint_names):
        m = re.search(rf"{name} peak ([\d.]+) N·m, RMS ([\d.]+) N·m, ([\d.]+) s above rated, binds (\w+)",
                      answer.message)
        assert m, (name, answer.message)
        peak, r, above = (float(m.group(k)) for k in (1, 2, 3))
        assert abs(peak - np.abs(tau[:, j]).max()) <= 0.05 + 1e-3 * peak  # printed with one decimal
        assert abs(r - rms[j]) <= 0.05 + 1e-3 * r
        assert abs(above - longest_above(t, np.abs(tau[:, j]), limits.rated[j])) <= 2e-3
        assert m.group(4) in ("peak", "duration", "rms", "none")
        assert np.abs(tau[:, j]).max() <= 0.9 * limits.peak[j] * (1 + 1e-3)
        assert rms[j] <= limits.rated[j] * (1 + 1e-3)


def test_a_bad_motor_limits_file_is_refused_naming_it(tmp_path):
    from robot_dynamics_tools.commands.casestudy import case_line

    model = ur10_with_jerk_limits()
    bad = tmp_path / "motor_limits.yaml"
    bad.write_text("motor_limits:\n  elbow_joint: {rated_torque: 200.0, peak_torque: 150.0, peak_duration: 2.0}\n")
    params = dict(PARAMS, motor_limits_path=str(bad))
    answer = core.handle_request(request(model.joint_names, case_line(model, points=20).q), Retimer(model), model,
                                 params, core.MeasuredPositions(), 0.0)
    assert not answer.success
    assert str(bad) in answer.message and "elbow_joint" in answer.message and "\n" not in answer.message


def test_without_motor_limits_path_the_options_have_none():
    opts = core.options_from_request(request(["a"], [[0.0]]), PARAMS)
    assert opts.motor_limits is None and opts.jerk_scale == 1.0
    opts = core.options_from_request(request(["a"], [[0.0]], jerk_scaling=0.25), dict(PARAMS, motor_limits_path=""))
    assert opts.motor_limits is None and opts.jerk_scale == 0.25
