"""Fuzz tests of the retiming core (issue 7): hypothesis-generated retiming requests against ``Retimer``.

* Any request — waypoint arrays of any shape with NaN/Inf/huge values, unknown or duplicate joint names,
  out-of-range options — returns a :class:`RetimeResult` (never raises); a failure has a message and
  empty arrays.
* Every failure carries its reason: a status other than success and a message of that status's form.
* A successful result is finite, starts at t = 0 with strictly increasing times, passes through the first
  and last waypoint, and respects the velocity and effort limits read here from the URDF by Pinocchio
  (``model.velocityLimit`` / ``model.effortLimit``, not from our own parser) to 1 + 1e-3, efforts
  recomputed by Pinocchio's RNEA; a valid request fails only where Pinocchio confirms that gravity alone
  exceeds the margin-scaled effort limit on the path.
* 100 000 waypoints are retimed (or refused with a reason) in bounded time; the result agrees with the
  same geometric path given by 100 waypoints.
"""
from __future__ import annotations

import math
import time

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from robot_dynamics_testing.reference import ProbeRobot, request_path

PANDA = ProbeRobot.panda()
NAMES = list(PANDA.joint_names)


@pytest.fixture(scope="module")
def retimer():
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.retiming.retimer import Retimer

    model = RobotModel.from_urdf(PANDA.urdf, held_joints=PANDA.held_joints)
    r = Retimer(model)
    r.warmup()
    return r


@pytest.fixture(scope="module")
def pin_arm():
    """Pinocchio model of the arm (fingers locked at the held values), built from the URDF by Pinocchio."""
    from robot_dynamics_testing.retiming_cases import pinocchio_reference

    model = pinocchio_reference("panda", payload=False)
    assert list(model.names[1:]) == NAMES
    return model


#: the form of the message of every failure status (the reason must be stated, whatever the request)
FAILURE_FORMS = {
    "invalid_request": r"^(waypoints?|joint_names|options|start_velocity|end_velocity|hold|path_tolerance|sample_period|"
                       r"the request needs|\d+ waypoints ×)",
    "position_limit": r"^(waypoint \d+: joint '.+' position .* is outside its position limits|the path between)",
    "velocity_limit": r"^(start|end)_velocity: joint '.+' at .* rad/s exceeds its velocity limit",
    "gravity_exceeds_torque": r"(^waypoint \d+|^between waypoints \d+ and \d+ .*): gravity alone needs .* N·m at "
                              r"joint '.+', above its torque limit",
    "infeasible": r"^(no velocity profile satisfies the limits between waypoints|the path cannot be traversed)",
    "start_not_controllable": r"^start_velocity: path speed .* is outside the controllable range",
    "limit_exceeded": r"^the timing found exceeds the (velocity|acceleration|effort|jerk) limit: ",
    "solver_failure": r"^the solver found no velocity profile between waypoints \d+ and \d+ .* although stopping",
}


def _assert_reason(res):
    import re

    assert res.status.value in FAILURE_FORMS, res.status
    assert re.search(FAILURE_FORMS[res.status.value], res.message), (res.status, res.message)


@pytest.fixture(scope="module")
def urdf_limits():
    """(lower, upper, velocity, effort) of the 7 arm joints, from Pinocchio's own URDF parser."""
    m = pin.buildModelFromUrdf(PANDA.urdf)
    iq = [m.joints[m.getJointId(n)].idx_q for n in NAMES]
    iv = [m.joints[m.getJointId(n)].idx_v for n in NAMES]
    return (m.lowerPositionLimit[iq], m.upperPositionLimit[iq], m.velocityLimit[iv], m.effortLimit[iv])


def _options(**kw):
    from robot_dynamics_ros.retiming.request import RetimeOptions

    return RetimeOptions(**kw)


fuzz_value = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-3.0, 3.0),
                       st.sampled_from([math.nan, math.inf, -math.inf, 1e308, 0.0]))
