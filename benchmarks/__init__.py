"""Benchmarks of robot_dynamics_ros (not part of the installed package): run the ``bench_*.py`` scripts from
the repository (``make bench`` or ``python benchmarks/bench_<name>.py``).

Helper modules here (:mod:`benchmarks.latency`, :mod:`benchmarks.retiming_load`) check outputs against the
Pinocchio-direct references of the tests (``test/reference.py``), put on ``sys.path`` here; child processes
get the repository on ``PYTHONPATH`` through :func:`child_env`.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_TEST_DIR = str(REPO / "test")
if _TEST_DIR not in sys.path:
    sys.path.append(_TEST_DIR)


def child_env(base=None) -> dict[str, str]:
    """``base`` (default ``os.environ``) with the repository first on ``PYTHONPATH``, so that a child
    ``python -m benchmarks.<module>`` finds this folder wherever it is started from."""
    env = dict(os.environ if base is None else base)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *[p for p in parts if p != str(REPO)]])
    return env
