"""A static-pose log (q and measured torque at rest, efforts with the opposite sign as some drivers report):
``identify --static --effort-scale -1`` identifies the gravity parameters, never does worse than the URDF
on the held-out poses, and reports second moments and Coulomb/viscous friction as not identified. The
torques come from the in-package RNEA on a perturbed URDF (the plant), not from the regressor."""
import argparse
import json

import numpy as np

from robot_dynamics_tools.commands import identify as identify_cmd
from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.identification.simulate import perturbed_urdf
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS

NOISE = 0.05  # N·m


def test_static_pose_log(tmp_path):
    held = ROBOTS["panda"].held_joints
    prior = RobotModel.from_urdf(ROBOTS["panda"].path, held_joints=held)
    plant = RobotModel.from_urdf(perturbed_urdf(prior, mass_scale={"panda_link3": 1.2, "panda_link4": 1.2,
                                                                   "panda_link6": 1.2},
                                                com_shift={"panda_link5": (0.0, 0.01, 0.02)}), held_joints=held)
    rng = np.random.default_rng(5)
    N = 200
    q = rng.uniform(prior.lower + 0.1, prior.upper - 0.1, (N, 7))
    effort = -NewtonEulerDynamics(plant).gravity(q) + rng.normal(0, NOISE, q.shape)
    cols = ["t"] + [f"{j}/{s}" for j in prior.joint_names for s in ("position", "effort")]
    with open(tmp_path / "static.csv", "w") as fh:
        fh.write(",".join(cols) + "\n")
        np.savetxt(fh, np.column_stack([np.arange(N)] + [np.column_stack([q[:, j], effort[:, j]]) for j in range(7)]),
                   delimiter=",", fmt="%.17g")
    parser = argparse.ArgumentParser()
    identify_cmd.configure_parser(parser)
    assert identify_cmd.run(parser.parse_args(["--urdf", "panda", "--data", str(tmp_path / "static.csv"),
                                               "--out", str(tmp_path / "s.urdf"), "--static",
                                               "--effort-scale", "-1", "--plot", "none"])) == 0
    rep = json.loads((tmp_path / "s.json").read_text())
    M = int(round(rep["validation_block_s"][1] - rep["validation_block_s"][0])) + 1  # held-out poses (t = index)
    # the RMS of M noise samples scatters by σ/sqrt(2M): 3 of those above σ is still the noise floor
    floor = NOISE * (1 + 3 / np.sqrt(2 * M))
    for jn, v in rep["validation"].items():
        assert v["identified_rms"] <= max(v["urdf_rms"], floor), (jn, v)  # never worse than the URDF
        if v["urdf_rms"] > 10 * NOISE:  # joints that gravity loads: the identified model is at the noise floor
            assert v["identified_rms"] <= floor, (jn, v)
    assert sum(v["urdf_rms"] > 10 * NOISE for v in rep["validation"].values()) >= 3
    names = rep["not_identified"]
    assert all(f"{b}.{p}" in names for b in ("panda_link3", "panda_link6") for p in ("Ixx", "Iyy", "Izz", "Ixy"))
    assert all(f"{j}.{p}" in names for j in prior.joint_names for p in ("fc", "fv"))
    assert rep["identified_counts"]["first moment"]["identified"] >= 5
    assert rep["identified_counts"]["inertia"]["identified"] == 0
    assert any("static poses" in n for n in rep["notes"])
