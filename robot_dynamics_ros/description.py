"""Our own reading and validation of a URDF: links, joints, inertias, limits, joint dynamics.

This module does not depend on Pinocchio or MuJoCo: the in-package Newton–Euler engine
(:mod:`robot_dynamics_ros.dynamics.newton_euler`) is built from this reading, and the other engines are
built from the URDF that :meth:`RobotDescription.to_urdf` writes, so the engines check each other.

Conventions (ROS REP 103 / URDF specification, http://wiki.ros.org/urdf/XML):

* lengths in m, angles in rad, masses in kg, inertias in kg·m²;
* a joint's ``<origin xyz rpy>`` places the joint frame (= the child link frame at q = 0) in the parent
  link frame; ``rpy`` are fixed-axis roll, pitch, yaw: ``R = Rz(yaw) · Ry(pitch) · Rx(roll)``;
* the joint motion is a rotation (revolute, continuous) or a translation (prismatic) along ``<axis>``,
  expressed in the joint frame; the axis is normalized here (a zero axis is an error);
* ``<inertial>`` gives the mass, the centre of mass and the inertia tensor about the centre of mass in
  the frame ``<inertial><origin>``; here it is rotated into the link frame.

Validation raises :class:`robot_dynamics_ros.errors.URDFError` naming the file (when known) and the link
or joint at fault: negative or non-finite mass, inertia that is not positive semi-definite or whose
principal moments violate the triangle inequality, zero-length axis, unknown parent or child link, a link
with two parents, cycles, more than one root link, duplicate names, floating/planar joints (floating-base
robots are not supported), malformed numbers, DOCTYPE/ENTITY declarations (refused for safety).
Meshes are never opened: ``<visual>``/``<collision>`` are kept only as XML, for :meth:`to_urdf`.

Point masses (a mass with a zero inertia tensor, as in the planar 2R arm of the reference text) and thin
rods (one principal moment zero) are accepted: they are the physical limit cases of the triangle
inequality, not violations of it.
"""
from __future__ import annotations

import copy
import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robot_dynamics_ros.errors import URDFError

#: joint types that move (one degree of freedom each)
MOVING_TYPES = ("revolute", "continuous", "prismatic")
#: joint types accepted in a URDF read here
KNOWN_TYPES = (*MOVING_TYPES, "fixed")

# relative tolerance of the inertia checks (eigenvalues, triangle inequality), times the largest moment
_INERTIA_RTOL = 1e-9


# --------------------------------------------------------------------------------------------------
# small rigid-body helpers (numpy, 3x3 rotations and 4x4 homogeneous transforms)
# --------------------------------------------------------------------------------------------------
def rpy_to_matrix(rpy) -> np.ndarray:
    """Rotation matrix (3, 3) of URDF fixed-axis roll-pitch-yaw (rad): ``Rz(yaw) Ry(pitch) Rx(roll)``."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def matrix_to_rpy(R: np.ndarray) -> np.ndarray:
    """URDF roll, pitch, yaw (rad) of a rotation matrix (3, 3); inverse of :func:`rpy_to_matrix`.

    At pitch = ±π/2 (gimbal lock) only roll ∓ yaw is defined; yaw is set to 0 there.
    """
    R = np.asarray(R, dtype=float)
    cp = math.hypot(R[0, 0], R[1, 0])
    pitch = math.atan2(-R[2, 0], cp)
    if cp > 1e-12:
        roll = math.atan2(R[2, 1], R[2, 2])
        yaw = math.atan2(R[1, 0], R[0, 0])
    else:  # gimbal lock: R = Ry(±π/2) Rx(roll) with yaw folded into roll
        yaw = 0.0
        roll = math.atan2(-R[1, 2], R[1, 1])
    return np.array([roll, pitch, yaw])


def axis_angle_matrix(axis, angle: float) -> np.ndarray:
    """Rotation matrix (3, 3) of ``angle`` (rad) about the unit vector ``axis`` (Rodrigues' formula)."""
    a = np.asarray(axis, dtype=float)
    K = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    return np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * (K @ K)


def transform(xyz, rpy) -> np.ndarray:
    """Homogeneous transform (4, 4) of a URDF ``<origin xyz rpy>``."""
    T = np.eye(4)
    T[:3, :3] = rpy_to_matrix(rpy)
    T[:3, 3] = np.asarray(xyz, dtype=float)
    return T


# --------------------------------------------------------------------------------------------------
# data classes
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Inertial:
    """Mass properties of one link, in the link frame.

    Attributes:
        mass: kg, ≥ 0.
        com: (3,) centre of mass in the link frame, m.
        inertia: (3, 3) inertia tensor about the centre of mass, axes of the link frame, kg·m².
    """

    mass: float = 0.0
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))

    @property
    def is_empty(self) -> bool:
        """True when the link carries neither mass nor rotational inertia."""
        return self.mass == 0.0 and not np.any(self.inertia)


