"""What identification writes: the identified URDF, the friction YAML, the JSON report and the plot.

Identified URDF: the input URDF text with, for every body, a new ``<inertial>`` on the body's link (the
child link of its moving joint) and ``<dynamics damping="fv" friction="fc">`` on its joint; every other
element (joints, frames, limits, visuals, transmissions) is kept as it was. A body is the link of a
moving joint plus the links welded to it (fixed joints, and joints held during identification). When
the identified body minus the welded links' URDF inertials is still physically consistent, the welded
links keep their inertials and the body link gets the difference; otherwise the whole body is written
on the body link and the welded links' inertials are removed (the report lists them).

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

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.identification.regressor import (inertial_to_parameters, parameters_to_inertial,
                                                         transform_parameters)

# checking and writing output files is the tools' job: robot_dynamics_tools.paths
__all__ = ["set_inertials", "identified_urdf", "friction_yaml", "read_friction_yaml", "read_friction_file",
           "is_consistent"]


def _fmt(v) -> str:
    return " ".join(repr(float(x)) for x in v)


def is_consistent(pi: np.ndarray, tol: float = 1e-9) -> bool:
    """Physical consistency of pi (10,): m > 0 and the pseudo-inertia J = [[½tr(I)E − I, h], [hᵀ, m]] has
    λ_min(J) ≥ −tol·tr(J) (tol absorbs the rounding of forming J; a body on the boundary is a planar density)."""
    from robot_dynamics_ros.identification.estimate import _pseudo_inertia

    J = _pseudo_inertia(np.asarray(pi, dtype=float))
    return bool(pi[0] > 0 and np.linalg.eigvalsh(J)[0] >= -tol * max(np.trace(J), 1e-12))


def set_inertials(urdf_text: str, inertials: dict, dynamics: dict | None = None) -> str:
    """The URDF text with new link inertials and joint friction, everything else unchanged.

    Args:
        inertials: link -> (mass kg, com (3,) m in the link frame, I_c (3, 3) kg·m² about the COM, link
            axes), or None to remove the link's <inertial>.
        dynamics: joint -> (damping, friction) (viscous N·m·s/rad, Coulomb N·m).

    Raises:
        UserError: a link or joint is not in the URDF.
    """
    parser = ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))
    root = ET.fromstring(urdf_text.lstrip("\ufeff"), parser=parser)
    links = {el.get("name"): el for el in root.findall("link")}
    joints = {el.get("name"): el for el in root.findall("joint")}
    for name, value in inertials.items():
        if name not in links:
            raise UserError(f"link '{name}' is not in the URDF")
        el = links[name]
        for old in el.findall("inertial"):
            el.remove(old)
        if value is None:
            continue
        m, c, I = value
        iel = ET.Element("inertial")
        ET.SubElement(iel, "origin", xyz=_fmt(c), rpy="0 0 0")
        ET.SubElement(iel, "mass", value=repr(float(m)))
        ET.SubElement(iel, "inertia", ixx=repr(float(I[0, 0])), ixy=repr(float(I[0, 1])), ixz=repr(float(I[0, 2])),
                      iyy=repr(float(I[1, 1])), iyz=repr(float(I[1, 2])), izz=repr(float(I[2, 2])))
        iel.tail = el.text
        el.insert(0, iel)
    for name, (damping, friction) in (dynamics or {}).items():
        if name not in joints:
            raise UserError(f"joint '{name}' is not in the URDF")
        el = joints[name]
        dyn = el.find("dynamics")
        if dyn is None:
            dyn = ET.SubElement(el, "dynamics")
        dyn.set("damping", repr(float(damping)))
        dyn.set("friction", repr(float(friction)))
    ET.indent(root)
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def identified_urdf(model, result) -> tuple[str, list[str]]:
    """(URDF text, notes) of an :class:`~robot_dynamics_ros.identification.estimate.Identification`."""
    d = model.description
    reg = result.regressor
    held = model.held_joints
    moving = set(model.moving_joint_names)
    inertials: dict = {}
    notes: list[str] = []
    for i, jn in enumerate(model.moving_joint_names):
        body_link = d.joints[jn].child
        welded = []  # (link, T in body frame)
        stack = [(body_link, np.eye(4))]
        while stack:
            link, T = stack.pop()
            if link != body_link:
                welded.append((link, T))
            for cj in d.child_joints[link]:
                if cj not in moving:
                    j = d.joints[cj]
                    stack.append((j.child, T @ j.origin @ j.motion(held.get(cj, 0.0))))
        pi = result.inertial[10 * i:10 * i + 10]
        rest = np.zeros(10)
        for link, T in welded:
            ine = d.links[link].inertial
            if not ine.is_empty:
                rest += transform_parameters(T) @ inertial_to_parameters(ine.mass, ine.com, ine.inertia)
        own = pi - rest
        if welded and np.any(rest) and not is_consistent(own):
            inertials[body_link] = parameters_to_inertial(pi)
            for link, _ in welded:
                if not d.links[link].inertial.is_empty:
                    inertials[link] = None
            notes.append(f"body of joint '{jn}': written whole on link '{body_link}', inertials of welded links "
                         f"{[ln for ln, _ in welded if not d.links[ln].inertial.is_empty]} removed")
        else:
            inertials[body_link] = parameters_to_inertial(own)
    dynamics = {}
    fr = result.friction
    for j, jn in enumerate(model.joint_names):
        dynamics[jn] = (fr[j, 1], fr[j, 0])
    return set_inertials(model.urdf_xml, inertials, dynamics), notes


def friction_yaml(model, result) -> str:
    """The friction YAML text (schema in the module docstring)."""
    import yaml

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
    from robot_dynamics_ros.model import read_yaml

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


def json_text(obj) -> str:
    """JSON with numpy values converted, non-finite floats as null."""
    def conv(o):
        if isinstance(o, dict):
            return {str(k): conv(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [conv(v) for v in o]
        if isinstance(o, np.ndarray):
            return conv(o.tolist())
        if isinstance(o, (np.floating, float)):
            return float(o) if np.isfinite(o) else None
        if isinstance(o, (np.integer,)):
            return int(o)
        if isinstance(o, np.bool_):
            return bool(o)
        return o
    return json.dumps(conv(obj), indent=2)
