"""Physically consistent identification of the inertial and friction parameters, regularized toward a prior.

The problem (a maximum a-posteriori estimate with a Gaussian prior centred on the URDF's values)::

    minimize_θ  Σ_k,j ((Y π(θ) + Y_f φ + Y_a Ia − tau)_kj / σ_j)²  +  Σ_p ((x_p − x0_p) / s_p)²

* x = (π, φ, Ia): 10 inertial parameters per body (:mod:`~robot_dynamics_ros.identification.regressor`
  convention), (fc, fv, fo) per joint, optionally the armature Ia per joint.
* π(θ) is the log-Cholesky parametrization (Rucker & Wensing, "Smooth parameterization of rigid-body
  inertia", IEEE RA-L 7(2), 2022): the pseudo-inertia J = [[Σ, h], [hᵀ, m]], Σ = ½ tr(I) E − I, is
  written J = U Uᵀ with U = e^α [[e^d1, s12, s13, t1], [0, e^d2, s23, t2], [0, 0, e^d3, t3], [0, 0, 0, 1]].
  Every θ ∈ R¹⁰ gives J ≻ 0, which is exactly physical consistency (Wensing, Kim & Slotine, "Linear matrix
  inequalities for physically consistent inertial parameter identification", IEEE RA-L 3(1), 2018): m > 0,
  I ≻ 0 and the triangle inequalities of the principal moments (the body is a positive mass density).
  Coulomb and viscous coefficients and armature are bounded below by 0; the offset is free.
* σ_j is the torque noise of joint j, estimated from the residual of an ordinary least-squares fit on the
  identifiable columns (so that every joint weighs by its own noise); s_p the prior's spread
  (:func:`default_prior_std`). A direction of parameter space the data does not excite (a null-space
  direction of Y, or one whose information is far below 1/s²) stays at the URDF's value; one the data
  excites is decided by the data.

The data term is reduced once by a QR factorization of the weighted regressor (‖A x − b‖² = ‖R x − Qᵀb‖²
+ const), so the nonlinear solve (scipy ``least_squares``, trust-region reflective, analytic Jacobian)
works on P + P rows whatever the number of samples.

Identifiability report: the linearized posterior covariance (AᵀA/σ² + diag(1/s²))⁻¹; a parameter whose
posterior standard deviation is below half its prior spread is "identified" by the data, the others are
"kept near the URDF" and listed as such.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import qr
from scipy.optimize import least_squares

from robot_dynamics_ros.identification.base import BaseParameters, base_parameters, condition_number
from robot_dynamics_ros.identification.pseudo_inertia import log_cholesky_from_parameters, parameters_from_log_cholesky
from robot_dynamics_ros.identification.regressor import FRICTION_NAMES, Regressor

__all__ = ["default_prior_std",
           "Identification", "identify", "structural_base", "choose_coulomb_velocity", "estimate_effort_shift",
           "IDENTIFIED_RATIO",
           "MIN_VELOCITY", "COULOMB_VELOCITIES"]

#: a parameter counts as identified when its posterior std is below this fraction of its prior spread
IDENTIFIED_RATIO = 0.5
#: default |qd| below which a joint's torque sample is left out of the fit (rad/s or m/s)
MIN_VELOCITY = 0.05
#: candidate Coulomb transition velocities v_s (rad/s or m/s) of fc·tanh(qd / v_s); 0 is fc·sign(qd)
COULOMB_VELOCITIES = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05)


# --------------------------------------------------------------------------------------------------
# priors
# --------------------------------------------------------------------------------------------------
def default_prior_std(pi0: np.ndarray) -> np.ndarray:
    """Prior spread s (10,) of one body's parameters around its URDF values pi0 (10,).

    Mass 30 % + 0.05 kg; first moments 30 % + 5 cm × m + 0.005 kg·m; inertias about the origin 50 % of
    their mean diagonal + 1e-3 kg·m². Wide enough that torque data decides every excited direction,
    finite so that unexcited directions stay at the URDF.
    """
    m0 = abs(pi0[0])
    s = np.empty(10)
    s[0] = 0.3 * m0 + 0.05
    s[1:4] = 0.3 * np.abs(pi0[1:4]) + 0.05 * m0 + 0.005
    s[4:] = 0.5 * (abs(pi0[4]) + abs(pi0[6]) + abs(pi0[9])) / 3.0 + 1e-3
    return s


def _friction_prior(model) -> tuple[np.ndarray, np.ndarray]:
    """URDF <dynamics> friction (Coulomb) and damping (viscous), offset 0; spreads from the effort limit."""
    n = model.n
    x0 = np.zeros(3 * n)
    s = np.zeros(3 * n)
    for j in range(n):
        x0[3 * j], x0[3 * j + 1] = model.friction[j], model.damping[j]
        e = model.effort_limit[j]
        base = max(0.05 * e, 1.0) if np.isfinite(e) else 5.0
        v = model.velocity_limit[j]
        s[3 * j], s[3 * j + 1], s[3 * j + 2] = base, base / (v if np.isfinite(v) and v > 0 else 1.0), base
    return x0, s


def structural_base(reg: Regressor, *, armature: bool = False, samples: int = 60, seed: int = 0) -> BaseParameters:
    """Base parameters of the model (inertial + friction [+ armature] columns) from random states."""
    rng = np.random.default_rng(seed)
    n = reg.n
    q = rng.uniform(-np.pi, np.pi, (samples, n))
    qd = rng.normal(0.0, 1.0, (samples, n))
    qdd = rng.normal(0.0, 1.0, (samples, n))
    W = _stack(reg, q, qd, qdd, armature)
    return base_parameters(W.reshape(-1, W.shape[2]), _names(reg, armature))


def _names(reg: Regressor, armature: bool) -> tuple[str, ...]:
    joints = reg.model.joint_names
    names = list(reg.parameter_names) + [f"{j}.{f}" for j in joints for f in FRICTION_NAMES]
    if armature:
        names += [f"{j}.Ia" for j in joints]
    return tuple(names)


def _stack(reg: Regressor, q, qd, qdd, armature: bool, coulomb_velocity: float = 0.0) -> np.ndarray:
    parts = [reg.inertial(q, qd, qdd), reg.friction(qd, coulomb_velocity)]
    if armature:
        parts.append(reg.armature(qdd))
    return np.concatenate(parts, axis=2)


# --------------------------------------------------------------------------------------------------
# the estimate
# --------------------------------------------------------------------------------------------------
@dataclass
class Identification:
    """Result of :func:`identify`. Arrays follow ``names`` (P,) = inertial (10 nb), friction (3 n)[, armature (n)].

    Attributes:
        x, x_prior: (P,) estimate and prior (URDF) values; prior_std, posterior_std (P,).
        identified: (P,) bool, posterior_std < IDENTIFIED_RATIO · prior_std.
        noise_std: (n,) torque noise per joint estimated from the OLS residual, N·m.
        data_rank: rank of the data's regressor; base: the model's structural base parameters;
        condition: condition number of the data's base regressor (columns normalized).
        armature: whether armature columns were fitted.  status: the solver's message.
        coulomb_velocity: v_s (rad/s) of the Coulomb law fc·tanh(qd / v_s) (0: fc·sign(qd)); the prior
            (URDF ``<dynamics friction>``) is predicted with sign(qd), as the nodes apply it.
        effort_shift: S (s) by which the effort samples were shifted to align with the state (see
            :func:`identify`); predictions are at the state's time.
    """

    regressor: Regressor
    names: tuple[str, ...]
    x: np.ndarray
    x_prior: np.ndarray
    prior_std: np.ndarray
    posterior_std: np.ndarray
    identified: np.ndarray
    noise_std: np.ndarray
    data_rank: int
    base: BaseParameters
    condition: float
    armature: bool
    status: str = ""
    warnings: list[str] = field(default_factory=list)
    coulomb_velocity: float = 0.0
    effort_shift: float = 0.0

    @property
    def n_inertial(self) -> int:
        return self.regressor.n_params

    @property
    def inertial(self) -> np.ndarray:
        """pi (10 nb,) of the identified bodies."""
        return self.x[:self.n_inertial]

    @property
    def friction(self) -> np.ndarray:
        """(n, 3): (fc N·m, fv N·m·s/rad, fo N·m) per joint."""
        n = self.regressor.n
        return self.x[self.n_inertial:self.n_inertial + 3 * n].reshape(n, 3)

    @property
    def armature_values(self) -> np.ndarray:
        """(n,) kg·m² (zeros when not fitted)."""
        n = self.regressor.n
        return self.x[self.n_inertial + 3 * n:] if self.armature else np.zeros(n)

    def regressor_matrix(self, q, qd, qdd) -> np.ndarray:
        """W (N, n, P): the identified model's torque is ``W @ x`` (its Coulomb law, fc·tanh(qd / v_s))."""
        return _stack(self.regressor, q, qd, qdd, self.armature, self.coulomb_velocity)

    def predict(self, q, qd, qdd, prior: bool = False) -> np.ndarray:
        """Predicted motor torque (N, n), N·m, of the identified model (or of the prior with ``prior``)."""
        if not prior:
            return self.regressor_matrix(q, qd, qdd) @ self.x
        return _stack(self.regressor, q, qd, qdd, self.armature, 0.0) @ self.x_prior

    def predict_rigid(self, q, qd, qdd) -> np.ndarray:
        """The URDF's rigid-body torque (N, n), N·m: the prior's inertial parameters, without the URDF's
        ``<dynamics damping friction>`` (simulation values, not a measured friction) and armature."""
        x = np.zeros_like(self.x_prior)
        x[:self.n_inertial] = self.x_prior[:self.n_inertial]
        return _stack(self.regressor, q, qd, qdd, self.armature, 0.0) @ x

    def friction_indices(self) -> np.ndarray:
        """Indices into :attr:`x` of the friction parameters (fc, fv, fo per joint, joint order)."""
        return np.arange(self.n_inertial, self.n_inertial + 3 * self.regressor.n)


