"""Our own reading and validation of a URDF: :class:`RobotDescription`, the tree of links and joints with their
inertias, limits and joint dynamics.

This module does not depend on Pinocchio or MuJoCo: the in-package Newton–Euler engine
(:mod:`robot_dynamics_ros.dynamics.newton_euler`) is built from this reading, and the other engines are
built from the URDF that :meth:`RobotDescription.to_urdf` writes, so the engines check each other.

The text is read by :mod:`robot_dynamics_ros.urdf_reader` (bounded, streaming; :meth:`RobotDescription.from_text`
never opens a file, :meth:`RobotDescription.from_file` reads regular files only); each link and joint is parsed
and checked by :mod:`robot_dynamics_ros.urdf_elements` (conventions, units and the inertia checks are there).

Validation raises :class:`robot_dynamics_ros.errors.URDFError`, one line naming the source and the link or
joint at fault: negative or non-finite mass, a principal moment clearly below zero on a moving link,
values beyond the plausibility bounds (:data:`~robot_dynamics_ros.urdf_elements.MAX_LINK_MASS` 1e4 kg per link,
:data:`~robot_dynamics_ros.urdf_elements.MAX_LINK_INERTIA`, :data:`~robot_dynamics_ros.urdf_elements.MAX_LENGTH`,
on a moving link principal moments above ``mass · MAX_LINK_RADIUS²``),
zero-length axis, unknown parent or child link, a link with two parents, cycles, more than one root link,
duplicate names, malformed numbers, ``lower > upper``, ``<mimic>`` cycles.
Accepted with a warning (:attr:`RobotDescription.warnings`; ``strict=True`` refuses them instead): a
non-physical inertia on the fixed base (the root link and links welded to it; zeroed, since it cannot
affect joint torques), principal moments violating the triangle inequality on a moving link (no rigid body
has them, but M(q) stays positive definite; used as given, as Pinocchio does), a ``<mimic>`` naming an
unknown or fixed joint (ignored: the joint is actuated on its own, as Pinocchio reads it), a ``floating``
or ``planar`` joint (welded at its origin: the fixed-base view; Pinocchio would make it a free-flyer).

Rounding is not a violation: the inertia checks have the tolerance of
:func:`~robot_dynamics_ros.urdf_elements.inertia_tolerance`. Point
masses (a mass with a zero inertia tensor, as in the planar 2R arm of the reference text) and thin rods
(one principal moment zero) are accepted: they are the physical limit cases of the triangle inequality.
"""
from __future__ import annotations

import dataclasses
import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from robot_dynamics_ros.errors import URDFError
from robot_dynamics_ros.urdf_elements import WELDED_TYPES, Inertial, Joint, Link, matrix_to_rpy, parse_inertial, parse_joint
from robot_dynamics_ros.urdf_reader import is_xml_text, parse_urdf_xml, quote_name, read_urdf_file

__all__ = ["RobotDescription"]


def _fmt(values) -> str:
    return " ".join(repr(float(v)) for v in np.atleast_1d(values))


