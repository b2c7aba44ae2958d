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

Reading (:func:`parse_urdf_xml`): descriptions are data. :meth:`RobotDescription.from_text` never opens a
file; :meth:`RobotDescription.from_file` reads regular files only (:func:`read_urdf_file`). The parse is
streaming and bounded (:data:`MAX_URDF_BYTES`, :data:`MAX_URDF_ELEMENTS`, :data:`MAX_URDF_DEPTH`,
:data:`MAX_ATTRIBUTE_CHARS`);
``<visual>``, ``<collision>`` and other content are skipped, never stored; meshes are never opened;
DOCTYPE/ENTITY declarations are refused (entity expansion). Messages quote at most :data:`EXCERPT_CHARS`
characters of the input.

Validation raises :class:`robot_dynamics_ros.errors.URDFError`, one line naming the source and the link or
joint at fault: negative or non-finite mass, a principal moment clearly below zero on a moving link,
values beyond the plausibility bounds (:data:`MAX_LINK_MASS`, :data:`MAX_LINK_INERTIA`,
:data:`MAX_LENGTH`), zero-length axis, unknown parent or child link, a link with two parents, cycles, more
than one root link, duplicate names, malformed numbers, ``lower > upper``, ``<mimic>`` cycles.

Accepted with a warning (:attr:`RobotDescription.warnings`; ``strict=True`` refuses them instead): a
non-physical inertia on the fixed base (the root link and links welded to it; zeroed, since it cannot
affect joint torques), principal moments violating the triangle inequality on a moving link (no rigid body
has them, but M(q) stays positive definite; used as given, as Pinocchio does), a ``<mimic>`` naming an
unknown or fixed joint (ignored: the joint is actuated on its own, as Pinocchio reads it), a ``floating``
or ``planar`` joint (welded at its origin: the fixed-base view; Pinocchio would make it a free-flyer).

