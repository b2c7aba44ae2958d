"""What the two control cores share: the step result, the input settings, the plausibility bounds and the
joint-state input policy (no ROS).

A control core (:class:`~robot_dynamics_ros.control.gravity_compensator.GravityCompensator`,
:class:`~robot_dynamics_ros.control.computed_torque.ComputedTorqueController`) is fed the fields of each
``sensor_msgs/JointState`` with :meth:`ControlCore.on_joint_state` and asked for a command with
``step()``; the ROS node around it only moves bytes, parameters and diagnostics. The same cores run
offline (``robot-dynamics replay`` recomputes commands, ``track`` drives a simulator) with the same
policy:

* **Readiness**: no command until every model joint has a position (and a finite velocity when the law
  needs one).
* **Plausibility gates** (:func:`plausibility_bounds`): a message with a position outside the model's
  limits widened by ``position_margin`` (rad; ``prismatic_margin`` m for prismatic joints; continuous
  joints and joints without limits are not gated), a velocity with ``|qd| > velocity_factor ×
  velocity_limit`` (joints with a finite positive velocity limit), or a non-finite position / infinite
  velocity is rejected as a whole, counted per joint name (``mapper.rejected_joints``). A NaN velocity is
  "unknown" (as ``joint_state_broadcaster`` sends it), never a value.
* **Time**: staleness by stamp and by arrival time (:meth:`JointStateMapper.age
  <robot_dynamics_ros.control.joint_mapping.JointStateMapper.age>`); a backward jump of the node clock
  restarts the stamp ordering and is reported; a stamp ahead of the node clock never blocks later
  correct states; a stamp more than ``state_timeout`` ahead is rejected.
* **Level**: :data:`OK` only while a fresh state drives the command; the safe command on stale input is
  the core's own (see each core).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from robot_dynamics_ros.control.joint_mapping import (CLOCK_JUMP_TOLERANCE_NS, JointStateMapper, Rejection,
                                                     likely_misspellings)
from robot_dynamics_ros.control.laws import clamp_effort_list, wrap_angle
# levels of a StepResult (the diagnostic_msgs/DiagnosticStatus levels)
from robot_dynamics_ros.control.levels import ERROR, OK, WARN
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.errors import UserError

__all__ = ["OK", "WARN", "ERROR", "StepResult", "CoreSettings", "plausibility_bounds", "ControlCore",
           "wrap_angle"]

#: the reason of a step before any joint state was accepted
WAITING_FOR_STATES = "waiting for joint_states"


class StepResult(NamedTuple):
    """The outcome of one control step.

    Attributes:
        command: the effort command in the core's command joint order (N·m or N), clamped when the
            settings say so, every entry finite; None when nothing is to be published.
        safe: True when ``command`` is the safe command for stale input (not a law of fresh data).
        level: :data:`OK` (a fresh state drives the command), :data:`WARN` or :data:`ERROR`.
        reason: one line saying what happened (constant strings on the OK path).
    """

    command: list[float] | None
    safe: bool
    level: int
    reason: str


@dataclass(frozen=True)
class CoreSettings:
    """Input and output policy shared by the cores (replace the whole object to change it).

    Attributes:
        state_timeout: s; a state older than this (by stamp or by arrival, see module docstring) is stale.
        clamp_to_effort_limits: clamp each torque to ± the model's effort limit.
        position_margin: rad; how far a revolute joint's measured position may lie outside its limits
            before the message is rejected as implausible.
        prismatic_margin: m; the same for prismatic joints.
        velocity_factor: a measured ``|qd|`` above this multiple of the joint's velocity limit is
            implausible. An order of magnitude, not the limit's edge: differentiated encoder velocities
            overshoot, and an arm falling before its drives hold it (a simulator starting without
            commands) reaches several times its rated speed; ten times it does not happen on a working
            sensor.
        allow_partially_massless: accept a model with massless moving links that really weigh nothing (see
            :meth:`RobotModel.torque_model_problem <robot_dynamics_ros.model.RobotModel.torque_model_problem>`);
            a kinematics-only model is refused whatever this says.
    """

    #: ``{field: allowed values}`` for the string-valued fields of a subclass, checked by :meth:`check`
    CHOICES: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    state_timeout: float = 0.1
    clamp_to_effort_limits: bool = True
    position_margin: float = 0.1
    prismatic_margin: float = 0.01
    velocity_factor: float = 10.0
    allow_partially_massless: bool = False

    def check(self) -> None:
        """Raise ValueError naming the field when a value is out of range."""
        for name, lo in (("state_timeout", 1e-6), ("position_margin", 0.0), ("prismatic_margin", 0.0),
                         ("velocity_factor", 1.0)):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= lo):
                raise ValueError(f"{name} = {v!r}: must be a finite number ≥ {lo}")
        for name, allowed in self.CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} = {getattr(self, name)!r}: must be one of {list(allowed)}")


def plausibility_bounds(model, settings: CoreSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(q_min, q_max, qd_max)``, each ``(n,)`` in model joint order, for :class:`JointStateMapper`.

    ``q_min = lower - margin`` and ``q_max = upper + margin`` (margin ``position_margin`` rad, or
    ``prismatic_margin`` m for a prismatic joint) where the joint has limits (finite and
    ``lower < upper``); ``-inf`` / ``inf`` for continuous joints and joints without usable limits.
    ``qd_max = velocity_factor * velocity_limit`` where the limit is finite and positive, else ``inf``.
    """
    lower = np.asarray(model.lower, dtype=float)
    upper = np.asarray(model.upper, dtype=float)
    types = tuple(getattr(model, "joint_types", ("revolute",) * model.n))
    margin = np.array([settings.prismatic_margin if t == "prismatic" else settings.position_margin
                       for t in types])
    limited = np.isfinite(lower) & np.isfinite(upper) & (lower < upper) & np.array(
        [t != "continuous" for t in types])
    q_min = np.where(limited, lower - margin, -np.inf)
    q_max = np.where(limited, upper + margin, np.inf)
    vmax = np.asarray(model.velocity_limit, dtype=float)
    qd_max = np.where(np.isfinite(vmax) & (vmax > 0), settings.velocity_factor * vmax, np.inf)
    return q_min, q_max, qd_max


