"""Identification never returns a model worse than its start, the rigid-body URDF, on its held-out block.

Synthetic recordings of the Panda in which the data cannot beat the URDF: the torque IS the URDF's
rigid-body torque (Pinocchio's RNEA of the URDF, independent of the package's dynamics) plus white noise,
on a motion that barely excites anything (small slow oscillations). Whatever the fit makes of the noise,
``identify`` must write a model whose held-out RMS is not above the URDF's on any joint, set the
parameter groups that made a joint worse back to the URDF's values (written files), and say so.
"""
import argparse
import json
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest
import yaml

from robot_dynamics_ros.identification.regressor import inertial_to_parameters
from robot_dynamics_ros.robots import ROBOTS
from robot_dynamics_tools.commands import identify as identify_cmd

ENTRY = ROBOTS["panda"]
DT, DURATION = 0.01, 30.0


def _reduced(urdf_text: str):
    full = pin.buildModelFromXML(urdf_text)
    q_lock = pin.neutral(full)
    for j, v in ENTRY.held_joints.items():
        q_lock[full.joints[full.getJointId(j)].idx_q] = v
    red = pin.buildReducedModel(full, [full.getJointId(j) for j in ENTRY.held_joints], q_lock)
    return red, red.createData()


def _motion(amplitude: float, seed: int):
    red, _ = _reduced(ENTRY.path.read_text())
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, DURATION, DT)
    q0 = 0.5 * (red.lowerPositionLimit + red.upperPositionLimit)
    w = 2 * np.pi * rng.uniform(0.15, 0.3, red.nq)
    ph = rng.uniform(0, 2 * np.pi, red.nq)
    s = w * t[:, None] + ph
    return t, q0 + amplitude * np.sin(s), amplitude * w * np.cos(s), -amplitude * w ** 2 * np.sin(s)


def _identify(tmp_path, amplitude: float, noise: float, seed: int):
    """Write the recording (positions and efforts; velocities left to the package's filter), run
    ``identify`` with its defaults; (report, identified URDF text, friction YAML joints, the exact
    state and noise-free torque of the held-out samples)."""
    t, q, qd, qdd = _motion(amplitude, seed)
    red, rd = _reduced(ENTRY.path.read_text())
    names = list(red.names[1:])
    tau = np.array([pin.rnea(red, rd, q[k], qd[k], qdd[k]) for k in range(t.size)])
    effort = tau + np.random.default_rng(seed + 1).normal(0.0, noise, tau.shape)
    cols = ["t"] + [f"{j}/{s}" for j in names for s in ("position", "effort")]
    with open(tmp_path / "rec.csv", "w") as fh:
        fh.write(",".join(cols) + "\n")
        np.savetxt(fh, np.column_stack([t] + [np.column_stack([q[:, j], effort[:, j]]) for j in range(len(names))]),
                   delimiter=",", fmt="%.17g")
    parser = argparse.ArgumentParser()
    identify_cmd.configure_parser(parser)
    out = tmp_path / "id.urdf"
    assert identify_cmd.run(parser.parse_args(["--urdf", "panda", "--data", str(tmp_path / "rec.csv"),
                                               "--out", str(out), "--plot", "none"])) == 0
    rep = json.loads((tmp_path / "id.json").read_text())
    fr = yaml.safe_load((tmp_path / "id.friction.yaml").read_text())["robot_dynamics_friction"]
    return rep, out.read_text(), fr, names


