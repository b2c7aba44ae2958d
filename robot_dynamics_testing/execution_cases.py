"""Shared set-up of the trajectory-execution tests (test/control): the UR5 and its independent Pinocchio
reference, the time base and the start pose."""
from __future__ import annotations

import numpy as np

from robot_dynamics_ros import robots
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_testing.reference import PinByName

S = 1_000_000_000       # ns per s
T0 = 100 * S            # the controllers' epoch, ns
DT = 0.002              # control period, s
Q0 = np.array([0.3, -1.1, 1.2, -0.4, 0.8, 0.2])   # UR5 start pose, rad


def ur5_with_reference():
    """(RobotModel, PinByName) of example-robot-data's UR5."""
    model = RobotModel.from_urdf(robots.ROBOTS["ur5"].path)
    return model, PinByName.from_urdf(robots.ROBOTS["ur5"].path, model.joint_names)
