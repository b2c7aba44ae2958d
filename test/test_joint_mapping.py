"""JointStateMapper: name matching, per-message checks, staleness, command order (pure Python, no ROS)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from robot_dynamics_ros.control.joint_mapping import JointStateMapper, RejectCode, index_map

MODEL = ("j1", "j2", "j3", "j4")


def test_reordered_message_lands_in_model_order_and_command_order():
    m = JointStateMapper(MODEL, command_joints=["j3", "j1", "j4", "j2"])
    assert m.update(["j4", "j2", "j1", "j3"], [4.0, 2.0, 1.0, 3.0], [40.0, 20.0, 10.0, 30.0]) is None
    assert m.ready
    np.testing.assert_array_equal(m.q, [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(m.qd, [10.0, 20.0, 30.0, 40.0])
    np.testing.assert_array_equal(m.to_command_list([100.0, 200.0, 300.0, 400.0]),
                                  [300.0, 100.0, 400.0, 200.0])


def test_ordering_is_cached_not_rebuilt():
    m = JointStateMapper(MODEL)
    names = ["j2", "j1", "j3", "j4"]
    m.update(names, [0.0] * 4, [0.0] * 4)
    first = m._last_ordering
    m.update(list(names), [1.0] * 4, [0.0] * 4)
    assert m._last_ordering is first
    m.update(MODEL, [1.0] * 4, [0.0] * 4)
    m.update(names, [1.0] * 4, [0.0] * 4)
    assert m._orderings[tuple(names)] is first and len(m._orderings) == 2


@pytest.mark.parametrize("kwargs, code, text", [
    (dict(names=["j1", "j2", "j3", "j4"], position=[0.0] * 3), RejectCode.LENGTH, "position has 3"),
    (dict(names=["j1", "j2", "j3", "j4"], position=[0.0] * 4, velocity=[0.0] * 2), RejectCode.LENGTH,
     "velocity has 2"),
    (dict(names=["j1", "j2", "j3", "j4"], position=[0.0] * 4, effort=[0.0] * 5), RejectCode.LENGTH,
     "effort has 5"),
    (dict(names=["j1", "j1", "j3", "j4"], position=[0.0] * 4), RejectCode.DUPLICATE, "'j1'"),
    (dict(names=["j1", "j2", "j3", "j4"], position=[0.0, math.nan, 0, 0]), RejectCode.NONFINITE,
     "position['j2'] = nan"),
    (dict(names=["j1", "j2", "j3", "j4"], position=[0.0, 0, math.inf, 0]), RejectCode.NONFINITE,
     "position['j3'] = inf"),
    (dict(names=["j1", "j2", "j3", "j4"], position=[0.0] * 4, velocity=[0, 0, 0, -math.inf]),
     RejectCode.NONFINITE, "velocity['j4'] = -inf"),
    (dict(names=["a", "b"], position=[0.0] * 2), RejectCode.NO_KNOWN_JOINT, "'a'"),
])
def test_bad_messages_rejected_with_reason_and_state_untouched(kwargs, code, text):
    m = JointStateMapper(MODEL)
    assert m.update(MODEL, [1.0, 2.0, 3.0, 4.0], [0.0] * 4) is None
    r = m.update(**kwargs)
    assert r is not None and r.code is code and text in str(r)
    np.testing.assert_array_equal(m.q, [1.0, 2.0, 3.0, 4.0])
    assert m.rejected[code] == 1 and m.accepted == 1


def test_unknown_names_ignored_and_reported():
    m = JointStateMapper(MODEL)
    assert m.update(["x", "j1", "j2", "j3", "j4", "finger"], [9, 1, 2, 3, 4, 9], [0.0] * 6) is None
    np.testing.assert_array_equal(m.q, [1, 2, 3, 4])
    assert m.unknown_names == {"x", "finger"}


def test_missing_joints_until_they_arrive_then_last_value_kept():
    m = JointStateMapper(MODEL)
    m.update(["j1", "j2"], [1.0, 2.0], [0.0, 0.0], arrival_ns=1)
    assert not m.ready and m.missing() == ["j3", "j4"] and m.age(0, 10) == math.inf
    m.update(["j4", "j3"], [4.0, 3.0], [0.0, 0.0], arrival_ns=2)
    assert m.ready and m.missing() == []
    m.update(["j2"], [-2.0], [0.5], arrival_ns=3)   # a partial message updates only its joint
    np.testing.assert_array_equal(m.q, [1.0, -2.0, 3.0, 4.0])
    np.testing.assert_array_equal(m.qd, [0.0, 0.5, 0.0, 0.0])


def test_nan_velocity_counts_as_missing_not_zero():
    m = JointStateMapper(MODEL, require_velocity=True)
    assert m.update(MODEL, [1.0, 2.0, 3.0, 4.0], [0.1, math.nan, 0.3, 0.4]) is None
    assert not m.ready and m.missing() == ["j2"]
    assert math.isnan(m.q[1]) and math.isnan(m.qd[1])   # j2 not taken at all
    assert m.q[0] == 1.0 and m.qd[2] == 0.3
    m.update(MODEL, [1.0, 2.0, 3.0, 4.0], [])  # no velocity at all: still not complete
    assert not m.ready
    m.update(["j2"], [2.5], [0.2])
    assert m.ready and m.q[1] == 2.5 and m.qd[1] == 0.2


def test_nan_velocity_allowed_when_positions_suffice():
    m = JointStateMapper(MODEL, require_velocity=False)
    assert m.update(MODEL, [1.0, 2.0, 3.0, 4.0], [math.nan] * 4) is None
    assert m.ready
    np.testing.assert_array_equal(m.q, [1, 2, 3, 4])
    assert np.isnan(m.qd).all()


def test_staleness_by_stamp_and_by_arrival_when_unstamped():
    m = JointStateMapper(MODEL)
    m.update(MODEL, [0.0] * 4, [0.0] * 4, stamp_ns=5_000_000_000, arrival_ns=100)
    assert m.age(now_stamp_ns=5_250_000_000, now_arrival_ns=10**12) == pytest.approx(0.25)
    m.update(MODEL, [0.0] * 4, [0.0] * 4, stamp_ns=0, arrival_ns=2_000_000_000)
    assert m.age(now_stamp_ns=10**15, now_arrival_ns=2_100_000_000) == pytest.approx(0.1)
    # the oldest joint decides
    m.update(["j1"], [0.0], [0.0], stamp_ns=0, arrival_ns=2_090_000_000)
    assert m.age(0, 2_100_000_000) == pytest.approx(0.1)


def test_out_of_order_stamp_rejected():
    m = JointStateMapper(MODEL)
    assert m.update(MODEL, [1.0] * 4, [0.0] * 4, stamp_ns=2000) is None
    r = m.update(MODEL, [5.0] * 4, [0.0] * 4, stamp_ns=1000)
    assert r.code is RejectCode.OUT_OF_ORDER and "'j1'" in r.detail
    np.testing.assert_array_equal(m.q, [1.0] * 4)
    assert m.update(MODEL, [5.0] * 4, [0.0] * 4, stamp_ns=3000) is None


def test_command_joint_errors_name_the_joint():
    with pytest.raises(ValueError, match="command joint 'j9'"):
        JointStateMapper(MODEL, command_joints=["j1", "j9"])
    with pytest.raises(ValueError, match="'j1' is listed twice"):
        JointStateMapper(MODEL, command_joints=["j1", "j1"])
    np.testing.assert_array_equal(index_map(["a", "b", "c"], ["c", "a"]), [2, 0])


def test_reset_forgets_state():
    m = JointStateMapper(MODEL)
    m.update(MODEL, [0.0] * 4, [0.0] * 4)
    m.reset()
    assert not m.ready and np.isnan(m.q).all()


_names = st.lists(st.sampled_from(["j1", "j2", "j3", "j4", "x", ""]), max_size=7)
_float = st.floats(allow_nan=True, allow_infinity=True, width=64)


@given(names=_names, pos=st.lists(_float, max_size=8), vel=st.lists(_float, max_size=8),
       eff=st.lists(_float, max_size=8), stamp=st.integers(0, 10**12))
def test_fuzz_never_raises_and_accepted_state_is_finite(names, pos, vel, eff, stamp):
    m = JointStateMapper(MODEL, require_velocity=True)
    r = m.update(names, pos, vel, eff, stamp_ns=stamp, arrival_ns=1)
    if r is None:
        have = ~np.isnan(m.q)
        assert np.isfinite(m.q[have]).all() and np.isfinite(m.qd[m._have_qd]).all()
        for name, p in zip(names, pos):
            if name in MODEL and have[MODEL.index(name)]:
                assert m.q[MODEL.index(name)] == p


class ReferenceMapper:
    """The documented semantics written the plain way (dicts, one joint at a time) for cross-checking."""

    def __init__(self, joints, require_velocity):
        self.j, self.req = list(joints), require_velocity
        self.q = {n: math.nan for n in joints}
        self.qd = {n: math.nan for n in joints}
        self.have_q, self.have_qd = set(), set()
        self.stamp = {n: 0 for n in joints}
        self.arrival = {n: -1 for n in joints}
        self.ready = False

    def update(self, names, pos, vel, stamp, arrival, now, max_future):
        m = len(names)
        if len(set(names)) != m:
            return RejectCode.DUPLICATE
        if len(pos) != m or len(vel) not in (0, m):
            return RejectCode.LENGTH
        known = [k for k, n in enumerate(names) if n in self.q]
        if not known:
            return RejectCode.NO_KNOWN_JOINT
        if not all(math.isfinite(p) for p in pos) or any(math.isinf(v) for v in vel):
            return RejectCode.NONFINITE
        if stamp and now is not None and stamp > now + max_future:
            return RejectCode.FUTURE
        if stamp and any(self.stamp[names[k]] > stamp for k in known):
            return RejectCode.OUT_OF_ORDER
        for k in known:
            n = names[k]
            v = vel[k] if vel else None
            if self.req and v is None:
                self.q[n] = pos[k]
                self.have_q.add(n)
                continue
            if self.req and math.isnan(v):
                continue
            self.q[n] = pos[k]
            self.have_q.add(n)
            if v is not None:
                self.qd[n] = v
                if not math.isnan(v):
                    self.have_qd.add(n)
                else:
                    self.have_qd.discard(n)
            self.stamp[n], self.arrival[n] = stamp, arrival
        if not self.ready:
            self.ready = len(self.have_q) == len(self.j) and (not self.req or len(self.have_qd) == len(self.j))
        return None

    def age(self, now, now_arrival):
        if not self.ready:
            return math.inf
        return max((now - self.stamp[n]) if self.stamp[n] else (now_arrival - self.arrival[n])
                   for n in self.j) * 1e-9


_msg = st.fixed_dictionaries({
    "names": st.sampled_from([["j1", "j2", "j3", "j4"], ["j3", "j1", "j4", "j2"], ["x", "j2", "j4", "j1", "j3"],
                              ["j2", "j4"], ["j1"], ["j1", "j1", "j2", "j3", "j4"]]),
    "bad": st.sampled_from([None, None, None, None, "nan_pos", "inf_vel", "nan_vel", "no_vel", "short"]),
    "dstamp": st.sampled_from([10, 10, 10, 0, -5, 10**12]),
    "zero_stamp": st.booleans(),
})


def _m(names=("j1", "j2", "j3", "j4"), bad=None, dstamp=10, zero_stamp=False):
    return {"names": list(names), "bad": bad, "dstamp": dstamp, "zero_stamp": zero_stamp}


@settings(max_examples=100)
@given(msgs=st.lists(_msg, min_size=1, max_size=25), req=st.booleans())
@example(msgs=[_m(), _m(dstamp=-5)], req=True)                                      # out of order, full
@example(msgs=[_m(), _m(names=("j2", "j4"), dstamp=-5), _m(dstamp=0)], req=True)    # partial, equal stamp
@example(msgs=[_m(), _m(bad="nan_vel"), _m(names=("j2", "j4")), _m(dstamp=10**12), _m()], req=True)
@example(msgs=[_m(bad="no_vel"), _m(bad="nan_vel"), _m(zero_stamp=True), _m(names=("j1",))], req=False)
def test_fast_and_slow_paths_match_the_plain_reference(msgs, req):
    mapper = JointStateMapper(MODEL, require_velocity=req)
    ref = ReferenceMapper(MODEL, req)
    stamp, clock = 1000, 1000
    for k, m in enumerate(msgs):
        names = m["names"]
        pos = [0.1 * k + 0.01 * i for i in range(len(names))]
        vel = [-0.2 * k - 0.03 * i for i in range(len(names))]
        if m["bad"] == "nan_pos":
            pos[0] = math.nan
        elif m["bad"] == "inf_vel":
            vel[-1] = math.inf
        elif m["bad"] == "nan_vel":
            vel[0] = math.nan
        elif m["bad"] == "no_vel":
            vel = []
        elif m["bad"] == "short":
            pos = pos[:-1]
        stamp = max(stamp + m["dstamp"], 1)
        clock += 10
        s = 0 if m["zero_stamp"] else stamp
        r = mapper.update(names, pos, vel, stamp_ns=s, arrival_ns=clock, now_stamp_ns=clock + 100,
                          max_future_ns=50)
        expected = ref.update(names, pos, vel, s, clock, clock + 100, 50)
        assert (r.code if r else None) == expected
        np.testing.assert_array_equal(mapper.q, [ref.q[n] for n in MODEL])
        np.testing.assert_array_equal(mapper.qd, [ref.qd[n] for n in MODEL])
        assert mapper.ready == ref.ready
        assert mapper.age(clock + 200, clock + 7) == ref.age(clock + 200, clock + 7)
        np.testing.assert_array_equal(mapper.stamp_ns, [ref.stamp[n] for n in MODEL])
