"""TOPP-RA's greedy pass never makes an isolated near-stop that a slightly lower entry speed avoids.

A velocity row's curvature half-plane (nearly free of u) can make the best next state from x_i,
x_i + 2Δ u_max(x_i), fall steeply near the top of K_i: entering there forces u to its torque minimum and x
to ~0 at the next gridpoint (an isolated dip, a stop in the middle of a free path, seen on a UR10 path at
30 % speed). The path below needs no stop: the retimed trajectory, sampled at 1 kHz, stays within its
velocity and torque limits by Pinocchio's RNEA on the URDF, and its speed never dips at a single gridpoint
below half of its neighbours'. Looser velocity limits never make it slower.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.retiming.request import RetimeOptions
from robot_dynamics_ros.retiming.retimer import Retimer
from robot_dynamics_ros.robots import example_robot_data_dir

UR10 = example_robot_data_dir() / "ur_description" / "urdf" / "ur10_robot.urdf"
WAYPOINTS = np.array([[0.0, -1.57, 1.57, -1.57, -1.57, 0.0],
                      [0.5, -1.2, 1.2, -1.2, -1.57, 0.3],
                      [1.0, -1.0, 0.8, -1.0, -1.2, 0.6]])
TOL = 1e-3


def test_ur10_path_is_timed_without_an_isolated_stop_and_within_its_limits():
    model = RobotModel.from_urdf(UR10)
    pm = pin.buildModelFromUrdf(str(UR10))
    data = pm.createData()
    durations = []
    for scale in (0.3, 0.5, 1.0):
        res = Retimer(model).retime(WAYPOINTS, options=RetimeOptions(velocity_scale=scale, torque_margin=0.9,
                                                                      sample_period=1e-3))
        assert res.success, res.message
        x = res.segments[0].x
        dips = [i for i in range(1, x.shape[0] - 1) if x[i] < 0.5 * min(x[i - 1], x[i + 1])]
        assert dips == [], (scale, dips, [x[i - 1:i + 2] for i in dips])
        tau = np.array([pin.rnea(pm, data, q, qd, qdd) for q, qd, qdd in zip(res.q, res.qd, res.qdd)])
        tlim = 0.9 * model.effort_limit
        assert (np.abs(res.qd) <= scale * model.velocity_limit * (1 + TOL)).all(), scale
        assert (np.abs(tau) <= tlim * (1 + TOL)).all(), scale
        durations.append(res.duration)
    assert durations[0] >= durations[1] >= durations[2], durations
