"""The shared test and benchmark harness of robot_dynamics_ros (not part of the runtime package).

- :mod:`.reference`: independent references (Pinocchio called directly on the URDF: g(q), PinByName).
- :mod:`.ros_world`: one rclpy context + executor + peer node for in-process DDS tests.
- :mod:`.dds_probe`: a probe that records what nodes publish, with DDS source timestamps.
- :mod:`.launch_check`: the static + real-class check of the launch files.
- :mod:`.urdf_text`: small serial-chain URDF texts.
- :mod:`.latency`, :mod:`.retiming_load`, :mod:`.attack`: the process harness of the latency, retiming-load
  and attack benchmarks (publisher / client processes started with ``python -m robot_dynamics_testing.<m>``).

Installed with the repository by ``make setup`` (``setup.py``), so tests (pytest's ``pythonpath``), benchmarks
(scripts run from anywhere) and the child processes they start all import it the same way.
"""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: Eigen 3 headers for the peers built beside ours (:mod:`.toppra_cpp`, :mod:`.totg_peer`): a folder holding
#: ``Eigen/Core``, ``$EIGEN3_INCLUDE_DIR`` (CMake's name; e.g. the headers of a fetched Eigen mirror extracted
#: to /tmp) or the system's
EIGEN_INCLUDE = Path(os.environ.get("EIGEN3_INCLUDE_DIR", "/usr/include/eigen3"))


def child_env(base=None) -> dict[str, str]:
    """``base`` (default ``os.environ``) with the repository first on ``PYTHONPATH``, so that a child
    ``python -m robot_dynamics_testing.<module>`` imports this checkout even where another one is installed."""
    env = dict(os.environ if base is None else base)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *[p for p in parts if p != str(REPO)]])
    return env
