"""The retiming service's policy without ROS: request -> :meth:`Retimer.retime` arguments -> answer.

The node (:mod:`robot_dynamics_ros.nodes.retiming_service`) moves bytes: it passes the
``RetimeTrajectory`` request, its parameters and the measured joint positions here and copies the
:class:`RetimeAnswer` into the response. Everything is duck-typed, so the unit tests use plain objects.

Request fields read (``robot_dynamics_interfaces/srv/RetimeTrajectory``): ``path.joint_names`` (any order,
matched by name), ``path.points[].positions``, ``velocity_scaling``, ``acceleration_scaling``,
``torque_margin``, ``path_tolerance``, ``sample_period``, ``jerk_scaling``, ``gridpoints``,
``start_velocity``, ``end_velocity``. A scaling / tolerance / period / gridpoints field of 0 means the node's
``default_*`` parameter (MoveIt's ``default_velocity_scaling_factor`` semantics); for the velocity and
acceleration scaling a parameter of 0 (not set) passes on to the joint_limits.yaml's
``default_*_scaling_factor``, else 1 (:func:`options_from_request`); ``jerk_scaling`` 0 means no jerk limit.

Partial requests: model joints the request does not name are held at the latest measured position not
older than ``joint_state_timeout`` (:class:`MeasuredPositions`); without one the request is refused,
naming them. ``max_waypoints`` is checked before any array is built, ``max_samples`` on the output.

Deadline and queue: :class:`DeadlineSolver` runs one solve at a time on its own thread, behind a bounded
queue, and answers every call within its deadline: the result, ``full`` at once when the queue is full,
``busy`` (the solver did not take it before the deadline) or ``timed out`` (the result is discarded; the
solver finishes it and takes the next call).
"""
from __future__ import annotations

import array
import math
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from robot_dynamics_ros.retiming.request import DEFAULT_PATH_TOLERANCE, MAX_GRIDPOINTS, RetimeOptions

__all__ = ["DEFAULT_PATH_TOLERANCE", "MAX_GRIDPOINTS", "DeadlineSolver", "MeasuredPositions", "RetimeAnswer",
           "acceleration_warning", "duration_parts", "fill_response", "handle_request", "options_from_request",
           "waypoint_array", "with_default_acceleration"]

#: prefix of the retimer's warning for joints without acceleration limits (the node adds its own, longer one)
_ACCELERATION_WARNING = "no acceleration limits"


def acceleration_warning(model) -> str:
    """The one-line warning naming the joints of ``model`` without an acceleration limit, or ''."""
    missing = [j for j, a in zip(model.joint_names, model.acceleration_limit) if not math.isfinite(a)]
    if not missing:
        return ""
    return (f"no acceleration limits configured for joints {missing} (set joint_limits_path to a "
            f"joint_limits.yaml, or acceleration_limit): their acceleration is bounded by the torque limits only")


def with_default_acceleration(model, acceleration: float):
    """``model``, or a copy of it whose infinite acceleration limits are ``acceleration`` (rad/s² or m/s²)
    when that is > 0; the given model is never modified."""
    if not acceleration > 0 or np.all(np.isfinite(model.acceleration_limit)):
        return model
    model = model.with_settings()
    a = np.array(model.acceleration_limit, dtype=float)
    a[~np.isfinite(a)] = float(acceleration)
    model.acceleration_limit = a
    return model


def duration_parts(seconds: float) -> tuple[int, int]:
    """``(sec, nanosec)`` of a ``builtin_interfaces/Duration`` for ``seconds`` ≥ 0 (rounded to 1 ns)."""
    ns = int(round(seconds * 1e9))
    return ns // 1_000_000_000, ns % 1_000_000_000


