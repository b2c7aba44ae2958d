"""RobotModel: what the engines and nodes need from a URDF, in one place.

A :class:`RobotModel` wraps our own reading of the URDF (:class:`~robot_dynamics_ros.description.RobotDescription`)
and fixes the things every consumer must agree on:

* the **actuated joints** ``joint_names`` — revolute, continuous and prismatic joints that are neither
  held fixed nor mimic joints, in URDF tree order (depth-first from the root link). Every array of the
  engines (q, qd, qdd, tau, rows/columns of M and C) is in this order; messages are mapped by name;
* **mimic joints** are followed: ``q_mimic = multiplier · q_master + offset``. Their torque is carried by
  the master joint (virtual work: ``tau_master += multiplier · tau_mimic``);
* **held joints** (e.g. gripper fingers) are welded at a given value; a mimic joint of a held joint is held;
* limits: position, velocity, effort from the URDF, acceleration (and overrides) from a MoveIt-style
  ``joint_limits.yaml``; ``damping``/``friction`` from URDF ``<dynamics>``, or identified values with the
  rotor inertia (``armature``) and the torque-sensor offset (:class:`~robot_dynamics_ros.friction.JointFriction`, the friction YAML);
* ``gravity`` (m/s², in the root link frame) and a **payload** on a named link. A model is treated as
  immutable once shared: run-time changes build a copy with :meth:`RobotModel.with_settings` and swap the
  reference (``gravity`` and ``payload`` are read-only properties). Every model object has a
  process-wide unique ``version``, so an engine knows to update;
* what the lenient loader accepted (``warnings``) and the actuated joints that move no mass
  (``massless_joints``: M(q) singular; what needs M⁻¹ refuses them);
* the engines' size: :data:`MAX_ENGINE_BYTES` is checked before any engine is built.

The root link is the fixed base; ``floating``/``planar`` joints are welded at their origin with a warning
(by :mod:`robot_dynamics_ros.description`).
"""
from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np

from robot_dynamics_ros.description import RobotDescription
from robot_dynamics_ros.errors import URDFError, UserError
from robot_dynamics_ros.friction import JointFriction
from robot_dynamics_ros.share import read_yaml
from robot_dynamics_ros.urdf_elements import MAX_LINK_MASS, check_inertia
from robot_dynamics_ros.urdf_reader import is_xml_text, quote_name, quote_names, read_urdf_file


_KEEP = object()
_VERSIONS = itertools.count(1)

#: largest memory the engines of one model may need, bytes (checked before any engine is built)
MAX_ENGINE_BYTES = 1 << 30
#: a payload heavier than this multiple of the robot's moving mass is refused: manipulators carry a
#: fraction of their own mass (a 7 kg-payload cobot weighs about 18 kg, a 1 000 kg-payload arm about 4.7 t)
PAYLOAD_MASS_RATIO = 10.0


def estimated_engine_bytes(nv: int) -> int:
    """Memory (bytes) of one Pinocchio ``Data`` for ``nv`` moving joints: ``36·nv³ + 8 MB``.

    Pinocchio 4 allocates nv × nv × nv tensors (second derivatives of the RNEA) in every ``Data``; the formula is
    fitted to the resident-set growth of ``createData`` on serial chains (5 MB at nv = 25, 42 MB at 100,
    279 MB at 200). The in-package Newton–Euler engine needs O(nv) per state, far less.
    """
    return 36 * nv**3 + 8_000_000



def _scaling_factor(value, where: str, key: str) -> float:
    """A joint_limits.yaml ``default_*_scaling_factor``: a number in (0, 1].

    Raises:
        UserError: ``"<where>: <key>=<value> must be a number in (0, 1]"`` (one line).
    """
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or not 0.0 < v <= 1.0:
        raise UserError(f"{where}: {key}={value!r} must be a number in (0, 1]")
    return v


@dataclass(frozen=True)
class Payload:
    """A rigid payload attached to ``link``.

    Attributes:
        link: name of the link carrying it.
        mass: kg, ≥ 0.
        com: (3,) centre of mass in the link frame, m.
        inertia: (3, 3) inertia about the centre of mass, link-frame axes, kg·m².
    """

    link: str
    mass: float
    com: np.ndarray
    inertia: np.ndarray


