"""A model whose moving links carry no mass cannot drive a robot (issue 24 item 1).

The kinematics-only descriptions are generated from example-robot-data's Panda with every ``<inertial>``
removed (as robotics-toolbox-python ships the LBR iiwa 14, ABB IRB 140 and Puma 560). Expected values: the
link names come from the URDF text (standard-library XML), torques from Pinocchio on the same text.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros import robots
from robot_dynamics_ros.control.computed_torque import ComputedTorqueController, ComputedTorqueSettings
from robot_dynamics_ros.control.external_torque import ExternalTorqueCore, ObserverSettings
from robot_dynamics_ros.control.gravity_compensator import GravityCompensator, GravitySettings
from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.model import RobotModel

PANDA = robots.ROBOTS["panda"]
CORES = [(GravityCompensator, GravitySettings), (ComputedTorqueController, ComputedTorqueSettings),
         (ExternalTorqueCore, ObserverSettings)]


def _strip(links=None) -> str:
    """The Panda URDF text without the ``<inertial>`` of ``links`` (all links when None)."""
    root = ET.fromstring(PANDA.path.read_text())
    for link in root.findall("link"):
        if links is None or link.get("name") in links:
            for el in link.findall("inertial"):
                link.remove(el)
    return ET.tostring(root, encoding="unicode")


def _moving_links(xml: str) -> list[str]:
    root = ET.fromstring(xml)
    return [j.find("child").get("link") for j in root.findall("joint")
            if j.get("type") in ("revolute", "continuous", "prismatic")]


def test_kinematics_only_model_loads_but_says_in_one_line_it_cannot_compute_torques():
    xml = _strip()
    model = RobotModel.from_text(xml, held_joints=PANDA.held_joints)
    assert model.warnings   # the lenient loader still accepts it (kinematics, retiming without torques)
    for allow in (False, True):
        problem = model.torque_model_problem(allow_partial=allow)
        assert problem is not None and "\n" not in problem
        assert "cannot compute joint torques" in problem and "no moving link carries mass" in problem
        assert "'panda_link1'" in problem
    # the real Panda is fine
    assert RobotModel.from_urdf(PANDA.path, held_joints=PANDA.held_joints).torque_model_problem() is None


@pytest.mark.parametrize("core_cls, settings_cls", CORES)
def test_every_torque_core_refuses_a_kinematics_only_model(core_cls, settings_cls):
    model = RobotModel.from_text(_strip(), held_joints=PANDA.held_joints)
    for allow in (False, True):
        with pytest.raises(UserError) as info:
            core_cls(model, settings_cls(allow_partially_massless=allow))
        assert str(info.value) == model.torque_model_problem(allow)


@pytest.mark.parametrize("core_cls, settings_cls", CORES)
def test_set_model_refuses_a_massless_model_and_keeps_the_old_one(core_cls, settings_cls):
    good = RobotModel.from_urdf(PANDA.path, held_joints=PANDA.held_joints)
    core = core_cls(good, settings_cls())
    bad = RobotModel.from_text(_strip(), held_joints=PANDA.held_joints)
    with pytest.raises(UserError, match="cannot compute joint torques"):
        core.set_model(bad)
    assert core.model is good


def test_partially_massless_model_needs_the_option():
    # the fingers (moved by the finger joints, nothing below them) without mass
    fingers = ["panda_leftfinger", "panda_rightfinger"]
    xml = _strip(fingers)
    model = RobotModel.from_text(xml)     # fingers not held: they are moving links
    problem = model.torque_model_problem()
    assert problem is not None and all(f"'{f}'" in problem for f in fingers)
    assert "'panda_link1'" not in problem and "\n" not in problem
    with pytest.raises(UserError, match="panda_leftfinger"):
        GravityCompensator(model, GravitySettings())
    assert model.torque_model_problem(allow_partial=True) is None
    core = GravityCompensator(model, GravitySettings(allow_partially_massless=True))
    assert core.model is model
    # the finger joints' gravity torque is exactly zero (Pinocchio on the same text): the model is exact there
    pm = pin.buildModelFromXML(xml)
    g = pin.computeGeneralizedGravity(pm, pm.createData(), pin.neutral(pm))
    fj = [pm.getJointId(n) - 1 for n in ("panda_finger_joint1", "panda_finger_joint2")]
    assert np.all(g[fj] == 0.0)
    # a massless link between two axes (a virtual frame) that carries the rest of the arm: the option
    # accepts it too, the default refuses it
    xml = _strip(["panda_link4"])
    assert "panda_link4" in _moving_links(xml)
    mid = RobotModel.from_text(xml, held_joints=PANDA.held_joints)
    assert "'panda_link4'" in mid.torque_model_problem()
    GravityCompensator(mid, replace(GravitySettings(), allow_partially_massless=True))


def test_a_payload_gives_a_massless_end_link_its_mass():
    xml = _strip(["panda_link7", "panda_link8", "panda_hand", "panda_leftfinger", "panda_rightfinger"])
    model = RobotModel.from_text(xml, held_joints=PANDA.held_joints)
    assert "'panda_link7'" in model.torque_model_problem()
    loaded = model.with_settings(payload=("panda_hand", 1.0))   # panda_hand is bolted to panda_link7
    assert loaded.torque_model_problem() is None
