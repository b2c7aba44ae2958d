"""Node parameters: one YAML schema per node, declared with descriptors, validated on every change.

The schema of node ``<node>`` is ``params/<node>.yaml`` beside this module, in the shape of
generate_parameter_library (https://github.com/PickNikRobotics/generate_parameter_library): under the node
name, one entry per parameter (nested maps give dotted names, ``payload: {mass: ...}`` is ``payload.mass``)
with ``type`` (``bool``, ``int``, ``double``, ``string``, ``bool_array``, ``double_array``,
``string_array``), ``default_value``, ``description`` (with the unit), optional ``read_only`` and
``validation``: ``bounds<>: [lo, hi]`` (a number), ``element_bounds<>: [lo, hi]`` (each entry of an
array), ``fixed_size<>: [n]`` (an array's length), ``one_of<>: [[choices]]`` (a string). Three additions:
every array is capped at :data:`MAX_ARRAY_ENTRIES` entries (checked before any per-entry work);
``regular_file<>: []`` (a string naming a file: a non-empty value set at run time must name a regular file,
checked with ``os.stat`` before anything opens it, :func:`robot_dynamics_ros.share.check_regular_file`),
``__include__`` names shared fragments (``params/robot_source.yaml``; ``{control: [names]}`` takes only
those names of a fragment), and a map ``__map_<key>`` holds a template declared once per ``<key>`` entry
(the computed-torque gains, once per model joint: :meth:`NodeSchema.template`).

From the schema come the declarations (:func:`declare_parameters`, a ``ParameterDescriptor`` per
parameter), the checks of every change (:func:`validate_parameters`) and the docs/nodes.md tables
(``python -m robot_dynamics_tools.param_docs``).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType
from rclpy.exceptions import ParameterUninitializedException
from rclpy.parameter import Parameter

from robot_dynamics_ros import robots
from robot_dynamics_ros.errors import URDFError, UserError
from robot_dynamics_ros.share import check_regular_file, resolve_config_file
from robot_dynamics_ros.urdf_elements import MAX_LINK_MASS, check_inertia

__all__ = ["ParamSpec", "NodeSchema", "node_schema", "SCHEMA_DIR", "MAX_ARRAY_ENTRIES", "declare_parameters", "validate_parameters",
           "merged_parameters", "file_reason", "payload_reason", "robot_source_params", "resolve_robot_source", "source_conflict"]

#: folder of the parameter schemas (shipped as package data)
SCHEMA_DIR = Path(__file__).resolve().parent / "params"

#: schema ``type`` -> rclpy parameter type
TYPES = {"bool": Parameter.Type.BOOL, "int": Parameter.Type.INTEGER, "double": Parameter.Type.DOUBLE,
         "string": Parameter.Type.STRING, "bool_array": Parameter.Type.BOOL_ARRAY,
         "double_array": Parameter.Type.DOUBLE_ARRAY, "string_array": Parameter.Type.STRING_ARRAY}

#: most entries of any array parameter (joint lists, thresholds, held positions): a robot has tens of joints; a
#: longer array is refused from its length alone, before any per-entry work (a refused 10^7-entry array once
#: cost the gravity node 1.5 s of silence)
MAX_ARRAY_ENTRIES = 10_000


def _array_length(value) -> int | None:
    """The length of an array value (list, tuple, ``array.array``, numpy array), else None."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        return None
    return len(value)


def _shown(value, limit: int = 8) -> str:
    """``value`` for a refusal: an array by its first ``limit`` entries and its length, a string by at most
    200 characters (a refused value is echoed in one short line, never whole)."""
    if isinstance(value, str):
        return repr(value[:200]) + (f"... ({len(value)} characters)" if len(value) > 200 else "")
    n = _array_length(value)
    if n is None:
        return repr(value)
    head = [value[i] for i in range(min(n, limit))]
    return repr(head)[:-1] + (f", ... ({n} entries)]" if n > limit else "]")


