"""Benchmark: the jerk-limited ("full") timing against its lower bound and against post-smoothing, and its cost.

Per path, in one run:
* ``topp_ra`` — torque-only TOPP-RA (``Retimer.retime``, margin 0.9): the lower bound of every timing with
  more limits on the same path;
* ``full``    — :func:`robot_dynamics_ros.retiming.jerk.solve_jerk_limited` from that result (torque +
  jerk, velocity; the case study adds the motor-limit loop, timed separately on the case);
* ``scurve``  — :func:`robot_dynamics_tools.commands.casestudy.scurve_baseline`, a path-exact double-S on
  s(t) from the TOPP-RA limits, stretched until every limit holds (the post-smoothing baseline).
Reported: durations, whether full is closer to topp_ra than to scurve, a lower bound of every jerk-limited
timing (per joint, the 1-D time-optimal double-S over its net displacement, and for a joint that turns
back along the path the two legs from rest to its first turn and from its last turn to rest, at zero
velocity at the turns, :func:`joint_bound`: where it is past the midpoint of topp_ra and scurve no timing can
be closer to topp_ra) and full / that bound, the time of each solve (medians of warm calls: 5 of TOPP-RA,
``--full-repeat`` of the full solve), both wall (``*_ms``) and CPU time of the calling thread
(``*_cpu_ms``, ``time.thread_time``; the solvers are single-threaded, and CPU time is what other processes
on a shared machine disturb least: one wall sample of either is easily doubled by them) and their ratios
(``ratio`` wall, ``cpu_ratio``), and an independent dense check of
the full output at 1 kHz (Pinocchio RNEA with the payload, jerk from finite differences of the returned
accelerations): the largest |value| / limit over velocity, torque and jerk (≤ 1 + 1e-3 passes).
* ``copp``    — COPP (copp-py 0.2.3, Rust + Clarabel; :mod:`robot_dynamics_testing.copp_peer`, pip-installed in
  /tmp on first use, never a package dependency; ``--no-copp`` skips it) on the same stations, path
  derivatives and limits: its TOPP2 profile, then ``topp3_lp`` rounds re-linearized at each answer until the
  duration gains < 1e-4. Reported: its duration after the first round and at convergence, its solve's CPU
  time / our full solve's (``copp_over_ours_cpu``), our duration / its (``ours_over_copp_s``), and the
  same dense check on its output (s(t) from its inverse time map, finite differences of q(t)).

Paths: the case study's line (UR10 + 15 kg, 200 points, jerk 50 rad/s³), then ``--paths`` random ones,
alternately UR10 straight tool lines (random start in front of the robot, random direction, 0.5–1.2 m,
100 points, jerk 50) and Panda smooth joint paths (6 waypoints, 40 gridpoints requested, jerk 500).
Paths where the torque-only solution stops inside the path are timed through the stop (rest to rest on each
part), and the S-curve baseline is one double-S per part.

Run:  .venv/bin/python benchmarks/bench_casestudy.py [--paths 100] [--json out.json] [--full-repeat 3] [--no-copp]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from robot_dynamics_tools.commands import casestudy as cs
from robot_dynamics_ros.retiming.motor_limits import solve_within_motor_limits  # noqa: E402
from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics  # noqa: E402
from robot_dynamics_ros.retiming.jerk import solve_jerk_limited  # noqa: E402
from robot_dynamics_ros.retiming.request import RetimeOptions  # noqa: E402
from robot_dynamics_ros.retiming.retimer import Retimer  # noqa: E402

MARGIN = 0.9


def _dense(pm, sol, model, tlim, jerk):
    from robot_dynamics_testing.jerk_cases import dense_check, dense_samples

    t, q, qd, qdd = dense_samples(sol)
    jfd, tau = dense_check(pm, t, q, qd, qdd)
    return max(float((np.abs(qd) / model.velocity_limit).max()), float((np.abs(tau) / tlim).max()),
               float(np.abs(jfd).max() / jerk))


#: x(T) / (J T³) of the farthest 1-D motion from rest (zero velocity and acceleration) to a point with zero
#: velocity in time T under |jerk| ≤ J alone: jerk +J until T (1 − 1/√2), then −J (Pontryagin: bang-bang
#: with one switch, placed where the velocity returns to zero at T)
_T1 = 1.0 - 1.0 / np.sqrt(2.0)
_REACH = _T1 ** 3 / 6 + _T1 ** 2 / 2 * (1 - _T1) + _T1 * (1 - _T1) ** 2 / 2 - (1 - _T1) ** 3 / 6


def joint_bound(model, path, jerk, samples=4001):
    """A lower bound of every rest-to-rest timing of the path under the velocity, acceleration and jerk
    limits, s: the largest over the joints of two 1-D bounds on the joint's own motion q_j(t) = q_j(s(t)):

    * the time-optimal double-S over the joint's net displacement (with the joint's own limits);
    * where q_j(s) has interior extrema (the joint goes out and comes back), q_j' = 0 there, so the joint is
      at zero velocity when it reaches the first extremum (distance D₁ from its start) and when it leaves the
      last one (distance D₂ from its end): the two legs take at least (D / (c J))^{1/3} each (the closed form
      above, c = ``_REACH``; velocity and acceleration limits dropped, so still a bound), and they do not
      overlap in time.

    Args: model (velocity_limit, acceleration_limit (n,)), path (``path(s)`` → (P, n), ``path.length``),
    jerk: rad/s³ (every joint); samples: points of q(s) searched for extrema (sign changes of Δq)."""
    q = path(np.linspace(0.0, path.length, samples))
    bound = 0.0
    for j in range(model.n):
        d = abs(float(q[-1, j] - q[0, j]))
        if d > 0.0:
            tb, _ = cs._double_s(d, float(model.velocity_limit[j]), float(model.acceleration_limit[j]), jerk)
            bound = max(bound, float(tb[-1]))
        step = np.diff(q[:, j])
        moving = np.flatnonzero(np.abs(step) > 1e-12 * max(float(np.abs(step).max()), 1e-300))
        sign = np.sign(step[moving])
        turn = moving[np.flatnonzero(sign[1:] != sign[:-1])] + 1  # samples where the direction changes
        if turn.size:
            # sampled extrema lie no farther from the start and end than the true ones: still a bound
            legs = (abs(float(q[turn[0], j] - q[0, j])), abs(float(q[-1, j] - q[turn[-1], j])))
            bound = max(bound, sum((D / (_REACH * jerk)) ** (1.0 / 3.0) for D in legs))
    return bound


def copp_side(copp, model, pm, seg, tlim, jerk, ours_cpu_ms, ours_s):
    """COPP on the same stations, derivatives and limits as our full solve (:mod:`robot_dynamics_testing.copp_peer`);
    its times against ours (thread CPU) and its output's dense peaks."""
    import pinocchio as pin

    from robot_dynamics_ros.retiming.jerk import third_derivative
    from robot_dynamics_testing import copp_peer

    q, dq, ddq = seg.path.evaluate(seg.s)
    data = pm.createData()
    jl = np.full(model.n, jerk)
    try:
        r = copp_peer.solve(copp, seg.s, q, dq, ddq, third_derivative(seg.path, seg.s),
                            lambda q_, qd_, qdd_: pin.rnea(pm, data, q_, qd_, qdd_), model.velocity_limit,
                            model.acceleration_limit, tlim, jl)
    except Exception as exc:  # noqa: BLE001 - a peer's failure is reported, not fatal
        return {"copp_failed": f"{type(exc).__name__}: {exc}"}
    peaks = copp_peer.dense_peaks(copp, r, seg.s, seg.path, pm, model.velocity_limit, tlim, jl)
    return {"copp_s": r.duration, "copp_first_s": r.first_duration, "copp_rounds": r.rounds,
            "copp_build_ms": r.build_ms, "copp_solve_cpu_ms": r.solve_cpu_ms,
            "copp_first_cpu_ms": r.first_solve_cpu_ms, "copp_over_ours_cpu": r.solve_cpu_ms / ours_cpu_ms,
            "ours_over_copp_s": ours_s / r.duration, "copp_peak": peaks}


