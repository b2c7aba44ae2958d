"""Our URDF reading: every bad-URDF case gives a clear one-line error naming the link or joint; what the
lenient reading accepts (rounding, the fixed base's inertia, massless links) loads with a warning.

Independent references: Pinocchio's own URDF parser (for the normalized axis and for meshes) and the
textbook meaning of each check (no expected value here comes from our own code).
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros.description import RobotDescription
from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.errors import URDFError, UserError
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS
from robot_dynamics_ros.urdf_elements import matrix_to_rpy, rpy_to_matrix
from robot_dynamics_ros.urdf_reader import MAX_URDF_BYTES, MAX_URDF_DEPTH, MAX_URDF_ELEMENTS

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
    ("bad number", robot('<link name="base"/>', link("l1", mass="heavy"), joint("j1", "base", "l1")),
     ["'l1'", "heavy"]),
    ("duplicate link", robot('<link name="base"/>', link("l1"), link("l1"), joint("j1", "base", "l1")),
     ["'l1'", "twice"]),
    ("mimic cycle", robot('<link name="base"/>', link("l1"), link("l2"),
                          joint("j1", "base", "l1", extra='<mimic joint="j2"/>'),
                          joint("j2", "l1", "l2", extra='<mimic joint="j1"/>')), ["'j1'", "cycle"]),
    ("heavy link", robot('<link name="base"/>', link("l1", mass="1e300"), joint("j1", "base", "l1")),
     ["'l1'", "1e+300 kg", "MAX_LINK_MASS"]),
    ("huge inertia", robot('<link name="base"/>',
                           link("l1", inertia='<inertia ixx="1e9" ixy="0" ixz="0" iyy="1e9" iyz="0" izz="1e9"/>'),
                           joint("j1", "base", "l1")), ["'l1'", "MAX_LINK_INERTIA"]),
    ("absurd length", robot('<link name="base"/>', link("l1"),
                            joint("j1", "base", "l1").replace('xyz="0 0 0.2"', 'xyz="0 0 1e7"')),
     ["'j1'", "MAX_LENGTH"]),
    ("inf mass", robot('<link name="base"/>', link("l1", mass="inf"), joint("j1", "base", "l1")),
     ["'l1'", "mass"]),
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


def _pin_reference(text, q, qd, qdd):
    """Pinocchio's own URDF parser on the original text: (rnea, gravity) at one state."""
    pm = pin.buildModelFromXML(text)
    data = pm.createData()
    return pin.rnea(pm, data, q, qd, qdd).copy(), pin.computeGeneralizedGravity(pm, data, q).copy()


def _assert_both_engines_match_pinocchio_parser(model, text, q, qd, qdd):
    """RNEA of both engines on ``model`` equals Pinocchio's own parser on ``text`` (1e-12 N·m)."""
    tau_ref, _ = _pin_reference(text, np.asarray(q, float), np.asarray(qd, float), np.asarray(qdd, float))
    for engine in (PinocchioDynamics(model), NewtonEulerDynamics(model)):
        np.testing.assert_allclose(engine.rnea(q, qd, qdd), tau_ref, rtol=0, atol=1e-12)


def test_point_mass_is_accepted():
    text = robot('<link name="base"/>',
                 link("l1", inertia='<inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/>'),
                 joint("j1", "base", "l1"))
    assert RobotDescription.from_urdf(text).links["l1"].inertial.mass == 1.0


def test_point_mass_with_rounding_in_the_inertia_loads_without_warning():
    # iCub's head: a point mass of 1.33687 kg whose tensor is rounding (principal moments ±2.4e-35)
    point = '<inertia ixx="0" ixy="0" ixz="2.40741e-35" iyy="0" iyz="0" izz="0"/>'
    text = robot('<link name="base"/>', link("l1", mass=1.33687, inertia=point), joint("j1", "base", "l1"))
    m = RobotModel.from_urdf(text, strict=True)
    assert m.warnings == () and m.massless_joints == ()
    q, qd, qdd = np.array([0.7]), np.array([1.3]), np.array([-2.1])
    tau_ref, g_ref = _pin_reference(text, q, qd, qdd)
    eng = PinocchioDynamics(m)
    np.testing.assert_allclose(eng.rnea(q, qd, qdd), tau_ref, rtol=0, atol=1e-12)


