"""What identification writes: the identified URDF, the JSON report and the plot (the friction YAML is
:mod:`robot_dynamics_ros.friction`).

Identified URDF: the input URDF text with, for every body, a new ``<inertial>`` on the body's link (the
child link of its moving joint) and ``<dynamics damping="fv" friction="fc">`` on its joint; every other
element (joints, frames, limits, visuals, transmissions) is kept as it was. A body is the link of a
moving joint plus the links welded to it (fixed joints, and joints held during identification). When
the identified body minus the welded links' URDF inertials is still physically consistent, the welded
links keep their inertials and the body link gets the difference; otherwise the whole body is written
on the body link and the welded links' inertials are removed (the report lists them).
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np

from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.identification.pseudo_inertia import is_consistent
from robot_dynamics_ros.identification.regressor import (inertial_to_parameters, parameters_to_inertial,
                                                         transform_parameters)

# checking and writing output files is the tools' job: robot_dynamics_tools.paths
__all__ = ["set_inertials", "identified_urdf"]


def _fmt(v) -> str:
    return " ".join(repr(float(x)) for x in v)


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
