"""The simulated robot standing in for Gazebo: MuJoCo stepped at a fixed timestep, driven by joint efforts.

Pure Python (no ROS): :class:`MujocoSim` is what the simulator node (:mod:`robot_dynamics_ros.nodes.simulator`)
wraps, and what tests and the tracking scenario can step directly. Arrays are in the RobotModel's joint
order (``joint_names``), shape ``(n,)``; q in rad (m), qd in rad/s, tau in N·m (N); time in s.

Physics: MuJoCo integrates M(q) qdd + c(q, qd) = tau_applied - b qd - f_c sgn-like(qd) (URDF damping b
and Coulomb friction f_c as MuJoCo's ``dof_damping`` / ``dof_frictionloss``, the latter a dry-friction constraint
|f| ≤ f_c stiffened to act as Coulomb friction: :mod:`~robot_dynamics_ros.sim.mujoco_model`), plus joint-limit constraint
forces at the URDF position limits; no contacts (geometry is dropped). The applied effort is held
(zero-order hold) until the next :meth:`MujocoSim.set_effort`, and clamped to the URDF effort limits,
as a motor driver does.

Implausible input and instability: an effort that is not finite or beyond :data:`MAX_SIM_EFFORT` in
magnitude (no motor of a robot arm reaches it; with ``clamp_effort`` off or without a URDF effort limit it
would reach the physics) is refused (ValueError). When a step goes unstable anyway (MuJoCo's
"Nan, Inf or huge value in QACC/QPOS/QVEL" warnings, after which MuJoCo itself resets the state to the
model's reference pose, a jump of several rad; a non-finite state; or, earlier, a joint speed beyond
:data:`MAX_SPEED`: a 1e6 N·m effort on a light wrist reaches 1e3 rad/s within one step and 1e4 rad of garbage
before MuJoCo warns; a bound relative to the URDF velocity limit would not do: arms of example-robot-data
falling freely from their demo pose reach up to 11× (Panda) and 274× (Kinova) their limits, which is physics,
not an instability), :meth:`MujocoSim.step` restores the
last good state (that of the start of the call), sets the applied effort to zero, counts it in
:attr:`MujocoSim.instabilities` and records the one-line :attr:`MujocoSim.instability`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from robot_dynamics_ros.sim.mujoco_model import MujocoModel, apply_payload, build_mujoco_model

__all__ = ["MujocoSim", "MAX_SIM_EFFORT", "MAX_SPEED"]

#: N·m (N): efforts beyond this magnitude are refused by :meth:`MujocoSim.set_effort`, whatever the
#: clamping (the largest industrial arms' joint torques are a few 10⁴ N·m)
MAX_SIM_EFFORT = 1e6
#: rad/s (m/s): a joint faster than this means the physics went unstable (a free fall of the arms of
#: example-robot-data from their demo poses stays below 250 rad/s)
MAX_SPEED = 1e3


class MujocoSim:
    """A MuJoCo simulation of ``model``.

    Args:
        model: the :class:`~robot_dynamics_ros.model.RobotModel` (held joints welded, same URDF as the
            controllers use).
        timestep: physics step, s (> 0).
        integrator: MuJoCo integrator (see :func:`~robot_dynamics_ros.sim.mujoco_model.build_mujoco_model`).
        clamp_effort: clamp applied efforts to ``model.effort_limit`` (default True).

    Raises:
        ValueError: bad timestep/integrator, or MuJoCo rejects the model.
    """

    def __init__(self, model, *, timestep: float = 0.001, integrator: str = "implicitfast",
                 clamp_effort: bool = True):
        # mujoco is optional and heavy: loaded when a simulator is built, not when this module is imported
        import mujoco

        self._mujoco = mujoco
        self.model = model
        self.mm: MujocoModel = build_mujoco_model(model, timestep=timestep, integrator=integrator,
                                                  inertia_floor=True)
        self.mj = self.mm.mj
        self.data = mujoco.MjData(self.mj)
        self.joint_names: tuple[str, ...] = tuple(model.joint_names)
        self.n = len(self.joint_names)
        self.index = {name: i for i, name in enumerate(self.joint_names)}
        self.clamp = bool(clamp_effort)
        self.effort_limit = np.asarray(model.effort_limit, dtype=float).copy()
        self._effort = np.zeros(self.n)
        #: how many effort entries were clamped since construction
        self.clamp_count = 0
        #: how many times a step went unstable and the last good state was restored (module docstring)
        self.instabilities = 0
        #: one line on the last instability ("" when none since construction)
        self.instability = ""
        self._max_speed = MAX_SPEED
        warn = mujoco.mjtWarning
        self._bad_warnings = (int(warn.mjWARN_BADQACC), int(warn.mjWARN_BADQPOS), int(warn.mjWARN_BADQVEL))
        self._qpos_adr = self.mm.qpos_adr
        self._dof_adr = self.mm.dof_adr
        self.reset()

    # ------------------------------------------------------------------ state
    @property
    def timestep(self) -> float:
        """Physics step, s."""
        return float(self.mj.opt.timestep)

    @property
    def time(self) -> float:
        """Simulated time since the last :meth:`reset`, s."""
        return float(self.data.time)

    @property
    def q(self) -> np.ndarray:
        """(n,) joint positions (a copy), model order."""
        return self.data.qpos[self._qpos_adr].copy()

    @property
    def qd(self) -> np.ndarray:
        """(n,) joint velocities (a copy), model order."""
        return self.data.qvel[self._dof_adr].copy()

    @property
    def effort(self) -> np.ndarray:
        """(n,) the effort being applied (after clamping), N·m (a copy), model order."""
        return self._effort.copy()

    def read(self, q_out: np.ndarray, qd_out: np.ndarray, effort_out: np.ndarray) -> None:
        """Copy q, qd and the applied effort into preallocated ``(n,)`` arrays (no allocation)."""
        np.take(self.data.qpos, self._qpos_adr, out=q_out)
        np.take(self.data.qvel, self._dof_adr, out=qd_out)
        effort_out[:] = self._effort

    def state_by_name(self) -> dict[str, tuple[float, float, float]]:
        """``{joint: (q, qd, effort)}``."""
        q, qd = self.q, self.qd
        return {name: (float(q[i]), float(qd[i]), float(self._effort[i]))
                for i, name in enumerate(self.joint_names)}

    def _vector(self, values, what: str, default: np.ndarray) -> np.ndarray:
        out = default.copy()
        if values is None:
            return out
        if isinstance(values, Mapping):
            for name, v in values.items():
                if name not in self.index:
                    raise ValueError(f"{what}: '{name}' is not a joint of the simulated robot "
                                     f"{list(self.joint_names)}")
                out[self.index[name]] = float(v)
        else:
            arr = np.asarray(values, dtype=float)
            if arr.shape != (self.n,):
                raise ValueError(f"{what}: expected {self.n} values in the order {list(self.joint_names)}, "
                                 f"got shape {arr.shape}")
            out[:] = arr
        if not np.isfinite(out).all():
            raise ValueError(f"{what}: non-finite value in {out.tolist()}")
        return out

    def reset(self, q: Sequence[float] | Mapping[str, float] | None = None,
              qd: Sequence[float] | Mapping[str, float] | None = None) -> None:
        """Reset time to 0, set q (default ``model.neutral()``) and qd (default 0), effort to 0.

        Args:
            q, qd: ``(n,)`` arrays in model order, or mappings joint name -> value (unnamed joints take
                the default).

        Raises:
            ValueError: unknown joint name, wrong length or non-finite value.
        """
        q_vec = self._vector(q, "q", self.model.neutral())
        qd_vec = self._vector(qd, "qd", np.zeros(self.n))
        self._mujoco.mj_resetData(self.mj, self.data)
        # all moving joints: mimic joints start where their equality constraint wants them
        self.data.qpos[self.mm.moving_qpos_adr] = self.model.expand(q_vec)
        self.data.qvel[self.mm.moving_dof_adr] = self.model.expand_rate(qd_vec)
        self._effort[:] = 0.0
        self.data.qfrc_applied[:] = 0.0
        self._mujoco.mj_forward(self.mj, self.data)

    # ------------------------------------------------------------------ inputs
    def set_effort(self, tau: np.ndarray) -> int:
        """Apply ``tau`` ((n,), model order, N·m) from now on; returns how many entries were clamped.

        Non-finite entries and entries beyond :data:`MAX_SIM_EFFORT` are not accepted (ValueError, the
        applied effort unchanged): a simulated motor driver faults rather than spinning.
        """
        tau = np.asarray(tau, dtype=float)
        if tau.shape != (self.n,):
            raise ValueError(f"effort: expected {self.n} values, got shape {tau.shape}")
        if not np.isfinite(tau).all():
            raise ValueError(f"effort: non-finite value in {tau.tolist()}")
        if np.abs(tau).max(initial=0.0) > MAX_SIM_EFFORT:
            j = int(np.argmax(np.abs(tau)))
            raise ValueError(f"effort: {tau[j]:g} on joint '{self.joint_names[j]}' is beyond the "
                             f"{MAX_SIM_EFFORT:g} accepted (MAX_SIM_EFFORT)")
        clamped = 0
        if self.clamp:
            clamped = int(np.count_nonzero(np.abs(tau) > self.effort_limit))
            np.clip(tau, -self.effort_limit, self.effort_limit, out=self._effort)
        else:
            self._effort[:] = tau
        self.clamp_count += clamped
        self.data.qfrc_applied[self._dof_adr] = self._effort
        return clamped

    def set_effort_by_name(self, efforts: Mapping[str, float]) -> int:
        """Set the effort of the named joints (others keep theirs); returns the clamp count."""
        return self.set_effort(self._vector(efforts, "effort", self._effort))

    def set_gravity(self, gravity: Sequence[float]) -> None:
        """Gravity vector in the world (= URDF root) frame, m/s²."""
        g = np.asarray(gravity, dtype=float)
        if g.shape != (3,) or not np.isfinite(g).all():
            raise ValueError(f"gravity: expected 3 finite numbers (m/s²), got {g.tolist()}")
        self.mj.opt.gravity[:] = g

    def set_payload(self, link: str | None, mass: float = 0.0, com=(0.0, 0.0, 0.0), inertia=None) -> None:
        """Attach a payload to ``link`` (None: remove); see :func:`~robot_dynamics_ros.sim.mujoco_model.apply_payload`."""
        apply_payload(self.mm, link, mass, com, inertia)
        self._mujoco.mj_forward(self.mj, self.data)

    # ------------------------------------------------------------------ stepping
    def _bad_count(self) -> int:
        warning = self.data.warning
        return sum(warning[w].number for w in self._bad_warnings)

    def step(self, n: int = 1) -> bool:
        """Advance ``n`` physics steps (n * timestep seconds) with the current effort.

        Returns:
            True; False when the physics went unstable: the state at the call (time included) is restored
            and the effort set to zero (module docstring, :attr:`instability`).
        """
        mj, data, step = self.mj, self.data, self._mujoco.mj_step
        good = (data.time, data.qpos.copy(), data.qvel.copy(), data.act.copy(), data.qacc_warmstart.copy())
        bad_before = self._bad_count()
        for _ in range(int(n)):
            step(mj, data)
        # (NaN compares False: a non-finite speed fails the bound)
        if (self._bad_count() == bad_before and (np.abs(data.qvel[self._dof_adr]) <= self._max_speed).all()
                and np.isfinite(data.qpos).all()):
            return True
        self._restore(good)
        return False

    def _restore(self, good) -> None:
        """Back to a saved state with zero effort, the instability recorded."""
        data = self.data
        data.time, data.qpos[:], data.qvel[:], data.act[:], data.qacc_warmstart[:] = good
        self.instabilities += 1
        applied = self._effort.copy()
        self._effort[:] = 0.0
        data.qfrc_applied[:] = 0.0
        self._mujoco.mj_forward(self.mj, data)
        j = int(np.argmax(np.abs(applied))) if self.n else 0
        self.instability = (f"physics unstable after t = {good[0]:.4f} s (MuJoCo: non-finite or huge "
                            f"acceleration, position or velocity, or a joint faster than {MAX_SPEED:g} rad/s): state of t = {good[0]:.4f} s restored, "
                            f"efforts set to zero (largest applied: {applied[j]:.4g} on joint "
                            f"'{self.joint_names[j]}'; {self.instabilities} so far)")

    def forward(self) -> None:
        """Recompute derived quantities (``qacc``, ``qfrc_bias``) at the current state, without stepping."""
        self._mujoco.mj_forward(self.mj, self.data)

    def acceleration(self) -> np.ndarray:
        """(n,) joint accelerations rad/s² at the current state and effort (after :meth:`forward`)."""
        return self.data.qacc[self._dof_adr].copy()

    # ------------------------------------------------------------------ external forces
    def link_jacobian(self, link: str) -> np.ndarray:
        """(3, n) translational Jacobian of ``link``'s centre of mass (world frame, m/rad) at the current
        state, in model joint order (runs ``mj_forward``).

        Raises:
            ValueError: ``link`` has no body in the simulation (unknown, or welded into its parent).
        """
        mujoco = self._mujoco
        body = mujoco.mj_name2id(self.mj, mujoco.mjtObj.mjOBJ_BODY, link)
        if body < 0:
            raise ValueError(f"link {link!r} has no body in the simulation (unknown, or welded to its parent)")
        mujoco.mj_forward(self.mj, self.data)
        jacp = np.zeros((3, self.mj.nv))
        mujoco.mj_jac(self.mj, self.data, jacp, None, self.data.xipos[body], body)
        return jacp[:, self._dof_adr]

    def push(self, link: str | None, force=None) -> np.ndarray:
        """Apply ``force`` (3,) N, world frame, at ``link``'s centre of mass during the following steps (and
        no other external force); ``link`` None clears every external force. Returns the joint torque the
        force exerts, Jᵀf (n,) N·m at the current state (zeros when cleared).

        Raises:
            ValueError: as :meth:`link_jacobian`; ``force`` not 3 finite numbers.
        """
        self.data.xfrc_applied[:] = 0.0
        if link is None:
            return np.zeros(self.n)
        f = np.asarray(force, dtype=float)
        if f.shape != (3,) or not np.isfinite(f).all():
            raise ValueError(f"force {force!r}: expected 3 finite numbers (N)")
        jac = self.link_jacobian(link)
        body = self._mujoco.mj_name2id(self.mj, self._mujoco.mjtObj.mjOBJ_BODY, link)
        self.data.xfrc_applied[body, :3] = f
        return jac.T @ f

    def bias_force(self) -> np.ndarray:
        """(n,) MuJoCo's bias force c(q, qd) = C(q, qd) qd + g(q), N·m (after :meth:`forward`)."""
        return self.data.qfrc_bias[self._dof_adr].copy()
