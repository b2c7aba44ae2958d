"""``robot-dynamics casestudy``: a 6-axis arm carrying 15 kg along a 1.2 m straight line (空间直线插补).

The reference case: 200 path points, TOPP under torque limits with a safety margin of 0.9, jerk ≤ 50 rad/s³,
motors with a rated and a peak torque (rated = 2/3 of peak, the case's 120/180 N·m), against the
kinematic-only trapezoid at 3 rad/s² it replaced. Reproduced on the UR10 of example-robot-data, peak =
URDF effort limit. Three timings of the same joint path, side by side:

1. ``trapezoid``: kinematic only — constant path acceleration and speed, the largest with every joint's
   |qdd| ≤ 3 rad/s² and |qd| ≤ its velocity limit anywhere on the path (dynamics ignored);
2. ``topp_ra``: torque-limited TOPP-RA (|τ| ≤ margin · effort), no jerk limit;
3. ``full``: torque + jerk + rated/peak + margin (:func:`solve_full`).

For each: cycle time, peak and RMS torque against rated and peak, longest time above rated, max jerk
(finite differences of the 1 kHz accelerations), and the tool's tracking error in MuJoCo under PD with
gravity compensation (``laws.gravity_compensation``) and under PD with inverse-dynamics feedforward
(``laws.feedforward``), same gains.

Where the line is: tool pointing down at the height of the base (z = 0), 0.4 m in front of it, from
y = +0.6 to y = −0.6 m. With 15 kg there gravity alone takes 77 % of the shoulder's rated torque and 63 % of
the elbow's (the case: 95 N·m of 120, 79 %); further out, the elbow's gravity torque alone exceeds 2/3 of
its effort limit (at x = 0.6 m, z = 0.4 m: 127 %) and no timing can respect the rated torque.
"""
from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

__all__ = ["case_model", "case_line", "kinematic_trapezoid", "solve_full", "measure", "track", "configure_parser",
           "run"]

TOOL = "tool0"
PAYLOAD_KG = 15.0
PAYLOAD_COM = (0.0, 0.0, 0.05)  # m in tool0: the part's centre 5 cm beyond the flange
LINE_START = (0.8, 0.6, -0.2)  # m, base frame
LINE_DISPLACEMENT = (0.0, -1.2, 0.0)  # m
POINTS = 200
MARGIN = 0.9
JERK = 50.0  # rad/s³
RATED_FRACTION = 2.0 / 3.0
PEAK_DURATION = 2.0  # s
TRAPEZOID_ACC = 3.0  # rad/s²
#: elbow-up, wrist-down seed of the inverse kinematics (rad)
SEED = (0.6, -1.2, 1.6, -1.97, -1.57, 0.0)
#: MuJoCo tracking: PD bandwidth (rad/s) and damping ratio; gains Kp = ω² M_jj, Kd = 2 ζ ω M_jj with the
#: joint-space inertia diagonal at the start (each joint a critically damped 8 Hz loop, whatever its inertia:
#: the payload on the wrist_3 axis leaves that joint with ~1e-2 kg·m², too little for arm-sized gains)
BANDWIDTH = 2 * np.pi * 8.0
DAMPING_RATIO = 1.0


def case_model(payload_kg: float = PAYLOAD_KG):
    """The UR10 of example-robot-data with the payload (kg) at ``tool0``."""
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.robots import example_robot_data_dir

    model = RobotModel.from_urdf(example_robot_data_dir() / "ur_description/urdf/ur10_robot.urdf")
    return model.with_settings(payload=(TOOL, payload_kg, PAYLOAD_COM)) if payload_kg > 0 else model


def case_line(model, *, start=LINE_START, displacement=LINE_DISPLACEMENT, points: int = POINTS):
    """The case's straight tool line as joint path points (:class:`~..retiming.cartesian.CartesianLine`)."""
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
    from robot_dynamics_ros.retiming.cartesian import line_path, solve_pose

    engine = PinocchioDynamics(model)
    seed = np.array(SEED)
    down = engine.frame_placement(seed, TOOL)[:3, :3]
    q0 = solve_pose(engine, TOOL, seed, np.array(start, dtype=float), down)
    return line_path(engine, TOOL, q0, displacement=displacement, points=points)


