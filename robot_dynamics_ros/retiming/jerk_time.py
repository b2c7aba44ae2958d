"""Exact time along a stage of the jerk-limited timing, where x = ṡ² is quadratic in the path coordinate.

On a stage x(σ) = x_i + 2 u_i σ + v σ² (σ from the stage's start, u = s̈ = u_i + v σ linear, v = du/ds), so
u̇ = v ṡ and the pair (u, √|v| ṡ) turns at the constant rate √|v|: for v < 0 it moves on a circle
(u² + |v| ṡ² constant) and the angle atan2(√|v| ṡ, u) grows at rate √|v|; for v > 0 on a hyperbola
(u² − v ṡ² constant) and ln(u + √v ṡ) grows at rate √v (ln(√v ṡ − u) falls at that rate). The time is the
change of that angle over the rate — the closed forms of ∫ dσ / √x(σ), arranged without cancellation:
differences of nearby values are written as log1p / atan2 of their small relative change, b − a =
(x(σ) − x_i) / (a + b), and a stage through the minimum of x (u from negative to positive) is split there.
A Gauss–Legendre rule of fixed order loses accuracy where x nearly vanishes inside a stage (1/√x is nearly
singular there); these forms do not.
"""
from __future__ import annotations

import numpy as np

__all__ = ["time_to", "position_at"]


def time_to(xi, ui, v, sig) -> np.ndarray:
    """∫_0^σ dσ' / √(x_i + 2 u_i σ' + v σ'²), s, elementwise.

    Args: xi (K,) x at the stage's start ≥ 0 (rad²/s² per path unit²), ui (K,) u there, v (K,) du/ds,
        sig (K,) σ ≥ 0 (path units; arrays broadcast).
    Returns: (K,) times, s; inf where x ≤ 0 somewhere in (0, σ) (the stage stops or reverses there).
    """
    xi, ui, v, sig = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (xi, ui, v, sig)))
    xi = np.maximum(xi, 0.0)
    out = np.full(xi.shape, np.inf)
    x1 = xi + 2 * ui * sig + v * sig ** 2
    a, b = np.sqrt(xi), np.sqrt(np.maximum(x1, 0.0))
    u1 = ui + v * sig
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        db = sig * (2 * ui + v * sig) / (a + b)  # b − a
        zero = sig <= 0.0
        out[zero] = 0.0
        # x linear to 12 digits over the interval: t = (b − a) / u_i = 2σ / (a + b)
        lin = ~zero & (np.abs(v) * sig ** 2 <= 1e-12 * (xi + np.abs(ui) * sig))
        ok = lin & (x1 > 0)
        out[ok] = 2 * sig[ok] / (a[ok] + b[ok])
        # v < 0: atan2 of the cross and dot products of the start and end (u, √w ṡ), w = −v
        m = ~zero & ~lin & (v < 0) & (x1 > 0)
        w = -v[m]
        rw = np.sqrt(w)
        cross = rw * (ui[m] * db[m] + a[m] * w * sig[m])
        dot = ui[m] * u1[m] + w * a[m] * b[m]
        out[m] = np.arctan2(cross, dot) / rw
        pos = ~zero & ~lin & (v > 0)
        rv = np.sqrt(np.where(pos, v, 1.0))
        # u ≥ 0 throughout (x rising): ln(u + √v ṡ) grows at √v
        m = pos & (ui >= 0) & ((a > 0) | (ui > 0))
        delta = rv[m] * (rv[m] * sig[m] + db[m]) / (ui[m] + rv[m] * a[m])
        out[m] = np.log1p(delta) / rv[m]
        # u ≤ 0 throughout (x falling): ln(√v ṡ − u) falls at √v
        m = pos & (u1 <= 0) & (x1 > 0) & ~(ui >= 0)
        delta = rv[m] * (db[m] - rv[m] * sig[m]) / (rv[m] * a[m] - ui[m])
        out[m] = -np.log1p(delta) / rv[m]
        # u from negative to positive: through the minimum x_m = x_i − u_i²/v at σ* = −u_i/v
        m = pos & (ui < 0) & (u1 > 0)
        vv, r = v[m], rv[m]
        ss = -ui[m] / vv
        xm = xi[m] - ui[m] ** 2 / vv
        sm = np.sqrt(np.maximum(xm, 0.0))
        d1 = -vv * ss ** 2 / (sm + a[m])  # √x_m − a
        t1 = -np.log1p(r * (d1 - r * ss) / (r * a[m] - ui[m])) / r
        d2 = vv * (sig[m] - ss) ** 2 / (b[m] + sm)  # b − √x_m
        t2 = np.log1p((r * (sig[m] - ss) + d2) / sm) / r
        out[m] = np.where(xm > 0, t1 + t2, np.inf)
    out[np.isnan(out)] = np.inf
    return out


def position_at(xi, ui, v, dd, tau, iterations: int = 60) -> np.ndarray:
    """σ in [0, Δ] with :func:`time_to` (xi, ui, v, σ) = τ, elementwise: Newton steps (the derivative is
    1/√x(σ)) kept inside a bisection bracket.

    Args: xi, ui, v as :func:`time_to`; dd (K,) the stage lengths Δ; tau (K,) times from the stage's start, s
        (clipped to [0, the stage's time]).
    Returns: (K,) σ.
    """
    xi, ui, v, dd, tau = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (xi, ui, v, dd, tau)))
    lo, hi = np.zeros(xi.shape), dd.copy()
    total = time_to(xi, ui, v, dd)
    tau = np.clip(tau, 0.0, total)
    with np.errstate(divide="ignore", invalid="ignore"):
        sig = np.clip(tau * np.sqrt(np.maximum(xi, 0.0)), 0.0, dd)
        for _ in range(iterations):
            r = time_to(xi, ui, v, sig) - tau
            hi = np.where(r > 0, sig, hi)
            lo = np.where(r <= 0, sig, lo)
            step = r * np.sqrt(np.maximum(xi + 2 * ui * sig + v * sig ** 2, 0.0))
            new = sig - step
            bad = ~np.isfinite(new) | (new <= lo) | (new >= hi)
            new = np.where(bad, 0.5 * (lo + hi), new)
            done = np.abs(r) <= 1e-15 * (1.0 + tau)
            sig = np.where(done, sig, new)
            if done.all() or np.all(hi - lo <= 1e-15 * (1.0 + dd)):
                break
    return sig