class MeasuredPositions:
    """Latest measured position of each model joint, with its arrival time.

    Only joints of ``joints`` are kept (bounded memory, whatever names arrive). :meth:`update` swaps one
    reference, so a reader on another thread sees either the old or the new table whole.

    Args:
        joints: the model's actuated joint names.
    """

    def __init__(self, joints: Sequence[str] = ()):
        self._joints = frozenset(joints)
        self._latest: dict[str, tuple[float, float]] = {}

    def update(self, names: Sequence[str], positions: Sequence[float], now_s: float) -> None:
        """Store ``positions`` (rad or m) of the known, finite ``names`` as measured at ``now_s`` (s,
        monotonic); unknown names and non-finite values are ignored."""
        fresh = {n: (float(p), now_s) for n, p in zip(names, positions) if n in self._joints and math.isfinite(p)}
        if fresh:
            merged = dict(self._latest)
            merged.update(fresh)
            self._latest = merged

    def hold(self, joints: Sequence[str], now_s: float, timeout_s: float) -> tuple[dict[str, float], list[str]]:
        """For ``joints``: ``(positions measured at most timeout_s before now_s by name, joints without
        one)``, the second in the order given."""
        latest = self._latest
        hold, absent = {}, []
        for j in joints:
            entry = latest.get(j)
            if entry is not None and now_s - entry[1] <= timeout_s:
                hold[j] = entry[0]
            else:
                absent.append(j)
        return hold, absent


@dataclass(frozen=True)
class RetimeAnswer:
    """What goes into the response.

    Attributes:
        success, message: the response's fields (``message`` carries the retimer's warnings, the peak
            fractions of the limits and the held joints on success).
        duration: s; max_path_deviation: rad / m (infinity norm), 0 when the retimer never ran.
        joint_names: the model's actuated joints (URDF order), empty on failure.
        t: (M,) s; q, qd, qdd, tau: (M, n) in ``joint_names`` order (rad, rad/s, rad/s², N·m); empty on failure.
        solve_ms: the retimer's wall time (ms), NaN when it never ran.
    """

    success: bool
    message: str
    duration: float = 0.0
    max_path_deviation: float = 0.0
    joint_names: tuple[str, ...] = ()
    t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    q: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    qd: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    qdd: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    tau: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    solve_ms: float = math.nan

    @classmethod
    def failure(cls, message: str) -> RetimeAnswer:
        return cls(False, message)


#: RetimeOptions field -> the RetimeTrajectory request field that sets it (a 0 there: the node's default_*)
REQUEST_FIELD_OF = {"velocity_scale": "velocity_scaling", "acceleration_scale": "acceleration_scaling",
                    "jerk_scale": "jerk_scaling"}


def options_from_request(request, params: Mapping) -> RetimeOptions:
    """The :class:`RetimeOptions` of ``request``; a field of 0 takes ``params["default_<...>"]``
    (``default_velocity_scaling_factor``, ``default_acceleration_scaling_factor``, ``default_torque_margin``,
    ``default_path_tolerance``, ``default_sample_period``, ``default_gridpoints``; 0 there too: the
    retimer's own default) and ``params["friction"]``. Velocity / acceleration scaling: the request's
    field, else the parameter when set (non-zero), else None — the model's joint_limits.yaml
    ``default_*_scaling_factor``, else 1 (:meth:`Retimer.resolved_options`). ``jerk_scaling`` scales the model's jerk limits
    (joint_limits.yaml ``max_jerk``; 0: the full limits); ``params.get("motor_limits_path")`` (the node
    parameter, a motor_limits.yaml, a bare name looked up in the package's config/ as joint_limits_path;
    empty or absent: none) turns on the rated/peak rules (the retimer reads the file; a bad one is refused
    naming it). Raises ValueError from RetimeOptions' checks."""

    def pick(value, default):
        return float(value) if value != 0.0 else float(default)

    def scale(value, key):
        # request > node parameter > the model's joint_limits.yaml default_*_scaling_factor > 1 (MoveIt's
        # order); a parameter of 0 (or none) is "not set", and None lets the retimer take the YAML's
        if value != 0.0:
            return float(value)
        return float(params.get(key) or 0.0) or None

    period = pick(request.sample_period, params["default_sample_period"])
    kwargs = dict(
        velocity_scale=scale(request.velocity_scaling, "default_velocity_scaling_factor"),
        acceleration_scale=scale(request.acceleration_scaling, "default_acceleration_scaling_factor"),
        torque_margin=pick(request.torque_margin, params["default_torque_margin"]),
        gridpoints=int(request.gridpoints) or (int(params["default_gridpoints"]) or None),
        sample_period=period or None, friction=bool(params["friction"]),
        path_tolerance=pick(request.path_tolerance, params["default_path_tolerance"]))
    if getattr(request, "jerk_scaling", 0.0) != 0.0:
        kwargs["jerk_scale"] = float(request.jerk_scaling)
    motor = params.get("motor_limits_path") or None
    if motor is not None:
        from robot_dynamics_ros.share import resolve_config_file

        kwargs["motor_limits"] = resolve_config_file(str(motor))
    return RetimeOptions(**kwargs)