def case_motor_limits(model, rated_fraction: float = RATED_FRACTION, peak_duration: float = PEAK_DURATION):
    """Rated = ``rated_fraction`` × URDF effort (= peak) for every joint, ``peak_duration`` s above rated."""
    from robot_dynamics_ros.retiming.motor_limits import MotorLimits

    peak = np.asarray(model.effort_limit, dtype=float)
    return MotorLimits(rated_fraction * peak, peak.copy(), np.full(peak.shape, float(peak_duration)),
                       np.ones(peak.shape, dtype=bool))


# ----------------------------------------------------------------------------------------------------------
class Timing:
    """A sampled timing of the path: ``sample(t)`` → q, qd, qdd (K, n); ``duration`` s."""

    def __init__(self, name, duration, sampler, solve_ms=0.0, info=None):
        self.name, self.duration, self._sampler, self.solve_ms = name, float(duration), sampler, solve_ms
        self.info = info or {}

    def sample(self, t):
        return self._sampler(np.clip(t, 0.0, self.duration))


def kinematic_trapezoid(path, velocity_limit, acceleration: float = TRAPEZOID_ACC, *, samples: int = 4000):
    """Trapezoidal s(t) with the largest constant sdd = A and sd ≤ V such that every joint's |qdd| ≤
    ``acceleration`` (rad/s²) and |qd| ≤ ``velocity_limit`` anywhere on ``path`` (checked on ``samples``
    points; found by bisection on A for V = the velocity bound). Dynamics are ignored (the case's original)."""
    s = np.linspace(0.0, path.length, samples)
    _, dq, ddq = path.evaluate(s)
    V = float(np.min(np.asarray(velocity_limit)[None, :] / np.maximum(np.abs(dq), 1e-12)))
    L = path.length

    def profile(A, Vc):
        ta = Vc / A
        if A * ta ** 2 > L:  # triangle
            ta = math.sqrt(L / A)
            Vc = A * ta
        tc = (L - A * ta ** 2) / Vc
        return ta, tc, Vc

    def peak_acc(A, Vc):
        ta, tc, Vc = profile(A, Vc)
        s_acc = np.minimum(s, L - s)  # on the accelerating / decelerating ramps sd² = 2 A (distance from end)
        sd2 = np.minimum(2 * A * s_acc, Vc ** 2)
        ramp = 2 * A * s_acc < Vc ** 2
        sdd = np.where(ramp, np.where(s < L / 2, A, -A), 0.0)
        return float(np.max(np.abs(dq * sdd[:, None] + ddq * sd2[:, None])))

    lo, hi = 0.0, 100.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if peak_acc(mid, V) <= acceleration:
            lo = mid
        else:
            hi = mid
    A = lo
    ta, tc, Vc = profile(A, V)
    T = 2 * ta + tc

    def sampler(t):
        t = np.asarray(t, dtype=float)
        sv = np.where(t < ta, 0.5 * A * t ** 2,
                      np.where(t < ta + tc, 0.5 * A * ta ** 2 + Vc * (t - ta), L - 0.5 * A * (T - t) ** 2))
        sd = np.where(t < ta, A * t, np.where(t < ta + tc, Vc, A * (T - t)))
        sdd = np.where(t < ta, A, np.where(t < ta + tc, 0.0, -A))
        q, dq_, ddq_ = path.evaluate(sv)
        return q, dq_ * sd[:, None], dq_ * sdd[:, None] + ddq_ * (sd ** 2)[:, None]

    return Timing("trapezoid", T, sampler, info={"path_acceleration": A, "path_speed": Vc})


