"""The package layout a ROS 2 user expects, and the generated service type."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
