"""Issue 24 item 3 (say what binds) and issue 25 (plausible scaling factors) at the result, the service core
and the CLI.

``tolerance_bound`` names the corners where the curvature of the path within path_tolerance, not a joint
limit, sets the speed. Checked here against the output samples themselves (1 kHz): the normal part of the
joint acceleration, qdd minus its component along the velocity, is the bend's |q''| sd²; wherever it takes
well over half of a joint's acceleration limit the sample lies in a reported corner, and every reported corner
holds a sample where it takes close to half.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robot_dynamics_ros.retiming.binding import _corner_runs
from robot_dynamics_testing.urdf_text import Body, serial_urdf

VEL = np.array([1.0, 1.0])
ACC = np.array([2.0, 2.0])
#: an L-shaped path with one right-angle corner at waypoint 1, then straight on (waypoints 2 and 3 collinear)
L_PATH = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])


def _urdf() -> str:
    bodies = [Body(f"j{i}", "prismatic", mass=0.01, limit=(-5.0, 5.0, 1e6, float(VEL[i])), axis=ax)
              for i, ax in enumerate([(1.0, 0.0, 0.0), (0.0, 1.0, 0.0)])]
    return serial_urdf("ell", bodies)


def _limits() -> dict:
    return {"joint_limits": {f"j{i}": {"has_acceleration_limits": True, "max_acceleration": float(a)}
                             for i, a in enumerate(ACC)}}


@pytest.fixture(scope="module")
def retimer():
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.retiming.retimer import Retimer

    return Retimer(RobotModel.from_text(_urdf(), joint_limits=_limits()))


def _normal_share(res) -> np.ndarray:
    """(M,) max over joints of |qdd − (qdd·e) e|_j / A_j with e the unit velocity direction (0 at rest)."""
    speed = np.linalg.norm(res.qd, axis=1)
    e = np.divide(res.qd, speed[:, None], out=np.zeros_like(res.qd), where=speed[:, None] > 1e-9)
    normal = res.qdd - np.sum(res.qdd * e, axis=1)[:, None] * e
    return (np.abs(normal) / ACC).max(axis=1)


@pytest.mark.parametrize("tol", [1e-4, 1e-3, 1e-2])
def test_the_corner_is_reported_where_the_bend_sets_the_speed(retimer, tol):
    from robot_dynamics_ros.retiming.request import RetimeOptions

    res = retimer.retime(L_PATH, options=RetimeOptions(path_tolerance=tol, sample_period=1e-3))
    assert res.success, res.message
    bound = res.tolerance_bound
    assert bound["count"] == 1 and bound["waypoints"] == [1] and bound["path_tolerance"] == tol
    corner = bound["corners"][0]
    t0, t1 = corner["t_start"], corner["t_end"]
    share = _normal_share(res)
    moving = np.linalg.norm(res.qd, axis=1) > 1e-3  # (at rest the velocity has no direction)
    share, t = share[moving], res.t[moving]
    inside = (t >= t0) & (t <= t1)
    # well over half of a limit outside the corner: never; close to half inside it: somewhere
    assert not np.any(share[~inside] >= 0.6), (t[~inside][share[~inside] >= 0.6], t0, t1)
    assert share[inside].max() >= 0.4
    assert 0.0 < bound["seconds"] <= t1 - t0 + 1e-12 and t1 - t0 < res.duration
    assert f"path_tolerance {tol:g} sets the speed at 1 corner(s) (waypoint(s) 1)" in res.message
    summary = json.loads(json.dumps(res.summary()))
    assert summary["tolerance_bound"]["waypoints"] == [1]


def test_a_tighter_tolerance_costs_time_at_the_corner(retimer):
    """Durations fall as the tolerance grows, and only the corner can make the difference: the straight parts
    are the same rest-to-rest ramps."""
    from robot_dynamics_ros.retiming.request import RetimeOptions

    res = [retimer.retime(L_PATH, options=RetimeOptions(path_tolerance=tol)) for tol in (1e-4, 1e-3, 1e-2)]
    assert all(r.success for r in res)
    durations = [r.duration for r in res]
    assert durations[0] > durations[1] > durations[2]


def test_no_corner_on_a_straight_path(retimer):
    from robot_dynamics_ros.retiming.request import RetimeOptions

    res = retimer.retime(np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]), options=RetimeOptions())
    assert res.success and res.tolerance_bound["count"] == 0 and res.tolerance_bound["seconds"] == 0.0
    assert "sets the speed" not in res.message


def test_service_message_says_what_binds(retimer):
    from robot_dynamics_ros.retiming import service as core
    from robot_dynamics_testing.service_requests import PARAMS, request

    model = retimer.model
    answer = core.handle_request(request(list(model.joint_names), L_PATH), retimer, model, PARAMS,
                                 core.MeasuredPositions(model.joint_names), now_s=0.0)
    assert answer.success, answer.message
    assert "path_tolerance 0.001 sets the speed at 1 corner(s) (waypoint(s) 1)" in answer.message


@pytest.mark.parametrize("field", ["velocity_scaling", "acceleration_scaling"])
def test_service_refuses_a_scale_below_the_floor(retimer, field):
    from robot_dynamics_ros.retiming import service as core
    from robot_dynamics_testing.service_requests import PARAMS, request

    model = retimer.model
    answer = core.handle_request(request(list(model.joint_names), L_PATH, **{field: 1e-300}), retimer, model,
                                 PARAMS, core.MeasuredPositions(model.joint_names), now_s=0.0)
    assert not answer.success and answer.message.startswith(f"{field}=1e-300: must be in [0.001, 1]"), answer.message


def test_cli_refuses_velocity_scale_1e_300_in_one_line(tmp_path):
    urdf = tmp_path / "ell.urdf"
    urdf.write_text(_urdf())
    csv = tmp_path / "wp.csv"
    csv.write_text("j0,j1\n" + "\n".join(",".join(map(str, r)) for r in L_PATH) + "\n")
    out = tmp_path / "out.csv"
    cli = Path(sys.executable).with_name("robot-dynamics")
    proc = subprocess.run([str(cli), "retime", "--urdf", str(urdf), "--waypoints", str(csv), "--out", str(out),
                           "--acceleration-limit", "2", "--velocity-scale", "1e-300"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--velocity-scale=1e-300: must be in [0.001, 1]" in lines[0], proc.stderr
    assert not out.exists()
    ok = subprocess.run([str(cli), "retime", "--urdf", str(urdf), "--waypoints", str(csv), "--out", str(out),
                         "--acceleration-limit", "2", "--velocity-scale", "0.001"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    summary = json.loads(ok.stdout.strip().splitlines()[-1])
    assert summary["peak_fraction"]["velocity"] <= 1 + 1e-4 and summary["peak_fraction"]["acceleration"] <= 1 + 1e-4
    assert "tolerance_bound" in summary


@pytest.mark.parametrize("seed", range(3))
def test_corner_runs_their_nearest_knot_and_peak(seed):
    """_corner_runs against their definitions: runs of True, the first knot nearest to a run's middle s
    (argmin, ties included: middles exactly between two knots) and the largest curvature in the run."""
    rng = np.random.default_rng(seed)
    s = np.arange(400) * 0.25
    bound = rng.random(400) < 0.4
    curvature = rng.random(400)
    knots = np.sort(rng.choice(s, 30, replace=False))
    first, last, nearest, peak = _corner_runs(bound, curvature, s, knots)
    edges = np.diff(np.concatenate(([0], bound.astype(int), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    assert first.tolist() == starts.tolist() and last.tolist() == ends.tolist()
    mids = 0.5 * (s[starts] + s[ends])
    assert nearest.tolist() == [int(np.argmin(np.abs(knots - m))) for m in mids]
    assert peak.tolist() == [curvature[a:b + 1].max() for a, b in zip(starts, ends)]
    ties = _corner_runs(np.array([True, True]), np.zeros(2), np.array([1.0, 2.0]), np.array([0.0, 1.0, 2.0, 3.0]))[2]
    assert ties.tolist() == [1]  # 1.5 is as near to 1.0 as to 2.0: the first
