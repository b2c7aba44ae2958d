"""Shared test helpers (moved here from test/test_identification_loop.py so tests of other areas import them from the harness)."""
from __future__ import annotations

import numpy as np
import yaml
from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.identification.data import prepare
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS


HELD = ROBOTS["panda"].held_joints


def held_out_errors(out_dir, prior, rec):
    """Predict the efforts of ``rec`` (a held-out Recording) from ``out_dir``/id.urdf + id.friction.yaml (the
    files ``identify`` wrote, through NewtonEulerDynamics and the YAML's Coulomb law) and from the URDF
    ``prior``. Returns {"peak", "identified", "urdf"} (n,) N·m: peak |effort| and the RMS errors against the
    raw effort over all samples, and the same RMS over the samples where |qd| ≥ 0.05 rad/s
    ("identified_moving", "urdf_moving"); and the friction YAML's (fc, fv)."""
    ident = RobotModel.from_urdf(out_dir / "id.urdf", held_joints=HELD)
    doc = yaml.safe_load((out_dir / "id.friction.yaml").read_text())["robot_dynamics_friction"]
    v_s = float(doc["coulomb_velocity"])
    fc, fv, fo = (np.array([doc["joints"][j][k] for j in ident.joint_names]) for k in ("coulomb", "viscous", "offset"))
    np.testing.assert_allclose(ident.friction, fc)  # the URDF <dynamics> carries the same Coulomb/viscous
    p = prepare(rec, prior)
    coul = np.tanh(p.qd / v_s) if v_s > 0 else np.sign(p.qd)
    err = {"identified": NewtonEulerDynamics(ident).rnea(p.q, p.qd, p.qdd) + fc * coul + fv * p.qd + fo - p.tau_raw,
           "urdf": (NewtonEulerDynamics(prior).rnea(p.q, p.qd, p.qdd) + prior.friction * np.sign(p.qd)
                    + prior.damping * p.qd - p.tau_raw)}
    moving = np.abs(p.qd) >= 0.05
    out = {"peak": np.abs(p.tau_raw).max(axis=0), "fc": fc, "fv": fv, "moving_fraction": moving.mean(axis=0)}
    for k, e in err.items():
        out[k] = np.sqrt(np.mean(e ** 2, axis=0))
        out[k + "_moving"] = np.array([np.sqrt(np.mean(e[moving[:, j], j] ** 2)) for j in range(e.shape[1])])
    return out
