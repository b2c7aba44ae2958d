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
    assert m.unknown_name_count == 2 and m.last_unknown == ("x", "finger")
    m.update(["x", "j1", "j2", "j3", "j4", "finger"], [9, 1, 2, 3, 4, 9], [0.0] * 6)
    assert m.unknown_name_count == 4   # counted per message, never collected into a growing set


def test_caches_are_lru_bounded_and_unknown_names_not_stored():
    """100 000 messages whose names change every time: the caches stay at their bound and the good
    ordering, used every other message, is never evicted."""
    from robot_dynamics_ros.control.joint_mapping import JointStateFields

    m = JointStateMapper(MODEL, max_cached_orderings=8)
    good = JointStateFields(0, tuple(n.encode() for n in MODEL), (1.0, 2.0, 3.0, 4.0), (0.0,) * 4, ())
    first = None
    for k in range(50_000):
        junk = JointStateFields(0, tuple(f"u{k}_{i}".encode() for i in range(5)) + (b"j1",), (0.0,) * 6, (), ())
        assert m.update_fields(junk, arrival_ns=k) is None
        assert m.update_fields(good, arrival_ns=k) is None
        if first is None:
            first = m._orderings[good.names]
    assert len(m._orderings) <= 8
    assert m._orderings[good.names] is first
    assert m.unknown_name_count == 5 * 50_000
    assert not hasattr(m, "unknown_names")


def test_too_many_names_rejected_before_any_per_name_work():
    from robot_dynamics_ros.control.joint_mapping import MAX_NAMES

    m = JointStateMapper(MODEL)
    names = [f"n{i}" for i in range(MAX_NAMES + 1)]
    r = m.update(names, [0.0] * len(names))
    assert r.code is RejectCode.LENGTH and f"at most {MAX_NAMES}" in r.detail
    assert len(m._orderings) == 0


def test_plausibility_gates_reject_whole_message_and_count_per_joint():
    inf = math.inf
    m = JointStateMapper(MODEL, q_min=[-1, -1, -inf, -1], q_max=[1, 1, inf, 1], qd_max=[2, inf, 2, 2])
    assert m.update(MODEL, [0.5, -0.5, 100.0, 1.0], [1.0, 50.0, -2.0, 0.0]) is None  # on the bounds: in
    r = m.update(MODEL, [0.5, 1.0001, 0.0, 0.0], [0.0] * 4)
    assert r.code is RejectCode.IMPLAUSIBLE and "position['j2'] = 1.0001" in r.detail
    r = m.update(["j4", "j1", "j2", "j3"], [0.0] * 4, [0.0, -2.5, 0.0, 0.0])      # reordered: j1's speed
    assert r.code is RejectCode.IMPLAUSIBLE and "velocity['j1'] = -2.5" in r.detail
    r = m.update(["j3"], [1e300], [0.0])          # partial message: j3 is not gated in position
    assert r is None
    r = m.update(["j4"], [-1e300], [0.0])
    assert r.code is RejectCode.IMPLAUSIBLE and "'j4'" in r.detail
    assert m.update(MODEL, [0.0] * 4, [math.nan, 0.0, 0.0, 0.0]) is None    # NaN velocity = unknown
    r = m.update(MODEL, [0.0, math.nan, 0.0, 0.0], [0.0] * 4)
    assert r.code is RejectCode.NONFINITE
    assert m.rejected_joints == {"j2": 2, "j1": 1, "j4": 1}
    # j1's NaN velocity made it "missing" in that message (require_velocity): it keeps 0.5
    np.testing.assert_array_equal(m.q, [0.5, 0.0, 0.0, 0.0])