def waypoint_array(rows: Sequence, k: int) -> np.ndarray:
    """The (len(rows), k) float array of ``rows`` (each k values, rad or m). Rows of ``array('d')`` (what
    rclpy gives for ``float64[]``) are joined as bytes: for 100 000 rows 0.04 s instead of numpy's 0.16-0.3 s
    element by element, time during which the interpreter lock is held."""
    if all(isinstance(r, array.array) and r.typecode == "d" for r in rows):
        return np.frombuffer(b"".join([r.tobytes() for r in rows]), dtype=float).reshape(len(rows), k).copy()
    return np.array(rows, dtype=float).reshape(len(rows), k)


def handle_request(request, retimer, model, params: Mapping, measured: MeasuredPositions, now_s: float,
                   state_topic: str = "joint_states") -> RetimeAnswer:
    """Check ``request``, retime it with ``retimer`` (built on ``model``) and build the answer.

    Args:
        request: duck-typed RetimeTrajectory request (module docstring).
        retimer: a :class:`~robot_dynamics_ros.retiming.retimer.Retimer` (or None: not loaded yet).
        params: the node's parameters: the ``default_*`` of :func:`options_from_request`, ``friction``,
            ``joint_state_timeout`` (s), ``max_waypoints``, ``max_samples``.
        measured: the latest measured positions; now_s: the same clock as their arrival times (s).
        state_topic: named in the refusal of a partial request without fresh measurements.

    Returns:
        the answer; every refusal is ``success=False`` with a one-line message naming the field, joint,
        waypoint or cap. Exceptions other than the options' ValueError propagate.
    """
    if retimer is None:
        return RetimeAnswer.failure("no robot model loaded yet (waiting for the robot description)")
    names = list(request.path.joint_names)
    points = request.path.points
    if not names:
        return RetimeAnswer.failure("path.joint_names is empty")
    if len(points) == 0:
        return RetimeAnswer.failure("path.points is empty: need at least one waypoint")
    if len(points) > params["max_waypoints"]:
        return RetimeAnswer.failure(f"path.points: {len(points)} waypoints exceed max_waypoints "
                                    f"{params['max_waypoints']}")
    k = len(names)
    rows = [pt.positions for pt in points]
    for i, row in enumerate(rows):
        if len(row) != k:
            return RetimeAnswer.failure(f"path.points[{i}].positions has {len(row)} values for "
                                        f"{k} joint_names")
    options = options_from_request(request, params)
    problem = options.problem(names=REQUEST_FIELD_OF)   # named as the request names it
    if problem:
        return RetimeAnswer.failure(problem)
    v0 = list(request.start_velocity)
    v1 = list(request.end_velocity)
    for what, v in (("start_velocity", v0), ("end_velocity", v1)):
        if v and len(v) != k:
            return RetimeAnswer.failure(f"{what}: {len(v)} values for {k} joint_names (empty = at rest)")
    named = set(names)
    unnamed = [j for j in model.joint_names if j not in named]
    timeout = float(params["joint_state_timeout"])
    # unknown or duplicate names: the retimer's message names them, whatever the hold (a duplicate leaves
    # a model joint unnamed, which would otherwise be refused as unmeasured)
    names_ok = len(named) == len(names) and named <= model.index.keys()
    hold, absent = measured.hold(unnamed, now_s, timeout) if names_ok else ({}, [])
    if absent:
        return RetimeAnswer.failure(f"joints {absent} are not in path.joint_names and have no measured "
                                    f"position on {state_topic} within joint_state_timeout {timeout:g} s: "
                                    f"name them in the request")
    wp = waypoint_array(rows, k)
    result = retimer.retime(wp, joint_names=names, start_velocity=v0 or None, end_velocity=v1 or None,
                            hold=hold or None, options=options)
    extra = [w for w in result.warnings if not w.startswith(_ACCELERATION_WARNING)]
    message = "; ".join([result.message, *extra])
    duration, deviation = float(result.duration), float(result.max_path_deviation)
    if not result.success:
        return RetimeAnswer(False, message, duration, deviation)
    if result.t.shape[0] > params["max_samples"]:
        return RetimeAnswer(False, f"the output would have {result.t.shape[0]} samples > max_samples "
                                   f"{params['max_samples']}: raise sample_period", duration, deviation)
    peaks = ", ".join(f"{key} {v:.3f}" for key, v in result.peak_fraction.items() if v is not None)
    held = f"; held at the measured state: {sorted(hold)}" if hold else ""
    if result.motor is not None:
        from robot_dynamics_ros.retiming.motor_limits import report_text

        held += f"; {report_text(result.motor)}"
    return RetimeAnswer(True, f"{message}; peak fraction of limits: {peaks}{held}", duration, deviation,
                        tuple(result.joint_names), result.t, result.q, result.qd, result.qdd, result.tau,
                        float(result.solve_ms))


