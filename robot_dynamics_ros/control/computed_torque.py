"""Trajectory following with model-based effort commands, as a ROS-free core.

Control laws (:attr:`ComputedTorqueSettings.mode`; e = q_d − q, ė = qd_d − qd, model joint order; for a
continuous joint e is taken the short way, in [−π, π)):

* ``feedforward``:     τ = RNEA(q_d, qd_d, qdd_d) + P e + D ė
  (Lynch & Park 2017, *Modern Robotics*, §11.4.1, feedforward control, plus joint PD);
* ``computed_torque``: τ = M(q)(qdd_d + K_d ė + K_p e) + C(q, qd) qd + g(q)
  (Lynch & Park 2017, §11.4.1, without the integral term; one RNEA call). Needs M(q) > 0: refused for a
  model with joints that move no mass (``model.massless_joints``);
* ``gravity``:         τ = g(q) + P e + D ė  (PD with gravity compensation, Spong, Hutchinson &
  Vidyasagar 2006, *Robot Modeling and Control*, §8.2).

Friction feedforward (:attr:`ComputedTorqueSettings.friction_compensation`, default on): in the
``feedforward`` and ``computed_torque`` modes, when the model has friction (URDF ``<dynamics damping
friction>``, or the identified friction YAML installed in the model), the model's friction torque at the
DESIRED velocity, τ_f(qd_d) = damping · qd_d + friction · law(qd_d) (``engine.friction_torque``, the same
model the gravity node's ``friction_compensation`` uses; ``law`` = sign, or tanh(qd/v_s) with identified
friction), is added to the command and to the reported feedforward. Compensating friction on the
reference velocity rather than the measured one is the standard model-based feedforward (Siciliano,
Sciavicco, Villani & Oriolo 2009, *Robotics: Modelling, Planning and Control*, §8.5 and §8.6;
Armstrong-Hélouvry, Dupont & Canudas de Wit 1994, Automatica 30(7), §5): the reference is smooth and
noise-free, so the discontinuous Coulomb term does not chatter on measurement noise around q̇ = 0, and at
rest (qd_d = 0) nothing is added (the static friction there is taken up by the feedback). The ``gravity``
mode (a baseline without any feedforward of the desired motion) never adds it.

The desired motion is a :class:`~robot_dynamics_ros.control.interpolation.TrajectoryExecutor`
(``joint_trajectory_controller`` semantics) fed with :meth:`ComputedTorqueController.submit_trajectory`;
before the first trajectory the first measured q is held. It is sampled in virtual time τ with τ̇ = k, the
speed-scaling factor (:mod:`~robot_dynamics_ros.control.speed_scaling`): the desired velocity and
acceleration are q̇_d = k q′ and q̈_d = k² q″ + k̇ q′, so the feedforward is RNEA(q_d, k q′, k² q″ + k̇ q′)
(+ τ_f(k q′)); at k = 1 (the default) τ is the node time itself.

Drives that add g(q) themselves (``hardware_compensates_gravity``, e.g. Franka's libfranka torque
interface, UR's torque control): g(q) at the measured q is subtracted from every command, the safe
command included (which then is zero), so gravity is not counted twice. The reported feedforward stays
the full RNEA of the desired motion.

Gains left unset (``unset_gains = "model"``, modes ``feedforward`` and ``gravity``, every ``p`` and ``d``
zero): at the first complete state q₀ each joint gets a critically damped PD loop of bandwidth ω
(``model_gain_bandwidth``, rad/s) on its own inertia, p_j = ω² M_jj(q₀), d_j = 2 ω M_jj(q₀) (the case
study's MuJoCo tracking gains), so an unknown robot holds its pose instead of drifting open loop.

Safe command on stale input (the state older than ``state_timeout`` by stamp or arrival time, or the node
clock jumped back): gravity only at the last known state, τ = g(q_last), clamped — no PD, no
feedforward, whatever the mode — with level ERROR. The next fresh state restores the mode's law.
The input policy (readiness, plausibility gates, time) is
:class:`~robot_dynamics_ros.control.core.ControlCore`'s.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from robot_dynamics_ros.control import laws
from robot_dynamics_ros.control.core import (
    ERROR, OK, WARN, ControlCore, CoreSettings, StepResult, wrap_angle,
)
from robot_dynamics_ros.control.interpolation import (
    START_TOLERANCE, DesiredState, JointTrajectorySpec, TrajectoryExecutor, check_trajectory_acceleration,
    check_trajectory_speed, validate_joint_trajectory,
)
from robot_dynamics_ros.control.speed_scaling import DEFAULT_JERK, DEFAULT_RATE, VirtualClock, scale_derivatives
from robot_dynamics_ros.errors import UserError

__all__ = ["MODES", "DEFAULT_GAINS", "GAIN_UNITS", "GAIN_TEXT", "Gains", "control_torque",
           "ComputedTorqueSettings", "ComputedTorqueController"]

#: values of :attr:`ComputedTorqueSettings.mode`
MODES = ("feedforward", "computed_torque", "gravity")

#: default gains (per joint): PD in N·m/rad, N·m·s/rad; computed torque in 1/s², 1/s (ω = 20 rad/s,
#: critically damped: kd = 2ω, kp = ω²)
DEFAULT_GAINS = {"p": 0.0, "d": 0.0, "kp": 400.0, "kd": 40.0}
GAIN_UNITS = {"p": "N·m/rad", "d": "N·m·s/rad", "kp": "1/s²", "kd": "1/s"}
GAIN_TEXT = {"p": "PD position gain of the feedforward and gravity modes",
             "d": "PD velocity gain of the feedforward and gravity modes",
             "kp": "computed-torque position gain (acceleration per rad of error)",
             "kd": "computed-torque velocity gain (acceleration per rad/s of error)"}


@dataclass
class Gains:
    """Per-joint gains in model joint order, each ``(n,)``.

    Attributes:
        p: N·m/rad. d: N·m·s/rad (PD of ``feedforward`` / ``gravity``).
        kp: 1/s². kd: 1/s (``computed_torque``).
    """

    p: np.ndarray
    d: np.ndarray
    kp: np.ndarray
    kd: np.ndarray

    @classmethod
    def default(cls, n: int) -> Gains:
        return cls(*(np.full(n, DEFAULT_GAINS[k]) for k in ("p", "d", "kp", "kd")))

    @classmethod
    def from_inertia(cls, inertia_diagonal: np.ndarray, bandwidth: float) -> Gains:
        """Critically damped per-joint PD gains on the joints' own inertia (module docstring):
        p = ω² M_jj, d = 2 ω M_jj with ``inertia_diagonal`` M_jj ``(n,)`` (kg·m², kg) and ω = ``bandwidth``
        (rad/s); kp, kd at their defaults."""
        m = np.asarray(inertia_diagonal, dtype=float)
        w = float(bandwidth)
        return cls(w * w * m, 2.0 * w * m, np.full(len(m), DEFAULT_GAINS["kp"]), np.full(len(m), DEFAULT_GAINS["kd"]))

    @classmethod
    def from_mapping(cls, joint_names, gains: Mapping[str, Mapping[str, float]]) -> Gains:
        """Defaults overridden by ``gains[joint][kind]`` (kind p, d, kp, kd).

        Raises:
            ValueError: an unknown joint or kind, or a value that is not finite and ≥ 0.
        """
        out = cls.default(len(joint_names))
        index = {j: i for i, j in enumerate(joint_names)}
        for joint, kinds in gains.items():
            if joint not in index:
                raise ValueError(f"gains: '{joint}' is not a model joint")
            for kind, value in kinds.items():
                if kind not in DEFAULT_GAINS:
                    raise ValueError(f"gains.{joint}.{kind}: kind must be one of {list(DEFAULT_GAINS)}")
                v = float(value)
                if not (np.isfinite(v) and v >= 0):
                    raise ValueError(f"gains.{joint}.{kind} = {value!r}: must be finite and ≥ 0")
                getattr(out, kind)[index[joint]] = v
        return out


def control_torque(mode: str, engine, q: np.ndarray, qd: np.ndarray, desired: DesiredState,
                   gains: Gains, *, friction: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The effort command of one tick and the feedforward torque of the desired motion.

    Args:
        mode: one of :data:`MODES` (see the module docstring for each law and its source).
        engine: dynamics engine (``PinocchioDynamics``), arrays in model joint order.
        q, qd: ``(n,)`` measured positions (rad) and velocities (rad/s).
        desired: q_d, qd_d, qdd_d ``(n,)`` (rad, rad/s, rad/s²); for continuous joints q_d is expected
            within π of q (the caller takes the short way).
        gains: per-joint :class:`Gains`.
        friction: add the friction feedforward τ_f(qd_d) = ``engine.friction_torque(desired.qd)`` (module
            docstring) in the ``feedforward`` and ``computed_torque`` modes; ignored by ``gravity``.

    Returns:
        ``(tau, tau_ff)``, both ``(n,)`` N·m: the command (not yet clamped) and the feedforward of the
        desired motion, RNEA(q_d, qd_d, qdd_d) [+ τ_f(qd_d) with ``friction``, not in mode ``gravity``].

    Raises:
        ValueError: unknown mode.
    """
    tau_ff = laws.feedforward(engine, desired.q, desired.qd, desired.qdd)
    tau_f = engine.friction_torque(desired.qd) if friction and mode != "gravity" else None
    if tau_f is not None:
        tau_ff = tau_ff + tau_f
    if mode == "feedforward":
        tau = tau_ff + gains.p * (desired.q - q) + gains.d * (desired.qd - qd)
    elif mode == "computed_torque":
        tau = laws.computed_torque(engine, q, qd, desired.q, desired.qd, desired.qdd, gains.kp, gains.kd)
        if tau_f is not None:
            tau = tau + tau_f
    elif mode == "gravity":
        tau = laws.gravity_compensation(engine, q) + gains.p * (desired.q - q) + gains.d * (desired.qd - qd)
    else:
        raise ValueError(f"mode '{mode}': must be one of {list(MODES)}")
    return tau, tau_ff


