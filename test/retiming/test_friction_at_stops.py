"""Output efforts with URDF friction at the stops of a rest-to-rest timing (the xArm7 of ``track``).

At a segment's first and last sample the arm is at rest on its way out or in; the torque rows count the
kinetic Coulomb friction of that motion up to the stop, so the reported effort must too: with sign(0) = 0 it
was reported 1 N·m (the friction) above the 0.7 × effort budget on joint3 and the timing refused as
exceeding its own limit. Reference: Pinocchio's RNEA (through PinocchioDynamics) plus damping · qd + friction ·
sign(q′) with q′ from finite differences of the output positions.
"""
from __future__ import annotations

import numpy as np

from robot_dynamics_ros import robots
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.retiming.request import PEAK_TOLERANCE, RetimeOptions
from robot_dynamics_ros.retiming.retimer import Retimer
from robot_dynamics_tools.commands.track import default_waypoints


def test_efforts_at_the_stops_include_the_friction_the_timing_counted_on():
    entry = robots.resolve("xarm7")
    model = RobotModel.from_urdf(str(entry.path), held_joints=entry.held_joints)
    assert np.any(model.friction) and model.coulomb_velocity == 0.0
    W = default_waypoints(model, entry)
    res = Retimer(model).retime(W, options=RetimeOptions(velocity_scale=0.9, torque_margin=0.7,
                                                         sample_period=0.001, friction=True))
    assert res.success, res.message
    budget = 0.7 * model.effort_limit
    assert (np.abs(res.tau) <= budget * (1 + PEAK_TOLERANCE)).all()
    pin = PinocchioDynamics(model)
    for k, neighbour in ((-1, -2), (0, 1)):   # the last sample (arriving) and the first (leaving)
        assert np.all(res.qd[k] == 0.0)
        direction = np.sign(res.q[k] - res.q[neighbour]) * (1 if k == -1 else -1)
        want = pin.rnea(res.q[k], res.qd[k], res.qdd[k]) + model.friction * direction
        moving = direction != 0
        np.testing.assert_allclose(res.tau[k][moving], want[moving], atol=1e-6)
