"""Defects a first user of ``identify`` / ``excite`` met: a recording with gaps, output paths that cannot be
written or would overwrite an input, a URDF file of a bundled robot whose held joints are not in the data,
and an excitation that must stay inside a tighter position range than the URDF's. Each refusal is one line
naming the path, option or joint, and nothing is written."""
import re
import shutil
import sys

import numpy as np
import pytest

from robot_dynamics_tools import cli
from robot_dynamics_ros.identification.data import read_csv
from robot_dynamics_ros.robots import ROBOTS

NAMES = [f"panda_joint{j}" for j in range(1, 8)]
POSE = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.7])
DT = 0.005


@pytest.fixture(autouse=True)
def _restore_argv(monkeypatch):
    """cli.main sets sys.argv (its lazy subcommand import reads it): put it back after the test."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))


def _csv(path, t):
    """A panda recording at times ``t``: a slow sine on every joint, constant efforts."""
    q = POSE + 0.3 * np.sin(2 * t)[:, None] * np.ones(7)
    cols = ["t"] + [f"{j}/{s}" for j in NAMES for s in ("position", "effort")]
    with open(path, "w") as fh:
        fh.write(",".join(cols) + "\n")
        np.savetxt(fh, np.column_stack([t] + [np.column_stack([q[:, j], np.ones(len(t))]) for j in range(7)]),
                   delimiter=",", fmt="%.17g")
    return str(path)


def _refused(argv, match, tmp_path, capsys):
    """``robot-dynamics ARGV`` fails with exit status 1 and ONE stderr line matching ``match``; no file is
    added under ``tmp_path``."""
    before = {p.name for p in tmp_path.rglob("*")}
    capsys.readouterr()
    assert cli.main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and re.search(match, err), err
    assert {p.name for p in tmp_path.rglob("*")} == before, "a file was written although the command failed"


def test_recording_with_gaps_is_refused_naming_time_length_and_median_step(tmp_path, capsys):
    # 3 × 10 s at 200 Hz separated by two 97 s gaps (a recorder paused twice)
    t = np.concatenate([DT * np.arange(2000), 107.0 + DT * np.arange(2000), 214.0 + DT * np.arange(2000)])
    data = _csv(tmp_path / "gappy.csv", t)
    first_gap_start = DT * 1999  # the last sample before the first gap
    length = 107.0 - first_gap_start
    _refused(["identify", "--urdf", "panda", "--data", data, "--out", str(tmp_path / "o.urdf")],
             rf"gappy\.csv: gap of {length:.6g} s in the recording at t = {first_gap_start:.6g} s, the first of "
             r"2 gaps \(median step 5 ms", tmp_path, capsys)


def test_output_paths_are_checked_before_any_work(tmp_path, capsys):
    data = _csv(tmp_path / "d.csv", DT * np.arange(1200))
    urdf = tmp_path / "panda_copy.urdf"
    shutil.copy(ROBOTS["panda"].path, urdf)
    base = ["identify", "--urdf", "panda", "--data", data]
    missing = tmp_path / "no_such_dir"
    _refused(base + ["--out", str(tmp_path / "o.urdf"), "--plot", str(missing / "p.png")],
             rf"--plot '{missing}/p\.png': directory '{missing}' does not exist", tmp_path, capsys)
    _refused(base + ["--out", str(missing / "o.urdf")],
             rf"--out '{missing}/o\.urdf': directory '{missing}' does not exist", tmp_path, capsys)
    _refused(base + ["--out", data], r"--out '.*d\.csv' is the --data input", tmp_path, capsys)
    _refused(["identify", "--urdf", str(urdf), "--data", data, "--out", str(urdf)],
             r"--out '.*panda_copy\.urdf' is the --urdf input", tmp_path, capsys)
    _refused(base + ["--out", str(tmp_path / "o.urdf"), "--report", str(tmp_path / "o.urdf")],
             r"--report '.*o\.urdf' is also the --out output", tmp_path, capsys)
    (tmp_path / "bag").mkdir()
    _refused(["excite", "--urdf", "ur5", "--out", str(tmp_path / "x.csv"), "--bag", str(tmp_path / "bag"),
                          "--evaluations", "5"], rf"--bag '{tmp_path}/bag': already exists.*choose another --bag",
             tmp_path, capsys)


def test_missing_joints_the_catalogue_holds_suggest_held(tmp_path, capsys):
    """A copy of the panda URDF (a file, so nothing is held) and data of the 7 arm joints: the fingers are
    what the catalogue's panda holds, at 0.02 m, and the message says how to hold them."""
    urdf = tmp_path / "panda_id.urdf"
    shutil.copy(ROBOTS["panda"].path, urdf)
    data = _csv(tmp_path / "excite.csv", DT * np.arange(1200))
    _refused(["identify", "--urdf", str(urdf), "--data", data, "--out", str(tmp_path / "payload.json"),
                            "--payload", "panda_link8"],
             r"excite\.csv: model joint 'panda_finger_joint1' not in the data; the catalogue robot 'panda' holds "
             r"it: add --held panda_finger_joint1=0\.02 \(or --joint-map", tmp_path, capsys)
    # the suggested option is enough (panda_finger_joint2 mimics joint 1, so it is not asked for)
    from robot_dynamics_ros.identification.data import prepare
    from robot_dynamics_tools.recordings import read_recording
    from robot_dynamics_ros.model import RobotModel

    model = RobotModel.from_urdf(urdf, held_joints={"panda_finger_joint1": 0.02})
    assert prepare(read_recording(data), model).q.shape[1] == 7


def test_excite_range_tightens_the_position_bounds_and_warns_about_the_workspace(tmp_path, capsys):
    lo, hi = -1.9, -1.3  # shoulder_lift kept above a mounting surface; URDF limits ±2π
    out = tmp_path / "x.csv"
    assert cli.main(["excite", "--urdf", "ur5", "--out", str(out), "--period", "4", "--harmonics", "2",
                             "--evaluations", "30", "--cycles", "1", "--rate", "250",
                             "--range", f"shoulder_lift_joint={lo}:{hi}", "--range", "elbow_joint=0.5:2.0"]) in (0, 1)
    rec = read_csv(out)
    q = rec.q[:, rec.joint_names.index("shoulder_lift_joint")]
    assert lo <= q.min() and q.max() <= hi, (q.min(), q.max())  # the CSV at 250 Hz: 2.5x the optimizer's grid
    assert np.ptp(q) > 0.05 * (hi - lo)  # and it does move inside the range
    qe = rec.q[:, rec.joint_names.index("elbow_joint")]
    assert 0.5 <= qe.min() and qe.max() <= 2.0
    text = capsys.readouterr().out
    warning = [ln for ln in text.splitlines() if ln.startswith("warning:")]
    assert len(warning) == 1 and "joint limits" in warning[0] and "not the workspace" in warning[0]
    _refused(["excite", "--urdf", "ur5", "--out", str(tmp_path / "y.csv"), "--range", "elbow=0:1"],
             r"--range: joint 'elbow' is not a moving joint", tmp_path, capsys)
    _refused(["excite", "--urdf", "ur5", "--out", str(tmp_path / "y.csv"), "--range", "elbow_joint=1:0"],
             r"--range elbow_joint=1:0: LO must be below HI", tmp_path, capsys)