def solve_full(model, path, s, x_ref, limits, *, margin: float = MARGIN, jerk_limit=JERK, period: float = 1e-3,
               steps: int = 6, dynamics=None, engine=None):
    """Torque + jerk + rated/peak + margin: the jerk-limited timing (:func:`~..retiming.jerk.solve_jerk_limited`)
    with per-joint torque limits lowered until the motor rules hold.

    The torque limit used by the solver is rated + λ (margin · peak − rated) for every joint (margin · peak
    where that is below rated), λ ∈ [0, 1] bisected: λ = 1 is the instantaneous limit; λ = 0 keeps |τ| ≤
    rated, so no interval above rated and RMS ≤ rated whatever the timing. Each candidate is sampled at
    ``period`` and checked with :func:`~..retiming.motor_limits.evaluate` (torques by ``engine``, batched
    ``rnea``; default ``dynamics``).

    Returns:
        (JerkSolution, MotorReport, λ, torque limit (n,), solves) — the fastest candidate found that passes.

    Raises:
        UserError: not even λ = 0 passes (gravity alone above rated somewhere on the path for too long).
    """
    from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
    from robot_dynamics_ros.errors import UserError
    from robot_dynamics_ros.retiming.jerk import solve_jerk_limited
    from robot_dynamics_ros.retiming.motor_limits import evaluate

    dynamics = dynamics or NewtonEulerDynamics(model)
    engine = engine or dynamics
    cap = margin * limits.peak
    base = np.minimum(limits.rated, cap)
    jl = np.broadcast_to(np.asarray(jerk_limit, dtype=float), (model.n,))

    def attempt(lam):
        tl = base + lam * (cap - base)
        sol = solve_jerk_limited(path, s, x_ref, dynamics, velocity_limit=model.velocity_limit,
                                 acceleration_limit=model.acceleration_limit, torque_limit=tl, jerk_limit=jl)
        t = np.append(np.arange(0.0, sol.duration, period), sol.duration)
        _, _, _, _, q, qd, qdd, _ = sol.sample(t)
        tau = np.atleast_2d(engine.rnea(q, qd, qdd))
        return sol, evaluate(t, tau, limits, margin=margin), tl

    solves = 1
    sol, rep, tl = attempt(1.0)
    if rep.ok:
        return sol, rep, 1.0, tl, solves
    best = None
    lo, hi = 0.0, 1.0
    for k in range(steps):
        lam = lo if k == 0 else 0.5 * (lo + hi)
        cand = attempt(lam)
        solves += 1
        if cand[1].ok:
            best = (*cand, lam)
            lo = lam
        elif k == 0:
            raise UserError("casestudy: even |τ| ≤ rated everywhere breaks the motor limits (gravity alone is "
                            "above rated too long); move the line closer to the base")
        else:
            hi = lam
    sol, rep, tl, lam = best
    return sol, rep, lam, tl, solves


def measure(t, q, qd, qdd, tau, limits, margin):
    """Figures of one sampled timing: peak/RMS torque, time above rated, binding limit, max jerk (finite
    differences of qdd), peak velocity fraction."""
    from robot_dynamics_ros.retiming.motor_limits import evaluate

    rep = evaluate(t, tau, limits, margin=margin)
    jerk = np.abs(np.diff(qdd, axis=0) / np.diff(t)[:, None]).max(axis=0)
    return rep, jerk


def track(model, timing, *, feedforward: bool, period: float = 1e-3, settle: float = 0.2):
    """Run ``timing`` in MuJoCo (1 kHz, efforts clamped at the URDF limits) under PD + gravity compensation
    or PD + inverse-dynamics feedforward; returns the largest tool position error (m) over the motion and
    ``settle`` s after it."""
    from robot_dynamics_ros.control import laws
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
    from robot_dynamics_ros.sim.mujoco_sim import MujocoSim

    engine = PinocchioDynamics(model)
    sim = MujocoSim(model, timestep=period)
    t = np.arange(0.0, timing.duration + settle, period)
    q_d, qd_d, qdd_d = timing.sample(t)
    sim.reset(q_d[0])
    Mjj = np.diag(engine.mass_matrix(q_d[0]))
    kp, kd = BANDWIDTH ** 2 * Mjj, 2 * DAMPING_RATIO * BANDWIDTH * Mjj
    p_d = np.array([engine.frame_placement(qk, TOOL)[:3, 3] for qk in q_d])
    err = 0.0
    for k in range(t.shape[0] - 1):
        q, qd = sim.q, sim.qd
        pd = kp * (q_d[k] - q) + kd * (qd_d[k] - qd)
        if feedforward:
            tau = laws.feedforward(engine, q_d[k], qd_d[k], qdd_d[k]) + pd
        else:
            tau = laws.gravity_compensation(engine, q) + pd
        sim.set_effort(tau)
        sim.step()
        p = engine.frame_placement(sim.q, TOOL)[:3, 3]
        err = max(err, float(np.linalg.norm(p - p_d[k + 1])))
    return err


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--payload", type=float, default=PAYLOAD_KG, help="payload at tool0, kg (15)")
    parser.add_argument("--points", type=int, default=POINTS, help="path points on the line (200)")
    parser.add_argument("--margin", type=float, default=MARGIN, help="fraction of the peak torque (0.9)")
    parser.add_argument("--jerk-limit", type=float, default=JERK, help="rad/s³ for every joint (50)")
    parser.add_argument("--motor-limits", default=None,
                        help="motor_limits.yaml (rated_torque, peak_torque, peak_duration per joint); default "
                             "rated = 2/3 of the URDF effort, peak = effort, 2 s")
    parser.add_argument("--plot", default="casestudy.png", help="figure file (PNG); '' for none")
    parser.add_argument("--no-sim", action="store_true", help="skip the MuJoCo tracking runs")


