"""One rclpy context for an in-process DDS test: the nodes under test, a peer node that publishes and
records, and an EventsExecutor spun from the test thread (``wait``/``spin``). Each test file's harness
subclasses :class:`RosWorld` and adds only what its node needs (publishers, recorders, senders)."""
from __future__ import annotations

import threading
import time

import rclpy

from robot_dynamics_ros.nodes.runtime import make_executor


class RosWorld:
    """Context + executor + ``self.peer`` (a plain node named ``peer_name``); nodes added with :meth:`add`
    are destroyed by :meth:`close`, in reverse order, before the context shuts down."""

    def __init__(self, peer_name: str = "peer"):
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        self.peer = rclpy.create_node(peer_name, context=self.ctx)
        self.executor = make_executor("events", context=self.ctx)
        self.executor.add_node(self.peer)
        self.nodes: list = []
        self._clients: dict[str, object] = {}

    def add(self, node):
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.01)

    def wait(self, cond, timeout: float = 5.0) -> bool:
        """Spin until ``cond()`` is true (True) or ``timeout`` s have passed (False)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            self.executor.spin_once(timeout_sec=0.01)
        return False

    def call(self, srv_type, name: str, request):
        """Call service ``name`` from the peer (one client per name) and return its response; an
        unavailable or silent service fails the test naming it."""
        if name not in self._clients:
            self._clients[name] = self.peer.create_client(srv_type, name)
        cli = self._clients[name]
        assert self.wait(cli.service_is_ready), f"{name} not available"
        fut = cli.call_async(request)
        assert self.wait(fut.done), f"{name} did not answer"
        return fut.result()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for node in reversed(self.nodes):
            node.destroy_node()
        self.peer.destroy_node()
        self.executor.shutdown()
        rclpy.shutdown(context=self.ctx)


class SpinThread:
    """Spins ``executor`` (of ``context``) on a daemon thread until :meth:`stop`: for probes and recorders
    whose callbacks must run while the test thread waits or sleeps."""

    def __init__(self, executor, context):
        self._executor, self._ctx = executor, context
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set() and self._ctx.ok():
            self._executor.spin_once(timeout_sec=0.02)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
