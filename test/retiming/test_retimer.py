"""Retimer facade and ``robot-dynamics retime``: edge cases, requests by joint name, CLI files and exit codes.

Values are checked against Pinocchio (a model built here from the URDF file) and closed forms.
"""
from __future__ import annotations

import csv
import json
import math
import re
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros.retiming.request import RetimeOptions, RetimeStatus
from robot_dynamics_ros.retiming.retimer import Retimer
from robot_dynamics_testing.retiming_cases import ACC, MARGIN, dense_peaks, load_model, pinocchio_reference, smooth_waypoints
from robot_dynamics_testing.urdf_text import Body, serial_urdf


@pytest.fixture(scope="module")
def panda():
    model = load_model("panda")
    retimer = Retimer(model)
    retimer.warmup()
    return model, retimer, pinocchio_reference("panda")


def _limits(model, pm, options=RetimeOptions()):
    # a scale not given is 1: these models' limits come without default_*_scaling_factor
    return (pm.velocityLimit * (options.velocity_scale or 1.0),
            np.full(model.n, ACC) * (options.acceleration_scale or 1.0),
            pm.effortLimit * options.torque_margin)


def test_single_waypoint_and_all_duplicates_give_zero_duration(panda):
    model, retimer, pm = panda
    q0 = smooth_waypoints(model, 3)[1]
    for wp in (q0[None, :], np.repeat(q0[None, :], 4, axis=0)):
        res = retimer.retime(wp)
        assert res.success and res.status == RetimeStatus.SUCCESS, res.message
        assert res.duration == 0.0 and res.t.tolist() == [0.0]
        np.testing.assert_array_equal(res.q, q0[None, :])
        np.testing.assert_array_equal(res.qd, 0.0)
        g = pin.computeGeneralizedGravity(pm, pm.createData(), q0)
        np.testing.assert_allclose(res.tau[0], g, atol=1e-9)
    assert "merged 3 waypoint(s) within path_tolerance/2 = 0.0005 of the previous kept one at index 1, 2, 3" \
        in res.message


def test_duplicates_are_dropped_with_a_note_and_do_not_change_the_result(panda):
    model, retimer, _ = panda
    wp = smooth_waypoints(model, 8)
    dup = np.insert(wp, [3, 3, 6], wp[[2, 2, 5]], axis=0)  # rows 3, 4 repeat row 2; row 8 repeats row 7
    opts = RetimeOptions(torque_margin=MARGIN, gridpoints=150)
    a, b = retimer.retime(wp, options=opts), retimer.retime(dup, options=opts)
    assert a.success and b.success
    assert "merged 3 waypoint(s) within path_tolerance/2 = 0.0005 of the previous kept one at index 3, 4, 8" \
        in b.message
    assert b.duration == a.duration
    np.testing.assert_array_equal(b.q, a.q)


def test_waypoints_merged_far_from_the_path_are_a_warning(panda):
    """A path_tolerance in the wrong unit (10 instead of 0.01) merged a first-time user's 10 Panda waypoints into
    a straight move, and the answer said so only in its message: now a warning names the count and the farthest
    merged waypoint with its distance (infinity norm, from the waypoint data) from the one it was merged into.
    Near-duplicates (within 10 × the default tolerance) stay a note only."""
    model, retimer, _ = panda
    wp = smooth_waypoints(model, 10)
    res = retimer.retime(wp, options=RetimeOptions(path_tolerance=10.0))
    assert res.success, res.message
    dist = np.abs(wp[1:-1] - wp[0]).max(axis=1)   # all but the last merged into waypoint 0
    k = int(np.argmax(dist)) + 1
    warning = [w for w in res.warnings if "merged" in w]
    assert len(warning) == 1, res.warnings
    assert "merged 8 waypoint(s) farther than 0.01" in warning[0] and f"waypoint {k}: {dist.max():.4g} rad/m from " \
        "waypoint 0" in warning[0], warning
    dup = np.insert(wp, 3, wp[2] + 1e-4, axis=0)
    res = retimer.retime(dup)
    assert res.success and not [w for w in res.warnings if "merged" in w], res.warnings
    assert "merged 1 waypoint(s)" in res.message


def test_direction_reversal_stops_at_the_turn(panda):
    model, retimer, pm = panda
    q0 = model.neutral().copy()
    q0[3] = -1.5
    wp = np.repeat(q0[None, :], 5, axis=0)
    wp[:, 0] = [0.0, 0.3, 0.6, 0.3, 0.1]   # joint 1 goes out and comes back
    wp[:, 1] = [0.0, 0.1, 0.2, 0.1, 0.05]
    opts = RetimeOptions(torque_margin=MARGIN, gridpoints=200, sample_period=0.002)
    res = retimer.retime(wp, options=RetimeOptions(torque_margin=MARGIN, gridpoints=200))  # at gridpoints
    assert res.success, res.message
    assert "stops at direction reversals at waypoint(s) [2]" in res.message
    assert len(res.segments) == 2
    k = int(np.argmin(np.abs(res.t - res.segments[1].t_offset)))
    assert res.t[k] == res.segments[1].t_offset
    np.testing.assert_allclose(res.q[k], wp[2], atol=1e-9)     # at the turn ...
    np.testing.assert_allclose(res.qd[k], 0.0, atol=1e-9)      # ... at rest
    assert np.all(res.qd[:k, 0] >= -1e-9) and np.all(res.qd[k:, 0] <= 1e-9)  # no overshoot past the turn
    assert res.q[:, 0].max() <= 0.6 + 1e-9
    res = retimer.retime(wp, options=opts)
    v, a, t = dense_peaks(pm, res.q, res.qd, res.qdd, *_limits(model, pm, opts))
    assert max(v, a, t) <= 1 + 1e-3


