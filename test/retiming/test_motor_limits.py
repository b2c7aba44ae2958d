"""Motor limits (rated vs peak): evaluation against closed forms, and the YAML loader's one-line errors."""
from __future__ import annotations

import numpy as np
import pytest

from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.retiming.motor_limits import MotorLimits, evaluate, load_motor_limits
from robot_dynamics_ros.robots import example_robot_data_dir

UR10 = example_robot_data_dir() / "ur_description/urdf/ur10_robot.urdf"


def test_sine_torque_rms_and_time_above_rated_match_closed_forms():
    A, w, rated = 150.0, 2 * np.pi, 120.0
    t = np.linspace(0.0, 1.0, 20001)  # one period
    tau = np.stack([A * np.sin(w * t), np.full_like(t, 50.0)], axis=1)
    lim = MotorLimits(np.array([rated, 60.0]), np.array([180.0, 100.0]), np.array([0.2, 1.0]),
                      np.array([True, True]))
    rep = evaluate(t, tau, lim, margin=0.9)
    assert rep.rms[0] == pytest.approx(A / np.sqrt(2), rel=1e-6)
    assert rep.rms[1] == pytest.approx(50.0)
    above = (np.pi - 2 * np.arcsin(rated / A)) / w  # one hump of |sin| above rated/A
    assert rep.longest_above_rated[0] == pytest.approx(above, rel=1e-6)
    assert rep.peak[0] == pytest.approx(A, rel=1e-6)
    assert rep.ok_peak[0] and not rep.ok_duration[0] and rep.ok_rms[0]  # 150 ≤ 162; 0.205 s > 0.2 s
    assert rep.binding[0] == "duration" and rep.binding[1] == ""
    assert not rep.ok
    rep2 = evaluate(t, tau, lim, margin=0.8)  # 150 > 0.8 · 180
    assert not rep2.ok_peak[0]


def test_loader_defaults_and_errors(tmp_path):
    model = RobotModel.from_urdf(UR10)
    lim = load_motor_limits(model, None)
    np.testing.assert_array_equal(lim.peak, model.effort_limit)
    assert not lim.configured.any() and np.isinf(lim.peak_duration).all()
    f = tmp_path / "motor_limits.yaml"
    f.write_text("motor_limits:\n  shoulder_lift_joint: {rated_torque: 220, peak_torque: 330, peak_duration: 2}\n")
    lim = load_motor_limits(model, f)
    i = model.index["shoulder_lift_joint"]
    assert (lim.rated[i], lim.peak[i], lim.peak_duration[i], lim.configured[i]) == (220, 330, 2, True)
    for text, match in (("motor_limits:\n  nope: {rated_torque: 1, peak_torque: 2, peak_duration: 1}\n", "nope"),
                        ("motor_limits:\n  elbow_joint: {rated_torque: 3, peak_torque: 2, peak_duration: 1}\n",
                         "rated_torque 3.0 > peak_torque"),
                        ("motor_limits:\n  elbow_joint: {rated_torque: 1, peak_torque: 2}\n", "peak_duration"),
                        ("motor_limits:\n  elbow_joint: {rated_torque: -1, peak_torque: 2, peak_duration: 1}\n",
                         "positive")):
        f.write_text(text)
        with pytest.raises(UserError, match=match):
            load_motor_limits(model, f)
    with pytest.raises(UserError, match="missing.yaml': not a readable regular file"):
        load_motor_limits(model, tmp_path / "missing.yaml")
