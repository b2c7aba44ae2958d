"""Benchmark: corners that use their path tolerance — our retiming vs MoveIt's TOTG at equal deviation.

Cases: Panda (7-DoF) and UR5 (6-DoF) from example-robot-data, W = 10 and 100 waypoints of bench_retiming's
smooth joint-space path (``retiming_cases.smooth_waypoints``, seed 0; the same generator), velocity + acceleration limits only (URDF
velocities, 10 rad/s²; no torque: TOTG has none), ``path_tolerance`` = TOTG's ``maxDeviation`` (default
1e-3 and 1e-2 rad). TOTG's deviation is Euclidean and ours the infinity norm (≤ Euclidean), so equal
values are fair to TOTG.

Printed per case, measured side by side in one run:
* duration of ours **before** (every waypoint a knot: ``JointPath.within_tolerance(cut_corners=False)``)
  and **after** (corners cut, the default), of TOTG (Kunz & Stilman 2012, built in /tmp by
  :mod:`robot_dynamics_testing.totg_peer`), and after / TOTG;
* ours at 10 000 gridpoints / ours at the default grid ("grid", the discretization's share);
* deviation: our reported bound ``max_path_deviation`` and the measured maximum over the 1 kHz output of
  the exact infinity-norm distance to every polyline segment (:mod:`robot_dynamics_testing.polyline`),
  and the same measure on TOTG's 1 kHz samples;
* limits: peak |qd| / V and |qdd| / A of our 1 kHz output (the exact qdd of the spline and timing) and of
  TOTG's (its getVelocity at 1 kHz, acceleration by central finite differences of that velocity);
* "TOTG ex": where TOTG's output overshoots a limit, TOTG again with its limits divided by its own peaks,
  repeated (≤ :data:`EXACT_ROUNDS` times) until no peak exceeds 1 + 1e-4 — what a user must do to get an
  output within the limits from it — and after / that duration ("after/ex"; nan if it never got there).

Run:  .venv/bin/python benchmarks/bench_corners.py [--tolerance 1e-3 1e-2] [--json out.json]
(skips TOTG with its reason when the compiler, Eigen or its source is missing.)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from robot_dynamics_ros.retiming.request import RetimeOptions
from robot_dynamics_ros.retiming.retimer import Retimer
from robot_dynamics_testing import totg_peer
from robot_dynamics_testing.corner_cases import corners_kept
from robot_dynamics_testing.polyline import max_polyline_distance
from robot_dynamics_testing.retiming_cases import load_model, smooth_waypoints

PERIOD = 1e-3  # s, output and TOTG sampling
EXACT_ROUNDS = 8  # TOTG runs with limits scaled down by its own overshoot


def peaks(qd, qdd, vlim, alim):
    return float((np.abs(qd) / vlim).max()), float((np.abs(qdd) / alim).max())


def ours(retimer, wp, tol, vlim, alim, gridpoints=None):
    res = retimer.retime(wp, options=RetimeOptions(path_tolerance=tol, sample_period=PERIOD, gridpoints=gridpoints))
    if not res.success:
        raise RuntimeError(res.message)
    v, a = peaks(res.qd, res.qdd, vlim, alim)
    return {"duration": float(res.duration), "bound": float(res.max_path_deviation),
            "measured": max_polyline_distance(res.q, wp), "v": v, "a": a, "gridpoints": int(res.gridpoints)}


def totg(wp, tol, vlim, alim):
    out = totg_peer.run_totg(wp, vlim, alim, tol, sample_period=PERIOD)
    if not out.valid:
        return {"duration": float("nan")}
    qdd = np.gradient(out.qd, out.t, axis=0)
    v, a = peaks(out.qd, qdd, vlim, alim)
    return {"duration": out.duration, "measured": max_polyline_distance(out.q, wp), "v": v, "a": a}


def totg_exact(wp, tol, vlim, alim, first):
    """TOTG with its velocity and acceleration limits divided by the peaks of its previous output until its
    1 kHz output stays within 1 + 1e-4 of the true limits: (duration, rounds), duration nan if it did not."""
    out, v, a = first, vlim.copy(), alim.copy()
    for rounds in range(EXACT_ROUNDS + 1):
        if "v" not in out:
            return float("nan"), rounds
        if out["v"] <= 1.0 + 1e-4 and out["a"] <= 1.0 + 1e-4:
            return out["duration"], rounds
        v, a = v / max(out["v"], 1.0), a / max(out["a"], 1.0)
        out = totg(wp, tol, v, a)
        if "v" in out:  # peaks against the true limits
            out["v"] *= float((v / vlim).max())
            out["a"] *= float((a / alim).max())
    return float("nan"), EXACT_ROUNDS


def run_case(robot, count, tol, have_totg):
    model = load_model(robot, payload=False)
    model.effort_limit = np.full(model.n, np.inf)  # velocity + acceleration only
    vlim, alim = model.velocity_limit.copy(), model.acceleration_limit.copy()
    retimer = Retimer(model)
    wp = smooth_waypoints(model, count)
    with corners_kept():
        before = ours(retimer, wp, tol, vlim, alim)
    after = ours(retimer, wp, tol, vlim, alim)
    dense = ours(retimer, wp, tol, vlim, alim, gridpoints=10_000)
    peer = totg(wp, tol, vlim, alim) if have_totg else {"duration": float("nan")}
    exact, rounds = totg_exact(wp, tol, vlim, alim, peer) if have_totg else (float("nan"), 0)
    return {"robot": robot, "waypoints": count, "tolerance": tol, "before": before, "after": after,
            "grid": after["duration"] / dense["duration"], "totg": peer,
            "after_over_totg": after["duration"] / peer["duration"], "totg_exact": exact,
            "totg_exact_rounds": rounds, "after_over_totg_exact": after["duration"] / exact}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tolerance", type=float, nargs="+", default=[1e-3, 1e-2])
    ap.add_argument("--waypoints", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--robots", nargs="+", default=["panda", "ur5"])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    why = totg_peer.available()
    if why is None:
        try:
            totg_peer.build()
        except RuntimeError as exc:
            why = str(exc)
    if why is not None:
        print(f"TOTG skipped: {why}")
    print(f"{'robot':<6} {'W':>4} {'tol':>6} | {'before s':>8} {'after s':>8} {'TOTG s':>8} {'after/TOTG':>10} "
          f"{'TOTG ex':>8} {'after/ex':>8} {'grid':>7} | {'bound':>9} {'ours dev':>9} {'TOTG dev':>9} | {'ours v,a':>13} {'TOTG v,a':>13}")
    rows = []
    for robot in args.robots:
        for count in args.waypoints:
            for tol in args.tolerance:
                r = run_case(robot, count, tol, why is None)
                rows.append(r)
                b, a, t = r["before"], r["after"], r["totg"]
                tv = f"{t['v']:.4f},{t['a']:.4f}" if "v" in t else "n/a"
                print(f"{robot:<6} {count:>4} {tol:>6.0e} | {b['duration']:>8.4f} {a['duration']:>8.4f} "
                      f"{t['duration']:>8.4f} {r['after_over_totg']:>10.4f} {r['totg_exact']:>8.4f} "
                      f"{r['after_over_totg_exact']:>8.4f} {r['grid'] - 1:>+7.2%} | "
                      f"{a['bound']:>9.3e} {a['measured']:>9.3e} {t.get('measured', float('nan')):>9.3e} | "
                      f"{a['v']:.4f},{a['a']:.4f} {tv:>13}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"totg_skipped": why, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
