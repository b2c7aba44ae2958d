"""``robot-dynamics casestudy``: a 6-axis arm carrying 15 kg along a 1.2 m straight line (空间直线插补).

The reference case: 200 path points, TOPP under torque limits with a safety margin of 0.9, jerk ≤ 50 rad/s³,
motors with a rated and a peak torque (rated = 2/3 of peak, the case's 120/180 N·m), against the
kinematic-only trapezoid at 3 rad/s² it replaced. Reproduced on the UR10 of example-robot-data, peak =
URDF effort limit. Three timings of the same joint path, side by side:

1. ``trapezoid``: kinematic only — constant path acceleration and speed, the largest with every joint's
   |qdd| ≤ 3 rad/s² and |qd| ≤ its velocity limit anywhere on the path (dynamics ignored);
2. ``topp_ra``: torque-limited TOPP-RA (|τ| ≤ margin · effort), no jerk limit;
3. ``full``: torque + jerk + rated/peak + margin
   (:func:`~..retiming.motor_limits.solve_within_motor_limits`).

For each: cycle time, peak and RMS torque against rated and peak, longest time above rated, max jerk
(finite differences of the 1 kHz accelerations), and the tool's tracking error in MuJoCo under PD with
gravity compensation (``laws.gravity_compensation``) and under PD with inverse-dynamics feedforward
(``laws.feedforward``), same gains.

Where the line is, and why: tool pointing down, 0.2 m below the base's mounting plane, 0.8 m in front of
it, from y = +0.6 to y = −0.6 m (reach 0.8 m in the middle, 1.0 m at the ends). With 15 kg there gravity
alone needs 0.90–1.11 × the shoulder's rated torque (0.81 × at most for the elbow): the heavy-reach regime
of the case, where a slow kinematic trapezoid keeps the shoulder loaded long enough to exceed its thermal
(RMS) budget — the case's overheating — while a time-optimal timing spends less time there. Closer lines
(x = 0.4 m: gravity 77 % of the shoulder's rated torque, the case's 79 %) leave the UR10's shoulder (330
N·m peak) so much headroom that the trapezoid breaks no motor rule; further out the elbow's gravity torque
alone exceeds its rated torque (x = 0.8 m, z = +0.2 m: 117 %) or the line leaves the workspace.
"""
from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

__all__ = ["case_model", "case_line", "case_motor_limits", "tool_speed_function", "kinematic_trapezoid",
           "scurve_baseline", "measure", "track", "configure_parser", "run"]

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


def tool_speed_function(model, frame: str = TOOL):
    """``speed(q, v)`` (P, n) × (P, n) → (P,): |J_v(q) v| of ``frame`` (m/s), J_v the linear rows of its
    LOCAL_WORLD_ALIGNED Jacobian (Pinocchio), for :func:`~..retiming.jerk.solve_jerk_limited`'s tool_speed."""
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics

    engine = PinocchioDynamics(model)

    def speed(q, v):
        return np.array([np.linalg.norm(engine.frame_jacobian(qk, frame)[:3] @ vk) for qk, vk in zip(q, v)])

    return speed


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


def _double_s(L, V, A, J):
    """Rest-to-rest double-S (7-segment) profile on [0, L] with |sd| ≤ V, |sdd| ≤ A, |sddd| ≤ J
    (Biagiotti & Melchiorri, *Trajectory Planning for Automatic Machines and Robots*, 2008, §3.4): the peak
    speed Vp ≤ V is the largest whose acceleration and deceleration phases fit in L (their length is
    Vp · Ta, Ta the phase duration). Returns (breakpoints (8,), jerks (7,)) of the piecewise-constant jerk."""
    def phase(vp):
        if vp * J >= A * A:
            tj = A / J
            return tj, tj + vp / A
        tj = math.sqrt(vp / J)
        return tj, 2 * tj

    tj, ta = phase(V)
    if V * ta <= L:
        vp = V
    else:
        lo, hi = 0.0, V
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if mid * phase(mid)[1] <= L:
                lo = mid
            else:
                hi = mid
        vp = lo
        tj, ta = phase(vp)
    tv = (L - vp * ta) / vp
    durs = [tj, ta - 2 * tj, tj, max(tv, 0.0), tj, ta - 2 * tj, tj]
    jerks = [J, 0.0, -J, 0.0, -J, 0.0, J]
    return np.concatenate(([0.0], np.cumsum(durs))), np.array(jerks)