def identify(model, q, qd, qdd, tau, *, armature: bool = False, prior_weight: float = 1.0,
             min_velocity: float = MIN_VELOCITY, sample_correlation: float = 1.0,
             max_nfev: int = 100, coulomb_velocity: float | None = None, tau_rate=None,
             effort_shift: float | None = None, fixed: np.ndarray | None = None) -> Identification:
    """Identify the inertial parameters of every body of ``model`` and the friction of every joint.

    Args:
        model: the :class:`~robot_dynamics_ros.model.RobotModel` whose URDF is the prior.
        q, qd, qdd: (N, n) rad, rad/s, rad/s² in ``model.joint_names`` order.
        tau: (N, n) measured joint torque, N·m (motor side, the sign of the model).
        armature: also fit a rotor inertia per joint (prior 0, spread 0.1 kg·m²).
        prior_weight: multiplies 1/s of the prior (larger keeps closer to the URDF).
        min_velocity: rad/s (m/s). Near a velocity reversal, Coulomb friction is not fc·sign(qd) (stiction,
            the transition of a real or smoothed friction law), so the torque of joint j at samples with
            |qd_j| < min_velocity is left out of the fit. A joint below it at more than 90 % of the
            samples counts as static: all its samples are kept and its Coulomb and viscous terms are not
            identified (their columns are zeroed; they keep the URDF's values).
        sample_correlation: how many consecutive samples count as one independent measurement (≥ 1).
            Filtered data have correlated errors: a smoothing filter h makes it 1/Σh²
            (:attr:`~robot_dynamics_ros.identification.data.Prepared.correlation`); the data's weight is
            divided by it, so the posterior spread is not over-optimistic.
        max_nfev: cap on solver iterations.
        coulomb_velocity: v_s (rad/s) of the Coulomb law fc·tanh(qd / v_s), 0 for fc·sign(qd); None
            chooses it from :data:`COULOMB_VELOCITIES` by :func:`choose_coulomb_velocity`.
        tau_rate: (N, n) d tau / dt of the (filtered) torque, N·m/s, for the effort-time alignment; None:
            no alignment.
        effort_shift: S (s): the effort sample stamped t was measured at t + S (a commanded effort held
            over the next control period T has S = T/2); the fit uses tau − S · tau_rate ≈ tau(t − S).
            None with ``tau_rate``: estimated by :func:`estimate_effort_shift`.
        fixed: (P,) bool, parameters held at the rigid-body URDF's values (inertials as in the URDF;
            friction and armature 0), e.g. groups the data did not beat
            (:mod:`~robot_dynamics_ros.identification.guard`); they are not counted as identified.

    Raises:
        ValueError: bad shapes or non-finite values (naming the array and joint); fewer samples than
            parameters the data can identify.
    """
    reg = Regressor(model)
    tau = reg.check_array(tau, "tau")
    notes = []
    W = _stack(reg, q, qd, qdd, armature)  # Coulomb columns sign(qd)
    N, n, P = W.shape
    if tau.shape[0] != N:
        raise ValueError(f"tau: expected {N} samples, got {tau.shape[0]}")
    if coulomb_velocity is None:
        keep = np.ones(P, bool)
        keep[reg.n_params:reg.n_params + 3 * reg.n] = False
        coulomb_velocity, scores = choose_coulomb_velocity(reg, W[:, :, keep], tau, qd)
        notes.append("Coulomb law " + (f"fc·tanh(qd / {coulomb_velocity:g} rad/s)" if coulomb_velocity > 0
                                       else "fc·sign(qd)") + " chosen by the data (Σ_j log RSS_j of the "
                     "least-squares fit: " + ", ".join(f"{v:g}: {c:.4g}" for v, c in scores) + ")")
    if coulomb_velocity > 0:
        W = _stack(reg, q, qd, qdd, armature, coulomb_velocity)
    tau, shift, shift_note = _aligned(W, tau, tau_rate, effort_shift,
                                      np.abs(np.asarray(qd, dtype=float)) >= min_velocity)
    notes += shift_note
    names = _names(reg, armature)
    pi0 = reg.parameters()
    s_in = np.concatenate([default_prior_std(pi0[10 * i:10 * i + 10]) for i in range(reg.nb)])
    f0, s_f = _friction_prior(model)
    x0 = np.concatenate([pi0, f0] + ([np.zeros(n)] if armature else []))
    s0 = np.concatenate([s_in, s_f] + ([np.full(n, 0.1)] if armature else []))
    s0 = s0 / float(prior_weight)
    x_fit, s_fit = x0, s0
    if fixed is not None:
        # a prior this tight holds them (to ~1e-4 of their spread); they are then set exactly
        x_fit, s_fit = x0.copy(), s0.copy()
        x_fit[fixed] = np.where(np.arange(x0.size) < reg.n_params, x0, 0.0)[fixed]
        s_fit[fixed] *= 1e-4
    fit = _map_solve(model, W, tau, qd, names, x_fit, s_fit, reg.nb, armature, min_velocity, max_nfev,
                     sample_correlation)
    identified = fit.post < IDENTIFIED_RATIO * s0
    if fixed is not None:
        fit.x[fixed] = x_fit[fixed]
        identified &= ~fixed
    return Identification(reg, names, fit.x, x0, s0, fit.post, identified,
                          fit.noise, fit.rank, structural_base(reg, armature=armature), fit.condition, armature,
                          fit.status, notes + fit.warnings, float(coulomb_velocity), shift)


