"""Build and run toppra's compiled C++ core (Pham & Pham 2018; github.com/hungpham2511/toppra, ``cpp/src``) as a
peer for ``benchmarks/bench_retiming.py``. Built into /tmp, never committed.

The source comes from a git directory of the toppra repository (``TOPPRA_GIT_DIR``, default: the mirror at
``/work/.mirror/hungpham2511+toppra/repo``; a checkout works too). Only the Seidel solver, the TOPPRA algorithm,
the constraint base class and the geometric-path base are compiled (no qpOASES / GLPK / Pinocchio), with Eigen 3
(``robot_dynamics_testing.EIGEN_INCLUDE``: ``$EIGEN3_INCLUDE_DIR`` or the system's), ``g++ -O3 -DNDEBUG`` (toppra's Release flags), plus the small driver
``toppra_cpp_driver.cpp`` beside this file: it takes the gridpoints and the constraint coefficients per gridpoint
from a file, builds toppra's constraints from them (velocity as an x bound, acceleration and torque as linear
constraints ``a u + b x + c`` within ±limit, interpolation discretization, toppra's default) and times
``computePathParametrization`` (parameter set-up, backward controllable sets, forward pass) in-process.

:func:`build` returns the driver's path, or a one-line reason why it cannot be built (the benchmark prints it
and skips the column).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from robot_dynamics_testing import EIGEN_INCLUDE

DEFAULT_GIT_DIR = "/work/.mirror/hungpham2511+toppra/repo"
BUILD_DIR = Path(tempfile.gettempdir()) / "toppra_cpp_build"
DRIVER_SOURCE = Path(__file__).with_name("toppra_cpp_driver.cpp")
SOURCES = ("toppra/constraint.cpp", "toppra/solver.cpp", "toppra/solver/seidel.cpp", "toppra/geometric_path.cpp",
           "toppra/algorithm.cpp", "toppra/algorithm/toppra.cpp")
EXPORT_HPP = ("#ifndef TOPPRA_EXPORT_HPP\n#define TOPPRA_EXPORT_HPP\n#define TOPPRA_EXPORT\n#define TOPPRA_NO_EXPORT\n"
              "#define TOPPRA_DEPRECATED\n#endif\n")


def _source_tree(git_dir: str, dest: Path) -> str | None:
    """Extract cpp/src of the toppra repository into dest; None, or a reason it failed."""
    src = Path(git_dir)
    if (src / "cpp" / "src").is_dir():  # a checkout
        shutil.copytree(src / "cpp" / "src", dest, dirs_exist_ok=True)
        return None
    if not src.exists():
        return f"no toppra source at {git_dir} (set TOPPRA_GIT_DIR to a clone of github.com/hungpham2511/toppra)"
    archive = subprocess.run(["git", f"--git-dir={git_dir}", "archive", "HEAD", "cpp/src"], capture_output=True)
    if archive.returncode != 0:
        return f"git archive of {git_dir} failed: {archive.stderr.decode(errors='replace').strip()[:200]}"
    tar = subprocess.run(["tar", "-x", "--strip-components=2", "-C", str(dest)], input=archive.stdout,
                         capture_output=True)
    if tar.returncode != 0:
        return f"tar failed: {tar.stderr.decode(errors='replace').strip()[:200]}"
    return None


def build(git_dir: str | None = None) -> tuple[Path | None, str]:
    """(driver path, "") when built (or already built), else (None, a one-line reason)."""
    git_dir = git_dir or os.environ.get("TOPPRA_GIT_DIR", DEFAULT_GIT_DIR)
    exe = BUILD_DIR / "toppra_driver"
    if exe.exists() and exe.stat().st_mtime >= DRIVER_SOURCE.stat().st_mtime:
        return exe, ""
    if shutil.which("g++") is None:
        return None, "toppra C++: no g++ on this machine"
    eigen = EIGEN_INCLUDE
    if not (eigen / "Eigen" / "Core").exists():
        return None, (f"toppra C++: Eigen 3 headers missing under {eigen} (apt-get install -y libeigen3-dev, or "
                      "set EIGEN3_INCLUDE_DIR)")
    src = BUILD_DIR / "src"
    src.mkdir(parents=True, exist_ok=True)
    why = _source_tree(git_dir, src)
    if why:
        return None, f"toppra C++: {why}"
    (src / "toppra" / "export.hpp").write_text(EXPORT_HPP)
    cmd = ["g++", "-O3", "-DNDEBUG", "-std=c++17", f"-I{src}", f"-I{eigen}", "-o", str(exe), str(DRIVER_SOURCE),
           *(str(src / f) for f in SOURCES)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return None, "toppra C++: build failed: " + done.stderr.strip().splitlines()[-1][:200]
    return exe, ""


def solve(exe: Path, s, xmax, dq, ddq, alim, abc, tlim, repeat: int = 5):
    """Time toppra's C++ TOPPRA on the rows at the gridpoints s (N,): xmax (N,) velocity bound on sd²,
    q' and q'' (N, n) for the acceleration rows, alim (n,), (a, b, c) (N, n) torque coefficients, tlim (n,).
    Returns (status (0 = OK), median ms, min ms (thread CPU time), x (N,) = sd² at the gridpoints) over ``repeat``
    in-process solves."""
    n_grid, n = dq.shape
    parts = [np.array([n_grid, n, repeat], dtype=np.int64).tobytes()]
    for arr in (s, np.minimum(xmax, 1e12), dq, ddq, alim, *abc, tlim):
        parts.append(np.ascontiguousarray(arr, dtype="<f8").tobytes())
    with tempfile.NamedTemporaryFile(suffix=".bin", delete=False) as fh:
        fh.write(b"".join(parts))
        name = fh.name
    try:
        done = subprocess.run([str(exe), name], capture_output=True, text=True, check=True)
    finally:
        os.unlink(name)
    lines = done.stdout.split()
    status, med, low = int(lines[0]), float(lines[1]) * 1e-6, float(lines[2]) * 1e-6
    return status, med, low, np.array([float(v) for v in lines[3:]])
