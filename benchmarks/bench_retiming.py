"""Benchmark: our TOPP-RA retiming vs toppra (PyPI), toppra's compiled C++ core and a compiled floor, in one run.

Cases: Panda (7-DoF) and UR5 (6-DoF) from example-robot-data, W = 10/100/1000 waypoints of a smooth joint-space
path (no direction reversals), N = default (0: what a request without ``gridpoints`` gets)/1000/10 000 gridpoints
requested (ours adds gridpoints where the path turns, see ``path.TURN_PER_STAGE``; the peers get the same
gridpoints), velocity + acceleration (10 rad/s²) + torque limits with a payload and a 0.9 torque margin so that
the torque limit binds on part of the path.

Timed, per side:
* ours   — the WHOLE ``Retimer.retime``: spline, q/q'/q'' at the collocation points, torque coefficients from the
           batched in-package Newton–Euler, TOPP-RA solve, output sampling (t, q, qd, qdd, tau) at ``--dt``,
           checks; its solve step alone ("solve") from ``RetimeResult.timings``;
* toppra — ``SplineInterpolator`` through the same knots (waypoints and the points our path adds on their
           chords to stay within ``path_tolerance``) at the same s, velocity / acceleration /
           torque constraints (torque via Pinocchio ``rnea``, its documented usage), ``TOPPRA`` with the
           same gridpoints (seidel solver), ``compute_trajectory``, and sampling q, qd, qdd at the same
           ``--dt`` plus tau with Pinocchio at every sample (ours outputs tau too);
* toppra C++ — toppra's compiled core (github.com/hungpham2511/toppra ``cpp/src``, Seidel solver, TOPPRA
           algorithm; built into /tmp by :mod:`robot_dynamics_testing.toppra_cpp`, skipped with a line saying why
           when it cannot be built) on the same gridpoints with our q', q'' and a, b, c there (its velocity
           bound, acceleration and torque constraints, interpolation discretization): its solve alone, median of
           in-process repetitions ("C++ solve"); "C++ call" = its solve + the rest of our call (our call − our
           solve), i.e. our pipeline with its solver in place of ours;
* floor  — a compiled LP-free sweep (:func:`_floor_sweep`: one backward and one forward pass over the gridpoints,
           rows generated on the fly from q', q'' and a, b, c, explicit bounds, no LP, no stage-interior rows)
           plus our dynamics (a, b, c at the dynamics nodes and the rows: ``timings["constraints"]``) plus our
           output sampling (``timings["sampling"]``): the least any exact TOPP over these gridpoints must spend.
The sides run in blocks (ours × R/k, toppra × R/k, in k = ``--rounds`` rounds, default 5, so that
both sample the load drift of a shared machine alike; ``--interleave``: alternating call by call, where
each side evicts the other's caches); medians of the wall time ("ms") and of the thread CPU time (ratios "cpu x",
insensitive to other processes on a shared machine) are reported. Also printed: durations (ours, toppra,
toppra C++ from its x at the gridpoints) and the peak fraction of each limit on a 10× denser sampling of each
output (Pinocchio RNEA) — > 1 means the output overshoots a limit.

Run:  .venv/bin/python benchmarks/bench_retiming.py [--repeat 15] [--json out.json]
      .venv/bin/python benchmarks/bench_retiming.py --steps --waypoints 10 100 1000 --gridpoints 0 1000
      (``--steps``: only the table of where our call's time goes, :func:`steps`)
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
from numba import njit  # noqa: E402

from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics  # noqa: E402
from robot_dynamics_ros.model import RobotModel  # noqa: E402
from robot_dynamics_ros.retiming.request import RetimeOptions  # noqa: E402
from robot_dynamics_ros.retiming.retimer import Retimer  # noqa: E402
from robot_dynamics_ros.retiming.constraints import velocity_bound  # noqa: E402
from robot_dynamics_ros.retiming.topp_ra import stage_times  # noqa: E402
from robot_dynamics_ros.robots import ROBOTS  # noqa: E402
from robot_dynamics_testing import toppra_cpp  # noqa: E402

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


@njit(cache=True)
def _u_bounds(i, x, dq, ddq, a, b, c, alim, tlim):  # pragma: no cover - compiled
    """(lo, hi): the interval of u = sdd that the acceleration and torque rows at gridpoint i leave at x = sd²."""
    lo, hi = -np.inf, np.inf
    for j in range(dq.shape[1]):
        for al, rest, lim in ((dq[i, j], ddq[i, j] * x, alim[j]), (a[i, j], b[i, j] * x + c[i, j], tlim[j])):
            if al > 0.0:
                hi = min(hi, (lim - rest) / al)
                lo = max(lo, (-lim - rest) / al)
            elif al < 0.0:
                hi = min(hi, (-lim - rest) / al)
                lo = max(lo, (lim - rest) / al)
    return lo, hi


@njit(cache=True)
def _floor_sweep(s, dq, ddq, a, b, c, vlim, alim, tlim, xb, x):  # pragma: no cover - compiled
    """The floor of a TOPP over the gridpoints s (N,): a backward pass (x_i from x_{i+1} by the largest
    deceleration the rows at s_i allow at x_{i+1}, capped by the velocity rows) and a forward pass (x_{i+1} =
    min(xb_{i+1}, x_i + 2Δ u_max(x_i))), rows generated on the fly from q', q'' and a, b, c (N, n) at the
    gridpoints; no LP, no stage-interior rows. Fills xb (backward) and x (forward) (N,)."""
    n_grid, n = dq.shape
    xb[n_grid - 1] = 0.0
    for i in range(n_grid - 2, -1, -1):
        cap = np.inf
        for j in range(n):
            d2 = dq[i, j] * dq[i, j]
            if d2 > 0.0:
                cap = min(cap, vlim[j] * vlim[j] / d2)
        lo, _ = _u_bounds(i, xb[i + 1], dq, ddq, a, b, c, alim, tlim)
        xb[i] = min(cap, max(xb[i + 1] - 2.0 * (s[i + 1] - s[i]) * lo, 0.0))
    x[0] = 0.0
    for i in range(n_grid - 1):
        _, hi = _u_bounds(i, x[i], dq, ddq, a, b, c, alim, tlim)
        x[i + 1] = max(min(xb[i + 1], x[i] + 2.0 * (s[i + 1] - s[i]) * hi), 0.0)


def gridpoint_rows(retimer, opts, seg):
    """(s, q', q'', (a, b, c) at the gridpoints, vlim, alim, tlim) of a solved segment (our limits, scaled)."""
    vlim, alim, tlim = retimer.checks.limits(retimer.resolved_options(opts))
    _, dq, ddq = seg.path.evaluate(seg.s)
    abc = tuple(np.ascontiguousarray(v[0::2]) for v in seg.abc_grid)
    return seg.s, np.ascontiguousarray(dq), np.ascontiguousarray(ddq), abc, vlim, alim, tlim


def floor_ms(rows, repeat):
    """Median thread-CPU ms of :func:`_floor_sweep` on the gridpoint rows, and its duration."""
    s, dq, ddq, (a, b, c), vlim, alim, tlim = rows
    xb, x = np.empty(s.shape[0]), np.empty(s.shape[0])
    _floor_sweep(s, dq, ddq, a, b, c, vlim, alim, tlim, xb, x)
    cpu = []
    for _ in range(max(repeat, 5)):
        c0 = time.thread_time()
        _floor_sweep(s, dq, ddq, a, b, c, vlim, alim, tlim, xb, x)
        cpu.append(time.thread_time() - c0)
    return 1e3 * float(np.median(cpu)), float(stage_times(s, x)[-1])


def cpp_solve(exe, rows, repeat):
    """(median ms, duration s) of toppra's C++ core on the gridpoint rows, or (nan, nan) if it failed."""
    s, dq, ddq, abc, vlim, alim, tlim = rows
    status, med, _, x = toppra_cpp.solve(exe, s, velocity_bound(dq, vlim), dq, ddq, alim, abc, tlim,
                                         max(repeat, 5))
    if status != 0:
        return float("nan"), float("nan")
    return med, float(stage_times(s, x)[-1])


def dense_peaks(model, pm, data, q, qd, qdd, tlim):
    tau = np.array([pin.rnea(pm, data, q[k], qd[k], qdd[k]) for k in range(q.shape[0])])
    return {"velocity": float((np.abs(qd) / model.velocity_limit).max()),
            "acceleration": float((np.abs(qdd) / model.acceleration_limit).max()),
            "effort": float((np.abs(tau) / tlim).max())}


def run_case(robot, model, retimer, toppra_side, n_wp, n_grid, dt, repeat, interleave=False, rounds=5, exe=None):
    wp = smooth_waypoints(model, n_wp)
    opts = RetimeOptions(gridpoints=n_grid or None, torque_margin=TORQUE_MARGIN, sample_period=dt or None)
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
    t_ours, t_ta, c_ours, c_ta, parts = [], [], [], [], []

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
        r = retimer.retime(wp, options=opts)
        parts.append(r.timings)
        return r

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
    dense = RetimeOptions(gridpoints=n_grid or None, torque_margin=TORQUE_MARGIN, sample_period=(dt or 0.01) / 10)
    rd = retimer.retime(wp, options=dense)
    pm, data = toppra_side.pm, toppra_side.data
    ours_peak = dense_peaks(model, pm, data, rd.q, rd.qd, rd.qdd, toppra_side.tlim)
    td = np.linspace(0, traj.duration, rd.t.shape[0])
    ta_peak = dense_peaks(model, pm, data, traj(td), traj(td, 1), traj(td, 2), toppra_side.tlim)
    ms_ours, ms_ta = 1e3 * float(np.median(t_ours)), 1e3 * float(np.median(t_ta))
    cpu_ours, cpu_ta = 1e3 * float(np.median(c_ours)), 1e3 * float(np.median(c_ta))
    part = {k: float(np.median([p[k + "_cpu"] for p in parts])) for k in ("constraints", "solve", "sampling")}
    rows = gridpoint_rows(retimer, opts, seg)
    sweep, t_floor = floor_ms(rows, repeat)
    cpp, t_cpp = cpp_solve(exe, rows, repeat) if exe is not None else (float("nan"), float("nan"))
    floor = sweep + part["constraints"] + part["sampling"]
    return {"solve_ms": part["solve"], "cpp_solve_ms": cpp, "cpp_call_ms": cpu_ours - part["solve"] + cpp,
            "floor_ms": floor, "sweep_ms": sweep, "cpp_duration": t_cpp, "floor_duration": t_floor,
            "robot": robot, "waypoints": n_wp, "gridpoints": int(grid.shape[0]), "dt": dt,
            "ours_ms": ms_ours, "toppra_ms": ms_ta, "speedup": ms_ta / ms_ours,
            "ours_min_ms": 1e3 * min(t_ours), "toppra_min_ms": 1e3 * min(t_ta),
            "ours_cpu_ms": cpu_ours, "toppra_cpu_ms": cpu_ta, "speedup_cpu": cpu_ta / cpu_ours,
            "ours_duration": res.duration, "toppra_duration": float(traj.duration),
            "duration_diff_pct": 100.0 * (res.duration - traj.duration) / traj.duration,
            "ours_timings_ms": {k: round(v, 4) for k, v in res.timings.items()},
            "ours_dense_peak": ours_peak, "toppra_dense_peak": ta_peak}


def steps(robots, waypoints, gridpoints, dt, repeat) -> None:
    """Where our call's time goes: per case, thread-CPU medians over ``repeat`` warm calls of the whole call and
    of its steps (``RetimeResult.timings``: solve, constraints, sampling; path is wall time), of
    ``binding.tolerance_bound`` timed on the same result, and the rest (validation, merging, checks, Python)."""
    from robot_dynamics_ros.retiming.binding import tolerance_bound

    print("| case (gridpoints) | call | solve | constraints | sampling | path | `tolerance_bound` | rest |")
    print("|---|---|---|---|---|---|---|---|")
    for robot in robots:
        model = load_model(robot)
        retimer = Retimer(model)
        retimer.warmup()
        for n_wp, n_grid in itertools.product(waypoints, gridpoints):
            wp = smooth_waypoints(model, n_wp)
            opts = RetimeOptions(gridpoints=n_grid or None, torque_margin=TORQUE_MARGIN, sample_period=dt or None)
            vlim, alim, _ = retimer.checks.limits(retimer.resolved_options(opts))
            res = retimer.retime(wp, options=opts)
            rows = []
            for _ in range(repeat):
                c0 = time.thread_time()
                res = retimer.retime(wp, options=opts)
                call = time.thread_time() - c0
                c0 = time.thread_time()
                tolerance_bound(res.segments, vlim, alim, np.arange(n_wp), opts.path_tolerance)
                bound = time.thread_time() - c0
                t = res.timings
                rows.append((1e3 * call, t["solve_cpu"], t["constraints_cpu"], t["sampling_cpu"], t["path"], 1e3 * bound))
            m = np.median(np.array(rows), axis=0)
            print(f"| {robot} W={n_wp} ({res.gridpoints}) | " + " | ".join(f"{v:.2f}" for v in m)
                  + f" | {m[0] - m[1:].sum():.2f} |", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--dt", type=float, nargs="+", default=[0.01],
                    help="output sample periods to run, s; 0 = at the gridpoints (default: 0.01)")
    ap.add_argument("--robots", nargs="+", default=["panda", "ur5"])
    ap.add_argument("--waypoints", nargs="+", type=int, default=[10, 100, 1000])
    ap.add_argument("--gridpoints", nargs="+", type=int, default=[0, 1000, 10000],
                    help="gridpoints requested; 0 = the default of a request (default: 0 1000 10000)")
    ap.add_argument("--interleave", action="store_true", help="alternate ours / toppra call by call "
                    "(default: blocks of each side, --rounds rounds)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of (ours block, toppra block); each block "
                    "has ceil(repeat / rounds) calls (default 5)")
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--steps", action="store_true", help="only where our call's time goes: a table of its steps "
                    "(thread CPU medians of --repeat warm calls), no peers")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.steps:
        steps(args.robots, args.waypoints, args.gridpoints, args.dt[0], args.repeat)
        return 0
    rows = []
    print(f"MALLOC_TOP_PAD_={os.environ.get('MALLOC_TOP_PAD_')}  repeat={args.repeat}  dt={args.dt} s (0: gridpoints)  "
          f"payload+margin {TORQUE_MARGIN}, acceleration limit {ACCELERATION_LIMIT} rad/s²")
    exe, why = toppra_cpp.build()
    if exe is None:
        print(f"toppra C++ skipped: {why}")
    print("ms: median wall time of our whole call; solve, C++ solve, floor and every ratio but py/ours: median thread "
          "CPU time (C++call/ours, ours/floor: of our whole call)")
    hdr = (f"{'robot':6} {'dt':>5} {'W':>4} {'N':>5} {'ours ms':>8} {'solve':>7} {'C++ sol':>7} {'C++/sol':>7} "
           f"{'C++call':>7} {'py/ours':>7} {'cpu x':>6} {'floor':>6} {'ours/fl':>7} "
           f"{'T ours':>8} {'T py':>8} {'T C++':>8}  peak v/a/tau (dense): ours | toppra")
    print(hdr)
    for robot in args.robots:
        model = load_model(robot)
        retimer = Retimer(model)
        retimer.warmup()
        side = ToppraSide(model)
        for dt, n_wp, n_grid in itertools.product(args.dt, args.waypoints, args.gridpoints):
            r = run_case(robot, model, retimer, side, n_wp, n_grid, dt, args.repeat, args.interleave,
                         max(1, args.rounds), exe)
            rows.append(r)
            po, pt = r["ours_dense_peak"], r["toppra_dense_peak"]
            print(f"{robot:6} {dt:5.3f} {n_wp:4d} {r['gridpoints']:5d} {r['ours_ms']:8.3f} {r['solve_ms']:7.3f} "
                  f"{r['cpp_solve_ms']:7.3f} {r['cpp_solve_ms'] / r['solve_ms']:7.2f} "
                  f"{r['cpp_call_ms'] / r['ours_cpu_ms']:7.2f} {r['speedup']:7.2f} {r['speedup_cpu']:6.2f} "
                  f"{r['floor_ms']:6.3f} {r['ours_cpu_ms'] / r['floor_ms']:7.2f} {r['ours_duration']:8.4f} "
                  f"{r['toppra_duration']:8.4f} {r['cpp_duration']:8.4f}  {po['velocity']:.4f}/"
                  f"{po['acceleration']:.4f}/{po['effort']:.4f} | {pt['velocity']:.4f}/{pt['acceleration']:.4f}/"
                  f"{pt['effort']:.4f}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)
    worst = min(r["speedup"] for r in rows)
    print(json.dumps({"min_speedup": round(worst, 3),
                      "min_speedup_cpu": round(min(r["speedup_cpu"] for r in rows), 3),
                      "max_duration_diff_pct": round(max(r["duration_diff_pct"] for r in rows), 4),
                      "min_cpp_solve_over_solve": round(min(r["cpp_solve_ms"] / r["solve_ms"] for r in rows), 3),
                      "max_ours_over_floor": round(max(r["ours_cpu_ms"] / r["floor_ms"] for r in rows), 3),
                      "max_ours_peak": round(max(max(r["ours_dense_peak"].values()) for r in rows), 5)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
