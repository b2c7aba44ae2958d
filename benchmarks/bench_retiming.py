"""Benchmark: our TOPP-RA retiming vs toppra (PyPI) on the same path, limits and gridpoints, in one run.

Cases: Panda (7-DoF) and UR5 (6-DoF) from example-robot-data, 10 and 100 waypoints of a smooth joint-space
path (no direction reversals), N = 100 and 1000 gridpoints requested (ours adds gridpoints where the path
turns, see ``path.TURN_PER_STAGE``; toppra gets the same gridpoints), velocity + acceleration (10 rad/s²) + torque
limits with a payload and a 0.9 torque margin so that the torque limit binds on part of the path.

Timed, per side, for the WHOLE retiming:
* ours   — ``Retimer.retime``: spline, q/q'/q'' at the collocation points, torque coefficients from the
           batched in-package Newton–Euler, TOPP-RA solve, output sampling (t, q, qd, qdd, tau) at ``--dt``;
* toppra — ``SplineInterpolator`` through the same knots (waypoints and the points our path adds on their
           chords to stay within ``path_tolerance``) at the same s, velocity / acceleration /
           torque constraints (torque via Pinocchio ``rnea``, its documented usage), ``TOPPRA`` with the
           same gridpoints (seidel solver), ``compute_trajectory``, and sampling q, qd, qdd at the same
           ``--dt`` plus tau with Pinocchio at every sample (ours outputs tau too).
The two sides run in blocks (ours × R/k, toppra × R/k, in k = ``--rounds`` rounds, default 5, so that
both sample the load drift of a shared machine alike; ``--interleave``: alternating call by call, where
each side evicts the other's caches); the median over repetitions of the wall time is the
reported speed-up ("speedup"), with the same ratio of thread CPU time ("cpu x", insensitive to other
processes on a shared machine) next to it. Also printed:
durations and their relative difference, and the peak fraction of each limit on a 10× denser sampling
of each output (Pinocchio RNEA) — > 1 means the output overshoots a limit.

Run:  .venv/bin/python benchmarks/bench_retiming.py [--repeat 15] [--json out.json]
(re-executes itself with MALLOC_TOP_PAD_=67108864, see shared NOTES "Benchmarks"; the garbage collector is
off inside each timed call, as in ``timeit``).
"""
from __future__ import annotations

import argparse
import gc
import itertools
import json
import logging
import os
import sys
import time
import warnings

if os.environ.get("MALLOC_TOP_PAD_") is None:  # glibc reads it at start-up only
    os.environ["MALLOC_TOP_PAD_"] = "67108864"
    os.execv(sys.executable, [sys.executable, *sys.argv])

import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402

from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics  # noqa: E402
from robot_dynamics_ros.model import RobotModel  # noqa: E402
from robot_dynamics_ros.retiming.request import RetimeOptions  # noqa: E402
from robot_dynamics_ros.retiming.retimer import Retimer  # noqa: E402
from robot_dynamics_ros.robots import ROBOTS  # noqa: E402

#: robot -> (payload link, mass kg, com m)
PAYLOADS = {"panda": ("panda_link7", 2.5, (0.0, 0.0, 0.1)), "ur5": ("wrist_3_link", 8.0, (0.0, 0.1, 0.0))}
ACCELERATION_LIMIT = 10.0  # rad/s², all joints
TORQUE_MARGIN = 0.9


def load_model(robot: str) -> RobotModel:
    entry = ROBOTS[robot]
    model = RobotModel.from_urdf(entry.path, held_joints=entry.held_joints)
    link, mass, com = PAYLOADS[robot]
    model = model.with_settings(payload=(link, mass, com))
    model.acceleration_limit = np.full(model.n, ACCELERATION_LIMIT)
    return model


def smooth_waypoints(model: RobotModel, count: int, seed: int = 0) -> np.ndarray:
    """(count, n) samples of a smooth sinusoidal joint-space path inside the position limits."""
    rng = np.random.default_rng(seed)
    lo = np.where(np.isfinite(model.lower), model.lower, -np.pi)
    hi = np.where(np.isfinite(model.upper), model.upper, np.pi)
    center, amp = (lo + hi) / 2, (hi - lo) / 2 * 0.42
    tau = np.linspace(0.0, 1.0, count)[:, None]
    freq = rng.uniform(0.5, 1.2, model.n)
    phase = rng.uniform(0, 2 * np.pi, model.n)
    return center + amp * np.sin(2 * np.pi * freq * tau + phase)