def one(model, pm, waypoints, jerk, gridpoints=None, repeat=5, full_repeat=3, copp=None):
    retimer = Retimer(model)
    opts = RetimeOptions(torque_margin=MARGIN, gridpoints=gridpoints)
    res = retimer.retime(waypoints, options=opts)
    if not res.success or len(res.segments) != 1:
        return {"skipped": res.message if not res.success else "direction reversal (several segments)"}
    times, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.thread_time()
        retimer.retime(waypoints, options=opts)
        times.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.thread_time() - c0) * 1e3)
    seg = res.segments[0]
    ne = NewtonEulerDynamics(model)
    tlim = MARGIN * model.effort_limit
    full_times, full_cpu = [], []
    for _ in range(max(1, full_repeat)):
        t0, c0 = time.perf_counter(), time.thread_time()
        sol = solve_jerk_limited(seg.path, seg.s, seg.x, ne, velocity_limit=model.velocity_limit,
                                 acceleration_limit=model.acceleration_limit, torque_limit=tlim,
                                 jerk_limit=np.full(model.n, jerk))
        full_times.append((time.perf_counter() - t0) * 1e3)
        full_cpu.append((time.thread_time() - c0) * 1e3)
    full_ms = statistics.median(full_times)
    topp_cpu, full_cpu = statistics.median(cpu), statistics.median(full_cpu)
    row = {"gridpoints": int(seg.s.shape[0]), "topp_ra_s": res.duration, "full_s": sol.duration,
           "topp_ra_ms": statistics.median(times), "full_ms": full_ms, "ratio": full_ms / statistics.median(times),
           "topp_ra_cpu_ms": topp_cpu, "full_cpu_ms": full_cpu, "cpu_ratio": full_cpu / topp_cpu,
           "lps": sol.iterations, "rounds": sol.rounds, "parts": sol.parts,
           "dense_max_fraction": _dense(pm, sol, model, tlim, jerk)}
    sc = cs.scurve_baseline(model, seg.path, res, jerk, tlim, ne)  # one double-S per part between stops
    bound = joint_bound(model, seg.path, jerk)
    if copp is not None:
        row.update(copp_side(copp, model, pm, seg, tlim, jerk, full_cpu, sol.duration))
    return {**row, "topp_ra_s": res.duration, "full_s": sol.duration,
            "scurve_s": sc.duration, "closer": bool(sol.duration - res.duration < sc.duration - sol.duration),
            "joint_bound_s": bound, "full_over_bound": sol.duration / bound,
            # no timing can be closer to TOPP-RA than to the S-curve when the joint bound is past the midpoint
            "closer_impossible": bool(bound >= 0.5 * (res.duration + sc.duration))}


