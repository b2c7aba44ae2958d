"""Payload identification: mass, centre of mass and inertia of a load on one link, the arm model fixed.

With the arm's parameters pi_arm taken from the URDF as given (typically an identified one), the torque
the payload causes is linear in its 10 parameters pi_L in the frame of its link L::

    tau − Y pi_arm = Y_b X(ᵇT_L) pi_L + Y_f phi

where Y_b is the regressor block of the body b that L is welded to and X the parameter transform of
:func:`~robot_dynamics_ros.identification.regressor.transform_parameters`. pi_L is estimated with the
same physically consistent MAP solve as the arm (log-Cholesky), under a weak prior (a 0.01 kg point at
the link origin, spreads 50 kg, 5 kg·m, 1 kg·m²: the data decide), jointly with the joint friction
(prior: the URDF's <dynamics>), which a payload changes (Coulomb friction grows with load).
"""
from __future__ import annotations

import numpy as np

from robot_dynamics_ros.identification.data import Prepared
from robot_dynamics_ros.identification.estimate import (IDENTIFIED_RATIO, MIN_VELOCITY, _friction_prior,
                                                        _aligned, _map_solve, choose_coulomb_velocity)
from robot_dynamics_ros.identification.pipeline import Outcome
from robot_dynamics_ros.identification.regressor import (FRICTION_NAMES, PARAMETER_NAMES, Regressor,
                                                         parameters_to_inertial, transform_parameters)
from robot_dynamics_ros.identification.validate import split, validation_report

__all__ = ["identify_payload", "run_payload"]


class PayloadFit:
    """pi (10,) in the link frame; mass kg, com (3,) m, inertia (3, 3) kg·m² about the COM, link axes;
    friction (n, 3); posterior_std (10 + 3n,); noise_std (n,); warnings; coulomb_velocity (rad/s) and
    effort_shift (s) used."""

    def __init__(self, reg, link, body, X, x, x0, s0, post, noise, warnings, status, coulomb_velocity=0.0,
                 effort_shift=0.0):
        self.regressor, self.link, self.body, self.X = reg, link, body, X
        self.coulomb_velocity, self.effort_shift = float(coulomb_velocity), float(effort_shift)
        self.x, self.x_prior, self.prior_std, self.posterior_std = x, x0, s0, post
        self.noise_std, self.warnings, self.status = noise, warnings, status
        self.pi = x[:10]
        self.mass, self.com, self.inertia = parameters_to_inertial(self.pi)
        self.friction = x[10:].reshape(-1, 3)

    def predict(self, q, qd, qdd) -> np.ndarray:
        """Torque (N, n) of the arm with this payload and friction, N·m."""
        reg = self.regressor
        Y = reg.inertial(q, qd, qdd)
        pi = reg.parameters()
        pi[10 * self.body:10 * self.body + 10] += self.X @ self.pi
        return Y @ pi + reg.friction(qd, self.coulomb_velocity) @ self.friction.ravel()


