"""Excitation trajectories: finite Fourier series (Swevers, Ganseman, Tükel, De Schutter & Van Brussel,
"Optimal robot excitation and identification", IEEE T-RA 13(5), 1997), optimized for the condition number
of the base regressor.

Per joint j, with base pulsation ω_f = 2π / T (the trajectory is T-periodic) and L harmonics::

    q_j(t)   = q0_j + Σ_l  a_jl / (ω_f l) sin(ω_f l t) − b_jl / (ω_f l) cos(ω_f l t)
    qd_j(t)  =        Σ_l  a_jl cos(ω_f l t) + b_jl sin(ω_f l t)
    qdd_j(t) =        Σ_l −a_jl ω_f l sin(ω_f l t) + b_jl ω_f l cos(ω_f l t)

:func:`optimize` chooses (a, b, q0) to minimize cond(W_base) of the stacked base regressor (inertial and
friction columns) along the trajectory, subject to position, velocity and acceleration limits (a
penalty on the sampled excess, then the result scaled into the limits) and checks the model's torque
against the effort limits.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.identification.base import condition_number
from robot_dynamics_ros.identification.estimate import _stack, structural_base
from robot_dynamics_ros.identification.regressor import Regressor

__all__ = ["FourierTrajectory", "optimize", "ExcitationResult"]


@dataclass
class FourierTrajectory:
    """a, b: (n, L) rad/s; q0: (n,) rad; period: T s. Call :meth:`sample` for (q, qd, qdd) (N, n)."""

    a: np.ndarray
    b: np.ndarray
    q0: np.ndarray
    period: float

    @property
    def harmonics(self) -> int:
        return self.a.shape[1]

    def sample(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t = np.asarray(t, dtype=float)
        wf = 2.0 * np.pi / self.period
        L = self.harmonics
        wl = wf * np.arange(1, L + 1)  # (L,)
        s, c = np.sin(np.outer(t, wl)), np.cos(np.outer(t, wl))  # (N, L)
        q = self.q0 + s @ (self.a / wl).T - c @ (self.b / wl).T
        qd = c @ self.a.T + s @ self.b.T
        qdd = -s @ (self.a * wl).T + c @ (self.b * wl).T
        return q, qd, qdd

    def at_rest(self) -> FourierTrajectory:
        """The same series with qd(0) = Σ_l a_l = 0 and qdd(0) = ω_f Σ_l l b_l = 0 (the last a and the first
        b absorb the sums): every period then starts and ends at rest, at q(0) = q0 − Σ_l b_l / (ω_f l)."""
        a, b = self.a.copy(), self.b.copy()
        L = a.shape[1]
        a[:, -1] = -a[:, :-1].sum(axis=1)
        b[:, 0] = -(np.arange(2, L + 1) * b[:, 1:]).sum(axis=1)
        return FourierTrajectory(a, b, self.q0.copy(), self.period)

    @classmethod
    def random(cls, n: int, harmonics: int, period: float, rng: np.random.Generator, q0=None,
               amplitude: float = 0.3) -> FourierTrajectory:
        """Random coefficients ~ N(0, (amplitude / L)²) rad/s (a smooth, broadband start)."""
        a = rng.normal(0.0, amplitude / harmonics, (n, harmonics))
        b = rng.normal(0.0, amplitude / harmonics, (n, harmonics))
        return cls(a, b, np.zeros(n) if q0 is None else np.asarray(q0, dtype=float), float(period))

    def scaled_into(self, lower, upper, qd_max, qdd_max, t: np.ndarray, margin: float = 0.95) -> FourierTrajectory:
        """Shrink the oscillation (a, b by one factor per joint, and centre q0 if needed) into the limits."""
        q, qd, qdd = self.sample(t)
        a, b, q0 = self.a.copy(), self.b.copy(), self.q0.copy()
        for j in range(a.shape[0]):
            dev = np.max(np.abs(q[:, j] - q0[j]))
            k = 1.0
            lo, hi = lower[j], upper[j]
            if np.isfinite(lo) and np.isfinite(hi):
                q0[j] = min(max(q0[j], lo + 0.05 * (hi - lo)), hi - 0.05 * (hi - lo))
                room = margin * min(q0[j] - lo, hi - q0[j])
                if dev > room:
                    k = min(k, room / dev)
            vmax = np.max(np.abs(qd[:, j]))
            if np.isfinite(qd_max[j]) and vmax > margin * qd_max[j]:
                k = min(k, margin * qd_max[j] / vmax)
            amax = np.max(np.abs(qdd[:, j]))
            if np.isfinite(qdd_max[j]) and amax > margin * qdd_max[j]:
                k = min(k, margin * qdd_max[j] / amax)
            a[j] *= k
            b[j] *= k
        return FourierTrajectory(a, b, q0, self.period)


@dataclass
class ExcitationResult:
    """trajectory; condition (cond of the base regressor along it); start_condition (of the random start);
    q, qd, qdd, tau (N, n) at t (N,); torque_ok: |tau| ≤ effort limit everywhere (model torque, no
    friction); evaluations (of the cost)."""

    trajectory: FourierTrajectory
    condition: float
    start_condition: float
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    torque_ok: bool
    evaluations: int


def optimize(model, *, period: float = 10.0, harmonics: int = 5, samples: int = 200, q0=None,
             qd_max=None, qdd_max=None, seed: int = 0, max_evaluations: int = 400,
             restarts: int = 16, lower=None, upper=None) -> ExcitationResult:
    """Minimize cond(W_base) over the Fourier coefficients, within the limits (see the module docstring).

    The series is kept at rest at t = 0 and t = T (:meth:`FourierTrajectory.at_rest`), so cycles repeat
    smoothly and the robot starts from standstill at ``trajectory.sample([0])[0]``.

    Args:
        model: the RobotModel (limits from the URDF; ``qd_max``/``qdd_max`` (n,) override the velocity
            limit and give the acceleration limit, default ``model.acceleration_limit`` or 3 rad/s²).
        period: T s; harmonics: L; samples: points of the condition number's regressor per period.
        q0: centre pose (n,), default the middle of the position limits (0 when unlimited).
        lower, upper: (n,) position bounds, rad (m), that tighten the URDF limits (the trajectory stays
            within both; ±inf leaves a joint at its URDF limit). Joint limits only: the workspace
            (mounting surface, obstacles, self-collision) is not checked.
        max_evaluations: cost evaluations in all; restarts: random starts tried first (at most a quarter
            of the evaluations), the best seeds Powell's search. ``start_condition`` is the first start's.
    """

    n = model.n
    lower = np.asarray(model.lower, float) if lower is None else np.maximum(model.lower, np.asarray(lower, float))
    upper = np.asarray(model.upper, float) if upper is None else np.minimum(model.upper, np.asarray(upper, float))
    if np.any(lower >= upper):
        j = int(np.argmax(lower >= upper))
        raise ValueError(f"joint '{model.joint_names[j]}': position bounds [{lower[j]:g}, {upper[j]:g}] are empty")
    if q0 is None:
        q0 = np.where(np.isfinite(lower) & np.isfinite(upper), 0.5 * (lower + upper), 0.0)
    vlim = np.asarray(model.velocity_limit if qd_max is None else qd_max, float)
    alim = np.asarray(model.acceleration_limit if qdd_max is None else qdd_max, float)
    alim = np.where(np.isfinite(alim), alim, 3.0)
    vlim = np.where(np.isfinite(vlim), vlim, 2.0)
    reg = Regressor(model)
    base = structural_base(reg)
    t = np.linspace(0.0, period, samples, endpoint=False)
    rng = np.random.default_rng(seed)
    start = FourierTrajectory.random(n, harmonics, period, rng, q0, amplitude=0.5 * float(np.min(vlim))).at_rest()
    start = start.scaled_into(lower, upper, vlim, alim, t)
    count = [0]

    def unpack(z):
        return FourierTrajectory(z[:n * harmonics].reshape(n, harmonics), z[n * harmonics:].reshape(n, harmonics),
                                 np.asarray(q0, float), period).at_rest()

    def cost(z):
        count[0] += 1
        tr = unpack(z)
        q, qd, qdd = tr.sample(t)
        W = _stack(reg, q, qd, qdd, False)
        W = W.reshape(-1, W.shape[2])
        c = condition_number(W, base)
        pen = 0.0
        for x, lo, hi in ((q, lower, upper), (qd, -vlim, vlim), (qdd, -alim, alim)):
            lo_, hi_ = np.where(np.isfinite(lo), lo, -1e9), np.where(np.isfinite(hi), hi, 1e9)
            pen += np.sum(np.maximum(x - hi_, 0) ** 2 + np.maximum(lo_ - x, 0) ** 2)
        return np.log(c) + 1e3 * pen

    # a few random starts first (one evaluation each), the best one seeds Powell's local search
    z0 = np.concatenate([start.a.ravel(), start.b.ravel()])
    c0 = cost(z0)
    first = start
    for _ in range(min(restarts, max(max_evaluations // 4, 0))):
        tr = FourierTrajectory.random(n, harmonics, period, rng, q0, amplitude=0.5 * float(np.min(vlim))).at_rest()
        tr = tr.scaled_into(lower, upper, vlim, alim, t)
        z = np.concatenate([tr.a.ravel(), tr.b.ravel()])
        c = cost(z)
        if c < c0:
            z0, c0 = z, c
    res = minimize(cost, z0, method="Nelder-Mead" if z0.size <= 8 else "Powell",
                   options={"maxfev": max(max_evaluations - count[0], 1), "xtol": 1e-4, "ftol": 1e-4})
    best = unpack(res.x).scaled_into(lower, upper, vlim, alim, t)
    tt = np.linspace(0.0, period, max(samples, int(period * 100)) + 1)

    def cond_of(tr):
        W = _stack(reg, *tr.sample(tt), False)
        return condition_number(W.reshape(-1, W.shape[2]), base)

    q, qd, qdd = best.sample(tt)
    tau = NewtonEulerDynamics(model).rnea(q, qd, qdd)
    ok = bool(np.all(np.abs(tau) <= np.asarray(model.effort_limit)[None, :]))
    return ExcitationResult(best, cond_of(best), cond_of(first), tt, q, qd, qdd, tau, ok, count[0])
