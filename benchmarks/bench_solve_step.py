"""Benchmark: the TOPP-RA solve step against the LP-based solver it replaced, on the same rows, in one run.

The rows are the ones bench_retiming's requests build (Panda and UR5 with payload, 0.9 torque margin, 10 rad/s²;
W waypoints, N gridpoints requested, 0 = the default grid): each request goes through ``Retimer.retime`` once,
its call of :func:`~robot_dynamics_ros.retiming.topp_ra.solve_topp_ra` is recorded, and that call is then
timed (thread CPU, median of ``--repeat``) with the package's solver and with the frozen LP-based one
(``test/retiming/topp_ra_reference.py``, loaded from its file), alternating. Printed: both times, their
ratio, the statuses and the relative difference of the two durations.

``--all-urdfs``: no timing; every URDF of example-robot-data that loads, three requests each (6, 20 and 10
waypoints of a smooth path at 30 % of the position range, default grids or 800 gridpoints, torque margins 0.9 /
0.5 / 0.9, 10 rad/s²), every solve_topp_ra call of each request solved again by the frozen solver: prints the
counts, the calls whose status differs and the largest relative difference of the durations.

Run:  .venv/bin/python benchmarks/bench_solve_step.py [--repeat 15] [--all-urdfs]
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

from robot_dynamics_ros.retiming.request import RetimeOptions
from robot_dynamics_ros.retiming.retimer import Retimer
from robot_dynamics_ros.retiming.topp_ra import solve_topp_ra, stage_times
from robot_dynamics_testing.retiming_cases import MARGIN, load_model, recorded_solves, smooth_waypoints, urdf_model

REFERENCE = Path(__file__).resolve().parents[1] / "test" / "retiming" / "topp_ra_reference.py"


def load_reference():
    spec = importlib.util.spec_from_file_location("topp_ra_reference", REFERENCE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["topp_ra_reference"] = module  # numba's cache finds a kernel's module by this name
    spec.loader.exec_module(module)
    return module


def recorded_call(model, count, grid):
    """The arguments of the last solve_topp_ra call of one retime request."""
    opts = RetimeOptions(gridpoints=grid or None, torque_margin=MARGIN, sample_period=0.01)
    with recorded_solves() as calls:
        res = Retimer(model).retime(smooth_waypoints(model, count), options=opts)
    if not res.success:
        raise SystemExit(f"W={count} N={grid}: {res.message}")
    return calls[-1][0]


def all_urdfs(reference) -> None:
    """Statuses and durations of the package's solver against the frozen one on every example-robot-data URDF."""
    from robot_dynamics_ros.robots import example_robot_data_dir

    files = sorted(example_robot_data_dir().rglob("*.urdf"))
    loaded = compared = 0
    worst = 0.0
    differing = []
    with recorded_solves() as calls:
        for path in files:
            try:
                model = urdf_model(path)
            except Exception:  # (a URDF our reader refuses is not this benchmark's subject)
                continue
            if model.n == 0:
                continue
            loaded += 1
            retimer = Retimer(model)
            for seed, (count, grid, margin) in enumerate([(6, None, 0.9), (20, None, 0.5), (10, 800, 0.9)]):
                calls.clear()
                wp = smooth_waypoints(model, count, seed=seed, amplitude=0.3)
                retimer.retime(wp, options=RetimeOptions(gridpoints=grid, torque_margin=margin))
                for args, out in calls:
                    compared += 1
                    ref = reference.solve_topp_ra(*args)
                    if (int(out[0]), out[1]) != (int(ref[0]), ref[1]):
                        differing.append(f"{path.name} request {seed}: status {int(out[0])} vs {int(ref[0])}")
                    elif int(out[0]) == 0:
                        t, r_t = stage_times(args[0], out[2])[-1], stage_times(args[0], ref[2])[-1]
                        worst = max(worst, abs(t - r_t) / r_t)
    print(f"{len(files)} URDFs, {loaded} loaded, {compared} solves compared, {len(differing)} statuses differ, "
          f"largest relative duration difference {worst:.1e}")
    for line in differing:
        print("  " + line)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--robots", nargs="+", default=["panda", "ur5"])
    ap.add_argument("--waypoints", nargs="+", type=int, default=[10, 100])
    ap.add_argument("--gridpoints", nargs="+", type=int, default=[0, 1000, 10000])
    ap.add_argument("--all-urdfs", action="store_true", help="compare results on every example-robot-data URDF")
    args = ap.parse_args(argv)
    reference = load_reference()
    if args.all_urdfs:
        all_urdfs(reference)
        return 0
    print(f"{'robot':6} {'W':>4} {'N':>6} {'ours ms':>8} {'LP ms':>8} {'LP/ours':>8} {'status':>7} {'dT rel':>9}")
    for robot in args.robots:
        model = load_model(robot)
        for count in args.waypoints:
            for grid in args.gridpoints:
                call = recorded_call(model, count, grid)
                ours, theirs = [], []
                for _ in range(args.repeat):
                    c0 = time.thread_time()
                    out = solve_topp_ra(*call)
                    ours.append(time.thread_time() - c0)
                    c0 = time.thread_time()
                    ref = reference.solve_topp_ra(*call)
                    theirs.append(time.thread_time() - c0)
                t, r_t = stage_times(call[0], out[2])[-1], stage_times(call[0], ref[2])[-1]
                mo, mr = 1e3 * float(np.median(ours)), 1e3 * float(np.median(theirs))
                print(f"{robot:6} {count:>4} {call[0].shape[0]:>6} {mo:>8.3f} {mr:>8.3f} {mr / mo:>8.2f} "
                      f"{int(out[0])}/{int(ref[0]):<5} {abs(t - r_t) / r_t:>9.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
