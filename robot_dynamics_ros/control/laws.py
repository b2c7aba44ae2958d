"""Control laws as pure functions of the state and a dynamics engine (no ROS, no state of their own).

All arrays are in the model's joint order (``RobotModel.joint_names``), shape ``(n,)``: q in rad (m for
prismatic joints), qd in rad/s, qdd in rad/s², tau in N·m (N). The engine is anything with the
:class:`Dynamics` protocol (``PinocchioDynamics``; ``NewtonEulerDynamics`` with ``(n,)`` inputs).

Sources:
    * RNEA and g(q) = RNEA(q, 0, 0): Featherstone 2008, *Rigid Body Dynamics Algorithms*, §5.3, Table 5.1.
    * Feedforward (inverse dynamics of the desired motion) and computed-torque control:
      Lynch & Park 2017, *Modern Robotics*, §11.4.1, eqs. (11.33) (feedforward) and (11.35) (computed
      torque, here without the integral term).
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

__all__ = ["Dynamics", "gravity_compensation", "feedforward", "computed_torque", "clamp_effort_list", "wrap_angle"]


class Dynamics(Protocol):
    """The part of the engine contract (docs/ARCHITECTURE.md) the laws use."""

    def rnea(self, q, qd, qdd) -> np.ndarray: ...
    def gravity(self, q) -> np.ndarray: ...
    def friction_torque(self, qd) -> np.ndarray: ...


def gravity_compensation(engine: Dynamics, q: np.ndarray, *, qd: np.ndarray | None = None,
                         friction: bool = False, hardware_compensates_gravity: bool = False) -> np.ndarray:
    """tau = g(q) [+ tau_friction(qd)]: the torque that holds the arm still against gravity (and friction).

    Args:
        engine: dynamics engine of the robot (gravity vector and payload are the engine's model's).
        q: ``(n,)`` joint positions, rad.
        qd: ``(n,)`` joint velocities, rad/s; required when ``friction`` is True.
        friction: add the viscous + Coulomb friction torque of URDF ``<dynamics>``
            (``engine.friction_torque(qd)``).
        hardware_compensates_gravity: the drives already add g(q); the gravity term is left out (only
            friction, if enabled, remains).

    Returns:
        ``(n,)`` torque, N·m.

    Raises:
        ValueError: ``friction`` is True and ``qd`` is None.
    """
    if hardware_compensates_gravity:
        tau = np.zeros(len(q))
    else:
        tau = np.array(engine.gravity(q), dtype=float)
    if friction:
        if qd is None:
            raise ValueError("friction compensation needs qd (joint velocities), got None")
        tau += engine.friction_torque(qd)
    return tau


def feedforward(engine: Dynamics, q_d: np.ndarray, qd_d: np.ndarray, qdd_d: np.ndarray, *,
                friction: bool = False) -> np.ndarray:
    """tau_ff = M(q_d) qdd_d + C(q_d, qd_d) qd_d + g(q_d) = RNEA(q_d, qd_d, qdd_d) [+ tau_friction(qd_d)].

    Lynch & Park 2017, eq. (11.33); ``friction``: plus the model's friction torque at the desired velocity
    (``engine.friction_torque(qd_d)``, the friction feedforward of
    :func:`~robot_dynamics_ros.control.computed_torque.control_torque`). Shapes ``(n,)``; rad, rad/s,
    rad/s² in, N·m out.
    """
    tau = np.asarray(engine.rnea(q_d, qd_d, qdd_d), dtype=float)
    return tau + engine.friction_torque(qd_d) if friction else tau


def computed_torque(engine: Dynamics, q: np.ndarray, qd: np.ndarray, q_d: np.ndarray, qd_d: np.ndarray,
                    qdd_d: np.ndarray, kp, kd) -> np.ndarray:
    """tau = M(q) (qdd_d + Kd (qd_d - qd) + Kp (q_d - q)) + C(q, qd) qd + g(q).

    Lynch & Park 2017, eq. (11.35) without the integral term; evaluated as one RNEA call,
    ``RNEA(q, qd, a)`` with the commanded acceleration ``a`` (since RNEA(q, qd, a) = M a + C qd + g).

    Args:
        q, qd: ``(n,)`` measured positions (rad) and velocities (rad/s).
        q_d, qd_d, qdd_d: ``(n,)`` desired positions, velocities, accelerations (rad, rad/s, rad/s²).
        kp: ``(n,)`` or scalar position gains, 1/s².
        kd: ``(n,)`` or scalar velocity gains, 1/s.

    Returns:
        ``(n,)`` torque, N·m.
    """
    a = qdd_d + kd * (qd_d - qd) + kp * (q_d - q)
    return np.asarray(engine.rnea(q, qd, a), dtype=float)


def clamp_effort_list(tau: list[float], limit: list[float]) -> int:
    """Clamp a list of torques IN PLACE to ``[-limit, limit]``; return how many entries were clamped.

    The per-message clamp of the control nodes: plain float comparisons on a Python list (~1 µs for
    7 joints, against ~6 µs for np.clip + a count on an array). An entry with
    ``|tau| > limit`` (including ±inf) is set to ``±limit`` and counted; NaN passes through uncounted (the
    node's non-finite check rejects it).

    Args:
        tau: ``n`` torques, N·m (N for prismatic joints); modified in place.
        limit: ``n`` non-negative effort limits (URDF ``<limit effort>``), same order and units.

    Returns:
        The number of clamped entries.
    """
    count = 0
    for k, x in enumerate(tau):
        lim = limit[k]
        if x > lim:
            tau[k] = lim
            count += 1
        elif x < -lim:
            tau[k] = -lim
            count += 1
    return count


def wrap_angle(x):
    """``x`` (rad, scalar or array) wrapped into ``[-pi, pi)``: the short way of an angle difference."""
    return (np.asarray(x, dtype=float) + np.pi) % (2 * np.pi) - np.pi