def scurve_baseline(model, path, res, jerk_limit, torque_limit, dynamics, *, period: float = 1e-3,
                    rel_tol: float = 1e-3):
    """Post-smoothing baseline: a path-exact double-S s(t) built from a TOPP-RA result, then slowed down
    uniformly until every joint limit holds.

    Path limits from the TOPP-RA profile (``res``, a :class:`~robot_dynamics_ros.retiming.request.RetimeResult`): V = its
    largest sd, A = its largest |sdd|, and a path jerk J_s = min_j jerk_limit_j / max_s |q'_j(s)| (the
    term q' s⃛ of the joint jerk). The profile is then stretched in time by κ ≥ 1 (sd / κ, sdd / κ²,
    s⃛ / κ³), κ bisected to the smallest value at which velocity, torque (``dynamics``) and the jerk from
    finite differences of the 1 kHz accelerations hold — the same check as the other timings. Where the
    TOPP-RA profile stops inside the path (sd = 0 at a gridpoint), each part between the stops gets its
    own double-S (V, A, J_s from that part), rest to rest, one after the other.

    Returns:
        :class:`Timing` named ``scurve`` (info: the largest stretch, the parts, the first part's V, A, J_s).
    """
    seg = res.segments[0]
    stops = np.flatnonzero(seg.x[1:-1] <= 1e-9 * seg.x.max()) + 1
    cuts = np.concatenate(([0], stops, [seg.s.shape[0] - 1]))
    jl = np.broadcast_to(np.asarray(jerk_limit, float), (model.n,))
    parts = [_scurve_part(model, path, seg, a, b, jl, torque_limit, dynamics, period, rel_tol)
             for a, b in zip(cuts[:-1], cuts[1:])]
    offsets = np.concatenate(([0.0], np.cumsum([p[0] for p in parts])))

    def sampler(t):
        t = np.atleast_1d(np.asarray(t, float))
        k = np.clip(np.searchsorted(offsets, t, side="right") - 1, 0, len(parts) - 1)
        out = [np.empty((t.shape[0], model.n)) for _ in range(3)]
        for i in np.unique(k):
            sel = k == i
            for o, v in zip(out, parts[i][1](t[sel] - offsets[i])):
                o[sel] = v
        return tuple(out)

    return Timing("scurve", offsets[-1], sampler, info={"stretch": max(p[2] for p in parts), "parts": len(parts),
                                                        "path_limits": parts[0][3]})


def _scurve_part(model, path, seg, a, b, jl, torque_limit, dynamics, period, rel_tol):
    """(duration s, sampler(t) → q, qd, qdd, stretch, [V, A, J_s]) of the double-S between gridpoints a
    and b of the TOPP-RA segment ``seg`` (see :func:`scurve_baseline`)."""
    s_a, s_b = float(seg.s[a]), float(seg.s[b])
    L = s_b - s_a
    V = float(np.sqrt(seg.x[a:b + 1].max()))
    A = float(np.abs(seg.u[a:b]).max())
    s_chk = np.linspace(s_a, s_b, 2000)
    dq = path.evaluate(s_chk)[1]
    Js = float(np.min(jl / np.maximum(np.abs(dq).max(axis=0), 1e-12)))
    tb, jerks = _double_s(L, V, A, Js)
    # state at the breakpoints
    s0, v0, a0 = [0.0], [0.0], [0.0]
    for k in range(7):
        h = tb[k + 1] - tb[k]
        j = jerks[k]
        s0.append(s0[-1] + v0[-1] * h + a0[-1] * h ** 2 / 2 + j * h ** 3 / 6)
        v0.append(v0[-1] + a0[-1] * h + j * h ** 2 / 2)
        a0.append(a0[-1] + j * h)
    s0, v0, a0 = np.array(s0), np.array(v0), np.array(a0)
    T0 = float(tb[-1])

    def base(t):
        t = np.clip(t, 0.0, T0)
        k = np.clip(np.searchsorted(tb, t, side="right") - 1, 0, 6)
        h = t - tb[k]
        j = jerks[k]
        s = s0[k] + v0[k] * h + a0[k] * h ** 2 / 2 + j * h ** 3 / 6
        return (s_a + np.clip(s, 0.0, L), np.maximum(v0[k] + a0[k] * h + j * h ** 2 / 2, 0.0), a0[k] + j * h)

    def sampler_for(kappa):
        def sampler(t):
            s, sd, sdd = base(np.asarray(t, float) / kappa)
            sd, sdd = sd / kappa, sdd / kappa ** 2
            q, dq_, ddq_ = path.evaluate(s)
            return q, dq_ * sd[:, None], dq_ * sdd[:, None] + ddq_ * (sd ** 2)[:, None]
        return sampler

    def ok(kappa):
        T = T0 * kappa
        t = np.append(np.arange(0.0, T, period), T)
        q, qd, qdd = sampler_for(kappa)(t)
        if (np.abs(qd) > model.velocity_limit).any():
            return False
        if (np.abs(np.diff(qdd, axis=0) / np.diff(t)[:, None]) > jl).any():
            return False
        return not (np.abs(np.atleast_2d(dynamics.rnea(q, qd, qdd))) > torque_limit).any()

    lo, hi = 1.0, 1.0
    if not ok(1.0):
        while not ok(hi):
            lo, hi = hi, hi * 1.5
            if hi > 1e6:  # slower is not helping: a limit broken at rest (gravity at the limit)
                raise ValueError(f"S-curve baseline: no stretch meets the limits on s in [{s_a:.6g}, {s_b:.6g}]")
        while hi - lo > rel_tol * hi:
            mid = 0.5 * (lo + hi)
            if ok(mid):
                hi = mid
            else:
                lo = mid
    return T0 * hi, sampler_for(hi), hi, [V, A, Js]


