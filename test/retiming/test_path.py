"""JointPath (retiming/path.py): the C² spline against scipy's CubicSpline, gridpoints, waypoint preparation."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.interpolate import CubicSpline

from robot_dynamics_ros.retiming.corners import _chord_fit, _chord_fit_bounds, _tight_corners
from robot_dynamics_ros.retiming.grid import gridpoints_for
from robot_dynamics_ros.retiming.path import JointPath
from robot_dynamics_ros.retiming.waypoints import prepare_waypoints
from robot_dynamics_testing.polyline import polyline_distance


@pytest.mark.parametrize("count", [2, 3, 4, 5, 17])
@pytest.mark.parametrize("ends", ["nak", "start", "end", "both"])
def test_spline_matches_scipy_cubicspline(count, ends):
    rng = np.random.default_rng(count)
    wp = rng.normal(size=(count, 4))
    t0 = rng.normal(size=4) if ends in ("start", "both") else None
    t1 = rng.normal(size=4) if ends in ("end", "both") else None
    path = JointPath.from_waypoints(wp, start_tangent=t0, end_tangent=t1)
    # s is the cumulative chord length
    np.testing.assert_allclose(path.knots, np.concatenate(([0], np.cumsum(np.linalg.norm(np.diff(wp, axis=0),
                                                                                           axis=1)))))
    bc = ["not-a-knot" if t is None else (1, t / np.linalg.norm(t)) for t in (t0, t1)]
    if count == 2:  # scipy: a prescribed slope opposite "not-a-knot" is only defined as "natural" there
        bc = [b if not isinstance(b, str) or (t0 is None and t1 is None) else "natural" for b in bc]
    ref = CubicSpline(path.knots, wp, bc_type=tuple(bc))
    s = np.linspace(0, path.length, 101)
    q, dq, ddq = path.evaluate(s)
    np.testing.assert_allclose(q, ref(s), atol=1e-12)
    np.testing.assert_allclose(dq, ref(s, 1), atol=1e-11)
    np.testing.assert_allclose(ddq, ref(s, 2), atol=1e-10)
    np.testing.assert_allclose(path(path.knots), wp, atol=1e-12)  # through every waypoint


def test_spline_is_c2_at_knots_and_tangent_is_unit():
    rng = np.random.default_rng(3)
    wp = np.cumsum(rng.normal(size=(8, 3)), axis=0)
    tangent = np.array([1.0, 2.0, -2.0])
    path = JointPath.from_waypoints(wp, start_tangent=tangent)
    eps = 1e-9
    for k in path.knots[1:-1]:
        left = [a[0] for a in path.evaluate([k - eps])]
        right = [a[0] for a in path.evaluate([k + eps])]
        for a, b in zip(left, right):
            np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(path.evaluate([0.0])[1][0], tangent / 3.0, atol=1e-12)


def test_unsorted_evaluation_points():
    wp = np.array([[0.0, 0.0], [1.0, 0.5], [2.0, 0.0], [3.0, 1.0]])
    path = JointPath.from_waypoints(wp)
    s = np.array([2.5, 0.1, 1.7, 0.0, path.length])
    q_sorted = path(np.sort(s))
    np.testing.assert_allclose(path(s)[np.argsort(s)], q_sorted, atol=1e-14)


def test_gridpoints_contain_every_knot_and_are_uniform_inside_intervals():
    knots = np.array([0.0, 0.3, 1.0, 1.05, 2.5])
    for count in (2, 5, 50, 1000):
        s, idx = gridpoints_for(knots, count, return_knot_index=True)
        assert s.shape[0] >= max(count, knots.shape[0])
        assert s.shape[0] == max(count, knots.shape[0])
        np.testing.assert_array_equal(s[idx], knots)
        assert np.all(np.diff(s) > 0)
        for k in range(len(knots) - 1):
            steps = np.diff(s[idx[k]:idx[k + 1] + 1])
            np.testing.assert_allclose(steps, steps[0], rtol=1e-9)


def test_reversal_split_and_merging():
    # 1-DoF there and back, and a 2-D path with a 90° corner (kept) and a U-turn (split)
    line = np.array([[0.0], [1.0], [2.0], [1.5], [0.0]])
    assert prepare_waypoints(line)[2] == [(0, 2), (2, 4)]
    corner = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.9, 0.0]])
    assert prepare_waypoints(corner)[2] == [(0, 2), (2, 3)]
    assert prepare_waypoints(corner, cos_threshold=-1.0)[2] == [(0, 3)]
    wp = np.array([[0.0], [1.0], [1.0], [2.0], [1.0]])
    kept, idx, segments, dropped, length, offset = prepare_waypoints(wp)
    np.testing.assert_array_equal(idx, [0, 1, 3, 4])
    np.testing.assert_array_equal(dropped, [2])
    assert segments == [(0, 2), (2, 3)] and length == 3.0
    np.testing.assert_array_equal(offset, 0.0)  # an exact duplicate moves no chord
    kept, idx, segments, dropped, _, _ = prepare_waypoints(np.zeros((3, 2)))
    assert kept.shape == (1, 2) and segments == [(0, 0)]
    # merging within 0.1 (infinity norm): rows 1, 2 are within 0.1 of row 0; the last row is always kept
    wp = np.array([[0.0, 0.0], [0.05, 0.08], [0.09, -0.02], [1.0, 0.0], [1.0, 0.05]])
    kept, idx, segments, dropped, _, offset = prepare_waypoints(wp, tol=0.1)
    np.testing.assert_array_equal(idx, [0, 3, 4])
    # chord 0 -> 3 against the input polyline 0 -> 1 -> 2 -> 3: A = |p0 - p2| = 0.09, B = |p3 - p1| = 0.95
    assert offset[0] == pytest.approx(0.09 * 0.95 / (0.09 + 0.95), rel=1e-12)
    assert offset[1] == 0.0
    # the bound holds: distance (infinity norm) of chord points from the input polyline, brute force
    t = np.linspace(0, 1, 2001)[:, None]
    chord = wp[0] + t * (wp[3] - wp[0])
    dist = np.full(t.shape[0], np.inf)
    for a, b in zip(wp[:3], wp[1:4]):
        seg = a + t * (b - a)
        dist = np.minimum(dist, np.abs(chord[:, None, :] - seg[None]).max(-1).min(-1))
    assert dist.max() <= offset[0] + 1e-12


@pytest.mark.parametrize("seed", range(5))
def test_path_within_tolerance_of_the_polyline(seed):
    """RRT-like paths (random waypoints far apart): the spline through the waypoints alone swings up to
    ~0.5 rad off the segments; with knots added it stays within the tolerance, by an exact distance
    computation at 2000 points per segment (independent of the solver's bound, which must also hold)."""
    rng = np.random.default_rng(seed)
    wp = rng.uniform(-2.0, 2.0, (5, 4))
    raw = JointPath.from_waypoints(wp)
    s = np.linspace(0.0, raw.length, 8001)
    assert polyline_distance(raw(s), wp).max() > 0.05  # the plain interpolating spline leaves the tube
    for tol in (1e-2, 1e-3):
        path, dev, status, bad = JointPath.within_tolerance(wp, np.zeros(4), tol, np.full(4, -3.0),
                                                            np.full(4, 3.0))
        assert status == 0 and np.all(bad < 0)
        np.testing.assert_allclose(path(path.knots[0]), wp[:1], atol=1e-12)
        np.testing.assert_allclose(path(path.length), wp[-1:], atol=1e-12)
        s = np.linspace(0.0, path.length, 8001)
        measured = polyline_distance(path(s), wp).max()
        assert measured <= dev.max() + 1e-12 and dev.max() <= tol
        assert measured > 0.2 * tol  # it uses the tolerance (halving stops within 2x of it), no polyline
        np.testing.assert_allclose(path.waypoint_knots, JointPath.from_waypoints(wp).knots, atol=1e-12)


def test_path_kept_inside_the_position_box():
    """Nearly flat waypoints at a limit: the plain spline overshoots the limit, the refined one does not."""
    wp = np.array([[-1.0, 0.0], [-0.08, 0.5], [-0.08 + 1e-4, 1.0], [-1.0, 1.5]])
    hi = np.array([-0.0698, 10.0])
    lo = -np.full(2, 10.0)
    raw = JointPath.from_waypoints(wp)
    assert raw(np.linspace(0, raw.length, 4001))[:, 0].max() > hi[0]
    path, dev, status, bad = JointPath.within_tolerance(wp, np.zeros(3), 1.0, lo, hi)
    assert status == 0
    assert path(np.linspace(0, path.length, 40001))[:, 0].max() <= hi[0]


def test_bad_inputs():
    with pytest.raises(ValueError, match="at least 2"):
        JointPath.from_waypoints(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="duplicates"):
        JointPath.from_waypoints(np.zeros((2, 3)))


def test_split_for_turn_keeps_the_curve_and_grades_the_stages():
    """Halving intervals where the curvature varies strongly changes no polynomial (values and the first
    two derivatives agree to round-off everywhere), keeps every old knot, and lets the turn-limited grid
    use fewer stages than uniform stages sized for each interval's largest |q''|."""
    from robot_dynamics_ros.retiming.grid import _min_stages

    rng = np.random.default_rng(3)
    wp = rng.uniform(-2.0, 2.0, (5, 4))
    path, *_ = JointPath.within_tolerance(wp, np.zeros(4), 1e-3, np.full(4, -3.0), np.full(4, 3.0))
    split = path.split_for_turn(0.02)
    assert set(path.knots) <= set(split.knots) and split.knots.shape[0] > path.knots.shape[0]
    s = np.linspace(0.0, path.length, 20001)
    for a, b in zip(path.evaluate(s), split.evaluate(s)):
        np.testing.assert_allclose(b, a, atol=1e-9 * max(1.0, np.abs(a).max()))
    np.testing.assert_array_equal(split.waypoint_knots, path.waypoint_knots)
    before = _min_stages(path.knots, path.coefficients, 0.02).sum()
    after = _min_stages(split.knots, split.coefficients, 0.02).sum()
    assert after < 0.85 * before


@pytest.mark.parametrize("seed", range(3))
def test_chord_fit_and_its_bounds_against_dense_sampling(seed):
    """The distance of a cubic piece from its chord: _chord_fit matches the largest |q(t) - chord(t)| at
    200 001 points to 1e-8 (relative), and _chord_fit_bounds' lower bound |r(h/2)| and upper bound
    h²/4 max|c0 (t + h) + c1| bracket it."""
    rng = np.random.default_rng(seed)
    for _ in range(100):
        c0, c1, c2 = rng.normal(size=3) * np.array([10.0, 3.0, 1.0]) * rng.choice([1e-6, 1.0], size=3)
        h = rng.uniform(1e-3, 1.0)
        t = np.linspace(0.0, h, 200_001)
        q = ((c0 * t + c1) * t + c2) * t
        sampled = np.abs(q - t * q[-1] / h).max()
        fit = _chord_fit(c0, c1, c2, h, np.empty(2))
        lower, upper, margin = _chord_fit_bounds(c0, c1, c2, h)
        assert abs(fit - sampled) <= 1e-8 * sampled + 1e-15
        assert lower <= sampled * (1 + 1e-12) and sampled <= upper * (1 + 1e-12) + margin


def test_tight_corners_are_next_to_chords_that_got_knots():
    """A corner is tight where a chord next to it holds a knot that is not a waypoint."""
    knots = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    refined = np.array([0.0, 1.0, 2.0, 2.5, 3.0, 4.0, 4.25, 4.5, 5.0])  # chords 2 and 4 refined
    assert _tight_corners(knots, refined).tolist() == [False, True, True, True]  # waypoints 1-4
    assert not _tight_corners(knots, knots).any()
