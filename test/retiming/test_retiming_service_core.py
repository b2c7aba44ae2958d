"""The retiming service's ROS-free request handling (robot_dynamics_ros.retiming.service), without rclpy.

Requests are plain objects shaped like RetimeTrajectory requests; the expected trajectories come from
Retimer.retime called directly with the arguments the request stands for.
"""
from __future__ import annotations

import math
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from robot_dynamics_ros.retiming import service as core
from robot_dynamics_ros.retiming.request import RetimeOptions
from robot_dynamics_ros.retiming.retimer import Retimer
from robot_dynamics_testing.retiming_cases import load_model, smooth_waypoints
from robot_dynamics_testing.service_requests import PARAMS, request  # noqa: F401


class NoRetimer:
    """Stands for a retimer that must not be reached (a refusal before any work)."""

    def retime(self, *args, **kwargs):
        raise AssertionError("the retimer was called")


@pytest.fixture(scope="module")
def panda():
    model = load_model("panda", payload=False)
    retimer = Retimer(model)
    retimer.warmup()
    return model, retimer


def test_zero_fields_take_the_defaults_and_nonzero_fields_the_request():
    params = dict(PARAMS, default_velocity_scaling_factor=0.25, default_acceleration_scaling_factor=0.5,
                  default_torque_margin=0.9, default_path_tolerance=2e-3, default_sample_period=0.01,
                  default_gridpoints=300, friction=True)
    got = core.options_from_request(request(["a"], [[0.0]]), params)
    assert got == RetimeOptions(velocity_scale=0.25, acceleration_scale=0.5, torque_margin=0.9,
                                path_tolerance=2e-3, sample_period=0.01, gridpoints=300, friction=True)
    got = core.options_from_request(request(["a"], [[0.0]], velocity_scaling=0.7, acceleration_scaling=0.3,
                                            torque_margin=0.8, path_tolerance=5e-4, sample_period=0.002,
                                            gridpoints=150, jerk_scaling=0.5), params)
    assert got == RetimeOptions(velocity_scale=0.7, acceleration_scale=0.3, torque_margin=0.8,
                                path_tolerance=5e-4, sample_period=0.002, gridpoints=150, friction=True,
                                jerk_scale=0.5)
    # 0 in the parameters too: the retimer's own defaults (one sample per gridpoint, its gridpoint rule)
    got = core.options_from_request(request(["a"], [[0.0]]), PARAMS)
    assert got.sample_period is None and got.gridpoints is None


def test_measured_positions_keep_only_known_finite_joints_until_the_timeout():
    m = core.MeasuredPositions(["j1", "j2", "j3"])
    m.update(["other", "j2", "j1", "j3"], [9.0, 0.2, 0.1, math.nan], now_s=10.0)
    assert m.hold(["j1", "j2", "j3", "other"], now_s=10.5, timeout_s=0.5) == ({"j1": 0.1, "j2": 0.2},
                                                                             ["j3", "other"])
    m.update(["j1"], [0.3], now_s=10.4)
    assert m.hold(["j2", "j1"], now_s=10.6, timeout_s=0.5) == ({"j1": 0.3}, ["j2"])


@pytest.mark.parametrize("names, rows, fields, params, expected", [
    ([], [[]], {}, {}, "path.joint_names is empty"),
    (["panda_joint1"], [], {}, {}, "path.points is empty"),
    (["panda_joint1"], [[0.0]] * 4, {}, {"max_waypoints": 3}, "4 waypoints exceed max_waypoints 3"),
    (["panda_joint1", "panda_joint2"], [[0.0, 0.0], [0.0]], {}, {},
     "path.points[1].positions has 1 values for 2 joint_names"),
    (["panda_joint1"], [[0.0], [0.1]], {"end_velocity": [0.0, 0.0]}, {},
     "end_velocity: 2 values for 1 joint_names"),
])
def test_refusals_before_any_work(panda, names, rows, fields, params, expected):
    model, _ = panda
    answer = core.handle_request(request(names, rows, **fields), NoRetimer(), model, dict(PARAMS, **params),
                                 core.MeasuredPositions(model.joint_names), now_s=0.0)
    assert not answer.success and expected in answer.message, answer.message
    assert answer.t.shape == (0,) and answer.joint_names == ()


def test_no_model_yet_is_refused():
    answer = core.handle_request(request(["a"], [[0.0]]), None, None, PARAMS, core.MeasuredPositions(), 0.0)
    assert not answer.success and answer.message.startswith("no robot model loaded yet")


def test_full_request_gives_what_the_retimer_gives(panda):
    model, retimer = panda
    wp = smooth_waypoints(model, 6, seed=1)
    names = list(model.joint_names)[::-1]
    answer = core.handle_request(request(names, wp[:, ::-1], sample_period=0.01, velocity_scaling=0.5),
                                 retimer, model, PARAMS, core.MeasuredPositions(model.joint_names), now_s=0.0)
    ref = retimer.retime(wp, options=RetimeOptions(velocity_scale=0.5, sample_period=0.01))
    assert answer.success and ref.success, answer.message
    assert answer.joint_names == tuple(model.joint_names)
    for got, want in ((answer.t, ref.t), (answer.q, ref.q), (answer.qd, ref.qd), (answer.qdd, ref.qdd),
                      (answer.tau, ref.tau)):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert answer.duration == pytest.approx(ref.duration, rel=1e-12)
    assert answer.max_path_deviation == pytest.approx(ref.max_path_deviation, rel=1e-9)
    assert answer.message.startswith(ref.message) and "peak fraction of limits: velocity" in answer.message
    assert "held" not in answer.message