Rounding is not a violation: the inertia checks have the tolerance of :func:`inertia_tolerance`. Point
masses (a mass with a zero inertia tensor, as in the planar 2R arm of the reference text) and thin rods
(one principal moment zero) are accepted: they are the physical limit cases of the triangle inequality.
"""
from __future__ import annotations

import dataclasses
import math
import os
import stat
import xml.etree.ElementTree as ET
from xml.parsers import expat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robot_dynamics_ros.errors import URDFError

#: joint types that move (one degree of freedom each)
MOVING_TYPES = ("revolute", "continuous", "prismatic")
#: joint types accepted in a URDF read here
KNOWN_TYPES = (*MOVING_TYPES, "fixed")
#: joint types of floating and planar bases: welded at their origin (the fixed-base view), with a warning
WELDED_TYPES = ("floating", "planar")

#: relative tolerance of the inertia checks (eigenvalues, triangle inequality), times the largest moment
INERTIA_RTOL = 1e-9
#: a moment below mass · INERTIA_LENGTH² counts as zero (m): rounding of point masses
INERTIA_LENGTH = 1e-6
#: plausibility bounds, enforced by the lenient loader too: orders of magnitude, not rounding. The heaviest
#: industrial arms weigh a few tonnes in all; a link of 1e6 kg and 10 m has inertias near 1e7 kg·m².
MAX_LINK_MASS = 1e6  # kg
MAX_LINK_INERTIA = 1e8  # kg·m², any entry of the tensor
MAX_LENGTH = 1e3  # m, any coordinate of a joint origin or centre of mass

#: largest URDF accepted, bytes (UTF-8): the largest of example-robot-data is 0.2 MB
MAX_URDF_BYTES = 16 * 1024 * 1024
#: most XML elements accepted in one URDF (all of them, <visual> content included; the largest of
#: example-robot-data has 3 851)
MAX_URDF_ELEMENTS = 200_000
#: deepest element nesting accepted (the deepest of example-robot-data is below 10; a description nested
#: thousands deep is an attack on recursive readers downstream, e.g. robot_state_publisher's)
MAX_URDF_DEPTH = 100
#: longest attribute value accepted on the elements that are read (names, numbers; the longest name in
#: example-robot-data has 113 characters)
MAX_ATTRIBUTE_CHARS = 256
#: at most this many characters of the input are quoted in an error message
EXCERPT_CHARS = 60


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
    """A URDF ``<link>``: its name and mass properties (visual and collision geometry are not read)."""

    name: str
    inertial: Inertial


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
def quote_name(name) -> str:
    """``repr`` of a name from the input for a message, cut to :data:`EXCERPT_CHARS` characters."""
    text = str(name)
    return repr(text) if len(text) <= EXCERPT_CHARS else repr(text[:EXCERPT_CHARS]) + "..."


def quote_names(names, limit: int = 5) -> str:
    """``'a', 'b', 'c' and 4 more``: at most ``limit`` names (each :func:`quote_name`), for messages."""
    names = list(names)
    shown = ", ".join(quote_name(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _floats(text: str | None, count: int, what: str, default=None) -> np.ndarray:
    if text is None:
        if default is None:
            raise URDFError(f"{what}: missing")
        return np.array(default, dtype=float)
    parts = text.split()
    try:
        values = np.array([float(p) for p in parts], dtype=float)
    except ValueError:
        raise URDFError(f"{what}: '{_excerpt(text)}' is not a list of {count} numbers") from None
    if values.shape != (count,) or not np.all(np.isfinite(values)):
        raise URDFError(f"{what}: '{_excerpt(text)}' is not a list of {count} finite numbers")
    return values


def _float(elem: ET.Element | None, attr: str, what: str, default: float) -> float:
    if elem is None or elem.get(attr) is None:
        return default
    text = elem.get(attr)
    try:
        v = float(text)
    except ValueError:
        raise URDFError(f"{what} {attr}='{_excerpt(text)}' is not a number") from None
    if math.isnan(v):
        raise URDFError(f"{what} {attr}='{_excerpt(text)}' is not a number")
    return v


def _parse_inertial(link_name: str, elem: ET.Element | None, where: str) -> tuple[Inertial, tuple[str, str] | None]:
    """The link's :class:`Inertial` (link frame) and its physical-consistency problem, if any
    (:func:`inertia_problem`); out-of-range values (:data:`MAX_LINK_MASS`, ...) raise at once."""
    if elem is None:
        return Inertial(), None
    what = f"{where}link {quote_name(link_name)} <inertial>"
    origin = elem.find("origin")
    xyz = _floats(origin.get("xyz") if origin is not None else None, 3, f"{what} origin xyz", (0, 0, 0))
    rpy = _floats(origin.get("rpy") if origin is not None else None, 3, f"{what} origin rpy", (0, 0, 0))
    _check_length(xyz, f"{what} origin xyz")
    mass_el = elem.find("mass")
    mass = _float(mass_el, "value", f"{what} <mass>", 0.0)
    if not math.isfinite(mass) or mass < 0.0:
        raise URDFError(f"{what}: mass {mass:g} kg is negative or not finite")
    if mass > MAX_LINK_MASS:
        raise URDFError(f"{what}: mass {mass:g} kg is above the {MAX_LINK_MASS:g} kg accepted for one link "
                        "(MAX_LINK_MASS): not a robot link")
    I_el = elem.find("inertia")
    vals = {k: _float(I_el, k, f"{what} <inertia>", 0.0) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
    if not all(math.isfinite(v) for v in vals.values()):
        raise URDFError(f"{what}: inertia {vals} is not finite")
    big = max(abs(v) for v in vals.values())
    if big > MAX_LINK_INERTIA:
        raise URDFError(f"{what}: inertia entry {big:g} kg·m² is above the {MAX_LINK_INERTIA:g} kg·m² accepted "
                        "for one link (MAX_LINK_INERTIA): not a robot link")
    I = np.array([[vals["ixx"], vals["ixy"], vals["ixz"]],
                  [vals["ixy"], vals["iyy"], vals["iyz"]],
                  [vals["ixz"], vals["iyz"], vals["izz"]]])
    R = rpy_to_matrix(rpy)
    return Inertial(mass=mass, com=xyz, inertia=R @ I @ R.T), inertia_problem(I, mass)


def _check_length(xyz: np.ndarray, what: str) -> None:
    if np.abs(xyz).max() > MAX_LENGTH:
        raise URDFError(f"{what}: {np.abs(xyz).max():g} m is beyond the {MAX_LENGTH:g} m accepted "
                        "(MAX_LENGTH): not a robot")


def inertia_tolerance(moments: np.ndarray, mass: float) -> float:
    """Tolerance (kg·m²) of the inertia checks: ``INERTIA_RTOL · max |moment| + mass · INERTIA_LENGTH²``.

    The first term absorbs rounding relative to the link's own inertia; the second the rounding of a point
    mass (whose exact moments are 0, so that the first term vanishes): below ``mass · (1 µm)²`` a moment is
    that of a body 1 µm across, i.e. zero for any robot.
    """
    return INERTIA_RTOL * float(np.abs(moments).max()) + mass * INERTIA_LENGTH**2


def inertia_problem(I: np.ndarray, mass: float = 0.0) -> tuple[str, str] | None:
    """Physical consistency of an inertia tensor ``I`` (3, 3) about the centre of mass of ``mass`` kg.

    Returns None when physical within :func:`inertia_tolerance`, else ``(kind, text)`` with kind
    ``"negative"`` (a principal moment below 0: not positive semi-definite, M(q) may be indefinite) or
    ``"triangle"`` (a principal moment above the sum of the other two: no mass distribution has it, but
    M(q) stays positive definite). Physical: principal moments ≥ 0 and each at most the sum of the other
    two (equality for point masses and thin rods/plates). Source: Featherstone 2008, §2.13; Traversaro et
    al. 2016 (physical consistency).
    """
    moments = np.linalg.eigvalsh(0.5 * (I + I.T))
    tol = inertia_tolerance(moments, mass)
    a, b, c = moments
    if a < -tol:
        return "negative", (f"inertia is not positive semi-definite (principal moments "
                            f"{', '.join(f'{m:.6g}' for m in moments)} kg·m²)")
    if c > a + b + tol:
        return "triangle", (f"principal moments {a:.6g}, {b:.6g}, {c:.6g} kg·m² violate the triangle inequality "
                            f"({c:.6g} > {a:.6g} + {b:.6g}, by {(c - a - b) / c:.1%}): no rigid body has this "
                            "inertia")
    return None


def check_inertia(I: np.ndarray, what: str, mass: float = 0.0) -> None:
    """Raise :class:`URDFError` unless ``I`` (3, 3) is a symmetric, finite, physical inertia tensor about
    the centre of mass of ``mass`` kg (see :func:`inertia_problem`; both kinds of problem raise)."""
    I = np.asarray(I, dtype=float)
    if I.shape != (3, 3) or not np.all(np.isfinite(I)):
        raise URDFError(f"{what}: inertia must be a finite 3x3 matrix, got {I.tolist()}")
    if not np.allclose(I, I.T, rtol=0, atol=1e-12 * max(1.0, np.abs(I).max())):
        raise URDFError(f"{what}: inertia {I.tolist()} is not symmetric")
    problem = inertia_problem(I, mass)
    if problem is not None:
        raise URDFError(f"{what}: {problem[1]}")


def _parse_joint(elem: ET.Element, where: str) -> Joint:
    name = elem.get("name")
    if not name:
        raise URDFError(f"{where}a <joint> has no name")
    what = f"{where}joint {quote_name(name)}"
    jtype = elem.get("type")
    if jtype in WELDED_TYPES:  # the fixed-base view; RobotDescription records the warning
        jtype = "fixed"
    if jtype not in KNOWN_TYPES:
        raise URDFError(f"{what}: unknown type {quote_name(jtype)} (expected one of {', '.join(KNOWN_TYPES)})")
    parent_el, child_el = elem.find("parent"), elem.find("child")
    if parent_el is None or not parent_el.get("link"):
        raise URDFError(f"{what}: missing <parent link=...>")
    if child_el is None or not child_el.get("link"):
        raise URDFError(f"{what}: missing <child link=...>")
    origin = elem.find("origin")
    xyz = _floats(origin.get("xyz") if origin is not None else None, 3, f"{what} origin xyz", (0, 0, 0))
    rpy = _floats(origin.get("rpy") if origin is not None else None, 3, f"{what} origin rpy", (0, 0, 0))
    _check_length(xyz, f"{what} origin xyz")
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
        elsewhere is refused (M(q) could be indefinite); a triangle-inequality violation elsewhere is
        accepted with a warning (M(q) stays positive definite; Pinocchio and MuJoCo compute with it)."""
        base = set(self.base_links())
        for ln, (kind, text) in problems.items():
            what = f"{self._where}link {quote_name(ln)} <inertial>"
            if ln in base:
                self._warn(f"{what}: {text} (the link is welded to the fixed base)",
                           accepted="ignored: its inertia cannot affect joint torques")
                self.links[ln] = Link(ln, Inertial())
            elif kind == "negative":
                raise URDFError(f"{what}: {text}")
            else:
                self._warn(f"{what}: {text}", accepted="used as given (M(q) stays positive definite)")

    # ----------------------------------------------------------------------------------------------
    @classmethod
    def from_text(cls, xml: str, *, label: str = "robot_description", strict: bool = False) -> RobotDescription:
        """Read and validate URDF XML text. Never opens a file, whatever the text says.

        Args:
            xml: the URDF document (at most :data:`MAX_URDF_BYTES` UTF-8 bytes, :data:`MAX_URDF_ELEMENTS`
                elements).
            label: how messages name the source (a topic, a parameter, a file path).
            strict: refuse (URDFError) what the lenient reading accepts with a warning (:attr:`warnings`).

        Raises:
            URDFError: text that is not URDF XML (``"<label>: not URDF XML (starts with '...')"``), too large,
                malformed XML, DOCTYPE/ENTITY declarations, or any validation failure of the module
                docstring (naming the link/joint). Messages quote at most :data:`EXCERPT_CHARS` characters
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
            inertial, problem = _parse_inertial(name, el.find("inertial"), prefix)
            links[name] = Link(name, inertial)
            if problem is not None:
                problems[name] = problem
        if not links:
            raise URDFError(f"{prefix}no <link> elements")
        joints = [_parse_joint(el, prefix) for el in root.findall("joint")]
        welded = {el.get("name"): el.get("type") for el in root.findall("joint") if el.get("type") in WELDED_TYPES}
        return cls(root.get("name", "robot"), links, joints, source=label, inertia_problems=problems,
                   welded_joints=welded, strict=strict)

    @classmethod
    def from_file(cls, path: str | Path, *, strict: bool = False) -> RobotDescription:
        """Read and validate a URDF file: a regular file (no FIFO, device or directory) of at most
        :data:`MAX_URDF_BYTES` bytes, UTF-8 (a BOM is allowed).

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


