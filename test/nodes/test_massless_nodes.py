"""A model that cannot compute a torque never drives a robot (issue 24 item 1), at the node level.

The kinematics-only description is example-robot-data's Panda with every ``<inertial>`` removed (as
robotics-toolbox-python ships the LBR iiwa 14, ABB IRB 140 and Puma 560). Each node that commands or estimates
torque is constructed with it and ``autostart``: configure fails and the constructor raises the UserError its
entry point prints as one line, naming the massless moving links (taken from the URDF text itself with the
standard library's XML parser, not from the code under test); with ``autostart: false`` configure fails the
same way and the node has no core and no publisher.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import rclpy
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter

from robot_dynamics_ros import robots
from robot_dynamics_ros.errors import UserError

PANDA = robots.ROBOTS["panda"]


def _kinematics_only(tmp_path):
    root = ET.fromstring(PANDA.path.read_text())
    for link in root.findall("link"):
        for el in link.findall("inertial"):
            link.remove(el)
    moving = [j.find("child").get("link") for j in root.findall("joint") if j.get("type") != "fixed"]
    path = tmp_path / "panda_kinematics_only.urdf"
    path.write_text(ET.tostring(root, encoding="unicode"))
    return path, moving


def _node_classes():
    from robot_dynamics_ros.nodes.computed_torque import ComputedTorqueNode
    from robot_dynamics_ros.nodes.external_torque_observer import ExternalTorqueObserverNode
    from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode

    return {"gravity_compensation": GravityCompensationNode, "computed_torque": ComputedTorqueNode,
            "external_torque_observer": ExternalTorqueObserverNode}


@pytest.mark.parametrize("kind", ["gravity_compensation", "computed_torque", "external_torque_observer"])
@pytest.mark.parametrize("allow_partial", [False, True])
def test_a_kinematics_only_model_is_refused_with_one_line_naming_the_links(tmp_path, kind, allow_partial):
    path, moving = _kinematics_only(tmp_path)
    params = [Parameter("urdf_path", value=str(path)),
              Parameter("held_joint_names", value=["panda_finger_joint1", "panda_finger_joint2"]),
              Parameter("held_joint_positions", value=[0.02, 0.02]),
              Parameter("allow_partially_massless", value=allow_partial)]
    arm_links = [ln for ln in moving if "finger" not in ln]
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        with pytest.raises(UserError) as exc:
            _node_classes()[kind](f"{kind}_massless", context=ctx, parameter_overrides=params)
        err = str(exc.value)
        assert "\n" not in err and "mass" in err, err
        assert arm_links and all(f"'{ln}'" in err for ln in arm_links[:3]), (arm_links, err)
        node = _node_classes()[kind](f"{kind}_massless_manual", context=ctx,
                                     parameter_overrides=[*params, Parameter("autostart", value=False)])
        try:
            assert node.trigger_configure() != TransitionCallbackReturn.SUCCESS
            assert node.core is None and node.pub is None, "a massless model got a core and a publisher"
            assert str(node.shell.config_error) == err
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