def estimate_effort_shift(W: np.ndarray, tau: np.ndarray, tau_rate: np.ndarray, sliding=None) -> float:
    """Least-squares estimate of the time shift S (s) between the effort and the state samples.

    A driver's reported effort is often the command it holds over the next control period T (zero-order
    hold): the torque that produced the motion around the state sample at t is centred on t + T/2, not t.
    With tau(t − S) ≈ tau(t) − S · tau_rate(t) (S much shorter than the torque's time scale), the model
    tau_meas = W x + S · tau_rate is linear in (x, S): an ordinary least-squares fit, W (N, n, P) the
    regressor (columns normalized; all-zero ones dropped), tau and tau_rate (N, n). ``sliding`` (N, n)
    bool: the rows used (default all). While a joint sticks its torque follows the controller's command,
    not the state, and that residual correlates with tau_rate: leaving those rows out keeps S unbiased.
    """
    A = np.concatenate([W, np.asarray(tau_rate, dtype=float)[:, :, None]], axis=2)
    b = np.asarray(tau, dtype=float)
    if sliding is not None:
        A, b = A[sliding], b[sliding]
    A = A.reshape(-1, W.shape[2] + 1)
    b = b.reshape(-1)
    norms = np.linalg.norm(A, axis=0)
    if norms[-1] == 0.0:
        return 0.0
    cols = norms > 1e-10 * norms.max()
    sol, *_ = np.linalg.lstsq(A[:, cols] / norms[cols], b, rcond=1e-10)
    return float(sol[-1] / norms[-1])


