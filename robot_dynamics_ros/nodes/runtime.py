"""A node process's runtime: executors, spinning until a signal, the ``main()`` body, timers, start-up.

* :func:`make_executor` (:data:`EXECUTORS`), :func:`spin_until_shutdown` (use it instead of
  ``executor.spin()``: the EventsExecutor's ``spin()`` does not return on Ctrl-C), :func:`close_ros`.
* :func:`run_node` — a node's console entry point; :func:`middleware_environment` — the Fast DDS set-up of
  every node process it starts (no shared memory, readers that free what they took).
* :func:`freeze_gc` — start-up objects out of the cyclic collector's way.
* :func:`steady_timer` — a timer that keeps firing when sim time stops.
* :func:`autostart` — configure and activate a lifecycle node at construction.
"""
from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.experimental import EventsExecutor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.utilities import get_default_context

from robot_dynamics_ros.errors import UserError

__all__ = ["EXECUTORS", "make_executor", "close_ros", "freeze_gc", "spin_until_shutdown", "run_node",
           "steady_timer", "autostart", "middleware_environment", "LOCALHOST_PROFILE", "SUBNET_PROFILE"]

#: executor kinds accepted by :func:`make_executor`
EXECUTORS = ("events", "single", "multi")


def make_executor(kind: str = "events", context=None, num_threads: int | None = None):
    """Return an rclpy executor: ``events`` (``rclpy.experimental.EventsExecutor``, the fastest measured
    here, see NOTES.md), ``single`` (SingleThreadedExecutor) or ``multi`` (MultiThreadedExecutor of
    ``num_threads`` threads, rclpy's default when None).

    Raises:
        ValueError: unknown kind.
    """
    if kind == "events":
        return EventsExecutor(context=context)
    if kind == "single":
        return SingleThreadedExecutor(context=context)
    if kind == "multi":
        return MultiThreadedExecutor(num_threads=num_threads, context=context)
    raise ValueError(f"executor '{kind}': must be one of {list(EXECUTORS)}")


def close_ros(executor, nodes, context) -> None:
    """Shut ``executor`` down, destroy ``nodes`` (None entries skipped; a node already destroyed or whose
    context is gone is passed over), then shut ``context`` down: the end of a process-local rclpy session,
    in the order that leaves no entity of a destroyed node in a running executor.
    """
    if executor is not None:
        executor.shutdown()
    for n in nodes:
        if n is None:
            continue
        try:
            n.destroy_node()
        except Exception:  # noqa: BLE001 - a node destroyed twice or after its context
            pass
    rclpy.try_shutdown(context=context)


