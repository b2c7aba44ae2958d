"""The retimer's final check of its own output (``peak_fractions`` then ``exceeded_limit``): values built by
hand against the limits, including NaN samples and zero / infinite limits. ``exceeded_limit`` passes a result
on its peak fractions alone, so those must see every sample the check would refuse (a NaN in a limited joint)."""
from __future__ import annotations

import numpy as np

from robot_dynamics_ros.retiming.output import exceeded_limit, peak_fractions
from robot_dynamics_ros.retiming.request import RetimeResult, RetimeStatus

LIMITS = (np.array([1.0, 2.0]), np.array([1.0, np.inf]), np.array([0.0, 5.0]))  # velocity, acceleration, effort


def _result(qd, qdd, tau):
    t = 0.01 * np.arange(qd.shape[0])
    res = RetimeResult(True, RetimeStatus.SUCCESS, "", ("a", "b"), t, np.zeros_like(qd), qd, qdd, tau)
    res.peak_fraction = peak_fractions(res, LIMITS)
    return res


def _arrays():
    qd = np.array([[0.5, 1.0], [0.9, -1.5], [0.0, 0.2]])
    qdd = np.array([[0.5, 100.0], [-1.0, 7.0], [0.2, 0.0]])  # joint b: no acceleration limit
    tau = np.array([[0.0, 4.0], [0.0, -5.0], [0.0, 1.0]])    # joint a: zero effort limit, value 0
    return qd, qdd, tau


def test_a_result_within_its_limits_passes():
    res = _result(*_arrays())
    assert res.peak_fraction["velocity"] == 0.9 and res.peak_fraction["acceleration"] == 1.0
    assert res.peak_fraction["effort"] == 1.0
    assert exceeded_limit(res, LIMITS, 1e-4) is None


def test_the_first_exceeded_limit_is_named_with_joint_fraction_and_time():
    qd, qdd, tau = _arrays()
    qd[2, 1] = 2.01
    tau[1, 0] = 0.1  # a joint with a zero limit that moves: infinitely over
    res = _result(qd, qdd, tau)
    assert exceeded_limit(res, LIMITS, 1e-4) == ("velocity", 1, 1.005, 0.02)
    qd[2, 1] = 0.0
    kind, j, frac, _ = exceeded_limit(_result(qd, qdd, tau), LIMITS, 1e-4)
    assert (kind, j, frac) == ("effort", 0, np.inf)


def test_a_nan_sample_in_a_limited_joint_is_refused_and_reported():
    qd, qdd, tau = _arrays()
    qdd[1, 0] = np.nan
    res = _result(qd, qdd, tau)
    assert np.isnan(res.peak_fraction["acceleration"])
    kind, j, frac, at = exceeded_limit(res, LIMITS, 1e-4)
    assert (kind, j, at) == ("acceleration", 0, 0.01) and np.isnan(frac)
    # in a joint without that limit it is not a limit's concern
    qd, qdd, tau = _arrays()
    qdd[1, 1] = np.nan
    res = _result(qd, qdd, tau)
    assert res.peak_fraction["acceleration"] == 1.0 and exceeded_limit(res, LIMITS, 1e-4) is None
