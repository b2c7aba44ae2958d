"""The ``~/retime`` service server, hosted on threads of the node's process or in a worker process.

:class:`RetimeServer` is the one server: it takes ``RetimeTrajectory`` requests on an rclpy node, runs one
solve at a time on its :class:`~robot_dynamics_ros.retiming.service.DeadlineSolver` and answers every
request it takes within ``request_deadline``: the result, a failure, ``busy`` or ``timed out``. Each answer
is also handed to an ``on_answer`` callback (a dict, :meth:`RetimeServer.on_request`) for the node's
counters and logs.

:class:`WorkerProcess` hosts a :class:`RetimeServer` in one long-lived child process
(``python -m robot_dynamics_ros.retiming.worker``: a fresh interpreter with none of the parent's threads,
DDS state or main module, on the same package as the parent). The child has its own rclpy
context on the parent's domain and its own node (``<name>_worker``, no global ROS arguments, no rosout,
no parameter services) that serves the parent's resolved service name and subscribes the parent's
resolved ``joint_states`` topic itself. Taking a request (rclpy builds 100 000 Python point objects for a
100 000-point path, ~1 s with the interpreter lock held), the solve and building the response therefore
never hold the parent's interpreter: a control node in the parent keeps its executor.

Parent -> child over a socket pair (pickled, :func:`dumps`): ``("params", dict)`` on every parameter change and
``("model", RobotModel, warmup)`` once per model version; both again after a restart. Child -> parent:
``("ready",)`` once serving, ``("warm",)`` after each model's warm-up, ``("answer", dict)`` per answered
request, ``("log", level, text)``. The child ends when the parent's end of the socket pair closes (the parent
exited or was killed); the parent starts a new child when its child dies (1 s, then up to 10 s between
attempts). Requests held by a child that dies get no answer: the client's own timeout applies.
"""
from __future__ import annotations

import copyreg
import io
import os
import pickle
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType

from robot_dynamics_ros.nodes.responses import patient_service
from robot_dynamics_ros.retiming import service as core

#: keep-last depth of the service's request and response queues (the default 10 is shared by every
#: client: ten concurrent clients with a queued request each can push a response out before it is taken)
SERVICE_QOS_DEPTH = 100
#: seconds between two start attempts of a worker that keeps dying (doubling from RESTART_MIN_S)
RESTART_MIN_S, RESTART_MAX_S = 1.0, 10.0


def _mapping_proxy(d: dict) -> MappingProxyType:
    return MappingProxyType(d)


