"""Shared test set-up.

DDS isolation: every test session gets a private ROS_DOMAIN_ID chosen here (never the caller's, whatever
the caller's environment says) and localhost-only discovery, so tests never hear each other, and never
reach a robot on the caller's domain. Subprocesses started with ``os.environ`` inherit both; the caller's
original domain is kept in ``ROBOT_DYNAMICS_CALLER_DOMAIN_ID`` so that children avoid it too. Under
pytest-xdist (``make test TEST_WORKERS=2``) each worker and its children draw from a disjoint share of
the private domains, so two workers' nodes never hear each other.
"""
from __future__ import annotations

import os
import sys

# One BLAS thread per test process (and its children: the nodes, the tools): the tests share two cores with
# the node processes they start, and OpenBLAS's threads wait for work by spinning, so identification's least
# squares took 5x the CPU time with them (test_keep_urdf: 74 s of CPU against 15 s, on this 2-core machine
# while it was loaded). Read when numpy loads, so before.
for _blas_env in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_blas_env, "1")
assert "numpy" not in sys.modules, "numpy was imported before test/conftest.py could limit its BLAS threads"

from robot_dynamics_tools.commands import isolation  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER", "").startswith("gw"):
    os.environ[isolation.SHARE_ENV] = isolation.share_of_private_domains(
        int(os.environ["PYTEST_XDIST_WORKER"][2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
os.environ.update(isolation.private_environment())
os.environ.setdefault("MPLBACKEND", "Agg")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config, items):
    """The attack benchmark's quick run goes last: its targets are timing ones, and earlier tests have
    then compiled every numba kernel (a cold compile inside its nodes would be measured as an attack's gap)."""
    last = [it for it in items if it.nodeid.startswith("test/system/test_attack_quick.py")
            or it.nodeid.startswith("system/test_attack_quick.py")]
    if last:
        items[:] = [it for it in items if it not in last] + last
