"""Motor limits beyond the URDF effort limit: rated (continuous) vs peak torque, and how long a peak may last.

A servo motor's datasheet gives a **rated** torque it can deliver continuously (thermal equilibrium) and a
**peak** torque it can deliver for a short time (``peak_duration``). The URDF ``effort`` limit is a
single number and says nothing about time. A trajectory is accepted by :func:`evaluate` when, per joint:

* |τ(t)| ≤ margin · peak at every instant;
* every contiguous interval with |τ| > rated lasts at most ``peak_duration``;
* the RMS torque over the whole trajectory is ≤ rated (the thermal budget of a repeated cycle: copper
  losses go with τ², so the RMS torque is the continuous torque that heats the winding the same).

File format (``motor_limits.yaml``, shaped like MoveIt's ``joint_limits.yaml``)::

    motor_limits:
      shoulder_lift_joint: {rated_torque: 120.0, peak_torque: 180.0, peak_duration: 2.0}   # N·m, N·m, s
      elbow_joint:         {rated_torque: 80.0,  peak_torque: 120.0, peak_duration: 2.0}

Joints absent from the file keep today's behaviour: the URDF effort limit is their peak and their rated
torque, with no duration or RMS limit.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.retiming.jerk import solve_jerk_limited
from robot_dynamics_ros.share import read_yaml

__all__ = ["MotorLimits", "MotorReport", "load_motor_limits", "evaluate", "solve_within_motor_limits"]


@dataclass(frozen=True)
class MotorLimits:
    """Per-joint motor limits, (n,) arrays in model joint order.

    Attributes:
        rated: continuous torque, N·m (inf where unlimited).
        peak: short-time torque, N·m.
        peak_duration: longest contiguous time above rated, s (inf where unlimited).
        configured: (n,) bool, True where the motor_limits file names the joint.
    """

    rated: np.ndarray
    peak: np.ndarray
    peak_duration: np.ndarray
    configured: np.ndarray

    @classmethod
    def from_effort_limits(cls, effort_limit) -> MotorLimits:
        e = np.asarray(effort_limit, dtype=float)
        return cls(e.copy(), e.copy(), np.full(e.shape, np.inf), np.zeros(e.shape, dtype=bool))


def _is_section(value) -> bool:
    """A mapping whose values are all mappings: a per-joint section, not one joint's entry."""
    return isinstance(value, Mapping) and bool(value) and all(isinstance(v, Mapping) for v in value.values())


def load_motor_limits(model, source: str | Path | Mapping | None) -> MotorLimits:
    """Motor limits of ``model`` from a ``motor_limits.yaml`` path or its loaded mapping (None: defaults).

    Raises:
        UserError: unreadable file, unknown joint, missing or non-positive values, rated > peak (the line
            names the file and the joint).
    """
    lim = MotorLimits.from_effort_limits(model.effort_limit)
    if source is None:
        return lim
    where = "motor_limits"
    data = source
    if isinstance(source, (str, Path)):
        where = str(source)
        data = read_yaml(source, "motor limits")
    if isinstance(data, Mapping) and "motor_limits" in data:
        data = data["motor_limits"]
    elif isinstance(data, Mapping) and any(_is_section(v) for v in data.values()):
        # a section of joints under another key (a joint_limits.yaml given as motor limits)
        found = ", ".join(f"'{k}:'" for k in data)
        raise UserError(f"{where}: expected a top-level 'motor_limits:' key, found {found}")
    if not isinstance(data, Mapping):
        raise UserError(f"{where}: expected a mapping 'motor_limits: {{joint: {{rated_torque, peak_torque, "
                        "peak_duration}}}}'")
    rated, peak, dur, conf = lim.rated.copy(), lim.peak.copy(), lim.peak_duration.copy(), lim.configured.copy()
    for joint, entry in data.items():
        if joint not in model.index:
            raise UserError(f"{where}: joint {joint!r} is not an actuated joint of {model.description.name}")
        if not isinstance(entry, Mapping):
            raise UserError(f"{where}: joint {joint!r}: expected a mapping, got {entry!r}")
        i = model.index[joint]
        values = {}
        for key in ("rated_torque", "peak_torque", "peak_duration"):
            if key not in entry:
                raise UserError(f"{where}: joint {joint!r}: missing {key}")
            try:
                values[key] = float(entry[key])
            except (TypeError, ValueError):
                raise UserError(f"{where}: joint {joint!r}: {key}={entry[key]!r} is not a number") from None
            if not (values[key] > 0 and not math.isnan(values[key])):
                raise UserError(f"{where}: joint {joint!r}: {key}={values[key]} must be positive")
        if values["rated_torque"] > values["peak_torque"]:
            raise UserError(f"{where}: joint {joint!r}: rated_torque {values['rated_torque']} > peak_torque "
                            f"{values['peak_torque']}")
        rated[i], peak[i], dur[i], conf[i] = (values["rated_torque"], values["peak_torque"],
                                              values["peak_duration"], True)
    return MotorLimits(rated, peak, dur, conf)


