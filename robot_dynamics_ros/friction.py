"""Joint friction, rotor inertia and torque-sensor offset: :class:`JointFriction` and the friction YAML that
``robot-dynamics identify`` writes and the nodes read.

Friction YAML (read by the nodes; all values per actuated joint, motor-side sign of the model)::

    robot_dynamics_friction:
      version: 1
      model: "tau_f = coulomb * tanh(qd / 0.01) + viscous * qd + offset + armature * qdd"
      coulomb_velocity: 0.01
      units: {coulomb: N.m, viscous: N.m.s/rad, offset: N.m, armature: kg.m^2}
      joints:
        <joint>: {coulomb: fc, viscous: fv, offset: fo, armature: Ia}

(N and N·s/m, kg for prismatic joints.) ``coulomb_velocity`` (rad/s) is the v_s of the identified Coulomb
law coulomb·tanh(qd / v_s); 0 means coulomb·sign(qd). The nodes and the URDF ``<dynamics friction>``
apply coulomb·sign(qd): the two differ only while |qd| ≲ 3 v_s.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.share import read_yaml


@dataclass(frozen=True)
class JointFriction:
    """Identified joint friction, rotor inertia and torque-sensor offset, per actuated joint.

    The actuator torque model is ``tau = M(q) qdd + C qd + g(q) + coulomb·law(qd) + viscous·qd
    + armature·qdd + offset`` with ``law(qd) = tanh(qd / coulomb_velocity)``, or ``sign(qd)`` when
    ``coulomb_velocity`` is 0 (the friction YAML of ``robot-dynamics identify``, see
    ``docs/identification.md``; the smooth law after Gaz et al., RA-L 2019). Arrays are (n,) in ``RobotModel.joint_names`` order; units N·m,
    N·m·s/rad, N·m, kg·m² (N, N·s/m, N, kg for prismatic joints).

    Attributes:
        coulomb: replaces URDF ``<dynamics friction>`` (``RobotModel.friction``), ≥ 0.
        viscous: replaces URDF ``<dynamics damping>`` (``RobotModel.damping``), ≥ 0.
        offset: constant bias of the measured joint torque (``RobotModel.effort_offset``); subtracted from
            measured efforts before they are compared with the model, never added to a command.
        armature: rotor inertia reflected to the joint (``RobotModel.armature``), ≥ 0: added to the
            diagonal of M(q) and as armature·qdd to the inverse dynamics by both engines.
        source: where the values come from (a file path), for messages.
        coulomb_velocity: v_s of the Coulomb law, rad/s (m/s), ≥ 0; 0 is the discontinuous sign(qd).
    """

    coulomb: np.ndarray
    viscous: np.ndarray
    offset: np.ndarray
    armature: np.ndarray
    source: str = ""
    coulomb_velocity: float = 0.0

    @classmethod
    def from_yaml(cls, path, joint_names) -> JointFriction:
        """Read the friction YAML of ``robot-dynamics identify`` for ``joint_names`` (model order; joints
        the file does not list get zeros).

        Raises:
            UserError: unreadable file, wrong schema, a joint not in ``joint_names``, a bad value — one
                line naming the file and the joint
                (:func:`read_friction_yaml`).
        """
        table, v_s = read_friction_file(path, list(joint_names))
        return cls(*(np.ascontiguousarray(table[:, k]) for k in range(4)), source=str(path),
                   coulomb_velocity=v_s)


def friction_yaml(model, result) -> str:
    """The friction YAML text (schema in the module docstring) of an identification ``result`` (its ``friction``
    (n, 3) table, ``armature_values`` (n,) and ``coulomb_velocity``) for ``model.joint_names``."""
    fr = result.friction
    arm = result.armature_values
    joints = {jn: {"coulomb": float(fr[j, 0]), "viscous": float(fr[j, 1]), "offset": float(fr[j, 2]),
                   "armature": float(arm[j])} for j, jn in enumerate(model.joint_names)}
    v_s = float(getattr(result, "coulomb_velocity", 0.0))
    law = f"tanh(qd / {v_s:g})" if v_s > 0 else "sign(qd)"
    doc = {"robot_dynamics_friction": {
        "version": 1,
        "model": f"tau_f = coulomb * {law} + viscous * qd + offset + armature * qdd",
        "coulomb_velocity": v_s,
        "units": {"coulomb": "N.m", "viscous": "N.m.s/rad", "offset": "N.m", "armature": "kg.m^2"},
        "joints": joints}}
    return yaml.safe_dump(doc, sort_keys=False)


def read_friction_yaml(path: str | Path, joint_names) -> np.ndarray:
    """The friction YAML (schema in the module docstring) as (n, 4): coulomb, viscous, offset, armature per
    joint of ``joint_names`` (model order); joints the file does not list get zeros.

    Raises:
        UserError: unreadable file, not this schema (version 1), a listed joint not in ``joint_names``, a
            missing, non-finite or (coulomb, viscous, armature) negative value — naming the file and joint.
    """
    return read_friction_file(path, joint_names)[0]


def read_friction_file(path: str | Path, joint_names) -> tuple[np.ndarray, float]:
    """:func:`read_friction_yaml`'s table and the file's ``coulomb_velocity`` v_s (rad/s; 0 when absent: the
    Coulomb law is then fc·sign(qd), else fc·tanh(qd / v_s)).

    Raises:
        UserError: as :func:`read_friction_yaml`; a negative or non-finite ``coulomb_velocity``.
    """
    doc = read_yaml(path, "friction YAML")
    body = doc.get("robot_dynamics_friction") if isinstance(doc, dict) else None
    if not isinstance(body, dict) or body.get("version") != 1 or not isinstance(body.get("joints"), dict):
        raise UserError(f"friction YAML '{path}': expected 'robot_dynamics_friction' with version 1 and 'joints'")
    index = {j: i for i, j in enumerate(joint_names)}
    out = np.zeros((len(index), 4))
    for jn, v in body["joints"].items():
        if jn not in index:
            raise UserError(f"friction YAML '{path}': joint '{jn}' is not in the model")
        for k, key in enumerate(("coulomb", "viscous", "offset", "armature")):
            try:
                x = float(v.get(key, 0.0) if key == "armature" else v[key])
            except (KeyError, TypeError, ValueError, AttributeError):
                raise UserError(f"friction YAML '{path}': joint '{jn}': '{key}' missing or not a number") from None
            if not np.isfinite(x) or (key != "offset" and x < 0):
                raise UserError(f"friction YAML '{path}': joint '{jn}': {key} = {x} must be finite"
                                + ("" if key == "offset" else " and ≥ 0"))
            out[index[jn], k] = x
    try:
        v_s = float(body.get("coulomb_velocity", 0.0) or 0.0)
    except (TypeError, ValueError):
        v_s = float("nan")
    if not (np.isfinite(v_s) and v_s >= 0.0):
        raise UserError(f"friction YAML '{path}': coulomb_velocity = {body.get('coulomb_velocity')!r} must be a "
                        "finite number ≥ 0 (rad/s)")
    return out, v_s