fuzz_names = st.one_of(st.just(NAMES), st.permutations(NAMES).map(list),
                       st.lists(st.one_of(st.sampled_from(NAMES + ["panda_finger_joint1"]), st.text(max_size=6)),
                                max_size=9))
option_value = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(0.05, 1.0),
                         st.sampled_from([0.0, -1.0, 1.0, 2.0]))


@given(data=st.data())
def test_any_request_returns_a_result_never_raises(retimer, data):
    names = data.draw(fuzz_names)
    w = data.draw(st.integers(0, 8))
    k = data.draw(st.one_of(st.just(len(names)), st.integers(0, 9)))
    wp = data.draw(st.lists(st.lists(fuzz_value, min_size=k, max_size=k), min_size=w, max_size=w))
    wp = np.array(wp, dtype=float).reshape(w, k)
    v0 = data.draw(st.one_of(st.none(), st.lists(fuzz_value, min_size=k, max_size=k)))
    vs = data.draw(option_value)
    if 0.0 < vs < 0.05:  # a valid but tiny scale only makes the output long (many samples): not here
        vs = 0.05
    opts = _options(velocity_scale=vs, acceleration_scale=data.draw(option_value),
                    torque_margin=data.draw(option_value),
                    gridpoints=data.draw(st.one_of(st.none(), st.integers(-5, 3000))),
                    sample_period=data.draw(st.one_of(st.none(), st.just(0.0), st.floats(0.005, 1.0),
                                                      st.sampled_from([-0.01, math.nan, math.inf]))))
    res = retimer.retime(wp, joint_names=names, start_velocity=v0, options=opts)
    note(f"{res.status}: {res.message}")
    if not res.success:
        _assert_reason(res)
        assert res.t.shape == (0,) and res.q.shape[0] == 0
        return
    assert np.isfinite(res.q).all() and np.isfinite(res.qd).all() and np.isfinite(res.tau).all()
    assert res.t[0] == 0.0 and np.all(np.diff(res.t) > 0)


@given(w=st.integers(2, 12), seed=st.integers(0, 2**32 - 1), vs=st.floats(0.2, 1.0),
       margin=st.floats(0.5, 1.0), order=st.permutations(NAMES))
def test_valid_requests_respect_the_urdf_limits(retimer, urdf_limits, pin_arm, w, seed, vs, margin, order):
    lower, upper, vel, eff = urdf_limits
    rng = np.random.default_rng(seed)
    lo, hi = np.maximum(lower, -2.5) + 0.05, np.minimum(upper, 2.5) - 0.05
    wp = PANDA.base_pose + rng.uniform(-0.4, 0.4, size=(w, 7))
    wp = np.clip(wp, lo, hi)
    perm = [NAMES.index(n) for n in order]
    res = retimer.retime(wp[:, perm], joint_names=list(order),
                         options=_options(velocity_scale=vs, torque_margin=margin, sample_period=0.002))
    note(f"{res.status}: {res.message}")
    data = pin_arm.createData()
    if not res.success:
        # the only reason a valid request may fail: gravity alone above margin × effort on the path
        # (the path is within path_tolerance of the polyline: sampled there, 1 % slack for the offset)
        assert res.status.value == "gravity_exceeds_torque", res.message
        _assert_reason(res)
        t = np.linspace(0.0, 1.0, 50)[:, None]
        poly = np.concatenate([a + t * (b - a) for a, b in zip(wp[:-1], wp[1:])])
        g = np.array([pin.computeGeneralizedGravity(pin_arm, data, q) for q in poly])
        assert (np.abs(g) / (margin * eff)).max() > 0.99, res.message
        return
    idx = [list(res.joint_names).index(n) for n in NAMES]
    q, qd, qdd = res.q[:, idx], res.qd[:, idx], res.qdd[:, idx]
    np.testing.assert_allclose(q[0], wp[0], atol=1e-6)
    np.testing.assert_allclose(q[-1], wp[-1], atol=1e-6)
    assert (q >= lower - 1e-6).all() and (q <= upper + 1e-6).all()
    # the limits hold on the whole output (the solver bounds every row on the whole stage)
    tau = np.array([pin.rnea(pin_arm, data, a, b, c) for a, b, c in zip(q, qd, qdd)])
    assert (np.abs(qd) <= vs * vel * (1 + 1e-3)).all(), np.abs(qd / (vs * vel)).max()
    assert (np.abs(tau) <= margin * eff * (1 + 1e-3)).all(), np.abs(tau / (margin * eff)).max()
    assert res.max_path_deviation <= 1e-3


