"""``robot-dynamics dynamics``: by-name JSON output checked against the 2R closed form and Pinocchio."""
from __future__ import annotations

import json

import numpy as np
import pytest

from robot_dynamics_tools.cli import main
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS

L1, L2, M1, M2, G0 = 0.5, 0.4, 2.0, 1.5, 9.81  # urdf/planar_2r.urdf


@pytest.mark.parametrize("engine", ["pinocchio", "newton-euler"])
def test_planar_2r_json_matches_closed_form(capsys, engine):
    q, qd, qdd = [0.3, 0.7], [0.5, -1.2], [1.0, -2.0]
    assert main(["dynamics", "--urdf", "planar_2r", "--q", "0.3,0.7", "--qd", "joint2=-1.2,joint1=0.5",
                 "--qdd", "1,-2", "--engine", engine, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["joint_names"] == ["joint1", "joint2"] and out["engine"] == engine
    c1, c2, s2, c12 = np.cos(q[0]), np.cos(q[1]), np.sin(q[1]), np.cos(sum(q))
    M = np.array([[(M1 + M2) * L1**2 + M2 * L2**2 + 2 * M2 * L1 * L2 * c2, M2 * L2**2 + M2 * L1 * L2 * c2],
                  [M2 * L2**2 + M2 * L1 * L2 * c2, M2 * L2**2]])
    h = M2 * L1 * L2 * s2
    cqd = np.array([-h * (2 * qd[0] * qd[1] + qd[1] ** 2), h * qd[0] ** 2])
    g = np.array([(M1 + M2) * G0 * L1 * c1 + M2 * G0 * L2 * c12, M2 * G0 * L2 * c12])
    np.testing.assert_allclose(out["M"], M, atol=1e-12)
    np.testing.assert_allclose([out["C_qd"]["joint1"], out["C_qd"]["joint2"]], cqd, atol=1e-12)
    np.testing.assert_allclose([out["g"]["joint1"], out["g"]["joint2"]], g, atol=1e-12)
    np.testing.assert_allclose([out["tau"]["joint1"], out["tau"]["joint2"]], M @ qdd + cqd + g, atol=1e-11)
    assert out["qd"] == {"joint1": 0.5, "joint2": -1.2}


def test_payload_and_held_change_the_answer(capsys):
    argv = ["dynamics", "--urdf", "ur5", "--q", "shoulder_lift_joint=-1.0,elbow_joint=1.2", "--json"]
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*argv, "--payload", "wrist_3_link,2.0,0,0,0.1", "--held", "wrist_3_joint=0.3"]) == 0
    loaded = json.loads(capsys.readouterr().out)
    assert "wrist_3_joint" not in loaded["joint_names"] and loaded["payload"]["mass"] == 2.0
    m = RobotModel.from_urdf(ROBOTS["ur5"].path, held_joints={"wrist_3_joint": 0.3})
    m = m.with_settings(payload=("wrist_3_link", 2.0, (0, 0, 0.1)))
    q = np.zeros(m.n)
    q[m.index["shoulder_lift_joint"]], q[m.index["elbow_joint"]] = -1.0, 1.2
    ref = PinocchioDynamics(m).gravity(q)
    np.testing.assert_allclose([loaded["g"][jn] for jn in m.joint_names], ref, atol=1e-12)
    assert abs(loaded["g"]["shoulder_lift_joint"] - plain["g"]["shoulder_lift_joint"]) > 1.0


def test_text_output(capsys):
    assert main(["dynamics", "--urdf", "planar_2r", "--q", "0,0"]) == 0
    out = capsys.readouterr().out
    assert "joint1" in out and "M (rows and columns" in out


@pytest.mark.parametrize("argv, message", [
    (["--q", "1,2,3"], "expected 2 values"),
    (["--q", "joint7=1"], "'joint7' is not an actuated joint"),
    (["--q", "0,abc"], "'abc' is not a number"),
    (["--q", "0,nan"], "not finite"),
    (["--q", "0,0", "--gravity", "0,0"], "--gravity"),
])
def test_bad_input_one_line(capsys, argv, message):
    assert main(["dynamics", "--urdf", "planar_2r", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_joint_named_twice_is_refused(capsys):
    """``--q elbow=1,elbow=2`` is ambiguous (the CSV reader and the service refuse duplicates too)."""
    assert main(["dynamics", "--urdf", "planar_2r", "--q", "joint1=1.0,joint1=2.0"]) != 0
    assert "joint 'joint1' appears twice" in capsys.readouterr().err
