"""Keep the URDF's values where the data does not beat them.

Identification starts from the URDF's rigid-body model (its inertials; friction and armature 0, the
URDF's ``<dynamics>`` being simulation values). On a check block of samples the fit never saw, the
identified model must not predict any joint's torque worse (RMS against the raw recorded torque) than
that start. Where it does, parameter groups go back to the start's values, greedily:

* the groups are one per body (its 10 inertial parameters, named by the body's link) and one per joint
  (its Coulomb, viscous and offset friction, and its armature when fitted), the parameters of one
  link/joint;
* while some joint is worse than the rigid-body URDF, the group whose return lowers the total relative
  excess Σ_j max(0, rms_j − rms_urdf_j) / rms_urdf_j the most goes back (ties: the lower total RMS);
* with every group back, the model is the rigid-body URDF itself, equal on every joint: the loop ends
  at the latest there, so the returned model is never worse on the check block, per joint.

The pipeline (:func:`~robot_dynamics_ros.identification.pipeline.run`) then holds the kept groups at
those values and refits the others (they had compensated for the kept ones), and checks again, until
no joint is worse.

Predictions are linear in the parameters (the regressor of the check block is built once), so each
trial costs one matrix product.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot_dynamics_ros.identification.estimate import Identification

__all__ = ["KeptGroup", "parameter_groups", "rigid_values", "keep_urdf_where_not_better"]

#: a joint counts as worse when its RMS exceeds the rigid-body URDF's by more than this relative amount
#: (rounding of two equal predictions computed alike is far below it)
RELATIVE_TOLERANCE = 1e-12


@dataclass
class KeptGroup:
    """A parameter group set back to the rigid-body URDF's values.

    Attributes:
        group: its name (``"<link> inertial"`` or ``"<joint> friction"``).
        parameters: the parameter names of the group.
        worse_joints: joint -> (identified RMS, rigid-body URDF RMS), N·m, on the check block just
            before this group went back (the joints that were worse).
    """

    group: str
    parameters: list[str]
    worse_joints: dict[str, tuple[float, float]]


def parameter_groups(res: Identification) -> list[tuple[str, np.ndarray]]:
    """[(name, indices into ``res.x``)]: one group per body (10 inertial parameters), then one per joint
    (fc, fv, fo, and Ia when the armature is fitted)."""
    reg = res.regressor
    nin, n = res.n_inertial, reg.n
    groups = [(f"{b} inertial", np.arange(10 * i, 10 * i + 10)) for i, b in enumerate(reg.body_names)]
    for j, jn in enumerate(reg.model.joint_names):
        idx = [nin + 3 * j, nin + 3 * j + 1, nin + 3 * j + 2] + ([nin + 3 * n + j] if res.armature else [])
        groups.append((f"{jn} friction", np.array(idx)))
    return groups


def rigid_values(res: Identification) -> np.ndarray:
    """(P,) the rigid-body URDF as a parameter vector: the URDF's inertials, friction and armature 0."""
    x = np.zeros_like(res.x_prior)
    x[:res.n_inertial] = res.x_prior[:res.n_inertial]
    return x


def keep_urdf_where_not_better(res: Identification, q, qd, qdd, tau) -> list[KeptGroup]:
    """Set back in ``res.x`` (in place) the groups that make a joint worse than the rigid-body URDF on the
    check block (see the module docstring).

    Args:
        res: the identification (``res.x``: the model as it would be written).
        q, qd, qdd: (M, n) check-block state, rad, rad/s, rad/s²; tau (M, n) its raw torque, N·m.

    Returns:
        the groups set back, in order (empty when the identified model is nowhere worse).
    """
    W = res.regressor_matrix(q, qd, qdd)
    tau = np.asarray(tau, dtype=float)

    def rms(x):
        return np.sqrt(np.mean((W @ x - tau) ** 2, axis=0))

    x_r = rigid_values(res)
    base = rms(x_r)
    limit = base * (1.0 + RELATIVE_TOLERANCE)
    scale = np.where(base > 0, base, 1.0)
    groups = parameter_groups(res)
    joints = res.regressor.model.joint_names
    kept: list[KeptGroup] = []
    left = list(range(len(groups)))
    x = res.x.copy()
    r = rms(x)
    while np.any(r > limit) and left:
        trials = []
        for g in left:
            xt = x.copy()
            xt[groups[g][1]] = x_r[groups[g][1]]
            rt = rms(xt)
            trials.append((float(np.sum(np.maximum(rt - base, 0.0) / scale)), float(np.sum(rt)), g, xt, rt))
        _, _, g, x_new, r_new = min(trials, key=lambda t: (t[0], t[1]))
        kept.append(KeptGroup(groups[g][0], [res.names[k] for k in groups[g][1]],
                              {joints[j]: (float(r[j]), float(base[j])) for j in np.nonzero(r > limit)[0]}))
        left.remove(g)
        x, r = x_new, r_new
    if not left:
        x = x_r.copy()  # every group back: exactly the start
    res.x[:] = x
    return kept