@dataclass(frozen=True)
class ParamSpec:
    """One node parameter.

    Attributes:
        name: parameter name.
        default: default value; its Python type fixes the ROS parameter type (``bool``, ``int``,
            ``float``, ``str``, ``list[float]``, ``list[str]``; give ``kind`` for an empty list).
        description: what it means, with its unit (shown by ``ros2 param describe``).
        range: ``(low, high)`` inclusive bounds for a number (and each entry of a number array).
        choices: allowed values of a string parameter.
        length: required length of an array parameter.
        read_only: may not change after start-up.
        kind: the schema ``type`` (a key of :data:`TYPES`); None: inferred from ``default``.
        file: a string naming a file (``regular_file<>``): a run-time value must name a regular file.
    """

    name: str
    default: Any
    description: str
    range: tuple[float, float] | None = None
    choices: tuple[str, ...] | None = None
    length: int | None = None
    read_only: bool = False
    kind: str | None = None
    file: bool = False

    @classmethod
    def from_schema(cls, name: str, entry: Mapping[str, Any]) -> ParamSpec:
        """The spec of one schema entry (see the module docstring).

        Raises:
            ValueError: an unknown ``type`` or validation, or a missing ``type``/``default_value``/
                ``description`` (naming the parameter).
        """
        missing = [k for k in ("type", "default_value", "description") if k not in entry]
        if missing:
            raise ValueError(f"parameter schema '{name}': missing {missing}")
        kind = entry["type"]
        if kind not in TYPES:
            raise ValueError(f"parameter schema '{name}': type '{kind}' is not one of {list(TYPES)}")
        rules = dict(entry.get("validation") or {})
        bounds = rules.pop("bounds<>", None) or rules.pop("element_bounds<>", None)
        size = rules.pop("fixed_size<>", None)
        one_of = rules.pop("one_of<>", None)
        is_file = rules.pop("regular_file<>", None) is not None
        if rules:
            raise ValueError(f"parameter schema '{name}': unknown validation {list(rules)}")
        default = entry["default_value"]
        if kind == "double":
            default = float(default)
        elif kind == "double_array":
            default = [float(x) for x in default]
        return cls(name, default, str(entry["description"]).strip(),
                   range=(float(bounds[0]), float(bounds[1])) if bounds is not None else None,
                   choices=tuple(one_of[0]) if one_of is not None else None,
                   length=int(size[0]) if size is not None else None,
                   read_only=bool(entry.get("read_only", False)), kind=kind, file=is_file)

    @property
    def type_name(self) -> str:
        """The schema type name (``double``, ``string_array``, ...)."""
        t = self.ros_type()
        return next(k for k, v in TYPES.items() if v == t)

    def ros_type(self):
        if self.kind in TYPES:
            return TYPES[self.kind]
        d = self.default
        if isinstance(d, bool):
            return Parameter.Type.BOOL
        if isinstance(d, int):
            return Parameter.Type.INTEGER
        if isinstance(d, float):
            return Parameter.Type.DOUBLE
        if isinstance(d, str):
            return Parameter.Type.STRING
        if isinstance(d, (list, tuple)) and d:
            if all(isinstance(x, str) for x in d):
                return Parameter.Type.STRING_ARRAY
            if all(isinstance(x, bool) for x in d):
                return Parameter.Type.BOOL_ARRAY
            return Parameter.Type.DOUBLE_ARRAY
        raise TypeError(f"parameter '{self.name}': give kind= for default {d!r}")

    def descriptor(self):
        t = self.ros_type()
        text = self.description
        if self.choices:
            text += f" One of {list(self.choices)}."
        desc = ParameterDescriptor(name=self.name, type=t.value, description=text, read_only=self.read_only)
        if self.range is not None and isinstance(self.default, (int, float)) and not isinstance(
                self.default, bool):
            lo, hi = self.range
            if isinstance(self.default, int):
                desc.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=0)]
            else:
                desc.floating_point_range = [FloatingPointRange(from_value=float(lo), to_value=float(hi),
                                                                step=0.0)]
        return desc

    def check(self, value) -> str | None:
        """Return None when ``value`` is acceptable, else a reason naming the parameter (and the value, when
        short). An array longer than :data:`MAX_ARRAY_ENTRIES` is refused from its length alone."""
        n = _array_length(value)
        if n is not None and n > MAX_ARRAY_ENTRIES:
            return (f"parameter '{self.name}': {n} entries, more than the {MAX_ARRAY_ENTRIES} accepted "
                    "(MAX_ARRAY_ENTRIES)")
        if self.choices is not None and value not in self.choices:
            return f"parameter '{self.name}' = {_shown(value)}: must be one of {list(self.choices)}"
        if self.length is not None and len(value) != self.length:
            return f"parameter '{self.name}' = {_shown(value)}: needs exactly {self.length} entries"
        if self.range is not None:
            lo, hi = self.range
            vals = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]
            for v in vals:
                if not (lo <= v <= hi):  # also rejects NaN
                    return f"parameter '{self.name}' = {_shown(value)}: must be within [{lo}, {hi}]"
        elif isinstance(value, float) and not np.isfinite(value):
            return f"parameter '{self.name}' = {_shown(value)}: must be finite"
        elif (isinstance(value, (list, tuple, np.ndarray)) and len(value)
              and isinstance(value[0], float) and not np.isfinite(np.asarray(value, dtype=float)).all()):
            return f"parameter '{self.name}' = {_shown(value)}: entries must be finite"
        return None


