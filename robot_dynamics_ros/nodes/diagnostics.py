"""What a node tells its operator: ``/diagnostics`` status, rate-limited log lines, latency statistics.

* :class:`Diagnostics` — ``diagnostic_msgs/DiagnosticArray`` on ``/diagnostics``: message rates, latency
  p50/p99/max, staleness, last error, clamp count and any other key the node sets.
* :class:`RateLimitedLog` (with :func:`reason_key` for free-text reasons) — one log line per key and
  period, with the count of suppressed lines.
* :class:`LatencyStats` — a ring buffer of latencies with percentiles.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from robot_dynamics_ros.nodes.runtime import steady_timer

__all__ = ["Diagnostics", "RateLimitedLog", "reason_key", "LatencyStats"]


class RateLimitedLog:
    """Log at most one line per ``key`` every ``period`` s; the next line says how many were suppressed.

    Args:
        logger: an rclpy logger (``node.get_logger()``) or anything with ``warning``/``error``/``info``.
        period: seconds between two lines of the same key.
    """

    #: keys remembered at most (the oldest is forgotten first): keys derived from input stay bounded
    MAX_KEYS = 256

    def __init__(self, logger, period: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self._logger = logger
        self._period = float(period)
        self._clock = clock
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def _emit(self, level: str, key: str, text: str) -> bool:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._period:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        self._last.pop(key, None)
        self._last[key] = now
        if len(self._last) > self.MAX_KEYS:
            oldest = next(iter(self._last))
            del self._last[oldest]
            self._suppressed.pop(oldest, None)
        n = self._suppressed.pop(key, 0)
        if n:
            text = f"{text} ({n} similar suppressed)"
        # one call site per severity: rclpy's logger raises "Logger severity cannot be changed between
        # calls" when the same source line logs at two severities (which killed the node's executor)
        if level == "error":
            self._logger.error(text)
        elif level == "warning":
            self._logger.warning(text)
        else:
            self._logger.info(text)
        return True

    def due(self, key: str) -> bool:
        """Whether a line of ``key`` would be logged now (nothing is counted): for a condition checked on
        every tick, so that its line, once per ``period``, carries no count of the ticks in between."""
        last = self._last.get(key)
        return last is None or self._clock() - last >= self._period

    def info(self, key: str, text: str) -> bool:
        return self._emit("info", key, text)

    def warning(self, key: str, text: str) -> bool:
        return self._emit("warning", key, text)

    def error(self, key: str, text: str) -> bool:
        return self._emit("error", key, text)


#: the parts of a reason that vary between occurrences of one reason: quoted text and numbers
_VARYING = re.compile(r"'[^']*'|\"[^\"]*\"|[-+]?\d[\d.eE+-]*")


def reason_key(prefix: str, text: str, n: int = 60) -> str:
    """A rate-limited log key for a free-text reason: ``prefix`` and the text without its quoted parts and
    numbers (which vary between occurrences of one reason), cut to ``n`` characters; distinct reasons
    (a DOCTYPE refusal, a missing joint) get distinct keys."""
    shape = _VARYING.sub("", text)
    return f"{prefix}:{' '.join(shape.split())[:n]}"


class LatencyStats:
    """Ring buffer of the last ``size`` latencies (s) with p50/p99/max; ``add`` is O(1), no allocation."""

    def __init__(self, size: int = 4096):
        self._buf = np.zeros(size)
        self._n = 0
        self._size = size

    def add(self, seconds: float) -> None:
        self._buf[self._n % self._size] = seconds
        self._n += 1

    @property
    def count(self) -> int:
        return self._n

    def summary(self) -> dict[str, float]:
        """``{'p50_us', 'p99_us', 'max_us'}`` over the buffered samples (NaN when empty)."""
        k = min(self._n, self._size)
        if k == 0:
            return {"p50_us": float("nan"), "p99_us": float("nan"), "max_us": float("nan")}
        a = self._buf[:k]
        p50, p99 = np.percentile(a, [50, 99])
        return {"p50_us": p50 * 1e6, "p99_us": p99 * 1e6, "max_us": float(a.max()) * 1e6}


class RateMeter:
    """The achieved rate of a periodic callback: its tick count sampled on the clock it runs on, one rate per
    window of at least ``window`` s (a clock that stops or goes back restarts the window).

    Args:
        window: seconds of that clock per measurement (the diagnostics period).
    """

    def __init__(self, window: float):
        self.window = float(window)
        self._t0: float | None = None
        self._n0 = 0

    def reset(self) -> None:
        """Start a new window at the next :meth:`sample` (the callback was stopped or its rate changed)."""
        self._t0 = None

    def sample(self, ticks: int, now_s: float) -> float | None:
        """Ticks per second over the window ending at ``now_s`` (s) with ``ticks`` counted so far; None until a
        whole window has passed."""
        if self._t0 is None or now_s < self._t0:
            self._t0, self._n0 = now_s, ticks
            return None
        dt = now_s - self._t0
        if dt < self.window:
            return None
        rate = (ticks - self._n0) / dt
        self._t0, self._n0 = now_s, ticks
        return rate


class Diagnostics:
    """Publishes one ``diagnostic_msgs/DiagnosticStatus`` for the node on ``/diagnostics`` every ``period``.

    The node keeps its counters here (:meth:`count`), sets values (:meth:`set`), and the level
    (:meth:`set_level`, OK / WARN / ERROR with a message); the timer adds the message rate of each counter
    since the last report and the latency summary.

    Args:
        node: the rclpy node.
        name: the status name, ``"<fully qualified node name>: <hardware_id>"`` (diagnostic_updater's
            ``"<node name>: <task>"`` shape, with the namespace, so that ``/r1/gravity_compensation`` and
            ``/r2/gravity_compensation`` stay two entries in diagnostic_aggregator / rqt_robot_monitor).
        period: report period, s.
        timer: publish from a timer of its own; False for a node whose safety timer calls
            :meth:`publish_due` after it evaluated the state, so that a report never carries a level older
            than that evaluation (after a stall both timers are overdue, and a report sent first would say OK
            for an input that went stale meanwhile).
    """

    OK, WARN, ERROR, STALE = 0, 1, 2, 3

    def __init__(self, node, hardware_id: str = "robot_dynamics_ros", period: float = 1.0, timer: bool = True):
        self._node = node
        self.name = f"{node.get_fully_qualified_name()}: {hardware_id}"
        self.hardware_id = hardware_id
        self._pub = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.counters: dict[str, int] = {}
        self._prev_counters: dict[str, int] = {}
        self._prev_time = time.monotonic()
        self.values: dict[str, Any] = {}
        self.level = self.OK
        self.message = "starting"
        self.latency = LatencyStats()
        self.last_status = None
        #: standing conditions (key -> (level, text)) raised above :attr:`level` until cleared; per-message
        #: reports set the level, these persist across them (see :meth:`condition`)
        self.conditions: dict[str, tuple[int, str]] = {}
        self.period = float(period)
        self._next_at = time.monotonic() + self.period
        self._timer = steady_timer(node, period, self.publish) if timer else None

    def publish_due(self) -> None:
        """Publish when the period has elapsed since the last report was due (never more often than
        called: a safety timer at ``state_timeout / 2`` bounds the rate from above)."""
        now = time.monotonic()
        if now < self._next_at:
            return
        self._next_at += self.period
        if self._next_at <= now:   # after a stall: the next report one period from now, no burst
            self._next_at = now + self.period
        self.publish()

    def count(self, key: str, n: int = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value

    def set_level(self, level: int, message: str) -> None:
        self.level, self.message = level, message

    def condition(self, key: str, level: int | None, text: str = "") -> None:
        """Raise (``level``) or clear (None) a standing condition: the published status takes the highest
        level of :attr:`level` and the conditions, and its message appends each condition's text."""
        if level is None:
            self.conditions.pop(key, None)
        else:
            self.conditions[key] = (level, text)

    def status(self):
        """Build the current ``DiagnosticStatus`` (rates are per second since the previous call)."""
        now = time.monotonic()
        dt = max(now - self._prev_time, 1e-9)
        kv = []
        for key, n in sorted(self.counters.items()):
            kv.append(KeyValue(key=key, value=str(n)))
            kv.append(KeyValue(key=f"{key}_rate_hz", value=f"{(n - self._prev_counters.get(key, 0)) / dt:.1f}"))
        self._prev_counters = dict(self.counters)
        self._prev_time = now
        for key, val in self.latency.summary().items():
            kv.append(KeyValue(key=f"latency_{key}", value=f"{val:.1f}"))
        for key, val in sorted(self.values.items()):
            kv.append(KeyValue(key=key, value=val if isinstance(val, str) else repr(val)))
        level, message = self.level, self.message
        for lvl, text in self.conditions.values():
            level, message = max(level, lvl), f"{message}; {text}"
        return DiagnosticStatus(level=bytes([level]), name=self.name, message=message,
                                hardware_id=self.hardware_id, values=kv)

    def publish(self) -> None:
        st = self.status()
        self.last_status = st
        msg = DiagnosticArray(status=[st])
        msg.header.stamp = self._node.get_clock().now().to_msg()
        try:
            self._pub.publish(msg)
        except Exception:  # noqa: BLE001 - context already shut down
            pass

    def destroy(self) -> None:
        if self._timer is not None:
            self._node.destroy_timer(self._timer)