@dataclass(frozen=True)
class MotorReport:
    """Per-joint figures of a trajectory against :class:`MotorLimits` (arrays (n,)).

    Attributes:
        peak: max |τ|, N·m. rms: RMS of τ over the trajectory (trapezoidal in time), N·m.
        longest_above_rated: longest contiguous time with |τ| > rated, s (crossings interpolated linearly).
        ok_peak, ok_duration, ok_rms: each limit held (peak against margin · peak torque).
        binding: per joint the limit closest to binding: "peak", "duration", "rms" or "" (none within 1 %).
    """

    peak: np.ndarray
    rms: np.ndarray
    longest_above_rated: np.ndarray
    ok_peak: np.ndarray
    ok_duration: np.ndarray
    ok_rms: np.ndarray
    binding: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return bool(self.ok_peak.all() and self.ok_duration.all() and self.ok_rms.all())

    def as_dict(self, joint_names) -> dict:
        return {name: {"peak_torque": float(self.peak[i]), "rms_torque": float(self.rms[i]),
                       "longest_above_rated_s": float(self.longest_above_rated[i]),
                       "ok": bool(self.ok_peak[i] and self.ok_duration[i] and self.ok_rms[i]),
                       "binding": self.binding[i]}
                for i, name in enumerate(joint_names)}


def report_text(motor: Mapping) -> str:
    """One line per trajectory from :meth:`MotorReport.as_dict` ({joint: {peak_torque, rms_torque,
    longest_above_rated_s, ok, binding}}): per joint peak and RMS torque (N·m), longest time above rated
    (s) and the limit that binds (the retiming service's response message)."""
    parts = []
    for name, v in motor.items():
        binds = v["binding"] or "none"
        parts.append(f"{name} peak {v['peak_torque']:.1f} N·m, RMS {v['rms_torque']:.1f} N·m, "
                     f"{v['longest_above_rated_s']:.3f} s above rated, binds {binds}"
                     + ("" if v["ok"] else " (VIOLATED)"))
    return "motor limits per joint: " + "; ".join(parts)


def _longest_above(t: np.ndarray, a: np.ndarray, level: float) -> float:
    """Longest contiguous time with a(t) > level, a sampled at t and linear in between."""
    if not np.isfinite(level):
        return 0.0
    above = a > level
    if not above.any():
        return 0.0
    longest, start = 0.0, None
    for k in range(len(t)):
        if above[k] and start is None:
            if k == 0:
                start = t[0]
            else:  # crossing between k-1 and k
                start = t[k - 1] + (level - a[k - 1]) / (a[k] - a[k - 1]) * (t[k] - t[k - 1])
        elif not above[k] and start is not None:
            end = t[k - 1] + (level - a[k - 1]) / (a[k] - a[k - 1]) * (t[k] - t[k - 1])
            longest = max(longest, end - start)
            start = None
    if start is not None:
        longest = max(longest, t[-1] - start)
    return float(longest)


def evaluate(t, tau, limits: MotorLimits, *, margin: float = 1.0) -> MotorReport:
    """Check a sampled torque trajectory against motor limits (module docstring).

    Args:
        t: (K,) sample times, s, increasing. tau: (K, n) joint torques, N·m.
        limits: :class:`MotorLimits`. margin: fraction (0, 1] of the peak torque allowed at any instant.

    Raises:
        ValueError: shapes that do not match, fewer than 2 samples.
    """
    t = np.asarray(t, dtype=float)
    tau = np.asarray(tau, dtype=float)
    if tau.ndim != 2 or tau.shape[0] != t.shape[0] or t.shape[0] < 2 or tau.shape[1] != limits.rated.shape[0]:
        raise ValueError(f"evaluate: t {t.shape} and tau {tau.shape} do not match {limits.rated.shape[0]} joints")
    a = np.abs(tau)
    peak = a.max(axis=0)
    duration = t[-1] - t[0]
    rms = np.sqrt(np.trapezoid(tau ** 2, t, axis=0) / duration) if duration > 0 else peak
    longest = np.array([_longest_above(t, a[:, j], limits.rated[j]) for j in range(tau.shape[1])])
    cap = margin * limits.peak
    ok_peak = peak <= cap * (1 + 1e-9)
    ok_dur = longest <= limits.peak_duration * (1 + 1e-9)
    ok_rms = rms <= limits.rated * (1 + 1e-9)
    binding = []
    for j in range(tau.shape[1]):
        use = {"peak": peak[j] / cap[j], "duration": (longest[j] / limits.peak_duration[j]
                                                     if np.isfinite(limits.peak_duration[j]) else 0.0),
               "rms": rms[j] / limits.rated[j] if np.isfinite(limits.rated[j]) else 0.0}
        name, value = max(use.items(), key=lambda kv: kv[1])
        binding.append(name if value >= 0.99 else "")
    return MotorReport(peak, rms, longest, ok_peak, ok_dur, ok_rms, tuple(binding))