class ControlCore:
    """Joint-state input, staleness and model handling common to both cores (not used on its own).

    Subclasses set ``self.settings`` and call :meth:`_bind` with the model and engine; they implement
    ``step``. Attributes a node reads for diagnostics: :attr:`mapper` (counters: ``accepted``,
    ``rejected``, ``rejected_joints``, ``unknown_name_count``, ``clock_jumps``), :attr:`clamped` (entries
    clamped so far), :attr:`nonfinite` (non-finite commands withheld), :attr:`model`, :attr:`engine`.
    """

    settings: CoreSettings
    require_velocity = True

    def _bind(self, model, engine, command_joints, old_mapper: JointStateMapper | None = None) -> None:
        """Use ``model``/``engine``; keep ``old_mapper``'s state when the joints are the same.

        Raises:
            UserError: the model cannot compute torques (``model.torque_model_problem``: moving links
                without mass), the one line naming the links; the core keeps its old model.
        """
        problem = model.torque_model_problem(allow_partial=self.settings.allow_partially_massless)
        if problem is not None:
            raise UserError(problem)
        if engine is None:
            engine = PinocchioDynamics(model)
        gates = plausibility_bounds(model, self.settings)
        commands = None if command_joints is None else tuple(command_joints)
        if (old_mapper is not None and old_mapper.joint_names == tuple(model.joint_names)
                and old_mapper.require_velocity == self.require_velocity
                and old_mapper.command_joints == (commands or old_mapper.joint_names)):
            # same joints: keep the state and counters (a payload or gravity change keeps running)
            mapper = old_mapper
            mapper.set_gates(*gates)
        else:
            mapper = JointStateMapper(model.joint_names, commands, require_velocity=self.require_velocity,
                                      q_min=gates[0], q_max=gates[1], qd_max=gates[2])
        self.model = model
        self.engine = engine
        self._effort_limit = [float(x) for x in model.effort_limit]
        self._continuous = np.array([t == "continuous" for t in getattr(model, "joint_types", ())]
                                    or [False] * model.n)
        self.mapper = mapper
        self._timeout_ns = int(self.settings.state_timeout * 1e9)

    # ------------------------------------------------------------------ input
    def on_joint_state(self, fields, arrival_ns: int, now_ns: int) -> Rejection | None:
        """Take one JointState (:class:`~robot_dynamics_ros.control.joint_mapping.JointStateFields`).

        Args:
            fields: the message's fields (``cdr.read_joint_state`` / ``cdr.fields_from_message``).
            arrival_ns: when it arrived, on a monotonic clock (ns).
            now_ns: "now" on the clock of the header stamps (the node's ROS clock), ns.

        Returns:
            None when accepted, else the :class:`~robot_dynamics_ros.control.joint_mapping.Rejection`
            (nothing of the message is used).
        """
        mapper = self.mapper
        last = mapper._last_now
        if last is not None and now_ns < last - CLOCK_JUMP_TOLERANCE_NS:
            mapper.check_clock(now_ns)
        else:
            mapper._last_now = now_ns      # (what check_clock does on no jump, without the call)
        return mapper.update_fields(fields, arrival_ns, now_stamp_ns=now_ns, max_future_ns=self._timeout_ns)

    def _age(self, now_ns: int, arrival_now_ns: int) -> tuple[float, bool]:
        """``(age s, jumped)``: the state's age, and whether ``now_ns`` was a backward clock jump."""
        mapper = self.mapper
        jumped = now_ns != mapper._last_now and mapper.check_clock(now_ns)
        return mapper.age(now_ns, arrival_now_ns), jumped

    def _clamp(self, tau: list[float]) -> None:
        if self.settings.clamp_to_effort_limits:
            n = clamp_effort_list(tau, self._effort_limit)
            if n:
                self.clamped += n

    def _finite_command(self, tau: list[float]) -> list[float] | None:
        """``tau`` (model order) -> command order, or None (counted) when an entry is not finite."""
        if not math.isfinite(sum(tau)):   # a sum of a few floats is cheaper than numpy's isfinite().all()
            if not all(math.isfinite(x) for x in tau):
                self.nonfinite += 1
                return None
        return self.mapper.to_command_list(tau)

    def _waiting(self) -> StepResult:
        mapper = self.mapper
        if mapper.accepted == 0:
            return StepResult(None, False, WARN, WAITING_FOR_STATES)
        missing = mapper.missing()
        hint = likely_misspellings(missing, mapper.last_unknown)
        return StepResult(None, False, WARN, "no command: joints missing from joint_states (or without a "
                          f"finite velocity): {missing[:8]}" + (f"; likely misspelt: {hint}" if hint else ""))

    def _stale_text(self, age: float, jumped: bool) -> str:
        if jumped:
            return (f"node clock jumped back (jump {self.mapper.clock_jumps}): stamp ordering restarted, "
                    "waiting for a fresh joint state")
        return f"joint_states stale ({age:.3f} s > state_timeout {self.settings.state_timeout} s)"