class RobotModel:
    """A fixed-base robot loaded from a URDF, with held joints, payload, gravity and limits.

    Build with :meth:`from_text` (XML text), :meth:`from_file` or :meth:`from_urdf` (either). Attributes (arrays are (n,) in ``joint_names`` order, inf where unknown):

    * ``description`` (:class:`RobotDescription`), ``urdf_xml`` (the URDF text it was built from);
    * ``joint_names`` (tuple), ``n``, ``index`` (name -> position);
    * ``lower``, ``upper`` (rad or m), ``velocity_limit`` (rad/s or m/s), ``effort_limit`` (N·m or N),
      ``acceleration_limit`` (rad/s² or m/s²), ``jerk_limit`` (rad/s³ or m/s³), ``damping`` (N·m·s/rad), ``friction`` (N·m, Coulomb);
    * ``default_velocity_scaling_factor``, ``default_acceleration_scaling_factor``: the joint_limits.yaml's
      top-level factors in (0, 1] (MoveIt Setup Assistant writes them), or None; the retimer's scaling
      when a request gives none (:class:`~robot_dynamics_ros.retiming.request.RetimeOptions`);
    * ``armature`` (kg·m², rotor inertia on the diagonal of M) and ``effort_offset`` (N·m, bias of the
      measured torque): zeros unless identified values were applied with ``with_settings(friction=...)``,
      which also replaces ``damping``/``friction`` and sets ``coulomb_velocity`` (rad/s, 0: the Coulomb law is
      sign(qd), see :meth:`coulomb_law`); ``joint_friction`` (:class:`JointFriction` or None);
    * ``gravity`` (3,) m/s² in the root link frame (read-only); ``held_joints`` (read-only mapping);
    * ``payload`` (:class:`Payload` or None, read-only); ``version`` (int, process-wide unique per model
      object). Change gravity, payload or friction with :meth:`with_settings` (a new model);
    * ``warnings`` (tuple of one-line str): what the lenient loader accepted (description warnings, then
      massless joints); empty when loaded with ``strict=True``;
    * ``massless_joints`` (tuple): actuated joints whose moving subtree carries no mass or inertia;
    * ``moving_joint_names``: actuated and mimic joints (everything that moves), tree order, with
      ``mimic_source`` (index into ``joint_names``), ``mimic_multiplier`` and ``mimic_offset`` such that
      ``q_moving = mimic_multiplier * q[mimic_source] + mimic_offset`` (:meth:`expand`).
    """

    def __init__(self, description: RobotDescription, urdf_xml: str, *,
                 held_joints: Mapping[str, float] | None = None, gravity=(0.0, 0.0, -9.81),
                 joint_limits: str | Path | Mapping | None = None, strict: bool = False):
        self.description = description
        self.urdf_xml = urdf_xml
        d = description
        self._held = d.resolve_held(dict(held_joints or {}))
        self.held_joints: Mapping[str, float] = MappingProxyType(self._held)
        moving = [jn for jn in d.moving_joints if jn not in self._held]
        self.joint_names: tuple[str, ...] = tuple(jn for jn in moving if d.joints[jn].mimic is None)
        self.n = len(self.joint_names)
        self.index: Mapping[str, int] = MappingProxyType({jn: i for i, jn in enumerate(self.joint_names)})
        if self.n == 0:
            raise URDFError(f"URDF {d.source}: no actuated joints (every moving joint is held, mimic or "
                            "fixed)")
        need = estimated_engine_bytes(len(moving))
        if need > MAX_ENGINE_BYTES:
            raise UserError(f"URDF {d.source}: {len(moving)} moving joints; the dynamics engine would need about "
                            f"{need / 2**30:.1f} GiB (36·nv³ bytes), more than the {MAX_ENGINE_BYTES / 2**30:g} GiB "
                            "accepted (MAX_ENGINE_BYTES); hold joints fixed to reduce the model")
        # mimic map: q_moving = multiplier * q[source] + offset (chains of mimics are composed)
        self.moving_joint_names: tuple[str, ...] = tuple(moving)
        src, mult, off = [], [], []
        for jn in moving:
            m_, o_ = 1.0, 0.0
            j = d.joints[jn]
            while j.mimic is not None:  # q_j = mul * q_master + off, compose down to an actuated joint
                m_, o_ = m_ * j.mimic.multiplier, m_ * j.mimic.offset + o_
                j = d.joints[j.mimic.joint]
            src.append(self.index[j.name])
            mult.append(m_)
            off.append(o_)
        self.mimic_source = np.array(src, dtype=np.int64)
        self.mimic_multiplier = np.array(mult)
        self.mimic_offset = np.array(off)
        self.has_mimic = len(moving) != self.n

        joints = [d.joints[jn] for jn in self.joint_names]
        self.lower = np.array([j.lower for j in joints], dtype=float)
        self.upper = np.array([j.upper for j in joints], dtype=float)
        self.velocity_limit = np.array([j.velocity for j in joints], dtype=float)
        self.effort_limit = np.array([j.effort for j in joints], dtype=float)
        self.acceleration_limit = np.full(self.n, np.inf)
        self.jerk_limit = np.full(self.n, np.inf)
        self.damping = np.array([j.damping for j in joints], dtype=float)
        self.friction = np.array([j.friction for j in joints], dtype=float)
        self.armature = np.zeros(self.n)
        self.effort_offset = np.zeros(self.n)
        self.coulomb_velocity = 0.0
        self.joint_friction: JointFriction | None = None
        self.joint_types: tuple[str, ...] = tuple(j.type for j in joints)
        self.default_velocity_scaling_factor: float | None = None
        self.default_acceleration_scaling_factor: float | None = None
        unknown: list[str] = []
        if joint_limits is not None:
            unknown = self._apply_joint_limits(joint_limits)
        self.massless_joints: tuple[str, ...] = self._find_massless()
        warnings = list(description.warnings)
        if unknown:
            # MoveIt ignores them too: one joint_limits.yaml often serves an arm with and without its gripper
            msg = (f"joint limits {unknown[0]}: entries for joints not in {quote_name(d.name)} ignored: "
                   f"{quote_names(unknown[1:])} (as MoveIt does)")
            if strict:
                raise UserError(msg + " [strict]")
            warnings.append(msg)
        if self.massless_joints:
            msg = (f"URDF {d.source}: joints {quote_names(self.massless_joints)} move links that "
                   "carry no mass or inertia, so M(q) is singular: gravity and inverse dynamics are defined, "
                   "forward dynamics and operational-space inertia are not (give the links an <inertial> or "
                   "hold the joints)")
            if strict:
                raise URDFError(msg + " [strict]")
            warnings.append(msg)
        self.warnings: tuple[str, ...] = tuple(warnings)
        self._gravity = np.zeros(3)
        self._payload: Payload | None = None
        self._set_gravity(gravity)
        self._version = next(_VERSIONS)
        self._reduced_urdf: str | None = None

    # ----------------------------------------------------------------------------------------------
    @classmethod
    def from_text(cls, xml: str, *, label: str = "robot_description", held_joints: Mapping[str, float] | None = None,
                  gravity=(0.0, 0.0, -9.81), joint_limits: str | Path | Mapping | None = None,
                  strict: bool = False) -> RobotModel:
        """Load a fixed-base robot from URDF XML text (a topic, a parameter). Never opens a file: text that
        is not XML is refused (``"URDF robot_description: not URDF XML (starts with '...')"``).

        Args:
            xml: the URDF document (see :func:`robot_dynamics_ros.urdf_reader.parse_urdf_xml` for the caps).
            label: how messages name the source.
            held_joints: joint name -> value (rad or m) to weld (e.g. ``{"panda_finger_joint1": 0.02}``).
            gravity: (3,) m/s² in the root link frame.
            joint_limits: a MoveIt ``joint_limits.yaml`` path or its loaded mapping (with or without the
                top-level ``joint_limits`` key): ``max_acceleration`` (when ``has_acceleration_limits``)
                fills ``acceleration_limit``, ``max_jerk`` (when ``has_jerk_limits``) ``jerk_limit``; ``max_velocity``/``max_effort``/``min_position``/
                ``max_position`` override the URDF when their ``has_*`` flag is true (a flag without its
                value is refused); the top-level ``default_velocity_scaling_factor`` /
                ``default_acceleration_scaling_factor`` (MoveIt Setup Assistant), in (0, 1], fill the
                attributes of the same names (None when absent).
            strict: refuse what the lenient loader accepts with a warning (:attr:`warnings`).

        Raises:
            URDFError: invalid URDF (one line naming the link/joint), bad held joint, with ``strict`` any
                warning.
            UserError: bad joint_limits file or values, bad gravity, a model too large for the engines
                (:data:`MAX_ENGINE_BYTES`).
        """
        description = RobotDescription.from_text(xml, label=label, strict=strict)
        return cls(description, xml, held_joints=held_joints, gravity=gravity, joint_limits=joint_limits,
                   strict=strict)

    @classmethod
    def from_file(cls, path: str | Path, *, held_joints: Mapping[str, float] | None = None,
                  gravity=(0.0, 0.0, -9.81), joint_limits: str | Path | Mapping | None = None,
                  strict: bool = False) -> RobotModel:
        """Load a fixed-base robot from a URDF file: a regular file (no FIFO, device or directory) of at
        most :data:`robot_dynamics_ros.urdf_reader.MAX_URDF_BYTES` bytes. Arguments and errors as
        :meth:`from_text` (messages name the path)."""
        text, label = read_urdf_file(path)
        return cls.from_text(text, label=label, held_joints=held_joints, gravity=gravity,
                             joint_limits=joint_limits, strict=strict)

    @classmethod
    def from_urdf(cls, source: str | Path, **kwargs) -> RobotModel:
        """For the CLI and tests: :meth:`from_text` when ``source`` is a str whose first non-blank character
        is ``<``, else :meth:`from_file` (a ``Path`` or a path string). Keyword arguments as
        :meth:`from_text` (without ``label``). Descriptions from a topic or a parameter must use
        :meth:`from_text`, which never opens a file."""
        if is_xml_text(source):
            return cls.from_text(source, label="<string>", **kwargs)
        return cls.from_file(source, **kwargs)

    # ----------------------------------------------------------------------------------------------
    def _find_massless(self) -> tuple[str, ...]:
        """Actuated joints that (with their mimic followers) move no mass and no inertia: M(q) is singular."""
        d = self.description
        out = []
        for i, jn in enumerate(self.joint_names):
            links: set[str] = set()
            for k, mj in enumerate(self.moving_joint_names):
                if self.mimic_source[k] == i:
                    links.update(d.subtree_links(mj))
            if all(d.links[ln].inertial.is_empty for ln in links):
                out.append(jn)
        return tuple(out)

    def _moving_bodies(self) -> list[tuple[str, list[str]]]:
        """``[(link, rigid_links)]``: for each link moved by a moving joint (actuated or mimic), the links
        rigidly attached to it (itself and those below it across fixed or held joints), tree order."""
        d = self.description
        out = []
        for mj in self.moving_joint_names:
            head = d.joints[mj].child
            body, stack = [], [head]
            while stack:
                ln = stack.pop()
                body.append(ln)
                stack.extend(d.joints[jn].child for jn in d.child_joints[ln]
                             if d.joints[jn].type == "fixed" or jn in self._held)
            out.append((head, body))
        return out

    def moving_mass(self) -> float:
        """kg: the mass the joints move (every link below a moving joint, held joints' links included; not
        the fixed base, not the payload)."""
        d = self.description
        base = set(d.base_links())
        return float(sum(link.inertial.mass for ln, link in d.links.items() if ln not in base))

    def torque_model_problem(self, allow_partial: bool = False) -> str | None:
        """Why this model cannot be trusted to compute joint torques, as one line, or None when it can.

        A kinematics-only URDF (moving links without ``<inertial>``, as many published descriptions are)
        gives g(q) = 0 and M(q) singular: a gravity or computed-torque command of zeros drops the arm and an
        observer sees every load as a collision. A moving link "carries no mass" when it and every link
        rigidly attached to it (fixed or held joints, the payload included) have mass 0 kg.

        Args:
            allow_partial: accept massless moving links on a model that has moving mass: the caller
                asserts that they weigh nothing (virtual frames between the axes of a multi-DoF joint, a tool
                frame, an unloaded finger), so the torques computed are exact. A model without any moving
                mass is refused even then.

        Returns:
            None, or ``"URDF <source>: cannot compute joint torques: ..."`` naming the links.
        """
        payload_link = self._payload.link if self._payload is not None and self._payload.mass > 0 else None
        bodies = self._moving_bodies()
        massless = [head for head, body in bodies
                    if sum(self.description.links[ln].inertial.mass for ln in body) <= 0.0
                    and payload_link not in body]
        if not massless or (allow_partial and len(massless) < len(bodies)):
            return None
        where = f"URDF {self.description.source}: cannot compute joint torques: "
        if len(massless) == len(bodies):
            return (where + f"no moving link carries mass (links {quote_names(massless)} have no <inertial> "
                    "mass): a kinematics-only description; give the links their masses")
        return (where + f"the moving links {quote_names(massless)} carry no mass (no <inertial> mass); give "
                "them their masses, or allow a partially massless model if they really weigh nothing")

    def _apply_joint_limits(self, joint_limits) -> list[str]:
        """Apply a joint_limits mapping or file; returns ``[where, *names]`` of its entries for joints this
        robot does not have (ignored), or ``[]``."""
        where = "joint_limits"
        if isinstance(joint_limits, (str, Path)):
            where = str(joint_limits)
            data = read_yaml(joint_limits, "joint_limits")
        else:
            data = joint_limits
        if not isinstance(data, Mapping):
            raise UserError(f"{where}: expected a mapping of joint names, got {type(data).__name__}")
        if "joint_limits" in data:
            for key in ("default_velocity_scaling_factor", "default_acceleration_scaling_factor"):
                if key in data:
                    setattr(self, key, _scaling_factor(data[key], where, key))
            data = data["joint_limits"]
        if not isinstance(data, Mapping):
            raise UserError(f"{where}: 'joint_limits' must be a mapping of joint names")
        fields = {"max_acceleration": ("has_acceleration_limits", self.acceleration_limit),
                  "max_jerk": ("has_jerk_limits", self.jerk_limit),
                  "max_velocity": ("has_velocity_limits", self.velocity_limit),
                  "max_effort": ("has_effort_limits", self.effort_limit),
                  "min_position": ("has_position_limits", self.lower),
                  "max_position": ("has_position_limits", self.upper)}
        unknown = []
        for jn, entry in data.items():
            if jn not in self.description.joints:
                unknown.append(str(jn))
                continue
            if jn not in self.index:  # held, mimic or fixed: nothing to limit
                continue
            if not isinstance(entry, Mapping):
                raise UserError(f"{where}: joint {quote_name(jn)}: expected a mapping, got {entry!r}")
            i = self.index[jn]
            for key, (flag, arr) in fields.items():
                if not entry.get(flag, False):
                    continue
                if entry.get(key) is None:
                    # MoveIt refuses a flag without its value; skipping it would silently drop the limit
                    raise UserError(f"{where}: joint {quote_name(jn)} has {flag}: true but no {key}")
                try:
                    v = float(entry[key])
                except (TypeError, ValueError):
                    raise UserError(f"{where}: joint {quote_name(jn)} {key}={entry[key]!r} is not a number") from None
                if math.isnan(v) or (key.startswith("max_") and key != "max_position" and v <= 0):
                    raise UserError(f"{where}: joint {quote_name(jn)} {key}={v} must be a positive number")
                arr[i] = v
            if self.lower[i] > self.upper[i]:
                raise UserError(f"{where}: joint {quote_name(jn)} min_position {self.lower[i]} > max_position "
                                f"{self.upper[i]}")
        return [where, *unknown] if unknown else []

    # ----------------------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """A process-wide number unique to this model object (every :meth:`with_settings` copy gets a new
        one), so an engine given a swapped model knows to update; two models never share one."""
        return self._version

    @property
    def gravity(self) -> np.ndarray:
        """(3,) gravitational acceleration in the root link frame, m/s² (a copy; read-only: change it with
        :meth:`with_settings`)."""
        return self._gravity.copy()

    @property
    def payload(self) -> Payload | None:
        """The rigid payload (:class:`Payload`) or None; read-only: change it with :meth:`with_settings`."""
        return self._payload

    def _set_gravity(self, value) -> None:
        """Validate and install gravity on a model not yet shared (construction, :meth:`with_settings`)."""
        g = np.asarray(value, dtype=float)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise UserError(f"gravity: expected 3 finite numbers (m/s²), got {np.asarray(value).tolist()}")
        self._gravity = g.copy()

    def _set_payload(self, link: str, mass: float, com=(0.0, 0.0, 0.0),
                     inertia=((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))) -> None:
        """Validate and install a payload on a model not yet shared (:meth:`with_settings`); arguments as
        the fields of :class:`Payload` (``inertia`` may also be the 6 values ixx ixy ixz iyy iyz izz; a
        point mass by default).

        Raises:
            UserError: unknown link, negative/non-finite mass, a mass above :data:`PAYLOAD_MASS_RATIO` × the
                robot's moving mass (:meth:`moving_mass`, when > 0) or above
                :data:`~robot_dynamics_ros.urdf_elements.MAX_LINK_MASS`, bad com, non-physical inertia (PSD,
                triangle inequality, principal moments above mass · MAX_LINK_RADIUS²).
        """
        if link not in self.description.links:
            raise UserError(f"payload link {quote_name(link)} is not a link of {quote_name(self.description.name)}")
        m = float(mass)
        if not math.isfinite(m) or m < 0:
            raise UserError(f"payload mass {mass} kg must be finite and ≥ 0")
        carried = self.moving_mass()
        if m > MAX_LINK_MASS or (carried > 0.0 and m > PAYLOAD_MASS_RATIO * carried):
            raise UserError(f"payload mass {m:g} kg on link {quote_name(link)} is implausible: above "
                            f"{PAYLOAD_MASS_RATIO:g} × the robot's moving mass ({carried:.4g} kg, "
                            f"PAYLOAD_MASS_RATIO) or {MAX_LINK_MASS:g} kg (MAX_LINK_MASS)")
        c = np.asarray(com, dtype=float)
        if c.shape != (3,) or not np.all(np.isfinite(c)):
            raise UserError(f"payload com: expected 3 finite numbers (m), got {np.asarray(com).tolist()}")
        inertia_arr = np.asarray(inertia, dtype=float)
        if inertia_arr.shape == (6,):  # ixx ixy ixz iyy iyz izz
            a = inertia_arr
            inertia_arr = np.array([[a[0], a[1], a[2]], [a[1], a[3], a[4]], [a[2], a[4], a[5]]])
        try:
            check_inertia(inertia_arr, "payload", mass=m)
        except URDFError as exc:
            raise UserError(str(exc)) from None
        self._payload = Payload(link, m, c.copy(), inertia_arr.copy())

    def with_settings(self, *, gravity=None, payload=_KEEP, friction=_KEEP) -> RobotModel:
        """A new model sharing this one's description and limits, with other gravity, payload and/or friction.

        This is how settings change at run time: build the new model (and its engines) beside the old one,
        then swap one reference, so a reader (a callback, the retiming worker thread) sees either the old
        model or the new one, never a half-updated one.

        Args:
            gravity: (3,) m/s² in the root link frame; None keeps this model's.
            payload: a :class:`Payload`, ``(link, mass, com, inertia)``, or None for no payload; omitted keeps
                this model's.
            friction: a :class:`JointFriction` (its coulomb/viscous replace the URDF ``<dynamics>``, its
                armature and offset fill ``armature`` and ``effort_offset``), or None for the URDF values
                (zero armature and offset); omitted keeps this model's.

        Raises:
            UserError: gravity not 3 finite numbers; a payload on an unknown link, with a negative or
                non-finite mass, a bad com or a non-physical inertia (PSD, triangle inequality); a friction
                array that is not (n,) finite, or a negative coulomb/viscous/armature (naming the joint).
        """
        new = copy.copy(self)
        if gravity is not None:
            new._set_gravity(gravity)
        if friction is not _KEEP:
            new._set_friction(friction)
        if payload is not _KEEP:
            new._payload = None
            if isinstance(payload, Payload):
                new._set_payload(payload.link, payload.mass, payload.com, payload.inertia)
            elif payload is not None:
                new._set_payload(*payload)
        new._version = next(_VERSIONS)
        return new

    def _set_friction(self, jf: JointFriction | None) -> None:
        """Install new friction arrays (never writes into the arrays a sibling copy shares)."""
        if jf is None:
            joints = [self.description.joints[jn] for jn in self.joint_names]
            self.damping = np.array([j.damping for j in joints], dtype=float)
            self.friction = np.array([j.friction for j in joints], dtype=float)
            self.armature = np.zeros(self.n)
            self.effort_offset = np.zeros(self.n)
            self.coulomb_velocity = 0.0
            self.joint_friction = None
            return
        where = jf.source or "friction"
        arrays = {}
        for name in ("coulomb", "viscous", "offset", "armature"):
            a = np.array(getattr(jf, name), dtype=float)
            if a.shape != (self.n,):
                raise UserError(f"{where}: {name}: expected {self.n} values (one per actuated joint), got shape "
                                f"{a.shape}")
            for i in np.nonzero(~np.isfinite(a) | ((a < 0) & (name != "offset")))[0][:1]:
                raise UserError(f"{where}: joint {quote_name(self.joint_names[i])}: {name} = {a[i]} must be finite"
                                + ("" if name == "offset" else " and ≥ 0"))
            a.setflags(write=False)
            arrays[name] = a
        v_s = float(jf.coulomb_velocity)
        if not (np.isfinite(v_s) and v_s >= 0.0):
            raise UserError(f"{where}: coulomb_velocity = {jf.coulomb_velocity!r} must be finite and ≥ 0 (rad/s)")
        self.friction, self.damping = arrays["coulomb"], arrays["viscous"]
        self.effort_offset, self.armature = arrays["offset"], arrays["armature"]
        self.coulomb_velocity = v_s
        self.joint_friction = JointFriction(arrays["coulomb"], arrays["viscous"], arrays["offset"],
                                            arrays["armature"], jf.source, v_s)

    def coulomb_law(self, qd) -> np.ndarray:
        """The Coulomb term's factor per joint for velocities ``qd`` ((n,) or (..., n) rad/s): ``sign(qd)``,
        or ``tanh(qd / coulomb_velocity)`` when identified friction set a v_s > 0. Multiply by
        ``friction`` (N·m) for the Coulomb torque."""
        qd = np.asarray(qd, dtype=float)
        v_s = self.coulomb_velocity
        return np.tanh(qd / v_s) if v_s > 0.0 else np.sign(qd)

    # ----------------------------------------------------------------------------------------------
    def neutral(self) -> np.ndarray:
        """(n,) a reference configuration: 0 clipped into the position limits (rad or m)."""
        return np.clip(np.zeros(self.n), self.lower, self.upper)

    def random_configuration(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        """Uniform random q within the position limits ((n,) or (size, n)); unbounded joints in [-π, π]."""
        lo = np.where(np.isfinite(self.lower), self.lower, -np.pi)
        hi = np.where(np.isfinite(self.upper), self.upper, np.pi)
        shape = (self.n,) if size is None else (size, self.n)
        return rng.uniform(lo, hi, size=shape)

    def expand(self, q: np.ndarray) -> np.ndarray:
        """Positions of all moving joints (``moving_joint_names``) from actuated q: (..., n) -> (..., n_moving).

        Mimic joints get ``multiplier · q_master + offset``. For velocities/accelerations use
        :meth:`expand_rate` (no offset).
        """
        return np.asarray(q)[..., self.mimic_source] * self.mimic_multiplier + self.mimic_offset

    def expand_rate(self, qd: np.ndarray) -> np.ndarray:
        """Velocities (or accelerations) of all moving joints from actuated ones (offset-free)."""
        return np.asarray(qd)[..., self.mimic_source] * self.mimic_multiplier

    @property
    def mimic_matrix(self) -> np.ndarray:
        """(n_moving, n) G with q_moving = G q + mimic_offset; generalized forces map as tau = Gᵀ tau_moving."""
        G = np.zeros((len(self.moving_joint_names), self.n))
        G[np.arange(len(self.moving_joint_names)), self.mimic_source] = self.mimic_multiplier
        return G

    def reduced_urdf(self) -> str:
        """URDF text with the held joints welded and geometry dropped (what Pinocchio/MuJoCo load)."""
        if self._reduced_urdf is None:
            self._reduced_urdf = self.description.to_urdf(self._held)
        return self._reduced_urdf

    def __repr__(self) -> str:
        return (f"RobotModel({self.description.name!r}, n={self.n}, joints={list(self.joint_names)}, "
                f"held={dict(self._held)})")