def _aligned(W, tau, tau_rate, effort_shift, sliding=None):
    """(tau − S · tau_rate, S, notes): the effort aligned with the state (see :func:`identify`); S
    estimated on the ``sliding`` (N, n) rows."""
    if tau_rate is None:
        return tau, 0.0, []
    tau_rate = np.asarray(tau_rate, dtype=float)
    if tau_rate.shape != tau.shape:
        raise ValueError(f"tau_rate: expected shape {tau.shape}, got {tau_rate.shape}")
    if effort_shift is None:
        if sliding is not None and not np.any(sliding):
            sliding = None
        S = estimate_effort_shift(W, tau, tau_rate, sliding)
        note = [f"effort sample aligned with the state: shifted by {S * 1e3:.3g} ms, estimated by least squares "
                "on the samples where the joint slides (a commanded effort held over a control period T "
                "leads the state by T/2)"]
    else:
        S, note = float(effort_shift), ([f"effort sample shifted by {float(effort_shift) * 1e3:.3g} ms"]
                                        if effort_shift else [])
    return tau - S * tau_rate, S, note


def choose_coulomb_velocity(reg: Regressor, W_rest: np.ndarray, tau: np.ndarray, qd,
                            candidates=COULOMB_VELOCITIES) -> tuple[float, list[tuple[float, float]]]:
    """The Coulomb transition velocity v_s of fc·tanh(qd / v_s) that fits the data best.

    Near a velocity reversal a joint sticks: its velocity lingers near 0 while the friction torque moves
    between −fc and fc, which fc·sign(qd) cannot follow (on the Panda the law is a sigmoid, Gaz et al.,
    IEEE RA-L 4(4), 2019). For each candidate, an ordinary least-squares fit of the torque on
    ``W_rest`` (N, n, P_rest: every column but the friction ones) and the friction regressor with that
    v_s, over ALL samples (the slow ones are where the candidates differ); the score is Σ_j log RSS_j,
    the profile log-likelihood with an unknown noise variance per joint. Returns (v_s, [(candidate,
    score)]); 0 (sign) when no joint moves.
    """
    tau = np.asarray(tau, dtype=float)
    N, n = tau.shape
    if not np.any(np.abs(np.asarray(qd, dtype=float)) > 0):
        return 0.0, []
    scores = []
    for v in candidates:
        A = np.concatenate([W_rest, reg.friction(qd, v)], axis=2).reshape(N * n, -1)
        b = tau.reshape(-1)
        norms = np.linalg.norm(A, axis=0)
        cols = norms > 1e-10 * max(norms.max(), 1e-300)
        An = A[:, cols] / norms[cols]
        sol, *_ = np.linalg.lstsq(An, b, rcond=1e-10)
        r = (b - An @ sol).reshape(N, n)
        scores.append((float(v), float(np.sum(np.log(np.sum(r ** 2, axis=0) + 1e-300)))))
    # a tie (joints that never reverse, all candidates alike) keeps the first candidate, the plain sign law
    low = min(c for _, c in scores)
    best = next(v for v, c in scores if c <= low + 1e-9 * abs(low) + 1e-12)
    return best, scores