def dumps(obj) -> bytes:
    """Pickle ``obj`` for the worker pipe; read-only mappings (``RobotModel.index``, ``held_joints``) are
    sent as their contents and rebuilt read-only."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = copyreg.dispatch_table.copy()
    pickler.dispatch_table[MappingProxyType] = lambda m: (_mapping_proxy, (dict(m),))
    pickler.dump(obj)
    return buf.getvalue()


class RetimeServer:
    """The ``RetimeTrajectory`` service on ``node`` (module docstring).

    Args:
        node: the rclpy node the service is created on (its executor needs ``max_concurrent`` threads).
        service_name: fully resolved service name.
        state_topic: the resolved joint-state topic, named in the refusal of a partial request.
        on_answer: called on the answering thread with ``{status, success, message, duration, solve_ms,
            solve_time}`` (status ``done`` / ``busy`` / ``timed out``; s, ms, s).
        log: ``log(level, text)`` with level ``info`` / ``warning`` / ``error``.

    Attributes:
        model, retimer: the current model and its retimer (None until :meth:`set_model`); swapped whole.
        measured: :class:`~robot_dynamics_ros.retiming.service.MeasuredPositions` of the model's joints.
        warm: set once a model is loaded and warmed up (or at once with ``warmup=False``).
    """

    def __init__(self, node, service_name: str, state_topic: str, on_answer: Callable[[dict], None],
                 log: Callable[[str, str], None]):
        from rclpy.callback_groups import ReentrantCallbackGroup
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        from robot_dynamics_interfaces.srv import RetimeTrajectory

        self._lock = threading.Lock()
        self.model = self.retimer = None
        self.accel_warning = ""
        self.params: dict = {}
        self.measured = core.MeasuredPositions()
        self.state_topic = state_topic
        self._on_answer = on_answer
        self._log = log
        self.solver = core.DeadlineSolver(f"{node.get_name()}_solver")
        self.warm = self.solver.warm
        self.warm.clear()
        self.srv = patient_service(
            node.create_service(RetimeTrajectory, service_name, self.on_request,
                                qos_profile=QoSProfile(depth=SERVICE_QOS_DEPTH, reliability=ReliabilityPolicy.RELIABLE),
                                callback_group=ReentrantCallbackGroup()),
            lambda text: log("warning", text))

    def set_params(self, params: Mapping) -> None:
        """The node's parameters (``request_deadline`` and what :func:`core.handle_request` reads)."""
        self.params = dict(params)

    def set_model(self, model, warmup: bool, on_warm: Callable[[], None] | None = None) -> None:
        """Serve ``model`` from now on (a request already running finishes on the old one); with ``warmup``
        compile / load the retiming kernels on the solver thread first (requests wait for it until their
        deadline). ``on_warm`` is called once the model is ready to be served."""
        from robot_dynamics_ros.retiming.retimer import Retimer

        retimer = Retimer(model)
        with self._lock:
            same_joints = self.model is not None and self.model.joint_names == model.joint_names
            self.model, self.retimer = model, retimer
            self.accel_warning = core.acceleration_warning(model)
            if not same_joints:
                self.measured = core.MeasuredPositions(model.joint_names)
        if warmup:
            self._log("info", "warming up the retiming kernels (the first run compiles them, 1-2 min; "
                              "requests wait until request_deadline)")
            self.solver.warm_up(lambda: self._warmup(retimer, on_warm))
        else:
            self.warm.set()
            if on_warm is not None:
                on_warm()

    def _warmup(self, retimer, on_warm) -> None:
        t0 = time.monotonic()
        try:
            retimer.warmup()
            self._log("info", f"retiming kernels ready after {time.monotonic() - t0:.1f} s")
        except Exception as exc:  # noqa: BLE001 - a failed warm-up only costs the first request's time
            self._log("warning", f"retiming warm-up failed: {exc}")
        if on_warm is not None:
            on_warm()

    def on_joint_state(self, msg) -> None:
        self.measured.update(msg.name, msg.position, time.monotonic())

    def on_request(self, request, response):
        """Answer one request within ``request_deadline`` (see the class docstring)."""
        from builtin_interfaces.msg import Duration
        from trajectory_msgs.msg import JointTrajectoryPoint

        t0 = time.perf_counter()
        deadline_s = float(self.params["request_deadline"])
        with self._lock:
            warning = self.accel_warning
        status, answer = self.solver.run(lambda: self._solve(request), deadline_s)
        if status == "busy":
            answer = core.RetimeAnswer.failure(self.solver.busy_message(deadline_s))
        elif status == "timed out":
            answer = core.RetimeAnswer.failure(self.solver.timeout_message(deadline_s))
        message = f"{answer.message}; warning: {warning}" if warning else answer.message
        core.fill_response(response, answer, message, JointTrajectoryPoint, Duration)
        response.solve_time = time.perf_counter() - t0
        self._on_answer({"status": status, "success": bool(answer.success), "message": message,
                         "warning": warning, "duration": float(answer.duration), "solve_ms": float(answer.solve_ms),
                         "solve_time": float(response.solve_time)})
        return response

    def _solve(self, request) -> core.RetimeAnswer:
        """On the solver thread: the whole retiming (any exception becomes a failure answer)."""
        with self._lock:
            retimer, model, measured = self.retimer, self.model, self.measured
        try:
            return core.handle_request(request, retimer, model, self.params, measured, time.monotonic(),
                                       self.state_topic)
        except Exception as exc:  # noqa: BLE001 - a request must never take the node down
            return core.RetimeAnswer.failure(f"internal error while retiming: {type(exc).__name__}: {exc}")

    def shutdown(self) -> None:
        self.solver.shutdown()


