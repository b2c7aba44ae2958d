"""From a prepared recording to an identified model and its report (what ``robot-dynamics identify`` runs).

Steps: split into contiguous fit/validation blocks (:mod:`~robot_dynamics_ros.identification.validate`),
identify on the fit block (:func:`~robot_dynamics_ros.identification.estimate.identify`), predict the
validation block with the URDF's rigid-body model (the baseline), the URDF with its ``<dynamics>``
(reported beside it) and the identified model, and collect a JSON-ready report.

The report sorts the parameters in three: excited by the data (posterior std below
``IDENTIFIED_RATIO`` × prior std), not excited and written within :data:`MOVED_RATIO` prior std of the
URDF (``not_identified``), and not excited yet written more than that away from it
(``moved_not_excited``: URDF and written values). Every value is written as fitted, moved ones included,
except friction parameters that were not excited and stayed at the URDF's value: that value is the URDF's
``<dynamics>`` (a simulation damping), so they are written 0
(``friction_not_identified_written_zero``: name -> the URDF value not carried over).

The identified model is never worse than its start on the held-out block: the prior weight is chosen by
validation inside the fit block (:func:`choose_prior_weight`, the default), and on the held-out block
:func:`~robot_dynamics_ros.identification.guard.keep_urdf_where_not_better` sets back to the rigid-body
URDF's values the link/joint parameter groups that make a joint worse there (``kept_urdf`` in the
report), which are then held there while the rest is refitted, until no joint is worse. The held-out block thereby also decides which groups are kept: its identified RMS is the
written model's, and is not an unbiased estimate of how the identified parts generalize.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot_dynamics_ros.identification.data import Prepared
from robot_dynamics_ros.identification.estimate import MIN_VELOCITY, Identification, identify
from robot_dynamics_ros.identification.guard import keep_urdf_where_not_better
from robot_dynamics_ros.identification.validate import Split, errors, split, validation_report

__all__ = ["Outcome", "run", "plot", "MOVED_RATIO", "PRIOR_WEIGHTS", "choose_prior_weight",
           "zero_unidentified_friction", "describe_kept"]

#: a parameter the data did not excite counts as "moved without being excited" when its written value is
#: more than this many prior standard deviations from the URDF's (else it is reported as near the URDF)
MOVED_RATIO = 0.5


@dataclass
class Outcome:
    """result: the Identification; report: JSON-ready dict; validation arrays for the plot:
    t_val (M,), tau_val (M, n) raw, pred_urdf, pred_ident (M, n)."""

    result: Identification
    report: dict
    t_val: np.ndarray
    tau_val: np.ndarray
    pred_urdf: np.ndarray
    pred_ident: np.ndarray


def _category(name: str) -> str:
    p = name.rsplit(".", 1)[1]
    return {"m": "mass", "mx": "first moment", "my": "first moment", "mz": "first moment", "fc": "Coulomb",
            "fv": "viscous", "fo": "offset", "Ia": "armature"}.get(p, "inertia")


def zero_unidentified_friction(res: Identification) -> tuple[np.ndarray, dict[str, float]]:
    """Set to 0 in ``res.x`` the friction parameters the data did not excite and that stayed within
    :data:`MOVED_RATIO` prior std of the URDF: their value is the URDF's ``<dynamics>`` (a simulation
    damping), not a friction the data measured, so it is not written as identified friction; 0 is the
    rigid-body start. Returns (their indices into ``x``, name -> the URDF value not carried over)."""
    fi = res.friction_indices()
    unmoved = fi[(~res.identified[fi]) & (np.abs(res.x[fi] - res.x_prior[fi]) <= MOVED_RATIO * res.prior_std[fi])]
    zeroed = {res.names[k]: float(res.x_prior[k]) for k in unmoved}
    res.x[unmoved] = 0.0
    return unmoved, zeroed


#: the prior weights ``run(prior_weight=None)`` (``--prior-weight auto``, the default) tries on an inner
#: held-out block: each is one more fit, so the list is short
PRIOR_WEIGHTS = (0.1, 1.0, 10.0)


def choose_prior_weight(model, data: Prepared, fit, **kw) -> tuple[float, dict]:
    """The prior weight chosen by validation inside the fit block: its last quarter (one filter window
    apart) is held out, each of :data:`PRIOR_WEIGHTS` identifies on the rest (``kw``: the other
    :func:`identify` options), and the model as written (:func:`zero_unidentified_friction`) predicts
    the held-out quarter. ``fit``: the fit block's samples (slice or ascending index array).
    The Coulomb transition velocity and effort shift chosen by the first fit (when ``kw`` leaves them
    None) are reused by the others. Among the weights whose model is not worse than the URDF's rigid-body model on
    any joint there, the smallest mean RMS ratio to it wins (if none, the smallest over all).

    Returns:
        ``(weight, {weight: {"rms_ratio_to_rigid_urdf": [per joint], "worse_than_rigid_urdf": bool}})``.

    Raises:
        ValueError: the fit block is too short to hold out a quarter (each part ≥ 3 filter windows).
    """
    idx = np.arange(data.t.size)[fit]
    n_sel = idx.size // 4
    inner, sel = idx[:max(idx.size - n_sel - data.window, 0)], idx[idx.size - n_sel:]
    if n_sel < 3 * data.window or inner.size < 3 * data.window:
        raise ValueError("too few samples to choose the prior weight by validation (--prior-weight auto)")
    qs, qds, qdds, taus = data.q[sel], data.qd[sel], data.qdd[sel], data.tau_raw[sel]
    scores: dict = {}
    for w in PRIOR_WEIGHTS:
        res = identify(model, data.q[inner], data.qd[inner], data.qdd[inner], data.tau[inner], prior_weight=w,
                       sample_correlation=data.correlation,
                       tau_rate=None if data.tau_rate is None else data.tau_rate[inner], **kw)
        # the Coulomb law and effort shift depend on the data, not on the weight: found once, then reused
        kw = {**kw, "coulomb_velocity": res.coulomb_velocity, "effort_shift": res.effort_shift}
        zero_unidentified_friction(res)
        ratio = errors(res.predict(qs, qds, qdds), taus)["rms"] / errors(res.predict_rigid(qs, qds, qdds), taus)["rms"]
        scores[w] = {"rms_ratio_to_rigid_urdf": ratio.tolist(), "worse_than_rigid_urdf": bool(np.any(ratio > 1.0))}
    ok = [w for w, v in scores.items() if not v["worse_than_rigid_urdf"]] or list(scores)
    return min(ok, key=lambda w: float(np.mean(scores[w]["rms_ratio_to_rigid_urdf"]))), scores


def run(model, data: Prepared, *, holdout: float = 0.25, armature: bool = False,
        prior_weight: float | None = None, min_velocity: float = MIN_VELOCITY,
        coulomb_velocity: float | None = None, effort_shift: float | None = None,
        blocks: Split | None = None) -> Outcome:
    """Identify on the fit block, keep the URDF's values where they are not beaten on the held-out block
    (:func:`~robot_dynamics_ros.identification.guard.keep_urdf_where_not_better`), validate there.
    Raises ValueError (bad split, data). ``blocks``: the fit and held-out blocks (default: the last
    ``holdout`` of the recording held out, :func:`~robot_dynamics_ros.identification.validate.split`).
    ``coulomb_velocity``: v_s of fc·tanh(qd / v_s) (0: sign; None: chosen by the data); ``effort_shift``:
    S (s) of the effort-state alignment (None: estimated; see :func:`identify`); ``prior_weight`` None:
    chosen by validation inside the fit block (:func:`choose_prior_weight`, reported)."""
    sp = blocks if blocks is not None else split(data, holdout)
    q, qd, qdd, tau, _ = sp.take(data, "fit")
    moving = (np.abs(qd) >= min_velocity).mean(axis=0)
    if data.window > 1 and np.all(moving < 0.1):
        raise ValueError(f"no joint moves faster than {min_velocity:g} rad/s at 10 % of the fit samples (best: "
                         f"'{model.joint_names[int(np.argmax(moving))]}' at {100 * moving.max():.1f} %): nothing "
                         "dynamic to identify; for a log of poses at rest use --static")
    selection = None
    if prior_weight is None:
        prior_weight, selection = choose_prior_weight(model, data, sp.fit, armature=armature, min_velocity=min_velocity,
                                                      coulomb_velocity=coulomb_velocity, effort_shift=effort_shift)
    opts = dict(armature=armature, prior_weight=prior_weight, min_velocity=min_velocity,
                sample_correlation=data.correlation,
                tau_rate=None if data.tau_rate is None else data.tau_rate[sp.fit])
    res = identify(model, q, qd, qdd, tau, coulomb_velocity=coulomb_velocity, effort_shift=effort_shift, **opts)
    unmoved, friction_zeroed = zero_unidentified_friction(res)
    kept: list = []
    if sp.validation.stop > sp.validation.start:
        qv, qdv, qddv, _, tau_raw = sp.take(data, "validation")
        # groups kept at the URDF are held there and the rest refitted (the other bodies had compensated
        # for them), until the held-out block finds no joint worse; with every group kept, the URDF itself
        fixed = np.zeros(res.x.size, bool)
        while new := keep_urdf_where_not_better(res, qv, qdv, qddv, tau_raw):
            kept += new
            fixed[[res.names.index(p) for g in new for p in g.parameters]] = True
            if fixed.all():
                break
            res = identify(model, q, qd, qdd, tau, coulomb_velocity=res.coulomb_velocity,
                           effort_shift=res.effort_shift, fixed=fixed.copy(), **opts)
            unmoved, friction_zeroed = zero_unidentified_friction(res)
    names = model.joint_names
    report: dict = {
        "robot": model.description.name, "joints": list(names),
        "samples": int(data.t.size), "dt_s": data.dt, "filter_window_samples": data.window,
        "fit_block_s": [float(data.t[sp.fit][0]), float(data.t[sp.fit][-1])],
        "fit_samples": int(sp.fit_indices(data.t.size).size),
        "notes": list(data.notes), "warnings": list(res.warnings),
        "structural_base_parameters": res.base.rank, "data_rank": res.data_rank,
        "condition_number": res.condition, "noise_std": res.noise_std, "solver": res.status,
        "min_velocity": min_velocity, "coulomb_velocity": res.coulomb_velocity,
        "effort_shift_s": res.effort_shift, "prior_weight": prior_weight,
    }
    if selection is not None:
        report["prior_weight_selection"] = {str(w): v for w, v in selection.items()}
        report["notes"].append(f"prior weight {prior_weight:g} chosen by validation on the last quarter of the fit "
                               f"block (tried {', '.join(f'{w:g}' for w in selection)})")
    describe_kept(report, kept, res)
    if sp.validation.stop > sp.validation.start:
        # the baseline is the URDF's rigid-body model; the URDF with its <dynamics> is reported beside it
        pu = res.predict_rigid(qv, qdv, qddv)
        pd = res.predict(qv, qdv, qddv, prior=True)
        pi = res.predict(qv, qdv, qddv)
        report["validation_block_s"] = [float(data.t[sp.validation][0]), float(data.t[sp.validation][-1])]
        report["validation"], eu, ei = validation_report(names, pu, pi, tau_raw, np.abs(qdv) >= min_velocity,
                                                         tau_urdf_damped=pd)
        t_val = data.t[sp.validation]
    else:
        pu = pi = tau_raw = np.zeros((0, model.n))
        t_val = np.zeros(0)
        report["warnings"].append("no held-out block (--holdout 0): the model is not validated and no part of it is "
                                  "checked against the URDF")
    # Not excited is not "unchanged": the MAP solve moves an unexcited parameter with the excited ones it
    # is correlated with, and that moved value is what the URDF and friction YAML receive.
    moved = (~res.identified) & (np.abs(res.x - res.x_prior) > MOVED_RATIO * res.prior_std)
    moved[unmoved] = False
    is_kept = np.zeros(res.x.size, bool)
    is_kept[[res.names.index(p) for g in kept for p in g.parameters]] = True
    moved &= ~is_kept
    not_ident = [nm for k, nm in enumerate(res.names) if not res.identified[k] and not moved[k] and not is_kept[k]]
    by_cat: dict[str, list[int]] = {}
    for nm, ok in zip(res.names, res.identified):
        c = by_cat.setdefault(_category(nm), [0, 0])
        c[0] += int(ok)
        c[1] += 1
    report["identified_counts"] = {k: {"identified": v[0], "total": v[1]} for k, v in by_cat.items()}
    report["not_identified"] = not_ident
    report["friction_not_identified_written_zero"] = friction_zeroed
    if friction_zeroed:
        report["notes"].append(f"friction not identified, written 0 (the URDF's <dynamics> is a simulation value, "
                               f"not carried over): {', '.join(friction_zeroed)}")
    report["moved_not_excited"] = {nm: {"urdf": res.x_prior[k], "written": res.x[k], "prior_std": res.prior_std[k]}
                                   for k, nm in enumerate(res.names) if moved[k]}
    report["parameters"] = {nm: {"urdf": res.x_prior[k], "identified": res.x[k], "prior_std": res.prior_std[k],
                                 "posterior_std": res.posterior_std[k], "excited": bool(res.identified[k]),
                                 "moved_not_excited": bool(moved[k]), "kept_urdf": bool(is_kept[k])}
                            for k, nm in enumerate(res.names)}
    return Outcome(res, report, t_val, tau_raw, pu, pi)


def describe_kept(report: dict, kept, res: Identification) -> None:
    """Add to ``report`` ``kept_urdf`` (group -> its parameters and the joints it found worse, identified and
    URDF RMS, N·m) for the :class:`~robot_dynamics_ros.identification.guard.KeptGroup` list ``kept``, and a
    note: which groups, or that the data does not beat the URDF when every group of ``res`` is kept."""
    report["kept_urdf"] = {g.group: {"parameters": g.parameters, "worse_joints": {
        j: {"identified_rms": r, "urdf_rms": u} for j, (r, u) in g.worse_joints.items()}} for g in kept}
    if not kept:
        return
    n_groups = res.regressor.nb + res.regressor.n
    first = "; ".join(f"{j} {r:.4g} > {u:.4g} N·m" for j, (r, u) in kept[0].worse_joints.items())
    if len(kept) == n_groups:
        report["notes"].append(f"the data does not beat the URDF: every parameter group is kept at the rigid-body "
                               f"URDF's values (friction 0); on the held-out block the identified model was worse "
                               f"on {first} (RMS)")
    else:
        report["notes"].append(f"kept at the rigid-body URDF's values (they made a joint worse on the held-out "
                               f"block): {', '.join(g.group for g in kept)}; first worse: {first} (RMS)")


def plot(path, outcome: Outcome, joint_names) -> None:
    """Measured vs URDF vs identified torque on the held-out block, one panel per joint (PNG, Agg)."""
    # matplotlib is heavy and only the plot needs it: loaded here, not with the pipeline
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(joint_names)
    fig, axes = plt.subplots(n, 1, figsize=(9, 1.8 * n + 0.6), sharex=True, squeeze=False)
    for j, ax in enumerate(axes[:, 0]):
        ax.plot(outcome.t_val, outcome.tau_val[:, j], color="0.6", lw=0.8, label="measured")
        ax.plot(outcome.t_val, outcome.pred_urdf[:, j], color="tab:red", lw=1.0, label="URDF")
        ax.plot(outcome.t_val, outcome.pred_ident[:, j], color="tab:blue", lw=1.0, ls="--", label="identified")
        ax.set_ylabel(f"{joint_names[j]}\nN·m", fontsize=7)
        ax.tick_params(labelsize=7)
    axes[0, 0].legend(fontsize=7, ncol=3, loc="upper right")
    axes[0, 0].set_title("held-out block: measured torque vs model predictions", fontsize=9)
    axes[-1, 0].set_xlabel("t (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