def run(args: argparse.Namespace) -> int:
    from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
    from robot_dynamics_ros.errors import UserError
    from robot_dynamics_ros.retiming.motor_limits import load_motor_limits
    from robot_dynamics_ros.retiming.retimer import RetimeOptions, Retimer

    if not (0.0 < args.margin <= 1.0):
        raise UserError(f"--margin {args.margin}: must be in (0, 1]")
    if not (args.jerk_limit > 0 and math.isfinite(args.jerk_limit)):
        raise UserError(f"--jerk-limit {args.jerk_limit}: must be a positive number of rad/s³")
    model = case_model(args.payload)
    limits = (load_motor_limits(model, args.motor_limits) if args.motor_limits else case_motor_limits(model))
    engine = NewtonEulerDynamics(model)  # batched RNEA for the 1 kHz torque figures
    line = case_line(model, points=args.points)
    retimer = Retimer(model)
    retimer.warmup()
    opts = RetimeOptions(torque_margin=args.margin)
    t0 = time.perf_counter()
    res = retimer.retime(line.q, options=opts)
    topp_ms = (time.perf_counter() - t0) * 1e3
    if not res.success:
        raise UserError(f"casestudy: torque-limited TOPP-RA failed: {res.message}")
    seg = res.segments[0]
    from robot_dynamics_ros.retiming.sampling import sample_joint_trajectory

    def topp_sampler(t):
        return sample_joint_trajectory(seg.path, seg.s, seg.x, seg.u, seg.t_grid, np.asarray(t, dtype=float))

    timings = [kinematic_trapezoid(seg.path, model.velocity_limit)]
    timings.append(Timing("topp_ra", res.duration, topp_sampler, topp_ms))
    t0 = time.perf_counter()
    sol, _, lam, tl, solves = solve_full(model, seg.path, seg.s, seg.x, limits, margin=args.margin,
                                         jerk_limit=args.jerk_limit, dynamics=engine)
    full_ms = (time.perf_counter() - t0) * 1e3

    def full_sampler(t):
        return sol.sample(t)[4:7]

    timings.append(Timing("full", sol.duration, full_sampler, full_ms,
                          {"torque_limit_used": tl.tolist(), "lambda": lam, "solves": solves,
                           "slp_iterations": sol.iterations}))
    names = model.joint_names
    out = {"robot": "ur10", "payload_kg": args.payload, "line": {"start_m": list(LINE_START),
           "displacement_m": list(LINE_DISPLACEMENT), "points": args.points,
           "deviation_m": line.deviation}, "margin": args.margin, "jerk_limit": args.jerk_limit,
           "rated": dict(zip(names, limits.rated.tolist())), "peak": dict(zip(names, limits.peak.tolist())),
           "peak_duration": dict(zip(names, limits.peak_duration.tolist())), "cases": {}}
    curves = {}
    for tm in timings:
        t = np.append(np.arange(0.0, tm.duration, 1e-3), tm.duration)
        q, qd, qdd = tm.sample(t)
        tau = np.atleast_2d(engine.rnea(q, qd, qdd))
        rep, jerk = measure(t, q, qd, qdd, tau, limits, args.margin)
        entry = {"cycle_s": tm.duration, "solve_ms": tm.solve_ms, "motor_ok": rep.ok,
                 "max_jerk": float(jerk.max()), "max_velocity_fraction": float((np.abs(qd) / model.velocity_limit).max()),
                 "joints": rep.as_dict(names), **tm.info}
        for j, name in enumerate(names):
            entry["joints"][name]["peak_over_rated"] = float(rep.peak[j] / limits.rated[j])
            entry["joints"][name]["peak_over_peak"] = float(rep.peak[j] / limits.peak[j])
            entry["joints"][name]["max_jerk"] = float(jerk[j])
        if not args.no_sim:
            entry["tracking_error_m"] = {"pd": track(model, tm, feedforward=False),
                                         "feedforward_pd": track(model, tm, feedforward=True)}
        out["cases"][tm.name] = entry
        curves[tm.name] = (t, tau, qdd)
        print(f"{tm.name:10s} cycle {tm.duration:7.3f} s  motor limits {'ok' if rep.ok else 'VIOLATED'}  "
              f"max jerk {jerk.max():10.1f} rad/s³  shoulder peak {rep.peak[1]:6.1f} rms {rep.rms[1]:6.1f} "
              f"above rated {rep.longest_above_rated[1]:5.2f} s  elbow peak {rep.peak[2]:6.1f} rms {rep.rms[2]:6.1f}"
              + (f"  tool error PD {entry['tracking_error_m']['pd'] * 1e3:6.2f} mm, FF+PD "
                 f"{entry['tracking_error_m']['feedforward_pd'] * 1e3:6.2f} mm" if not args.no_sim else ""))
    if args.plot:
        _plot(args.plot, curves, limits, args.margin, args.jerk_limit, out)
        out["plot"] = args.plot
    print(json.dumps(out))
    return 0