class ToppraSide:
    """toppra's documented pipeline on the same path / limits / gridpoints (Pinocchio for torques)."""

    def __init__(self, model: RobotModel):
        import toppra

        self.ta = toppra
        logging.getLogger("toppra").setLevel(logging.ERROR)
        eng = PinocchioDynamics(model)
        eng.rnea(model.neutral(), np.zeros(model.n), np.zeros(model.n))  # sync payload / gravity
        if not eng._plain or not eng._identity_q:
            raise SystemExit("benchmark robots must map 1:1 onto Pinocchio's joint order")
        self.pm, self.data = eng.pin_model, eng.data
        self.vlim = model.velocity_limit.copy()
        self.alim = model.acceleration_limit.copy()
        self.tlim = model.effort_limit * TORQUE_MARGIN
        self.n = model.n

    def run(self, knots, waypoints, gridpoints, dt):
        ta = self.ta
        import toppra.algorithm as algo
        import toppra.constraint as constraint

        pm, data = self.pm, self.data
        path = ta.SplineInterpolator(knots, waypoints)
        cons = [constraint.JointVelocityConstraint(np.stack((-self.vlim, self.vlim), axis=1)),
                constraint.JointAccelerationConstraint(np.stack((-self.alim, self.alim), axis=1)),
                constraint.JointTorqueConstraint(lambda q, qd, qdd: pin.rnea(pm, data, q, qd, qdd),
                                                 np.stack((-self.tlim, self.tlim), axis=1), np.zeros(self.n))]
        inst = algo.TOPPRA(cons, path, gridpoints=gridpoints, solver_wrapper="seidel")
        traj = inst.compute_trajectory(0.0, 0.0)
        if traj is None:
            return None
        if dt:
            t = np.append(np.arange(0.0, traj.duration, dt), traj.duration)
        else:  # as many samples as gridpoints (ours samples at its gridpoint times)
            t = np.linspace(0.0, traj.duration, len(gridpoints))
        q, qd, qdd = traj(t), traj(t, 1), traj(t, 2)
        tau = np.array([pin.rnea(pm, data, q[k], qd[k], qdd[k]) for k in range(t.shape[0])])
        return traj, t, q, qd, qdd, tau


def dense_peaks(model, pm, data, q, qd, qdd, tlim):
    tau = np.array([pin.rnea(pm, data, q[k], qd[k], qdd[k]) for k in range(q.shape[0])])
    return {"velocity": float((np.abs(qd) / model.velocity_limit).max()),
            "acceleration": float((np.abs(qdd) / model.acceleration_limit).max()),
            "effort": float((np.abs(tau) / tlim).max())}