def test_100000_waypoints_in_bounded_time_and_consistent_with_100(retimer, urdf_limits):
    lower, upper, vel, eff = urdf_limits
    opts = _options(torque_margin=0.9, sample_period=0.01)
    coarse = retimer.retime(request_path(0, 100), joint_names=NAMES, options=opts)
    t0 = time.perf_counter()
    fine = retimer.retime(request_path(0, 100_000), joint_names=NAMES, options=opts)
    elapsed = time.perf_counter() - t0
    assert coarse.success, coarse.message
    assert fine.success, fine.message
    assert elapsed < 30.0, f"100 000 waypoints took {elapsed:.1f} s"
    # the same geometric path (the 100-waypoint spline is a coarser fit of it): durations within 2 %
    assert fine.duration == pytest.approx(coarse.duration, rel=0.02)
    assert np.isfinite(fine.q).all() and np.isfinite(fine.tau).all()
    assert (np.abs(fine.qd) <= vel * (1 + 1e-3)).all()


def test_tiny_sample_period_is_refused_before_allocating(retimer):
    """sample_period = 1e-7 s on a ~1.6 s trajectory would be 16 million samples (~4 GB, a minute of
    work inside the service): refused with a reason instead (found by fuzzing the options)."""
    t0 = time.perf_counter()
    res = retimer.retime(request_path(0, 10), joint_names=NAMES, options=_options(sample_period=1e-7))
    assert time.perf_counter() - t0 < 5.0
    assert not res.success and "sample_period" in res.message and res.status.value == "invalid_request"
    ok = retimer.retime(request_path(0, 10), joint_names=NAMES, options=_options(sample_period=1e-5))
    assert ok.success and ok.t.size == pytest.approx(ok.duration / 1e-5, abs=2)


def test_gravity_above_the_limit_between_gridpoints_is_named(retimer, urdf_limits, pin_arm):
    """A case hypothesis found: gravity alone exceeds 0.5 × effort only between the collocation points of
    one stage; the answer names gravity (not a bare "infeasible") and Pinocchio confirms it at the
    reported place."""
    import re

    lower, upper, vel, eff = urdf_limits
    rng = np.random.default_rng(7178997)
    lo, hi = np.maximum(lower, -2.5) + 0.05, np.minimum(upper, 2.5) - 0.05
    wp = np.clip(PANDA.base_pose + rng.uniform(-0.4, 0.4, size=(10, 7)), lo, hi)
    res = retimer.retime(wp, joint_names=NAMES, options=_options(torque_margin=0.5, sample_period=0.002))
    assert res.status.value == "gravity_exceeds_torque", res.message
    _assert_reason(res)
    m = re.search(r"gravity alone needs (\S+) N·m at joint '(\S+)'", res.message)
    j = NAMES.index(m.group(2))
    t = np.linspace(0.0, 1.0, 200)[:, None]
    poly = np.concatenate([a + t * (b - a) for a, b in zip(wp[:-1], wp[1:])])
    data = pin_arm.createData()
    g = np.array([pin.computeGeneralizedGravity(pin_arm, data, q)[j] for q in poly])
    assert np.abs(g).max() > 0.5 * eff[j]