@dataclass(frozen=True)
class ComputedTorqueSettings(CoreSettings):
    """Settings of :class:`ComputedTorqueController` (frozen; change with :func:`dataclasses.replace`).

    Attributes (besides :class:`~robot_dynamics_ros.control.core.CoreSettings`'):
        mode: one of :data:`MODES`.
        gains: ``{joint: {kind: value}}`` overrides of :data:`DEFAULT_GAINS` (kinds p, d, kp, kd; units
            :data:`GAIN_UNITS`).
        check_position_limits: reject trajectories with positions outside the model's limits.
        friction_compensation: add the model's friction torque at the desired velocity in the
            ``feedforward`` and ``computed_torque`` modes (module docstring); a no-op on a model without
            friction.
        hardware_compensates_gravity: the drives add g(q); subtract it from every command.
        speed_scaling: the initial speed-scaling factor k ∈ [0, 1].
        speed_scaling_rate, speed_scaling_jerk: |k̇| (1/s) and |k̈| (1/s²) limits of k
            (:class:`~robot_dynamics_ros.control.speed_scaling.VirtualClock`).
        unset_gains: ``"zero"`` (the gains as given) or ``"model"`` (p, d from M(q₀) when all are zero;
            module docstring). model_gain_bandwidth: ω of the ``"model"`` gains, rad/s.
    """

    CHOICES: ClassVar[Mapping[str, tuple[str, ...]]] = {"mode": tuple(MODES), "unset_gains": ("zero", "model")}

    mode: str = "feedforward"
    gains: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    check_position_limits: bool = True
    friction_compensation: bool = True
    hardware_compensates_gravity: bool = False
    speed_scaling: float = 1.0
    speed_scaling_rate: float = DEFAULT_RATE
    speed_scaling_jerk: float = DEFAULT_JERK
    unset_gains: str = "zero"
    model_gain_bandwidth: float = 20.0

    def check(self) -> None:
        """Raise ValueError naming the field when a value is out of range."""
        super().check()
        VirtualClock(self.speed_scaling, self.speed_scaling_rate, self.speed_scaling_jerk)
        w = self.model_gain_bandwidth
        if not (isinstance(w, (int, float)) and np.isfinite(w) and w > 0):
            raise ValueError(f"model_gain_bandwidth = {w!r}: must be a finite number > 0")