def test_start_and_end_velocity_along_the_path(panda):
    model, retimer, pm = panda
    wp = smooth_waypoints(model, 6)
    d0 = wp[1] - wp[0]
    d1 = wp[-1] - wp[-2]
    v0 = 0.3 * d0 / np.abs(d0 / pm.velocityLimit).max()   # 30 % of the limit of the fastest joint
    v1 = 0.2 * d1 / np.abs(d1 / pm.velocityLimit).max()
    opts = RetimeOptions(torque_margin=MARGIN, gridpoints=300, sample_period=0.001)
    res = retimer.retime(wp, start_velocity=v0, end_velocity=v1, options=opts)
    assert res.success, res.message
    np.testing.assert_allclose(res.qd[0], v0, atol=1e-9)
    np.testing.assert_allclose(res.qd[-1], v1, atol=1e-9)
    np.testing.assert_allclose(res.q[[0, -1]], wp[[0, -1]], atol=1e-9)
    v, a, t = dense_peaks(pm, res.q, res.qd, res.qdd, *_limits(model, pm, opts))
    assert max(v, a, t) <= 1 + 1e-3
    rest = retimer.retime(wp, options=opts)
    assert res.duration < rest.duration  # starting and ending in motion saves time


def test_start_velocity_above_limit_or_too_fast_to_stop(panda):
    model, retimer, pm = panda
    wp = smooth_waypoints(model, 4)
    v = np.zeros(model.n)
    v[5] = 1.01 * pm.velocityLimit[5]
    res = retimer.retime(wp, start_velocity=v)
    assert res.status == RetimeStatus.VELOCITY_LIMIT
    assert res.message == (f"start_velocity: joint 'panda_joint6' at {v[5]:.6g} rad/s exceeds its velocity limit "
                           f"{pm.velocityLimit[5]:.6g} rad/s (URDF {pm.velocityLimit[5]:.6g} × velocity_scale 1)")
    # a tiny path entered at speed: it cannot stop within 2 mrad at 10 rad/s²
    short = np.stack((wp[0], wp[0] + 1e-3 * (wp[1] - wp[0]) / np.linalg.norm(wp[1] - wp[0])))
    d = short[1] - short[0]
    res = retimer.retime(short, start_velocity=0.5 * d / np.abs(d / pm.velocityLimit).max())
    assert res.status == RetimeStatus.START_NOT_CONTROLLABLE
    assert res.message.startswith("start_velocity: path speed") and "controllable range" in res.message


def test_names_in_any_order_and_held_absent_joints(panda):
    model, retimer, _ = panda
    wp = smooth_waypoints(model, 7)
    names = list(model.joint_names)
    perm = [4, 0, 6, 2, 1, 3, 5]
    opts = RetimeOptions(torque_margin=MARGIN, sample_period=0.01)
    a = retimer.retime(wp, options=opts)
    b = retimer.retime(wp[:, perm], joint_names=[names[i] for i in perm], options=opts)
    assert a.success and b.success
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.tau, b.tau)
    # joints 3 and 7 absent: held at the hold values
    keep = [0, 1, 3, 4, 5]
    c = retimer.retime(wp[:, keep], joint_names=[names[i] for i in keep],
                       hold={"panda_joint7": 0.4, "panda_joint3": -0.2, "panda_joint1": 9.0}, options=opts)
    assert c.success, c.message
    np.testing.assert_array_equal(c.q[:, 6], 0.4)
    np.testing.assert_array_equal(c.q[:, 2], -0.2)
    assert c.q[0, 0] == wp[0, 0] and c.q[-1, 0] == wp[-1, 0]  # a hold for a named joint is ignored
    np.testing.assert_array_equal(c.qd[:, [2, 6]], 0.0)
    # joint 3 neither named nor held: refused, naming it (no silent default position)
    c = retimer.retime(wp[:, keep], joint_names=[names[i] for i in keep], hold={"panda_joint7": 0.4},
                       options=opts)
    assert c.status == RetimeStatus.INVALID_REQUEST and c.q.shape == (0, model.n)
    assert c.message == ("joint_names: model joint(s) ['panda_joint3'] are neither in the request nor in hold "
                         "(give their positions in hold)")


@pytest.mark.parametrize("mutate, status, message", [
    (lambda wp, n: wp.__setitem__((2, 4), math.inf), RetimeStatus.INVALID_REQUEST,
     "waypoint 2: joint 'panda_joint5' position is inf (not finite)"),
    (lambda wp, n: n.__setitem__(3, "panda_finger_joint1"), RetimeStatus.INVALID_REQUEST,
     "joint_names: unknown joint 'panda_finger_joint1' (held fixed in this model)"),
    (lambda wp, n: n.__setitem__(3, "panda_joint1"), RetimeStatus.INVALID_REQUEST,
     "joint_names: joint 'panda_joint1' appears twice"),
    (lambda wp, n: wp.__setitem__((4, 5), 3.8), RetimeStatus.POSITION_LIMIT,
     "waypoint 4: joint 'panda_joint6' position 3.8 is outside its position limits [-0.0175, 3.7525]"),
])
def test_invalid_requests(panda, mutate, status, message):
    model, retimer, _ = panda
    wp = smooth_waypoints(model, 6)
    names = list(model.joint_names)
    mutate(wp, names)
    res = retimer.retime(wp, joint_names=names)
    assert not res.success and res.status == status
    assert res.message.startswith(message), res.message
    assert res.q.shape == (0, model.n)