# --------------------------------------------------------------------------------------------------
# reading: text and files, bounded
# --------------------------------------------------------------------------------------------------
def _excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The first ``limit`` characters of ``text`` (control characters shown as escapes), for messages."""
    head = text[:limit]
    shown = head.encode("unicode_escape", errors="backslashreplace").decode("ascii")[:limit]
    return shown + ("..." if len(text) > limit or len(shown) < len(head) else "")


def is_xml_text(source) -> bool:
    """True when ``source`` is a str whose first character after blanks (and a BOM) is ``<``."""
    return isinstance(source, str) and source[:4096].lstrip("\ufeff \t\r\n").startswith("<")


def read_urdf_file(path: str | Path) -> tuple[str, str]:
    """``(text, label)`` of a URDF file; label is the path as given (``~`` expanded).

    Only regular files are read (a FIFO, device, socket or directory is refused without blocking: the file
    is opened non-blocking and checked with ``fstat``), at most :data:`MAX_URDF_BYTES` bytes, UTF-8.

    Raises:
        URDFError: ``"URDF <path>: <reason>"`` on one line.
    """
    raw = str(path)
    if len(raw) > 4096 or "\x00" in raw:  # PATH_MAX; and no echo of a long or binary "path"
        raise URDFError(f"URDF path '{_excerpt(raw)}': not a file path ({len(raw)} characters)")
    p = Path(path).expanduser()
    label = str(p)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise URDFError(f"URDF {label}: no such file") from None
    except OSError as exc:
        raise URDFError(f"URDF {label}: cannot open: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a file")
            raise URDFError(f"URDF {label}: {kind}, not a regular file")
        if st.st_size > MAX_URDF_BYTES:
            raise URDFError(f"URDF {label}: {st.st_size} bytes, more than the {MAX_URDF_BYTES} bytes accepted "
                            "(MAX_URDF_BYTES)")
        chunks, size = [], 0
        while size <= MAX_URDF_BYTES:  # the file may grow after fstat: read at most the cap + 1 byte
            chunk = os.read(fd, min(1 << 20, MAX_URDF_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise URDFError(f"URDF {label}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > MAX_URDF_BYTES:
        raise URDFError(f"URDF {label}: more than the {MAX_URDF_BYTES} bytes accepted (MAX_URDF_BYTES)")
    try:
        return b"".join(chunks).decode("utf-8-sig"), label
    except UnicodeDecodeError as exc:
        raise URDFError(f"URDF {label}: not UTF-8 text (byte {exc.start})") from None


# elements kept by the reader, by parent path; everything else (visual, collision, transmission, gazebo,
# and whatever they contain) is only counted
_KEEP_CHILDREN = {("robot",): ("link", "joint"), ("robot", "link"): ("inertial",),
                  ("robot", "link", "inertial"): ("origin", "mass", "inertia")}


def parse_urdf_xml(xml: str, label: str) -> ET.Element:
    """Parse URDF text into a small element tree holding only what the dynamics need.

    The parse is streaming (expat callbacks, no recursion, no deep copy): ``<robot>``, its ``<link>`` and
    ``<joint>`` elements, a link's ``<inertial>`` with ``<origin>``/``<mass>``/``<inertia>``, and the direct
    children of a joint are kept; all other content (``<visual>``, ``<collision>``, ``<gazebo>``, text) is
    skipped however deeply nested. Limits: :data:`MAX_URDF_BYTES` bytes, :data:`MAX_URDF_ELEMENTS`
    elements, :data:`MAX_ATTRIBUTE_CHARS` characters per kept attribute; DOCTYPE/ENTITY declarations
    are refused (entity expansion).

    Raises:
        URDFError: one line, ``"URDF <label>: <reason>"``, quoting at most :data:`EXCERPT_CHARS` characters.
    """
    prefix = f"URDF {label}: "
    if not isinstance(xml, str):
        raise URDFError(f"{prefix}expected URDF XML text, got {type(xml).__name__}")
    if len(xml) > MAX_URDF_BYTES or len(xml.encode("utf-8", errors="surrogatepass")) > MAX_URDF_BYTES:
        raise URDFError(f"{prefix}more than the {MAX_URDF_BYTES} bytes accepted (MAX_URDF_BYTES)")
    text = xml.lstrip("\ufeff \t\r\n")
    if not text:
        raise URDFError(f"{prefix}empty text (no URDF XML)" if not xml else f"{prefix}only whitespace (no URDF XML)")
    if not text.startswith("<"):
        raise URDFError(f"{prefix}not URDF XML (starts with '{_excerpt(text)}')")

    parser = expat.ParserCreate()
    stack: list[tuple[str, ET.Element | None, tuple[str, ...] | None]] = []  # (tag, kept element, path)
    count = 0
    holder: list[ET.Element] = []

    def refuse_declaration(*_args) -> None:
        raise URDFError(f"{prefix}DOCTYPE/ENTITY declarations are refused (XML entity expansion)")

    def start(tag: str, attrib: dict) -> None:
        nonlocal count
        count += 1
        if count > MAX_URDF_ELEMENTS:
            raise URDFError(f"{prefix}more than {MAX_URDF_ELEMENTS} XML elements (MAX_URDF_ELEMENTS)")
        if len(stack) >= MAX_URDF_DEPTH:
            raise URDFError(f"{prefix}XML elements nested more than {MAX_URDF_DEPTH} deep (MAX_URDF_DEPTH)")
        if not stack:
            if tag != "robot":
                raise URDFError(f"{prefix}the root element is <{_excerpt(tag)}>, expected <robot>")
            path: tuple[str, ...] | None = ("robot",)
            el = ET.Element(tag)
            holder.append(el)
        else:
            _, parent, ppath = stack[-1]
            keep = parent is not None and (tag in _KEEP_CHILDREN.get(ppath, ())
                                           or (ppath is not None and ppath[-1:] == ("joint",) and len(ppath) == 2))
            if not keep:
                stack.append((tag, None, None))
                return
            path = (*ppath, tag)
            el = ET.SubElement(parent, tag)
        for k, v in attrib.items():
            if len(v) > MAX_ATTRIBUTE_CHARS:
                raise URDFError(f"{prefix}<{tag}> attribute {quote_name(k)} has {len(v)} characters, more than the "
                                f"{MAX_ATTRIBUTE_CHARS} accepted ('{_excerpt(v)}')")
            el.set(k, v)
        stack.append((tag, el, path))

    def end(_tag: str) -> None:
        stack.pop()

    parser.StartDoctypeDeclHandler = refuse_declaration
    parser.EntityDeclHandler = refuse_declaration
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(text, True)
    except expat.ExpatError as exc:
        raise URDFError(f"{prefix}not well-formed XML: {expat.errors.messages[exc.code] if exc.code else exc} "
                        f"(line {exc.lineno}, column {exc.offset})") from None
    if not holder:
        raise URDFError(f"{prefix}no <robot> element")
    return holder[0]
