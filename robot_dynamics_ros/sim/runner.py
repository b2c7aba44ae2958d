"""The simulator node's stepping policy without ROS: commands in, when to step and when to publish.

:class:`SimRunner` wraps a :class:`~robot_dynamics_ros.sim.mujoco_sim.MujocoSim`; the node
(:mod:`robot_dynamics_ros.nodes.simulator`) calls :meth:`SimRunner.on_command` for each received effort
command, :meth:`SimRunner.tick` from its timer (free running) or :meth:`SimRunner.resend_due` (lockstep),
and publishes the state when they say so. Times are caller-given seconds of a monotonic clock, so the
tests drive it without sleeping.

Two stepping modes:

* free running: each tick advances the physics to ``real_time_factor`` × the time elapsed since the first
  tick (at most :data:`MAX_STEPS_PER_TICK` physics steps per tick); the last command is held (zero before
  the first one, and after ``command_timeout`` s without commands when that is > 0). With
  ``start_on_first_command`` the physics stays paused until the first command.
* lockstep: every accepted command advances the physics by one control period (``period_s``, rounded to
  whole physics steps); the state is published again after ``lockstep_resend`` s without a command.

Health (:meth:`SimRunner.status`, for the node's diagnostics): a command beyond
:data:`~robot_dynamics_ros.sim.mujoco_sim.MAX_SIM_EFFORT` is rejected like a non-finite one; a step that
goes unstable is undone by the simulation (state restored, efforts zeroed) and the held command dropped;
the status is ERROR right after it, WARN (with the count) until :meth:`SimRunner.reset`, else OK.

Clock: :meth:`SimRunner.now_ns` is ``clock_base_ns`` + the physics time; :meth:`SimRunner.reset` moves the
base forward by the elapsed physics time (plus 1 ms with ``publish_clock``), so the published clock never
goes back.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robot_dynamics_ros.control.levels import ERROR, OK, WARN
from robot_dynamics_ros.control.joint_mapping import index_map
from robot_dynamics_ros.sim.mujoco_sim import MAX_SIM_EFFORT

#: most physics steps one free-running tick takes (a stalled process does not catch up in one burst)
MAX_STEPS_PER_TICK = 1000


def inertia_matrix(inertia6) -> np.ndarray:
    """The (3, 3) inertia (kg·m²) of the six parameters ixx ixy ixz iyy iyz izz.

    Raises:
        ValueError: the matrix is not positive semi-definite (one line quoting the values).
    """
    a = [float(v) for v in inertia6]
    inertia = np.array([[a[0], a[1], a[2]], [a[1], a[3], a[4]], [a[2], a[4], a[5]]])
    if np.linalg.eigvalsh(inertia).min() < -1e-12:
        raise ValueError(f"payload.inertia = {list(inertia6)}: not positive semi-definite")
    return inertia


@dataclass(frozen=True)
class CommandRejection:
    """Why a command was not applied: ``kind`` ("length", "non_finite" or "implausible": beyond
    :data:`~robot_dynamics_ros.sim.mujoco_sim.MAX_SIM_EFFORT`) and a one-line ``message``."""

    kind: str
    message: str


class SimRunner:
    """Stepping policy around ``sim`` (see the module docstring).

    Args:
        sim: the MuJoCo simulation (its ``joint_names`` are the model's actuated joints).
        command_joints: joint order of the effort commands (empty: ``sim.joint_names``).
        lockstep: step once per command instead of following the clock.
        period_s: control (lockstep) / publication period, s.
        now_s: the monotonic time of creation (s): the command timeout counts from it.
        lockstep_resend, command_timeout: s (module docstring); real_time_factor: simulated s per s.
        start_on_first_command: free running: physics paused until the first command.
        publish_clock: the simulated time is published (reset leaves a 1 ms gap on the clock).
        clock_base_ns: the clock at physics time 0, ns.

    Attributes:
        stop_time: physics time (s) at which stepping stops (None: never); :attr:`done` turns True.
        commands: commands applied; resent: lockstep states published again for lack of a command.

    Raises:
        ValueError: a command joint is not a joint of the model (or is repeated).
    """

    def __init__(self, sim, command_joints: Sequence[str] = (), *, lockstep: bool = False,
                 period_s: float = 0.002, now_s: float = 0.0, lockstep_resend: float = 0.1,
                 command_timeout: float = 0.0, real_time_factor: float = 1.0,
                 start_on_first_command: bool = False, publish_clock: bool = False, clock_base_ns: int = 0):
        self.sim = sim
        self.joints = tuple(command_joints) or tuple(sim.joint_names)
        self._cmd_index = index_map(sim.joint_names, self.joints, what="command joint")
        self.lockstep = bool(lockstep)
        self.lockstep_resend = float(lockstep_resend)
        self.command_timeout = float(command_timeout)
        self.real_time_factor = float(real_time_factor)
        self.start_on_first_command = bool(start_on_first_command)
        self.publish_clock = bool(publish_clock)
        self.clock_base_ns = int(clock_base_ns)
        self.set_period(period_s)
        self._tau = np.zeros(sim.n)
        self._last_cmd = float(now_s)
        self._wall0: float | None = None
        self._got_command = False
        self._steps_done = 0
        self.stop_time: float | None = None
        self.done = False
        self.commands = 0
        self.resent = 0
        #: instabilities since the last reset; whether the last stepping call was undone
        self.unstable = 0
        self._just_unstable = False

    def set_period(self, period_s: float) -> None:
        """Change the control / publication period (s); the physics time base is kept."""
        self.period_s = float(period_s)
        self.steps_per_command = max(1, int(round(self.period_s / self.sim.timestep)))

    def on_command(self, data: Sequence[float], now_s: float) -> CommandRejection | None:
        """Apply an effort command (``command_joints`` order, N·m or N); lockstep: then step one period.

        Returns None when applied, else the rejection (wrong length, a non-finite value, a value beyond
        :data:`~robot_dynamics_ros.sim.mujoco_sim.MAX_SIM_EFFORT`); a rejected command changes nothing.
        """
        if len(data) != len(self._cmd_index):
            return CommandRejection("length", f"command rejected: data has {len(data)} entries, expected "
                                              f"{len(self._cmd_index)} for joints {list(self.joints)}")
        tau = np.asarray(data, dtype=float)
        if not np.isfinite(tau).all():
            return CommandRejection("non_finite", f"command rejected: non-finite value in data {tau.tolist()}")
        if np.abs(tau).max(initial=0.0) > MAX_SIM_EFFORT:
            j = int(np.argmax(np.abs(tau)))
            return CommandRejection("implausible", f"command rejected: {tau[j]:g} for joint '{self.joints[j]}' is "
                                                   f"beyond {MAX_SIM_EFFORT:g} (MAX_SIM_EFFORT)")
        self._tau[self._cmd_index] = tau
        self.sim.set_effort(self._tau)
        self.commands += 1
        self._got_command = True
        self._last_cmd = now_s
        if self.lockstep and not self.done:
            self._step(self.steps_per_command)
            self._check_stop()
        return None

    def _step(self, n: int) -> None:
        """Step the physics; an instability (undone by the simulation) also drops the held command."""
        ok = self.sim.step(n)
        self._just_unstable = not ok
        if not ok:
            self.unstable += 1
            self._tau[:] = 0.0

    def status(self) -> tuple[int, str]:
        """``(level, message)`` for the node's diagnostics (module docstring, "Health"): ERROR with the
        simulation's one-line :attr:`~robot_dynamics_ros.sim.mujoco_sim.MujocoSim.instability` right after
        an instability, WARN with the count until :meth:`reset`, else ``(OK, "running")``."""
        if self._just_unstable:
            return ERROR, self.sim.instability
        if self.unstable:
            return WARN, f"{self.unstable} physics instabilities undone since the last reset; last: {self.sim.instability}"
        return OK, "running"

    def resend_due(self, now_s: float) -> bool:
        """Lockstep: True (and the resend counted) when no command came for ``lockstep_resend`` s."""
        if self.done or now_s - self._last_cmd <= self.lockstep_resend:
            return False
        self.resent += 1
        self._last_cmd = now_s
        return True

    def tick(self, now_s: float) -> str | None:
        """Free running: advance the physics to the clock (the caller publishes afterwards unless
        :attr:`done` was already True). Returns a warning when the command timeout zeroed the efforts."""
        if self._wall0 is None:
            if self.start_on_first_command and not self._got_command:
                return None
            self._wall0 = now_s
        warning = None
        if self.command_timeout > 0 and now_s - self._last_cmd > self.command_timeout and self._tau.any():
            self._tau[:] = 0.0
            self.sim.set_effort(self._tau)
            warning = f"no command for {self.command_timeout} s: efforts set to zero"
        target = int((now_s - self._wall0) * self.real_time_factor / self.sim.timestep)
        n = min(target - self._steps_done, MAX_STEPS_PER_TICK)
        if n > 0:
            self._step(n)
            self._steps_done = target
        self._check_stop()
        return warning

    def _check_stop(self) -> None:
        if self.stop_time is not None and self.sim.time >= self.stop_time - 1e-9:
            self.done = True

    def reset(self, q=None, qd=None) -> None:
        """Reset the physics (time 0, efforts 0) to ``q`` / ``qd`` (see ``MujocoSim.reset``); the clock
        base moves forward by the elapsed physics time (+1 ms with ``publish_clock``)."""
        self.clock_base_ns += int(round(self.sim.time * 1e9)) + (1_000_000 if self.publish_clock else 0)
        self.sim.reset(q, qd)
        self._tau[:] = 0.0
        self._wall0 = None
        self._got_command = False
        self._steps_done = 0
        self.done = False
        self.unstable = 0
        self._just_unstable = False

    def now_ns(self) -> int:
        """The simulated clock, ns: ``clock_base_ns`` + the physics time."""
        return self.clock_base_ns + int(round(self.sim.time * 1e9))