def measure(t, q, qd, qdd, tau, limits, margin):
    """Motor figures (:func:`~..retiming.motor_limits.evaluate`) and the max jerk per joint (n,) from finite
    differences of qdd, with the arm at rest (qdd = 0) one period before and after: a timing that starts
    with a step in acceleration has that step counted."""
    from robot_dynamics_ros.retiming.motor_limits import evaluate

    rep = evaluate(t, tau, limits, margin=margin)
    h = float(t[1] - t[0])
    zero = np.zeros((1, qdd.shape[1]))
    padded = np.concatenate((zero, qdd, zero))
    tt = np.concatenate(([t[0] - h], t, [t[-1] + h]))
    jerk = np.abs(np.diff(padded, axis=0) / np.diff(tt)[:, None]).max(axis=0)
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
    parser.add_argument("--tool-speed", type=float, default=None, metavar="V",
                        help="limit on the tool's linear speed, m/s (full solution only; default none)")
    parser.add_argument("--plot", default="casestudy.png", help="figure file (PNG); 'none' (or '') for none")
    parser.add_argument("--no-sim", action="store_true", help="skip the MuJoCo tracking runs")


def run(args: argparse.Namespace) -> int:
    from robot_dynamics_tools.commands._args import check_output_path
    from robot_dynamics_ros.retiming.motor_limits import solve_within_motor_limits
    from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
    from robot_dynamics_ros.errors import UserError
    from robot_dynamics_ros.retiming.motor_limits import load_motor_limits
    from robot_dynamics_ros.retiming.request import RetimeOptions
    from robot_dynamics_ros.retiming.retimer import Retimer

    if not (0.0 < args.margin <= 1.0):
        raise UserError(f"--margin {args.margin}: must be in (0, 1]")
    if args.tool_speed is not None and not (args.tool_speed > 0 and math.isfinite(args.tool_speed)):
        raise UserError(f"--tool-speed {args.tool_speed}: must be a positive number of m/s")
    if not (args.jerk_limit > 0 and math.isfinite(args.jerk_limit)):
        raise UserError(f"--jerk-limit {args.jerk_limit}: must be a positive number of rad/s³")
    if args.plot in ("none", "None"):   # as identify's --plot none
        args.plot = ""
    if args.plot:
        check_output_path(args.plot, "--plot")
    model = case_model(args.payload)
    from robot_dynamics_ros import share

    limits = (load_motor_limits(model, share.resolve_config_file(args.motor_limits)) if args.motor_limits
              else case_motor_limits(model))
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
    speed_fn = tool_speed_function(model)
    tool_speed = None if args.tool_speed is None else (speed_fn, args.tool_speed)
    t0 = time.perf_counter()
    sol, _, lam, tl, solves = solve_within_motor_limits(model, seg.path, seg.s, seg.x, limits, margin=args.margin,
                                                        jerk_limit=args.jerk_limit, dynamics=engine,
                                                        tool_speed=tool_speed)
    full_ms = (time.perf_counter() - t0) * 1e3

    def full_sampler(t):
        return sol.sample(t)[4:7]

    timings.append(Timing("full", sol.duration, full_sampler, full_ms,
                          {"torque_limit_used": tl.tolist(), "lambda": lam, "solves": solves,
                           "slp_iterations": sol.iterations}))
    scurve = scurve_baseline(model, seg.path, res, args.jerk_limit, args.margin * model.effort_limit, engine)
    names = model.joint_names
    out = {"robot": "ur10", "payload_kg": args.payload, "tool_speed_limit": args.tool_speed,
           "line": {"start_m": list(LINE_START), "displacement_m": list(LINE_DISPLACEMENT), "points": args.points,
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
                 "max_jerk": float(jerk.max()),
                 "max_velocity_fraction": float((np.abs(qd) / model.velocity_limit).max()),
                 "max_tool_speed": float(speed_fn(q[::10], qd[::10]).max()),
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
    # the post-smoothing baseline the full solution is compared with (duration only)
    out["scurve_post_smoothing"] = {"cycle_s": scurve.duration, **scurve.info}
    lb, full_T = out["cases"]["topp_ra"]["cycle_s"], out["cases"]["full"]["cycle_s"]
    out["full_closer_to_topp_ra_than_to_scurve"] = bool(full_T - lb < scurve.duration - full_T)
    print(f"scurve     cycle {scurve.duration:7.3f} s  (path-exact double-S on s(t) from the TOPP-RA limits, "
          f"stretched ×{scurve.info['stretch']:.3f} until velocity, torque and jerk hold)")
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
