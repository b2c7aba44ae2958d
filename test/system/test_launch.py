"""Launch files: static checks against the real node classes and setup.py (launch itself is not installable).

The checker (test/launch_check.py) reads the launch files' syntax trees; the parameter names
each node declares come from instantiating the node classes (rclpy, own context), not from a list kept
by hand. The second half feeds the checker deliberately broken copies to show it catches each mistake.
"""
from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest

from robot_dynamics_testing import launch_check

pytestmark = pytest.mark.ros  # starts the real node classes (rclpy, own contexts)

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = launch_check.entry_points_from_setup(ROOT / "setup.py")


@functools.lru_cache(maxsize=None)
def node_info(executable: str) -> tuple[str, frozenset[str]]:
    name, params = launch_check.node_info_by_instantiation(ENTRY_POINTS[executable])
    return name, frozenset(params)


def declared(executable: str) -> frozenset[str]:
    return node_info(executable)[1]


def default_name(executable: str) -> str:
    return node_info(executable)[0]


def check(path, share_root=ROOT):
    return launch_check.check_launch_file(path, declared=declared, entry_points=ENTRY_POINTS,
                                          share_root=share_root, default_names=default_name)


def test_expected_launch_files_exist():
    names = {p.name for p in (ROOT / "launch").glob("*.launch.py")}
    assert {"gravity_compensation.launch.py", "computed_torque.launch.py", "retiming.launch.py",
            "mujoco_simulator.launch.py", "all.launch.py"} <= names


def test_every_launch_file_passes_the_static_check():
    problems = launch_check.check_launch_dir(ROOT / "launch", declared=declared, entry_points=ENTRY_POINTS,
                                             share_root=ROOT, default_names=default_name)
    assert problems == []


def test_declared_parameters_come_from_the_real_nodes():
    gc = declared("gravity_compensation")
    assert {"urdf_path", "robot_description_topic", "joints", "controller_name", "use_sim_time"} <= gc
    ct = declared("computed_torque")
    assert {"control_rate", "gains.panda_joint1.kp", "gains.panda_joint7.d"} <= ct  # per-joint, from the URDF
    assert "control_rate" not in gc and "joint_list" not in gc
    assert {"joint_limits_path", "default_torque_margin"} <= declared("retiming_service")


def test_entry_points_are_read_from_setup_py():
    assert ENTRY_POINTS["gravity_compensation"] == "robot_dynamics_ros.nodes.gravity_compensation:main"
    assert {"computed_torque", "retiming_service", "mujoco_simulator"} <= set(ENTRY_POINTS)


# ------------------------------------------------------------------------------- the checker catches ...
@pytest.fixture
def share(tmp_path):
    """A copy of share/robot_dynamics_ros (launch/ and config/) to break on purpose."""
    shutil.copytree(ROOT / "launch", tmp_path / "launch")
    shutil.copytree(ROOT / "config", tmp_path / "config")
    return tmp_path


def edit(path: Path, old: str, new: str) -> Path:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1))
    return path


def test_catches_a_wrong_parameter_name(share):
    f = edit(share / "launch" / "gravity_compensation.launch.py", '"joints": LaunchConfiguration("joints")',
             '"joint_names": LaunchConfiguration("joints")')
    problems = check(f, share)
    assert len(problems) == 1
    assert "parameter 'joint_names' passed to 'gravity_compensation' is not declared by the node" in problems[0]
    assert problems[0].startswith(f"{f}:")


def test_catches_a_parameter_of_another_node(share):
    f = edit(share / "launch" / "gravity_compensation.launch.py", '"joints": LaunchConfiguration("joints")',
             '"control_rate": LaunchConfiguration("joints")')  # computed_torque's, not gravity_compensation's
    assert any("parameter 'control_rate' passed to 'gravity_compensation'" in p for p in check(f, share))


def test_catches_a_wrong_key_in_the_parameters_file(share):
    edit(share / "config" / "panda.yaml", "    state_timeout: 0.1", "    state_timout: 0.1")
    problems = check(share / "launch" / "gravity_compensation.launch.py", share)
    assert len(problems) == 1
    assert "parameter 'state_timout' of section '/**/gravity_compensation' in 'panda.yaml' is not declared" in problems[0]


def test_catches_unknown_executable(share):
    f = edit(share / "launch" / "computed_torque.launch.py", 'executable="computed_torque"',
             'executable="computed_torque_node"')
    assert any("executable 'computed_torque_node' is not a console_scripts entry point" in p for p in check(f, share))


def test_catches_unused_and_undeclared_arguments(share):
    f = edit(share / "launch" / "computed_torque.launch.py", '"control_rate": LaunchConfiguration("rate")',
             '"control_rate": LaunchConfiguration("control_rate")')
    problems = check(f, share)
    assert any("LaunchConfiguration('control_rate') but no DeclareLaunchArgument('control_rate')" in p
               for p in problems)
    assert any("launch argument 'rate' is declared but never used" in p for p in problems)


def test_catches_imports_other_than_launch(share):
    f = edit(share / "launch" / "all.launch.py", "from launch import LaunchDescription",
             "import os\nfrom launch import LaunchDescription")
    assert any("imports 'os': a launch file may import only launch / launch_ros" in p for p in check(f, share))


def test_catches_include_arguments_the_included_file_does_not_declare(share):
    f = edit(share / "launch" / "all.launch.py", '"rate": LaunchConfiguration("rate"),',
             '"control_rate": LaunchConfiguration("rate"),')
    assert any("argument 'control_rate' passed to 'computed_torque.launch.py', which does not declare it" in p
               for p in check(f, share))


def test_catches_missing_included_file_and_params_file(share):
    (share / "launch" / "gravity_compensation.launch.py").unlink()
    (share / "config" / "panda.yaml").unlink()
    problems = check(share / "launch" / "all.launch.py", share)
    assert any("included launch file" in p and "gravity_compensation.launch.py' does not exist" in p
               for p in problems)
    problems = check(share / "launch" / "mujoco_simulator.launch.py", share)
    assert any("parameters file" in p and "panda.yaml' of 'mujoco_simulator' does not exist" in p for p in problems)


def test_params_file_section_of_an_unnamed_node_is_checked_under_its_default_name(share):
    edit(share / "config" / "panda.yaml", "    default_torque_margin: 0.9", "    torque_margin: 0.9")
    problems = check(share / "launch" / "retiming.launch.py", share)
    assert len(problems) == 1
    assert "parameter 'torque_margin' of section '/**/retiming_service' in 'panda.yaml' is not declared" in problems[0]