def freeze_gc() -> int:
    """Collect garbage once, then move every object alive now into the garbage collector's permanent
    generation (``gc.freeze()``), which later collections do not scan. Returns the number of objects frozen.

    Why: CPython's cyclic collector scans every tracked object in a full (generation 2) collection and the
    thread that triggers it holds the GIL meanwhile. A node process with rclpy, numpy, Pinocchio and numba
    (the observer's kernels) loaded holds ~130 000 such objects: measured here, a full collection took
    up to 43 ms, a 43-message gap at 1 kHz. The objects that exist once a node has started (modules,
    the model, the engine) live as long as the process, so scanning them finds nothing; after the freeze a
    full collection only scans what was created since. Cost: garbage cycles among frozen objects are never
    collected, hence the :func:`gc.collect` first. Called by :func:`spin_until_shutdown` and after a model
    is loaded from ``/robot_description``.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def spin_until_shutdown(executor, context=None, *, until: Callable[[], bool] | None = None,
                        period: float = 0.1) -> None:
    """Spin ``executor`` until SIGINT / SIGTERM, the context's shutdown, or ``until()`` returning True.

    Use this instead of ``executor.spin()``: ``rclpy.experimental.EventsExecutor.spin()`` does not return on
    SIGINT (measured here), and rclpy's own signal handler shuts down only the default context. In the
    main thread this installs Python handlers for SIGINT and SIGTERM for the duration of the call (they
    run between two ``spin_once(period)`` calls) and restores the previous ones afterwards.
    """
    ctx = context if context is not None else get_default_context()
    freeze_gc()   # start-up objects out of the collector's way: no 40 ms full collections while serving
    stop = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[sig] = signal.signal(sig, lambda signum, frame: stop.append(signum))
            except (ValueError, OSError):  # not allowed here: rely on rclpy's handler
                pass
    # the EventsExecutor's spin_once returns after every callback (1000 times a second at 1 kHz): check the
    # context (a lock and a C call) and ``until`` at most once per ``period`` (time.monotonic() is ~20x
    # cheaper); a signal's flag is checked after every callback
    monotonic = time.monotonic
    try:
        next_check = 0.0
        while not stop:
            now = monotonic()
            if now >= next_check:
                if not ctx.ok() or (until is not None and until()):
                    break
                next_check = now + period
            executor.spin_once(timeout_sec=period)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        if ctx.ok() and not stop:
            raise
        # a callback that was running when the signal shut the context down (e.g. "publisher's context
        # is invalid"): that is the shutdown, not an error
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


#: Fast DDS default profiles of a node process (``nodes/dds/``): rmw_fastrtps' LOCALHOST discovery set-up,
#: and Fast DDS's default (SUBNET) one, each with its UDPv4 transport only (no SHM) and readers whose history
#: frees each payload once taken
LOCALHOST_PROFILE = Path(__file__).with_name("dds") / "localhost_udp_only.xml"
SUBNET_PROFILE = Path(__file__).with_name("dds") / "subnet_udp_only.xml"

#: environment variables by which a user chooses the middleware's set-up: when any is set (or a
#: ``DEFAULT_FASTDDS_PROFILES.xml`` is in the working directory), :func:`middleware_environment` changes nothing
_TRANSPORT_ENV = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_BUILTIN_TRANSPORTS",
                  "RMW_FASTRTPS_USE_QOS_FROM_XML", "RMW_FASTRTPS_PUBLICATION_MODE", "ROS_STATIC_PEERS",
                  "ROS_DISCOVERY_SERVER")


def middleware_environment(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> dict[str, str]:
    """The environment variables to set before ``rclpy.init`` so that this process's Fast DDS participant
    has no shared-memory transport and its readers free every payload they took, keeping the discovery range
    asked for: ``{}`` when there is nothing to do (another RMW than rmw_fastrtps_cpp,
    ``ROS_AUTOMATIC_DISCOVERY_RANGE=OFF``, or the user chose the middleware's set-up, see
    :data:`_TRANSPORT_ENV`).

    * ``LOCALHOST`` (the tests', the isolated commands'): rmw_fastrtps adds an SHM transport to the
      participant whatever the XML profile or ``FASTDDS_BUILTIN_TRANSPORTS`` say
      (rmw_fastrtps_shared_cpp ``create_participant``); only for ``SYSTEM_DEFAULT`` does it keep the default
      profile untouched. So: ``ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT`` with
      ``FASTDDS_DEFAULT_PROFILES_FILE`` = :data:`LOCALHOST_PROFILE`, which is the LOCALHOST set-up (no
      multicast, 127.0.0.1 as initial peer, 32 ports probed) with its UDPv4 transport only.
    * ``SUBNET`` or unset (rmw's default, Fast DDS's built-in SHM + UDPv4): :data:`SUBNET_PROFILE`, Fast
      DDS's default discovery with its UDPv4 transport only.
    * Both with ``RMW_FASTRTPS_USE_QOS_FROM_XML=1``, so that rmw_fastrtps takes the profiles' endpoint
      settings instead of its own: the same (synchronous publishing, no data sharing, the discovery
      histories' reallocation) except the readers' history memory, ``DYNAMIC`` instead of
      ``PREALLOCATED_WITH_REALLOC``. With rmw's policy a reader keeps the largest payload it ever received:
      a 50 MB ``/robot_description`` (refused by its size) stayed in each node for good; now it is freed
      once taken. The ROS QoS of each endpoint (depth, reliability, durability) still comes from the code.

    Why no SHM (issue 25): a Fast DDS SHM port is a queue in shared memory guarded by an interprocess mutex
    that is not robust. A peer process killed while it holds the mutex of its own port leaves it locked; the
    next push into that port (the answer to that peer's request) blocks the writer thread (``dds.asyn``, in
    ``SharedMemManager::Port::try_push``) forever, and with it the participant's receive thread: the
    retiming service answered no one for the rest of the run after a client was SIGKILLed. A UDP send to a
    dead peer cannot block. What a peer does on its side does not matter: the peers see this process's UDP
    locators only and send to it over UDP.

    Every node's process runs it (:func:`run_node`), not only the retiming service's: any push into a killed
    peer's port blocks the same way, whether an answer of ``~/enable``, ``~/set_payload``,
    ``~/reset_collision``, a parameter service, or a command to a killed subscriber. Its cost, measured
    side by side (``ROBOT_DYNAMICS_BENCH_TRANSPORT=node|default .venv/bin/python benchmarks/bench_latency.py
    --nodes relay,gravity --topologies twoproc --executors events --no-sweep --no-retiming-load --duration 8
    --blocks 2``, two runs each, 2-core machine at load 8, before the reader policy): gravity node at 1 kHz,
    p50 475 / 4 647 µs over UDP and 545 / 400 µs with SHM, CPU 234–288 and 248–256 ms per 1000 messages,
    0–1 388 and 0 of 8 000 dropped; the p99s (7–531 ms) and the drops follow the machine's load in both,
    not the transport (see docs/hardening.md).
    """
    env = os.environ if env is None else env
    if env.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp") != "rmw_fastrtps_cpp":
        return {}
    if any(env.get(key) for key in _TRANSPORT_ENV):
        return {}
    if ((Path.cwd() if cwd is None else cwd) / "DEFAULT_FASTDDS_PROFILES.xml").exists():
        return {}
    scope = env.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "").strip().upper()
    if scope == "LOCALHOST":
        return {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT", "FASTDDS_DEFAULT_PROFILES_FILE": str(LOCALHOST_PROFILE),
                "RMW_FASTRTPS_USE_QOS_FROM_XML": "1"}
    if scope in ("", "SUBNET"):
        return {"FASTDDS_DEFAULT_PROFILES_FILE": str(SUBNET_PROFILE), "RMW_FASTRTPS_USE_QOS_FROM_XML": "1"}
    return {}


def run_node(name: str, make_node: Callable[[], Any], args: list[str] | None = None, *,
             executor_kind: Callable[[Any], str] = lambda node: "events",
             executor_threads: Callable[[Any], int | None] = lambda node: None) -> int:
    """The body of a node's console entry point (``ros2 run robot_dynamics_ros <name>``).

    Initialises rclpy with ``args``, builds the node with ``make_node()``, spins it on
    ``make_executor(executor_kind(node), num_threads=executor_threads(node))`` with :func:`spin_until_shutdown` until SIGINT / SIGTERM, then
    shuts the executor, the node and rclpy down.

    Returns:
        0 after a clean stop; 1 on a bad URDF or parameter (a
        :class:`~robot_dynamics_ros.errors.UserError`, ``ValueError`` or rclpy's invalid-parameter
        exceptions, typically from the node's constructor), after printing ``<name>: error: <reason>``
        as one line on stderr (no traceback).

    The process's DDS participant uses UDP only and its readers free what they took
    (:func:`middleware_environment`), unless the user chose the middleware's set-up: a peer process that dies
    must not wedge the node, a huge message must not stay in it.
    """
    os.environ.update(middleware_environment())  # read by rcl / Fast DDS in rclpy.init: before it
    rclpy.init(args=args)
    node = executor = None
    try:
        node = make_node()
        executor = make_executor(executor_kind(node), num_threads=executor_threads(node))
        executor.add_node(node)
        spin_until_shutdown(executor)
    except KeyboardInterrupt:
        pass
    except (UserError, ValueError, InvalidParameterTypeException, InvalidParameterValueException) as exc:
        if not rclpy.ok():
            return 0   # stopped during start-up (see below), not a configuration error
        print(f"{name}: error: {exc}", file=sys.stderr, flush=True)
        return 1
    except Exception:
        # SIGINT / SIGTERM during start-up: rclpy's handler shuts the context down under the node being
        # built, whose configure then fails ("configure failed", "context is invalid"): a stop, not a crash
        if rclpy.ok():
            raise
    finally:
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


def steady_timer(node, period: float, callback: Callable[[], None]):
    """A timer on the steady (monotonic) clock: it keeps firing when ``use_sim_time`` is true and /clock
    stops or never starts, so staleness by arrival time still produces the safe command and diagnostics
    keep being published (a timer on the node clock waits for sim time to advance)."""
    return node.create_timer(period, callback, clock=Clock(clock_type=ClockType.STEADY_TIME))


def autostart(node, enabled: bool, config_error: Callable[[], Exception | None] = lambda: None) -> None:
    """Configure and activate the lifecycle ``node`` when ``enabled`` (its ``autostart`` parameter).

    Args:
        config_error: returns the exception that made configure fail (raised as it is), or None.

    Raises:
        the configure error (UserError, URDFError, ValueError), or RuntimeError without one: the node
        cannot start.
    """
    if not enabled:
        return
    if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
        raise config_error() or RuntimeError(f"{node.get_name()}: configure failed")
    node.trigger_activate()
