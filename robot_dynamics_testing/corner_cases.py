"""Retiming with every waypoint a knot of the spline (corners not cut), as before issue 23: the
comparison in ``benchmarks/bench_corners.py`` and the TOPP-RA profile the jerk tests start from (the
retimer keeps corners for jerk-limited timings)."""
from __future__ import annotations

import contextlib

from robot_dynamics_ros.retiming.path import JointPath

__all__ = ["corners_kept"]


@contextlib.contextmanager
def corners_kept():
    """Within the block, ``JointPath.within_tolerance`` keeps every waypoint as a knot (cut_corners=False)."""
    original = JointPath.__dict__["within_tolerance"]

    def kept(cls, *args, **kwargs):
        return original.__func__(cls, *args, **{**kwargs, "cut_corners": False})

    JointPath.within_tolerance = classmethod(kept)
    try:
        yield
    finally:
        JointPath.within_tolerance = original
