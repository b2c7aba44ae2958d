"""Speed scaling of a running trajectory by virtual time (ROS-free).

A trajectory q(τ) is sampled at a virtual time τ that advances at the speed-scaling factor k ∈ [0, 1]
(τ̇ = k; k = 1 nominal speed, k = 0 stopped on the path). With q′ = dq/dτ and q″ = d²q/dτ² the desired
motion in real time is (chain rule)

    q̇ = k q′,    q̈ = k² q″ + k̇ q′,

so a model-based feedforward is RNEA(q, k q′, k² q″ + k̇ q′) — not RNEA(q, q′, q″), which at k = 0.5
over-predicts the dynamic torque (the velocity terms by 4×, the inertial ones by 4×). This is the virtual
time of ros2_controllers' joint_trajectory_controller speed scaling (2025; it scales only position
interfaces and forces k = 1 for effort), carried through to the accelerations.

k follows the requested factor through a rate and jerk limiter: |k̇| ≤ ``rate`` (1/s) and |k̈| ≤ ``jerk``
(1/s²). Why: a step in k is a step in q̇ = k q′ (an impulse in q̈); a bounded k̇ alone still steps q̈ by
k̇ q′ where the ramp starts and ends. With k̈ bounded as well, k̇ is continuous, so q̈ = k² q″ + k̇ q′ and the
commanded torque are continuous, and the acceleration the ramp adds is at most ``rate`` · |q′|. Each tick
k̇ moves by at most jerk·dt toward the largest speed from which braking at the jerk limit still stops at
the target (the discrete form of |k̇| = √(2 · jerk · |k_target − k|), the time-optimal approach of a
double integrator), so k arrives without overshoot; the last tick snaps k to the target and k̇ (then
below jerk·dt) to 0. Defaults (rate 2/s, jerk 20/s²): 1 → 0 in ≈ 0.6 s.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["DEFAULT_RATE", "DEFAULT_JERK", "VirtualClock", "scale_derivatives"]

#: default |k̇| limit, 1/s
DEFAULT_RATE = 2.0
#: default |k̈| limit, 1/s²
DEFAULT_JERK = 20.0


def scale_derivatives(k: float, k_dot: float, dq: np.ndarray, ddq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Real-time velocity and acceleration of a path sampled in virtual time.

    Args:
        k: τ̇ (1); k_dot: k̇ (1/s); dq, ddq: ``(n,)`` q′ (rad per unit τ) and q″.

    Returns:
        ``(q̇, q̈)`` = ``(k q′, k² q″ + k̇ q′)``, rad/s and rad/s².
    """
    return k * dq, (k * k) * ddq + k_dot * dq


class VirtualClock:
    """τ̇ = k with k rate- and jerk-limited toward a target (module docstring).

    Args:
        factor: initial k (and target), in [0, 1].
        rate: |k̇| limit (1/s), > 0. jerk: |k̈| limit (1/s²), > 0.

    Raises:
        ValueError: a value out of range or not finite.

    Attributes:
        k, k_dot: the current factor and its rate (1/s). target: the requested factor. stopping: a stop
        (:meth:`stop`) overrides the target with 0 until :meth:`resume`.
    """

    def __init__(self, factor: float = 1.0, rate: float = DEFAULT_RATE, jerk: float = DEFAULT_JERK):
        self.target = self._factor(factor)
        for name, v in (("rate", rate), ("jerk", jerk)):
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"speed scaling {name} = {v!r}: must be finite and > 0")
        self.rate, self.jerk = float(rate), float(jerk)
        self.k = self.target
        self.k_dot = 0.0
        self.stopping = False
        self._offset = 0.0      # t − τ: kept as an offset so that τ = t exactly while k = 1
        self._last_t: float | None = None

    @staticmethod
    def _factor(k: float) -> float:
        k = float(k)
        if not (math.isfinite(k) and 0.0 <= k <= 1.0):
            raise ValueError(f"speed scaling factor {k!r}: must be finite and in [0, 1]")
        return k

    def set_target(self, k: float) -> None:
        """Request factor ``k`` ∈ [0, 1]; k moves there within the limits. Raises ValueError otherwise."""
        self.target = self._factor(k)

    def stop(self) -> None:
        """Bring k to 0 within the limits (a smooth stop on the path), whatever the target."""
        self.stopping = True

    def resume(self, jump: bool = False) -> None:
        """End a stop; k returns to the target (at once with ``jump``, allowed only while nothing moves
        along the path, i.e. q′ = 0)."""
        self.stopping = False
        if jump:
            self.k, self.k_dot = self.target, 0.0

    @property
    def stopped(self) -> bool:
        """A stop was requested and k has reached 0."""
        return self.stopping and self.k == 0.0 and self.k_dot == 0.0

    def virtual(self, t: float) -> float:
        """τ at real time ``t`` (s) extrapolated at the current k (exact up to the last :meth:`advance`)."""
        if self._last_t is None:
            return t - self._offset
        return (self._last_t - self._offset) + self.k * (t - self._last_t)

    def advance(self, t: float) -> float:
        """Move to real time ``t`` (s): update k, k̇ through the limiter and integrate τ (trapezoid, exact
        for a linear k). Returns τ (s). A ``t`` earlier than the last one advances nothing and returns
        :meth:`virtual` at ``t``."""
        if self._last_t is None:
            self._last_t = t
            return t - self._offset
        dt = t - self._last_t
        if dt <= 0.0:
            # an earlier sample (a state stamped before the safety timer's last tick) reads τ back at the
            # current k without moving the clock: at k = 1 exactly t - offset, whatever ticked in between
            return self.virtual(t)
        self._last_t = t
        k0 = self.k
        target = 0.0 if self.stopping else self.target
        if k0 != target or self.k_dot != 0.0:
            self._limit(target, dt)
        self._offset += (1.0 - 0.5 * (k0 + self.k)) * dt
        return t - self._offset

    def _limit(self, target: float, dt: float) -> None:
        e = target - self.k
        j = self.jerk
        dv = j * dt
        # the largest speed x from which braking at the jerk limit, one tick after this one, still stops
        # at the target: x² / (2j) + x·dt/2 ≤ |e| − (the distance covered during this tick)
        room = max(abs(e) - 0.5 * abs(self.k_dot) * dt, 0.0)
        x = 0.5 * (-dv + math.sqrt(dv * dv + 8.0 * j * room))
        v_des = math.copysign(min(self.rate, x), e)
        v = self.k_dot + min(max(v_des - self.k_dot, -dv), dv)
        k = self.k + 0.5 * (self.k_dot + v) * dt
        if (target - k) * e <= 0.0 or abs(target - k) < 1e-12:
            # reached or crossed within this tick: on the braking curve |k̇| is then below about one
            # tick of jerk, so snapping k̇ to 0 is a step of that size
            k, v = target, 0.0
        self.k, self.k_dot = min(max(k, 0.0), 1.0), v
