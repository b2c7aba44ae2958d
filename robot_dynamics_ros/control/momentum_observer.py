"""External joint torque from the generalized momentum, and collision detection on it (ROS-free core).

The generalized-momentum observer (De Luca & Mattone, ICRA 2003; Haddadin, De Luca & Albu-Schäffer,
IEEE T-RO 33(6), 2017, §IV-B) needs no joint acceleration and no inverse of M. With p = M(q) q̇, the
equation of motion M q̈ + C q̇ + g = τ_m − τ_f + τ_ext and Ṁ = C + Cᵀ give

    ṗ = τ_m − τ_f + Cᵀ(q, q̇) q̇ − g(q) + τ_ext,

so the residual

    r(t) = K_O [ p(t) − p(0) − ∫₀ᵗ (τ_m − τ_f + Cᵀ q̇ − g + r) ds ]

obeys ṙ = K_O (τ_ext − r): every joint's r is τ_ext through a first-order low-pass of time constant
1/K_O. τ_m is the measured (or commanded) joint torque, τ_f the model's friction.

Discretization: with p̂ the integrated momentum model, p̂_k = p̂_{k−1} + Δt (b_k + r_k) and
r_k = K_O (p_k − p̂_k), β = τ_m − τ_f + Cᵀ q̇ − g and b_k = β_{k−1} (``euler``) or (β_{k−1} + β_k)/2
(``trapezoid``); solved for r_k (implicit in r):

    r_k = K_O (p_k − p̂_{k−1} − Δt b_k) / (1 + K_O Δt),

which is stable for any gain and sample time (the explicit form diverges for K_O Δt > 2) and keeps the
integrated quantity bounded (p − p̂ instead of an integral that grows with time).

Arrays are (n,) in ``RobotModel.joint_names`` order: q rad (m), q̇ rad/s (m/s), τ N·m (N), time s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["INTEGRATIONS", "MomentumObserver", "CollisionDetector", "CollisionState"]

#: ``euler``: β of the sample that starts the interval — exact to first order for a torque that is held
#: over the interval from the sample where it is reported (a ros2_control command, a simulator step);
#: ``trapezoid``: the mean of both ends — for torques measured as instantaneous values of a smooth signal.
INTEGRATIONS = ("euler", "trapezoid")


class MomentumObserver:
    """Residual r ≈ τ_ext of a fixed-base robot, one :meth:`update` per joint-state sample.

    Args:
        engine: a dynamics engine of the robot (``PinocchioDynamics``): ``momentum_terms`` (or
            ``mass_matrix``, ``coriolis_matrix`` and ``gravity``) and ``friction_torque``, arrays in model
            joint order.
        gain: K_O, 1/s, scalar or (n,) positive (the residual's bandwidth; time constant 1/K_O).
        friction: subtract the engine's friction model τ_f(q̇) from the measured torque (the URDF's
            ``<dynamics>``, or an identified friction model behind the same engine method).
        max_dt: a sample gap longer than this (s) restarts the observer at the new sample (the momentum
            balance over a long gap is meaningless); non-positive gaps are refused.
        integration: how β is taken over a sample interval (see :data:`INTEGRATIONS`).

    Raises:
        ValueError: a gain that is not positive and finite, or of the wrong length.
    """

    def __init__(self, engine, gain=50.0, *, friction: bool = True, max_dt: float = 0.1,
                 integration: str = "euler"):
        self.engine = engine
        self.n = int(engine.n)
        k = np.broadcast_to(np.asarray(gain, dtype=float), (self.n,)).copy()
        if not np.all(np.isfinite(k)) or np.any(k <= 0):
            raise ValueError(f"observer gain: expected positive finite values (1/s), got {k.tolist()}")
        self.gain = k
        self.friction = bool(friction)
        self.max_dt = float(max_dt)
        if integration not in INTEGRATIONS:
            raise ValueError(f"observer integration {integration!r}: must be one of {list(INTEGRATIONS)}")
        self.integration = integration
        self._beta = np.zeros(self.n)
        self._dt, self._k_over = None, None
        self._p_hat = np.zeros(self.n)
        self.residual = np.zeros(self.n)
        self._t: float | None = None
        #: samples since the last (re)start; the residual is only meaningful after a few time constants
        self.samples = 0

    @property
    def time_constant(self) -> float:
        """The slowest joint's time constant 1/K_O, s."""
        return float(1.0 / self.gain.min())

    def reset(self) -> None:
        """Forget the history: the next :meth:`update` restarts the observer (r = 0)."""
        self._t = None
        self.residual[:] = 0.0
        self.samples = 0

    def _terms(self, q, qd, tau_m) -> tuple[np.ndarray, np.ndarray]:
        """(p, β) at one sample: p = M q̇, β = τ_m − τ_f + Cᵀ q̇ − g."""
        eng = self.engine
        if hasattr(eng, "momentum_terms"):
            p, beta = eng.momentum_terms(q, qd)
        else:
            p = eng.mass_matrix(q) @ qd
            beta = eng.coriolis_matrix(q, qd).T @ qd - eng.gravity(q)
        beta += tau_m
        if self.friction:
            beta -= eng.friction_torque(qd)
        return p, beta

    def update(self, t: float, q, qd, tau_m) -> np.ndarray:
        """Advance to sample time ``t`` (s) with the measured state and joint torque; return r (n,) N·m.

        The first sample after construction, :meth:`reset`, a gap above ``max_dt`` or a backward time
        step (re)starts the observer: r = 0 there.

        Raises:
            ValueError: non-finite or wrongly shaped q, q̇ or τ_m (the observer state is unchanged).
        """
        q = np.asarray(q, dtype=float)
        qd = np.asarray(qd, dtype=float)
        tau_m = np.asarray(tau_m, dtype=float)
        # one sum tells whether all 3n values are finite (a NaN or inf propagates): the per-sample path
        if not (q.shape == qd.shape == tau_m.shape == (self.n,)
                and math.isfinite(q.sum() + qd.sum() + tau_m.sum())):
            for name, v in (("q", q), ("qd", qd), ("tau", tau_m)):
                if v.shape != (self.n,):
                    raise ValueError(f"{name}: expected shape ({self.n},), got {v.shape}")
                if not np.all(np.isfinite(v)):
                    raise ValueError(f"{name}: non-finite value at index {int(np.argmin(np.isfinite(v)))}")
        p, beta = self._terms(q, qd, tau_m)
        dt = None if self._t is None else t - self._t
        if dt is None or dt <= 0.0 or dt > self.max_dt:
            self._p_hat = p.copy()
            self._beta = beta
            self.residual = np.zeros(self.n)
            self._t = float(t)
            self.samples = 1
            return self.residual
        b = self._beta if self.integration == "euler" else 0.5 * (self._beta + beta)
        if dt != self._dt:  # the sample period rarely changes: keep its coefficients
            self._dt, self._k_over = dt, self.gain / (1.0 + self.gain * dt)
        p_hat = self._p_hat
        p_hat += dt * b             # p̂_{k−1} + Δt b_k
        r = self._k_over * (p - p_hat)
        p_hat += dt * r
        self._beta = beta
        self.residual = r
        self._t = float(t)
        self.samples += 1
        return r