@dataclass(frozen=True)
class Link:
    """A URDF ``<link>``: its name and mass properties (geometry is kept only as XML for :meth:`to_urdf`)."""

    name: str
    inertial: Inertial
    geometry_xml: tuple = ()  # ET.Element copies of <visual>/<collision>


@dataclass(frozen=True)
class Mimic:
    """A URDF ``<mimic>``: q_this = multiplier · q_joint + offset (rad or m)."""

    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class Joint:
    """A URDF ``<joint>``.

    Attributes:
        name, type, parent, child: as in the URDF (type in :data:`KNOWN_TYPES`).
        xyz, rpy: (3,) origin of the joint frame in the parent link frame (m, rad).
        axis: (3,) unit axis in the joint frame.
        lower, upper: position limits (rad or m); -inf/inf for continuous joints or when absent.
        velocity, effort: limits (rad/s or m/s; N·m or N); inf when absent.
        damping: viscous coefficient (N·m·s/rad or N·s/m), 0 when absent.
        friction: Coulomb friction (N·m or N), 0 when absent.
        mimic: :class:`Mimic` or None.
    """

    name: str
    type: str
    parent: str
    child: str
    xyz: np.ndarray
    rpy: np.ndarray
    axis: np.ndarray
    lower: float = -math.inf
    upper: float = math.inf
    velocity: float = math.inf
    effort: float = math.inf
    damping: float = 0.0
    friction: float = 0.0
    mimic: Mimic | None = None

    @property
    def moving(self) -> bool:
        return self.type in MOVING_TYPES

    @property
    def origin(self) -> np.ndarray:
        """(4, 4) transform from the parent link frame to the joint frame (child frame at q = 0)."""
        return transform(self.xyz, self.rpy)

    def motion(self, value: float) -> np.ndarray:
        """(4, 4) transform of the joint motion at position ``value`` (rad or m), in the joint frame."""
        T = np.eye(4)
        if self.type in ("revolute", "continuous"):
            T[:3, :3] = axis_angle_matrix(self.axis, value)
        elif self.type == "prismatic":
            T[:3, 3] = self.axis * value
        return T


# --------------------------------------------------------------------------------------------------
# parsing
# --------------------------------------------------------------------------------------------------
def _floats(text: str | None, count: int, what: str, default=None) -> np.ndarray:
    if text is None:
        if default is None:
            raise URDFError(f"{what}: missing")
        return np.array(default, dtype=float)
    parts = text.split()
    try:
        values = np.array([float(p) for p in parts], dtype=float)
    except ValueError:
        raise URDFError(f"{what}: {text!r} is not a list of {count} numbers") from None
    if values.shape != (count,) or not np.all(np.isfinite(values)):
        raise URDFError(f"{what}: {text!r} is not a list of {count} finite numbers")
    return values


def _float(elem: ET.Element | None, attr: str, what: str, default: float) -> float:
    if elem is None or elem.get(attr) is None:
        return default
    text = elem.get(attr)
    try:
        v = float(text)
    except ValueError:
        raise URDFError(f"{what} {attr}={text!r} is not a number") from None
    if math.isnan(v):
        raise URDFError(f"{what} {attr}={text!r} is not a number")
    return v