def test_path_near_the_position_limits_stays_inside(panda):
    model, retimer, _ = panda
    q = model.neutral().copy()
    q[3] = -1.5
    wp = np.repeat(q[None, :], 4, axis=0)
    wp[:, 3] = [-1.0, -0.08, -0.08 + 1e-4, -1.0]  # nearly flat at the upper limit -0.0698
    wp[:, 0] = [0.0, 0.5, 1.0, 1.5]
    # the spline through the waypoints alone overshoots the limit ...
    from robot_dynamics_ros.retiming.path import JointPath
    raw = JointPath.from_waypoints(wp)
    assert raw(np.linspace(0.0, raw.length, 2001))[:, 3].max() > model.upper[3]
    # ... the retimed path does not (and needs no tolerance larger than the default to do so)
    res = retimer.retime(wp, options=RetimeOptions(sample_period=0.001, path_tolerance=0.05))
    assert res.success, res.message
    assert res.q[:, 3].max() <= model.upper[3]


def test_tiny_and_long_paths(panda):
    model, retimer, pm = panda
    wp = smooth_waypoints(model, 2)
    tiny = np.stack((wp[0], wp[0] + 1e-7))
    res = retimer.retime(tiny)
    assert res.success and 0 < res.duration < 0.05 and np.all(np.isfinite(res.tau))
    long_path = smooth_waypoints(model, 10_000, amplitude=0.3)
    t0 = time.perf_counter()
    res = retimer.retime(long_path, options=RetimeOptions(torque_margin=MARGIN, sample_period=0.01))
    elapsed = time.perf_counter() - t0
    assert res.success, res.message
    assert elapsed < 10.0
    np.testing.assert_allclose(res.q[-1], long_path[-1], atol=1e-9)
    # the 10 000 samples lie on a smooth curve: chords within tol / 2 replace most of them, and every output
    # sample stays within the path tolerance of the input polyline (distance computed here)
    kept = int(re.search(r"\((\d+) kept\)", res.message).group(1))
    assert kept < 2000, res.message
    seg_a, seg_b = long_path[:-1], long_path[1:]
    d = seg_b - seg_a
    for q in res.q[::7]:
        t = np.clip(np.einsum("ij,ij->i", q - seg_a, d) / np.einsum("ij,ij->i", d, d), 0.0, 1.0)
        assert np.abs(q - seg_a - t[:, None] * d).max(axis=1).min() <= 1e-3 * (1 + 1e-9)
    # the same geometric path from 100 of its samples takes (nearly) the same time
    coarse = retimer.retime(long_path[::101], options=RetimeOptions(torque_margin=MARGIN, gridpoints=10_000))
    assert coarse.duration == pytest.approx(res.duration, rel=0.01)


@pytest.mark.parametrize("k", [238, 2818])
def test_benchmark_paths_where_the_arm_can_stand_still_are_feasible(k):
    """Regression: two of the latency benchmark's retiming requests (``request_path(238)``, ``(2818)``: the
    Panda of the retiming service, fingers held, no payload, no acceleration limit, torque margin 0.9) were
    answered "infeasible" at gridpoint 38 / 52. Round-off at an ill-conditioned vertex of the stage polygon
    (a velocity row with |α| ~ 3e-8 meeting a torque row) emptied the forward pass's u interval by 2e-7.

    Independent checks with Pinocchio: the arm can stand still everywhere on the path (gravity ≤ 62 % of
    0.9 × effort), so success is the right answer; and the returned trajectory, sampled 10× denser than
    the request's 0.01 s, stays within the velocity and margin-scaled torque limits to 1e-3.
    """
    from robot_dynamics_testing.reference import request_path
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.robots import ROBOTS

    entry = ROBOTS["panda"]
    model = RobotModel.from_urdf(entry.path, held_joints=entry.held_joints)  # as the service loads it
    pm = pinocchio_reference("panda", payload=False)
    names = [f"panda_joint{i}" for i in range(1, 8)]
    assert list(model.joint_names) == names == [pm.names[j] for j in range(1, pm.njoints)]
    wp = request_path(k)
    data = pm.createData()
    tlim = pm.effortLimit * 0.9
    gravity = max((np.abs(pin.computeGeneralizedGravity(pm, data, q)) / tlim).max() for q in wp)
    assert gravity < 0.65
    retimer = Retimer(model)
    res = retimer.retime(wp, joint_names=names, options=RetimeOptions(torque_margin=0.9, sample_period=0.01))
    assert res.success and res.status == RetimeStatus.SUCCESS, res.message
    np.testing.assert_allclose(res.q[0], wp[0], atol=1e-9)
    np.testing.assert_allclose(res.q[-1], wp[-1], atol=1e-9)
    dense = retimer.retime(wp, joint_names=names, options=RetimeOptions(torque_margin=0.9, sample_period=0.001))
    assert dense.success, dense.message
    assert dense.duration == pytest.approx(res.duration, rel=1e-12)
    assert np.diff(dense.t).max() <= 0.001 + 1e-12  # 10× denser than the request's period
    v, a, t = dense_peaks(pm, dense.q, dense.qd, dense.qdd, pm.velocityLimit, np.full(7, np.inf), tlim)
    assert max(v, t) <= 1 + 1e-3 and a == 0.0
    assert t > 0.9  # the torque limit binds: the check is not vacuous


def test_friction_in_the_torque_limit(panda):
    model, _, pm = panda
    model2 = load_model("panda")
    model2.damping = np.full(model2.n, 2.0)      # strong viscous friction, N·m·s/rad
    model2.friction = np.full(model2.n, 1.0)     # Coulomb, N·m
    retimer = Retimer(model2)
    wp = smooth_waypoints(model2, 8)
    opts = RetimeOptions(torque_margin=MARGIN, gridpoints=200, sample_period=0.001, friction=True)
    res = retimer.retime(wp, options=opts)
    assert res.success, res.message
    v, a, t = dense_peaks(pm, res.q, res.qd, res.qdd, *_limits(model2, pm, opts),
                          damping=model2.damping, coulomb=model2.friction)
    assert max(v, a, t) <= 1 + 1e-3
    assert t > 0.98  # the friction-aware torque limit binds
    # and friction matters: the frictionless trajectory breaks the friction-aware torque limit
    without = Retimer(model2).retime(wp, options=RetimeOptions(torque_margin=MARGIN, gridpoints=200,
                                                               sample_period=0.001))
    v, a, t = dense_peaks(pm, without.q, without.qd, without.qdd, *_limits(model2, pm, opts),
                          damping=model2.damping, coulomb=model2.friction)
    assert t > 1.01


