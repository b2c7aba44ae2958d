"""Bad input to ``robot-dynamics identify``: one clear line naming what is wrong (file, joint, link, option),
and no output file written. Complements test_identification_sim.py (NaN in a CSV, a model joint missing
from the data, a bag without efforts)."""
import argparse

import numpy as np
import pytest

from robot_dynamics_tools.commands import identify as identify_cmd
from robot_dynamics_ros.errors import UserError

NAMES = [f"panda_joint{j}" for j in range(1, 8)]
POSE = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.7])


def _identify(argv):
    parser = argparse.ArgumentParser()
    identify_cmd.configure_parser(parser)
    return identify_cmd.run(parser.parse_args(argv))


def _csv(path, q, tau, dt=0.005):
    cols = ["t"] + [f"{j}/{s}" for j in NAMES for s in ("position", "effort")]
    t = dt * np.arange(len(q))
    with open(path, "w") as fh:
        fh.write(",".join(cols) + "\n")
        np.savetxt(fh, np.column_stack([t] + [np.column_stack([q[:, j], tau[:, j]]) for j in range(7)]),
                   delimiter=",", fmt="%.17g")
    return str(path)


def _refused(tmp_path, argv, match):
    with pytest.raises(UserError, match=match) as info:
        _identify(["--urdf", "panda", "--out", str(tmp_path / "o.urdf"), *argv])
    assert "\n" not in str(info.value)
    assert not any(p.name.startswith("o.") for p in tmp_path.iterdir())


@pytest.mark.parametrize("static", [False, True])
def test_constant_pose_is_refused(tmp_path, static):
    rng = np.random.default_rng(0)
    q = np.tile(POSE, (400, 1)) + rng.normal(0, 1e-5, (400, 7))  # encoder noise only
    tau = rng.normal(0, 0.01, (400, 7)) + [0, -3, 0, 2, 0, 1, 0]
    data = _csv(tmp_path / "const.csv", q, tau)
    _refused(tmp_path, ["--data", data] + (["--static"] if static else []),
             r"const\.csv: constant pose: no joint moves by more than 1 mrad")


def test_motion_too_slow_to_identify_dynamics_is_refused(tmp_path):
    t = 0.005 * np.arange(600)
    q = POSE + 0.01 * np.sin(t)[:, None] * np.ones(7)  # 10 mrad, |qd| <= 0.01 rad/s
    _refused(tmp_path, ["--data", _csv(tmp_path / "slow.csv", q, np.zeros_like(q))],
             r"no joint moves faster than 0\.05 rad/s .*use --static")


def test_bad_options_name_the_option_joint_or_link(tmp_path):
    t = 0.005 * np.arange(600)
    q = POSE + 0.3 * np.sin(2 * t)[:, None] * np.ones(7)
    data = _csv(tmp_path / "ok.csv", q, np.ones_like(q))
    _refused(tmp_path, ["--data", data, "--effort-scale", "elbow=-1"], "--effort-scale: joint 'elbow' is not in the model")
    _refused(tmp_path, ["--data", data, "--joint-map", "elbow=panda_joint1"],
             "--joint-map: 'elbow' is not a joint of .*ok.csv")
    _refused(tmp_path, ["--data", data, "--coulomb-velocity", "-1"], "--coulomb-velocity: '-1' must be 'auto' or")
    _refused(tmp_path, ["--data", data, "--effort-shift", "nan"], "--effort-shift: 'nan' must be 'auto' or")
    with pytest.raises(UserError, match="--payload panda_link99: .*panda_link99"):
        _identify(["--urdf", "panda", "--data", data, "--out", str(tmp_path / "p.json"), "--payload", "panda_link99"])
    assert not (tmp_path / "p.json").exists()


def test_bag_with_a_nan_effort_or_other_joint_names(tmp_path):
    from sensor_msgs.msg import JointState

    from robot_dynamics_tools.bags import write_bag

    def bag(path, names, bad_k=None):
        recs = []
        for k in range(1, 200):
            q = (POSE + 0.3 * np.sin(0.01 * k)).tolist()
            eff = [1.0] * 7
            if k == bad_k:
                eff[4] = float("nan")
            recs.append(("/joint_states", 5_000_000 * k, JointState(name=names, position=q, velocity=[0.0] * 7,
                                                                    effort=eff)))
        write_bag(path, recs)
        return str(path)

    _refused(tmp_path, ["--data", bag(tmp_path / "nan_bag", NAMES, bad_k=50)],
             r"effort of joint 'panda_joint5' is NaN or inf at sample 49")
    _refused(tmp_path, ["--data", bag(tmp_path / "names_bag", [f"j{i}" for i in range(7)])],
             r"model joint 'panda_joint1' not in the data \(data joints: j0, j1.*use --joint-map")


def test_a_window_that_smears_fast_motion_is_reported_and_slow_motion_is_not():
    """A bang-bang acceleration (±3 rad/s², switching every 0.15 s) sampled at 1 kHz: the default 0.1 s
    cubic window smears its steps. The reported ratio is checked against the closed-form acceleration
    (the narrow window's estimate of a noise-free signal is close to it); a 0.3 Hz sine is not reported."""
    import numpy as np

    from robot_dynamics_ros.identification import data as data_mod

    dt = 1e-3
    t = np.arange(0.0, 6.0, dt)
    a_true = np.where((t // 0.15) % 2 == 0, 3.0, -3.0)
    qd = np.cumsum(a_true) * dt
    qd = np.column_stack([qd, 0.2 * np.sin(2 * np.pi * 0.3 * t)])
    w = data_mod.default_window(dt)
    qdd = data_mod.differentiate(qd, dt, w, 1)
    found = data_mod.window_smearing(qd, dt, w, qdd)
    assert found is not None and found[0] == 0 and found[2] == (w // 3) | 1, found
    h = w // 2
    err = np.sqrt(np.mean((qdd[h:-h, 0] - a_true[h:-h]) ** 2)) / np.sqrt(np.mean(a_true[h:-h] ** 2))
    assert err > data_mod.SMEAR_RATIO and 0.5 * err < found[1] < 1.5 * err, (err, found)
    slow = data_mod.window_smearing(qd[:, 1:], dt, w, qdd[:, 1:])
    assert slow is None, slow
