"""``robot-dynamics push``: a known push on a moving arm in MuJoCo, seen by the momentum observer.

The scenario, for a real arm (Panda by default):

1. a round-trip path through waypoints around the robot's demo pose, retimed by our TOPP-RA at
   ``velocity_scale`` of the velocity limits and ``torque_margin`` of the effort limits, sampled at the
   1 kHz control period;
2. the arm follows it in MuJoCo (the plant: the same URDF, with its joint damping) under
   computed-torque control (the package's control law, :func:`~robot_dynamics_ros.control.laws.computed_torque`),
   1 ms zero-order hold;
3. the generalized-momentum observer (:mod:`robot_dynamics_ros.control.momentum_observer`) runs on the
   sampled positions, velocities and the joint torque the drives applied, with URDF friction (Coulomb
   ramp of ``coulomb_velocity`` and the collision threshold widened by the friction band below it, as the
   observer node);
4. **contact-free run**: ``quiet`` seconds of the same motion back and forth; every collision declared is a
   false collision;
5. **push**: one more pass, and a force of ``force`` N on the centre of mass of ``link`` for
   ``push_duration`` s, starting where the arm moves fastest, fixed in the world frame along the direction
   the joints feel most at its onset (the first left singular vector of the point's Jacobian). The applied joint torque Jᵀf comes from MuJoCo's own Jacobian of that point
   (independent of the observer's Pinocchio model).

Reported (last stdout line, JSON): ``detection_delay_ms`` (first collision flag after the force's onset),
``estimate_error_ratio`` (max |r − Jᵀf| / max |Jᵀf| from ``settle`` observer time constants after onset to
the end of the push), ``filtered_error_ratio`` (against Jᵀf through the observer's ideal first-order
low-pass, over the whole push: what the observer is designed to output), ``false_collisions``,
``peak_velocity_fraction`` of the trajectory, the thresholds and the largest contact-free residual; a PNG
of applied vs estimated external torque with the detection instant.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from robot_dynamics_ros.errors import UserError

__all__ = ["configure_parser", "push", "run"]

_DT = 0.001


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.epilog = ("exit status: 0 when the summary's pass is true (detected within 20 ms, estimate error ≤ 10 %, "
                "no false collision, trajectory at ≥ 80 % of the velocity limits), 2 when the scenario ran but "
                "missed one, 1 on an error")
    p.add_argument("--urdf", default="panda", help="URDF file or bundled robot name (default panda)")
    p.add_argument("--link", default=None, help="link pushed (default: the Panda forearm panda_link5, else "
                   "the child link of the middle joint)")
    p.add_argument("--force", type=float, default=30.0, help="push force, N (default 30)")
    p.add_argument("--push-duration", type=float, default=0.3, help="s (default 0.3)")
    p.add_argument("--quiet", type=float, default=60.0, help="contact-free motion before the push, s (default 60)")
    p.add_argument("--gain", type=float, default=100.0, help="observer gain K_O, 1/s (default 100: 10 ms)")
    p.add_argument("--threshold", type=float, default=None,
                   help="collision threshold, N·m, every joint (default: 5 %% of the effort limit)")
    p.add_argument("--min-duration", type=float, default=0.002, help="collision minimum duration, s")
    p.add_argument("--velocity-scale", type=float, default=1.0,
                   help="fraction (0, 1] of the velocity limits the retimed motion may use (default 1)")
    p.add_argument("--torque-margin", type=float, default=0.8,
                   help="fraction (0, 1] of the effort limits the retimed motion may use (default 0.8)")
    p.add_argument("--out", default="out/push", help="output directory for the PNG")
    p.add_argument("--json", action="store_true", help="print only the JSON summary")


def _plan(model, entry, velocity_scale, torque_margin):
    from robot_dynamics_tools.commands.track import default_waypoints
    from robot_dynamics_ros.retiming.request import RetimeOptions
    from robot_dynamics_ros.retiming.retimer import Retimer

    W = default_waypoints(model, entry)
    res = Retimer(model).retime(W, options=RetimeOptions(velocity_scale=velocity_scale,
                                                         torque_margin=torque_margin, sample_period=_DT))
    if not res.success:
        raise UserError(f"push: retiming the path failed: {res.message}")
    return res


def push(urdf="panda", *, link=None, force=30.0, push_duration=0.3, quiet=60.0, gain=100.0, threshold=None,
         min_duration=0.002, velocity_scale=1.0, torque_margin=0.8, settle=3.0, out=None) -> dict:
    """Run the scenario (module docstring) and return its summary (the JSON fields).

    Raises:
        UserError: unknown robot or link, a path the retiming cannot time, bad numbers.
    """
    from robot_dynamics_ros import robots
    from robot_dynamics_ros.control import laws
    from robot_dynamics_ros.control.momentum_observer import (DEFAULT_COULOMB_VELOCITY, CollisionDetector,
                                                              MomentumObserver)
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.sim.mujoco_sim import MujocoSim

    for name, v, lo in (("force", force, 0.0), ("push_duration", push_duration, _DT), ("quiet", quiet, 0.0),
                        ("gain", gain, 1e-6), ("min_duration", min_duration, 0.0)):
        if not (np.isfinite(v) and v >= lo):
            raise UserError(f"push: {name}={v} must be a number ≥ {lo}")
    entry = robots.resolve(urdf)
    model = RobotModel.from_urdf(entry.path, held_joints=entry.held_joints or None)
    engine = PinocchioDynamics(model)
    plan = _plan(model, entry, velocity_scale, torque_margin)
    vfrac = np.abs(plan.qd) / model.velocity_limit
    if link is None:
        link = "panda_link5" if "panda_link5" in model.description.links else \
            model.description.joints[model.joint_names[model.n // 2]].child
    if link not in model.description.links:
        raise UserError(f"push: link {link!r} is not a link of {model.description.name}")

    sim = MujocoSim(model, timestep=_DT)
    sim.reset(plan.q[0])
    try:
        sim.link_jacobian(link)
    except ValueError as exc:
        raise UserError(f"push: {exc}") from None
    obs = MomentumObserver(engine, gain, friction=True, coulomb_velocity=DEFAULT_COULOMB_VELOCITY)
    thr = (0.05 * model.effort_limit if threshold is None
           else np.full(model.n, float(threshold)))
    # the friction band: a joint slower than v_c has its threshold widened by its Coulomb friction
    det = CollisionDetector(model.n, thr, min_duration=min_duration, friction_band=model.friction,
                            band_velocity=DEFAULT_COULOMB_VELOCITY)
    kp, kd = 30.0 ** 2, 2 * 30.0  # computed-torque bandwidth 30 rad/s, critically damped

    K = len(plan.t)
    n_quiet = int(np.ceil(quiet / (plan.t[-1] + _DT))) if quiet > 0 else 0
    k_fast = int(np.argmax(vfrac.max(axis=1)))
    k_on = max(0, min(K - int(push_duration / _DT) - 1, k_fast - int(0.5 * push_duration / _DT)))
    k_off = k_on + int(round(push_duration / _DT))
    t = 0.0
    false_collisions = 0
    quiet_peak = 0.0
    rec_t, rec_r, rec_e, rec_flag = [], [], [], []
    ext = np.zeros(model.n)
    obs_time = 0.0
    for rep in range(n_quiet + 1):
        pushing = rep == n_quiet
        forward = rep % 2 == 0  # back and forth: the reversed samples are the same path at rest ends
        order = range(K) if forward else range(K - 1, -1, -1)
        sign = 1.0 if forward else -1.0
        for i, k in enumerate(order):
            q, qd = sim.q, sim.qd
            tau = laws.computed_torque(engine, q, qd, plan.q[k], sign * plan.qd[k], plan.qdd[k],
                                       np.full(model.n, kp), np.full(model.n, kd))
            sim.set_effort(tau)
            t0 = time.perf_counter()
            r = obs.update(t, q, qd, sim.effort)
            obs_time += time.perf_counter() - t0
            state = det.update(t, r, qd)
            if pushing:
                rec_t.append(t)
                rec_r.append(r.copy())
                rec_e.append(ext)
                rec_flag.append(state.collision)
            else:
                false_collisions += int(state.onset)
                if t > settle / gain:
                    quiet_peak = max(quiet_peak, float(np.abs(r).max()))
            if pushing and k_on <= i < k_off:
                if i == k_on:  # the direction the joints feel most: the first left singular vector of J
                    push_dir = np.linalg.svd(sim.link_jacobian(link))[0][:, 0]
                ext = sim.push(link, force * push_dir)  # felt over the interval that ends at the next sample
            else:
                ext = sim.push(None)
            sim.step()
            t += _DT
    T, R, E, F = np.array(rec_t), np.array(rec_r), np.array(rec_e), np.array(rec_flag)
    t_on = T[k_on + 1]  # first sample whose interval carried the force
    t_off = T[min(k_off, len(T) - 1)]
    peak = float(np.abs(E).max()) if len(E) else 0.0
    win = (T >= t_on + settle / gain) & (T <= t_off)
    err_ratio = float(np.abs(R[win] - E[win]).max() / peak) if peak > 0 and win.any() else float("nan")
    # the observer's ideal output: Jᵀf through backward-Euler first order (its discrete design), over the push
    a = 1.0 / (1.0 + gain * _DT)
    filt = np.zeros_like(E)
    for k in range(1, len(E)):
        filt[k] = a * filt[k - 1] + (1 - a) * E[k]
    pw = (T >= t_on) & (T <= t_off)
    filt_ratio = float(np.abs(R[pw] - filt[pw]).max() / peak) if peak > 0 else float("nan")
    onset_idx = np.nonzero(F & (T >= t_on - 1e-9))[0]
    # rounded to 1 ns: the sample times are sums of the step, so the difference carries float noise
    delay_ms = round(float((T[onset_idx[0]] - t_on) * 1e3), 6) if len(onset_idx) else None
    false_collisions += int(np.any(F & (T < t_on - 1e-9)))
    summary = {
        "robot": entry.name, "link": link, "force_N": force, "push_duration_s": push_duration,
        "observer_gain": gain, "time_constant_ms": 1e3 / gain,
        "threshold_Nm": [float(x) for x in thr], "min_duration_ms": min_duration * 1e3,
        "peak_velocity_fraction": float(vfrac.max()), "trajectory_duration_s": float(plan.t[-1]),
        "push_onset_s": float(t_on), "peak_external_torque_Nm": peak,
        "detection_delay_ms": delay_ms, "estimate_error_ratio": err_ratio,
        "filtered_error_ratio": filt_ratio, "settle_time_constants": settle,
        "contact_free_s": float(n_quiet * (plan.t[-1] + _DT)), "false_collisions": int(false_collisions),
        "contact_free_max_residual_Nm": quiet_peak,
        "observer_step_us": obs_time / max(1, (n_quiet + 1) * K) * 1e6,
    }
    summary["pass"] = bool(delay_ms is not None and delay_ms <= 20.0 and err_ratio <= 0.1
                           and false_collisions == 0 and summary["peak_velocity_fraction"] >= 0.8)
    if out:
        summary["plot"] = _plot(Path(out), T, R, E, filt, t_on, t_off, delay_ms, model.joint_names)
    return summary


def _plot(out: Path, T, R, E, filt, t_on, t_off, delay_ms, names) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    sel = (T >= t_on - 0.1) & (T <= t_off + 0.15)
    joints = np.argsort(-np.abs(E).max(axis=0))[:3]
    fig, axes = plt.subplots(len(joints), 1, figsize=(9, 2.4 * len(joints)), sharex=True)
    for ax, j in zip(np.atleast_1d(axes), joints):
        ax.plot(T[sel], E[sel, j], "k-", lw=2, label="applied Jᵀf")
        ax.plot(T[sel], filt[sel, j], "k:", lw=1, label="Jᵀf low-passed (ideal observer)")
        ax.plot(T[sel], R[sel, j], "C1-", lw=1.2, label="estimated τ_ext (observer)")
        ax.axvspan(t_on, t_off, color="0.9")
        if delay_ms is not None:
            ax.axvline(t_on + delay_ms / 1e3, color="C3", ls="--", label=f"collision flagged (+{delay_ms:.0f} ms)")
        ax.set_ylabel(f"{names[j]}\nN·m")
    np.atleast_1d(axes)[0].legend(loc="upper right", fontsize=8)
    np.atleast_1d(axes)[-1].set_xlabel("time, s")
    fig.suptitle("External torque: applied (MuJoCo Jᵀf) vs momentum-observer estimate")
    fig.tight_layout()
    path = out / "push.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def run(args) -> int:
    from robot_dynamics_tools.commands._args import check_output_path

    if args.out:
        check_output_path(args.out, "--out", directory=True)
    summary = push(args.urdf, link=args.link, force=args.force, push_duration=args.push_duration,
                   quiet=args.quiet, gain=args.gain, threshold=args.threshold, min_duration=args.min_duration,
                   velocity_scale=args.velocity_scale, torque_margin=args.torque_margin, out=args.out)
    if not args.json:
        print(f"push {summary['force_N']:.0f} N on {summary['link']} at t = {summary['push_onset_s']:.3f} s "
              f"(trajectory at {summary['peak_velocity_fraction']:.0%} of the velocity limits)")
        delay = summary["detection_delay_ms"]
        seen = "not detected (the residual stayed under the threshold)" if delay is None else \
            f"detected after {delay:.1f} ms"
        print(f"  {seen}; estimate error "
              f"{summary['estimate_error_ratio']:.2%} of the {summary['peak_external_torque_Nm']:.1f} N·m peak "
              f"after {summary['settle_time_constants']:.0f} time constants")
        print(f"  contact-free {summary['contact_free_s']:.0f} s: {summary['false_collisions']} false collisions, "
              f"max |r| {summary['contact_free_max_residual_Nm']:.3g} N·m")
        print(f"  plot: {summary.get('plot')}")
    print(json.dumps(summary))
    return 0 if summary["pass"] else 2