class RobotDescription:
    """A validated URDF: a tree of links connected by joints, with mass properties and joint data.

    Build with :meth:`from_text` (XML text, never a path), :meth:`from_file` or :meth:`from_urdf` (either).
    Attributes:

    * ``name``: robot name; ``source``: file path or ``"<string>"``;
    * ``links``: dict name -> :class:`Link`; ``joints``: dict name -> :class:`Joint`, in tree order
      (depth-first from the root, children in document order);
    * ``root``: the root link name; ``child_joints``: link -> list of joint names;
      ``parent_joint``: link -> joint name (the root has none).
    """

    def __init__(self, name: str, links: dict[str, Link], joints: list[Joint], source: str = "<string>", *,
                 inertia_problems: Mapping[str, tuple[str, str]] | None = None,
                 welded_joints: Mapping[str, str] | None = None, strict: bool = False):
        self.name = name
        self.source = source
        self.links = dict(links)
        where = f"URDF {source}: " if source else ""
        self._where = where
        self.strict = strict
        self._warnings: list[str] = []
        by_name: dict[str, Joint] = {}
        for j in joints:
            if j.name in by_name:
                raise URDFError(f"{where}joint {quote_name(j.name)} is defined twice")
            by_name[j.name] = j
        self.parent_joint: dict[str, str] = {}
        self.child_joints: dict[str, list[str]] = {ln: [] for ln in self.links}
        for j in joints:
            if j.parent not in self.links:
                raise URDFError(f"{where}joint {quote_name(j.name)}: unknown parent link {quote_name(j.parent)}")
            if j.child not in self.links:
                raise URDFError(f"{where}joint {quote_name(j.name)}: unknown child link {quote_name(j.child)}")
            if j.child in self.parent_joint:
                raise URDFError(f"{where}link {quote_name(j.child)} has two parent joints: "
                                f"{self.parent_joint[j.child]!r} and {quote_name(j.name)}")
            self.parent_joint[j.child] = j.name
            self.child_joints[j.parent].append(j.name)
        roots = [ln for ln in self.links if ln not in self.parent_joint]
        if not roots:
            raise URDFError(f"{where}the joints form a cycle: every link has a parent "
                            f"(e.g. link {quote_name(next(iter(self.links)))})")
        if len(roots) > 1:
            raise URDFError(f"{where}more than one root link (links without a parent joint): "
                            f"{', '.join(quote_name(r) for r in roots)}; connect them with joints")
        self.root = roots[0]
        # depth-first tree order; any link not reached lies on a cycle
        order: list[str] = []
        stack = list(reversed(self.child_joints[self.root]))
        while stack:
            jn = stack.pop()
            order.append(jn)
            stack.extend(reversed(self.child_joints[by_name[jn].child]))
        if len(order) != len(by_name):
            on_cycle = sorted(set(by_name) - set(order))
            raise URDFError(f"{where}the joints {', '.join(quote_name(j) for j in on_cycle)} form a cycle "
                            "(not reachable from the root link)")
        self.joints: dict[str, Joint] = {jn: by_name[jn] for jn in order}
        for j in list(self.joints.values()):
            if j.mimic is not None:
                if j.mimic.joint not in self.joints:
                    problem = f"unknown joint {quote_name(j.mimic.joint)}"
                elif not self.joints[j.mimic.joint].moving:
                    problem = f"joint {quote_name(j.mimic.joint)} does not move"
                else:
                    continue
                # as Pinocchio's URDF reader does by default: the joint moves on its own
                self._warn(f"{where}joint {quote_name(j.name)} <mimic>: {problem}",
                           accepted="ignored, the joint is actuated on its own")
                self.joints[j.name] = dataclasses.replace(j, mimic=None)
        for jn, jtype in (welded_joints or {}).items():
            j = self.joints[jn]
            self._warn(f"{where}joint {quote_name(jn)} is of type {quote_name(jtype)}",
                       accepted=f"welded at its origin, link {quote_name(j.child)} bolted to "
                                f"{quote_name(j.parent)} (the fixed-base view)")
        self._judge_inertias(dict(inertia_problems or {}))
        for j in self.joints.values():  # mimic cycles
            seen = {j.name}
            m = j.mimic
            while m is not None:
                if m.joint in seen:
                    raise URDFError(f"{where}joint {quote_name(j.name)}: <mimic> joints form a cycle through "
                                    f"{quote_name(m.joint)}")
                seen.add(m.joint)
                m = self.joints[m.joint].mimic

    def _warn(self, message: str, accepted: str = "") -> None:
        """Record what the lenient reading accepted (``message``, then ``accepted``: what it does about it);
        with ``strict`` refuse it instead (``message`` alone: the lenient handling does not happen)."""
        if self.strict:
            raise URDFError(f"{message} [strict]")
        self._warnings.append(f"{message}; {accepted}" if accepted else message)

    @property
    def warnings(self) -> tuple[str, ...]:
        """One line per thing the lenient reading accepted (naming the link or joint); empty when strict."""
        return tuple(self._warnings)

    def base_links(self) -> list[str]:
        """The root link and the links welded to it by fixed joints: the fixed base, whose mass properties
        cannot affect any joint torque."""
        out, stack = [], [self.root]
        while stack:
            ln = stack.pop()
            out.append(ln)
            stack.extend(self.joints[jn].child for jn in self.child_joints[ln] if self.joints[jn].type == "fixed")
        return out

    def _judge_inertias(self, problems: dict[str, tuple[str, str]]) -> None:
        """Non-physical inertias: ignored (zeroed, warning) on the fixed base; a negative principal moment
        (M(q) could be indefinite) or one beyond the link's size bound (``"size"``, not a robot link)
        elsewhere is refused; a triangle-inequality violation elsewhere is accepted with a warning (M(q)
        stays positive definite; Pinocchio and MuJoCo compute with it)."""
        base = set(self.base_links())
        for ln, (kind, text) in problems.items():
            what = f"{self._where}link {quote_name(ln)} <inertial>"
            if ln in base:
                self._warn(f"{what}: {text} (the link is welded to the fixed base)",
                           accepted="ignored: its inertia cannot affect joint torques")
                self.links[ln] = Link(ln, Inertial())
            elif kind in ("negative", "size"):
                raise URDFError(f"{what}: {text}")
            else:
                self._warn(f"{what}: {text}", accepted="used as given (M(q) stays positive definite)")

    # ----------------------------------------------------------------------------------------------
    @classmethod
    def from_text(cls, xml: str, *, label: str = "robot_description", strict: bool = False) -> RobotDescription:
        """Read and validate URDF XML text. Never opens a file, whatever the text says.

        Args:
            xml: the URDF document (at most :data:`~robot_dynamics_ros.urdf_reader.MAX_URDF_BYTES` UTF-8 bytes,
                :data:`~robot_dynamics_ros.urdf_reader.MAX_URDF_ELEMENTS` elements).
            label: how messages name the source (a topic, a parameter, a file path).
            strict: refuse (URDFError) what the lenient reading accepts with a warning (:attr:`warnings`).

        Raises:
            URDFError: text that is not URDF XML (``"<label>: not URDF XML (starts with '...')"``), too large,
                malformed XML, DOCTYPE/ENTITY declarations, or any validation failure of the module
                docstring (naming the link/joint). Messages quote at most :data:`~robot_dynamics_ros.urdf_reader.EXCERPT_CHARS` characters
                of the input.
        """
        root = parse_urdf_xml(xml, label)
        prefix = f"URDF {label}: "
        links: dict[str, Link] = {}
        problems: dict[str, tuple[str, str]] = {}
        for el in root.findall("link"):
            name = el.get("name")
            if not name:
                raise URDFError(f"{prefix}a <link> has no name")
            if name in links:
                raise URDFError(f"{prefix}link {quote_name(name)} is defined twice")
            inertial, problem = parse_inertial(name, el.find("inertial"), prefix)
            links[name] = Link(name, inertial)
            if problem is not None:
                problems[name] = problem
        if not links:
            raise URDFError(f"{prefix}no <link> elements")
        joints = [parse_joint(el, prefix) for el in root.findall("joint")]
        welded = {el.get("name"): el.get("type") for el in root.findall("joint") if el.get("type") in WELDED_TYPES}
        return cls(root.get("name", "robot"), links, joints, source=label, inertia_problems=problems,
                   welded_joints=welded, strict=strict)

    @classmethod
    def from_file(cls, path: str | Path, *, strict: bool = False) -> RobotDescription:
        """Read and validate a URDF file: a regular file (no FIFO, device or directory) of at most
        :data:`~robot_dynamics_ros.urdf_reader.MAX_URDF_BYTES` bytes, UTF-8 (a BOM is allowed).

        Raises:
            URDFError: one line naming the path: missing, not a regular file, too large, unreadable, not
                UTF-8, or any failure of :meth:`from_text`.
        """
        text, label = read_urdf_file(path)
        return cls.from_text(text, label=label, strict=strict)

    @classmethod
    def from_urdf(cls, source: str | Path, *, strict: bool = False) -> RobotDescription:
        """:meth:`from_text` when ``source`` is a str whose first non-blank character is ``<``, else
        :meth:`from_file` (for the CLI and tests; descriptions from a topic or parameter use
        :meth:`from_text`)."""
        if is_xml_text(source):
            return cls.from_text(source, label="<string>", strict=strict)
        return cls.from_file(source, strict=strict)

    # ----------------------------------------------------------------------------------------------
    @property
    def moving_joints(self) -> list[str]:
        """Names of the revolute, continuous and prismatic joints, in tree order."""
        return [jn for jn, j in self.joints.items() if j.moving]

    def subtree_links(self, joint: str) -> list[str]:
        """Names of the links moved by ``joint`` (its child link and everything below it)."""
        out, stack = [], [self.joints[joint].child]
        while stack:
            ln = stack.pop()
            out.append(ln)
            stack.extend(self.joints[jn].child for jn in self.child_joints[ln])
        return out

    def resolve_held(self, held_joints: Mapping[str, float]) -> dict[str, float]:
        """Expand held joints over mimic joints: a mimic joint whose master is held is held too.

        Returns a dict joint name -> value (rad or m) of every joint held fixed, in tree order.

        Raises:
            URDFError: unknown joint, a joint that does not move, a non-finite value, or a value outside
                the joint's position limits.
        """
        held = {}
        for jn, v in held_joints.items():
            if jn not in self.joints:
                raise URDFError(f"{self._where}held joint {quote_name(jn)} is not a joint of this robot")
            j = self.joints[jn]
            if not j.moving:
                raise URDFError(f"{self._where}held joint {quote_name(jn)} is of type {quote_name(j.type)}, not a moving joint")
            v = float(v)
            if not math.isfinite(v):
                raise URDFError(f"{self._where}held joint {quote_name(jn)}: value {v} is not finite")
            tol = 1e-9
            if v < j.lower - tol or v > j.upper + tol:
                raise URDFError(f"{self._where}held joint {quote_name(jn)}: value {v:g} outside its limits "
                                f"[{j.lower:g}, {j.upper:g}]")
            held[jn] = v
        changed = True
        while changed:
            changed = False
            for jn, j in self.joints.items():
                if jn not in held and j.mimic is not None and j.mimic.joint in held:
                    held[jn] = j.mimic.multiplier * held[j.mimic.joint] + j.mimic.offset
                    changed = True
        return {jn: held[jn] for jn in self.joints if jn in held}

    def to_urdf(self, held_joints: Mapping[str, float] = {}) -> str:  # noqa: B006
        """Write this description as URDF text, with some joints held fixed.

        Args:
            held_joints: joint name -> value (rad or m). Each is written as a ``fixed`` joint whose origin
                is the original origin composed with the joint motion at that value (revolute, continuous:
                rotation about the axis; prismatic: translation along it). Mimic joints whose master is
                held are held too (:meth:`resolve_held`).

        Returns:
            URDF XML text without geometry (meshes are never needed): axes normalized, inertias written in the link frame (``rpy`` = 0), ``<mimic>``
            kept for mimic joints that still move. Transmissions, Gazebo and other extras are not written.

        Raises:
            URDFError: see :meth:`resolve_held`.
        """
        held = self.resolve_held(held_joints)
        robot = ET.Element("robot", name=self.name)
        for link in self.links.values():
            el = ET.SubElement(robot, "link", name=link.name)
            ine = link.inertial
            if ine.mass > 0 or np.any(ine.inertia):
                iel = ET.SubElement(el, "inertial")
                ET.SubElement(iel, "origin", xyz=_fmt(ine.com), rpy="0 0 0")
                ET.SubElement(iel, "mass", value=repr(float(ine.mass)))
                I = ine.inertia
                ET.SubElement(iel, "inertia", ixx=repr(float(I[0, 0])), ixy=repr(float(I[0, 1])),
                              ixz=repr(float(I[0, 2])), iyy=repr(float(I[1, 1])), iyz=repr(float(I[1, 2])),
                              izz=repr(float(I[2, 2])))
        for j in self.joints.values():
            if j.name in held:
                T = j.origin @ j.motion(held[j.name])
                el = ET.SubElement(robot, "joint", name=j.name, type="fixed")
                ET.SubElement(el, "origin", xyz=_fmt(T[:3, 3]), rpy=_fmt(matrix_to_rpy(T[:3, :3])))
                ET.SubElement(el, "parent", link=j.parent)
                ET.SubElement(el, "child", link=j.child)
                continue
            el = ET.SubElement(robot, "joint", name=j.name, type=j.type)
            ET.SubElement(el, "origin", xyz=_fmt(j.xyz), rpy=_fmt(j.rpy))
            ET.SubElement(el, "parent", link=j.parent)
            ET.SubElement(el, "child", link=j.child)
            if j.moving:
                ET.SubElement(el, "axis", xyz=_fmt(j.axis))
                lim = {}
                if j.type != "continuous":
                    lim["lower"] = repr(j.lower) if math.isfinite(j.lower) else "-1e10"
                    lim["upper"] = repr(j.upper) if math.isfinite(j.upper) else "1e10"
                lim["effort"] = repr(j.effort) if math.isfinite(j.effort) else "1e10"
                lim["velocity"] = repr(j.velocity) if math.isfinite(j.velocity) else "1e10"
                ET.SubElement(el, "limit", **lim)
                if j.damping or j.friction:
                    ET.SubElement(el, "dynamics", damping=repr(j.damping), friction=repr(j.friction))
                if j.mimic is not None:
                    ET.SubElement(el, "mimic", joint=j.mimic.joint, multiplier=repr(j.mimic.multiplier),
                                  offset=repr(j.mimic.offset))
        ET.indent(robot)
        return '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding="unicode") + "\n"
