"""Levels of a step or a runner status: the ``diagnostic_msgs/DiagnosticStatus`` levels (OK 0, WARN 1, ERROR 2).

Their own module so that the simulator's runner (:mod:`robot_dynamics_ros.sim.runner`) shares them with the
control cores (:mod:`robot_dynamics_ros.control.core`) without importing a dynamics engine (Pinocchio, ~48 MB
resident, which the simulator node does not use).
"""
from __future__ import annotations

__all__ = ["OK", "WARN", "ERROR"]

OK, WARN, ERROR = 0, 1, 2