def test_clearly_negative_moment_fails_even_when_lenient():
    # -1e-6 against moments of 2e-2: far beyond rounding (1e-9 relative)
    bad = '<inertia ixx="0.02" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="-0.000001"/>'
    text = robot('<link name="base"/>', link("l1", inertia=bad), joint("j1", "base", "l1"))
    with pytest.raises(URDFError, match=r"link 'l1' <inertial>: inertia is not positive semi-definite"):
        RobotModel.from_urdf(text)


TRIANGLE = '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.05"/>'  # 0.05 > 0.01 + 0.01


def test_triangle_inequality_violation_is_a_warning_and_strict_refuses_it():
    text = robot('<link name="base"/>', link("l1", inertia=TRIANGLE), joint("j1", "base", "l1", axis="1 0 0"))
    m = RobotModel.from_urdf(text)
    assert len(m.warnings) == 1 and "link 'l1'" in m.warnings[0] and "triangle" in m.warnings[0]
    # used as given: the same torques as Pinocchio's own parser on the original text
    q, qd, qdd = np.array([0.4]), np.array([-0.9]), np.array([1.7])
    tau_ref, _ = _pin_reference(text, q, qd, qdd)
    np.testing.assert_allclose(PinocchioDynamics(m).rnea(q, qd, qdd), tau_ref, rtol=0, atol=1e-12)
    with pytest.raises(URDFError, match=r"link 'l1' <inertial>: principal moments .* triangle .*\[strict\]"):
        RobotModel.from_urdf(text, strict=True)


def test_non_physical_root_link_inertia_is_ignored_with_a_warning():
    # the fixed base (root and what is welded to it) cannot move: its inertia affects no joint torque
    neg = '<inertia ixx="-1" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/>'
    text = robot(link("base", inertia=neg), link("plate", inertia=TRIANGLE), link("l1"), link("l2"),
                 joint("weld", "base", "plate", jtype="fixed"), joint("j1", "plate", "l1"),
                 joint("j2", "l1", "l2", axis="0 1 0"))
    m = RobotModel.from_urdf(text)
    assert len(m.warnings) == 2
    assert "link 'base'" in m.warnings[0] and "fixed base" in m.warnings[0]
    assert "link 'plate'" in m.warnings[1] and "fixed base" in m.warnings[1]
    _assert_both_engines_match_pinocchio_parser(m, text, [0.3, -1.1], [0.5, 2.0], [-1.0, 0.8])
    with pytest.raises(URDFError, match=r"link 'base' .*fixed base.*\[strict\]"):
        RobotModel.from_urdf(text, strict=True)


