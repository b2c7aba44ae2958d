"""COPP (copp-py: a Rust core with the Clarabel interior-point solver; "Convex-objective path
parameterization", crates.io ``copp`` / PyPI ``copp-py``) as the peer of our jerk-limited solve, installed
beside ours on demand and never a dependency of the package.

:func:`load` imports ``copp_py`` from :data:`TARGET` (default ``/tmp/copp-py-<version>``), installing the
pinned wheel there first with this interpreter's pip (``pip install --no-deps --target``; it needs only
numpy). :func:`solve` runs COPP's documented third-order workflow on the *same stations* (our gridpoints),
the same path derivatives q', q'', q''' there (our spline), and the same velocity, acceleration, torque and
jerk limits: a TOPP2 reachability profile (``topp2_ra``), then ``topp3_lp`` with the jerk rows linearized
at that profile, then again at each answer (``b_linearization`` from the same answer, as its docs recommend)
until the duration gains less than :data:`ROUND_RTOL` — a sequential convex iteration like ours, so the two
are compared at convergence. Torques come from a Pinocchio RNEA callback (COPP builds its torque rows from
the user's inverse dynamics); that build is timed apart from the solve.

:func:`dense_peaks` is our independent check applied to COPP's output: s(t) at 1 kHz from COPP's own
inverse time map, q(t) on our spline, velocity, acceleration and jerk by finite differences of q(t), torque
by Pinocchio RNEA; returned as the largest |value| / limit per kind.
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["COPP_VERSION", "TARGET", "load", "solve", "dense_peaks", "CoppResult"]

COPP_VERSION = "0.2.3"
TARGET = Path(os.environ.get("COPP_TARGET", Path(tempfile.gettempdir()) / f"copp-py-{COPP_VERSION}"))
#: SCP rounds stop when the duration gains less than this (relative), or after :data:`MAX_ROUNDS`
ROUND_RTOL = 1e-4
MAX_ROUNDS = 12


def load():
    """``copp_py`` imported from :data:`TARGET` (installed there first when absent).

    Raises:
        RuntimeError: pip could not install it (e.g. no network) or it does not import; the message says why.
    """
    if not (TARGET / "copp_py").is_dir():
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(TARGET),
               f"copp-py=={COPP_VERSION}"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(f"pip could not install copp-py {COPP_VERSION} into {TARGET}: {exc}") from None
        if done.returncode != 0:
            raise RuntimeError(f"pip could not install copp-py {COPP_VERSION} into {TARGET}: "
                               f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    if str(TARGET) not in sys.path:
        sys.path.insert(0, str(TARGET))
    try:
        return importlib.import_module("copp_py")
    except ImportError as exc:
        raise RuntimeError(f"copp-py in {TARGET} does not import: {exc}") from None


@dataclass
class CoppResult:
    """COPP on one path. Durations in s; times in ms (wall ``*_ms``, thread CPU ``*_cpu_ms``).

    ``build``: the Robot with stations, derivatives and limit rows (its torque rows call the inverse
    dynamics); ``solve``: topp2_ra + every topp3_lp round; ``first_*``: after the first topp3_lp round
    (COPP's tutorial stops there)."""

    duration: float
    first_duration: float
    rounds: int
    build_ms: float
    solve_ms: float
    solve_cpu_ms: float
    first_solve_cpu_ms: float
    profile: object = field(repr=False)
    t_s: np.ndarray = field(repr=False)


def solve(copp, s, q, dq, ddq, dddq, inverse_dynamics, velocity_limit, acceleration_limit, torque_limit,
          jerk_limit) -> CoppResult:
    """COPP's rest-to-rest jerk-limited time-optimal profile on stations ``s`` (N,).

    Args:
        copp: the module from :func:`load`.
        s: (N,) stations (path parameter, increasing); q, dq, ddq, dddq: (N, n) q(s) and its first three
            derivatives in s there.
        inverse_dynamics: ``f(q, qd, qdd) -> tau`` (n,), N·m / N.
        velocity_limit, acceleration_limit, torque_limit, jerk_limit: (n,) symmetric limits (rad/s, rad/s²,
            N·m, rad/s³); an infinite acceleration limit adds no acceleration rows.

    Raises:
        copp.CoppError: COPP found no profile (its message).
    """
    n = q.shape[1]
    t0 = time.perf_counter()
    robot = copp.Robot(n, inverse_dynamics=inverse_dynamics)
    robot.append_s(s)
    robot.set_q(q, dq, ddq, 0, dddq=dddq)
    robot.add_velocity_limits(velocity_limit, -velocity_limit, start_idx_s=0)
    if np.all(np.isfinite(acceleration_limit)):
        robot.add_acceleration_limits(acceleration_limit, -acceleration_limit, start_idx_s=0)
    robot.add_torque_limits(torque_limit, -torque_limit, start_idx_s=0)
    robot.add_jerk_limits(jerk_limit, -jerk_limit, start_idx_s=0)
    t1, c1 = time.perf_counter(), time.thread_time()
    problem2 = copp.solver.topp2_ra.Problem(robot.constraints, idx_s_interval=(0, len(s) - 1), a_boundary=(0.0, 0.0))
    a_lin, b_lin = copp.solver.topp2_ra.solve(problem2), None
    duration, rounds, first, first_cpu, profile, t_s = np.inf, 0, None, None, None, None
    while rounds < MAX_ROUNDS:
        problem3 = copp.solver.topp3_lp.Problem(robot.constraints, np.maximum(a_lin, 0.0), idx_s_start=0,
                                                a_boundary=(0.0, 0.0), b_boundary=(0.0, 0.0),
                                                b_linearization=b_lin)
        new = copp.solver.topp3_lp.solve(problem3)
        new_duration, new_t_s = copp.interpolation.s_to_t_topp3(s, new)
        rounds += 1
        if first is None:
            first, first_cpu = new_duration, (time.thread_time() - c1) * 1e3
        if new_duration >= duration:  # no gain: keep the previous answer
            break
        gain = (duration - new_duration) / new_duration
        duration, profile, t_s = new_duration, new, np.asarray(new_t_s)
        if gain < ROUND_RTOL:
            break
        a_lin, b_lin = np.asarray(new.a), np.asarray(new.b)
    t2, c2 = time.perf_counter(), time.thread_time()
    return CoppResult(duration=float(duration), first_duration=float(first), rounds=rounds,
                      build_ms=(t1 - t0) * 1e3, solve_ms=(t2 - t1) * 1e3, solve_cpu_ms=(c2 - c1) * 1e3,
                      first_solve_cpu_ms=float(first_cpu), profile=profile, t_s=t_s)


def dense_peaks(copp, result: CoppResult, s, path, pm, velocity_limit, torque_limit, jerk_limit,
                period: float = 1e-3) -> dict[str, float]:
    """Largest |value| / limit of COPP's output sampled every ``period`` s: ``velocity``, ``torque``,
    ``jerk`` (finite differences of q(t) = path(s(t)), s(t) from COPP's inverse time map; torque by
    Pinocchio RNEA on ``pm``). The first and last two jerk samples are left out (one-sided differences)."""
    import pinocchio as pin

    s_t = np.asarray(copp.interpolation.t_to_s_topp3_uniform(s, result.profile, result.t_s, period))
    q = path(np.clip(s_t, s[0], s[-1]))
    qd = np.gradient(q, period, axis=0)
    qdd = np.gradient(qd, period, axis=0)
    jerk = np.diff(qdd, axis=0)[2:-2] / period
    data = pm.createData()
    tau = np.array([pin.rnea(pm, data, q[k], qd[k], qdd[k]) for k in range(q.shape[0])])
    return {"velocity": float((np.abs(qd) / velocity_limit).max()), "torque": float((np.abs(tau) / torque_limit).max()),
            "jerk": float((np.abs(jerk) / jerk_limit).max())}
