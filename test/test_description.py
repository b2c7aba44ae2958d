"""Our URDF reading: every bad-URDF case of issue 3 gives a clear error naming the link or joint.

Independent references: Pinocchio's own URDF parser (for the normalized axis and for meshes) and the
textbook meaning of each check (no expected value here comes from our own code).
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros.description import RobotDescription, matrix_to_rpy, rpy_to_matrix
from robot_dynamics_ros.errors import URDFError
from robot_dynamics_ros.model import RobotModel

INERTIA = '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/>'


def link(name, mass=1.0, inertia=INERTIA, geometry=""):
    return (f'<link name="{name}"><inertial><origin xyz="0.1 0 0"/><mass value="{mass}"/>{inertia}'
            f"</inertial>{geometry}</link>")


def joint(name, parent, child, jtype="revolute", axis="0 0 1", extra=""):
    return (f'<joint name="{name}" type="{jtype}"><origin xyz="0 0 0.2" rpy="0.1 0.2 0.3"/>'
            f'<parent link="{parent}"/><child link="{child}"/><axis xyz="{axis}"/>'
            f'<limit lower="-2" upper="2" effort="10" velocity="2"/>{extra}</joint>')


def robot(*parts, name="r"):
    return f'<?xml version="1.0"?><robot name="{name}">' + "".join(parts) + "</robot>"


GOOD = robot('<link name="base"/>', link("l1"), link("l2"), joint("j1", "base", "l1"),
             joint("j2", "l1", "l2", axis="0 1 0"))


def test_good_urdf_reads():
    d = RobotDescription.from_urdf(GOOD)
    assert d.root == "base"
    assert list(d.joints) == ["j1", "j2"]
    assert d.links["l1"].inertial.mass == 1.0


@pytest.mark.parametrize("case, text, names", [
    ("negative mass", robot('<link name="base"/>', link("l1", mass=-1.0), joint("j1", "base", "l1")),
     ["'l1'", "mass"]),
    ("inertia not PSD", robot('<link name="base"/>',
                              link("l1", inertia='<inertia ixx="0.01" ixy="0" ixz="0" iyy="-0.02" iyz="0" izz="0.02"/>'),
                              joint("j1", "base", "l1")), ["'l1'", "positive semi-definite"]),
    ("triangle inequality", robot('<link name="base"/>',
                                  link("l1", inertia='<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.05"/>'),
                                  joint("j1", "base", "l1")), ["'l1'", "triangle"]),
    ("zero axis", robot('<link name="base"/>', link("l1"), joint("j1", "base", "l1", axis="0 0 0")),
     ["'j1'", "zero length"]),
    ("two roots", robot('<link name="base"/>', '<link name="other"/>', link("l1"), joint("j1", "base", "l1")),
     ["'base'", "'other'", "root"]),
    ("cycle", robot('<link name="base"/>', link("a"), link("b"), joint("j0", "base", "a"),
                    joint("j1", "a", "b"), joint("j2", "b", "a")), ["'a'", "two parent"]),
    ("pure cycle", robot(link("a"), link("b"), joint("j1", "a", "b"), joint("j2", "b", "a")), ["cycle"]),
    ("unknown parent", robot('<link name="base"/>', link("l1"), joint("j1", "nowhere", "l1")),
     ["'j1'", "'nowhere'"]),
    ("unknown child", robot('<link name="base"/>', joint("j1", "base", "ghost")), ["'j1'", "'ghost'"]),
    ("floating base", robot('<link name="world"/>', link("l1"), joint("j1", "world", "l1", jtype="floating")),
     ["'j1'", "floating"]),
    ("bad number", robot('<link name="base"/>', link("l1", mass="heavy"), joint("j1", "base", "l1")),
     ["'l1'", "heavy"]),
    ("duplicate link", robot('<link name="base"/>', link("l1"), link("l1"), joint("j1", "base", "l1")),
     ["'l1'", "twice"]),
    ("mimic unknown", robot('<link name="base"/>', link("l1"),
                            joint("j1", "base", "l1", extra='<mimic joint="nope"/>')), ["'j1'", "'nope'"]),
    ("lower > upper", robot('<link name="base"/>', link("l1"),
                            joint("j1", "base", "l1").replace('lower="-2" upper="2"', 'lower="2" upper="-2"')),
     ["'j1'", "lower"]),
    ("not xml", "<robot name='x'><link name='a'></robot>", ["not well-formed"]),
    ("entity", '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY e "x">]><robot name="r"><link name="a"/></robot>',
     ["ENTITY"]),
])
def test_bad_urdf_names_the_culprit(case, text, names):
    with pytest.raises(URDFError) as exc:
        RobotDescription.from_urdf(text)
    msg = str(exc.value)
    for n in names:
        assert n in msg, (case, msg)
    assert "\n" not in msg


def test_massless_moving_subtree_is_rejected_naming_the_joint():
    text = robot('<link name="base"/>', link("l1"), '<link name="empty"/>', '<link name="empty2"/>',
                 joint("j1", "base", "l1"), joint("j2", "l1", "empty"),
                 joint("jf", "empty", "empty2", jtype="fixed"))
    with pytest.raises(URDFError, match=r"joint 'j2'.*singular"):
        RobotModel.from_urdf(text)
    # holding the massless joint makes the model valid
    m = RobotModel.from_urdf(text, held_joints={"j2": 0.5})
    assert m.joint_names == ("j1",)


def test_point_mass_is_accepted():
    text = robot('<link name="base"/>',
                 link("l1", inertia='<inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/>'),
                 joint("j1", "base", "l1"))
    assert RobotDescription.from_urdf(text).links["l1"].inertial.mass == 1.0


def test_non_unit_axis_is_normalized_same_dynamics_as_unit_axis():
    unit = robot('<link name="base"/>', link("l1"), link("l2"), joint("j1", "base", "l1", axis="0 0.6 0.8"),
                 joint("j2", "l1", "l2", axis="1 0 0"))
    scaled = unit.replace('xyz="0 0.6 0.8"', 'xyz="0 3 4"').replace('xyz="1 0 0"', 'xyz="0.001 0 0"')
    d = RobotDescription.from_urdf(scaled)
    np.testing.assert_allclose(d.joints["j1"].axis, [0, 0.6, 0.8], atol=1e-15)
    np.testing.assert_allclose(d.joints["j2"].axis, [1, 0, 0], atol=1e-15)
    # Pinocchio on the original unit-axis text is the independent reference
    ref = pin.buildModelFromXML(unit)
    ours = pin.buildModelFromXML(d.to_urdf())
    q, v, a = np.array([0.4, -0.7]), np.array([0.3, 1.1]), np.array([-0.5, 0.9])
    np.testing.assert_allclose(pin.rnea(ours, ours.createData(), q, v, a),
                               pin.rnea(ref, ref.createData(), q, v, a), atol=1e-12)


def test_unresolvable_meshes_never_block_loading():
    mesh = ('<visual><geometry><mesh filename="package://no_such_package/meshes/x.dae"/></geometry></visual>'
            '<collision><geometry><mesh filename="/does/not/exist.stl"/></geometry></collision>')
    text = robot('<link name="base"/>', link("l1", geometry=mesh), joint("j1", "base", "l1"))
    m = RobotModel.from_urdf(text)
    assert m.joint_names == ("j1",)
    out = m.description.to_urdf()
    assert "mesh" not in out
    kept = m.description.to_urdf(drop_geometry=False)
    assert "package://no_such_package/meshes/x.dae" in kept and "<collision>" in kept


@pytest.mark.parametrize("rpy", [(0.1, 0.2, 0.3), (-2.9, 1.2, 3.0), (0.4, np.pi / 2, -0.3),
                                 (0.4, -np.pi / 2, 1.3), (np.pi, 0, 0)])
def test_rpy_round_trip(rpy):
    R = rpy_to_matrix(rpy)
    # independent: Pinocchio's rpy convention
    np.testing.assert_allclose(R, pin.rpy.rpyToMatrix(*rpy), atol=1e-15)
    np.testing.assert_allclose(rpy_to_matrix(matrix_to_rpy(R)), R, atol=1e-14)