@dataclass(frozen=True)
class NodeSchema:
    """The parameters of one node, read from its schema (:func:`node_schema`).

    Attributes:
        node: the node (and schema file) name.
        specs: the parameters in schema order, included fragments first.
        templates: ``key`` -> specs whose names hold ``{key}`` (``gains.{joint}.p``), declared once per
            value of ``key`` by the node (:meth:`template`).
    """

    node: str
    specs: tuple[ParamSpec, ...]
    templates: dict[str, tuple[ParamSpec, ...]] = field(default_factory=dict)

    @property
    def by_name(self) -> dict[str, ParamSpec]:
        """Name -> spec of :attr:`specs` (a new dict: the node may add template specs to it)."""
        return {s.name: s for s in self.specs}

    def template(self, key: str, value: str) -> list[ParamSpec]:
        """The specs of template ``key`` for one ``value`` (``template("joint", "j1")``: ``gains.j1.p``, ...),
        ``{key}`` in the descriptions replaced too."""
        mark = "{" + key + "}"
        return [ParamSpec(s.name.replace(mark, value), s.default, s.description.replace(mark, value),
                          s.range, s.choices, s.length, s.read_only, s.kind, s.file)
                for s in self.templates.get(key, ())]


def _flatten(tree: Mapping[str, Any], prefix: str, specs: list, templates: dict) -> None:
    for key, value in tree.items():
        if key == "__include__":
            continue
        if key.startswith("__map_"):
            name = key[len("__map_"):]
            sub: list[ParamSpec] = []
            _flatten(value, f"{prefix}{{{name}}}.", sub, templates)
            templates[name] = (*templates.get(name, ()), *sub)
        elif isinstance(value, Mapping) and "type" in value:
            specs.append(ParamSpec.from_schema(prefix + key, value))
        elif isinstance(value, Mapping):
            _flatten(value, f"{prefix}{key}.", specs, templates)
        else:
            raise ValueError(f"parameter schema '{prefix}{key}': expected a parameter entry or a map")


@lru_cache(maxsize=None)
def node_schema(node: str) -> NodeSchema:
    """The schema ``params/<node>.yaml`` (fragments named by ``__include__`` first, in their order).

    Raises:
        OSError: no such schema; ValueError: a malformed entry (naming it).
    """
    doc = yaml.safe_load((SCHEMA_DIR / f"{node}.yaml").read_text(encoding="utf-8"))
    tree = doc[node]
    specs: list[ParamSpec] = []
    templates: dict[str, tuple[ParamSpec, ...]] = {}
    for inc in tree.get("__include__", []):
        name, only = (inc, None) if isinstance(inc, str) else next(iter(inc.items()))
        part = node_schema(name)
        specs += [s for s in part.specs if only is None or s.name in only]
        templates.update(part.templates)
    _flatten(tree, "", specs, templates)
    names = [s.name for s in specs]
    if len(names) != len(set(names)):
        raise ValueError(f"parameter schema '{node}': a parameter is given twice")
    return NodeSchema(node, tuple(specs), templates)