def fill_response(response, answer: RetimeAnswer, message: str, point_type, duration_type) -> None:
    """Copy ``answer`` into a ``RetimeTrajectory`` response (duck-typed), with ``message`` as its message.

    ``point_type(positions=, velocities=, accelerations=, effort=, time_from_start=)`` builds a trajectory
    point and ``duration_type(sec=, nanosec=)`` its time; points (and joint names) only on success.
    """
    response.success = answer.success
    response.message = message
    response.duration = answer.duration
    response.max_path_deviation = answer.max_path_deviation
    points = []
    if answer.success:
        response.trajectory.joint_names = list(answer.joint_names)
        q, qd, qdd, tau = (a.tolist() for a in (answer.q, answer.qd, answer.qdd, answer.tau))
        for i, t in enumerate(answer.t.tolist()):
            sec, nanosec = duration_parts(t)
            points.append(point_type(positions=q[i], velocities=qd[i], accelerations=qdd[i], effort=tau[i],
                                     time_from_start=duration_type(sec=sec, nanosec=nanosec)))
    response.trajectory.points = points


class _Job:
    """One call of :meth:`DeadlineSolver.run` (or the warm-up): its function, state and outcome."""

    __slots__ = ("fn", "warmup", "state", "result", "error", "done")

    def __init__(self, fn: Callable[[], object], warmup: bool = False):
        self.fn, self.warmup = fn, warmup
        self.state = "waiting"            # -> running -> finished, or waiting -> dropped
        self.result = self.error = None
        self.done = threading.Event()