def random_ur10_line(model, rng):
    for _ in range(50):
        start = np.array([rng.uniform(0.4, 0.8), rng.uniform(-0.5, 0.5), rng.uniform(-0.3, 0.2)])
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        try:
            return cs.case_line(model, start=start, displacement=rng.uniform(0.5, 1.2) * direction, points=100).q
        except Exception:  # unreachable start or line: draw again
            continue
    raise RuntimeError("no reachable random line in 50 draws")


def _cpu_summary(done):
    """The CPU-time ratios full / torque-only of the case and (median, max) per family of random paths."""
    out = {}
    for family, rows in (("case", [r for r in done if r["path"] == "case study"]),
                         ("ur10_lines", [r for r in done if r["path"].startswith("ur10 line")]),
                         ("panda", [r for r in done if r["path"].startswith("panda")])):
        if rows:
            out[f"cpu_ratio_{family}_median"] = statistics.median(r["cpu_ratio"] for r in rows)
            out[f"cpu_ratio_{family}_max"] = max(r["cpu_ratio"] for r in rows)
            out[f"full_cpu_ms_{family}_median"] = statistics.median(r["full_cpu_ms"] for r in rows)
    return out


def _copp_summary(done):
    """Per family: COPP's solve CPU time / ours (median, min) and our duration / COPP's (median, max), its
    worst dense peak (velocity, torque, jerk) and how many paths it failed."""
    out = {}
    for family, prefix in (("case", "case study"), ("ur10_lines", "ur10 line"), ("panda", "panda")):
        rows = [r for r in done if r["path"].startswith(prefix)]
        ran = [r for r in rows if "copp_s" in r]
        if not ran:
            continue
        out[f"copp_{family}"] = {
            "ran": len(ran), "failed": sum("copp_failed" in r for r in rows),
            "cpu_ratio_median": statistics.median(r["copp_over_ours_cpu"] for r in ran),
            "cpu_ratio_min": min(r["copp_over_ours_cpu"] for r in ran),
            "ours_over_copp_s_median": statistics.median(r["ours_over_copp_s"] for r in ran),
            "ours_over_copp_s_max": max(r["ours_over_copp_s"] for r in ran),
            "copp_worst_peak": {k: max(r["copp_peak"][k] for r in ran) for k in ("velocity", "torque", "jerk")}}
    return out


