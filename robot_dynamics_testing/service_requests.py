"""Shared test helpers (moved here from test/test_retiming_service_core.py so tests of other areas import them from the harness)."""
from __future__ import annotations

from types import SimpleNamespace


PARAMS = {"default_gridpoints": 0, "default_velocity_scaling_factor": 1.0,
          "default_acceleration_scaling_factor": 1.0, "default_torque_margin": 1.0,
          "default_path_tolerance": 1e-3, "default_sample_period": 0.0, "friction": False,
          "joint_state_timeout": 0.5, "max_waypoints": 100_000, "max_samples": 200_000}


def request(names, waypoints, **fields):
    base = dict(velocity_scaling=0.0, acceleration_scaling=0.0, torque_margin=0.0, path_tolerance=0.0,
                sample_period=0.0, jerk_scaling=0.0, gridpoints=0, start_velocity=[], end_velocity=[])
    base.update(fields)
    points = [SimpleNamespace(positions=list(map(float, row))) for row in waypoints]
    return SimpleNamespace(path=SimpleNamespace(joint_names=list(names), points=points), **base)