class ComputedTorqueController(ControlCore):
    """Trajectory sampling and the control laws of the module docstring, with the input policy.

    Args:
        model: the :class:`~robot_dynamics_ros.model.RobotModel`.
        settings: :class:`ComputedTorqueSettings`.
        command_joints: command order (model joint names); None: all model joints.
        engine: a dynamics engine over ``model`` (default: a new ``PinocchioDynamics``).
        epoch_ns: the clock reading (ns) trajectory times count from (:class:`TrajectoryExecutor`).

    Raises:
        ValueError: a command joint is not a model joint; a setting out of range; an unknown gain joint.
        UserError: mode ``computed_torque`` on a model with massless joints (M(q) singular).

    Attributes:
        desired: the last sampled :class:`DesiredState` (None before the first command), real-time
            derivatives (speed scaling applied).
        feedforward: ``(n,)`` RNEA(q_d, qd_d, qdd_d) [+ the friction feedforward τ_f(qd_d)] of the last
            command, N·m.
        gains: the :class:`Gains` in use (model order).
        clock: the :class:`~robot_dynamics_ros.control.speed_scaling.VirtualClock` (k, k̇, τ).
        virtual_time: τ of the last sample (s since ``epoch_ns`` at k = 1).
        model_gains: True once the ``"model"`` gains replaced unset ones.
    """

    require_velocity = True

    def __init__(self, model, settings: ComputedTorqueSettings | None = None, command_joints=None,
                 engine=None, *, epoch_ns: int = 0):
        settings = settings if settings is not None else ComputedTorqueSettings()
        self.clamped = 0
        self.nonfinite = 0
        self.fault = ""
        self.desired: DesiredState | None = None
        self.feedforward: np.ndarray | None = None
        self.epoch_ns = int(epoch_ns)
        self._check(model, settings)
        self.settings = settings
        self.gains = Gains.from_mapping(model.joint_names, settings.gains)
        self.model_gains = False
        self._q0: np.ndarray | None = None     # the first measured q (the "model" gains' M(q₀))
        self.clock = VirtualClock(settings.speed_scaling, settings.speed_scaling_rate, settings.speed_scaling_jerk)
        self.virtual_time = 0.0
        self._bind(model, engine, command_joints)
        self._set_friction()
        self.trajectory = TrajectoryExecutor(model.n, epoch_ns=self.epoch_ns, continuous=self._continuous)
        #: a collision reported by an observer: gravity only until :meth:`reset_collision`
        self.collision = False

    @staticmethod
    def _check(model, settings: ComputedTorqueSettings) -> None:
        settings.check()
        massless = tuple(getattr(model, "massless_joints", ()))
        if settings.mode == "computed_torque" and massless:
            raise UserError(f"mode computed_torque needs M(q) > 0, but joints {list(massless)} of "
                            f"'{model.description.name}' move no mass or inertia; use feedforward or gravity")

    def _set_friction(self) -> None:
        """Whether the law adds the friction feedforward: the setting is on and the model has friction."""
        m = self.model
        self._friction = self.settings.friction_compensation and bool(np.any(m.damping) or np.any(m.friction))

    # ------------------------------------------------------------------ configuration
    def set_settings(self, settings: ComputedTorqueSettings) -> None:
        """Use new settings (mode, gains, limits) from the next step.

        Raises:
            ValueError / UserError: as the constructor; the old settings stay.
        """
        self._check(self.model, settings)
        gains = Gains.from_mapping(self.model.joint_names, settings.gains)
        old = self.settings
        self.settings = settings
        self.gains = gains
        self.model_gains = False
        if self._q0 is not None:    # unset gains stay the model's ones (at the same q₀) across changes
            self._set_model_gains(self._q0)
        self.clock.rate, self.clock.jerk = settings.speed_scaling_rate, settings.speed_scaling_jerk
        if settings.speed_scaling != old.speed_scaling:
            self.clock.set_target(settings.speed_scaling)
        self._timeout_ns = int(settings.state_timeout * 1e9)
        if (settings.position_margin, settings.prismatic_margin, settings.velocity_factor) != (
                old.position_margin, old.prismatic_margin, old.velocity_factor):
            self._bind(self.model, self.engine, self.mapper.command_joints, self.mapper)
        self._set_friction()

    def with_settings(self, **changes) -> None:
        """:meth:`set_settings` with ``dataclasses.replace(self.settings, **changes)``."""
        self.set_settings(replace(self.settings, **changes))

    def set_model(self, model, engine=None) -> None:
        """Swap in a model with the same joints (e.g. ``model.with_settings(payload=...)``); state, gains
        and trajectory carry over.

        Raises:
            ValueError: ``model`` has other joints than the current one.
            UserError: mode ``computed_torque`` and ``model`` has massless joints.
        """
        if tuple(model.joint_names) != tuple(self.model.joint_names):
            raise ValueError(f"set_model: joints {list(model.joint_names)} differ from "
                             f"{list(self.model.joint_names)}; build a new controller")
        self._check(model, self.settings)
        self._bind(model, engine, self.mapper.command_joints, self.mapper)
        self._set_friction()

    # ------------------------------------------------------------------ trajectories
    def time_s(self, now_ns: int) -> float:
        """``now_ns`` as seconds since ``epoch_ns`` (the executor's time base)."""
        return (now_ns - self.epoch_ns) * 1e-9

    def trajectory_from_message(self, msg, start_tolerance: float = START_TOLERANCE) -> JointTrajectorySpec:
        """Validate a ``trajectory_msgs/JointTrajectory`` (duck-typed) against the model: its size
        (:data:`~robot_dynamics_ros.control.interpolation.MAX_TRAJECTORY_POINTS`, before any per-point work),
        fields, position limits, the joints' velocity limits from the measured position (once a state is
        known; the first point may be ``start_tolerance`` rad further) and between the points
        (:func:`~robot_dynamics_ros.control.interpolation.check_trajectory_speed`), and their accelerations
        against the acceleration limits or, without one, the effort a joint's own inertia needs
        (:func:`~robot_dynamics_ros.control.interpolation.check_trajectory_acceleration`).

        Raises:
            TrajectoryRejected: the reason names the field, index, joint and value.
        """
        m = self.model
        check = self.settings.check_position_limits
        spec = validate_joint_trajectory(msg, m.joint_names, lower=m.lower if check else None,
                                         upper=m.upper if check else None, continuous=self._continuous)
        measured = self.mapper.q if self.mapper.ready else None
        check_trajectory_speed(spec, measured, m.velocity_limit, continuous=self._continuous,
                               start_tolerance=start_tolerance)
        engine = self.engine
        check_trajectory_acceleration(spec, m.acceleration_limit, effort_limit=m.effort_limit,
                                      inertia_diagonal=lambda q: np.diag(engine.mass_matrix(q)))
        return spec

    def submit_trajectory(self, spec: JointTrajectorySpec, received_s: float) -> float:
        """Queue a validated trajectory received at ``received_s`` (s since ``epoch_ns``); returns its start
        in virtual time τ (equal to the node time while k = 1). A stamped start ahead of ``received_s`` is
        placed that far ahead in τ (at the current k it is reached then). Continuous joints start from the
        current desired position the short way."""
        tau = self.clock.virtual(received_s)
        if spec.start_ns != 0:
            tau += self.time_s(spec.start_ns) - received_s
            spec = replace(spec, start_ns=0)
        return self.trajectory.submit(spec, tau)

    def hold_desired(self, q=None) -> None:
        """Drop any trajectory (running or pending) and hold ``q`` ``(n,)`` (rad), by default the last
        desired position (the end of a smooth stop; before the first sample the measured one), with
        qd = qdd = 0."""
        last = self.trajectory.last
        hold = q if q is not None else last.q if last is not None else (self.mapper.q if self.mapper.ready else None)
        self.trajectory = TrajectoryExecutor(self.model.n, hold, epoch_ns=self.epoch_ns, continuous=self._continuous)

    def sample_desired(self, t: float) -> DesiredState:
        """Advance the virtual clock to ``t`` (s since ``epoch_ns``) and sample the desired motion with the
        speed scaling applied (module docstring); None while nothing is known."""
        clock = self.clock
        tau = self.virtual_time = clock.advance(t)
        d = self.trajectory.sample(tau)
        if d is not None and (clock.k != 1.0 or clock.k_dot != 0.0):
            qd, qdd = scale_derivatives(clock.k, clock.k_dot, d.qd, d.qdd)
            d = DesiredState(d.q, qd, qdd, d.tracking)
        return d

    # ------------------------------------------------------------------ collision reaction
    def set_collision(self) -> None:
        """React to a collision (Haddadin 2017 §VI, "gravity compensation" reaction): from the next step
        the command is g(q) at the measured state only — no PD, no feedforward, the trajectory dropped — so
        the arm yields to whatever it hit, until :meth:`reset_collision`."""
        self.collision = True

    def reset_collision(self) -> None:
        """Resume after a collision: the arm holds where it is (a new trajectory starts from there)."""
        if self.collision:
            self.collision = False
            self.trajectory = TrajectoryExecutor(self.model.n, epoch_ns=self.epoch_ns, continuous=self._continuous)

    def _set_model_gains(self, q0: np.ndarray) -> None:
        """The ``"model"`` gains at the first state when every p and d is zero (module docstring)."""
        self._q0 = np.array(q0, dtype=float)
        s, g = self.settings, self.gains
        if s.unset_gains != "model" or s.mode == "computed_torque" or g.p.any() or g.d.any():
            return
        diag = np.diag(self.engine.mass_matrix(q0)).copy()
        self.gains = Gains.from_inertia(diag, s.model_gain_bandwidth)
        self.model_gains = True

    # ------------------------------------------------------------------ step
    def safe_command(self, why: str) -> StepResult:
        """Gravity only at the last known state, ``safe=True``, level ERROR (module docstring); also what a
        node publishes once when it is deactivated. ``why`` starts the reason."""
        if not self.mapper.ready:
            return StepResult(None, True, WARN, why + ": no state known, nothing to hold")
        if self.settings.hardware_compensates_gravity:
            tau = [0.0] * self.model.n
        else:
            tau = self.engine.gravity(self.mapper.q).tolist()
        self._clamp(tau)
        cmd = self._finite_command(tau)
        if cmd is None:
            return StepResult(None, True, ERROR, why + ": non-finite gravity torque withheld")
        return StepResult(cmd, True, ERROR, why + ": gravity only at the last known state")

    def step(self, now_ns: int, arrival_now_ns: int, sample_ns: int | None = None) -> StepResult:
        """The command for now.

        Args:
            now_ns: "now" on the node's ROS clock (stamps, trajectory times), ns.
            arrival_now_ns: "now" on the monotonic clock of the arrival times, ns.
            sample_ns: when to sample the desired motion (ROS clock, ns); default ``now_ns`` (a node ticking
                on joint states passes the state's stamp).

        Returns:
            :class:`~robot_dynamics_ros.control.core.StepResult`: no command (WARN) until the state is
            complete; the mode's law (OK) on a fresh state; the gravity-only safe command (ERROR) on a stale
            one and after :meth:`set_collision`; no command (ERROR) on a fault or a non-finite torque.
        """
        if self.fault:
            return StepResult(None, False, ERROR, self.fault)
        mapper = self.mapper
        if not mapper.ready:
            return self._waiting()
        age, jumped = self._age(now_ns, arrival_now_ns)
        if jumped or age * 1e9 > self._timeout_ns:
            return self.safe_command(self._stale_text(age, jumped))
        if self.collision:
            return self.safe_command("collision reaction (until ~/reset_collision)")
        ex = self.trajectory
        q, qd = mapper.q, mapper.qd
        if not ex.has_hold_position:
            ex.set_hold_position(q)
            self._set_model_gains(q)
        desired = self.sample_desired(self.time_s(now_ns if sample_ns is None else sample_ns))
        if self._continuous.any():
            # the short way to the desired angle: q_d moved by whole turns to within π of q
            q_d = desired.q.copy()
            c = self._continuous
            q_d[c] = q[c] + wrap_angle(q_d[c] - q[c])
            desired = DesiredState(q_d, desired.qd, desired.qdd, desired.tracking)
        try:
            tau, tau_ff = control_torque(self.settings.mode, self.engine, q, qd, desired, self.gains,
                                         friction=self._friction)
        except ValueError as exc:   # the engine's own input checks: not fatal for the node
            return StepResult(None, False, ERROR, f"control law failed: {exc}")
        self.desired, self.feedforward = desired, tau_ff
        if self.settings.hardware_compensates_gravity:
            tau = tau - self.engine.gravity(q)
        tau = tau.tolist()
        self._clamp(tau)
        cmd = self._finite_command(tau)
        if cmd is None:
            return StepResult(None, False, ERROR, f"non-finite torque {tau} withheld")
        return StepResult(cmd, False, OK, _TRACKING[self.settings.mode] if desired.tracking
                          else _HOLDING[self.settings.mode])


_TRACKING = {m: f"{m}: tracking" for m in MODES}
_HOLDING = {m: f"{m}: holding" for m in MODES}