def identify_payload(model, link: str, q, qd, qdd, tau, *, prior_weight: float = 1.0,
                     min_velocity: float = MIN_VELOCITY, sample_correlation: float = 1.0,
                     max_nfev: int = 100, coulomb_velocity: float | None = None, tau_rate=None,
                     effort_shift: float | None = None) -> PayloadFit:
    """Estimate the payload on ``link`` (see the module docstring); arrays (N, n) in model order.
    ``coulomb_velocity``: v_s of fc·tanh(qd / v_s) (0: sign; None: chosen by
    :func:`~robot_dynamics_ros.identification.estimate.choose_coulomb_velocity`); ``tau_rate``,
    ``effort_shift``: the effort-state alignment, as :func:`~robot_dynamics_ros.identification.estimate.identify`.

    Raises:
        ValueError: unknown link, or a link fixed to the root; bad arrays (as :func:`identify`).
    """
    reg = Regressor(model)
    body, T = reg.link_transform(link)
    X = transform_parameters(T)
    tau = reg.check_array(tau, "tau")
    Y = reg.inertial(q, qd, qdd)
    N, n = tau.shape
    Wp = Y[:, :, 10 * body:10 * body + 10] @ X
    b = tau - Y @ reg.parameters()
    if coulomb_velocity is None:
        coulomb_velocity, _ = choose_coulomb_velocity(reg, Wp, b, qd)
    W = np.concatenate([Wp, reg.friction(qd, coulomb_velocity)], axis=2)
    b, shift, notes = _aligned(W, b, tau_rate, effort_shift, np.abs(np.asarray(qd, dtype=float)) >= min_velocity)
    f0, s_f = _friction_prior(model)
    x0 = np.concatenate([[0.01, 0, 0, 0, 1e-6, 0, 1e-6, 0, 0, 1e-6], f0])
    s0 = np.concatenate([[50.0, 5.0, 5.0, 5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], s_f]) / float(prior_weight)
    names = tuple(f"payload.{p}" for p in PARAMETER_NAMES) + tuple(
        f"{j}.{f}" for j in model.joint_names for f in FRICTION_NAMES)
    fit = _map_solve(model, W, b, qd, names, x0, s0, 1, False, min_velocity, max_nfev, sample_correlation)
    return PayloadFit(reg, link, body, X, fit.x, x0, fit.s0, fit.post, fit.noise, notes + fit.warnings,
                      fit.status, coulomb_velocity, shift)


def run_payload(model, link: str, data: Prepared, *, holdout: float = 0.25, prior_weight: float = 1.0,
                min_velocity: float = MIN_VELOCITY, coulomb_velocity: float | None = None,
                effort_shift: float | None = None) -> Outcome:
    """Fit on the first block, validate on the held-out block (arm URDF without / with the payload)."""
    sp = split(data, holdout)
    q, qd, qdd, tau, _ = sp.take(data, "fit")
    try:
        fit = identify_payload(model, link, q, qd, qdd, tau, prior_weight=prior_weight, min_velocity=min_velocity,
                               sample_correlation=data.correlation, coulomb_velocity=coulomb_velocity,
                               tau_rate=None if data.tau_rate is None else data.tau_rate[sp.fit],
                               effort_shift=effort_shift)
    except ValueError as exc:
        raise ValueError(f"--payload {link}: {exc}") from None
    reg = fit.regressor
    ok = fit.posterior_std[:10] < IDENTIFIED_RATIO * fit.prior_std[:10]
    report = {"robot": model.description.name, "joints": list(model.joint_names), "samples": int(data.t.size),
              "dt_s": data.dt, "filter_window_samples": data.window, "notes": list(data.notes),
              "warnings": list(fit.warnings), "solver": fit.status, "noise_std": fit.noise_std,
              "coulomb_velocity": fit.coulomb_velocity, "effort_shift_s": fit.effort_shift,
              "data_rank": int(np.sum(ok)), "structural_base_parameters": 10, "condition_number": float("nan"),
              "payload": {"link": link, "mass": fit.mass, "com": fit.com, "inertia": fit.inertia,
                          "mass_std": fit.posterior_std[0],
                          "not_identified": [PARAMETER_NAMES[k] for k in range(10) if not ok[k]]},
              "friction": {jn: dict(zip(("coulomb", "viscous", "offset"), fit.friction[j]))
                           for j, jn in enumerate(model.joint_names)}}
    qv, qdv, qddv, _, tau_raw = sp.take(data, "validation")
    Yv = reg.inertial(qv, qdv, qddv)
    f_urdf = reg.friction(qdv) @ np.column_stack([model.friction, model.damping, np.zeros(model.n)]).ravel()
    pu = Yv @ reg.parameters() + f_urdf
    pp = fit.predict(qv, qdv, qddv)
    report["validation_block_s"] = [float(data.t[sp.validation][0]), float(data.t[sp.validation][-1])]
    report["validation"] = validation_report(model.joint_names, pu, pp, tau_raw, np.abs(qdv) >= min_velocity)[0]
    return Outcome(fit, report, data.t[sp.validation], tau_raw, pu, pp)