@dataclass(frozen=True)
class CollisionState:
    """What :meth:`CollisionDetector.update` decided at one sample.

    Attributes:
        collision: True while a collision is declared.
        onset: True at the sample where it was declared.
        joints: indices of joints above their threshold at this sample.
    """

    collision: bool
    onset: bool
    joints: tuple[int, ...]


_QUIET = CollisionState(False, False, ())


class CollisionDetector:
    """Per-joint thresholds with hysteresis and a minimum duration on the residual (Haddadin 2017 §IV-D).

    A collision is declared when some joint's |r| stays above its ``threshold`` for at least
    ``min_duration`` s, and cleared when every |r| has stayed below ``release · threshold`` for
    ``min_duration``. The minimum duration rejects one-sample spikes (sensor noise, a dropped message);
    the hysteresis keeps the flag from chattering at the threshold.

    Args:
        threshold: N·m, scalar or (n,) positive (inf disables a joint).
        release: fraction in (0, 1] of the threshold below which a joint counts as released.
        min_duration: s, ≥ 0.

    Raises:
        ValueError: non-positive thresholds, release outside (0, 1], negative duration.
    """

    def __init__(self, n: int, threshold, *, release: float = 0.5, min_duration: float = 0.002):
        thr = np.broadcast_to(np.asarray(threshold, dtype=float), (n,)).copy()
        if np.any(np.isnan(thr)) or np.any(thr <= 0):
            raise ValueError(f"collision threshold: expected positive values (N·m), got {thr.tolist()}")
        if not 0.0 < release <= 1.0:
            raise ValueError(f"collision release: expected a fraction in (0, 1], got {release}")
        if not min_duration >= 0.0:
            raise ValueError(f"collision min_duration: expected ≥ 0 s, got {min_duration}")
        self.threshold = thr
        self.release = float(release)
        self.min_duration = float(min_duration)
        self.collision = False
        self._since: float | None = None  # start of the current candidate transition
        #: number of collisions declared since construction
        self.count = 0

    def reset(self) -> None:
        """Clear a declared collision (the reset service of a reacting controller)."""
        self.collision = False
        self._since = None

    def update(self, t: float, residual) -> CollisionState:
        """Feed the residual (n,) N·m at time ``t`` (s); return the decision at this sample."""
        a = np.abs(np.asarray(residual, dtype=float))
        if not self.collision and self._since is None and (a <= self.threshold).all():
            return _QUIET   # the per-sample case: nothing above any threshold, nothing pending
        above = a > self.threshold
        joints = tuple(int(i) for i in np.nonzero(above)[0])
        if not self.collision:
            candidate = bool(above.any())
        else:
            candidate = bool(np.all(a < self.release * self.threshold))
        if not candidate:
            self._since = None
            return CollisionState(self.collision, False, joints)
        if self._since is None:
            self._since = float(t)
        if t - self._since + 1e-12 < self.min_duration:
            return CollisionState(self.collision, False, joints)
        self._since = None
        self.collision = not self.collision
        if self.collision:
            self.count += 1
        return CollisionState(self.collision, self.collision, joints)
