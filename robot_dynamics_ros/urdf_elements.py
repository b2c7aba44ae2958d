"""The elements of a URDF, parsed and checked one by one: :class:`Link` with its :class:`Inertial`,
:class:`Joint` with its :class:`Mimic`, the URDF's rigid-body conventions (fixed-axis roll-pitch-yaw, origin
transforms, joint motion) and the physical-consistency and plausibility checks of an inertia.

Conventions (ROS REP 103 / URDF specification, http://wiki.ros.org/urdf/XML): lengths in m, angles in rad,
masses in kg, inertias in kg·m²; a joint's ``<origin xyz rpy>`` places the joint frame (= the child link frame
at q = 0) in the parent link frame, ``R = Rz(yaw) · Ry(pitch) · Rx(roll)``; the joint axis is normalized (a
zero axis is an error); ``<inertial>`` is rotated into the link frame. Errors are
:class:`robot_dynamics_ros.errors.URDFError`, one line naming the source and the link or joint at fault.
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np

from robot_dynamics_ros.errors import URDFError
from robot_dynamics_ros.urdf_reader import excerpt, quote_name

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
#: plausibility bounds of one link (or payload), enforced by the lenient loader too: orders of magnitude, not
#: rounding. The heaviest industrial arms weigh a few tonnes in all (a 1 000 kg-payload arm about 4.7 t), so
#: no link of a manipulator reaches 10 t; a 1e5 kg link is a typo or an attack, and the drives could not hold
#: it (the gravity node would only command its effort limits).
MAX_LINK_MASS = 1e4  # kg
#: m: the largest distance of a link's (or payload's) mass from its centre of mass. A body within a ball
#: of radius r about its centre of mass has every principal moment ≤ mass · r² (I_xx = Σ mᵢ(yᵢ² + zᵢ²));
#: 5 m covers a 17 m thin rod, beyond the reach of any manipulator (example-robot-data's links: ≤ 3.2 m).
MAX_LINK_RADIUS = 5.0
#: kg·m², any entry of the tensor: the largest link (MAX_LINK_MASS) at MAX_LINK_RADIUS
MAX_LINK_INERTIA = MAX_LINK_MASS * MAX_LINK_RADIUS**2
MAX_LENGTH = 1e3  # m, any coordinate of a joint origin or centre of mass


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


def _floats(text: str | None, count: int, what: str, default=None) -> np.ndarray:
    if text is None:
        if default is None:
            raise URDFError(f"{what}: missing")
        return np.array(default, dtype=float)
    parts = text.split()
    try:
        values = np.array([float(p) for p in parts], dtype=float)
    except ValueError:
        raise URDFError(f"{what}: '{excerpt(text)}' is not a list of {count} numbers") from None
    if values.shape != (count,) or not np.all(np.isfinite(values)):
        raise URDFError(f"{what}: '{excerpt(text)}' is not a list of {count} finite numbers")
    return values


def _float(elem: ET.Element | None, attr: str, what: str, default: float) -> float:
    if elem is None or elem.get(attr) is None:
        return default
    text = elem.get(attr)
    try:
        v = float(text)
    except ValueError:
        raise URDFError(f"{what} {attr}='{excerpt(text)}' is not a number") from None
    if math.isnan(v):
        raise URDFError(f"{what} {attr}='{excerpt(text)}' is not a number")
    return v


def parse_inertial(link_name: str, elem: ET.Element | None, where: str) -> tuple[Inertial, tuple[str, str] | None]:
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
    ``"negative"`` (a principal moment below 0: not positive semi-definite, M(q) may be indefinite),
    ``"size"`` (mass > 0 and a principal moment above ``mass · MAX_LINK_RADIUS²``: the mass would lie
    farther than :data:`MAX_LINK_RADIUS` from its centre, not a robot link) or ``"triangle"`` (a principal
    moment above the sum of the other two: no mass distribution has it, but M(q) stays positive definite).
    Physical: principal moments ≥ 0 and each at most the sum of the other two (equality for point masses
    and thin rods/plates). Source: Featherstone 2008, §2.13; Traversaro et al. 2016 (physical consistency).
    A massless link's inertia is not bounded by its size (some descriptions give a massless frame a tiny
    inertia); :data:`MAX_LINK_INERTIA` still applies.
    """
    moments = np.linalg.eigvalsh(0.5 * (I + I.T))
    tol = inertia_tolerance(moments, mass)
    a, b, c = moments
    if a < -tol:
        return "negative", (f"inertia is not positive semi-definite (principal moments "
                            f"{', '.join(f'{m:.6g}' for m in moments)} kg·m²)")
    if mass > 0.0 and c > mass * MAX_LINK_RADIUS**2 + tol:
        return "size", (f"largest principal moment {c:.6g} kg·m² is above mass · MAX_LINK_RADIUS² = "
                        f"{mass:.6g} kg · ({MAX_LINK_RADIUS:g} m)²: the mass would lie {math.sqrt(c / mass):.3g} m "
                        "or more from its centre, not a robot link")
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


def parse_joint(elem: ET.Element, where: str) -> Joint:
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