def _plot(path, curves, limits, margin, jerk_limit, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"trapezoid": "tab:red", "topp_ra": "tab:orange", "full": "tab:green"}
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for ax, j, title in ((axes[0, 0], 1, "shoulder_lift torque"), (axes[0, 1], 2, "elbow torque")):
        for name, (t, tau, _) in curves.items():
            ax.plot(t, np.abs(tau[:, j]), color=colors[name],
                    label=f"{name} ({out['cases'][name]['cycle_s']:.2f} s)")
        ax.axhline(limits.rated[j], color="k", ls="--", lw=1, label="rated")
        ax.axhline(margin * limits.peak[j], color="k", ls=":", lw=1, label=f"{margin} × peak")
        ax.set_title(f"|τ| {title} (N·m)")
        ax.set_xlabel("t (s)")
        ax.legend(fontsize=8)
    ax = axes[1, 0]
    for name, (t, _, qdd) in curves.items():
        ax.semilogy(t[1:], np.maximum(np.abs(np.diff(qdd, axis=0) / np.diff(t)[:, None]).max(axis=1), 1e-3),
                    color=colors[name], lw=0.8, label=name)
    ax.axhline(jerk_limit, color="k", ls="--", lw=1, label=f"{jerk_limit:g} rad/s³")
    ax.set_title("max joint jerk (rad/s³, finite differences)")
    ax.set_xlabel("t (s)")
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    names = list(out["cases"])
    cyc = [out["cases"][n]["cycle_s"] for n in names]
    ax.bar(names, cyc, color=[colors[n] for n in names])
    for k, n in enumerate(names):
        e = out["cases"][n]
        text = "motor ok" if e["motor_ok"] else "motor VIOLATED"
        if "tracking_error_m" in e:
            text += (f"\nPD {e['tracking_error_m']['pd'] * 1e3:.1f} mm\nFF+PD "
                     f"{e['tracking_error_m']['feedforward_pd'] * 1e3:.2f} mm")
        ax.text(k, cyc[k], text, ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, max(cyc) * 1.4)
    ax.set_title("cycle time (s), motor limits, tool tracking error")
    fig.suptitle("UR10 + 15 kg, 1.2 m line, 200 points, margin 0.9, jerk ≤ 50 rad/s³, rated = 2/3 peak")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