class ServingThreads:
    """A :class:`RetimeServer` on a node of its own, spun by a multi-threaded executor on a daemon thread: the
    body of the worker process and the in-process mode (``solver_process: false``) alike.

    Args:
        context: the rclpy context.
        config: ``node_name``, ``namespace``, ``service_name``, ``state_topic``, ``max_concurrent``.
        params: the node's parameter values (set before the service can take a request).
        on_answer, log: as :class:`RetimeServer`.
        subscribe_states: subscribe ``state_topic`` on this node (best effort, depth 1: only the latest
            matters); False when the caller feeds ``server.on_joint_state`` itself.
        on_executor_error: called with the exception when the executor stops by itself (not on shutdown).
    """

    def __init__(self, context, config: Mapping, params: Mapping, on_answer, log, *, subscribe_states: bool = True,
                 on_executor_error: Callable[[BaseException], None] | None = None):
        from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        self.node = Node(config["node_name"], namespace=config["namespace"], context=context,
                         use_global_arguments=False, enable_rosout=False, start_parameter_services=False)
        self.server = RetimeServer(self.node, config["service_name"], config["state_topic"], on_answer, log)
        self.server.set_params(params)
        if subscribe_states:
            self.node.create_subscription(JointState, config["state_topic"], self.server.on_joint_state,
                                          QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT),
                                          callback_group=MutuallyExclusiveCallbackGroup())
        # one thread more than the requests taken at once: joint states are read while every request waits
        self.executor = MultiThreadedExecutor(num_threads=int(config["max_concurrent"]) + 1, context=context)
        self.executor.add_node(self.node)
        self._stopping = threading.Event()
        self._on_error = on_executor_error
        self.thread = threading.Thread(target=self._spin, name=f"{config['node_name']}_executor", daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except BaseException as exc:  # noqa: BLE001 - e.g. MemoryError taking a request, a context shut down
            if not self._stopping.is_set() and self._on_error is not None:
                self._on_error(exc)

    def shutdown(self, timeout: float = 2.0) -> None:
        """Stop the solver, the executor and the node (a solve still running is not waited for)."""
        self._stopping.set()
        self.server.shutdown()
        try:
            self.executor.shutdown(timeout_sec=timeout)
        except Exception:  # noqa: BLE001 - the context may already be gone
            pass
        self.thread.join(timeout=timeout)
        try:
            self.node.destroy_node()
        except Exception:  # noqa: BLE001
            pass


# --------------------------------------------------------------------------- the worker process
def worker_main(conn, config: dict) -> None:
    """The worker process's body (``config``: node_name, namespace, domain_id, service_name, state_topic,
    max_concurrent, nice). Serves until the parent's end of ``conn`` closes."""
    # Ctrl-C at a terminal reaches the whole process group: the parent decides when the worker ends
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if config.get("nice"):
        os.nice(int(config["nice"]))
    import rclpy

    send_lock = threading.Lock()

    def send(*item) -> None:
        try:
            with send_lock:
                conn.send_bytes(dumps(item))
        except (OSError, EOFError):  # the parent is gone; the reader below ends the process
            pass

    try:
        item = pickle.loads(conn.recv_bytes())  # the parameters come first: every request needs its deadline
        while item[0] != "params":
            item = pickle.loads(conn.recv_bytes())
    except (EOFError, OSError):
        os._exit(0)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=int(config["domain_id"]))
    def executor_stopped(exc: BaseException) -> None:   # e.g. MemoryError taking a request: exit, be restarted
        send("log", "error", f"retiming worker executor stopped ({type(exc).__name__}: {exc}); the worker exits "
                             "and is started again")
        os._exit(3)

    serving = ServingThreads(ctx, config, item[1], lambda answer: send("answer", answer),
                             lambda level, text: send("log", level, text), on_executor_error=executor_stopped)
    server = serving.server
    send("ready")
    try:
        while True:
            item = pickle.loads(conn.recv_bytes())
            if item[0] == "params":
                server.set_params(item[1])
            elif item[0] == "model":
                try:
                    server.set_model(item[1], bool(item[2]), on_warm=lambda: send("warm"))
                except Exception as exc:  # noqa: BLE001 - keep serving the previous model (a restart would not help)
                    send("log", "error", f"retiming worker: model not taken ({type(exc).__name__}: {exc})")
            elif item[0] == "stop":
                break
    except (EOFError, OSError):
        pass
    finally:
        serving.shutdown(timeout=1.0)
        rclpy.try_shutdown(context=ctx)
        # the solver thread may still be inside a long solve: do not wait for it
        os._exit(0)