class DeadlineSolver:
    """One solve at a time on a thread of its own, behind a bounded queue; every :meth:`run` returns within
    its deadline.

    Intake and solving are separate: :meth:`run` puts the call in the queue (or refuses it at once when
    ``capacity`` calls already wait) and waits for its outcome; the solver thread takes the calls in order.

    Args:
        name: the solver thread's name.
        capacity: calls that may wait for the solver (the one being solved not counted), ≥ 1.

    Attributes:
        warm: set once :meth:`warm_up`'s function has returned (set from the start when never called).
    """

    def __init__(self, name: str = "solver", capacity: int = 16):
        if capacity < 1:
            raise ValueError(f"capacity {capacity}: must be ≥ 1")
        self.capacity = int(capacity)
        self._cv = threading.Condition()
        self._waiting: deque[_Job] = deque()
        self._closed = False
        self.warm = threading.Event()
        self.warm.set()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    @property
    def waiting(self) -> int:
        """Calls waiting for the solver now."""
        return len(self._waiting)

    def _serve(self) -> None:
        while True:
            with self._cv:
                while not self._waiting and not self._closed:
                    self._cv.wait()
                if not self._waiting:
                    return
                job = self._waiting.popleft()
                job.state = "running"
            try:
                job.result = job.fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller of run()
                job.error = exc
            finally:
                job.state = "finished"
                job.done.set()
                if job.warmup:
                    self.warm.set()
            # this loop's own name must not keep the job (its call's closure holds the request, and its result)
            # alive while it waits for the next one: a refused 1 M-point request stayed in memory (824 MB
            # against 219 MB) until another request came
            job = None

    def warm_up(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the solver thread before any call queued later or waiting now (they wait for it until
        their deadline); ``fn``'s exceptions are dropped."""
        self.warm.clear()
        with self._cv:
            self._waiting.appendleft(_Job(fn, warmup=True))
            self._cv.notify()

    def run(self, fn: Callable[[], object], timeout_s: float) -> tuple[str, object]:
        """Queue ``fn`` for the solver and wait for it at most ``timeout_s`` (s, queue and solve together).

        Returns:
            ``("done", fn())``; ``("full", None)`` at once when ``capacity`` calls already wait (or after
            :meth:`shutdown`); ``("busy", None)`` when the solver did not take ``fn`` before the deadline (its
            place is freed); ``("timed out", None)`` when ``fn`` started but did not return in time (it runs
            on, its result is discarded).

        Raises:
            whatever ``fn`` raised.
        """
        job = _Job(fn)
        with self._cv:
            if self._closed or len(self._waiting) >= self.capacity:
                return "full", None
            self._waiting.append(job)
            self._cv.notify()
        if not job.done.wait(max(0.0, timeout_s)):
            with self._cv:
                if job.state == "waiting":
                    self._waiting.remove(job)
                    job.state = "dropped"
                    return "busy", None
                if job.state == "running":
                    return "timed out", None
        if job.state == "dropped":
            return "busy", None
        if job.error is not None:
            raise job.error
        return "done", job.result

    def full_message(self) -> str:
        return (f"busy: {self.waiting} requests already wait for the solver (queue length {self.capacity}, "
                f"max_queued_requests); try again")

    def busy_message(self, deadline_s: float) -> str:
        what = "other requests" if self.warm.is_set() else "the warm-up (compiling the retiming kernels)"
        return (f"busy: the solver was occupied by {what} for the whole request_deadline ({deadline_s:g} s); "
                f"try again")

    @staticmethod
    def timeout_message(deadline_s: float) -> str:
        return (f"timed out: no result within request_deadline ({deadline_s:g} s); the result is discarded "
                f"(send fewer waypoints or gridpoints, or raise request_deadline)")

    def shutdown(self) -> None:
        """Take no more calls; calls still waiting return ``busy`` now; the running solve finishes on its
        thread (not waited for)."""
        with self._cv:
            self._closed = True
            dropped, self._waiting = list(self._waiting), deque()
            for job in dropped:
                job.state = "dropped"
                job.done.set()
            self._cv.notify_all()
