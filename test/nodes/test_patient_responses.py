"""``nodes.responses.patient_service``: an answer the middleware times out on (the client's response reader
not matched yet) is sent again until it goes out or the patience is spent.

The retry logic is checked on a stand-in ``send_response`` that raises rclpy's own warning the way rclpy's
C++ does (a ``RuntimeWarning`` with its text, from the sending thread). Over real DDS, a client whose response
reader can never match the server's writer (reliable reader, best-effort writer) makes every real send time
out: the hook must see rclpy's real warning, retry, and report the answer dropped, while a matched client on
the same server gets its answer at the first attempt.
"""
from __future__ import annotations

import time
import warnings

import pytest
from robot_dynamics_testing.ros_world import RosWorld

from robot_dynamics_ros.nodes import responses
from robot_dynamics_ros.nodes.responses import patient_service

TEXT = "failed to send response (timeout): client will not receive response, at rmw_response.cpp:164"


class FakeService:
    srv_name = "/fake"

    def __init__(self, failures: int):
        self.failures = failures
        self.sent: list[tuple[float, object]] = []
        self.attempts = 0

    def send_response(self, response, header) -> None:
        self.attempts += 1
        if self.attempts <= self.failures:
            warnings.warn(TEXT, RuntimeWarning, stacklevel=1)
            return
        self.sent.append((time.monotonic(), response))


def test_an_answer_timed_out_three_times_goes_out_at_the_fourth_attempt():
    srv, lines = FakeService(failures=3), []
    patient_service(srv, lines.append, patience_s=5.0)
    t0 = time.monotonic()
    srv.send_response("answer", None)
    assert srv.attempts == 4 and [r for _, r in srv.sent] == ["answer"]
    assert srv.sent[0][0] - t0 >= (1 + 2 + 4) * responses.RETRY_PAUSE_S  # doubling pauses
    assert len(lines) == 1 and "after 4 attempts" in lines[0], lines


def test_an_answer_is_given_up_after_the_patience_and_says_so():
    srv, lines = FakeService(failures=10**9), []
    patient_service(srv, lines.append, patience_s=0.3)
    t0 = time.monotonic()
    srv.send_response("answer", None)
    elapsed = time.monotonic() - t0
    # attempts at 0, 0.05, 0.15, 0.35 s: the fourth is past the patience and the last
    assert srv.sent == [] and 0.3 <= elapsed < 0.35 + 0.3 and srv.attempts == 4
    assert len(lines) == 1 and "dropped" in lines[0] and "/fake" in lines[0], lines


def test_an_answer_sent_at_once_is_sent_once_and_not_logged():
    srv, lines = FakeService(failures=0), []
    patient_service(srv, lines.append)
    srv.send_response("answer", None)
    assert srv.attempts == 1 and len(srv.sent) == 1 and lines == []


def test_other_warnings_raised_during_a_send_are_raised_again():
    class Noisy(FakeService):
        def send_response(self, response, header) -> None:
            warnings.warn("some other runtime warning", RuntimeWarning, stacklevel=1)
            super().send_response(response, header)

    srv = patient_service(Noisy(failures=1))
    with pytest.warns(RuntimeWarning, match="some other runtime warning") as caught:
        srv.send_response("answer", None)
    assert srv.attempts == 2 and len(srv.sent) == 1
    assert [str(w.message) for w in caught] == ["some other runtime warning"] * 2  # the timeout text is taken


@pytest.mark.ros
def test_real_rclpy_timeout_is_retried_and_a_matched_client_is_answered_first_time():
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from std_srvs.srv import Trigger

    lines: list[str] = []
    calls = []

    def on_request(request, response):
        calls.append(time.monotonic())
        response.success, response.message = True, "ok"
        return response

    with RosWorld("patient_peer") as world:
        server_node = world.add(__import__("rclpy").create_node("patient_server", context=world.ctx))
        best_effort = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
        srv = patient_service(server_node.create_service(Trigger, "patient_trigger", on_request,
                                                         qos_profile=best_effort), lines.append, patience_s=0.5)
        sends: list[int] = []
        inner = srv.send_response

        def counting(response, header):
            sends.append(1)
            inner(response, header)
        # counts calls of the patient wrapper (one per answer), not the attempts inside it
        srv.send_response = counting
        # reliable response reader vs best-effort response writer: never matched, every send times out
        deaf = world.peer.create_client(Trigger, "patient_trigger",
                                        qos_profile=QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        # (never "ready": the client's reader matches no response writer) its request path matches: give
        # discovery time, then call
        world.spin(2.0)
        fut = deaf.call_async(Trigger.Request())
        assert world.wait(lambda: calls, 10.0), "the request from the deaf client never arrived"
        assert world.wait(lambda: any("dropped" in ln for ln in lines), 10.0), lines
        assert not fut.done() and len(calls) == 1 and len(sends) == 1
        # the same server answers a compatible client at once
        good = world.peer.create_client(Trigger, "patient_trigger", qos_profile=best_effort)
        assert world.wait(good.service_is_ready, 10.0)
        time.sleep(0.5)  # discovery of the new client's reader (best effort: no retransmission of a lost answer)
        world.spin(0.2)
        n_lines = len(lines)
        fut2 = good.call_async(Trigger.Request())
        assert world.wait(fut2.done, 10.0) and fut2.result().message == "ok"
        assert len(lines) == n_lines, lines[n_lines:]
