"""Exact time along a stage of the jerk-limited timing, where x = ṡ² is quadratic in the path coordinate.

On a stage x(σ) = x_i + 2 u_i σ + v σ² (σ from the stage's start, u = s̈ = u_i + v σ linear, v = du/ds), so
u̇ = v ṡ and the pair (u, √|v| ṡ) turns at the constant rate √|v|: for v < 0 it moves on a circle
(u² + |v| ṡ² constant) and the angle atan2(√|v| ṡ, u) grows at rate √|v|; for v > 0 on a hyperbola
(u² − v ṡ² constant) and ln(u + √v ṡ) grows at rate √v (ln(√v ṡ − u) falls at that rate). The time is the
change of that angle over the rate — the closed forms of ∫ dσ / √x(σ), arranged without cancellation:
differences of nearby values are written as log1p / atan2 of their small relative change, b − a =
(x(σ) − x_i) / (a + b), and a stage through the minimum of x (u from negative to positive) is split there.
A Gauss–Legendre rule of fixed order loses accuracy where x nearly vanishes inside a stage (1/√x is nearly
singular there); these forms do not. Compiled (numba): one scalar kernel per stage, called in loops by
the wrappers here and by the solver's own kernels.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["time_to", "position_at", "time_to1", "position_at1"]


@njit(cache=True, nogil=True, error_model="numpy")
def time_to1(xi, ui, v, sig):  # pragma: no cover - compiled
    """:func:`time_to` for one stage (scalars), callable from other compiled kernels."""
    xi = max(xi, 0.0)
    if sig <= 0.0:
        return 0.0
    x1 = xi + 2.0 * ui * sig + v * sig * sig
    if x1 <= 0.0 and not v > 0.0:
        return np.inf  # x reaches 0 inside (0, σ] (stops there) and x(σ) ≤ 0
    a = math.sqrt(xi)
    b = math.sqrt(max(x1, 0.0))
    u1 = ui + v * sig
    db = sig * (2.0 * ui + v * sig) / (a + b)  # b − a
    out = np.inf
    if abs(v) * sig * sig <= 1e-12 * (xi + abs(ui) * sig):
        # x linear to 12 digits over the interval: t = (b − a) / u_i = 2σ / (a + b)
        if x1 > 0.0:
            out = 2.0 * sig / (a + b)
    elif v < 0.0:
        # atan2 of the cross and dot products of the start and end (u, √w ṡ), w = −v
        w = -v
        rw = math.sqrt(w)
        out = math.atan2(rw * (ui * db + a * w * sig), ui * u1 + w * a * b) / rw
    else:
        rv = math.sqrt(v)
        if ui >= 0.0:
            if a > 0.0 or ui > 0.0:  # u ≥ 0 throughout (x rising): ln(u + √v ṡ) grows at √v
                out = math.log1p(rv * (rv * sig + db) / (ui + rv * a)) / rv
        elif u1 <= 0.0:
            if x1 > 0.0:  # u ≤ 0 throughout (x falling): ln(√v ṡ − u) falls at √v
                out = -math.log1p(rv * (db - rv * sig) / (rv * a - ui)) / rv
        else:
            # u from negative to positive: through the minimum x_m = x_i − u_i²/v at σ* = −u_i/v
            ss = -ui / v
            xm = xi - ui * ui / v
            if xm > 0.0:
                sm = math.sqrt(xm)
                d1 = -v * ss * ss / (sm + a)  # √x_m − a
                t1 = -math.log1p(rv * (d1 - rv * ss) / (rv * a - ui)) / rv
                d2 = v * (sig - ss) ** 2 / (b + sm)  # b − √x_m
                t2 = math.log1p((rv * (sig - ss) + d2) / sm) / rv
                out = t1 + t2
    if math.isnan(out):
        return np.inf
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def position_at1(xi, ui, v, dd, tau, iterations):  # pragma: no cover - compiled
    """:func:`position_at` for one stage (scalars), callable from other compiled kernels."""
    lo, hi = 0.0, dd
    tau = min(max(tau, 0.0), time_to1(xi, ui, v, dd))
    sig = min(max(tau * math.sqrt(max(xi, 0.0)), 0.0), dd)
    for _ in range(iterations):
        r = time_to1(xi, ui, v, sig) - tau
        if abs(r) <= 1e-15 * (1.0 + tau):
            break
        if r > 0:
            hi = sig
        else:
            lo = sig
        new = sig - r * math.sqrt(max(xi + 2.0 * ui * sig + v * sig * sig, 0.0))
        if not (new > lo and new < hi):  # Newton left the bracket (or is not finite): bisect
            new = 0.5 * (lo + hi)
        sig = new
        if hi - lo <= 1e-15 * (1.0 + dd):
            break
    return sig


@njit(cache=True, nogil=True)
def _time_to_all(xi, ui, v, sig, out):  # pragma: no cover - compiled
    for k in range(out.shape[0]):
        out[k] = time_to1(xi[k], ui[k], v[k], sig[k])


@njit(cache=True, nogil=True)
def _position_at_all(xi, ui, v, dd, tau, iterations, out):  # pragma: no cover - compiled
    for k in range(out.shape[0]):
        out[k] = position_at1(xi[k], ui[k], v[k], dd[k], tau[k], iterations)


def _flat(*arrays):
    b = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in arrays))
    return b[0].shape, [np.ascontiguousarray(a).ravel() for a in b]


def time_to(xi, ui, v, sig) -> np.ndarray:
    """∫_0^σ dσ' / √(x_i + 2 u_i σ' + v σ'²), s, elementwise.

    Args: xi (K,) x at the stage's start ≥ 0 (rad²/s² per path unit²), ui (K,) u there, v (K,) du/ds,
        sig (K,) σ ≥ 0 (path units; arrays broadcast).
    Returns: (K,) times, s (the broadcast shape); inf where x ≤ 0 somewhere in (0, σ) (the stage stops or
        reverses there).
    """
    shape, (xi, ui, v, sig) = _flat(xi, ui, v, sig)
    out = np.empty(xi.shape[0])
    _time_to_all(xi, ui, v, sig, out)
    return out.reshape(shape)


def position_at(xi, ui, v, dd, tau, iterations: int = 60) -> np.ndarray:
    """σ in [0, Δ] with :func:`time_to` (xi, ui, v, σ) = τ, elementwise: Newton steps (the derivative is
    1/√x(σ)) kept inside a bisection bracket, at most ``iterations``.

    Args: xi, ui, v as :func:`time_to`; dd (K,) the stage lengths Δ; tau (K,) times from the stage's start, s
        (clipped to [0, the stage's time]).
    Returns: (K,) σ (the broadcast shape).
    """
    shape, (xi, ui, v, dd, tau) = _flat(xi, ui, v, dd, tau)
    out = np.empty(xi.shape[0])
    _position_at_all(xi, ui, v, dd, tau, int(iterations), out)
    return out.reshape(shape)