def test_massless_moving_links_load_with_a_warning_and_only_minverse_refuses():
    text = robot('<link name="base"/>', link("l1"), '<link name="empty"/>', '<link name="empty2"/>',
                 joint("j1", "base", "l1"), joint("j2", "l1", "empty"),
                 joint("jf", "empty", "empty2", jtype="fixed"))
    m = RobotModel.from_urdf(text)
    assert m.massless_joints == ("j2",)
    assert len(m.warnings) == 1 and "'j2'" in m.warnings[0] and "singular" in m.warnings[0]
    q, qd, qdd = np.array([0.3, -1.1]), np.array([0.5, 2.0]), np.array([-1.0, 0.8])
    tau_ref, g_ref = _pin_reference(text, q, qd, qdd)
    eng = PinocchioDynamics(m)
    np.testing.assert_allclose(eng.rnea(q, qd, qdd), tau_ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(eng.gravity(q), g_ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(NewtonEulerDynamics(m).gravity(q), g_ref, rtol=0, atol=1e-12)
    with pytest.raises(UserError, match=r"'j2'.*no mass"):
        eng.aba(q, qd, np.zeros(2))
    with pytest.raises(UserError, match=r"'j2'.*no mass"):
        eng.operational_space_inertia(q, "l1", part="linear")
    with pytest.raises(URDFError, match=r"joints 'j2' .*singular.*\[strict\]"):
        RobotModel.from_urdf(text, strict=True)
    # holding the massless joint leaves a regular model
    held = RobotModel.from_urdf(text, held_joints={"j2": 0.5})
    assert held.joint_names == ("j1",) and held.massless_joints == () and held.warnings == ()


def test_floating_joint_is_welded_at_its_origin_with_a_warning():
    text = robot('<link name="world"/>', link("base"), link("l1"), joint("float", "world", "base", jtype="floating"),
                 joint("j1", "base", "l1", axis="0 1 0"))
    m = RobotModel.from_urdf(text)
    assert m.joint_names == ("j1",)
    assert len(m.warnings) == 1 and "joint 'float' is of type 'floating'" in m.warnings[0]
    # the fixed-base view: Pinocchio's parser on the same text with the joint fixed
    welded = text.replace('type="floating"', 'type="fixed"')
    _assert_both_engines_match_pinocchio_parser(m, welded, [0.6], [-1.4], [0.3])
    with pytest.raises(URDFError, match=r"joint 'float' is of type 'floating'.*\[strict\]"):
        RobotModel.from_urdf(text, strict=True)


def test_mimic_of_an_unknown_joint_is_ignored_with_a_warning():
    text = robot('<link name="base"/>', link("l1"), joint("j1", "base", "l1", extra='<mimic joint="nope"/>'))
    m = RobotModel.from_urdf(text)
    assert m.joint_names == ("j1",) and not m.has_mimic
    assert len(m.warnings) == 1 and "'j1'" in m.warnings[0] and "'nope'" in m.warnings[0]
    with pytest.raises(URDFError, match=r"'j1' <mimic>: unknown joint 'nope'"):
        RobotModel.from_urdf(text, strict=True)


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
    assert "mesh" not in out and "<visual>" not in out


@pytest.mark.parametrize("rpy", [(0.1, 0.2, 0.3), (-2.9, 1.2, 3.0), (0.4, np.pi / 2, -0.3),
                                 (0.4, -np.pi / 2, 1.3), (np.pi, 0, 0)])
def test_rpy_round_trip(rpy):
    R = rpy_to_matrix(rpy)
    # independent: Pinocchio's rpy convention
    np.testing.assert_allclose(R, pin.rpy.rpyToMatrix(*rpy), atol=1e-15)
    np.testing.assert_allclose(rpy_to_matrix(matrix_to_rpy(R)), R, atol=1e-14)


# --------------------------------------------------------------------------------------------------
# descriptions are data: from_text never opens a file; from_file reads regular files only, bounded
# --------------------------------------------------------------------------------------------------
def test_from_text_never_opens_a_path(monkeypatch):
    import builtins
    import os

    path = str(ROBOTS["ur5"].path)  # an existing URDF: must not become the model

    def no_open(*args, **kwargs):
        raise AssertionError(f"opened {args[:1]}")

    monkeypatch.setattr(builtins, "open", no_open)
    monkeypatch.setattr(os, "open", no_open)
    for text in (path, "/etc/passwd", "~/.bashrc", "/proc/self/environ", "/dev/zero", "  " + path):
        with pytest.raises(URDFError) as exc:
            RobotModel.from_text(text)
        msg = str(exc.value)
        assert msg.startswith("URDF robot_description: not URDF XML (starts with '") and "\n" not in msg
        assert len(msg) < 140


def test_from_file_refuses_what_is_not_a_regular_file(tmp_path):
    import os

    fifo = tmp_path / "pipe.urdf"
    os.mkfifo(fifo)  # nobody writes to it: reading would block for ever
    # the same words for a FIFO, a device, a directory and a missing file: a path does not tell what exists
    with pytest.raises(URDFError, match=r"pipe.urdf': not a readable regular file$"):
        RobotModel.from_file(fifo)
    with pytest.raises(URDFError, match=r"/dev/zero': not a readable regular file$"):
        RobotModel.from_file("/dev/zero")
    with pytest.raises(URDFError, match=r"not a readable regular file$"):
        RobotModel.from_file(tmp_path)
    with pytest.raises(URDFError, match=r"nope.urdf': not a readable regular file$"):
        RobotModel.from_file(tmp_path / "nope.urdf")
    for junk in ("/tmp/" + "x" * 100_000, "a\x00b"):
        with pytest.raises(URDFError) as exc:
            RobotModel.from_file(junk)
        assert "not a readable regular file" in str(exc.value) and len(str(exc.value)) < 260
    big = tmp_path / "big.urdf"
    with open(big, "wb") as fh:  # sparse: no disk used
        fh.truncate(MAX_URDF_BYTES + 1)
    with pytest.raises(URDFError, match=r"big.urdf': \d+ bytes, more than the \d+ bytes accepted"):
        RobotModel.from_file(big)


def test_from_urdf_dispatches_text_and_paths():
    path = ROBOTS["planar_2r"].path
    text = path.read_text()
    assert RobotModel.from_urdf(path).joint_names == RobotModel.from_urdf(str(path)).joint_names \
        == RobotModel.from_urdf(text).joint_names == RobotModel.from_file(path).joint_names


def _nested(depth: int) -> str:
    return "<a>" * depth + "</a>" * depth


def test_nested_visual_content_is_skipped_and_deep_nesting_is_one_line_error():
    # nesting inside <visual> is skipped: the dynamics are those of the plain description
    shallow = f"<visual><geometry>{_nested(MAX_URDF_DEPTH - 10)}</geometry></visual>"
    text = robot('<link name="base"/>', link("l1", geometry=shallow), joint("j1", "base", "l1"))
    plain = RobotModel.from_text(robot('<link name="base"/>', link("l1"), joint("j1", "base", "l1")))
    assert RobotModel.from_text(text).reduced_urdf() == plain.reduced_urdf()
    # 150 000 nested elements: refused at the depth cap, one line (no recursion, no deep copy reached it)
    deep = f"<visual><geometry>{_nested(150_000)}</geometry></visual>"
    with pytest.raises(URDFError) as exc:
        RobotModel.from_text(robot('<link name="base"/>', link("l1", geometry=deep), joint("j1", "base", "l1")))
    assert f"nested more than {MAX_URDF_DEPTH} deep" in str(exc.value) and len(str(exc.value)) < 120


def test_element_count_and_size_caps_give_one_short_line():
    too_many = robot('<link name="base"/>', link("l1", geometry=f"<visual>{'<a/>' * MAX_URDF_ELEMENTS}</visual>"),
                     joint("j1", "base", "l1"))
    with pytest.raises(URDFError) as exc:
        RobotModel.from_text(too_many)
    assert f"more than {MAX_URDF_ELEMENTS} XML elements" in str(exc.value) and len(str(exc.value)) < 120
    junk = "<" + "x" * (50 * 1024 * 1024)
    with pytest.raises(URDFError) as exc:
        RobotModel.from_text(junk)
    assert "bytes accepted" in str(exc.value) and len(str(exc.value)) < 120
    with pytest.raises(URDFError) as exc:
        RobotModel.from_text("junk " * 10_000)
    assert len(str(exc.value)) < 140


def test_error_messages_quote_a_short_excerpt_only():
    long_value = "1 " * 5000
    text = robot('<link name="base"/>', link("l1"), joint("j1", "base", "l1").replace('xyz="0 0 1"', f'xyz="{long_value}"'))
    with pytest.raises(URDFError) as exc:
        RobotModel.from_text(text)
    assert "attribute 'xyz'" in str(exc.value) and len(str(exc.value)) < 200
    bad = robot('<link name="base"/>', link("l1", mass="x" * 200), joint("j1", "base", "l1"))
    with pytest.raises(URDFError) as exc:
        RobotModel.from_text(bad)
    assert "'l1'" in str(exc.value) and "x" * 61 not in str(exc.value)
    long_name = "n" * 200  # within MAX_ATTRIBUTE_CHARS, but a message quotes 60 characters of it
    bad = robot('<link name="base"/>', link(long_name, mass="-1"), joint("j1", "base", long_name))
    with pytest.raises(URDFError) as exc:
        RobotModel.from_text(bad)
    assert "'" + "n" * 60 + "'..." in str(exc.value) and "n" * 61 not in str(exc.value)


def test_doctype_is_refused_before_any_expansion():
    laughs = ('<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
              '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><robot name="r"><link name="&c;"/></robot>')
    with pytest.raises(URDFError, match="DOCTYPE/ENTITY declarations are refused"):
        RobotModel.from_text(laughs)
