"""Fuzz tests of JointStateMapper, the one place JointState messages become model-order arrays (issue 7).

Hypothesis generates whole messages (names from the model and random ones, any lengths, NaN/Inf/huge
values, empty arrays, duplicate names, any stamps). Properties checked against an independent oracle
written here (a dict of name -> value built from the message, nothing from the mapper):

* ``update`` never raises; it either accepts or returns a Rejection whose text names the field;
* a rejected message changes no state at all;
* an accepted message's positions land at the model index of their *name* (never their position);
* the state never holds a non-finite position for a reported joint;
* after any sequence of bad messages, one good complete message makes the mapper ready again with
  exactly that message's values (recovery);
* the cache of name orderings stays bounded whatever the input.

Profiles: ``ci`` (bounded examples, default) and ``long`` (``make test-long``), see test/conftest.py.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from robot_dynamics_ros.control.joint_mapping import JointStateMapper, RejectCode

PANDA = tuple(f"panda_joint{i}" for i in range(1, 8))

any_float = st.floats(allow_nan=True, allow_infinity=True, width=64)
huge_or_nan = st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 0.0, 5e-324])
value = st.one_of(any_float, huge_or_nan, st.floats(-4.0, 4.0))
name = st.one_of(st.sampled_from(PANDA), st.sampled_from(["panda_finger_joint1", "", "joint1", "PANDA_JOINT1"]),
                 st.text(max_size=12))
stamp_ns = st.one_of(st.just(0), st.integers(-(2**31) * 10**9, 2**31 * 10**9 + 2**32 - 1))


@st.composite
def joint_state(draw, good_probability: float = 0.3):
    """(names, position, velocity, effort, stamp_ns): sometimes well-formed, mostly not."""
    if draw(st.floats(0, 1)) < good_probability:
        names = draw(st.permutations(PANDA))
        k = len(names)
        pos = draw(st.lists(st.floats(-3.0, 3.0), min_size=k, max_size=k))
        vel = draw(st.one_of(st.just([]), st.lists(st.floats(-5.0, 5.0), min_size=k, max_size=k)))
    else:
        names = draw(st.lists(name, max_size=10))
        k = len(names)
        length = st.one_of(st.just(k), st.integers(0, 12))
        pos = draw(st.lists(value, min_size=(n := draw(length)), max_size=n))
        vel = draw(st.lists(value, min_size=(n := draw(length)), max_size=n))
    eff = draw(st.one_of(st.just([]), st.lists(value, min_size=len(names), max_size=len(names))))
    return list(names), pos, vel, eff, draw(stamp_ns)


def _snapshot(m: JointStateMapper):
    return (m.q.copy(), m.qd.copy(), m.effort.copy(), m.stamp_ns.copy(), m.arrival_ns.copy(), m.ready,
            tuple(m.missing()))


def _same(a, b) -> bool:
    return all(np.array_equal(x, y, equal_nan=True) if isinstance(x, np.ndarray) else x == y
               for x, y in zip(a, b))


@pytest.mark.parametrize("require_velocity", [True, False])
@given(messages=st.lists(joint_state(), min_size=1, max_size=25))
def test_any_message_sequence_never_raises_and_rejections_change_nothing(messages, require_velocity):
    m = JointStateMapper(PANDA, require_velocity=require_velocity, max_cached_orderings=8)
    index = {n: i for i, n in enumerate(PANDA)}
    for t, (names, pos, vel, eff, stamp) in enumerate(messages, start=1):
        before = _snapshot(m)
        rejection = m.update(names, pos, vel, eff, stamp_ns=stamp, arrival_ns=t)
        note(f"{names} {pos} {vel} {stamp} -> {rejection}")
        if rejection is not None:
            assert isinstance(rejection.code, RejectCode)
            assert str(rejection)  # a one-line text for the rate-limited log
            assert _same(before, _snapshot(m)), "a rejected message changed the state"
            continue
        # accepted: every known name's position is finite and stored at that name's model index,
        # unless its velocity is unknown (NaN/absent) while velocities are required
        for k, n in enumerate(names):
            if n not in index:
                continue
            assert math.isfinite(pos[k])
            vel_known = bool(vel) and not math.isnan(vel[k])
            if vel_known or not require_velocity:
                assert m.q[index[n]] == pos[k], f"{n}: stored {m.q[index[n]]}, sent {pos[k]}"
            if vel_known:
                assert m.qd[index[n]] == vel[k]
        # no known duplicates, lengths consistent
        assert len(set(names)) == len(names)
        assert len(pos) == len(names) and len(vel) in (0, len(names)) and len(eff) in (0, len(names))
    reported = ~np.isnan(m.q)
    assert np.isfinite(m.q[reported]).all(), "a non-finite position entered the state"
    assert len(m._orderings) <= 8, "the ordering cache grew past its bound"
    if m.ready:
        assert m.missing() == [] and np.isfinite(m.q).all()


@given(bad=st.lists(joint_state(good_probability=0.0), max_size=20), order=st.permutations(PANDA),
       q=st.lists(st.floats(-3.0, 3.0), min_size=7, max_size=7))
def test_good_message_after_garbage_recovers(bad, order, q):
    """After any run of malformed messages (unstamped, as from a driver without a clock), one complete
    good message makes the mapper ready with exactly its values, matched by name."""
    m = JointStateMapper(PANDA, command_joints=PANDA[::-1])
    for t, (names, pos, vel, eff, _) in enumerate(bad):
        m.update(names, pos, vel, eff, stamp_ns=0, arrival_ns=t)
    by_name = dict(zip(order, q))
    assert m.update(list(order), q, [0.0] * 7, [], stamp_ns=0, arrival_ns=10**6) is None
    assert m.ready and m.missing() == []
    np.testing.assert_array_equal(m.q, [by_name[n] for n in PANDA])
    np.testing.assert_array_equal(m.qd, np.zeros(7))
    # model order -> command order, by name
    tau = np.arange(7.0)
    np.testing.assert_array_equal(m.to_command_list(tau.tolist()), tau[::-1])


@given(order=st.permutations(PANDA), field=st.sampled_from(["position", "velocity"]),
       k=st.integers(0, 6), bad=st.sampled_from([math.nan, math.inf, -math.inf]))
def test_non_finite_is_rejected_naming_the_field_and_joint(order, field, k, bad):
    m = JointStateMapper(PANDA)
    pos, vel = [0.1] * 7, [0.0] * 7
    (pos if field == "position" else vel)[k] = bad
    r = m.update(list(order), pos, vel, stamp_ns=0, arrival_ns=1)
    if field == "velocity" and math.isnan(bad):
        # NaN velocity = "unknown" (joint_state_broadcaster): that joint counts as missing, not zero
        assert r is None and m.missing() == [order[k]] and not m.ready
        return
    assert r is not None and r.code is RejectCode.NONFINITE
    assert field in r.detail and order[k] in r.detail


def test_stale_then_fresh_by_stamp_and_by_arrival():
    """Age by the larger of stamp age and arrival age when stamped, by arrival time when the stamp is zero;
    fresh data resets it."""
    m = JointStateMapper(PANDA)
    assert m.age(0, 0) == math.inf  # nothing yet: infinitely stale
    assert m.update(list(PANDA), [0.0] * 7, [0.0] * 7, stamp_ns=5_000_000_000, arrival_ns=0) is None
    assert m.age(5_250_000_000, 10_000_000) == pytest.approx(0.25)
    assert m.age(5_000_000_000, 10**12) == pytest.approx(1000.0)   # fresh stamp, but it waited 1000 s
    # out-of-order stamp: rejected, the age still counts from the newest stamp
    r = m.update(list(PANDA), [1.0] * 7, [0.0] * 7, stamp_ns=4_000_000_000, arrival_ns=0)
    assert r is not None and r.code is RejectCode.OUT_OF_ORDER and m.q[0] == 0.0
    m2 = JointStateMapper(PANDA)
    m2.update(list(PANDA), [0.0] * 7, [0.0] * 7, stamp_ns=0, arrival_ns=1_000_000_000)
    assert m2.age(123, 1_500_000_000) == pytest.approx(0.5)
    m2.update(list(PANDA), [0.0] * 7, [0.0] * 7, stamp_ns=0, arrival_ns=2_000_000_000)
    assert m2.age(123, 2_000_000_000) == 0.0


@given(ahead_s=st.floats(0.2, 1e6), order=st.permutations(PANDA))
def test_future_stamp_is_rejected_and_does_not_block_later_messages(ahead_s, order):
    """A stamp from a wrong clock (ahead of the node clock by more than the tolerance) is rejected, and
    later correctly stamped messages are still accepted (else the node would never recover)."""
    m = JointStateMapper(PANDA)
    now = 1_700_000_000 * 10**9
    future = now + int(ahead_s * 1e9)
    r = m.update(list(order), [0.5] * 7, [0.0] * 7, stamp_ns=future, arrival_ns=1, now_stamp_ns=now,
                 max_future_ns=100_000_000)
    assert r is not None and r.code is RejectCode.FUTURE and "ahead" in r.detail
    assert not m.ready
    assert m.update(list(order), [0.1] * 7, [0.0] * 7, stamp_ns=now + 1000, arrival_ns=2,
                    now_stamp_ns=now + 2000, max_future_ns=100_000_000) is None
    assert m.ready and (m.q == 0.1).all()
    # within the tolerated skew: accepted
    assert m.update(list(order), [0.2] * 7, [0.0] * 7, stamp_ns=now + 50_000_000, arrival_ns=3,
                    now_stamp_ns=now + 3000, max_future_ns=100_000_000) is None