def run_case(robot, model, retimer, toppra_side, n_wp, n_grid, dt, repeat, interleave=False, rounds=5):
    wp = smooth_waypoints(model, n_wp)
    opts = RetimeOptions(gridpoints=n_grid, torque_margin=TORQUE_MARGIN, sample_period=dt or None)
    res = retimer.retime(wp, options=opts)
    if not res.success:
        raise SystemExit(f"{robot} W={n_wp} N={n_grid}: ours failed: {res.message}")
    seg = res.segments[0]
    # the same path for toppra: the not-a-knot spline through our knots (the waypoints and the points
    # added on their chords to keep the path within path_tolerance of the polyline), the same gridpoints
    knots, grid = seg.path.knots, seg.s
    knot_q = seg.path(knots)
    out = toppra_side.run(knots, knot_q, grid, dt)
    if out is None:
        raise SystemExit(f"{robot} W={n_wp} N={n_grid}: toppra failed")
    t_ours, t_ta, c_ours, c_ta = [], [], [], []

    def timed(fn, wall, cpu):
        # as timeit: the garbage collector is off inside the timed call (and runs between calls when it
        # wants to; an explicit gc.collect() before every call would evict the caches of the next one)
        gc.disable()
        t0, c0 = time.perf_counter(), time.thread_time()
        value = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        gc.enable()
        return value

    def ours():
        return retimer.retime(wp, options=opts)

    def theirs():
        return toppra_side.run(knots, knot_q, grid, dt)

    gc.collect()
    if interleave:  # ours, toppra, ours, toppra, ...
        for _ in range(repeat):
            res = timed(ours, t_ours, c_ours)
            out = timed(theirs, t_ta, c_ta)
    else:  # blocks of ours then toppra, in several rounds (each side warm within its block; both sides
        # sample the load drift of a shared machine alike)
        per = -(-repeat // rounds)
        for _ in range(rounds):
            for _ in range(per):
                res = timed(ours, t_ours, c_ours)
            for _ in range(per):
                out = timed(theirs, t_ta, c_ta)
    traj = out[0]
    # 10x denser sampling of both outputs, checked with Pinocchio
    dense = RetimeOptions(gridpoints=n_grid, torque_margin=TORQUE_MARGIN, sample_period=(dt or 0.01) / 10)
    rd = retimer.retime(wp, options=dense)
    pm, data = toppra_side.pm, toppra_side.data
    ours_peak = dense_peaks(model, pm, data, rd.q, rd.qd, rd.qdd, toppra_side.tlim)
    td = np.linspace(0, traj.duration, rd.t.shape[0])
    ta_peak = dense_peaks(model, pm, data, traj(td), traj(td, 1), traj(td, 2), toppra_side.tlim)
    ms_ours, ms_ta = 1e3 * float(np.median(t_ours)), 1e3 * float(np.median(t_ta))
    cpu_ours, cpu_ta = 1e3 * float(np.median(c_ours)), 1e3 * float(np.median(c_ta))
    return {"robot": robot, "waypoints": n_wp, "gridpoints": int(grid.shape[0]), "dt": dt,
            "ours_ms": ms_ours, "toppra_ms": ms_ta, "speedup": ms_ta / ms_ours,
            "ours_min_ms": 1e3 * min(t_ours), "toppra_min_ms": 1e3 * min(t_ta),
            "ours_cpu_ms": cpu_ours, "toppra_cpu_ms": cpu_ta, "speedup_cpu": cpu_ta / cpu_ours,
            "ours_duration": res.duration, "toppra_duration": float(traj.duration),
            "duration_diff_pct": 100.0 * (res.duration - traj.duration) / traj.duration,
            "ours_timings_ms": {k: round(v, 4) for k, v in res.timings.items()},
            "ours_dense_peak": ours_peak, "toppra_dense_peak": ta_peak}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--dt", type=float, nargs="+", default=[0.0, 0.01],
                    help="output sample periods to run, s; 0 = at the gridpoints (default: 0 and 0.01)")
    ap.add_argument("--robots", nargs="+", default=["panda", "ur5"])
    ap.add_argument("--waypoints", nargs="+", type=int, default=[10, 100])
    ap.add_argument("--gridpoints", nargs="+", type=int, default=[100, 1000])
    ap.add_argument("--interleave", action="store_true", help="alternate ours / toppra call by call "
                    "(default: blocks of each side, --rounds rounds)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of (ours block, toppra block); each block "
                    "has ceil(repeat / rounds) calls (default 5)")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rows = []
    print(f"MALLOC_TOP_PAD_={os.environ.get('MALLOC_TOP_PAD_')}  repeat={args.repeat}  dt={args.dt} s (0: gridpoints)  "
          f"payload+margin {TORQUE_MARGIN}, acceleration limit {ACCELERATION_LIMIT} rad/s²")
    hdr = (f"{'robot':6} {'dt':>5} {'W':>4} {'N':>5} {'ours ms':>8} {'toppra ms':>9} {'speedup':>7} {'cpu x':>6} "
           f"{'T ours':>8} {'T toppra':>8} {'dT %':>7}  peak v/a/tau (dense): ours | toppra")
    print(hdr)
    for robot in args.robots:
        model = load_model(robot)
        retimer = Retimer(model)
        retimer.warmup()
        side = ToppraSide(model)
        for dt, n_wp, n_grid in itertools.product(args.dt, args.waypoints, args.gridpoints):
            r = run_case(robot, model, retimer, side, n_wp, n_grid, dt, args.repeat, args.interleave,
                         max(1, args.rounds))
            rows.append(r)
            po, pt = r["ours_dense_peak"], r["toppra_dense_peak"]
            print(f"{robot:6} {dt:5.3f} {n_wp:4d} {r['gridpoints']:5d} {r['ours_ms']:8.3f} {r['toppra_ms']:9.3f} "
                  f"{r['speedup']:7.2f} {r['speedup_cpu']:6.2f} {r['ours_duration']:8.4f} "
                  f"{r['toppra_duration']:8.4f} "
                  f"{r['duration_diff_pct']:+7.3f}  {po['velocity']:.4f}/{po['acceleration']:.4f}/"
                  f"{po['effort']:.4f} | {pt['velocity']:.4f}/{pt['acceleration']:.4f}/{pt['effort']:.4f}",
                  flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)
    worst = min(r["speedup"] for r in rows)
    print(json.dumps({"min_speedup": round(worst, 3),
                      "min_speedup_cpu": round(min(r["speedup_cpu"] for r in rows), 3),
                      "max_duration_diff_pct": round(max(r["duration_diff_pct"] for r in rows), 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
