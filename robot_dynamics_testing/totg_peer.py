"""MoveIt's TOTG reference implementation (Kunz & Stilman, "Time-optimal trajectory generation for path
following with bounded acceleration and velocity", RSS 2012; the standalone C++ at
github.com/tobiaskunz/trajectories) built beside ours in /tmp, never committed, and run on waypoints.

The source comes from the repository's git objects (the ``fetch`` mirror under /work/.mirror, or
``$TOTG_SOURCE``: a git directory or a folder with Path.cpp / Trajectory.cpp); a tiny driver (below) reads the
waypoints, the velocity / acceleration limits and ``maxDeviation`` on stdin and prints the duration and
q, qd sampled at a fixed period. Built once into ``$TOTG_BUILD`` (default /tmp/totg_peer) with ``c++ -O2``
and Eigen 3 (:data:`robot_dynamics_testing.EIGEN_INCLUDE`). :func:`available` says why not when the
compiler, Eigen or the source is missing, so callers can skip with that message.

TOTG blends every waypoint corner with a circular arc whose *Euclidean* distance from the corner is at most
``maxDeviation``; ours bounds the infinity norm (≤ Euclidean), so equal values are fair to TOTG.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

from robot_dynamics_testing import EIGEN_INCLUDE

__all__ = ["available", "build", "run_totg", "TotgResult"]

BUILD = Path(os.environ.get("TOTG_BUILD", "/tmp/totg_peer"))
MIRROR = Path("/work/.mirror/tobiaskunz+trajectories/repo")
SOURCES = ("Path.h", "Path.cpp", "Trajectory.h", "Trajectory.cpp")

DRIVER = r"""
// stdin: n W maxDeviation timeStep samplePeriod, then maxVelocity (n), maxAcceleration (n), W rows of n.
// stdout: "valid duration" then rows "t q_1..q_n qd_1..qd_n" every samplePeriod and at the duration.
#include <cstdio>
#include <iostream>
#include <list>
#include <Eigen/Core>
#include "Path.h"
#include "Trajectory.h"
int main() {
    int n, w; double dev, step, period;
    if (!(std::cin >> n >> w >> dev >> step >> period)) return 2;
    Eigen::VectorXd vmax(n), amax(n);
    for (int j = 0; j < n; ++j) std::cin >> vmax[j];
    for (int j = 0; j < n; ++j) std::cin >> amax[j];
    std::list<Eigen::VectorXd> wps;
    for (int i = 0; i < w; ++i) {
        Eigen::VectorXd q(n);
        for (int j = 0; j < n; ++j) std::cin >> q[j];
        wps.push_back(q);
    }
    Trajectory trajectory(Path(wps, dev), vmax, amax, step);
    if (!trajectory.isValid()) { std::printf("0 nan\n"); return 0; }
    const double duration = trajectory.getDuration();
    std::printf("1 %.17g\n", duration);
    const long count = (long)(duration / period);
    for (long k = 0; k <= count + 1; ++k) {
        const double t = k <= count ? k * period : duration;
        const Eigen::VectorXd q = trajectory.getPosition(t), qd = trajectory.getVelocity(t);
        std::printf("%.17g", t);
        for (int j = 0; j < n; ++j) std::printf(" %.17g", q[j]);
        for (int j = 0; j < n; ++j) std::printf(" %.17g", qd[j]);
        std::printf("\n");
    }
    return 0;
}
"""


class TotgResult:
    """duration (s), t (T,), q (T, n), qd (T, n) of TOTG's trajectory; ``valid`` False when TOTG failed."""

    def __init__(self, valid: bool, duration: float, t: np.ndarray, q: np.ndarray, qd: np.ndarray):
        self.valid, self.duration, self.t, self.q, self.qd = valid, duration, t, q, qd


def _source_text(name: str) -> str | None:
    src = os.environ.get("TOTG_SOURCE")
    if src and (Path(src) / name).is_file():
        return (Path(src) / name).read_text()
    git_dir = Path(src) if src else MIRROR
    if not git_dir.is_dir() or shutil.which("git") is None:
        return None
    out = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"HEAD:{name}"], capture_output=True,
                         text=True)
    return out.stdout if out.returncode == 0 else None


def available() -> str | None:
    """None when TOTG can be built (or is built), else one line saying what is missing."""
    if (BUILD / "totg_driver").is_file():
        return None
    if shutil.which("c++") is None:
        return "TOTG peer: no C++ compiler (c++) on PATH"
    if not (EIGEN_INCLUDE / "Eigen" / "Core").is_file():
        return (f"TOTG peer: Eigen 3 headers not found under {EIGEN_INCLUDE} (apt-get install -y libeigen3-dev, "
                "or set EIGEN3_INCLUDE_DIR)")
    if _source_text("Path.cpp") is None:
        return (f"TOTG peer: source not found (fetch github:tobiaskunz/trajectories to {MIRROR}, or set "
                "TOTG_SOURCE to its git directory or a folder with Path.cpp / Trajectory.cpp)")
    return None


def build() -> Path:
    """Build the driver into :data:`BUILD` once; returns the executable. Raises RuntimeError with the reason."""
    exe = BUILD / "totg_driver"
    if exe.is_file():
        return exe
    why = available()
    if why is not None:
        raise RuntimeError(why)
    BUILD.mkdir(parents=True, exist_ok=True)
    for name in SOURCES:
        (BUILD / name).write_text(_source_text(name))
    (BUILD / "driver.cpp").write_text(DRIVER)
    cmd = ["c++", "-O2", "-DNDEBUG", f"-I{EIGEN_INCLUDE}", "-o", str(exe) + ".tmp", "driver.cpp", "Path.cpp",
           "Trajectory.cpp"]
    out = subprocess.run(cmd, cwd=BUILD, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"TOTG peer: build failed: {out.stderr.strip()[-400:]}")
    os.replace(str(exe) + ".tmp", exe)
    return exe


def run_totg(waypoints, max_velocity, max_acceleration, max_deviation: float, *, time_step: float = 1e-3,
             sample_period: float = 1e-3) -> TotgResult:
    """TOTG on ``waypoints`` (W, n) with per-joint limits (n,) rad/s, rad/s² and ``max_deviation`` (rad,
    Euclidean blend deviation; 0: no blends, TOTG then stops at every corner); ``time_step`` is TOTG's
    integration step (its default 1e-3 s). Returns a :class:`TotgResult` sampled every ``sample_period``."""
    exe = build()
    wp = np.asarray(waypoints, dtype=float)
    w, n = wp.shape
    lines = [f"{n} {w} {max_deviation!r} {time_step!r} {sample_period!r}",
             " ".join(repr(float(v)) for v in max_velocity), " ".join(repr(float(v)) for v in max_acceleration)]
    lines += [" ".join(repr(float(v)) for v in row) for row in wp]
    out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"TOTG peer: driver exited {out.returncode}: {out.stderr.strip()[-400:]}")
    head, *rows = out.stdout.splitlines()
    valid, duration = head.split()
    if valid != "1":
        return TotgResult(False, float("nan"), np.zeros(0), np.zeros((0, n)), np.zeros((0, n)))
    data = np.array([r.split() for r in rows], dtype=float)
    return TotgResult(True, float(duration), data[:, 0], data[:, 1:1 + n], data[:, 1 + n:])