def test_partial_request_holds_the_fresh_measurement_or_names_the_joints(panda):
    model, retimer = panda
    names = list(model.joint_names)
    wp = smooth_waypoints(model, 5, seed=2)
    q_meas = smooth_waypoints(model, 2, seed=9)[1]
    measured = core.MeasuredPositions(names)
    measured.update(names, q_meas, now_s=100.0)
    req = request(names[:3], wp[:, :3], sample_period=0.01)
    answer = core.handle_request(req, retimer, model, PARAMS, measured, now_s=100.2)
    ref = retimer.retime(wp[:, :3], joint_names=names[:3], hold=dict(zip(names[3:], q_meas[3:])),
                         options=RetimeOptions(sample_period=0.01))
    assert answer.success, answer.message
    np.testing.assert_allclose(answer.q, ref.q, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(answer.q[:, 3:], np.broadcast_to(q_meas[3:], answer.q[:, 3:].shape))
    assert f"held at the measured state: {sorted(names[3:])}" in answer.message
    # the same measurement 0.6 s later is stale (timeout 0.5 s): refused, naming the joints and the topic
    stale = core.handle_request(req, NoRetimer(), model, PARAMS, measured, now_s=100.6,
                                state_topic="/r1/joint_states")
    assert not stale.success
    assert stale.message.startswith(f"joints {names[3:]} are not in path.joint_names and have no measured "
                                    f"position on /r1/joint_states within joint_state_timeout 0.5 s")


def test_output_over_max_samples_is_refused_with_the_retimers_duration(panda):
    model, retimer = panda
    wp = smooth_waypoints(model, 4, seed=3)
    answer = core.handle_request(request(model.joint_names, wp, sample_period=0.001), retimer, model,
                                 dict(PARAMS, max_samples=10), core.MeasuredPositions(), now_s=0.0)
    ref = retimer.retime(wp, options=RetimeOptions(sample_period=0.001))
    assert not answer.success
    assert answer.message == (f"the output would have {ref.t.shape[0]} samples > max_samples 10: raise "
                              f"sample_period")
    assert answer.duration == pytest.approx(ref.duration, rel=1e-12) and answer.t.shape == (0,)


def test_retimer_failure_carries_its_message():
    model = load_model("panda", payload=False)
    wp = smooth_waypoints(model, 3)
    wp[1, 0] = math.nan
    answer = core.handle_request(request(model.joint_names, wp), Retimer(model), model, PARAMS,
                                 core.MeasuredPositions(), now_s=0.0)
    assert not answer.success and "panda_joint1" in answer.message and answer.t.shape == (0,)


def test_default_acceleration_fills_only_missing_limits_on_a_copy(panda):
    model, _ = panda
    copy = model.with_settings()
    a = np.array(copy.acceleration_limit, dtype=float)
    a[[1, 4]] = np.inf
    copy.acceleration_limit = a
    assert "['panda_joint2', 'panda_joint5']" in core.acceleration_warning(copy)
    filled = core.with_default_acceleration(copy, 3.0)
    assert filled is not copy and np.isinf(copy.acceleration_limit[[1, 4]]).all()
    np.testing.assert_array_equal(filled.acceleration_limit, np.where(np.isinf(a), 3.0, a))
    assert core.acceleration_warning(filled) == ""
    assert core.with_default_acceleration(copy, 0.0) is copy


def test_duration_parts():
    assert core.duration_parts(0.0) == (0, 0)
    assert core.duration_parts(1.5) == (1, 500_000_000)
    assert core.duration_parts(2.9999999996) == (3, 0)


def test_deadline_solver_answers_busy_and_timed_out_at_the_deadline():
    solver = core.DeadlineSolver("test_solver")
    release = threading.Event()
    results = {}

    def slow():
        release.wait(5.0)
        return "slow done"

    first = threading.Thread(target=lambda: results.setdefault("first", solver.run(slow, 0.2)))
    t0 = time.monotonic()
    first.start()
    time.sleep(0.05)
    results["second"] = solver.run(lambda: "never", 0.1)
    first.join()
    elapsed = time.monotonic() - t0
    assert results == {"first": ("timed out", None), "second": ("busy", None)}
    assert elapsed < 1.0
    release.set()
    # the discarded solve finishes, then the solver takes the next call
    assert solver.run(lambda: 42, 5.0) == ("done", 42)
    assert "other requests" in solver.busy_message(0.1)
    solver.warm_up(lambda: release.wait(0.3))
    assert not solver.warm.is_set()
    assert "the warm-up" in solver.busy_message(0.1)
    assert solver.run(lambda: 1, 5.0) == ("done", 1) and solver.warm.is_set()
    with pytest.raises(ZeroDivisionError):
        solver.run(lambda: 1 / 0, 5.0)
    assert solver.run(lambda: 2, 1.0) == ("done", 2)  # an exception frees the solver
    solver.shutdown()


def test_fill_response_copies_points_only_on_success(panda):
    model, retimer = panda
    wp = smooth_waypoints(model, 3, seed=5)
    answer = core.handle_request(request(model.joint_names, wp, sample_period=0.05), retimer, model, PARAMS,
                                 core.MeasuredPositions(), now_s=0.0)
    assert answer.success, answer.message
    response = SimpleNamespace(trajectory=SimpleNamespace(joint_names=[], points=["stale"]))
    core.fill_response(response, answer, "msg", SimpleNamespace, SimpleNamespace)
    assert (response.success, response.message, response.duration) == (True, "msg", answer.duration)
    assert response.trajectory.joint_names == list(model.joint_names)
    assert len(response.trajectory.points) == answer.t.shape[0]
    last = response.trajectory.points[-1]
    assert last.positions == answer.q[-1].tolist() and last.effort == answer.tau[-1].tolist()
    assert last.time_from_start.sec + last.time_from_start.nanosec * 1e-9 == pytest.approx(answer.t[-1],
                                                                                           abs=1e-9)
    core.fill_response(response, core.RetimeAnswer.failure("no"), "no; warning: w", SimpleNamespace,
                       SimpleNamespace)
    assert not response.success and response.trajectory.points == [] and response.message == "no; warning: w"


def test_waypoint_array_of_rclpy_rows_equals_numpys_conversion():
    import array

    rng = np.random.default_rng(3)
    values = rng.normal(size=(500, 7))
    values[3, 2], values[7, 0] = math.nan, -math.inf  # carried through bit for bit (refused later)
    rows = [array.array("d", r) for r in values.tolist()]  # what rclpy gives for float64[]
    got = core.waypoint_array(rows, 7)
    np.testing.assert_array_equal(got, np.array(values.tolist()))
    assert got.shape == (500, 7) and got.flags.writeable
    # plain lists and a mix take numpy's conversion
    mixed = [values[0].tolist(), rows[1]]
    np.testing.assert_array_equal(core.waypoint_array(mixed, 7), values[:2])


def test_deadline_solver_queue_refuses_an_overflow_at_once_and_frees_a_place_at_the_deadline():
    solver = core.DeadlineSolver("test_queue", capacity=1)
    release = threading.Event()
    results = {}
    running = threading.Thread(target=lambda: results.setdefault("running", solver.run(lambda: release.wait(5.0), 5.0)))
    running.start()
    time.sleep(0.05)                      # the solver thread has taken it: the queue is empty again
    waiting = threading.Thread(target=lambda: results.setdefault("waiting", solver.run(lambda: "late", 0.3)))
    waiting.start()
    time.sleep(0.05)
    assert solver.waiting == 1
    t0 = time.monotonic()
    assert solver.run(lambda: "never", 5.0) == ("full", None)
    assert time.monotonic() - t0 < 0.05  # answered at once, not at its deadline
    assert "1 requests already wait for the solver (queue length 1" in solver.full_message()
    waiting.join()
    assert results["waiting"] == ("busy", None) and solver.waiting == 0   # its place is freed
    release.set()
    running.join()
    assert results["running"] == ("done", True)
    assert solver.run(lambda: 3, 5.0) == ("done", 3)
    blocker = threading.Event()
    threading.Thread(target=lambda: solver.run(lambda: blocker.wait(5.0), 5.0), daemon=True).start()
    time.sleep(0.05)
    queued = threading.Thread(target=lambda: results.setdefault("queued", solver.run(lambda: 4, 5.0)))
    queued.start()
    time.sleep(0.05)
    solver.shutdown()                    # a call still waiting is answered busy at once
    queued.join(1.0)
    assert results["queued"] == ("busy", None)
    assert solver.run(lambda: 5, 1.0) == ("full", None)
    blocker.set()


def test_deadline_solver_keeps_no_call_and_no_result_once_answered():
    """The solver thread waits for the next call without holding the last one: a refused 1 M-point
    ``~/retime`` request (whose call closes over it) stayed in the service's memory until the next request
    came (824 MB against 219 MB before it, measured over DDS)."""
    import gc
    import weakref

    class Big:
        pass

    solver = core.DeadlineSolver("test_release")
    try:
        request, result = Big(), Big()
        refs = (weakref.ref(request), weakref.ref(result))
        assert solver.run(lambda request=request: result, 5.0) == ("done", result)
        del request, result
        deadline = time.monotonic() + 2.0
        while any(r() is not None for r in refs):   # the solver thread finishes its bookkeeping first
            assert time.monotonic() < deadline, "the solver still holds the last call or its result"
            gc.collect()
            time.sleep(0.01)
        assert solver.waiting == 0
    finally:
        solver.shutdown()
