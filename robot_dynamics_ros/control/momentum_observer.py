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

Per sample the model terms come from the engine (``momentum_terms``: for the production engine,
:meth:`~robot_dynamics_ros.dynamics.pinocchio_engine.PinocchioDynamics.momentum_terms` — Pinocchio's RNEA for
p, ``computeCoriolisMatrix`` for Cᵀ q̇ and ``computeGeneralizedGravity``), then the friction and this update
on (n,) arrays. Nothing here compiles code: the observer node imports no JIT compiler (numba's LLVM alone
is ~100 MB of resident memory, ``benchmarks/bench_memory.py``). The in-package one-sweep kernel
(:func:`~robot_dynamics_ros.dynamics.momentum_terms.momentum_terms_one`, through
``NewtonEulerDynamics.momentum_terms``) is an engine like any other here, and cross-validates Pinocchio's
terms in the tests.

Arrays are (n,) in ``RobotModel.joint_names`` order: q rad (m), q̇ rad/s (m/s), τ N·m (N), time s.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from robot_dynamics_ros.model import RobotModel

__all__ = ["INTEGRATIONS", "DEFAULT_COULOMB_VELOCITY", "MomentumObserver", "CollisionDetector", "CollisionState"]

#: v_c (rad/s) of the observer's Coulomb ramp for a sign(q̇) friction model (URDF ``<dynamics friction>``):
#: well above the velocity noise of a joint at rest (encoders and simulators: < 1e-3 rad/s) and small
#: against the speeds of a motion
DEFAULT_COULOMB_VELOCITY = 0.02

#: ``euler``: β of the sample that starts the interval — exact to first order for a torque that is held
#: over the interval from the sample where it is reported (a ros2_control command, a simulator step);
#: ``trapezoid``: the mean of both ends — for torques measured as instantaneous values of a smooth signal.
INTEGRATIONS = ("euler", "trapezoid")


def coulomb_law(v: float, v_s: float, v_c: float) -> float:
    """The observer's Coulomb law for one velocity ``v`` (rad/s, m/s), in [−1, 1]: the identified
    tanh(v / v_s) when v_s > 0; else the ramp clip(v / v_c, −1, 1) when v_c > 0 (zero at rest, sign(v) from
    |v| ≥ v_c); else sign(v)."""
    if v_s > 0.0:
        return math.tanh(v / v_s)
    if v_c > 0.0:
        x = v / v_c
        return 1.0 if x > 1.0 else (-1.0 if x < -1.0 else x)
    return 1.0 if v > 0.0 else (-1.0 if v < 0.0 else 0.0)


