"""End to end in MuJoCo: a Panda whose link masses and centres of mass differ from its URDF (±20 %, 1-2 cm),
with Coulomb + viscous friction applied as torques, a torque-sensor offset and noise, tracks an excitation
trajectory under computed torque with the URDF; ``identify`` runs on the recording (CSV, and a bag with
other joint names and the opposite effort sign). The independent source is the plant: its parameters
and its torques on a second, different trajectory, predicted through the identified URDF file loaded by
the model loader and the in-package Newton–Euler engine (not the regressor that fitted it)."""
import argparse
import json

import numpy as np
import pytest
import yaml

from robot_dynamics_tools.commands import identify as identify_cmd
from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.friction import read_friction_yaml
from robot_dynamics_ros.identification import simulate
from robot_dynamics_ros.identification.excitation import FourierTrajectory
from robot_dynamics_ros.identification.regressor import Regressor
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS

HELD = ROBOTS["panda"].held_joints
NOISE = (1e-5, 1e-3, 0.02)  # q rad, qd rad/s, tau N·m
FRICTION = np.column_stack([np.linspace(0.8, 0.3, 7), np.linspace(0.6, 0.2, 7), np.linspace(0.2, -0.1, 7)])
DURATION = 16.0


@pytest.fixture(scope="module")
def setup():
    prior = RobotModel.from_urdf(ROBOTS["panda"].path, held_joints=HELD)
    text = simulate.perturbed_urdf(
        prior, mass_scale={"panda_link2": 1.2, "panda_link4": 1.2, "panda_link6": 0.8, "panda_link7": 1.2},
        com_shift={"panda_link3": (0.02, 0.0, -0.01), "panda_link5": (0.0, 0.015, 0.01)})
    plant = RobotModel.from_urdf(text, held_joints=HELD)
    return prior, plant


def _trajectory(prior, seed):
    rng = np.random.default_rng(seed)
    tr = FourierTrajectory.random(7, 6, DURATION, rng, q0=0.5 * (prior.lower + prior.upper), amplitude=3.0)
    return tr.scaled_into(prior.lower, prior.upper, 0.8 * prior.velocity_limit, np.full(7, 10.0),
                          np.linspace(0, DURATION, 4000))


def _write_csv(path, rec):
    cols = ["t"] + [f"{j}/{s}" for j in rec.joint_names for s in ("position", "velocity", "effort")]
    data = np.column_stack([rec.t] + [np.column_stack([rec.q[:, j], rec.qd[:, j], rec.tau[:, j]])
                                      for j in range(len(rec.joint_names))])
    with open(path, "w") as fh:
        fh.write(",".join(cols) + "\n")
        np.savetxt(fh, data, delimiter=",", fmt="%.17g")


def _identify(argv):
    parser = argparse.ArgumentParser()
    identify_cmd.configure_parser(parser)
    return identify_cmd.run(parser.parse_args(argv))


@pytest.fixture(scope="module")
def identified(setup, tmp_path_factory):
    prior, plant = setup
    tmp = tmp_path_factory.mktemp("ident")
    rec = simulate.record(plant, prior, _trajectory(prior, 1).sample, DURATION, friction=FRICTION, noise=NOISE)
    _write_csv(tmp / "rec.csv", rec)
    assert _identify(["--urdf", "panda", "--data", str(tmp / "rec.csv"), "--out", str(tmp / "id.urdf")]) == 0
    return tmp, rec, json.loads((tmp / "id.json").read_text())


def test_held_out_block_identified_at_noise_floor_urdf_far_worse(identified):
    tmp, _, report = identified
    assert (tmp / "id.png").stat().st_size > 10_000
    s = NOISE[2]
    for jn, v in report["validation"].items():
        # samples where the joint moves (|qd| >= 0.05 rad/s): the friction law sign(qd) holds
        assert v["identified_rms_moving"] <= 2 * s + 2e-3 * v["peak"], (jn, v)
        assert v["urdf_rms_moving"] >= 10 * v["identified_rms_moving"], (jn, v)
        # all samples, velocity reversals included (the joint sticks there: the identified Coulomb law
        # fc·tanh(qd / v_s) follows it, fc·sign(qd) would not)
        assert v["identified_rms"] <= 2 * s + 2e-3 * v["peak"], (jn, v)
        assert v["urdf_rms"] >= 10 * v["identified_rms"], (jn, v)
        if v["peak"] > 5.0:
            assert v["identified_rms_over_peak"] <= 0.02, (jn, v)


