"""Masses, inertias and payloads within physical bounds relative to the robot (issue 25).

Bounds (urdf_elements, model): a link of at most MAX_LINK_MASS = 1e4 kg; principal moments at most
mass · (5 m)² (a body within 5 m of its centre of mass: I_xx = Σ m (y² + z²) ≤ m r²); a payload of at most
PAYLOAD_MASS_RATIO = 10 × the robot's moving mass. Expected masses are summed here from the URDF text with the
standard library's XML parser, not by the code under test.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from robot_dynamics_ros import robots
from robot_dynamics_ros.errors import URDFError, UserError
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_testing.urdf_text import Body, serial_urdf

PANDA = robots.ROBOTS["panda"]


def _arm(mass2: float, inertia2=(0.01, 0.01, 0.01), base_inertial: str = "") -> str:
    xml = serial_urdf("arm", [Body("j1", "revolute", mass=4.0, com=(0.1, 0, 0), limit=(-3, 3, 87, 2)),
                              Body("j2", "revolute", mass=mass2, com=(0.1, 0, 0), inertia=inertia2,
                                   axis=(0, 1, 0), origin=(0.3, 0, 0), limit=(-3, 3, 87, 2))])
    if base_inertial:
        xml = xml.replace('<link name="base"/>', f'<link name="base">{base_inertial}</link>')
    return xml


@pytest.mark.parametrize("mass", [1e5, 9e5])
@pytest.mark.parametrize("strict", [False, True])
def test_a_link_of_1e5_kg_is_refused_in_one_line_naming_it(mass, strict):
    with pytest.raises(URDFError) as info:
        RobotModel.from_text(_arm(mass, inertia2=(0.01 * mass,) * 3), strict=strict)
    msg = str(info.value)
    assert "\n" not in msg and "'l_j2'" in msg and "MAX_LINK_MASS" in msg and f"{mass:g} kg" in msg


def test_a_heavy_but_possible_link_is_accepted():
    model = RobotModel.from_text(_arm(5e3, inertia2=(50.0, 50.0, 50.0)), strict=True)
    assert model.torque_model_problem() is None


def test_an_inertia_too_large_for_the_mass_is_refused_on_a_moving_link_and_ignored_on_the_base():
    # 1 kg with principal moments 100 kg·m²: its mass would lie 10 m from its centre (triangle holds)
    with pytest.raises(URDFError) as info:
        RobotModel.from_text(_arm(1.0, inertia2=(100.0, 100.0, 100.0)))
    assert "'l_j2'" in str(info.value) and "MAX_LINK_RADIUS" in str(info.value)
    # 1 kg with 20 kg·m² (within 4.5 m): accepted
    RobotModel.from_text(_arm(1.0, inertia2=(20.0, 20.0, 20.0)), strict=True)
    base = ('<inertial><mass value="1"/><inertia ixx="100" ixy="0" ixz="0" iyy="100" iyz="0" izz="100"/>'
            '</inertial>')
    model = RobotModel.from_text(_arm(1.0, base_inertial=base))
    assert any("'base'" in w and "ignored" in w for w in model.warnings)


def _panda_moving_mass() -> float:
    root = ET.fromstring(PANDA.path.read_text())
    children = {j.get("name"): j.find("child").get("link") for j in root.findall("joint")}
    fixed_to_root = {"panda_link0"}   # the root; world/base frames welded to it carry no mass in this file
    moving = {children[n] for n in children} - fixed_to_root
    return sum(float(link.find("inertial/mass").get("value")) for link in root.findall("link")
               if link.get("name") in moving and link.find("inertial") is not None)


def test_a_payload_beyond_ten_times_the_robot_or_1e4_kg_is_refused():
    model = RobotModel.from_urdf(PANDA.path, held_joints=PANDA.held_joints)
    carried = _panda_moving_mass()
    assert model.moving_mass() == pytest.approx(carried, rel=1e-12)
    model.with_settings(payload=("panda_hand", 9.9 * carried))
    for mass in (10.1 * carried, 1e5):
        with pytest.raises(UserError) as info:
            model.with_settings(payload=("panda_hand", mass))
        assert "implausible" in str(info.value) and "'panda_hand'" in str(info.value)
    # a payload's inertia is bounded by its size like a link's
    with pytest.raises(UserError, match="MAX_LINK_RADIUS"):
        model.with_settings(payload=("panda_hand", 1.0, (0, 0, 0), (100.0, 0, 0, 100.0, 0, 100.0)))
