"""The command line as a new user meets it: default joint limits, output paths checked before any work,
one-line errors naming the file, exit codes, the jerk figures of the retime summary, quiet pipes.

Expected values come from the files themselves (config/*.yaml read here with PyYAML), from finite
differences of the written trajectory, and from how the inputs are built (the reversal waypoint).
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_dynamics_tools.cli import main
from robot_dynamics_ros.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
PANDA = [f"panda_joint{i}" for i in range(1, 8)]
#: a two-waypoint Panda motion inside the position limits (rad)
Q0 = [0.0, 0.0, 0.0, -1.5, 0.0, 1.5, 0.0]
Q1 = [0.5, 0.2, 0.0, -1.3, 0.0, 1.6, 0.2]


def _csv(path, rows, names=PANDA):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        w.writerows(rows)
    return str(path)


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _summary(out):
    return json.loads(out.strip().splitlines()[-1])


# ------------------------------------------------------------------ joint limits default (retime)
def test_retime_applies_the_bundled_joint_limits_by_default(tmp_path, capsys, monkeypatch):
    limits = yaml.safe_load((ROOT / "config" / "panda_joint_limits.yaml").read_text())["joint_limits"]
    acc = np.array([limits[j]["max_acceleration"] for j in PANDA])
    wp = _csv(tmp_path / "wp.csv", [Q0, Q1])
    out_csv = tmp_path / "t.csv"
    code, out, err = _run(capsys, "retime", "--urdf", "panda", "--waypoints", wp, "--out", str(out_csv),
                          "--dt", "0.002")
    assert code == 0, err
    assert "no acceleration limits" not in err
    data = np.loadtxt(out_csv, delimiter=",", skiprows=1)
    qdd = data[:, 3::4]
    # the YAML's accelerations bound the output and one of them is reached (time-optimal)
    ratio = (np.abs(qdd) / acc).max()
    assert 0.99 <= ratio <= 1 + 1e-6
    assert _summary(out)["peak_fraction"]["acceleration"] == pytest.approx(ratio, rel=1e-9)
    # '' applies none: only the torque limits bound the accelerations, above the YAML's here
    code, out, err = _run(capsys, "retime", "--urdf", "panda", "--waypoints", wp, "--out", str(out_csv),
                          "--dt", "0.002", "--joint-limits", "")
    assert code == 0 and "no acceleration limits" in err
    assert (np.abs(np.loadtxt(out_csv, delimiter=",", skiprows=1)[:, 3::4]) / acc).max() > 1.1
    # a bare name is the package's config/ file, from any working directory
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, "retime", "--urdf", "panda", "--waypoints", wp, "--out", str(out_csv),
                          "--dt", "0.002", "--joint-limits", "panda_joint_limits.yaml")
    assert code == 0, err
    assert _summary(out)["peak_fraction"]["acceleration"] == pytest.approx(ratio, rel=1e-9)


# ------------------------------------------------------------------ output paths before any work
def test_retime_out_in_a_missing_directory_is_refused_before_reading_anything(tmp_path, capsys):
    target = tmp_path / "missing" / "x.csv"
    # the waypoint file does not exist either: the --out error comes first, before any work
    code, out, err = _run(capsys, "retime", "--urdf", "panda", "--waypoints", str(tmp_path / "none.csv"),
                          "--out", str(target))
    assert code == 1 and out == ""
    assert err.strip() == (f"robot-dynamics retime: error: --out '{target}': directory "
                           f"'{target.parent}' does not exist")


def _no_work(*_a, **_k):
    raise AssertionError("the command started its work before checking the output path")


def test_casestudy_plot_in_a_missing_directory_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    from robot_dynamics_tools.commands import casestudy

    monkeypatch.setattr(casestudy, "case_model", _no_work)
    target = tmp_path / "missing" / "cs.png"
    code, _, err = _run(capsys, "casestudy", "--plot", str(target), "--no-sim")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert f"--plot '{target}'" in err and "does not exist" in err


@pytest.mark.parametrize("command", ["push", "track", "demo"])
def test_output_directory_under_a_file_is_refused_before_any_work(tmp_path, capsys, monkeypatch, command):
    from robot_dynamics_tools.commands import demo, push, track

    monkeypatch.setattr(push, "push", _no_work)
    monkeypatch.setattr(track, "track", _no_work)
    monkeypatch.setattr(demo, "run_demo", _no_work)
    plain = tmp_path / "file"
    plain.write_text("x")
    code, _, err = _run(capsys, command, "--out", str(plain / "sub"))
    assert code == 1
    assert err.strip() == (f"robot-dynamics {command}: error: --out '{plain / 'sub'}': '{plain}' is a file, "
                           "not a directory")


# ------------------------------------------------------------------ exit codes of retime
def test_retime_bad_input_and_options_exit_1_infeasible_exits_2(tmp_path, capsys):
    out_csv = str(tmp_path / "t.csv")
    wp = _csv(tmp_path / "wp.csv", [Q0, Q1])
    code, out, err = _run(capsys, "retime", "--urdf", "panda", "--waypoints", wp, "--out", out_csv,
                          "--velocity-scale", "1.5")
    assert code == 1 and out == "" and "--velocity-scale" in err and "[0.001, 1]" in err
    bad = _csv(tmp_path / "bad.csv", [Q0, Q1], names=PANDA[:-1] + ["wrist"])
    code, out, err = _run(capsys, "retime", "--urdf", "panda", "--waypoints", bad, "--out", out_csv)
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert "['wrist']" in err and f"'{bad}'" in err
    # a waypoint outside the position limits is the retimer's refusal: JSON line, status 2
    far = list(Q1)
    far[0] = 10.0
    code, out, _ = _run(capsys, "retime", "--urdf", "panda", "--waypoints",
                        _csv(tmp_path / "far.csv", [Q0, far]), "--out", out_csv)
    assert code == 2 and _summary(out)["success"] is False and not Path(out_csv).exists()


# ------------------------------------------------------------------ motor limits
def _panda_motor_limits(tmp_path):
    body = {"motor_limits": {j: {"rated_torque": 20.0, "peak_torque": 40.0, "peak_duration": 1.0} for j in PANDA}}
    path = tmp_path / "ml.yaml"
    path.write_text(yaml.safe_dump(body))
    return str(path)


def test_motor_limits_refusal_names_the_reversal_waypoints(tmp_path, capsys):
    back = [0.1, 0.05, 0.0, -1.45, 0.0, 1.52, 0.05]  # row 2 goes back along row 0 -> row 1: reversal at row 1
    wp = _csv(tmp_path / "wp.csv", [Q0, Q1, back])
    code, out, _ = _run(capsys, "retime", "--urdf", "panda", "--waypoints", wp, "--out", str(tmp_path / "t.csv"),
                        "--motor-limits", _panda_motor_limits(tmp_path))
    s = _summary(out)
    assert code == 1 and s["status"] == "invalid_request"
    assert "direction at waypoint(s) [1]" in s["message"]


def test_a_joint_limits_file_as_motor_limits_names_the_expected_key(capsys, tmp_path):
    wp = _csv(tmp_path / "wp.csv", [Q0, Q1])
    code, _, err = _run(capsys, "retime", "--urdf", "panda", "--waypoints", wp, "--out", str(tmp_path / "t.csv"),
                        "--motor-limits", str(ROOT / "config" / "ur5_joint_limits.yaml"))
    assert code == 1
    assert "expected a top-level 'motor_limits:' key, found 'joint_limits:'" in err
    assert "not an actuated joint" not in err


# ------------------------------------------------------------------ jerk figures in the summary
def test_retime_summary_reports_the_jerk_peak_and_limits(tmp_path, capsys):
    limits = yaml.safe_load((ROOT / "config" / "panda_joint_limits.yaml").read_text())
    for j in PANDA[:3]:  # max_jerk on three joints; --jerk-limit fills the others
        limits["joint_limits"][j].update(has_jerk_limits=True, max_jerk=400.0)
    jl_file = tmp_path / "jl.yaml"
    jl_file.write_text(yaml.safe_dump(limits))
    wp = _csv(tmp_path / "wp.csv", [Q0, Q1])
    out_csv = tmp_path / "t.csv"
    dt = 1e-3
    code, out, err = _run(capsys, "retime", "--urdf", "panda", "--waypoints", wp, "--out", str(out_csv),
                          "--joint-limits", str(jl_file), "--jerk-scale", "0.5", "--jerk-limit", "150",
                          "--dt", str(dt))
    assert code == 0, err
    s = _summary(out)
    expected = np.array([200.0] * 3 + [150.0] * 4)  # 0.5 × 400 where configured, 150 elsewhere
    assert s["jerk_limits"] == {j: float(v) for j, v in zip(PANDA, expected)}
    data = np.loadtxt(out_csv, delimiter=",", skiprows=1)
    t, qdd = data[:, 0], data[:, 3::4]
    # finite differences of the written accelerations: the mean jerk over each 1 ms step
    jerk_fd = np.diff(qdd, axis=0) / np.diff(t)[:, None]
    fd_peak = (np.abs(jerk_fd) / expected).max()
    assert fd_peak <= 1 + 1e-3  # the limits hold
    assert s["peak_fraction"]["jerk"] == pytest.approx(fd_peak, rel=0.02)
    assert s["peak_fraction"]["jerk"] <= 1 + 1e-6
    # without jerk limits the key is there, null
    code, out, _ = _run(capsys, "retime", "--urdf", "panda", "--waypoints", wp, "--out", str(out_csv))
    assert code == 0 and _summary(out)["peak_fraction"]["jerk"] is None and "jerk_limits" not in _summary(out)


# ------------------------------------------------------------------ URDF messages
def test_a_directory_as_urdf_is_named_a_directory(tmp_path, capsys):
    code, _, err = _run(capsys, "crossval", "--urdf", str(tmp_path))
    assert code == 1
    assert err.strip() == f"robot-dynamics crossval: error: URDF '{tmp_path}': is a directory, not a URDF file"


def test_strict_refusal_does_not_say_what_lenient_reading_would_do():
    from robot_dynamics_ros.errors import URDFError
    from robot_dynamics_ros.model import RobotModel

    text = ('<robot name="r"><link name="base"/><link name="l1"><inertial><mass value="1"/>'
            '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.05"/></inertial></link>'
            '<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="1 0 0"/>'
            '<limit effort="1" velocity="1" lower="-1" upper="1"/></joint></robot>')
    assert "used as given" in RobotModel.from_urdf(text).warnings[0]
    with pytest.raises(URDFError) as exc:
        RobotModel.from_urdf(text, strict=True)
    assert "triangle inequality" in str(exc.value) and str(exc.value).endswith("[strict]")
    assert "used as given" not in str(exc.value)


@pytest.mark.parametrize("content, word", [("", "empty text"), ("  \n", "only whitespace")])
def test_an_empty_urdf_is_called_empty(tmp_path, capsys, content, word):
    urdf = tmp_path / "empty.urdf"
    urdf.write_text(content)
    code, _, err = _run(capsys, "dynamics", "--urdf", str(urdf), "--q", "0")
    assert code == 1 and word in err and "starts with" not in err


# ------------------------------------------------------------------ small things
def test_push_options_have_help_and_the_delay_is_rounded(capsys, monkeypatch):
    from robot_dynamics_tools.commands import push

    with pytest.raises(SystemExit):
        main(["push", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--velocity-scale", "--torque-margin"):
        after = text.split(option, 2)[-1].split("--", 1)[0]
        assert "fraction" in after, option
    fake = {"force_N": 30.0, "link": "panda_link5", "push_onset_s": 60.0, "peak_velocity_fraction": 0.9,
            "detection_delay_ms": 4.999999999988347, "estimate_error_ratio": 0.01,
            "peak_external_torque_Nm": 3.0, "settle_time_constants": 5, "contact_free_s": 60,
            "false_collisions": 0, "contact_free_max_residual_Nm": 0.1, "plot": None, "pass": True}
    monkeypatch.setattr(push, "push", lambda *a, **k: fake)
    assert main(["push", "--out", ""]) == 0
    out = capsys.readouterr().out
    assert "detected after 5.0 ms" in out


def test_dynamics_help_says_unnamed_joints_are_zero(capsys):
    with pytest.raises(SystemExit):
        main(["dynamics", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "not named are 0" in text.rsplit("--q Q ", 1)[1].split("--qd", 1)[0]  # the option's own help


@pytest.mark.parametrize("argv", [["dynamics", "--urdf", "panda", "--q", "panda_joint1=0.1", "--json"],
                                  ["crossval", "--urdf", "planar_2r", "--samples", "2", "--no-mujoco", "--json"]])
def test_json_into_a_closed_pipe_exits_quietly(argv):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "robot_dynamics_tools.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=str(ROOT))
    proc.stdout.close()  # the reader is gone before the command prints (as `| head` after its lines)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and b"BrokenPipe" not in err


def test_check_output_path_kinds(tmp_path):
    from robot_dynamics_tools.commands._args import check_output_path

    (tmp_path / "d").mkdir()
    with pytest.raises(UserError, match=r"--out '.*d': is a directory, expected a file name"):
        check_output_path(tmp_path / "d", "--out")
    assert check_output_path(tmp_path / "new" / "deeper", "--out", directory=True) == tmp_path / "new" / "deeper"
    (tmp_path / "f").write_text("")
    with pytest.raises(UserError, match=r"exists and is not a directory"):
        check_output_path(tmp_path / "f", "--out", directory=True)


def test_track_cli_applies_the_bundled_joint_limits_by_default(tmp_path, capsys, monkeypatch):
    from robot_dynamics_tools.commands import track

    seen = []

    def fake_track(urdf, **kw):
        seen.append(kw["joint_limits"])
        raise UserError("stop here")

    monkeypatch.setattr(track, "track", fake_track)
    for extra in ([], ["--joint-limits", ""], ["--joint-limits", "ur5_joint_limits.yaml"]):
        assert main(["track", "--out", str(tmp_path), *extra]) == 1
    capsys.readouterr()
    # the package's config files (an installed share directory may hold the copy found first)
    assert seen[1] is None
    for found, name in ((seen[0], "panda_joint_limits.yaml"), (seen[2], "ur5_joint_limits.yaml")):
        assert Path(found).name == name and Path(found).read_text() == (ROOT / "config" / name).read_text()
