"""Friction the data cannot identify is not written as identified friction: a static-pose log of the Panda
(no motion: Coulomb and viscous friction are not excited) leaves those parameters at the URDF's
``<dynamics damping>`` (a simulation value, 0.003 N·m·s/rad in example-robot-data's Panda), and identify
writes 0 for them (friction YAML and URDF ``<dynamics>``), listing the URDF values it did not carry over.
The URDF values are read from the URDF XML here, not from the package's model."""
import argparse
import json
import xml.etree.ElementTree as ET

import numpy as np
import yaml

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS
from robot_dynamics_tools.commands import identify as identify_cmd


def test_static_log_writes_no_urdf_damping_as_friction(tmp_path):
    entry = ROBOTS["panda"]
    model = RobotModel.from_urdf(entry.path, held_joints=entry.held_joints)
    rng = np.random.default_rng(7)
    q = rng.uniform(model.lower + 0.1, model.upper - 0.1, (200, 7))
    effort = NewtonEulerDynamics(model).gravity(q) + rng.normal(0, 0.05, q.shape)
    cols = ["t"] + [f"{j}/{s}" for j in model.joint_names for s in ("position", "effort")]
    with open(tmp_path / "static.csv", "w") as fh:
        fh.write(",".join(cols) + "\n")
        np.savetxt(fh, np.column_stack([np.arange(200)] + [np.column_stack([q[:, j], effort[:, j]])
                                                           for j in range(7)]), delimiter=",", fmt="%.17g")
    parser = argparse.ArgumentParser()
    identify_cmd.configure_parser(parser)
    assert identify_cmd.run(parser.parse_args(["--urdf", "panda", "--data", str(tmp_path / "static.csv"),
                                               "--out", str(tmp_path / "s.urdf"), "--static",
                                               "--plot", "none"])) == 0
    rep = json.loads((tmp_path / "s.json").read_text())
    given = {el.get("name"): el.find("dynamics") for el in ET.parse(entry.path).getroot().findall("joint")}
    written = {el.get("name"): el.find("dynamics") for el in ET.parse(tmp_path / "s.urdf").getroot().findall("joint")}
    fr = yaml.safe_load((tmp_path / "s.friction.yaml").read_text())["robot_dynamics_friction"]["joints"]
    zeroed = rep["friction_not_identified_written_zero"]
    for jn in model.joint_names:
        urdf_damping = float(given[jn].get("damping"))
        assert urdf_damping > 0  # the URDF's simulation damping that must not become identified friction
        assert not rep["parameters"][f"{jn}.fv"]["excited"]
        assert zeroed[f"{jn}.fv"] == urdf_damping
        assert fr[jn]["viscous"] == 0.0 and float(written[jn].get("damping")) == 0.0
    assert any("friction not identified, written 0" in n for n in rep["notes"])