def declare_parameters(node, specs: Iterable[ParamSpec]) -> dict[str, Any]:
    """Declare ``specs`` on ``node`` (overrides from a params YAML / command line apply) and return values.

    An empty array default is declared as a typed empty array (``STRING_ARRAY`` / ``DOUBLE_ARRAY`` with
    value ``[]``), not as an uninitialized parameter: rclpy's ``get_parameters`` service answers a request
    that names an uninitialized parameter with no values at all, which hid every parameter of the request
    from ``ros2 param get/dump`` and rqt_reconfigure.

    Raises:
        ValueError: an overridden value fails its spec's check (naming the parameter and the value).
    """
    # rclpy declares use_sim_time with an empty description; `ros2 param describe` should explain it too
    node.set_descriptor("use_sim_time", ParameterDescriptor(
        type=ParameterType.PARAMETER_BOOL, description="Use the /clock topic (simulation time) as the node clock."))
    values = {}
    for spec in specs:
        t = spec.ros_type()
        default = spec.default
        if isinstance(default, (list, tuple)) and not default:
            override = getattr(node, "_parameter_overrides", {}).get(spec.name)
            # an empty override ([] in a YAML file or a Parameter) arrives typed BYTE_ARRAY: "not set"
            empty = override is None or override.value is None or len(override.value) == 0
            if empty:
                # rclpy's declare_parameter infers BYTE_ARRAY from []: declare the typed empty value
                # through the same internal step declare_parameters uses
                param = Parameter(spec.name, t, [])
                node._declare_parameter_common([param], {spec.name: spec.descriptor()})
                value = []
            else:
                value = node.declare_parameter(spec.name, t, spec.descriptor()).value
        else:
            value = node.declare_parameter(spec.name, default, spec.descriptor()).value
        if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
            value = list(value)
        reason = spec.check(value)
        if reason is not None:
            raise ValueError(reason)
        values[spec.name] = value
    return values


def param_value(node, name: str):
    """``node``'s value of parameter ``name``; ``[]`` for an uninitialized (empty array) one."""
    try:
        return node.get_parameter(name).value
    except ParameterUninitializedException:
        return []


def validate_parameters(specs: Mapping[str, ParamSpec], params,
                        current: Mapping[str, Any] | None = None) -> tuple[bool, str]:
    """Check rclpy ``Parameter`` objects against their specs: ``(ok, reason)`` for SetParametersResult.

    Parameters without a spec pass (other code may own them). With ``current`` (the node's values), the
    combination is checked too: setting a non-zero ``payload.mass`` needs a ``payload.link`` (without one
    the mass would be accepted and have no effect), and the ``payload.*`` values as a whole
    (:func:`payload_reason`, also while ``payload.link`` is empty). Clearing ``payload.link`` alone removes
    the payload.
    """
    for p in params:
        spec = specs.get(p.name)
        if spec is None:
            continue
        value = p.value
        n = _array_length(value)
        if hasattr(value, "tolist") and (n is None or n <= MAX_ARRAY_ENTRIES):
            value = value.tolist()
        reason = spec.check(value)
        if reason is None and spec.file and value:
            reason = file_reason(spec.name, value)
        if reason is not None:
            return False, reason
    if current is not None and any(p.name == "payload.mass" and p.value for p in params):
        new = merged_parameters(specs, current, params)
        if not new.get("payload.link"):
            return False, (f"parameter 'payload.mass' = {new['payload.mass']!r} kg with 'payload.link' empty: "
                           "set payload.link first, or both at once (~/set_payload)")
    if current is not None and "payload.inertia" in specs and any(p.name.startswith("payload.") for p in params):
        reason = payload_reason(merged_parameters(specs, current, params))
        if reason is not None:
            return False, reason
    return True, ""