# ---------------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------------
def _write_csv(path, names, rows):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        w.writerows(rows)


def _cli(capsys, *argv):
    from robot_dynamics_tools.cli import main

    code = main(["retime", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_writes_the_trajectory_and_a_json_summary(tmp_path, capsys):
    model = load_model("panda", payload=False)
    pm = pinocchio_reference("panda", payload=False)
    wp = smooth_waypoints(model, 12)
    names = list(model.joint_names)
    cols = [6, 1, 0, 3, 4, 2]  # panda_joint6 absent: held at --hold
    _write_csv(tmp_path / "wp.csv", [names[i] for i in cols], wp[:, cols])
    out_csv = tmp_path / "traj.csv"
    code, out, err = _cli(capsys, "--urdf", "panda", "--waypoints", str(tmp_path / "wp.csv"), "--out",
                          str(out_csv), "--torque-margin", "0.9", "--acceleration-limit", "10", "--dt", "0.01",
                          "--hold", "panda_joint6=1.2", "--gridpoints", "150")
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["success"] is True and summary["gridpoints"] >= 150  # more where the path turns
    assert set(summary["peak_fraction"]) == {"velocity", "acceleration", "effort", "jerk"}
    with open(out_csv) as fh:
        header = fh.readline().strip().split(",")
    assert header[0] == "t"
    assert header[1:5] == ["panda_joint1/position", "panda_joint1/velocity", "panda_joint1/acceleration",
                           "panda_joint1/effort"]
    assert len(header) == 1 + 4 * 7
    data = np.loadtxt(out_csv, delimiter=",", skiprows=1)
    t = data[:, 0]
    assert summary["duration"] == pytest.approx(t[-1], abs=1e-9)
    np.testing.assert_allclose(np.diff(t[:-1]), 0.01, atol=1e-9)
    q = data[:, 1::4]
    qd, qdd, tau = data[:, 2::4], data[:, 3::4], data[:, 4::4]
    np.testing.assert_allclose(q[:, 5], 1.2)
    np.testing.assert_allclose(q[0, cols], wp[0, cols], atol=1e-9)
    data_pin = pm.createData()
    tau_pin = np.array([pin.rnea(pm, data_pin, a, b, c) for a, b, c in zip(q, qd, qdd)])
    np.testing.assert_allclose(tau, tau_pin, atol=1e-6)
    assert (np.abs(tau_pin) / (0.9 * pm.effortLimit)).max() <= 1 + 1e-3
    assert summary["peak_fraction"]["velocity"] == pytest.approx((np.abs(qd) / pm.velocityLimit).max(), rel=1e-6)


def test_cli_nan_waypoint_and_bad_header_exit_1(tmp_path, capsys):
    model = load_model("panda", payload=False)
    wp = smooth_waypoints(model, 5)
    names = list(model.joint_names)
    wp[2, 1] = math.nan
    _write_csv(tmp_path / "wp.csv", names, [[("nan" if math.isnan(v) else v) for v in r] for r in wp])
    out_csv = tmp_path / "traj.csv"
    code, out, err = _cli(capsys, "--urdf", "panda", "--waypoints", str(tmp_path / "wp.csv"), "--out",
                          str(out_csv))
    # a NaN cell is bad input (status 1, as the checks before the solve), with the retimer's JSON line
    assert code == 1
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["success"] is False and summary["status"] == "invalid_request"
    assert summary["message"] == "waypoint 2: joint 'panda_joint2' position is nan (not finite)"
    assert summary["message"] in err
    assert not out_csv.exists()
    # unknown joint in the header: a bad input file, one line naming the file and the column, status 1
    _write_csv(tmp_path / "wp2.csv", names[:-1] + ["wrist"], smooth_waypoints(model, 3))
    code, out, err = _cli(capsys, "--urdf", "panda", "--waypoints", str(tmp_path / "wp2.csv"), "--out", str(out_csv))
    assert code == 1 and out == "" and "['wrist']" in err and len(err.strip().splitlines()) == 1


def test_cli_bad_files_are_one_line_errors(tmp_path, capsys):
    code, _, err = _cli(capsys, "--urdf", "panda", "--waypoints", str(tmp_path / "none.csv"), "--out", "x.csv")
    assert code == 1 and err.strip() == f"robot-dynamics retime: error: --waypoints '{tmp_path / 'none.csv'}': no such file"
    (tmp_path / "bad.csv").write_text("panda_joint1,panda_joint2\n0.1,abc\n")
    code, _, err = _cli(capsys, "--urdf", "panda", "--waypoints", str(tmp_path / "bad.csv"), "--out", "x.csv")
    assert code == 1 and "line 2, joint 'panda_joint2': 'abc' is not a number" in err
    assert len(err.strip().splitlines()) == 1
    # a spreadsheet's semicolon export (decimal commas too): the delimiter is named, not a cell
    (tmp_path / "semi.csv").write_text("panda_joint1;panda_joint2\n0,1;0,2\n")
    code, _, err = _cli(capsys, "--urdf", "panda", "--waypoints", str(tmp_path / "semi.csv"), "--out", "x.csv")
    assert code == 1 and err.strip() == (f"robot-dynamics retime: error: --waypoints '{tmp_path / 'semi.csv'}': "
                                         "the header is one column 'panda_joint1;panda_joint2'; columns are "
                                         "separated by commas, this file uses ';'")


def test_cli_missing_joints_same_file_and_atomic_write(tmp_path, capsys, monkeypatch):
    model = load_model("panda", payload=False)
    wp = smooth_waypoints(model, 4)
    names = list(model.joint_names)
    _write_csv(tmp_path / "wp.csv", names[:5], wp[:, :5])
    out_csv = tmp_path / "traj.csv"
    # joints 6 and 7 neither in the CSV nor held: one line naming them, exit 1, nothing written
    code, _, err = _cli(capsys, "--urdf", "panda", "--waypoints", str(tmp_path / "wp.csv"), "--out", str(out_csv))
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "model joint(s) ['panda_joint6', 'panda_joint7'] are not columns" in err
    assert "--hold panda_joint6=VALUE,panda_joint7=VALUE" in err and not out_csv.exists()
    # the output path naming the input (another spelling of it) is refused before any work
    code, _, err = _cli(capsys, "--urdf", "panda", "--waypoints", str(tmp_path / "wp.csv"), "--out",
                        str(tmp_path / "." / "wp.csv"), "--hold", "panda_joint6=1.2,panda_joint7=0.3")
    assert code == 1 and "is the input file" in err
    assert (tmp_path / "wp.csv").read_text().startswith("panda_joint1")
    # success: JSON with the deviation bound and the warnings (no acceleration limits: --joint-limits '' drops
    # the bundled config/panda_joint_limits.yaml)
    code, out, err = _cli(capsys, "--urdf", "panda", "--waypoints", str(tmp_path / "wp.csv"), "--out",
                          str(out_csv), "--hold", "panda_joint6=1.2,panda_joint7=0.3", "--path-tolerance", "0.002",
                          "--joint-limits", "")
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert 0.0 < summary["max_path_deviation"] <= 0.002
    assert summary["warnings"] == [f"no acceleration limits configured for joints {names}: accelerations are "
                                   "bounded only by torque limits"]
    assert "warning: no acceleration limits configured" in err
    previous = out_csv.read_text()
    # a write that fails half-way leaves the previous file as it was, and no temporary file behind

    def failing_savetxt(fh, *a, **k):
        fh.write("0,1,2\n")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savetxt", failing_savetxt)
    code, _, err = _cli(capsys, "--urdf", "panda", "--waypoints", str(tmp_path / "wp.csv"), "--out", str(out_csv),
                        "--hold", "panda_joint6=1.2,panda_joint7=0.3")
    assert code == 1 and "cannot write" in err and "No space left on device" in err
    assert out_csv.read_text() == previous
    assert sorted(p.name for p in tmp_path.iterdir()) == ["traj.csv", "wp.csv"]


# ---------------------------------------------------------------------------------------------------
# real inputs: short segments between reversals, recorded paths, RRT-like paths, continuous joints
# ---------------------------------------------------------------------------------------------------
TWO_AXIS_URDF = serial_urdf("two_axis", [
    Body("a", "{a_type}", mass=2.0, com=(0.2, 0, 0), inertia=(0.01, 0.02, 0.02), limit=(-3, 3, 50, 1.5), link="l1"),
    Body("b", "revolute", mass=1.0, com=(0.15, 0, 0), inertia=(0.005, 0.01, 0.01), limit=(-3, 3, 20, 1.5),
         origin=(0.4, 0, 0), link="l2")])


def _two_axis(a_type="revolute"):
    from robot_dynamics_ros.model import RobotModel

    model = RobotModel.from_urdf(TWO_AXIS_URDF.replace("{a_type}", a_type))
    return model, pin.buildModelFromXML(TWO_AXIS_URDF.replace("{a_type}", a_type))


def _dense_check(pm, res, vlim, alim, tlim):
    """Peaks of |qd|/V, |qdd|/A, |tau|/T of an output sampled at 1 ms, tau from Pinocchio's RNEA."""
    return dense_peaks(pm, res.q, res.qd, res.qdd, vlim, alim, tlim)


def test_short_segment_between_reversals_minimal_form(tmp_path, capsys):
    """a, b: 0,0 -> 0.01,0 -> 0,0 -> 0,1 at 2 rad/s²: a 10 mrad move out and back, then a 90° turn.
    The short rest-to-rest segment has the closed-form bang-bang time 2 sqrt(d / A) = 0.1414 s; the rest
    (1.01 rad with a corner) is bounded below by the straight 1 rad bang-bang/trapezoid time."""
    model, pm = _two_axis()
    model.acceleration_limit = np.full(2, 2.0)
    wp = np.array([[0.0, 0.0], [0.01, 0.0], [0.0, 0.0], [0.0, 1.0]])
    res = Retimer(model).retime(wp, joint_names=["a", "b"], options=RetimeOptions(sample_period=0.001))
    assert res.success, res.message
    assert "stops at direction reversals at waypoint(s) [1]" in res.message
    first = res.segments[1].t_offset
    assert first == pytest.approx(2 * math.sqrt(0.01 / 2.0), rel=2e-3)
    vmax, amax = 1.5, 2.0  # straight 1 rad: accelerate to 1.0 rad/s (1 = v²/A, v < vmax) and brake
    assert res.duration - first >= 2 * math.sqrt(1.0 / amax) - 1e-9
    v, a, t = _dense_check(pm, res, np.full(2, vmax), np.full(2, amax), pm.effortLimit)
    assert max(v, a, t) <= 1 + 1e-4
    assert res.max_path_deviation <= 1e-3
    np.testing.assert_allclose(res.q[-1], wp[-1], atol=1e-12)
    # the command line form of the same request
    _write_csv(tmp_path / "wp.csv", ["a", "b"], wp)
    (tmp_path / "two_axis.urdf").write_text(TWO_AXIS_URDF.replace("{a_type}", "revolute"))
    code, out, err = _cli(capsys, "--urdf", str(tmp_path / "two_axis.urdf"), "--waypoints", str(tmp_path / "wp.csv"),
                          "--out", str(tmp_path / "traj.csv"), "--acceleration-limit", "2")
    assert code == 0, err
    assert json.loads(out.strip().splitlines()[-1])["success"] is True


def test_continuous_joint_takes_the_short_way():
    """+3.1 -> -3.1 rad on a continuous joint is a +0.0832 rad move (2π - 6.2), not a 6.2 rad sweep: the
    output ends at 3.1 + 0.0832 = 3.1832 (the same angle as -3.1) after the time of a straight 0.0832 rad
    bang-bang move at 2 rad/s² (2 sqrt(0.0832 / 2)); a revolute joint sweeps the 6.2 rad."""
    model, pm = _two_axis("continuous")
    model.acceleration_limit = np.full(2, 2.0)
    wp = np.array([[3.1, 0.0], [-3.1, 0.0]])
    res = Retimer(model).retime(wp, joint_names=["a", "b"], options=RetimeOptions(sample_period=0.001))
    assert res.success, res.message
    step = 2 * math.pi - 6.2
    assert res.q[-1, 0] == pytest.approx(3.1 + step, abs=1e-12)
    assert np.all(np.diff(res.q[:, 0]) >= 0) and res.q[:, 0].min() == 3.1
    assert res.duration == pytest.approx(2 * math.sqrt(step / 2.0), rel=1e-3)
    # revolute joint a (limits ±3 rad would refuse 3.1: widen them here): the long way
    model2, _ = _two_axis("revolute")
    model2.lower[:] = -3.2
    model2.upper[:] = 3.2
    model2.acceleration_limit = np.full(2, 2.0)
    res2 = Retimer(model2).retime(wp, joint_names=["a", "b"])
    assert res2.success and res2.q[-1, 0] == -3.1 and res2.duration > 3.0


def _recorded_path(model, seed=0, rate=100.0):
    """A synthetic hand-guided recording at ``rate`` Hz: still phases with encoder jitter (0.3 µrad rms) and
    small back-and-forth moves (50 µrad, within the merge distance; one of 3 mrad, beyond it), joined
    by minimum-jerk moves of 0.4-0.8 rad at up to ~0.5 rad/s."""
    rng = np.random.default_rng(seed)
    lo, hi = model.lower, model.upper
    q = model.neutral() + 0.3 * (hi - lo) * 0.5 * (rng.uniform(-1, 1, model.n) * 0.2)
    q = np.clip((lo + hi) / 2 + rng.uniform(-0.1, 0.1, model.n) * (hi - lo), lo + 0.3, hi - 0.3)
    rows = []

    def still(seconds, wiggle):
        for k in range(int(seconds * rate)):
            rows.append(q + wiggle * math.sin(2 * math.pi * 0.7 * k / rate) * np.eye(model.n)[0]
                        + rng.normal(0.0, 3e-7, model.n))

    for leg in range(4):
        still(1.0, 5e-5 if leg % 2 else 0.0)
        if leg == 2:
            still(1.0, 3e-3)  # an audible back-and-forth while holding
        target = np.clip(q + rng.uniform(-0.8, 0.8, model.n) * (hi - lo) / (hi - lo).max(), lo + 0.2, hi - 0.2)
        duration = 2.5
        for k in range(int(duration * rate)):
            s = k / (duration * rate)
            blend = 10 * s**3 - 15 * s**4 + 6 * s**5
            rows.append(q + blend * (target - q) + rng.normal(0.0, 3e-7, model.n))
        q = target
    still(0.5, 0.0)
    return np.array(rows)


def test_recorded_hand_guided_path():
    """Sub-µrad jitter and back-and-forth moves: retimed (no 'infeasible'), within the limits on a 1 ms
    Pinocchio check (10x the 10 ms output), within path_tolerance of the recording's polyline (exact
    distance at every 1 ms sample), and as fast (within 2 %) as the recording pre-filtered at the tolerance
    by hand and retimed at 5000 gridpoints."""
    model = load_model("panda", payload=False)
    pm = pinocchio_reference("panda", payload=False)
    path = _recorded_path(model)
    retimer = Retimer(model)
    opts = RetimeOptions(torque_margin=MARGIN, sample_period=0.001)
    res = retimer.retime(path, options=opts)
    assert res.success, res.message
    assert "merged" in res.message and "stops at direction reversals" in res.message
    v, a, t = dense_peaks(pm, res.q, res.qd, res.qdd, *_limits(model, pm, opts))
    assert max(v, a, t) <= 1 + 1e-4
    assert res.max_path_deviation <= opts.path_tolerance
    dist = _polyline_distance_inf(res.q, path, res.max_path_deviation)
    assert dist.max() <= res.max_path_deviation
    # the recording filtered by hand (points closer than the tolerance to the last kept one dropped)
    filtered = [path[0]]
    for q in path[1:-1]:
        if np.abs(q - filtered[-1]).max() >= opts.path_tolerance:
            filtered.append(q)
    filtered.append(path[-1])
    ref = retimer.retime(np.array(filtered), options=RetimeOptions(torque_margin=MARGIN, gridpoints=5000))
    assert ref.success, ref.message
    assert res.duration == pytest.approx(ref.duration, rel=0.02)


def _segment_distance_inf(q, a, b, iterations=60):
    """Infinity-norm distance of the rows of q (M, n) from the segment a -> b: max_j |q_j - a_j - t d_j| is
    convex in t, minimized by golden-section search on [0, 1] (the value found is ≥ the minimum, so the
    distance is never underestimated; 60 iterations shrink the bracket to 1e-12 of the segment)."""
    d = b - a
    r = q - a
    lo = np.zeros(q.shape[0])
    hi = np.ones(q.shape[0])
    g = (math.sqrt(5) - 1) / 2

    def f(t):
        return np.abs(r - t[:, None] * d).max(axis=1)

    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = f(x1), f(x2)
    for _ in range(iterations):
        left = f1 < f2
        hi = np.where(left, x2, hi)
        lo = np.where(left, lo, x1)
        x2n = np.where(left, x1, lo + g * (hi - lo))
        x1n = np.where(left, hi - g * (hi - lo), x2)
        f1, f2 = np.where(left, f(x1n), f2), np.where(left, f1, f(x2n))
        x1, x2 = x1n, x2n
    t = 0.5 * (lo + hi)
    return np.minimum(np.minimum(f(t), f(np.zeros_like(t))), f(np.ones_like(t)))


def _polyline_distance_inf(q, wp, bound):
    """Infinity-norm distance of the rows of q (M, n) from the polyline through wp (W, n), or a larger value
    where it is above ``bound``. The distance at the Euclidean projection onto each segment is an upper
    bound of the infinity-norm distance to that segment; samples where the smallest of those exceeds
    ``bound`` get the exact minimum (:func:`_segment_distance_inf`) over every segment that can reach it."""
    dist = np.full(q.shape[0], np.inf)
    for a, b in zip(wp[:-1], wp[1:]):
        d = b - a
        t = np.clip((q - a) @ d / (d @ d), 0.0, 1.0)
        dist = np.minimum(dist, np.abs(q - a - t[:, None] * d).max(axis=1))
    far = np.flatnonzero(dist > bound)
    if far.size:
        # exactly, over the segments that can beat the bound found: |x|∞ ≥ |x|₂ / √n, so a segment whose
        # Euclidean distance (at the projection, exact) is above √n × that bound cannot
        a, d = wp[:-1], np.diff(wp, axis=0)
        dd = np.einsum("ij,ij->i", d, d)
        rows, segs = [], []
        for i in far:
            r = q[i] - a
            t = np.clip(np.einsum("ij,ij->i", r, d) / dd, 0.0, 1.0)
            near = np.flatnonzero(np.linalg.norm(r - t[:, None] * d, axis=1) <= math.sqrt(q.shape[1]) * dist[i])
            rows.append(np.full(near.size, i))
            segs.append(near)
        rows, segs = np.concatenate(rows), np.concatenate(segs)
        exact = _segment_distance_inf(q[rows], wp[segs], wp[segs + 1])
        dist[far] = np.inf
        np.minimum.at(dist, rows, exact)
    return dist


@pytest.mark.parametrize("robot", ["panda", "ur5"])
def test_random_rrt_like_paths_stay_within_the_tolerance(robot):
    """100 random 5-waypoint paths (uniform in the position limits, like an RRT's): the output sampled at
    1 kHz stays within path_tolerance of the polyline (infinity-norm distance computed here, per sample, to
    every segment), and the solver's max_path_deviation bounds that distance."""
    model = load_model(robot, payload=False)
    retimer = Retimer(model)
    rng = np.random.default_rng(11)
    lo = np.maximum(model.lower, -math.pi)
    hi = np.minimum(model.upper, math.pi)
    tol = 1e-3
    worst = 0.0
    for k in range(100):
        wp = rng.uniform(lo, hi, (5, model.n))
        res = retimer.retime(wp, options=RetimeOptions(sample_period=0.001, gridpoints=100))
        assert res.success, (k, res.message)
        assert res.max_path_deviation <= tol
        dist = _polyline_distance_inf(res.q, wp, res.max_path_deviation + 1e-12)
        assert dist.max() <= res.max_path_deviation + 1e-12, k
        worst = max(worst, dist.max())
    assert worst > 0.3 * tol  # the paths do use the tolerance (corners are rounded, not stopped at)


def test_request_caps_are_checked_before_allocating(panda):
    """Caps name themselves and the requested value, and refuse quickly (no GB-sized allocation first)."""
    from robot_dynamics_ros.retiming import retimer as rt

    model, retimer, _ = panda
    wp = smooth_waypoints(model, 5)
    t0 = time.perf_counter()
    res = retimer.retime(wp, options=RetimeOptions(gridpoints=1_000_000))
    assert res.status == RetimeStatus.INVALID_REQUEST
    assert res.message == f"options: gridpoints=1000000: above MAX_GRIDPOINTS = {rt.MAX_GRIDPOINTS}"
    # 60 000 distinct waypoints (up to 1.3 mrad apart, most beyond the 0.5 mrad merge distance), zig-zagging
    # 1.6 mrad across their direction: no chord over several of them is within tol / 2, none is a reversal
    k = np.arange(60_000)[:, None]
    many = model.neutral() + 0.4 * np.sin(2 * np.pi * k / 2_000.0 + np.arange(model.n))
    across = np.where(np.arange(model.n) % 2 == 0, 1.0, -1.0) * np.cos(2 * np.pi * k / 2_000.0 + np.arange(model.n))
    many = many + 8e-4 * (-1.0) ** k * across / np.abs(across).max(axis=1, keepdims=True)
    many = np.clip(many, model.lower + 0.01, model.upper - 0.01)
    res = retimer.retime(many)
    kept = int(res.message.split(" waypoints")[0])
    assert res.status == RetimeStatus.INVALID_REQUEST and kept > 50_000
    assert res.message == (f"{kept} waypoints × {kept} gridpoints × 7 joints = {kept * kept * 7:.4g} is above "
                           f"MAX_WORK = {rt.MAX_WORK:.4g}; send fewer waypoints or gridpoints")
    res = retimer.retime(wp, options=RetimeOptions(sample_period=1e-8))
    assert res.status == RetimeStatus.INVALID_REQUEST and "above MAX_OUTPUT_SAMPLES = 1000000" in res.message
    assert time.perf_counter() - t0 < 2.0
    # a path tolerance that is not a positive distance
    for bad in (0.0, -1e-3, math.nan, math.inf):
        res = retimer.retime(wp, options=RetimeOptions(path_tolerance=bad))
        assert res.status == RetimeStatus.INVALID_REQUEST
        assert res.message == f"options: path_tolerance={bad!r}: must be a positive distance (rad / m)"


def test_cli_input_is_a_capped_regular_file(tmp_path, capsys, monkeypatch):
    from robot_dynamics_tools.commands import retime as cmd

    code, _, err = _cli(capsys, "--urdf", "panda", "--waypoints", "/dev/zero", "--out", str(tmp_path / "t.csv"))
    assert code == 1 and err.strip() == "robot-dynamics retime: error: --waypoints '/dev/zero': not a regular file"
    _write_csv(tmp_path / "wp.csv", ["panda_joint1"], [[0.0], [0.1]])
    monkeypatch.setattr(cmd, "MAX_CSV_BYTES", 10)
    code, _, err = _cli(capsys, "--urdf", "panda", "--waypoints", str(tmp_path / "wp.csv"), "--out",
                        str(tmp_path / "t.csv"))
    assert code == 1 and "larger than MAX_CSV_BYTES = 10 bytes" in err and len(err.strip().splitlines()) == 1


def test_jitter_on_a_dense_recorded_path_does_not_slow_it_down(panda):
    """5000 samples of a smooth curve with 5 and 20 µrad of noise (below an encoder's resolution): the
    duration stays within 2 % of the noise-free samples' (the spline through every sample had turned the
    noise into curvature: 5× slower), and every output sample stays within the path tolerance of the noisy
    input polyline (distance computed here)."""
    model, retimer, _ = panda
    clean = smooth_waypoints(model, 5000, seed=3, amplitude=0.3)
    opts = RetimeOptions(torque_margin=MARGIN, sample_period=0.005)
    ref = retimer.retime(clean, options=opts)
    assert ref.success, ref.message
    rng = np.random.default_rng(11)
    for sigma in (5e-6, 2e-5):
        noisy = clean + rng.normal(0.0, sigma, clean.shape)
        res = retimer.retime(noisy, options=opts)
        assert res.success, res.message
        assert res.duration == pytest.approx(ref.duration, rel=0.02), (sigma, res.duration, ref.duration)
        seg_a, d = noisy[:-1], np.diff(noisy, axis=0)
        for q in res.q[::5]:
            t = np.clip(np.einsum("ij,ij->i", q - seg_a, d) / np.einsum("ij,ij->i", d, d), 0.0, 1.0)
            assert np.abs(q - seg_a - t[:, None] * d).max(axis=1).min() <= 1e-3 * (1 + 1e-9)


def test_jerk_scale_without_jerk_limits_is_a_warning(panda):
    """jerk_scale scales configured jerk limits; the Panda model here has none, so it changed nothing and the
    answer said nothing (found by a first-time user)."""
    model, retimer, _ = panda
    assert not np.isfinite(getattr(model, "jerk_limit", np.full(model.n, np.inf))).any()
    wp = smooth_waypoints(model, 4)
    res = retimer.retime(wp, options=RetimeOptions(jerk_scale=0.5))
    assert res.success and any("jerk_scale=0.5 has no effect" in w for w in res.warnings), res.warnings
    plain = retimer.retime(wp)
    assert res.duration == plain.duration
    assert not any("jerk_scale" in w for w in plain.warnings)


@pytest.mark.parametrize("jerk", [False, True])
def test_warmup_leaves_no_kernel_to_load_for_a_planner_path(jerk):
    """After ``Retimer.warmup`` a planner's path (10 Panda waypoints with corners the default tolerance cuts,
    output at 2 ms) needs no compiled kernel it has not loaded: on a cold cache the first such request used to
    compile ~4 s more after warm-up (~17 s for a first jerk-limited one). ``warmup(jerk=True)`` covers a
    request's jerk_limit on a model without jerk limits (the retime CLI's --jerk-limit). Counted in a fresh
    interpreter as the signatures numba's dispatchers of the package hold before and after the request (a
    kernel called from Python, loaded from the cache or compiled, adds one; without the jerk warm-up the
    jerk-limited request adds them)."""
    import subprocess
    import sys

    script = """
import numpy as np, sys
from numba.core.registry import CPUDispatcher
import robot_dynamics_ros.retiming.retimer as R
from robot_dynamics_ros.retiming.request import RetimeOptions
from robot_dynamics_testing.retiming_cases import load_model, smooth_waypoints

def signatures():
    return sum(len(v.signatures) for name, mod in list(sys.modules.items()) if name.startswith("robot_dynamics_ros")
               for v in vars(mod).values() if isinstance(v, CPUDispatcher))

model = load_model("panda")
jerk = sys.argv[1] == "True"
retimer = R.Retimer(model)
retimer.warmup(jerk=jerk)
before = signatures()
res = retimer.retime(smooth_waypoints(model, 10), options=RetimeOptions(sample_period=0.002,
                                                                       jerk_limit=500.0 if jerk else None))
print(res.success, before, signatures(), res.jerk_limits is not None)
"""
    out = subprocess.run([sys.executable, "-c", script, str(jerk)], capture_output=True, text=True, timeout=600,
                         cwd=str(Path(__file__).resolve().parents[2]))
    assert out.returncode == 0, out.stderr[-2000:]
    ok, before, after, jerk_limited = out.stdout.split()
    assert ok == "True" and jerk_limited == str(jerk), out.stdout
    assert int(before) > 0 and after == before, out.stdout
