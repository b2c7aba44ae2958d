"""Cross-validation: Newton–Euler ≤ 1e-9 and MuJoCo ≤ 1e-6 against Pinocchio on the real arms (issue 3),
with held joints and with a payload; the command's output, exit status and one-line errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

from robot_dynamics_tools.cli import main
from robot_dynamics_ros.dynamics import crossval as cv
from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS

ARMS = ["panda", "ur5", "kinova", "z1", "so100", "baxter", "talos_left_arm", "xarm7"]


@pytest.mark.parametrize("robot", ARMS)
@pytest.mark.parametrize("variant", ["plain", "held+payload"])
def test_three_engines_agree(robot, variant):
    e = ROBOTS[robot]
    if variant == "plain":
        model = RobotModel.from_urdf(e.path, held_joints=e.held_joints)
    else:
        # hold the second actuated joint (plus the catalogue's), carry 2 kg with an offset centre of mass
        base = RobotModel.from_urdf(e.path)
        held = dict(e.held_joints)
        j = base.joint_names[1]
        held[j] = float(np.clip(0.4, base.lower[1], base.upper[1]))
        model = RobotModel.from_urdf(e.path, held_joints=held)
        tip = model.description.joints[model.joint_names[-1]].child
        model = model.with_settings(payload=(tip, 2.0, (0.03, -0.02, 0.08), np.diag([0.004, 0.005, 0.003])))
    report = cv.crossvalidate(model, samples=30, seed=11)
    assert report.mujoco == "compared", report.mujoco
    assert {(c.engine, c.quantity) for c in report.comparisons} == {
        (eng, q) for eng in ("newton-euler", "mujoco") for q in cv.QUANTITIES}
    assert report.passed, report.format_table()
    assert report.worst("newton-euler") <= 1e-9 and report.worst("mujoco") <= 1e-6


def test_mujoco_unavailable_model_is_reported_not_hidden():
    # point masses (zero inertia) are exact for the textbook, but MuJoCo refuses them
    report = cv.crossvalidate(RobotModel.from_urdf(ROBOTS["planar_2r"].path), samples=10)
    assert report.passed
    assert report.mujoco.startswith("not compared") and "mjMINVAL" in report.mujoco
    assert all(c.engine == "newton-euler" for c in report.comparisons)


def test_disagreement_fails(monkeypatch):
    model = RobotModel.from_urdf(ROBOTS["ur5"].path)
    original = NewtonEulerDynamics.gravity
    monkeypatch.setattr(NewtonEulerDynamics, "gravity", lambda self, q: original(self, q) + 1e-7)
    report = cv.crossvalidate(model, samples=5, mujoco=False)
    assert not report.passed
    bad = [c for c in report.comparisons if not c.passed]
    assert [c.quantity for c in bad] == ["g"] and bad[0].max_abs == pytest.approx(1e-7, rel=1e-3)
    with pytest.raises(ValueError, match="samples"):
        cv.crossvalidate(model, samples=0)


def test_command_json_and_exit_status(capsys):
    assert main(["crossval", "--urdf", "ur5", "--samples", "10", "--seed", "3", "--json",
                 "--payload", "wrist_3_link,1.5,0,0,0.05"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] is True and out["samples"] == 10 and out["seed"] == 3
    assert out["payload"]["link"] == "wrist_3_link" and out["payload"]["mass"] == 1.5
    assert {c["quantity"] for c in out["comparisons"]} == {"tau", "M", "C·qd", "g"}
    # an impossible tolerance: the table is printed and the exit status is non-zero
    assert main(["crossval", "--urdf", "ur5", "--samples", "3", "--tol", "1e-30", "--no-mujoco"]) == 1
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "disagree" in captured.err


@pytest.mark.parametrize("argv, message", [
    (["--urdf", "no_such_robot"], "no such file"),
    (["--urdf", "panda", "--held", "panda_joint9=0.1"], "held joint 'panda_joint9'"),
    (["--urdf", "panda", "--held", "panda_joint1"], "JOINT=VALUE"),
    (["--urdf", "panda", "--payload", "panda_hand,heavy"], "--payload"),
    (["--urdf", "panda", "--samples", "0"], "--samples"),
])
def test_command_bad_arguments_one_line(capsys, argv, message):
    assert main(["crossval", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_command_bad_urdf_file_names_the_link(tmp_path, capsys):
    bad = tmp_path / "bad.urdf"
    bad.write_text(ROBOTS["ur5"].path.read_text().replace('<mass value="3.7"/>', '<mass value="-3.7"/>', 1))
    assert main(["crossval", "--urdf", str(bad)]) == 1
    err = capsys.readouterr().err.strip()
    assert "'shoulder_link'" in err and "negative" in err and str(bad) in err and len(err.splitlines()) == 1


def test_strict_flag_turns_warnings_into_one_line_errors(capsys):
    from robot_dynamics_ros.robots import example_robot_data_dir

    allegro = str(example_robot_data_dir() / "allegro_hand_description/urdf/allegro_left_hand.urdf")
    assert main(["crossval", "--urdf", allegro, "--samples", "3", "--no-mujoco"]) == 0
    err = capsys.readouterr().err
    # lenient: each link whose principal moments violate the triangle inequality is a warning line
    assert err.count("warning: ") == 4 and "link 'link_11.0' <inertial>" in err
    assert main(["crossval", "--urdf", allegro, "--samples", "3", "--no-mujoco", "--strict"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "triangle inequality" in err and "[strict]" in err
    assert main(["dynamics", "--urdf", allegro, "--q", "joint_0.0=0.1", "--strict"]) == 1
    assert "[strict]" in capsys.readouterr().err
