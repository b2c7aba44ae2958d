"""Gravity compensation as a ROS-free core: joint states in, ``tau = g(q) [+ friction]`` effort commands out.

``g(q) = RNEA(q, 0, 0)`` (Featherstone 2008, *Rigid Body Dynamics Algorithms*, §5.3; the law is
:func:`~robot_dynamics_ros.control.laws.gravity_compensation`) in the model's joint order, optionally plus the viscous + Coulomb friction torque of URDF ``<dynamics>``, clamped to the effort
limits and reordered into the command joint order (a ros2_control ``forward_command_controller``'s
``joints``). The input policy (readiness, plausibility gates, staleness by stamp and arrival, clock
jumps) is :class:`~robot_dynamics_ros.control.core.ControlCore`'s.

Safe command on stale input (``GravitySettings.stale_policy``; the state is stale once it is older than
``state_timeout``, by stamp or by arrival time):

* ``"hold"`` (default): keep commanding g(q_last), the gravity torque at the last accepted positions
  (without friction: the velocity is as old as the position), level WARN. The arm stays where it was
  last measured; an effort controller that latches its last command gets a model-based one.
* ``"zero"``: command zeros, level ERROR (the drives stop holding the arm against gravity: use this when
  the drives' brakes or their own holding take over).

Fresh data restores the normal command with the next accepted state. Disabled (``enabled=False``):
zeros are commanded, level OK while the state is fresh.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from robot_dynamics_ros.control import laws
from robot_dynamics_ros.control.core import ERROR, OK, WARN, ControlCore, CoreSettings, StepResult

__all__ = ["STALE_POLICIES", "GravitySettings", "GravityCompensator"]

#: values of :attr:`GravitySettings.stale_policy`
STALE_POLICIES = ("hold", "zero")

_RUNNING = "running"
_DISABLED = "disabled: commanding zeros"


@dataclass(frozen=True)
class GravitySettings(CoreSettings):
    """Settings of :class:`GravityCompensator` (frozen; change with :func:`dataclasses.replace`).

    Attributes (besides :class:`~robot_dynamics_ros.control.core.CoreSettings`'):
        enabled: compensate; False commands zeros (the drive gets an explicit zero).
        friction_compensation: add the URDF viscous + Coulomb friction torque (then a finite velocity of
            every joint is required).
        hardware_compensates_gravity: the drives add g(q) themselves; leave it out.
        stale_policy: ``"hold"`` or ``"zero"``, the command on stale input (module docstring).
    """

    CHOICES: ClassVar[Mapping[str, tuple[str, ...]]] = {"stale_policy": tuple(STALE_POLICIES)}

    enabled: bool = True
    friction_compensation: bool = False
    hardware_compensates_gravity: bool = False
    stale_policy: str = "hold"


class GravityCompensator(ControlCore):
    """The gravity-compensation policy (see the module docstring).

    Args:
        model: the :class:`~robot_dynamics_ros.model.RobotModel` (gravity vector and payload are the
            model's; change them with ``model.with_settings`` and :meth:`set_model`).
        settings: :class:`GravitySettings`.
        command_joints: command order (model joint names); None: all model joints in model order.
        engine: a dynamics engine over ``model`` (default: a new ``PinocchioDynamics``, this core's own).

    Raises:
        ValueError: a command joint is not a model joint (or listed twice); a setting out of range.
    """

    def __init__(self, model, settings: GravitySettings | None = None, command_joints=None, engine=None):
        self.settings = settings if settings is not None else GravitySettings()
        self.settings.check()
        self.require_velocity = self.settings.friction_compensation
        self.clamped = 0
        self.nonfinite = 0
        self.fault = ""
        self._bind(model, engine, command_joints)
        self._zero = [0.0] * self.mapper.n

    # ------------------------------------------------------------------ configuration
    def set_settings(self, settings: GravitySettings) -> None:
        """Use new settings from the next step (a change of ``friction_compensation`` waits for a
        complete state again: readiness depends on it).

        Raises:
            ValueError: a setting out of range (the old settings stay).
        """
        settings.check()
        old = self.settings
        self.settings = settings
        self._timeout_ns = int(settings.state_timeout * 1e9)
        if settings.friction_compensation != old.friction_compensation:
            self.require_velocity = settings.friction_compensation
            self._bind(self.model, self.engine, self.mapper.command_joints)
        elif (settings.position_margin, settings.prismatic_margin, settings.velocity_factor) != (
                old.position_margin, old.prismatic_margin, old.velocity_factor):
            self._bind(self.model, self.engine, self.mapper.command_joints, self.mapper)

    def with_settings(self, **changes) -> None:
        """:meth:`set_settings` with ``dataclasses.replace(self.settings, **changes)``."""
        self.set_settings(replace(self.settings, **changes))

    def set_model(self, model, engine=None, command_joints=None) -> None:
        """Swap in another model (e.g. ``model.with_settings(payload=...)``); the state carries over when
        the joints are the same. ``command_joints`` None keeps the current ones.

        Raises:
            ValueError: a command joint is not a joint of ``model``.
        """
        joints = self.mapper.command_joints if command_joints is None else command_joints
        self._bind(model, engine, joints, self.mapper)
        self._zero = [0.0] * self.mapper.n

    # ------------------------------------------------------------------ step
    def _gravity(self, friction: bool) -> list[float]:
        """:func:`~robot_dynamics_ros.control.laws.gravity_compensation` at the mapper's state, as a list (a few
        floats: Python list operations beat numpy calls in the clamp and reorder that follow)."""
        mapper = self.mapper
        return laws.gravity_compensation(
            self.engine, mapper.q, qd=mapper.qd if friction else None, friction=friction,
            hardware_compensates_gravity=self.settings.hardware_compensates_gravity).tolist()

    def safe_command(self, why: str) -> StepResult:
        """The command of ``stale_policy`` at the last known state (module docstring), ``safe=True``;
        also what a node publishes once when it is deactivated. ``why`` starts the reason."""
        s = self.settings
        if not self.mapper.ready:
            return StepResult(None, True, WARN, why + ": no state known, nothing to hold")
        if s.stale_policy == "zero" or not s.enabled:
            return StepResult(list(self._zero), True, ERROR if s.enabled else WARN, why + ": commanding zeros")
        tau = self._gravity(friction=False)
        self._clamp(tau)
        cmd = self._finite_command(tau)
        if cmd is None:
            return StepResult(None, True, ERROR, why + ": non-finite hold torque withheld")
        return StepResult(cmd, True, WARN, why + ": holding g(q) at the last known state")

    def step(self, now_ns: int, arrival_now_ns: int) -> StepResult:
        """The command for now.

        Args:
            now_ns: "now" on the clock of the header stamps (the node's ROS clock), ns.
            arrival_now_ns: "now" on the monotonic clock of the arrival times, ns.

        Returns:
            :class:`~robot_dynamics_ros.control.core.StepResult`: no command (WARN) until the state is
            complete; the normal command (OK) on a fresh state; the safe command of ``stale_policy`` on a
            stale one; no command (ERROR) on a fault (:attr:`fault`) or a non-finite torque.
        """
        if self.fault:
            return StepResult(None, False, ERROR, self.fault)
        mapper = self.mapper
        if not mapper._ready:
            return self._waiting()
        jumped = now_ns != mapper._last_now and mapper.check_clock(now_ns)
        age = mapper.age(now_ns, arrival_now_ns)
        if jumped or age * 1e9 > self._timeout_ns:
            return self.safe_command(self._stale_text(age, jumped))
        s = self.settings
        if not s.enabled:
            return StepResult(list(self._zero), False, OK, _DISABLED)
        tau = self._gravity(s.friction_compensation)
        self._clamp(tau)
        cmd = self._finite_command(tau)
        if cmd is None:
            return StepResult(None, False, ERROR, f"non-finite torque {tau} withheld")
        return StepResult(cmd, False, OK, _RUNNING)