@dataclass
class _Fit:
    x: np.ndarray
    s0: np.ndarray
    post: np.ndarray
    noise: np.ndarray
    rank: int
    condition: float
    status: str
    warnings: list


def _map_solve(model, W, tau, qd, names, x0, s0, n_bodies, armature, min_velocity, max_nfev,
               sample_correlation=1.0) -> _Fit:
    """The MAP solve shared by arm and payload identification.

    W (N, n, P): columns = ``n_bodies`` inertial blocks of 10 (log-Cholesky), then (fc, fv, fo) per joint,
    then (armature) the rotor inertias; tau (N, n); x0, s0 (P,) prior mean and spread. See the module
    docstring (row selection by ``min_velocity``, noise per joint from the OLS residual, QR reduction).
    """
    N, n, P = W.shape
    slow = np.abs(np.asarray(qd, dtype=float).reshape(N, n)) < min_velocity
    static = slow.mean(axis=0) > 0.9
    nin = 10 * n_bodies
    warnings = []
    W = W.copy()
    for j in np.nonzero(static)[0]:
        W[:, j, nin + 3 * j:nin + 3 * j + 2] = 0.0
    if np.any(static):
        warnings.append("static joints (|qd| < %g at > 90 %% of the samples): Coulomb and viscous friction not "
                        "identified for %s" % (min_velocity, ", ".join(np.array(model.joint_names)[static])))
    keep = ~(slow & ~static[None, :])  # (N, n) rows of the fit
    A = W[keep]
    b = tau[keep]
    joint_of_row = np.broadcast_to(np.arange(n), (N, n))[keep]
    # what this data identifies, and the OLS residual that sets each joint's noise level
    data_base = base_parameters(A, names)
    if data_base.rank == 0:
        raise ValueError("the data excites no parameter (all regressor columns are zero)")
    if A.shape[0] <= 2 * data_base.rank:
        raise ValueError(f"{A.shape[0]} torque samples in the fit: too few for the {data_base.rank} parameters "
                         "the data can identify")
    A_ind = A[:, data_base.independent]
    sol, *_ = np.linalg.lstsq(A_ind, b, rcond=None)
    res = b - A_ind @ sol
    rows = np.bincount(joint_of_row, minlength=n)
    if np.any(rows == 0):
        raise ValueError(f"no sample of joint '{model.joint_names[int(np.argmin(rows))]}' moves faster than "
                         f"{min_velocity} rad/s while others do")
    dof = np.maximum(rows - data_base.rank * rows / rows.sum(), 1.0)
    noise = np.sqrt(np.bincount(joint_of_row, res ** 2, minlength=n) / dof)
    rms_tau = np.sqrt(np.bincount(joint_of_row, b ** 2, minlength=n) / rows)
    noise = np.maximum(noise, 1e-6 * rms_tau + 1e-9)
    # whitened data term reduced by QR
    wrow = 1.0 / (noise[joint_of_row] * np.sqrt(max(float(sample_correlation), 1.0)))
    Q, R = qr(A * wrow[:, None], mode="economic")
    c = Q.T @ (b * wrow)
    nlin = P - nin
    lin_lower = np.full(nlin, -np.inf)
    lin_lower[0:3 * n:3] = 0.0  # Coulomb ≥ 0
    lin_lower[1:3 * n:3] = 0.0  # viscous ≥ 0
    if armature:
        lin_lower[3 * n:] = 0.0
    theta0 = np.concatenate([log_cholesky_from_parameters(x0[10 * i:10 * i + 10]) for i in range(n_bodies)]
                            + [np.maximum(x0[nin:], lin_lower)])
    lower = np.concatenate([np.full(nin, -np.inf), lin_lower])

    def unpack(theta):
        x = np.empty(P)
        blocks = []
        for i in range(n_bodies):
            sl = slice(10 * i, 10 * i + 10)
            x[sl], D = parameters_from_log_cholesky(theta[sl])
            blocks.append(D)
        x[nin:] = theta[nin:]
        return x, blocks

    def fun(theta):
        x, _ = unpack(theta)
        return np.concatenate([R @ x - c, (x - x0) / s0])

    def jac(theta):
        # dx/dθ is block diagonal: small products (a large threaded BLAS call is slow on a loaded machine)
        _, blocks = unpack(theta)
        Jd = np.empty((P, P))
        Jp = np.zeros((P, P))
        for i, D in enumerate(blocks):
            sl = slice(10 * i, 10 * i + 10)
            Jd[:, sl] = R[:, sl] @ D
            Jp[sl, sl] = D / s0[sl, None]
        Jd[:, nin:] = R[:, nin:]
        Jp[nin:, nin:] = np.diag(1.0 / s0[nin:])
        return np.vstack([Jd, Jp])

    # a trial step may overflow exp(θ): trf sees the non-finite cost and shrinks the step
    with np.errstate(over="ignore", invalid="ignore"):
        sol = least_squares(fun, theta0, jac=jac, bounds=(lower, np.full(P, np.inf)), method="trf",
                            xtol=1e-10, ftol=1e-9, gtol=1e-10, max_nfev=max_nfev, x_scale=1.0)
    x, _ = unpack(sol.x)
    H = R.T @ R + np.diag(1.0 / s0 ** 2)
    post = np.sqrt(np.clip(np.diag(np.linalg.inv(H)), 0.0, None))
    if sol.status == 0:
        warnings.append(f"solver stopped at its cap of {max_nfev} evaluations (the estimate is physically "
                        "consistent; the last steps are typically slow when a body approaches the consistency "
                        "boundary)")
    elif not sol.success:
        warnings.append(f"solver stopped: {sol.message}")
    return _Fit(x, s0, post, noise, data_base.rank, condition_number(A, data_base), str(sol.message), warnings)