def main(argv=None) -> int:
    from robot_dynamics_testing.jerk_cases import package_model, pinocchio_model, random_panda_waypoints

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--full-repeat", type=int, default=3, help="full solves per path (their median is timed)")
    ap.add_argument("--no-copp", action="store_true", help="skip COPP (else pip-installed beside ours on first use)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    copp = None
    if not args.no_copp:
        from robot_dynamics_testing import copp_peer

        try:
            copp = copp_peer.load()
        except RuntimeError as exc:
            print(f"COPP skipped: {exc}", file=sys.stderr)
    t_run = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    ur10, panda = cs.case_model(), package_model("panda")
    pm_ur10, pm_panda = pinocchio_model("ur10"), pinocchio_model("panda")
    Retimer(ur10).warmup()
    # one untimed full solve first: the first call loads HiGHS and compiles / loads the kernels
    warm = Retimer(ur10).retime(cs.case_line(ur10, points=30).q, options=RetimeOptions(torque_margin=MARGIN))
    ws = warm.segments[0]
    solve_jerk_limited(ws.path, ws.s, ws.x, NewtonEulerDynamics(ur10), velocity_limit=ur10.velocity_limit,
                       acceleration_limit=ur10.acceleration_limit, torque_limit=MARGIN * ur10.effort_limit,
                       jerk_limit=np.full(ur10.n, cs.JERK))
    rows = []
    line = cs.case_line(ur10)
    case = one(ur10, pm_ur10, line.q, cs.JERK, full_repeat=args.full_repeat, copp=copp)
    case["path"] = "case study"
    # the case's full solution with the motor-limit loop (what `robot-dynamics casestudy` runs)
    res = Retimer(ur10).retime(line.q, options=RetimeOptions(torque_margin=MARGIN))
    t0 = time.perf_counter()
    seg = res.segments[0]
    solve_within_motor_limits(ur10, seg.path, seg.s, seg.x, cs.case_motor_limits(ur10), margin=MARGIN,
                              jerk_limit=cs.JERK)
    case["full_with_motor_loop_ms"] = (time.perf_counter() - t0) * 1e3
    rows.append(case)
    print(json.dumps(case))
    for k in range(args.paths):
        if k % 2 == 0:
            row = one(ur10, pm_ur10, random_ur10_line(ur10, rng), cs.JERK, full_repeat=args.full_repeat, copp=copp)
            row["path"] = f"ur10 line {k}"
        else:
            row = one(panda, pm_panda, random_panda_waypoints(1000 + k), 500.0, gridpoints=40,
                      full_repeat=args.full_repeat, copp=copp)
            row["path"] = f"panda {k}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    done = [r for r in rows if "skipped" not in r]
    compared = [r for r in done if "scurve_s" in r]
    summary = {"paths": len(rows), "solved": len(done), "skipped": len(rows) - len(done),
               "through_stops": sum(r["parts"] > 1 for r in done), "compared_with_scurve": len(compared),
               "closer_to_topp_ra": sum(r["closer"] for r in compared),
               "closer_impossible_by_joint_bound": sum(r["closer_impossible"] for r in compared),
               "dense_pass": sum(r["dense_max_fraction"] <= 1 + 1e-3 for r in done),
               "worst_dense_fraction": max(r["dense_max_fraction"] for r in done),
               "median_full_over_topp_ra": statistics.median(r["full_s"] / r["topp_ra_s"] for r in done),
               "median_scurve_over_topp_ra": statistics.median(r["scurve_s"] / r["topp_ra_s"] for r in compared),
               "median_solve_ratio": statistics.median(r["ratio"] for r in done),
               "max_solve_ratio": max(r["ratio"] for r in done),
               "median_full_ms": statistics.median(r["full_ms"] for r in done),
               **_cpu_summary(done), **_copp_summary(done),
               "seconds": round(time.perf_counter() - t_run, 1)}
    print(json.dumps(summary))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
