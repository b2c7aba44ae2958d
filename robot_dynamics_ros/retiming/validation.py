"""Checks of a retiming request before any path is built: the request mapped to the model's joint order
(:func:`map_request`), and :class:`RequestChecks` — the limits it applies (scaled, cached), position and
start/end velocity limits, gravity against the torque limit, the direction of a start/end velocity, the short
way for continuous joints. A refused request raises :class:`~robot_dynamics_ros.retiming.request.RetimeFailure`
naming the joint, waypoint and limit.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from robot_dynamics_ros.retiming.request import DIRECTION_TOL, RetimeFailure, RetimeOptions, RetimeStatus

__all__ = ["map_request", "RequestChecks"]

#: relative tolerance for "at the limit" checks of the request (waypoint / velocity limits)
_LIMIT_TOL = 1e-9


@njit(cache=True, nogil=True)
def _first_outside(wp, lo, hi):  # pragma: no cover - compiled
    """Flat index k·n + j of the first wp[k, j] outside [lo[j], hi[j]] (or NaN), -1 if none."""
    w, n = wp.shape
    for k in range(w):
        for j in range(n):
            if not (lo[j] <= wp[k, j] <= hi[j]):
                return k * n + j
    return -1


def map_request(model, waypoints, joint_names, start_velocity, end_velocity, hold):
    """The request in the model's joint order: (waypoints (W, n), start velocity (n,), end velocity (n,)),
    columns matched by name, joints absent from ``joint_names`` at their ``hold`` value (arguments as
    :meth:`~robot_dynamics_ros.retiming.retimer.Retimer.retime`).

    Raises:
        RetimeFailure: INVALID_REQUEST naming the bad shape, value, or unknown, duplicate or missing joint.
    """
    m = model
    if (joint_names is None and not hold and start_velocity is None and end_velocity is None
            and isinstance(waypoints, np.ndarray) and waypoints.ndim == 2 and waypoints.shape[0] > 0
            and waypoints.shape[1] == m.n and np.isfinite(waypoints).all()):
        z = np.zeros(m.n)  # fast path: an (W, n) array in model order
        return np.array(waypoints, dtype=float), z, z
    try:
        wp_in = np.array(waypoints, dtype=float)
    except (TypeError, ValueError) as exc:
        raise RetimeFailure(RetimeStatus.INVALID_REQUEST, f"waypoints: not numeric ({exc})") from None
    if wp_in.ndim == 1 and wp_in.size > 0 and joint_names is not None and len(joint_names) == wp_in.size:
        wp_in = wp_in[None, :]
    if wp_in.ndim != 2 or wp_in.shape[0] == 0:
        raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                       f"waypoints: expected a (W, k) array with W ≥ 1, got shape {wp_in.shape}")
    if joint_names is None:
        cols = list(range(m.n))
        if wp_in.shape[1] != m.n:
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                           f"waypoints: {wp_in.shape[1]} columns but the model has {m.n} joints "
                           f"{list(m.joint_names)} (give joint_names)")
        label = list(m.joint_names)
    else:
        label = [str(j) for j in joint_names]
        if len(label) != wp_in.shape[1]:
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                           f"joint_names: {len(label)} names for {wp_in.shape[1]} columns of waypoints")
        seen = set()
        cols = []
        for name in label:
            if name in seen:
                raise RetimeFailure(RetimeStatus.INVALID_REQUEST, f"joint_names: joint '{name}' appears twice")
            seen.add(name)
            if name not in m.index:
                held = " (held fixed in this model)" if name in m.held_joints else ""
                raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                               f"joint_names: unknown joint '{name}'{held}; model joints are "
                               f"{list(m.joint_names)}")
            cols.append(m.index[name])
    bad = np.argwhere(~np.isfinite(wp_in))
    if bad.size:
        w, c = bad[0]
        raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                       f"waypoint {w}: joint '{label[c]}' position is {wp_in[w, c]} (not finite)")
    named = set(label)
    missing = [j for j in m.joint_names if j not in named and j not in (hold or {})]
    if missing:
        raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                       f"joint_names: model joint(s) {missing} are neither in the request nor in hold "
                       f"(give their positions in hold)")
    base = m.neutral().copy()
    for name, value in (hold or {}).items():
        if name not in m.index:
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST, f"hold: unknown joint '{name}'")
        if not math.isfinite(float(value)):
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST, f"hold: joint '{name}' value {value} not finite")
        if name not in named:
            base[m.index[name]] = float(value)
    wp = np.repeat(base[None, :], wp_in.shape[0], axis=0)
    wp[:, cols] = wp_in

    def velocity(v, what):
        if v is None or len(v) == 0:
            return np.zeros(m.n)
        arr = np.asarray(v, dtype=float).ravel()
        if arr.shape[0] != len(cols):
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                           f"{what}: {arr.shape[0]} values for {len(cols)} joints")
        if not np.all(np.isfinite(arr)):
            j = int(np.flatnonzero(~np.isfinite(arr))[0])
            raise RetimeFailure(RetimeStatus.INVALID_REQUEST, f"{what}: joint '{label[j]}' is {arr[j]}")
        out = np.zeros(m.n)
        out[cols] = arr
        return out

    return wp, velocity(start_velocity, "start_velocity"), velocity(end_velocity, "end_velocity")


class RequestChecks:
    """The limits a request applies to ``model`` and the checks against them (caches keyed on the model's
    limits by value and the request's scales)."""

    def __init__(self, model):
        self.model = model
        self._limits_cache = None

    def limits(self, options: RetimeOptions):
        """(velocity, acceleration, torque) limits (n,) with the request's scales / margin applied; cached
        (callers must not modify them) while the model's limits (by value) and the scales stay the same."""
        m = self.model
        key = (options.velocity_scale, options.acceleration_scale, options.torque_margin,
               m.velocity_limit.tobytes(), m.acceleration_limit.tobytes(), m.effort_limit.tobytes())
        cached = self._limits_cache
        if cached is None or cached[0] != key:
            lims = (m.velocity_limit * options.velocity_scale, m.acceleration_limit * options.acceleration_scale,
                    m.effort_limit * options.torque_margin)
            cached = (key, lims, bool(np.any(np.isfinite(lims[2]))))
            self._limits_cache = cached
        return cached[1]

    def use_torque(self, tlim) -> bool:
        cached = self._limits_cache
        return cached[2] if cached is not None and cached[1][2] is tlim else bool(np.any(np.isfinite(tlim)))

    def position_bounds(self):
        m = self.model
        key = (m.lower.tobytes(), m.upper.tobytes())
        if getattr(self, "_bounds_key", None) != key:
            self._bounds_key = key
            self._bounds = (m.lower - _LIMIT_TOL * (1.0 + np.abs(m.lower)),
                            m.upper + _LIMIT_TOL * (1.0 + np.abs(m.upper)))
        return self._bounds

    def jerk_limits(self, options) -> np.ndarray:
        """(n,) jerk limits: the model's × jerk_scale, options.jerk_limit where the model has none."""
        jl = np.asarray(getattr(self.model, "jerk_limit", np.full(self.model.n, np.inf)), dtype=float)
        jl = jl * options.jerk_scale
        if options.jerk_limit is not None:
            jl = np.where(np.isfinite(jl), jl, float(options.jerk_limit))
        return jl

    def warnings(self, options) -> tuple[str, ...]:
        """What the request relies on without a configured limit, or asks for without effect (one line each)."""
        _, alim, tlim = self.limits(options)
        names = self.model.joint_names
        out = ()
        if options.jerk_scale != 1.0 and not np.isfinite(self.jerk_limits(options)).any():
            out += (f"jerk_scale={options.jerk_scale:g} has no effect: no jerk limits are configured (joint_limits.yaml "
                    "max_jerk) and no jerk_limit is given",)
        free = [names[j] for j in range(len(names)) if not np.isfinite(alim[j])]
        if not free:
            return out
        unbounded = "" if all(np.isfinite(tlim[self.model.index[j]]) for j in free) else \
            ", and not at all where a joint has no torque limit"
        return out + (f"no acceleration limits configured for joints {free}: accelerations are bounded only by "
                      f"torque limits{unbounded}",)

    def unwrap(self, wp):
        """Continuous joints take the short way between consecutive waypoints: each step wrapped into
        [-π, π] (+3.1 → -3.1 rad is a +0.083 rad move to 3.183 rad)."""
        m = self.model
        cont = getattr(self, "_continuous", None)
        if cont is None:
            cont = self._continuous = np.array([t == "continuous" for t in m.joint_types], dtype=bool)
        if not cont.any() or wp.shape[0] < 2:
            return wp
        wp = wp.copy()
        step = np.diff(wp[:, cont], axis=0)
        step -= 2.0 * np.pi * np.round(step / (2.0 * np.pi))
        wp[1:, cont] = wp[0, cont] + np.cumsum(step, axis=0)
        return wp

    def check_request(self, wp, v0, v1, options, gravity=None, first=0, kept_idx=None):
        """Position and start/end velocity limits; with ``gravity`` (W, n) = g(q) at the waypoints also the
        torque limit against gravity alone (the first such waypoint, its worst joint)."""
        m = self.model
        names = m.joint_names
        vlim, _, tlim = self.limits(options)
        tol_lo, tol_hi = self.position_bounds()
        bad = _first_outside(wp, tol_lo, tol_hi)
        if bad >= 0:
            k, j = divmod(int(bad), wp.shape[1])
            w = k if kept_idx is None else int(kept_idx[first + k])
            raise RetimeFailure(RetimeStatus.POSITION_LIMIT,
                           f"waypoint {w}: joint '{names[j]}' position {wp[k, j]:.6g} is outside its position "
                           f"limits [{m.lower[j]:.6g}, {m.upper[j]:.6g}]")
        # a joint that may not move at all (URDF velocity="0": romeo's LHand, iris's rotors): refused by name
        # here, where the solver could only say that no profile exists
        still = np.flatnonzero((vlim <= 0.0) & (np.ptp(wp, axis=0) > 0.0))
        if still.size:
            j = int(still[0])
            w = int(np.flatnonzero(np.diff(wp[:, j]))[0])
            w = w if kept_idx is None else int(kept_idx[first + w])
            raise RetimeFailure(RetimeStatus.VELOCITY_LIMIT,
                                f"joint '{names[j]}' has a velocity limit of {m.velocity_limit[j]:g} rad/s (URDF "
                                f"<limit velocity> or joint limits) but the path moves it between waypoints {w} and "
                                f"{w + 1}; give it a velocity limit or keep it still")
        for v, what in ((v0, "start_velocity"), (v1, "end_velocity")):
            if v is None or not v.any():
                continue
            over = np.flatnonzero(np.abs(v) > vlim * (1.0 + _LIMIT_TOL))
            if over.size:
                j = over[0]
                raise RetimeFailure(RetimeStatus.VELOCITY_LIMIT,
                               f"{what}: joint '{names[j]}' at {v[j]:.6g} rad/s exceeds its velocity limit "
                               f"{vlim[j]:.6g} rad/s (URDF {m.velocity_limit[j]:.6g} × velocity_scale "
                               f"{options.velocity_scale:g})")
        if gravity is not None:
            g = np.atleast_2d(gravity)
            with np.errstate(divide="ignore", invalid="ignore"):  # a zero torque limit (URDF effort="0"): a
                # joint gravity does not load stays within it, one it loads does not (inf)
                ratio = np.where(np.abs(g) > 0.0, np.abs(g) / tlim, 0.0)
            if ratio.max() <= 1.0:
                return
            over = np.flatnonzero((ratio > 1.0).any(axis=1))
            if over.size:  # the first such waypoint, its worst joint
                k = int(over[0])
                j = int(np.argmax(ratio[k]))
                w = k if kept_idx is None else int(kept_idx[first + k])
                raise RetimeFailure(RetimeStatus.GRAVITY_EXCEEDS_TORQUE,
                               f"waypoint {w}: gravity alone needs {g[k, j]:.6g} N·m at joint '{names[j]}', "
                               f"above its torque limit {tlim[j]:.6g} N·m (effort {m.effort_limit[j]:.6g} × "
                               f"torque_margin {options.torque_margin:g})")

    def check_direction(self, v, chord, what: str, waypoint: int) -> None:
        """Refuse a non-zero start / end velocity ``v`` (n,) rad/s that is not a positive multiple of the
        path's direction at that end: ``chord`` (n,), the first / last kept chord of the polyline (the
        segment the planner checked; the spline's end tangent is set to v's direction, so any other
        direction would make the path turn away from the chord right at the end), within
        :data:`DIRECTION_TOL`. ``waypoint``: its index in the request, for the message.

        Raises:
            RetimeFailure: INVALID_REQUEST naming the joints whose velocity disagrees and the path's direction.
        """
        if v is None or not v.any():
            return
        d = chord / np.linalg.norm(chord)
        speed = float(np.linalg.norm(v))
        along = float(v @ d)
        off = v - max(along, 0.0) * d
        if along > 0.0 and np.linalg.norm(off) <= DIRECTION_TOL * speed:
            return
        names = self.model.joint_names
        # when |off| exceeds the tolerance, some joint has |off_j| ≥ |off| / sqrt(n): the list is never empty
        bad = [names[j] for j in np.flatnonzero(np.abs(off) > DIRECTION_TOL * speed / math.sqrt(len(v)))]
        direction = ", ".join(f"{names[j]} {d[j]:.4g}" for j in range(len(d)))
        why = "points backwards along the path" if along <= 0.0 else "is not parallel to the path"
        raise RetimeFailure(RetimeStatus.INVALID_REQUEST,
                       f"{what}: joint(s) {bad} disagree with the path direction at waypoint {waypoint}; the "
                       f"velocity {why}: it must be a positive multiple of the path's direction there "
                       f"({direction}; unit vector along the {'first' if what == 'start_velocity' else 'last'} "
                       f"segment), within {DIRECTION_TOL:g} of its norm")
