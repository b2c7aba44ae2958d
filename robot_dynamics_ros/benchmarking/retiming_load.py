"""Background load for the latency benchmark: back-to-back 100-waypoint retiming requests."""
from __future__ import annotations


def available() -> bool:
    """True when the retiming service node can be imported."""
    try:
        import robot_dynamics_ros.nodes.retiming_service  # noqa: F401
    except ImportError:
        return False
    return True


def make_retiming_load(context):
    raise NotImplementedError("retiming load: the retiming service node is not there yet")
