"""External joint torque and collision detection as a ROS-free core: joint states in, τ_ext and a flag out.

The estimate is the generalized-momentum observer's residual
(:class:`~robot_dynamics_ros.control.momentum_observer.MomentumObserver`: De Luca & Mattone 2003; Haddadin,
De Luca & Albu-Schäffer 2017) on the package's model, with the model's friction. The joint torque τ_m it
balances is, per ``ObserverSettings.torque_source``:

* ``"measured"``: the joint states' ``effort`` (joint torque sensors, or motor current × torque constant as
  ros2_control reports it) minus the model's ``effort_offset`` (the identified constant bias of the
  sensor, friction YAML; zero without one);
* ``"commanded"``: the last effort command sent to the drives (:meth:`ExternalTorqueCore.on_command`), for
  robots whose joint states carry no effort;
* ``"auto"`` (default): measured when every joint's effort is finite, else commanded.

The input policy (readiness, plausibility gates, staleness by stamp and by arrival, clock jumps) is
:class:`~robot_dynamics_ros.control.core.ControlCore`'s, as in the control nodes. On stale or incomplete
input the observer restarts (its integral over a gap would be meaningless), nothing is published and the
level is ERROR while a collision flag is held; the flag itself is only cleared by the detector's release
rule or :meth:`ExternalTorqueCore.reset_collision`, never by missing data.

Collision (:class:`~robot_dynamics_ros.control.momentum_observer.CollisionDetector`): per-joint thresholds
on |τ_ext| with hysteresis and a minimum duration.

Implausible joint torque (``ObserverSettings.effort_factor``, default 5): a sample of τ_m (measured or
commanded) with ``|τ_m| > effort_factor × effort limit`` on any joint (:data:`MAX_EFFORT` N·m, or N, for a
joint without a finite URDF effort limit) is a bad sample, not a collision: it is counted
(:attr:`ExternalTorqueCore.bad_torque`), nothing is published for it, the level is WARN (ERROR while a
collision flag is held) and the observer's state is not updated (the next good sample continues from the
last good one, within ``state_timeout``). Drives cannot produce such torques; a sensor glitch or a hostile
publisher can, and three such samples would otherwise declare a collision. The factor leaves room for what
a sensor really measures beyond the rated limit (impacts through the gearbox, sensor overshoot).

Friction at rest (``ObserverSettings.coulomb_velocity`` v_c, default
:data:`~robot_dynamics_ros.control.momentum_observer.DEFAULT_COULOMB_VELOCITY`): at rest the Coulomb
(static) friction is anywhere in [−F_c, F_c], so the observer cannot attribute it (Haddadin et al. 2017,
§IV, friction). For a sign-law friction model (URDF ``<dynamics friction>``) the observer's Coulomb term is
the ramp F_c · clip(q̇ / v_c, −1, 1), zero at rest instead of ±F_c from the sign of velocity noise (an
identified tanh(q̇ / v_s) law is kept), and the collision threshold of a joint with |q̇| < v_c is widened by
its F_c (with ``friction`` on): a residual inside the friction band of a slow joint is no collision. The external wrench at a frame is the least-squares
solution of Jᵀ(q) F = τ_ext (Haddadin 2017 §V; exact when the contact is at that frame and J has rank 6).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from robot_dynamics_ros.control.core import ERROR, OK, WARN, ControlCore, CoreSettings
from robot_dynamics_ros.control.momentum_observer import (DEFAULT_COULOMB_VELOCITY, CollisionDetector,
                                                          MomentumObserver)

__all__ = ["TORQUE_SOURCES", "ObserverSettings", "ObserverResult", "ExternalTorqueCore"]

#: values of :attr:`ObserverSettings.torque_source`
TORQUE_SOURCES = ("auto", "measured", "commanded")
#: the reason of a normal step, by the torque source in use
_RUNNING = {src: f"running ({src} torque)" for src in ("measured", "commanded")}
_STARTING = {src: f"observer starting ({src} torque)" for src in ("measured", "commanded")}
#: N·m (N): the plausibility bound of a joint torque sample on a joint without a finite effort limit (the
#: largest industrial arms' joint torques are a few 10⁴ N·m)
MAX_EFFORT = 1e5


@dataclass(frozen=True)
class ObserverSettings(CoreSettings):
    """Settings of :class:`ExternalTorqueCore` (frozen; change with :meth:`ExternalTorqueCore.with_settings`).

    Attributes (besides :class:`~robot_dynamics_ros.control.core.CoreSettings`'):
        gain: observer gain K_O, 1/s (time constant 1/K_O), all joints.
        threshold: collision threshold |τ_ext|, N·m (N); one value for all joints or one per model joint.
        release: fraction of the threshold below which a joint counts as released.
        min_duration: s a threshold must be exceeded (or every joint released) before the flag changes.
        torque_source: ``"auto"``, ``"measured"`` or ``"commanded"`` (module docstring).
        friction: subtract the model's friction torque (URDF ``<dynamics>``).
        integration: ``"euler"`` or ``"trapezoid"`` (see ``momentum_observer.INTEGRATIONS``).
        coulomb_velocity: v_c, rad/s (m/s) ≥ 0 (module docstring, "Friction at rest"): the Coulomb ramp of
            a sign-law friction model and the speed below which a joint's threshold is widened by its
            Coulomb friction; 0: bare sign(q̇), no widening.
        effort_factor: a joint torque sample above this multiple of a joint's effort limit is a bad sample
            (module docstring, "Implausible joint torque"), ≥ 1.
    """

    gain: float = 50.0
    threshold: tuple[float, ...] = (10.0,)
    release: float = 0.5
    min_duration: float = 0.002
    torque_source: str = "auto"
    friction: bool = True
    integration: str = "euler"
    coulomb_velocity: float = DEFAULT_COULOMB_VELOCITY
    effort_factor: float = 5.0

    def check(self) -> None:
        super().check()
        if not (math.isfinite(self.effort_factor) and self.effort_factor >= 1.0):
            raise ValueError(f"effort_factor = {self.effort_factor!r}: must be a finite number ≥ 1")
        if not (math.isfinite(self.gain) and self.gain > 0):
            raise ValueError(f"gain = {self.gain!r}: must be a positive number (1/s)")
        if not self.threshold or any(not (t > 0) for t in self.threshold):
            raise ValueError(f"threshold = {list(self.threshold)}: must be positive N·m (inf disables a joint)")
        if not 0.0 < self.release <= 1.0:
            raise ValueError(f"release = {self.release!r}: must be in (0, 1]")
        if not (math.isfinite(self.min_duration) and self.min_duration >= 0):
            raise ValueError(f"min_duration = {self.min_duration!r}: must be ≥ 0 s")
        if not (math.isfinite(self.coulomb_velocity) and self.coulomb_velocity >= 0):
            raise ValueError(f"coulomb_velocity = {self.coulomb_velocity!r}: must be ≥ 0 rad/s")
        if self.torque_source not in TORQUE_SOURCES:
            raise ValueError(f"torque_source = {self.torque_source!r}: must be one of {list(TORQUE_SOURCES)}")


class ObserverResult(NamedTuple):
    """One observer step.

    Attributes:
        tau_ext: (n,) list, model joint order, N·m (N); None when nothing is to be published.
        collision: the collision flag (held across missing data).
        onset: True at the step where a collision was declared.
        joints: names of joints above their threshold at this step.
        level: OK / WARN / ERROR. reason: one line.
    """

    tau_ext: list[float] | None
    collision: bool
    onset: bool
    joints: tuple[str, ...]
    level: int
    reason: str


class ExternalTorqueCore(ControlCore):
    """The external-torque observer policy (see the module docstring).

    Args:
        model: :class:`~robot_dynamics_ros.model.RobotModel`.
        settings: :class:`ObserverSettings`.
        command_joints: order of the effort command topic the ``commanded`` source reads (model joint
            names); None: model order.
        engine: a dynamics engine over ``model`` (default: a new ``PinocchioDynamics``).

    Raises:
        ValueError: a setting out of range; a threshold list whose length is neither 1 nor n; a command
            joint that is not a model joint.
    """

    def __init__(self, model, settings: ObserverSettings | None = None, command_joints=None, engine=None):
        self.settings = settings if settings is not None else ObserverSettings()
        self.settings.check()
        self.clamped = 0
        self.nonfinite = 0
        #: joint states for which no finite joint torque was available (nothing published for them)
        self.no_torque = 0
        #: joint torque samples rejected as implausible (module docstring; nothing published for them)
        self.bad_torque = 0
        self.fault = ""
        self._bind(model, engine, command_joints)
        self._build()

    def _build(self) -> None:
        s, n = self.settings, self.model.n
        thr = np.asarray(s.threshold, dtype=float)
        if thr.size not in (1, n):
            raise ValueError(f"threshold: {thr.size} values for {n} joints (give 1 or {n})")
        self.observer = MomentumObserver(self.engine, s.gain, friction=s.friction,
                                         max_dt=s.state_timeout, integration=s.integration,
                                         coulomb_velocity=s.coulomb_velocity)
        band = np.asarray(self.model.friction, dtype=float) if s.friction else None
        self.detector = CollisionDetector(n, np.broadcast_to(thr, (n,)), release=s.release,
                                          min_duration=s.min_duration, friction_band=band,
                                          band_velocity=s.coulomb_velocity)
        self.observer.watch(self.detector.threshold)
        self._commanded = np.full(n, np.nan)
        self._measured_first = s.torque_source != "commanded"
        self._sample_ns = 0
        self._no_torque_ns = -1
        offset = np.asarray(self.model.effort_offset, dtype=float)
        self._offset = offset.copy() if np.any(offset) else None  # measured = true torque + offset
        limit = np.asarray(self.model.effort_limit, dtype=float)
        self._torque_bound = np.where(np.isfinite(limit) & (limit > 0), s.effort_factor * limit, MAX_EFFORT)
        self._last_sample_ns: int | None = None
        self._last: ObserverResult | None = None

    # ------------------------------------------------------------------ configuration
    def set_settings(self, settings: ObserverSettings) -> None:
        """Use new settings; the observer restarts (its state belongs to the old gain), a declared
        collision stays declared.

        Raises:
            ValueError: a setting out of range (the old settings stay).
        """
        settings.check()
        collision = self.detector.collision
        self.settings = settings
        self._timeout_ns = int(settings.state_timeout * 1e9)
        self._bind(self.model, self.engine, self.mapper.command_joints, self.mapper)
        self._build()
        self.detector.collision = collision

    def with_settings(self, **changes) -> None:
        self.set_settings(replace(self.settings, **changes))

    def set_model(self, model, engine=None) -> None:
        """Swap in another model (payload or gravity change): the observer restarts, the flag stays."""
        collision = self.detector.collision
        self._bind(model, engine, self.mapper.command_joints, self.mapper)
        self._build()
        self.detector.collision = collision

    def reset_collision(self) -> None:
        """Clear the collision flag (an operator's acknowledgement)."""
        self.detector.reset()

    # ------------------------------------------------------------------ input
    def on_command(self, values) -> bool:
        """The effort command sent to the drives, in command joint order (the ``commanded`` source).

        Returns False (and keeps the previous command) when the length is wrong or a value is not finite.
        """
        mapper = self.mapper
        if len(values) != len(mapper.command_joints) or not all(math.isfinite(v) for v in values):
            return False
        self._commanded[mapper.command_index] = values
        return True

    def on_joint_state(self, fields, arrival_ns: int, now_ns: int):
        """:meth:`ControlCore.on_joint_state`, remembering the accepted message's sample time (its stamp, or
        its arrival time when unstamped); a message without efforts leaves no measured torque (not the
        efforts of an earlier message)."""
        rej = ControlCore.on_joint_state(self, fields, arrival_ns, now_ns)  # (cheaper than super() per message)
        if rej is None:
            self._sample_ns = fields.stamp_ns or arrival_ns
            if not fields.effort:  # the mapper keeps a joint's last effort: a state without any is no torque
                self.mapper.effort.fill(math.nan)
        return rej

    def _torque(self) -> tuple[np.ndarray | None, str]:
        src = self.settings.torque_source
        measured = self.mapper.effort
        # a sum over Python floats: a NaN or inf anywhere makes it non-finite (cheaper than numpy's reduce)
        if src != "commanded" and math.isfinite(sum(measured.tolist())):
            return (measured if self._offset is None else measured - self._offset), "measured"
        if src != "measured" and math.isfinite(sum(self._commanded.tolist())):
            return self._commanded, "commanded"
        if self._sample_ns != self._no_torque_ns:  # count the joint state once (the timer steps again)
            self.no_torque += 1
            self._no_torque_ns = self._sample_ns
        missing = [self.model.joint_names[i] for i in np.nonzero(~np.isfinite(measured))[0][:5]]
        if src == "measured":
            return None, f"joint_states carry no finite effort for {missing} (torque_source = measured)"
        if src == "commanded":
            return None, "no effort command heard yet (torque_source = commanded)"
        return None, (f"no joint torque: joint_states carry no finite effort for {missing} and no effort "
                      "command has been heard")

    # ------------------------------------------------------------------ step
    def _hold(self, level: int, reason: str) -> ObserverResult:
        self.observer.reset()
        self._last_sample_ns = None
        d = self.detector
        return ObserverResult(None, d.collision, False, (), ERROR if d.collision else level,
                              reason + (" (collision flag held)" if d.collision else ""))

    def step(self, now_ns: int, arrival_now_ns: int) -> ObserverResult:
        """Advance the observer to the newest accepted joint state and return τ_ext and the flag.

        Called after each accepted joint state (a step without a new sample returns the previous
        result unchanged). The sample time is the state's header stamp, or its arrival time when the
        stamp is zero.
        """
        if self.fault:
            return self._hold(ERROR, self.fault)
        mapper = self.mapper
        if not mapper._ready:
            r = self._waiting()
            return self._hold(r.level, r.reason)
        jumped = now_ns != mapper._last_now and mapper.check_clock(now_ns)
        age = mapper.age(now_ns, arrival_now_ns)
        if jumped or age * 1e9 > self._timeout_ns:
            return self._hold(ERROR, self._stale_text(age, jumped) + ": observer restarted, nothing published")
        sample_ns = self._sample_ns
        if sample_ns == self._last_sample_ns and self._last is not None:
            return self._last
        tau_m, source = self._torque()
        if tau_m is None:
            return self._hold(WARN, source)
        if not (np.abs(tau_m) <= self._torque_bound).all():
            return self._bad_sample(tau_m, source, sample_ns)
        observer = self.observer
        t_s = sample_ns * 1e-9
        try:  # the mapper's own (n,) float arrays: the unchecked entry of the observer
            r = observer._update_arrays(t_s, mapper.q, mapper.qd, tau_m)
        except ValueError as exc:  # a non-finite model term or residual: nothing of it is published
            self.nonfinite += 1
            return self._hold(ERROR, f"observer input rejected: {exc}")
        tau_ext = r.tolist()  # finite: the observer refuses a non-finite residual
        self._last_sample_ns = sample_ns
        detector = self.detector
        # the observer watches the detector's thresholds: with none exceeded and nothing pending the detector
        # has nothing to decide (the per-sample case)
        state = detector.update(t_s, tau_ext, mapper.qd) if observer.above or not detector.idle else None
        if state is not None and state.collision:
            names = tuple(self.model.joint_names[i] for i in state.joints)
            res = ObserverResult(tau_ext, True, state.onset, names, ERROR,
                                 f"collision: |tau_ext| above threshold on {list(names)}" if names
                                 else "collision declared, waiting for release")
        else:
            names = tuple(self.model.joint_names[i] for i in state.joints) if state is not None else ()
            settling = observer.samples < 2  # the first sample only initializes the momentum
            res = ObserverResult(tau_ext, False, False, names, WARN if settling else OK,
                                 (_STARTING if settling else _RUNNING)[source])
        self._last = res
        return res

    def _bad_sample(self, tau_m: np.ndarray, source: str, sample_ns: int) -> ObserverResult:
        """An implausible joint torque: counted, nothing published, the observer state kept as it was."""
        self.bad_torque += 1
        i = int(np.argmax(np.abs(tau_m) / self._torque_bound))
        d = self.detector
        res = ObserverResult(None, d.collision, False, (), ERROR if d.collision else WARN,
                             f"implausible {source} torque sample rejected ({self.bad_torque} so far): "
                             f"{tau_m[i]:.6g} on joint '{self.model.joint_names[i]}' is beyond "
                             f"{self._torque_bound[i]:.6g} (effort_factor {self.settings.effort_factor:g} × "
                             "effort limit)" + (" (collision flag held)" if d.collision else ""))
        self._last_sample_ns = sample_ns   # a repeated step for this sample returns the same result
        self._last = res
        return res

    # ------------------------------------------------------------------ wrench
    def wrench(self, frame: str) -> np.ndarray | None:
        """External wrench (6,) at ``frame``'s origin, base-frame axes: (f_x, f_y, f_z, m_x, m_y, m_z) in N
        and N·m, the least-squares solution of Jᵀ F = τ_ext with J the frame's LOCAL_WORLD_ALIGNED
        Jacobian at the last state; None before the first estimate.

        Raises:
            UserError: ``frame`` is not a link or joint of the model.
        """
        if self._last is None or self._last.tau_ext is None:
            return None
        J = self.engine.frame_jacobian(self.mapper.q, frame)
        F, *_ = np.linalg.lstsq(J.T, np.asarray(self._last.tau_ext), rcond=1e-6)
        return F