def test_excited_parameters_match_the_plant(setup, identified):
    prior, plant = setup
    _, _, report = identified
    truth = dict(zip(Regressor(plant).parameter_names, Regressor(plant).parameters()))
    for j, jn in enumerate(prior.joint_names):
        truth[f"{jn}.fc"], truth[f"{jn}.fv"], truth[f"{jn}.fo"] = FRICTION[j]
    excited = {k: v for k, v in report["parameters"].items() if v["excited"]}
    assert len(excited) >= 50
    for name, v in excited.items():
        assert abs(v["identified"] - truth[name]) <= 5 * v["posterior_std"] + 0.02 * abs(truth[name]), (name, v)
    for j, jn in enumerate(prior.joint_names):  # friction: within 8 % (Coulomb) and 10 % (viscous)
        assert report["parameters"][f"{jn}.fc"]["identified"] == pytest.approx(FRICTION[j, 0], rel=0.08)
        assert report["parameters"][f"{jn}.fv"]["identified"] == pytest.approx(FRICTION[j, 1], rel=0.10)


def test_identified_urdf_and_friction_yaml_predict_another_trajectory(setup, identified):
    prior, plant = setup
    tmp, _, _ = identified
    model = RobotModel.from_urdf(tmp / "id.urdf", held_joints=HELD)
    assert model.joint_names == prior.joint_names
    # the file carries exactly the identified bodies (welded links and held fingers included)
    report = json.loads((tmp / "id.json").read_text())
    reg = Regressor(model)
    written = reg.parameters()
    ident = np.array([report["parameters"][nm]["identified"] for nm in reg.parameter_names])
    assert np.allclose(written, ident, rtol=1e-9, atol=1e-12)
    fr = yaml.safe_load((tmp / "id.friction.yaml").read_text())["robot_dynamics_friction"]["joints"]
    assert np.allclose(model.friction, [fr[j]["coulomb"] for j in model.joint_names])
    assert np.allclose(model.damping, [fr[j]["viscous"] for j in model.joint_names])
    offset = np.array([fr[j]["offset"] for j in model.joint_names])
    table = read_friction_yaml(tmp / "id.friction.yaml", model.joint_names)
    assert np.array_equal(table[:, 2], offset) and np.array_equal(table[:, 0], [fr[j]["coulomb"]
                                                                               for j in model.joint_names])
    rec = simulate.record(plant, prior, _trajectory(prior, 7).sample, 8.0, friction=FRICTION, noise=(0, 0, 0))
    from robot_dynamics_ros.identification.data import prepare
    p = prepare(rec, prior)
    moving = np.abs(p.qd) >= 0.05

    def rms(m, off):
        e = (NewtonEulerDynamics(m).rnea(p.q, p.qd, p.qdd) + m.friction * np.sign(p.qd) + m.damping * p.qd + off
             - p.tau_raw)
        return np.array([np.sqrt(np.mean(e[moving[:, j], j] ** 2)) for j in range(7)])

    e_id, e_urdf = rms(model, offset), rms(prior, 0.0)
    peak = np.abs(p.tau_raw).max(axis=0)
    assert np.all(e_id <= 0.03 + 3e-3 * peak), e_id
    assert np.all(e_urdf >= 8 * e_id), (e_urdf, e_id)


def test_bag_with_other_names_and_opposite_sign_gives_the_same_model(identified, tmp_path):
    from builtin_interfaces.msg import Time
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Header

    from robot_dynamics_tools.bags import write_bag

    tmp, rec, report = identified
    names = [f"arm/{j}" for j in rec.joint_names] + ["gripper"]

    def records():
        for k in range(rec.t.size):
            ns = 1_000_000_000 + int(round(rec.t[k] * 1e9))
            yield "/joint_states", ns, JointState(
                header=Header(stamp=Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)), name=names,
                position=[*rec.q[k], 0.0], velocity=[*rec.qd[k], 0.0], effort=[*(-rec.tau[k]), 0.0])

    write_bag(tmp_path / "bag", records(), storage="mcap")
    jmap = ",".join(f"arm/{j}={j}" for j in rec.joint_names)
    assert _identify(["--urdf", "panda", "--data", str(tmp_path / "bag"), "--out", str(tmp_path / "b.urdf"),
                      "--joint-map", jmap, "--effort-scale", "-1", "--plot", "none"]) == 0
    rb = json.loads((tmp_path / "b.json").read_text())
    assert any("gripper" in n for n in rb["notes"])
    for name, v in report["parameters"].items():
        assert rb["parameters"][name]["identified"] == pytest.approx(v["identified"], rel=1e-6, abs=1e-9)