class WorkerProcess:
    """The parent's side of the worker process (module docstring): start, feed, restart, stop.

    Args:
        config: :func:`worker_main`'s config.
        on_answer: called with each answer dict (:meth:`RetimeServer.on_request`), on the reader thread.
        log: ``log(level, text)``, also on the reader thread.
        on_restart: called (reader thread) with the exit code of a worker that died unasked.

    Attributes:
        warm: set while the current worker serves a warmed-up model; cleared when a worker starts.
        restarts: workers started after the first one.
        pid: the current worker's process id (None before the first start).
    """

    def __init__(self, config: dict, on_answer: Callable[[dict], None], log: Callable[[str, str], None],
                 on_restart: Callable[[int | None], None] | None = None):
        self._config = dict(config)
        self._on_answer, self._log, self._on_restart = on_answer, log, on_restart
        self._send_lock = threading.Lock()
        self._stopping = threading.Event()
        self._params: bytes | None = None
        self._model: bytes | None = None
        self._conn = None
        self._proc = None
        self.warm = threading.Event()
        self.ready = threading.Event()
        self.restarts = 0
        self.pid: int | None = None
        self._thread = threading.Thread(target=self._supervise, name="retiming_worker_supervisor", daemon=True)
        self._thread.start()

    def set_params(self, params: Mapping) -> None:
        self._params = dumps(("params", dict(params)))
        self._send(self._params)

    def set_model(self, model, warmup: bool) -> None:
        """Send ``model`` (once per model version; again to a restarted worker)."""
        self.warm.clear()
        self._model = dumps(("model", model, bool(warmup)))
        self._send(self._model)

    def _send(self, data: bytes) -> None:
        with self._send_lock:
            conn = self._conn
            if conn is None:
                return  # the next worker gets it at its start
            try:
                conn.send_bytes(data)
            except (OSError, EOFError):
                pass  # the worker died: the supervisor restarts it and resends

    def _start(self):
        import json
        import socket
        import sys
        from multiprocessing.connection import Connection
        from pathlib import Path

        import robot_dynamics_ros

        parent_sock, child_sock = socket.socketpair()
        # the package this process runs, whatever sys.path tricks found it
        env = dict(os.environ)
        root = str(Path(robot_dynamics_ros.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join([root, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
        try:
            proc = subprocess.Popen([sys.executable, "-m", __name__, str(child_sock.fileno()),
                                     json.dumps(self._config)], pass_fds=(child_sock.fileno(),), env=env,
                                    stdin=subprocess.DEVNULL)
        finally:
            child_sock.close()
        parent = Connection(parent_sock.detach())
        with self._send_lock:
            self._conn, self._proc, self.pid = parent, proc, proc.pid
            self.warm.clear()
            self.ready.clear()
            for data in (self._params, self._model):  # pipe order: params before the model they serve
                if data is not None:
                    parent.send_bytes(data)
        return parent, proc

    def _supervise(self) -> None:
        pause = RESTART_MIN_S
        first = True
        while not self._stopping.is_set():
            try:
                conn, proc = self._start()
            except Exception as exc:  # noqa: BLE001 - e.g. out of memory or processes: retry later
                self._log("error", f"retiming worker process could not start: {exc}")
                self._stopping.wait(pause)
                pause = min(RESTART_MAX_S, 2 * pause)
                continue
            if not first:
                self.restarts += 1
            first = False
            self._log("info", f"retiming worker process {proc.pid} started")
            started = time.monotonic()
            self._read(conn)
            with self._send_lock:
                self._conn = None
            conn.close()
            try:
                code = proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:  # its pipe is closed but it lives on: end it
                proc.kill()
                code = proc.wait()
            if self._stopping.is_set():
                break
            self._log("error", f"retiming worker process {proc.pid} ended (exit {code}); requests it held get "
                               f"no answer; starting a new one")
            if self._on_restart is not None:
                self._on_restart(code)
            pause = RESTART_MIN_S if time.monotonic() - started > RESTART_MAX_S else min(RESTART_MAX_S, 2 * pause)
            self._stopping.wait(pause)

    def _read(self, conn) -> None:
        while True:
            try:
                item = pickle.loads(conn.recv_bytes())
            except (EOFError, OSError):
                return
            kind = item[0]
            try:
                if kind == "answer":
                    self._on_answer(item[1])
                elif kind == "warm":
                    self.warm.set()
                elif kind == "ready":
                    self.ready.set()
                elif kind == "log":
                    self._log(item[1], item[2])
            except Exception as exc:  # noqa: BLE001 - a callback error must not stop the supervision
                self._log("error", f"retiming worker message {kind!r} not handled: {exc}")

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop the worker (asked, then killed after ``timeout`` s) and the supervisor."""
        self._stopping.set()
        self._send(dumps(("stop",)))
        proc = self._proc
        if proc is not None:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(2.0)
        self._thread.join(timeout=2.0)


if __name__ == "__main__":  # python -m robot_dynamics_ros.retiming.worker FD CONFIG_JSON (WorkerProcess)
    import json
    import sys
    from multiprocessing.connection import Connection

    # the package's module, not this __main__ copy: what the parent pickles names it
    from robot_dynamics_ros.retiming.worker import worker_main as _main

    _main(Connection(int(sys.argv[1])), json.loads(sys.argv[2]))
