"""Recordings of a simulated plant for identification tests: MuJoCo, a perturbed URDF, friction, noise.

The plant is the URDF with some links' masses scaled and centres of mass shifted (:func:`perturbed_urdf`),
its ``<dynamics>`` set to zero so that MuJoCo adds no friction of its own; joint friction
tau_f = fc·tanh(qd / v_s) + fv·qd (v_s = 0.01 rad/s: Coulomb, smoothed over |qd| ≲ 0.03 rad/s) is
applied as a torque against the motor's: MuJoCo receives tau_motor − tau_f, re-evaluated at every physics substep (``substeps`` per control period; a stiff
smoothed Coulomb law held over a whole 1 ms control period would chatter: its slope fc / v_s times the
step exceeds twice a wrist's inertia). A computed-torque controller on the PRIOR model (the unperturbed URDF, Pinocchio)
tracks a reference (an excitation trajectory), so the motion is what a commissioning run would record.
Recorded: q, qd (MuJoCo's state) and the motor torque tau_motor + fo (fo: a bias of the torque
measurement, as ``RobotModel.effort_offset`` means it: measured = model torque + offset), each with white
Gaussian noise, every ``record_every`` control periods. The plant's parameters are the ground truth the tests compare with.
"""
from __future__ import annotations

import numpy as np

from robot_dynamics_ros.control.joint_mapping import JointStateFields
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.identification.data import Recording
from robot_dynamics_ros.identification.outputs import set_inertials
from robot_dynamics_ros.sim.mujoco_sim import MujocoSim

__all__ = ["perturbed_urdf", "record", "record_core"]


def perturbed_urdf(model, *, mass_scale=None, com_shift=None, dynamics=None) -> str:
    """The model's URDF text with ``mass_scale`` {link: factor} (inertia about the COM scaled alike),
    ``com_shift`` {link: (3,) m, link frame}, and every moving joint's <dynamics> set to 0, or to
    ``dynamics`` {joint: (damping N·m·s/rad, friction N·m)} (MuJoCo's dof_damping and dof_frictionloss)."""
    d = model.description
    inertials = {}
    for link in set(mass_scale or {}) | set(com_shift or {}):
        ine = d.links[link].inertial
        k = (mass_scale or {}).get(link, 1.0)
        inertials[link] = (ine.mass * k, ine.com + np.asarray((com_shift or {}).get(link, np.zeros(3))),
                           ine.inertia * k)
    dynamics = {jn: tuple((dynamics or {}).get(jn, (0.0, 0.0))) for jn in d.moving_joints}
    return set_inertials(model.urdf_xml, inertials, dynamics)


def record(plant_model, prior_model, reference, duration: float, *, friction=None, noise=(0.0, 0.0, 0.0),
           dt: float = 0.001, record_every: int = 5, kp: float = 400.0, kd: float = 40.0,
           seed: int = 0, payload=None, coulomb_velocity: float = 0.01, substeps: int = 10) -> Recording:
    """Simulate and record.

    Args:
        plant_model: RobotModel of the plant (e.g. from :func:`perturbed_urdf`), same joints as the prior.
        prior_model: RobotModel the controller uses.
        reference: callable t (N,) -> (q, qd, qdd) (N, n), e.g. ``FourierTrajectory.sample``.
        duration: s.  friction: (n, 3) (fc N·m, fv N·m·s/rad, fo N·m) of the plant and its sensor,
            default none.
        noise: standard deviations (q rad, qd rad/s, tau N·m) of the recorded values.
        dt: physics and control step, s.  record_every: physics steps per recorded sample.
        kp, kd: PD gains of the computed-torque law (1/s², 1/s).
        payload: (link, mass, com, inertia) attached to the plant in MuJoCo, or None.
        coulomb_velocity: v_s of the plant's Coulomb term fc·tanh(qd / v_s), rad/s (a discontinuous sign
            would chatter at each velocity reversal under a zero-order-hold torque).
        substeps: physics steps of dt / substeps per control period, the friction torque re-evaluated at
            each.

    Returns:
        :class:`Recording` (t, q, qd, tau with noise; qdd None), source "mujoco".
    """
    n = prior_model.n
    if tuple(plant_model.joint_names) != tuple(prior_model.joint_names):
        raise ValueError("plant and prior models have different joints")
    fr = np.zeros((n, 3)) if friction is None else np.asarray(friction, dtype=float)
    rng = np.random.default_rng(seed)
    sim = _plant(plant_model, dt, substeps, payload)
    ctrl = PinocchioDynamics(prior_model)
    steps = int(round(duration / dt))
    tt = dt * np.arange(steps + 1)
    q_ref, qd_ref, qdd_ref = reference(tt)
    sim.reset(q_ref[0], qd_ref[0])
    N = steps // record_every + 1
    t_rec = np.empty(N)
    q_rec = np.empty((N, n))
    qd_rec = np.empty((N, n))
    tau_rec = np.empty((N, n))
    k_rec = 0
    for k in range(steps + 1):
        q, qd = sim.q, sim.qd
        a = qdd_ref[k] + kp * (q_ref[k] - q) + kd * (qd_ref[k] - qd)
        tau = ctrl.rnea(q, qd, a)
        if k % record_every == 0:
            t_rec[k_rec], q_rec[k_rec], qd_rec[k_rec], tau_rec[k_rec] = tt[k], q, qd, tau + fr[:, 2]
            k_rec += 1
        if k == steps:
            break
        _step(sim, tau, fr, coulomb_velocity, substeps)
    sq, sqd, stau = noise
    return Recording(t_rec[:k_rec], tuple(prior_model.joint_names), q_rec[:k_rec] + rng.normal(0, sq, (k_rec, n)),
                     qd_rec[:k_rec] + rng.normal(0, sqd, (k_rec, n)), None,
                     tau_rec[:k_rec] + rng.normal(0, stau, (k_rec, n)), "mujoco")