class MomentumObserver:
    """Residual r ≈ τ_ext of a fixed-base robot, one :meth:`update` per joint-state sample.

    Model terms: ``engine.momentum_terms(q, qd)`` — ``(p, Cᵀ q̇ − g)`` as
    :meth:`~robot_dynamics_ros.dynamics.pinocchio_engine.PinocchioDynamics.momentum_terms` gives them (Pinocchio:
    RNEA for p = M q̇, ``computeCoriolisMatrix``, ``computeGeneralizedGravity``), or ``(g, p, Cᵀ q̇)`` as
    :meth:`~robot_dynamics_ros.dynamics.newton_euler.NewtonEulerDynamics.momentum_terms` (the in-package
    one-sweep kernel) gives them — or, for an engine without it, ``mass_matrix``, ``coriolis_matrix`` and
    ``gravity``. Friction: for an engine that carries a :class:`~robot_dynamics_ros.model.RobotModel`
    (``engine.model``, as both package engines do), the model's ``damping`` · q̇ + ``friction`` ·
    :func:`coulomb_law` (q̇); for other engines their ``friction_torque``. The update itself runs over
    Python floats (n is small: a 7-joint sample costs less than one NumPy call per quantity).

    Args:
        engine: a dynamics engine of the robot (arrays in model joint order), see above.
        gain: K_O, 1/s, scalar or (n,) positive (the residual's bandwidth; time constant 1/K_O).
        friction: subtract the model's friction torque τ_f(q̇) from the measured torque (the URDF's
            ``<dynamics>``, or an identified friction model installed in the model).
        max_dt: a sample gap longer than this (s) restarts the observer at the new sample (the momentum
            balance over a long gap is meaningless); non-positive gaps are refused.
        integration: how β is taken over a sample interval (see :data:`INTEGRATIONS`).
        coulomb_velocity: v_c, rad/s (m/s), ≥ 0: the Coulomb term of a model whose law is sign(q̇) (URDF
            ``<dynamics friction>``, no identified v_s) is the ramp F_c · clip(q̇ / v_c, −1, 1) — zero at
            rest, where the static friction is anywhere in [−F_c, F_c] and cannot be attributed
            (:data:`DEFAULT_COULOMB_VELOCITY`); 0 restores the bare sign(q̇). An identified v_s > 0 keeps its
            tanh(q̇ / v_s). Below v_c the friction model is uncertain by up to F_c: widen the collision
            threshold there (:class:`CollisionDetector` ``friction_band``).

    Raises:
        ValueError: a gain that is not positive and finite, or of the wrong length; a bad
            ``coulomb_velocity``.
    """

    def __init__(self, engine, gain=50.0, *, friction: bool = True, max_dt: float = 0.1,
                 integration: str = "euler", coulomb_velocity: float = DEFAULT_COULOMB_VELOCITY):
        self.engine = engine
        self.n = int(engine.n)
        k = np.broadcast_to(np.asarray(gain, dtype=float), (self.n,)).copy()
        if not np.all(np.isfinite(k)) or np.any(k <= 0):
            raise ValueError(f"observer gain: expected positive finite values (1/s), got {k.tolist()}")
        self.gain = k
        self._gain = k.tolist()
        self.friction = bool(friction)
        v_c = float(coulomb_velocity)
        if not (math.isfinite(v_c) and v_c >= 0.0):
            raise ValueError(f"observer coulomb_velocity: expected a finite value ≥ 0 (rad/s), got {coulomb_velocity!r}")
        self.coulomb_velocity = v_c
        self.max_dt = float(max_dt)
        if integration not in INTEGRATIONS:
            raise ValueError(f"observer integration {integration!r}: must be one of {list(INTEGRATIONS)}")
        self.integration = integration
        self._trapezoid = integration == "trapezoid"
        model = getattr(engine, "model", None)
        self._v_s = float(getattr(model, "coulomb_velocity", 0.0))
        # the model's friction (viscous, Coulomb per joint) when the engine carries a RobotModel, else the
        # engine's friction_torque
        self._model_friction = (list(zip(np.asarray(model.damping, dtype=float).tolist(),
                                         np.asarray(model.friction, dtype=float).tolist()))
                                if isinstance(model, RobotModel) else None)
        self._residual = np.zeros(self.n)
        self._shape = (self.n,)
        # the observer's state: the integrated momentum model p̂ and β of the previous sample (lists of n floats)
        self._p_hat = [0.0] * self.n
        self._beta_prev = [0.0] * self.n
        self._watch = [math.inf] * self.n
        #: after each update: some |r_j| is above the level set by :meth:`watch`
        self.above = False
        self._t: float | None = None
        #: samples since the last (re)start; the residual is only meaningful after a few time constants
        self.samples = 0

    @property
    def residual(self) -> np.ndarray:
        """The last residual r (n,) N·m (N): the observer's own array, overwritten by the next update."""
        return self._residual

    @property
    def time_constant(self) -> float:
        """The slowest joint's time constant 1/K_O, s."""
        return float(1.0 / self.gain.min())

    def reset(self) -> None:
        """Forget the history: the next :meth:`update` restarts the observer (r = 0)."""
        self._t = None
        self._residual[:] = 0.0
        self.samples = 0
        self.above = False

    def terms(self, q: np.ndarray, qd: np.ndarray, tau_m: np.ndarray) -> tuple[list[float], list[float]]:
        """``(p, β)`` of one sample, n floats each: p = M(q) q̇ kg·m²/s and β = τ_m − τ_f + Cᵀ(q, q̇) q̇ − g(q)
        N·m from the engine and the friction model (class docstring).

        Raises:
            ValueError: a non-finite model term (an overflow for finite inputs), or the engine's own errors.
        """
        eng = self.engine
        if hasattr(eng, "momentum_terms"):
            out = eng.momentum_terms(q, qd)
            if len(out) == 3:   # NewtonEulerDynamics: (g, p, Cᵀ q̇)
                p, beta = out[1], out[2] - out[0]
            else:
                p, beta = out
        else:
            p = eng.mass_matrix(q) @ qd
            beta = eng.coriolis_matrix(q, qd).T @ qd - eng.gravity(q)
        p, beta = p.tolist(), (beta + tau_m).tolist()
        if self.friction:
            mf = self._model_friction
            if mf is None:
                beta = [b - f for b, f in zip(beta, eng.friction_torque(qd).tolist())]
            else:
                v_s, v_c = self._v_s, self.coulomb_velocity
                beta = [b - (fv * v + fc * coulomb_law(v, v_s, v_c))
                        for b, v, (fv, fc) in zip(beta, qd.tolist(), mf)]
        if not math.isfinite(sum(p) + sum(beta)):
            raise ValueError("non-finite model term (overflow) for finite inputs")
        return p, beta

    def update(self, t: float, q, qd, tau_m) -> np.ndarray:
        """Advance to sample time ``t`` (s) with the measured state and joint torque; return r (n,) N·m
        (:attr:`residual`: overwritten by the next update — copy it to keep it).

        The first sample after construction, :meth:`reset`, a gap above ``max_dt`` or a backward time
        step (re)starts the observer: r = 0 there.

        Raises:
            ValueError: non-finite or wrongly shaped q, q̇ or τ_m, or a non-finite model term (the observer
                state is unchanged).
        """
        arrays = type(q) is np.ndarray and type(qd) is np.ndarray and type(tau_m) is np.ndarray
        if not (arrays and q.dtype == qd.dtype == tau_m.dtype == np.float64):
            q = np.asarray(q, dtype=float)
            qd = np.asarray(qd, dtype=float)
            tau_m = np.asarray(tau_m, dtype=float)
        if not q.shape == qd.shape == tau_m.shape == self._shape:
            for name, v in (("q", q), ("qd", qd), ("tau", tau_m)):
                if v.shape != (self.n,):
                    raise ValueError(f"{name}: expected shape ({self.n},), got {v.shape}")
        return self._update_arrays(t, q, qd, tau_m)

    def _update_arrays(self, t: float, q: np.ndarray, qd: np.ndarray, tau_m: np.ndarray) -> np.ndarray:
        """:meth:`update` for float64 (n,) arrays, such as the joint-state mapper's own arrays (the
        per-sample path of ``ExternalTorqueCore``). Same results and errors otherwise.

        The law (module docstring): restart (p̂ = p, r = 0) or r_k = K_O (p_k − p̂_{k−1} − Δt b_k)/(1 + K_O Δt),
        p̂_k = p̂_{k−1} + Δt (b_k + r_k)."""
        if not math.isfinite(sum(q.tolist()) + sum(qd.tolist()) + sum(tau_m.tolist())):
            for name, v in (("q", q), ("qd", qd), ("tau", tau_m)):
                bad = ~np.isfinite(v)
                if bad.any():
                    raise ValueError(f"{name}: non-finite value at index {int(np.argmax(bad))}")
        p, beta = self.terms(q, qd, tau_m)
        t_prev = self._t
        dt = 0.0 if t_prev is None else t - t_prev
        restart = t_prev is None or not 0.0 < dt <= self.max_dt
        if restart:
            p_hat, r = p, [0.0] * self.n
        else:
            trapezoid = self._trapezoid
            p_hat, r = [], []
            for p_j, b_prev, b_now, ph_prev, k in zip(p, self._beta_prev, beta, self._p_hat, self._gain):
                ph = ph_prev + dt * (0.5 * (b_prev + b_now) if trapezoid else b_prev)
                r_j = k * (p_j - ph) / (1.0 + k * dt)
                p_hat.append(ph + dt * r_j)
                r.append(r_j)
            if not math.isfinite(sum(r)):  # the state is spoilt: start again at the next sample
                self.reset()
                raise ValueError("non-finite residual (overflow): observer restarted")
        self._p_hat, self._beta_prev = p_hat, beta
        self._residual[:] = r
        self.above = any(map(operator.gt, map(abs, r), self._watch))
        self._t = t
        self.samples = 1 if restart else self.samples + 1
        return self._residual

    def watch(self, level) -> None:
        """After each update, set :attr:`above` when some |r_j| exceeds ``level`` (N·m, scalar or (n,);
        inf: never) — the per-sample pre-check of a :class:`CollisionDetector` with these thresholds."""
        self._watch = np.broadcast_to(np.asarray(level, dtype=float), (self.n,)).tolist()


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

    Friction band (Haddadin et al. 2017, §IV-D and the friction discussion of §IV: thresholds that account
    for the unmodelled friction): at rest or near a velocity reversal the Coulomb (static) friction is
    anywhere in [−F_c, F_c] and the observer cannot attribute it, so a joint with |q̇| < ``band_velocity``
    has its threshold raised by ``friction_band`` (F_c) at that sample (the velocity given to
    :meth:`update`); in motion the threshold is the plain one.

    Args:
        threshold: N·m, scalar or (n,) positive (inf disables a joint).
        release: fraction in (0, 1] of the threshold below which a joint counts as released.
        min_duration: s, ≥ 0.
        friction_band: N·m, scalar or (n,) ≥ 0, added to the threshold of a slow joint (None: 0).
        band_velocity: rad/s ≥ 0: |q̇| below it is slow (the observer's ``coulomb_velocity``).

    Raises:
        ValueError: non-positive thresholds, release outside (0, 1], negative duration or band.
    """

    def __init__(self, n: int, threshold, *, release: float = 0.5, min_duration: float = 0.002,
                 friction_band=None, band_velocity: float = 0.0):
        thr = np.broadcast_to(np.asarray(threshold, dtype=float), (n,)).copy()
        if np.any(np.isnan(thr)) or np.any(thr <= 0):
            raise ValueError(f"collision threshold: expected positive values (N·m), got {thr.tolist()}")
        if not 0.0 < release <= 1.0:
            raise ValueError(f"collision release: expected a fraction in (0, 1], got {release}")
        if not min_duration >= 0.0:
            raise ValueError(f"collision min_duration: expected ≥ 0 s, got {min_duration}")
        band = np.zeros(n) if friction_band is None else \
            np.broadcast_to(np.asarray(friction_band, dtype=float), (n,)).copy()
        if not (np.all(np.isfinite(band)) and np.all(band >= 0)):
            raise ValueError(f"collision friction_band: expected finite values ≥ 0 (N·m), got {band.tolist()}")
        if not (math.isfinite(band_velocity) and band_velocity >= 0):
            raise ValueError(f"collision band_velocity: expected a finite value ≥ 0 (rad/s), got {band_velocity!r}")
        self.threshold = thr
        self._threshold_list = thr.tolist()
        self.friction_band = band
        self.band_velocity = float(band_velocity)
        self._banded = bool(np.any(band > 0) and band_velocity > 0)
        self.release = float(release)
        self.min_duration = float(min_duration)
        self.collision = False
        self._since: float | None = None  # start of the current candidate transition
        #: number of collisions declared since construction
        self.count = 0

    @property
    def idle(self) -> bool:
        """No collision declared and no transition pending: a residual below every threshold changes nothing."""
        return not self.collision and self._since is None

    def reset(self) -> None:
        """Clear a declared collision (the reset service of a reacting controller)."""
        self.collision = False
        self._since = None

    def thresholds(self, qd=None) -> np.ndarray:
        """The thresholds (n,) N·m in force at joint velocities ``qd`` (None: the plain ones): raised by
        the friction band where |q̇| < ``band_velocity`` (class docstring)."""
        if qd is None or not self._banded:
            return self.threshold
        return self.threshold + self.friction_band * (np.abs(np.asarray(qd, dtype=float)) < self.band_velocity)

    def update(self, t: float, residual, qd=None) -> CollisionState:
        """Feed the residual (n,) N·m (an array or a list) at time ``t`` (s), with the joint velocities
        ``qd`` (n,) rad/s of that sample for the friction band (None: no band); return the decision here."""
        if not self.collision and self._since is None:
            # the per-sample case, nothing above any threshold and nothing pending: over Python floats
            values = residual.tolist() if isinstance(residual, np.ndarray) else residual
            if not any(map(operator.gt, map(abs, values), self._threshold_list)):
                return _QUIET
        a = np.abs(np.asarray(residual, dtype=float))
        thr = self.thresholds(qd)
        above = a > thr
        joints = tuple(int(i) for i in np.nonzero(above)[0])
        if not self.collision:
            candidate = bool(above.any())
        else:
            candidate = bool(np.all(a < self.release * thr))
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
