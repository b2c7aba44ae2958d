"""The package layout a ROS 2 user expects, and the generated service type."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_package_xml_format3_ament_python():
    root = ET.parse(ROOT / "package.xml").getroot()
    assert root.get("format") == "3"
    assert root.findtext("name") == "robot_dynamics_ros"
    assert root.find("export/build_type").text == "ament_python"
    deps = {e.text for e in root.findall("exec_depend")}
    assert {"rclpy", "sensor_msgs", "std_msgs", "trajectory_msgs", "robot_dynamics_interfaces"} <= deps


def test_interface_package_generates_retime_service():
    from robot_dynamics_interfaces.srv import RetimeTrajectory

    req = RetimeTrajectory.Request()
    assert req.path.joint_names == []
    for field in ("velocity_scaling", "acceleration_scaling", "torque_margin", "sample_period"):
        assert hasattr(req, field)
    resp = RetimeTrajectory.Response()
    assert resp.success is False and resp.message == ""
    assert resp.trajectory.points == []


def test_harness_and_tools_live_beside_the_runtime_package():
    pkg = ROOT / "robot_dynamics_ros"
    assert not (pkg / "benchmarking").exists() and not (pkg / "launch_check.py").exists()
    assert (ROOT / "robot_dynamics_testing" / "latency.py").is_file()
    assert (ROOT / "robot_dynamics_testing" / "launch_check.py").is_file()
    assert (ROOT / "robot_dynamics_tools" / "cli.py").is_file() and not (pkg / "cli.py").exists()


def test_config_files_resolve_through_the_ament_index_first(tmp_path, monkeypatch):
    """After a colcon install the share directory comes from the ament index, not from the source tree."""
    from robot_dynamics_ros import share

    prefix = tmp_path / "install"
    (prefix / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (prefix / "share" / "ament_index" / "resource_index" / "packages" / "robot_dynamics_ros").write_text("")
    (prefix / "share" / "robot_dynamics_ros" / "config").mkdir(parents=True)
    installed = prefix / "share" / "robot_dynamics_ros" / "config" / "panda_joint_limits.yaml"
    installed.write_text("joint_limits: {}\n")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    assert share.share_dirs()[0] == prefix / "share" / "robot_dynamics_ros"
    assert share.resolve_config_file("panda_joint_limits.yaml") == str(installed)
    assert share.resolve_config_file("panda_joint_limits") == str(installed)  # the bare name, as the README's
    assert share.resolve_config_file("no_such.yaml") == "no_such.yaml"  # the reader then names it
    assert share.resolve_config_file(str(ROOT / "config" / "ur5.yaml")) == str(ROOT / "config" / "ur5.yaml")
    # without an index: the source checkout's config/
    monkeypatch.delenv("AMENT_PREFIX_PATH")
    assert share.data_file("config", "panda_joint_limits.yaml") == ROOT / "config" / "panda_joint_limits.yaml"