def test_payload_recovered_with_arm_model_fixed(setup, tmp_path):
    _, plant = setup
    com = np.array([0.03, -0.02, 0.08])
    Ic = np.diag([0.02, 0.03, 0.01])
    rec = simulate.record(plant, plant, _trajectory(plant, 3).sample, 12.0, friction=FRICTION, noise=NOISE,
                          payload=("panda_link8", 5.0, com, Ic))
    _write_csv(tmp_path / "p.csv", rec)
    (tmp_path / "plant.urdf").write_text(plant.urdf_xml)
    assert _identify(["--urdf", str(tmp_path / "plant.urdf"), "--data", str(tmp_path / "p.csv"),
                      "--out", str(tmp_path / "payload.json"), "--payload", "panda_link8",
                      "--held", "panda_finger_joint1=0.02", "--held", "panda_finger_joint2=0.02"]) == 0
    p = json.loads((tmp_path / "payload.json").read_text())
    assert p["link"] == "panda_link8"
    assert p["mass"] == pytest.approx(5.0, rel=0.02)
    assert np.linalg.norm(np.array(p["com"]) - com) <= 0.005


def test_bad_input_is_one_clear_error_and_writes_nothing(setup, tmp_path):
    prior, _ = setup
    t = np.arange(200) * 0.005
    rec = simulate.Recording(t, prior.joint_names, np.zeros((200, 7)), np.zeros((200, 7)), None,
                             np.ones((200, 7)), "x")
    _write_csv(tmp_path / "nan.csv", rec)
    text = (tmp_path / "nan.csv").read_text().splitlines()
    row = text[50].split(",")
    row[1 + 3 * 3] = "nan"  # panda_joint4/position
    text[50] = ",".join(row)
    (tmp_path / "nan.csv").write_text("\n".join(text) + "\n")
    with pytest.raises(UserError, match="position of joint 'panda_joint4' is NaN"):
        _identify(["--urdf", "panda", "--data", str(tmp_path / "nan.csv"), "--out", str(tmp_path / "o.urdf")])
    with pytest.raises(UserError, match="model joint 'panda_joint1' not in the data"):
        _identify(["--urdf", "panda", "--data", str(tmp_path / "nan.csv"), "--out", str(tmp_path / "o.urdf"),
                   "--joint-map", "panda_joint1=elsewhere"])
    assert not any(p.name.startswith("o.") for p in tmp_path.iterdir())


def test_bag_without_efforts_is_refused(tmp_path):
    from sensor_msgs.msg import JointState

    from robot_dynamics_tools.bags import write_bag

    names = [f"panda_joint{j}" for j in range(1, 8)]
    write_bag(tmp_path / "bag", [("/joint_states", 1_000_000 * k, JointState(name=names, position=[0.0] * 7,
                                                                             velocity=[0.0] * 7))
                                 for k in range(1, 50)])
    with pytest.raises(UserError, match="/joint_states: messages carry no efforts"):
        _identify(["--urdf", "panda", "--data", str(tmp_path / "bag"), "--out", str(tmp_path / "o.urdf")])
    assert not (tmp_path / "o.urdf").exists()



def test_friction_yaml_reader_names_the_bad_entry(tmp_path):
    p = tmp_path / "f.yaml"
    p.write_text("robot_dynamics_friction:\n  version: 1\n  joints:\n    panda_joint2: {coulomb: -1, viscous: 0, "
                 "offset: 0}\n")
    with pytest.raises(UserError, match="joint 'panda_joint2': coulomb = -1.0 must be finite and ≥ 0"):
        read_friction_yaml(p, [f"panda_joint{j}" for j in range(1, 8)])
    p.write_text("robot_dynamics_friction:\n  version: 1\n  joints:\n    elbow: {coulomb: 1, viscous: 0, "
                 "offset: 0}\n")
    with pytest.raises(UserError, match="joint 'elbow' is not in the model"):
        read_friction_yaml(p, ["panda_joint1"])
