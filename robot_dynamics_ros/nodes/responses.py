"""Service answers that reach a client whose response reader is discovered late.

A ROS 2 client may call as soon as ``wait_for_service`` returns, which only says that the server's request
reader is known. If the server's response writer has not matched the client's response reader yet when the
answer is ready, rmw_fastrtps waits 100 ms for it and then drops the answer (rclpy turns this into a
``RuntimeWarning: failed to send response (timeout)`` and goes on): the client waits forever. On a loaded
machine discovery of a new client takes longer than 100 ms often enough for a planner's first call to be
lost. :func:`patient_service` makes a service retry such an answer until the reader matches or
``patience_s`` has passed; any other send failure is left to rclpy.
"""
from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable

#: how long an answer waits for its client's response reader (discovery on a loaded 2-core machine: ~1 s)
PATIENCE_S = 5.0
#: first pause between attempts, doubled after each up to RETRY_PAUSE_MAX_S: each attempt itself waits 100 ms
#: in the middleware without releasing the interpreter lock, so a control loop in the same process stalls
#: for it; a few attempts spread over the patience bound that cost
RETRY_PAUSE_S, RETRY_PAUSE_MAX_S = 0.05, 1.0

_TIMEOUT_TEXT = "failed to send response (timeout)"
#: one send at a time per process: ``warnings.catch_warnings`` swaps module-wide state
_send_lock = threading.Lock()


def _send_recording_timeout(send_once, response, header) -> bool:
    """``send_once(response, header)``; True when rclpy warned that the middleware timed out on it. Any other
    warning raised meanwhile (by this or another thread) is raised again afterwards."""
    with _send_lock:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            send_once(response, header)
    timed_out = False
    for w in caught:
        if issubclass(w.category, RuntimeWarning) and str(w.message).startswith(_TIMEOUT_TEXT):
            timed_out = True
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return timed_out


def patient_service(service, log: Callable[[str], None] | None = None, patience_s: float = PATIENCE_S):
    """Make ``service`` (an ``rclpy.service.Service``) retry an answer the middleware timed out on.

    Args:
        service: the service; its ``send_response`` is wrapped on this instance (rclpy's executor calls it).
        log: called with one line when an answer is given up after ``patience_s`` (the client still waits
            and its own timeout applies), or when it went out only after retries.
        patience_s: seconds an answer may wait for the client's response reader.

    Returns:
        ``service``.
    """
    send_once = service.send_response

    def send_response(response, header) -> None:
        t0 = time.monotonic()
        attempts, pause = 0, RETRY_PAUSE_S
        while True:
            attempts += 1
            if not _send_recording_timeout(send_once, response, header):
                if attempts > 1 and log is not None:
                    log(f"{service.srv_name}: answer delivered after {attempts} attempts "
                        f"({time.monotonic() - t0:.2f} s): the client's response reader was discovered late")
                return
            if time.monotonic() - t0 >= patience_s:
                if log is not None:
                    log(f"{service.srv_name}: answer dropped: the client's response reader was not discovered "
                        f"within {patience_s:.1f} s")
                return
            time.sleep(pause)
            pause = min(2.0 * pause, RETRY_PAUSE_MAX_S)

    service.send_response = send_response
    return service
