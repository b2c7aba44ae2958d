"""The per-node parameter schemas (robot_dynamics_ros/nodes/params/<node>.yaml) against what the nodes
declare, the ROS-free cores' own constants, the shipped config files and the docs/nodes.md tables.

The nodes are built from their classes with ``urdf_path: panda`` and asked, through rclpy's public API
(``list_parameters`` / ``describe_parameters``), what they declared: every declared parameter must be in the
schema with the same type, read-only flag and range. The choices are compared with the cores' constants,
which the cores validate against; the docs tables are compared with a fresh rendering of the schemas.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from rcl_interfaces.msg import ParameterType
from rclpy.parameter import Parameter

from robot_dynamics_testing.ros_world import RosWorld

from robot_dynamics_ros import robots
from robot_dynamics_ros.control.computed_torque import MODES
from robot_dynamics_ros.control.external_torque import TORQUE_SOURCES
from robot_dynamics_ros.control.gravity_compensator import STALE_POLICIES
from robot_dynamics_ros.control.speed_scaling import DEFAULT_JERK, DEFAULT_RATE
from robot_dynamics_ros.retiming.request import DEFAULT_PATH_TOLERANCE, MAX_GRIDPOINTS, MIN_SCALE
from robot_dynamics_ros.nodes.parameters import SCHEMA_DIR, TYPES, node_schema
from robot_dynamics_ros.nodes.model_source import shared_model
from robot_dynamics_ros.nodes.runtime import EXECUTORS
from robot_dynamics_tools import param_docs
from robot_dynamics_tools.commands.run import section_parameters

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[2]

#: node module, class, schema (= node) name, extra overrides that keep start-up short
NODES = [
    ("gravity_compensation", "GravityCompensationNode", "gravity_compensation", {"crossval_samples": 0}),
    ("computed_torque", "ComputedTorqueNode", "computed_torque", {}),
    ("simulator", "SimulatorNode", "mujoco_simulator", {}),
    ("external_torque_observer", "ExternalTorqueObserverNode", "external_torque_observer", {}),
    ("retiming_service", "RetimingServiceNode", "retiming_service", {"warmup": False}),
]
#: what rclpy declares on every node by itself
STANDARD = ("use_sim_time", "start_type_description_service")


@pytest.fixture(scope="module", params=NODES, ids=[n[2] for n in NODES])
def declared(request):
    import importlib

    module, cls, name, overrides = request.param
    world = RosWorld("schema_probe")
    try:
        node_cls = getattr(importlib.import_module(f"robot_dynamics_ros.nodes.{module}"), cls)
        params = {"urdf_path": "panda", **overrides}
        node = world.add(node_cls(name, context=world.ctx,
                                  parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]))
        names = [n for n in node.list_parameters([], 0).names
                 if n not in STANDARD and not n.startswith("qos_overrides.")]
        yield name, {d.name: d for d in node.describe_parameters(names)}
    finally:
        world.close()


def _joints(robot: str) -> list[str]:
    entry = robots.resolve(robot)
    return list(shared_model(str(entry.path), entry.held_joints or None).joint_names)


def _expected(name: str):
    """Schema specs by name, the per-joint templates expanded for the Panda's joints."""
    schema = node_schema(name)
    specs = schema.by_name
    for key in schema.templates:
        for joint in _joints("panda"):
            specs.update({s.name: s for s in schema.template(key, joint)})
    return specs


def test_every_declared_parameter_is_in_the_schema_as_declared(declared):
    name, descriptors = declared
    specs = _expected(name)
    assert sorted(descriptors) == sorted(specs), name
    for pname, d in descriptors.items():
        spec = specs[pname]
        assert d.type == TYPES[spec.type_name].value, pname
        assert d.read_only == spec.read_only, pname
        if spec.range is not None and spec.length is None and not spec.type_name.endswith("_array"):
            (r,) = list(d.floating_point_range) or list(d.integer_range)
            assert (r.from_value, r.to_value) == spec.range, pname
        else:
            assert not d.floating_point_range and not d.integer_range, pname


def test_choices_are_the_cores_own():
    def choices(node, pname):
        return node_schema(node).by_name[pname].choices

    assert choices("gravity_compensation", "stale_policy") == tuple(STALE_POLICIES)
    assert choices("computed_torque", "mode") == tuple(MODES)
    assert choices("computed_torque", "executor") == tuple(EXECUTORS)
    assert choices("external_torque_observer", "torque_source") == tuple(TORQUE_SOURCES)


def test_retiming_defaults_are_the_cores_own():
    spec = node_schema("retiming_service").by_name
    assert spec["default_path_tolerance"].default == DEFAULT_PATH_TOLERANCE
    assert spec["default_gridpoints"].range == (0, MAX_GRIDPOINTS)
    assert spec["default_torque_margin"].range == (MIN_SCALE, 1.0)


def test_speed_scaling_defaults_are_the_cores_own():
    spec = node_schema("computed_torque").by_name
    assert spec["speed_scaling_rate"].default == DEFAULT_RATE
    assert spec["speed_scaling_jerk"].default == DEFAULT_JERK


def test_every_schema_file_loads_and_uses_known_types():
    for path in sorted(SCHEMA_DIR.glob("*.yaml")):
        schema = node_schema(path.stem)
        assert schema.specs, path.name
        for spec in schema.specs:
            assert spec.type_name in TYPES
            assert spec.check(spec.default) is None, (path.name, spec.name)   # defaults pass their own rules


@pytest.mark.parametrize("robot", ["panda", "ur5"])
def test_config_files_are_valid_against_the_schemas(robot):
    data = yaml.safe_load((ROOT / "config" / f"{robot}.yaml").read_text())
    joints = _joints(robot)
    for name in ("gravity_compensation", "computed_torque", "mujoco_simulator", "retiming_service"):
        schema = node_schema(name)
        specs = schema.by_name
        for key in schema.templates:
            for joint in joints:
                specs.update({s.name: s for s in schema.template(key, joint)})
        values = section_parameters(data, f"/{name}")
        assert values, name
        for pname, value in values.items():
            assert pname in specs, (robot, name, pname)
            assert specs[pname].check(value) is None, (robot, name, pname, value)


def test_docs_tables_match_the_schemas():
    text = param_docs.DOCS.read_text(encoding="utf-8")
    _, changed = param_docs.render(text)
    assert changed == [], f"docs/nodes.md is out of date for {changed}: python -m robot_dynamics_tools.param_docs"
    for path in SCHEMA_DIR.glob("*.yaml"):
        assert f"<!-- param-table:{path.stem} -->" in text, path.stem


def test_docs_check_fails_on_a_changed_table(tmp_path):
    text = param_docs.DOCS.read_text(encoding="utf-8")
    bad = text.replace("| `stale_policy` | string | `hold` |", "| `stale_policy` | string | `zero` |")
    assert bad != text
    doc = tmp_path / "nodes.md"
    doc.write_text(bad, encoding="utf-8")
    assert param_docs.main([str(doc), "--check"]) == 1
    assert param_docs.main([str(doc)]) == 0
    assert doc.read_text(encoding="utf-8") == text


def test_schema_type_of_an_empty_array_is_declared_typed():
    # an empty-array default is declared with its schema type, not rclpy's BYTE_ARRAY guess
    spec = node_schema("robot_source").by_name["held_joint_names"]
    assert spec.default == [] and spec.ros_type().value == ParameterType.PARAMETER_STRING_ARRAY