def payload_reason(values: Mapping[str, Any]) -> str | None:
    """None when the ``payload.*`` values are physical as a whole, else the one-line refusal. Checked
    whether or not ``payload.link`` is set (a value stored now is used when a link is set later): the mass
    at most :data:`~robot_dynamics_ros.urdf_elements.MAX_LINK_MASS` kg, the inertia (6 values, kg·m²,
    about the centre of mass) symmetric positive semi-definite with the triangle inequality and no
    principal moment above mass · MAX_LINK_RADIUS² (:func:`~robot_dynamics_ros.urdf_elements.check_inertia`).
    What needs the robot (the link exists, the mass within ``PAYLOAD_MASS_RATIO`` × its moving mass) is
    checked when a model is there (:func:`~robot_dynamics_ros.nodes.model_source.model_with_params`)."""
    mass = float(values.get("payload.mass", 0.0))
    if not (0.0 <= mass <= MAX_LINK_MASS):
        return f"parameter 'payload.mass' = {mass!r} kg: must be within [0, {MAX_LINK_MASS:g}] (MAX_LINK_MASS)"
    a = np.asarray(values.get("payload.inertia", [0.0] * 6), dtype=float)
    if a.shape != (6,):
        return f"parameter 'payload.inertia': needs 6 values (ixx ixy ixz iyy iyz izz), got {a.size}"
    inertia = np.array([[a[0], a[1], a[2]], [a[1], a[3], a[4]], [a[2], a[4], a[5]]])
    try:
        check_inertia(inertia, f"parameter 'payload.inertia' = {a.tolist()} with payload.mass = {mass:g} kg",
                      mass=mass)
    except URDFError as exc:
        return str(exc)
    return None


def file_reason(name: str, value: str) -> str | None:
    """None when ``value`` (a bare name resolved in the package's ``config/``) names a regular file, else the
    one-line refusal (``"parameter '<name>' '<path>': not a readable regular file"``; the same words whether
    the path is missing, a directory, a FIFO or a device: a parameter does not tell which files exist). The
    check is a ``stat``, never an open: a FIFO cannot block the caller."""
    try:
        check_regular_file(resolve_config_file(str(value)), f"parameter '{name}'")
    except UserError as exc:
        return str(exc)
    return None


def merged_parameters(specs: Mapping[str, ParamSpec], current: Mapping[str, Any], params) -> dict[str, Any]:
    """A copy of ``current`` (parameter name -> value) updated with the rclpy ``Parameter`` objects of
    ``params`` that have a spec; array values become plain lists. Validate first
    (:func:`validate_parameters`): this only merges."""
    new = dict(current)
    for p in params:
        if p.name in specs:
            value = p.value
            new[p.name] = list(value) if hasattr(value, "tolist") or isinstance(value, (list, tuple)) else value
    return new



def robot_source_params() -> list[ParamSpec]:
    """The parameters that say where the robot model comes from (shared by every dynamics node).

    Precedence: ``urdf_path`` (a file), else the ``robot_description`` parameter (XML text), else the
    ``robot_description`` topic. When both parameters are set, ``urdf_path`` wins and the node logs a
    warning naming both (a launch file that passes ``robot_description`` next to a params file with
    ``urdf_path`` is the usual cause).
    """
    return list(node_schema("robot_source").specs)


def resolve_robot_source(params: Mapping[str, Any]) -> tuple[str | None, dict[str, float] | None, str]:
    """From the :func:`robot_source_params` values: ``(urdf source or None for the topic, held, label)``.

    ``urdf source`` is a file path (``urdf_path``) or XML text (the ``robot_description`` parameter,
    label ``"parameter robot_description"``); ``held`` is None when the parameters give none (the caller
    may then use a catalogue default); ``label`` names the source (the topic name for the topic).

    Raises:
        UserError: ``urdf_path`` is neither a file nor a known robot name; held joint lists of
            different lengths.
    """
    names = list(params.get("held_joint_names") or [])
    positions = list(params.get("held_joint_positions") or [])
    if len(names) != len(positions):
        raise UserError(f"held_joint_names has {len(names)} entries but held_joint_positions has "
                        f"{len(positions)}")
    held = dict(zip(names, (float(p) for p in positions))) if names else None
    path = str(params.get("urdf_path") or "")
    if path:
        entry = robots.resolve(path)
        if held is None and entry.held_joints:
            held = dict(entry.held_joints)
        return str(entry.path), held, str(entry.path)
    text = str(params.get("robot_description") or "")
    if text.strip():
        return text, held, "parameter robot_description"
    return None, held, str(params.get("robot_description_topic") or "robot_description")


def source_conflict(params: Mapping[str, Any]) -> str | None:
    """The warning when both ``urdf_path`` and ``robot_description`` are set (``urdf_path`` is used)."""
    if str(params.get("urdf_path") or "") and str(params.get("robot_description") or "").strip():
        return (f"both urdf_path ('{params['urdf_path']}') and robot_description "
                f"({len(str(params['robot_description']))} characters) are set: using urdf_path")
    return None