def test_backward_clock_jump_restarts_ordering_keeps_positions_and_is_stale():
    m = JointStateMapper(MODEL)
    assert not m.check_clock(5_000_000_000)
    m.update(MODEL, [1.0] * 4, [0.0] * 4, stamp_ns=5_000_000_000, arrival_ns=100, now_stamp_ns=5_000_000_000)
    assert not m.check_clock(5_000_500_000) and not m.check_clock(5_000_000_000)   # within the tolerance
    assert m.check_clock(1_000_000_000) and m.clock_jumps == 1
    assert m.ready and m.q[0] == 1.0
    assert m.age(1_000_000_000, 200) > 1e9        # stale until a new message
    assert m.update(MODEL, [2.0] * 4, [0.0] * 4, stamp_ns=1_000_000_000, arrival_ns=300,
                    now_stamp_ns=1_000_000_000) is None
    assert m.age(1_000_000_000, 300) == 0.0


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
    assert m.age(now_stamp_ns=5_250_000_000, now_arrival_ns=100 + 10_000_000) == pytest.approx(0.25)
    # a fresh stamp does not hide a message that waited: the larger of the two ages counts
    assert m.age(now_stamp_ns=5_000_000_000, now_arrival_ns=100 + 300_000_000) == pytest.approx(0.3)
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


def test_future_stamp_within_skew_does_not_block_correct_messages():
    m = JointStateMapper(MODEL)
    now = 10_000_000_000
    # 50 ms ahead (within the tolerated skew): accepted
    assert m.update(MODEL, [1.0] * 4, [0.0] * 4, stamp_ns=now + 50_000_000, now_stamp_ns=now,
                    max_future_ns=100_000_000) is None
    # the next correct message, stamped 1 ms later than now: in order (the future stamp counts as "now")
    assert m.update(MODEL, [2.0] * 4, [0.0] * 4, stamp_ns=now + 1_000_000, now_stamp_ns=now + 1_000_000,
                    max_future_ns=100_000_000) is None
    assert m.q[0] == 2.0
    # partial messages alike
    assert m.update(["j1"], [3.0], [0.0], stamp_ns=now + 90_000_000, now_stamp_ns=now + 2_000_000,
                    max_future_ns=100_000_000) is None
    assert m.update(["j1"], [4.0], [0.0], stamp_ns=now + 3_000_000, now_stamp_ns=now + 3_000_000,
                    max_future_ns=100_000_000) is None
    assert m.q[0] == 4.0
    # but an old stamp is still out of order
    r = m.update(["j1"], [5.0], [0.0], stamp_ns=now, now_stamp_ns=now + 4_000_000, max_future_ns=100_000_000)
    assert r.code is RejectCode.OUT_OF_ORDER


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
        if stamp and any(min(self.stamp[names[k]], now if now is not None else math.inf) > stamp
                         for k in known):
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
        return max(max(now - self.stamp[n], now_arrival - self.arrival[n]) if self.stamp[n]
                   else (now_arrival - self.arrival[n]) for n in self.j) * 1e-9


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


def test_names_as_utf8_bytes_map_like_their_text_and_bad_bytes_match_no_joint():
    """The wire reader hands names as UTF-8 bytes, looked up without decoding: the state, the counters and
    the texts of the log lines are those of the same names as ``str``; a name whose bytes are not UTF-8
    (b"j1\\xff") matches no joint and is shown with a replacement character."""
    text = JointStateMapper(MODEL)
    raw = JointStateMapper(MODEL)
    names = ["x", "j2", "j1", "j3", "j4", "é"]
    for m, ns in ((text, names), (raw, [n.encode("utf-8") for n in names])):
        assert m.update(ns, [9, 2, 1, 3, 4, 9], [0.0] * 6) is None
    np.testing.assert_array_equal(raw.q, [1, 2, 3, 4])
    np.testing.assert_array_equal(raw.q, text.q)
    assert raw.last_unknown == text.last_unknown == ("x", "é") and raw.unknown_name_count == 2
    bad = [b"j1\xff", b"j2", b"j3", b"j4"]
    assert raw.update(bad, [5.0, 6.0, 7.0, 8.0], [0.0] * 4) is None
    np.testing.assert_array_equal(raw.q, [1, 6, 7, 8])          # j1 untouched: its name did not match
    assert raw.last_unknown == ("j1\ufffd",)
    r = raw.update([b"j2", b"j2\xff", b"j2"], [0.0] * 3, [0.0] * 3)
    assert r.code is RejectCode.DUPLICATE and "['j2']" in r.detail
    r = raw.update([b"j1", b"j2", b"j3", b"j4"], [0.0, math.nan, 0.0, 0.0], [0.0] * 4)
    assert r.code is RejectCode.NONFINITE and "position['j2'] = nan" in r.detail and r.key == "NONFINITE:position:j2"