def _parse_inertial(link_name: str, elem: ET.Element | None, where: str) -> Inertial:
    if elem is None:
        return Inertial()
    what = f"{where}link {link_name!r} <inertial>"
    origin = elem.find("origin")
    xyz = _floats(origin.get("xyz") if origin is not None else None, 3, f"{what} origin xyz", (0, 0, 0))
    rpy = _floats(origin.get("rpy") if origin is not None else None, 3, f"{what} origin rpy", (0, 0, 0))
    mass_el = elem.find("mass")
    mass = _float(mass_el, "value", f"{what} <mass>", 0.0)
    if not math.isfinite(mass) or mass < 0.0:
        raise URDFError(f"{what}: mass {mass:g} kg is negative or not finite")
    I_el = elem.find("inertia")
    vals = {k: _float(I_el, k, f"{what} <inertia>", 0.0) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
    if not all(math.isfinite(v) for v in vals.values()):
        raise URDFError(f"{what}: inertia {vals} is not finite")
    I = np.array([[vals["ixx"], vals["ixy"], vals["ixz"]],
                  [vals["ixy"], vals["iyy"], vals["iyz"]],
                  [vals["ixz"], vals["iyz"], vals["izz"]]])
    check_inertia(I, f"{what}")
    R = rpy_to_matrix(rpy)
    return Inertial(mass=mass, com=xyz, inertia=R @ I @ R.T)


def check_inertia(I: np.ndarray, what: str) -> None:
    """Raise :class:`URDFError` unless ``I`` (3, 3) is a physical inertia tensor about the centre of mass.

    Physical: symmetric, principal moments ≥ 0 (positive semi-definite) and each principal moment at most
    the sum of the other two (triangle inequality; equality for point masses and thin rods/plates).
    Source: Featherstone 2008, §2.13 (rigid-body inertia); Traversaro et al. 2016 (physical consistency).
    """
    I = np.asarray(I, dtype=float)
    if I.shape != (3, 3) or not np.all(np.isfinite(I)):
        raise URDFError(f"{what}: inertia must be a finite 3x3 matrix, got {I.tolist()}")
    if not np.allclose(I, I.T, rtol=0, atol=1e-12 * max(1.0, np.abs(I).max())):
        raise URDFError(f"{what}: inertia {I.tolist()} is not symmetric")
    moments = np.linalg.eigvalsh(I)
    tol = _INERTIA_RTOL * max(float(np.abs(moments).max()), 1e-300)
    if moments[0] < -tol:
        raise URDFError(f"{what}: inertia is not positive semi-definite (principal moments "
                        f"{', '.join(f'{m:.6g}' for m in moments)} kg·m²)")
    a, b, c = moments
    if c > a + b + tol:
        raise URDFError(f"{what}: principal moments {a:.6g}, {b:.6g}, {c:.6g} kg·m² violate the triangle "
                        f"inequality ({c:.6g} > {a:.6g} + {b:.6g}): no rigid body has this inertia")


def _parse_joint(elem: ET.Element, where: str) -> Joint:
    name = elem.get("name")
    if not name:
        raise URDFError(f"{where}a <joint> has no name")
    what = f"{where}joint {name!r}"
    jtype = elem.get("type")
    if jtype in ("floating", "planar"):
        raise URDFError(f"{what} is of type {jtype!r}: floating-base (and planar-base) robots are not "
                        "supported; give a fixed-base description")
    if jtype not in KNOWN_TYPES:
        raise URDFError(f"{what}: unknown type {jtype!r} (expected one of {', '.join(KNOWN_TYPES)})")
    parent_el, child_el = elem.find("parent"), elem.find("child")
    if parent_el is None or not parent_el.get("link"):
        raise URDFError(f"{what}: missing <parent link=...>")
    if child_el is None or not child_el.get("link"):
        raise URDFError(f"{what}: missing <child link=...>")
    origin = elem.find("origin")
    xyz = _floats(origin.get("xyz") if origin is not None else None, 3, f"{what} origin xyz", (0, 0, 0))
    rpy = _floats(origin.get("rpy") if origin is not None else None, 3, f"{what} origin rpy", (0, 0, 0))
    axis_el = elem.find("axis")
    axis = _floats(axis_el.get("xyz") if axis_el is not None else None, 3, f"{what} axis xyz", (1, 0, 0))
    norm = float(np.linalg.norm(axis))
    if jtype in MOVING_TYPES:
        if norm < 1e-12:
            raise URDFError(f"{what}: axis {axis.tolist()} has zero length")
        axis = axis / norm
    elif norm > 0:
        axis = axis / norm
    lower, upper, velocity, effort = -math.inf, math.inf, math.inf, math.inf
    limit = elem.find("limit")
    if limit is not None:
        velocity = _float(limit, "velocity", f"{what} <limit>", math.inf)
        effort = _float(limit, "effort", f"{what} <limit>", math.inf)
        if velocity < 0 or effort < 0:
            raise URDFError(f"{what} <limit>: velocity {velocity:g} and effort {effort:g} must be ≥ 0")
        if jtype in ("revolute", "prismatic"):
            # URDF specification: lower/upper default to 0 when <limit> is given without them
            lower = _float(limit, "lower", f"{what} <limit>", 0.0)
            upper = _float(limit, "upper", f"{what} <limit>", 0.0)
            if lower > upper:
                raise URDFError(f"{what} <limit>: lower {lower:g} > upper {upper:g}")
    dyn = elem.find("dynamics")
    damping = _float(dyn, "damping", f"{what} <dynamics>", 0.0)
    friction = _float(dyn, "friction", f"{what} <dynamics>", 0.0)
    if not (0 <= damping < math.inf) or not (0 <= friction < math.inf):
        raise URDFError(f"{what} <dynamics>: damping {damping:g} and friction {friction:g} must be finite, ≥ 0")
    mimic = None
    mimic_el = elem.find("mimic")
    if mimic_el is not None and jtype in MOVING_TYPES:
        if not mimic_el.get("joint"):
            raise URDFError(f"{what} <mimic>: missing joint=...")
        mimic = Mimic(mimic_el.get("joint"),
                      _float(mimic_el, "multiplier", f"{what} <mimic>", 1.0),
                      _float(mimic_el, "offset", f"{what} <mimic>", 0.0))
    return Joint(name=name, type=jtype, parent=parent_el.get("link"), child=child_el.get("link"),
                 xyz=xyz, rpy=rpy, axis=axis, lower=lower, upper=upper, velocity=velocity, effort=effort,
                 damping=damping, friction=friction, mimic=mimic)


def _fmt(values) -> str:
    return " ".join(repr(float(v)) for v in np.atleast_1d(values))


# --------------------------------------------------------------------------------------------------
# the description
# --------------------------------------------------------------------------------------------------
class RobotDescription:
    """A validated URDF: a tree of links connected by joints, with mass properties and joint data.

    Build with :meth:`from_urdf` (file path or XML text). Attributes:

    * ``name``: robot name; ``source``: file path or ``"<string>"``;
    * ``links``: dict name -> :class:`Link`; ``joints``: dict name -> :class:`Joint`, in tree order
      (depth-first from the root, children in document order);
    * ``root``: the root link name; ``child_joints``: link -> list of joint names;
      ``parent_joint``: link -> joint name (the root has none).
    """

    def __init__(self, name: str, links: dict[str, Link], joints: list[Joint], source: str = "<string>"):
        self.name = name
        self.source = source
        self.links = dict(links)
        where = f"URDF {source}: " if source else ""
        self._where = where
        by_name: dict[str, Joint] = {}
        for j in joints:
            if j.name in by_name:
                raise URDFError(f"{where}joint {j.name!r} is defined twice")
            by_name[j.name] = j
        self.parent_joint: dict[str, str] = {}
        self.child_joints: dict[str, list[str]] = {ln: [] for ln in self.links}
        for j in joints:
            if j.parent not in self.links:
                raise URDFError(f"{where}joint {j.name!r}: unknown parent link {j.parent!r}")
            if j.child not in self.links:
                raise URDFError(f"{where}joint {j.name!r}: unknown child link {j.child!r}")
            if j.child in self.parent_joint:
                raise URDFError(f"{where}link {j.child!r} has two parent joints: "
                                f"{self.parent_joint[j.child]!r} and {j.name!r}")
            self.parent_joint[j.child] = j.name
            self.child_joints[j.parent].append(j.name)
        roots = [ln for ln in self.links if ln not in self.parent_joint]
        if not roots:
            raise URDFError(f"{where}the joints form a cycle: every link has a parent "
                            f"(e.g. link {next(iter(self.links))!r})")
        if len(roots) > 1:
            raise URDFError(f"{where}more than one root link (links without a parent joint): "
                            f"{', '.join(repr(r) for r in roots)}; connect them with joints")
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
            raise URDFError(f"{where}the joints {', '.join(repr(j) for j in on_cycle)} form a cycle "
                            "(not reachable from the root link)")
        self.joints: dict[str, Joint] = {jn: by_name[jn] for jn in order}
        for j in self.joints.values():
            if j.mimic is not None:
                if j.mimic.joint not in self.joints:
                    raise URDFError(f"{where}joint {j.name!r} <mimic>: unknown joint {j.mimic.joint!r}")
                if not self.joints[j.mimic.joint].moving:
                    raise URDFError(f"{where}joint {j.name!r} <mimic>: joint {j.mimic.joint!r} does not move")
        for j in self.joints.values():  # mimic cycles
            seen = {j.name}
            m = j.mimic
            while m is not None:
                if m.joint in seen:
                    raise URDFError(f"{where}joint {j.name!r}: <mimic> joints form a cycle through "
                                    f"{m.joint!r}")
                seen.add(m.joint)
                m = self.joints[m.joint].mimic

    # ----------------------------------------------------------------------------------------------
    @classmethod
    def from_urdf(cls, source: str | Path) -> RobotDescription:
        """Read and validate a URDF.

        Args:
            source: a file path, or the URDF XML text itself (a string starting with ``<``).

        Raises:
            URDFError: unreadable file, malformed XML, DOCTYPE/ENTITY declarations, or any of the
                validation failures listed in the module docstring (the message names the link/joint).
        """
        text, where = read_urdf_text(source)
        label = where if where != "<string>" else "<string>"
        prefix = f"URDF {label}: "
        if "<!DOCTYPE" in text or "<!ENTITY" in text:
            raise URDFError(f"{prefix}DOCTYPE/ENTITY declarations are refused (XML entity expansion)")
        try:
            root = ET.fromstring(text)
        except ET.ParseError as exc:
            raise URDFError(f"{prefix}not well-formed XML: {exc}") from None
        if root.tag != "robot":
            raise URDFError(f"{prefix}the root element is <{root.tag}>, expected <robot>")
        links: dict[str, Link] = {}
        for el in root.findall("link"):
            name = el.get("name")
            if not name:
                raise URDFError(f"{prefix}a <link> has no name")
            if name in links:
                raise URDFError(f"{prefix}link {name!r} is defined twice")
            geom = tuple(copy.deepcopy(g) for g in el if g.tag in ("visual", "collision"))
            links[name] = Link(name, _parse_inertial(name, el.find("inertial"), prefix), geom)
        if not links:
            raise URDFError(f"{prefix}no <link> elements")
        joints = [_parse_joint(el, prefix) for el in root.findall("joint")]
        return cls(root.get("name", "robot"), links, joints, source=label)

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
                raise URDFError(f"{self._where}held joint {jn!r} is not a joint of this robot")
            j = self.joints[jn]
            if not j.moving:
                raise URDFError(f"{self._where}held joint {jn!r} is of type {j.type!r}, not a moving joint")
            v = float(v)
            if not math.isfinite(v):
                raise URDFError(f"{self._where}held joint {jn!r}: value {v} is not finite")
            tol = 1e-9
            if v < j.lower - tol or v > j.upper + tol:
                raise URDFError(f"{self._where}held joint {jn!r}: value {v:g} outside its limits "
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

    def to_urdf(self, held_joints: Mapping[str, float] = {}, drop_geometry: bool = True) -> str:  # noqa: B006
        """Write this description as URDF text, with some joints held fixed.

        Args:
            held_joints: joint name -> value (rad or m). Each is written as a ``fixed`` joint whose origin
                is the original origin composed with the joint motion at that value (revolute, continuous:
                rotation about the axis; prismatic: translation along it). Mimic joints whose master is
                held are held too (:meth:`resolve_held`).
            drop_geometry: drop ``<visual>``/``<collision>`` (meshes are then never needed).

        Returns:
            URDF XML text: axes normalized, inertias written in the link frame (``rpy`` = 0), ``<mimic>``
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
            if not drop_geometry:
                for g in link.geometry_xml:
                    el.append(copy.deepcopy(g))
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


def read_urdf_text(source: str | Path) -> tuple[str, str]:
    """Return ``(xml_text, label)`` for a file path or URDF text; label is the path or ``"<string>"``.

    Raises:
        URDFError: the path does not exist or cannot be read.
    """
    if isinstance(source, str) and source.lstrip("\ufeff \t\r\n").startswith("<"):
        return source.lstrip("\ufeff"), "<string>"
    p = Path(source).expanduser()
    try:
        return p.read_text(encoding="utf-8-sig"), str(p)
    except FileNotFoundError:
        raise URDFError(f"URDF {source!r}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise URDFError(f"URDF {source!r}: cannot read: {exc}") from None
