"""JointPath (retiming/path.py): the C² spline against scipy's CubicSpline, gridpoints, waypoint preparation."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.interpolate import CubicSpline

from robot_dynamics_ros.retiming.path import (JointPath, gridpoints_for, prepare_waypoints, remove_duplicates,
                                              split_at_reversals)


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


def test_remove_duplicates_warns_and_keeps_first():
    wp = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [2.0, 1.0]])
    with pytest.warns(UserWarning, match=r"dropped 3 .*index 1, 3, 4"):
        kept, idx = remove_duplicates(wp)
    np.testing.assert_array_equal(idx, [0, 2, 5])
    np.testing.assert_array_equal(kept, wp[[0, 2, 5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        remove_duplicates(wp[[0, 2, 5]])  # nothing to drop: no warning


def test_reversal_split_and_prepare_waypoints():
    # 1-DoF there and back, and a 2-D path with a 90° corner (kept) and a U-turn (split)
    line = np.array([[0.0], [1.0], [2.0], [1.5], [0.0]])
    assert split_at_reversals(line) == [(0, 2), (2, 4)]
    corner = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.9, 0.0]])
    assert split_at_reversals(corner) == [(0, 2), (2, 3)]
    assert split_at_reversals(corner, cos_threshold=-1.0) == [(0, 3)]
    wp = np.array([[0.0], [1.0], [1.0], [2.0], [1.0]])
    kept, idx, segments, dropped = prepare_waypoints(wp)
    np.testing.assert_array_equal(idx, [0, 1, 3, 4])
    np.testing.assert_array_equal(dropped, [2])
    assert segments == [(0, 2), (2, 3)]
    kept, idx, segments, dropped = prepare_waypoints(np.zeros((3, 2)))
    assert kept.shape == (1, 2) and segments == [(0, 0)]


def test_bad_inputs():
    with pytest.raises(ValueError, match="at least 2"):
        JointPath.from_waypoints(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="duplicates"):
        JointPath.from_waypoints(np.zeros((2, 3)))
