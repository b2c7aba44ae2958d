"""config/*.yaml: every parameters file loads into the real nodes (rcl's YAML parser, as launch does) with
every key declared and applied; the MoveIt-style joint limits load into RobotModel."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_dynamics_testing import launch_check

from robot_dynamics_ros import robots
from robot_dynamics_tools.commands.run import param_sections, section_parameters
from robot_dynamics_ros.model import RobotModel

pytestmark = pytest.mark.ros  # starts the real node classes (rclpy, own contexts)

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = launch_check.entry_points_from_setup(ROOT / "setup.py")
ROBOTS = ["panda", "ur5"]
#: node name (YAML section) -> executable
NODES = {"gravity_compensation": "gravity_compensation", "computed_torque": "computed_torque",
         "mujoco_simulator": "mujoco_simulator", "retiming_service": "retiming_service"}
#: nodes that command / simulate the arm (have a joint order)
ARM_NODES = ("gravity_compensation", "computed_torque", "mujoco_simulator")



def same_value(a, b) -> bool:
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=0, abs_tol=0)
    return a == b


def undeclared_and_unapplied(params_file: Path, section: str):
    declared, values = launch_check.load_params_file_into_node(ENTRY_POINTS[NODES[section]], params_file)
    wanted = section_parameters(yaml.safe_load(params_file.read_text()), f"/{section}")
    undeclared = sorted(k for k in wanted if k not in declared)
    unapplied = sorted(k for k in wanted if k in declared and not same_value(values[k], wanted[k]))
    return undeclared, unapplied


@pytest.mark.parametrize("robot", ROBOTS)
def test_params_file_has_a_section_per_node(robot):
    data = yaml.safe_load((ROOT / "config" / f"{robot}.yaml").read_text())
    assert {f"/**/{n}" for n in NODES} <= set(data)
    for section, body in data.items():
        assert set(body) == {"ros__parameters"}, section
    for _, _, body in param_sections(data):
        assert section_parameters({"s": {"ros__parameters": body}}, "/s")["urdf_path"] == robot
    # '/**/<node>': the node's own section in the root namespace and in any other (two_robots' /r1, /r2)
    for node in NODES:
        for fqn in (f"/{node}", f"/r1/{node}", f"/a/b/{node}"):
            assert section_parameters(data, fqn)["urdf_path"] == robot, fqn


@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("section", sorted(NODES))
def test_every_key_is_declared_and_applied_by_the_real_node(robot, section):
    undeclared, unapplied = undeclared_and_unapplied(ROOT / "config" / f"{robot}.yaml", section)
    assert undeclared == [] and unapplied == []


def test_a_misspelt_key_is_caught(tmp_path):
    text = (ROOT / "config" / "ur5.yaml").read_text().replace("    state_timeout: 0.1", "    state_timout: 0.1", 1)
    (tmp_path / "ur5.yaml").write_text(text)
    undeclared, _ = undeclared_and_unapplied(tmp_path / "ur5.yaml", "gravity_compensation")
    assert undeclared == ["state_timout"]


@pytest.mark.parametrize("robot", ROBOTS)
def test_command_joints_are_the_models_actuated_joints(robot):
    entry = robots.ROBOTS[robot]
    model = RobotModel.from_urdf(entry.path, held_joints=entry.held_joints or None)
    data = yaml.safe_load((ROOT / "config" / f"{robot}.yaml").read_text())
    for section in ARM_NODES:
        assert data[f"/**/{section}"]["ros__parameters"]["joints"] == list(model.joint_names), section
    gains = data["/**/computed_torque"]["ros__parameters"]["gains"]
    assert list(gains) == list(model.joint_names)


@pytest.mark.parametrize("robot", ROBOTS)
def test_joint_limits_yaml_loads_into_the_model(robot):
    path = ROOT / "config" / f"{robot}_joint_limits.yaml"
    entry = robots.ROBOTS[robot]
    urdf_only = RobotModel.from_urdf(entry.path, held_joints=entry.held_joints or None)
    model = RobotModel.from_urdf(entry.path, held_joints=entry.held_joints or None, joint_limits=path)
    limits = yaml.safe_load(path.read_text())["joint_limits"]
    assert list(limits) == list(model.joint_names)
    want_acc = [limits[j]["max_acceleration"] for j in model.joint_names]
    np.testing.assert_array_equal(model.acceleration_limit, want_acc)
    assert np.all(np.isinf(urdf_only.acceleration_limit))  # URDF has none: the file is what sets them
    # never looser than the URDF (the URDF's velocity limits are the manufacturer's)
    assert np.all(model.velocity_limit <= urdf_only.velocity_limit)
    np.testing.assert_array_equal(model.effort_limit, urdf_only.effort_limit)
