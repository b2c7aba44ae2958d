"""``crossval`` and ``retime`` on a kinematics-only description (issue 24 item 1): zeros against zeros is
"not comparable" (exit 1), and the torque limits of a retiming cannot bind (a warning).

The description is example-robot-data's Panda with every ``<inertial>`` removed, written to a temporary file.
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from robot_dynamics_ros import robots
from robot_dynamics_ros.dynamics import crossval as cv
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_tools.cli import main

PANDA = robots.ROBOTS["panda"]
ARM = [f"panda_joint{i}" for i in range(1, 8)]


@pytest.fixture()
def massless_panda(tmp_path):
    root = ET.fromstring(PANDA.path.read_text())
    for link in root.findall("link"):
        for el in link.findall("inertial"):
            link.remove(el)
    path = tmp_path / "panda_kinematics_only.urdf"
    path.write_text(ET.tostring(root, encoding="unicode"))
    return path


def _held_args():
    return [a for jn, v in PANDA.held_joints.items() for a in ("--held", f"{jn}={v}")]


def test_crossval_reports_a_kinematics_only_model_as_not_comparable(massless_panda, capsys):
    model = RobotModel.from_urdf(massless_panda, held_joints=PANDA.held_joints)
    report = cv.crossvalidate(model, samples=5)
    assert not report.passed and report.comparisons == []
    assert report.not_comparable == model.torque_model_problem()
    assert "NOT COMPARABLE" in report.format_table() and json.loads(report.to_json())["passed"] is False
    assert main(["crossval", "--urdf", str(massless_panda), *_held_args(), "--samples", "3", "--json"]) == 1
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("robot-dynamics crossval: not comparable: ") and "'panda_link1'" in last
    # massless virtual links between the axes of multi-DoF joints (example-robot-data's human): compared
    human = robots.example_robot_data_dir() / "human_description/robots/human.urdf"
    model = RobotModel.from_urdf(human)
    assert "'left_upperleg_virtual'" in model.torque_model_problem()
    assert cv.crossvalidate(model, samples=2, mujoco=False).passed


def test_retime_warns_that_torque_limits_cannot_bind_on_a_massless_model(massless_panda, tmp_path, capsys):
    csv = tmp_path / "waypoints.csv"
    q0 = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.7])
    rows = [q0, q0 + 0.3]
    csv.write_text(",".join(ARM) + "\n" + "\n".join(",".join(f"{v:.6f}" for v in r) for r in rows) + "\n")
    out = tmp_path / "traj.csv"
    argv = ["retime", "--waypoints", str(csv), "--out", str(out), "--acceleration-limit", "2", *_held_args()]
    assert main([*argv, "--urdf", str(massless_panda)]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    warned = [w for w in summary["warnings"] if w.startswith("torque limits cannot bind")]
    assert len(warned) == 1 and "'panda_link1'" in warned[0]
    assert f"warning: {warned[0]}" in captured.err
    # the real Panda: no such warning
    assert main([*argv, "--urdf", str(PANDA.path)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert not any("cannot bind" in w for w in summary["warnings"])