def _plant(plant_model, dt, substeps, payload):
    if int(substeps) < 1:
        raise ValueError(f"substeps = {substeps}: must be ≥ 1")
    sim = MujocoSim(plant_model, timestep=dt / int(substeps), clamp_effort=False)
    if payload is not None:
        sim.set_payload(*payload)
    return sim


def _step(sim, tau_motor, fr, coulomb_velocity, substeps) -> None:
    """One control period: ``substeps`` physics steps with tau_motor held and the friction re-evaluated."""
    for _ in range(int(substeps)):
        qd = sim.qd
        tau_f = fr[:, 0] * np.tanh(qd / coulomb_velocity) + fr[:, 1] * qd
        sim.set_effort(tau_motor - tau_f)
        sim.step()


def record_core(plant_model, core, duration: float, *, friction=None, noise=(0.0, 0.0, 0.0),
                dt: float = 0.001, record_every: int = 5, seed: int = 0, payload=None, q0=None,
                coulomb_velocity: float = 0.01, substeps: int = 10, start_ns: int = 1_000_000_000):
    """Run a control core (e.g. :class:`~robot_dynamics_ros.control.computed_torque.ComputedTorqueController`
    or the gravity compensator, the cores the nodes wrap) in lockstep with the plant and record.

    Each control period k (time t_k = start_ns + k dt on the core's clock, ns): the plant's state goes to
    ``core.on_joint_state`` (stamped t_k, arriving at t_k), ``core.step(t_k, t_k)`` gives the command,
    which is held for the period (zero-order hold, as an effort driver does) while the plant's friction
    (as :func:`record`) acts against it. The recorded effort at t_k is that command (what a driver reports
    as the commanded motor torque, plus the sensor offset fo), q, qd the state it was computed from.

    Args:
        plant_model: RobotModel of the plant, same joints (model order) as the core's.
        core: a control core with ``on_joint_state(fields, arrival_ns, now_ns)`` and
            ``step(now_ns, arrival_now_ns)`` returning a ``StepResult``; trajectories already submitted.
        duration: s.  friction: (n, 3) (fc, fv, fo) of the plant.  noise: (q, qd, tau) std of the record.
        q0: (n,) initial position (default: the plant's initial positions), at rest.
        Other arguments as :func:`record`.

    Returns:
        (:class:`Recording`, commands (N, n) applied, without noise or offset). Raises RuntimeError when the core
        gives no command (naming its reason and the time).
    """
    n = plant_model.n
    names = tuple(j.encode() for j in plant_model.joint_names)
    fr = np.zeros((n, 3)) if friction is None else np.asarray(friction, dtype=float)
    rng = np.random.default_rng(seed)
    sim = _plant(plant_model, dt, substeps, payload)
    sim.reset(q0, np.zeros(n))
    steps = int(round(duration / dt))
    dt_ns = int(round(dt * 1e9))
    N = steps // record_every + 1
    t_rec, q_rec, qd_rec, tau_rec = np.empty(N), np.empty((N, n)), np.empty((N, n)), np.empty((N, n))
    k_rec = 0
    eff = (0.0,) * n
    for k in range(steps + 1):
        now = start_ns + k * dt_ns
        q, qd = sim.q, sim.qd
        rej = core.on_joint_state(JointStateFields(now, names, tuple(q.tolist()), tuple(qd.tolist()), eff), now, now)
        res = core.step(now, now)
        if rej is not None or res.command is None:
            raise RuntimeError(f"control core gave no command at t = {k * dt:.3f} s: {rej or res.reason}")
        tau = np.asarray(res.command, dtype=float)
        if k % record_every == 0:
            t_rec[k_rec], q_rec[k_rec], qd_rec[k_rec], tau_rec[k_rec] = k * dt, q, qd, tau + fr[:, 2]
            k_rec += 1
        if k == steps:
            break
        _step(sim, tau, fr, coulomb_velocity, substeps)
        eff = tuple(tau.tolist())
    sq, sqd, stau = noise
    rec = Recording(t_rec[:k_rec], tuple(plant_model.joint_names), q_rec[:k_rec] + rng.normal(0, sq, (k_rec, n)),
                    qd_rec[:k_rec] + rng.normal(0, sqd, (k_rec, n)), None,
                    tau_rec[:k_rec] + rng.normal(0, stau, (k_rec, n)), "mujoco")
    return rec, tau_rec[:k_rec] - fr[:, 2]