def solve_within_motor_limits(model, path, s, x_ref, limits, *, margin: float, jerk_limit,
                              period: float = 1e-3, steps: int = 6, dynamics=None, tool_speed=None,
                              velocity_limit=None, acceleration_limit=None, torque_limit=None):
    """Torque + jerk + rated/peak + margin: the jerk-limited timing (:func:`~.jerk.solve_jerk_limited`)
    with the torque limits of the joints that break a motor rule lowered until the rules hold.

    First solved with |τ| ≤ margin · peak (and ≤ ``torque_limit``). Joints whose time above rated or RMS is then too high get the
    torque limit base + λ (margin · peak − base), λ bisected in [0, 1) — up after a λ with no profile, down
    after one that breaks a rule — (the other joints keep margin · peak),
    where base = rated (or margin · peak if lower), raised to the largest gravity torque along the path if
    that is higher (the arm must be able to stand still on the path). With |τ| ≤ rated a joint is never
    above rated and its RMS is ≤ rated, so λ = 0 passes whenever gravity stays below rated. Each candidate is
    sampled every ``period`` s and checked with :func:`evaluate` (torques by
    ``dynamics``, batched ``rnea``; default the in-package Newton–Euler engine of ``model``).

    Args:
        model: the RobotModel (velocity / acceleration limits, joint names); path, s, x_ref: as
            :func:`~.jerk.solve_jerk_limited`; limits: :class:`MotorLimits`; margin: fraction of the peak;
            jerk_limit: rad/s³, scalar or (n,); steps: solves of the bisection at most; tool_speed: as
            :func:`~.jerk.solve_jerk_limited`.
        velocity_limit, acceleration_limit: (n,) rad/s, rad/s², the limits every candidate keeps (the
            caller's scaled ones); default the model's.
        torque_limit: (n,) N·m, a cap on top of margin · peak (the caller's margin · URDF effort); default none.

    Returns:
        (JerkSolution, MotorReport, λ (1.0 when no joint needed lowering), torque limit (n,), solves).

    Raises:
        UserError: no λ passes (e.g. gravity alone above rated for longer than peak_duration).
    """
    dynamics = dynamics or NewtonEulerDynamics(model)
    cap = margin * limits.peak
    if torque_limit is not None:
        cap = np.minimum(cap, np.asarray(torque_limit, dtype=float))
    vlim = model.velocity_limit if velocity_limit is None else np.asarray(velocity_limit, dtype=float)
    alim = model.acceleration_limit if acceleration_limit is None else np.asarray(acceleration_limit, dtype=float)
    gravity = np.abs(np.atleast_2d(dynamics.gravity(path(np.linspace(0.0, path.length, 400))))).max(axis=0)
    base = np.minimum(np.maximum(np.minimum(limits.rated, cap), gravity * (1 + 1e-3)), cap)
    jl = np.broadcast_to(np.asarray(jerk_limit, dtype=float), (model.n,))

    def attempt(tl):
        try:
            sol = solve_jerk_limited(path, s, x_ref, dynamics, velocity_limit=vlim,
                                     acceleration_limit=alim, torque_limit=tl, jerk_limit=jl,
                                     tool_speed=tool_speed)
        except ValueError:
            return None
        t = np.append(np.arange(0.0, sol.duration, period), sol.duration)
        _, _, _, _, q, qd, qdd, _ = sol.sample(t)
        tau = np.atleast_2d(dynamics.rnea(q, qd, qdd))
        return sol, evaluate(t, tau, limits, margin=margin)

    first = attempt(cap.copy())
    if first is None:
        raise UserError("motor limits: the jerk-limited timing found no profile within margin · peak torque")
    sol, rep = first
    if rep.ok:
        return sol, rep, 1.0, cap, 1
    lower = ~(rep.ok_duration & rep.ok_rms)
    best, solves = None, 1
    lo, hi = 0.0, 1.0
    for k in range(steps):
        lam = lo if k == 0 else 0.5 * (lo + hi)
        tl = np.where(lower, base + lam * (cap - base), cap)
        cand = attempt(tl)
        solves += 1
        if cand is None:  # no profile: more torque is needed (at λ = 0 the arm may have none left to
            lo = lam      # accelerate where gravity peaks)
        elif cand[1].ok:
            best = (cand[0], cand[1], lam, tl)
            lo = lam
        else:  # a motor rule broken: less torque
            hi = lam
    if best is None:
        names = [model.joint_names[j] for j in np.flatnonzero(lower)]
        raise UserError(f"motor limits of {names} cannot be met with any torque limit between rated (or gravity) "
                        "and margin · peak: gravity alone is above rated too long on this path; move it closer "
                        "to the base")
    sol, rep, lam, tl = best
    return sol, rep, lam, tl, solves