@pytest.mark.parametrize("seed", [3, 4])
def test_data_that_cannot_beat_the_urdf_keeps_its_values(tmp_path, seed):
    rep, urdf_text, fr, names = _identify(tmp_path, amplitude=0.08, noise=2.0, seed=seed)
    print({j: (round(v["urdf_rms"], 4), round(v["identified_rms"], 4)) for j, v in rep["validation"].items()})
    print("kept:", list(rep["kept_urdf"]), [n for n in rep["notes"] if "kept" in n or "does not beat" in n])
    # never worse than the start on the held-out block, per joint
    for jn, v in rep["validation"].items():
        assert v["identified_rms"] <= v["urdf_rms"] * (1 + 1e-9), (jn, v)
    kept = rep["kept_urdf"]
    assert kept, "the fit of pure noise was nowhere worse than the URDF on the held-out block"
    # every kept group is written with the input URDF's values: inertials from the URDF XML (via
    # Pinocchio's parser of both files), friction 0 (the rigid-body start)
    given, _ = _reduced(ENTRY.path.read_text())
    written, _ = _reduced(urdf_text)
    joint_of_link = {el.find("child").get("link"): el.get("name")
                     for el in ET.fromstring(ENTRY.path.read_text()).findall("joint")}
    for group, entry in kept.items():
        assert entry["worse_joints"] or group != next(iter(kept))
        for j, w in entry["worse_joints"].items():
            assert w["identified_rms"] > w["urdf_rms"], (group, j, w)
        link, kind = group.rsplit(" ", 1)
        if kind == "inertial":
            jid = given.getJointId(joint_of_link[link])
            for model in (given, written):
                assert model.getJointId(joint_of_link[link]) == jid
            pi_given = inertial_to_parameters(given.inertias[jid].mass, given.inertias[jid].lever,
                                              given.inertias[jid].inertia)
            pi_written = inertial_to_parameters(written.inertias[jid].mass, written.inertias[jid].lever,
                                                written.inertias[jid].inertia)
            np.testing.assert_allclose(pi_written, pi_given, rtol=1e-9, atol=1e-12)
        else:
            assert kind == "friction"
            assert fr["joints"][link] == {"coulomb": 0.0, "viscous": 0.0, "offset": 0.0,
                                          "armature": fr["joints"][link]["armature"]}
    if len(kept) == 2 * len(names):  # everything kept: the URDF itself, equal on every joint
        for v in rep["validation"].values():
            assert v["identified_rms"] == pytest.approx(v["urdf_rms"], rel=1e-9)
        assert any("the data does not beat the URDF" in n for n in rep["notes"])
    else:
        assert any(n.startswith("kept at the rigid-body URDF's values") for n in rep["notes"])


def test_nothing_beats_the_urdf_the_urdf_is_returned():
    """A check block whose torque is exactly the URDF's rigid-body torque (Pinocchio's RNEA), and an
    identified model changed in every group (each body's 10 parameters ×1.3, a consistent body; every
    joint's offset 1 N·m): every group goes back, the model is the rigid-body URDF (its inertials,
    friction 0) and its RMS there is the URDF's (0), and the report says the data does not beat it."""
    from robot_dynamics_ros.identification.estimate import identify
    from robot_dynamics_ros.identification.guard import keep_urdf_where_not_better
    from robot_dynamics_ros.identification.pipeline import describe_kept
    from robot_dynamics_ros.model import RobotModel

    model = RobotModel.from_urdf(ENTRY.path, held_joints=ENTRY.held_joints)
    t, q, qd, qdd = _motion(0.3, seed=9)
    red, rd = _reduced(ENTRY.path.read_text())
    tau = np.array([pin.rnea(red, rd, q[k], qd[k], qdd[k]) for k in range(t.size)])
    fit, check = slice(0, 2000), slice(2100, 3000)
    res = identify(model, q[fit], qd[fit], qdd[fit], tau[fit] + np.random.default_rng(0).normal(0, 0.5, tau[fit].shape),
                   coulomb_velocity=0.0)
    nin = res.n_inertial
    res.x[:nin] = 1.3 * res.x_prior[:nin]
    res.x[nin + 2:nin + 3 * model.n:3] = 1.0
    kept = keep_urdf_where_not_better(res, q[check], qd[check], qdd[check], tau[check])
    assert len(kept) == res.regressor.nb + model.n
    np.testing.assert_array_equal(res.x[:nin], res.x_prior[:nin])
    assert not np.any(res.x[nin:])
    e = res.predict(q[check], qd[check], qdd[check]) - tau[check]
    assert np.sqrt(np.mean(e ** 2, axis=0)).max() < 1e-9 * np.abs(tau[check]).max()
    report = {"notes": []}
    describe_kept(report, kept, res)
    assert len(report["kept_urdf"]) == len(kept)
    assert any("the data does not beat the URDF" in n for n in report["notes"])
