"""Recordings of a simulated plant for identification tests: MuJoCo, a perturbed URDF, friction, noise.

The plant is the URDF with some links' masses scaled and centres of mass shifted (:func:`perturbed_urdf`),
its ``<dynamics>`` set to zero so that MuJoCo adds no friction of its own; joint friction
tau_f = fc·tanh(qd / v_s) + fv·qd + fo (v_s = 0.01 rad/s: Coulomb, smoothed over
|qd| ≲ 0.03 rad/s) is applied as a torque against the motor's: MuJoCo receives
tau_motor − tau_f. A computed-torque controller on the PRIOR model (the unperturbed URDF, Pinocchio)
tracks a reference (an excitation trajectory), so the motion is what a commissioning run would record.
Recorded: q, qd (MuJoCo's state) and the motor torque tau_motor, each with white Gaussian noise, every
``record_every`` physics steps. The plant's parameters are the ground truth the tests compare with.
"""
from __future__ import annotations

import numpy as np

from robot_dynamics_ros.identification.data import Recording
from robot_dynamics_ros.identification.outputs import set_inertials

__all__ = ["perturbed_urdf", "record"]


def perturbed_urdf(model, *, mass_scale=None, com_shift=None) -> str:
    """The model's URDF text with ``mass_scale`` {link: factor} (inertia about the COM scaled alike),
    ``com_shift`` {link: (3,) m, link frame}, and every moving joint's <dynamics> set to 0."""
    d = model.description
    inertials = {}
    for link in set(mass_scale or {}) | set(com_shift or {}):
        ine = d.links[link].inertial
        k = (mass_scale or {}).get(link, 1.0)
        inertials[link] = (ine.mass * k, ine.com + np.asarray((com_shift or {}).get(link, np.zeros(3))),
                           ine.inertia * k)
    dynamics = {jn: (0.0, 0.0) for jn in d.moving_joints}
    return set_inertials(model.urdf_xml, inertials, dynamics)


def record(plant_model, prior_model, reference, duration: float, *, friction=None, noise=(0.0, 0.0, 0.0),
           dt: float = 0.001, record_every: int = 5, kp: float = 400.0, kd: float = 40.0,
           seed: int = 0, payload=None, coulomb_velocity: float = 0.01) -> Recording:
    """Simulate and record.

    Args:
        plant_model: RobotModel of the plant (e.g. from :func:`perturbed_urdf`), same joints as the prior.
        prior_model: RobotModel the controller uses.
        reference: callable t (N,) -> (q, qd, qdd) (N, n), e.g. ``FourierTrajectory.sample``.
        duration: s.  friction: (n, 3) (fc, fv, fo) of the plant, default none.
        noise: standard deviations (q rad, qd rad/s, tau N·m) of the recorded values.
        dt: physics and control step, s.  record_every: physics steps per recorded sample.
        kp, kd: PD gains of the computed-torque law (1/s², 1/s).
        payload: (link, mass, com, inertia) attached to the plant in MuJoCo, or None.
        coulomb_velocity: v_s of the plant's Coulomb term fc·tanh(qd / v_s), rad/s (a discontinuous sign
            would chatter at each velocity reversal under a zero-order-hold torque).

    Returns:
        :class:`Recording` (t, q, qd, tau with noise; qdd None), source "mujoco".
    """
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
    from robot_dynamics_ros.sim.mujoco_sim import MujocoSim

    n = prior_model.n
    if tuple(plant_model.joint_names) != tuple(prior_model.joint_names):
        raise ValueError("plant and prior models have different joints")
    fr = np.zeros((n, 3)) if friction is None else np.asarray(friction, dtype=float)
    rng = np.random.default_rng(seed)
    sim = MujocoSim(plant_model, timestep=dt, clamp_effort=False)
    if payload is not None:
        sim.set_payload(*payload)
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
            t_rec[k_rec], q_rec[k_rec], qd_rec[k_rec], tau_rec[k_rec] = tt[k], q, qd, tau
            k_rec += 1
        if k == steps:
            break
        tau_f = fr[:, 0] * np.tanh(qd / coulomb_velocity) + fr[:, 1] * qd + fr[:, 2]
        sim.set_effort(tau - tau_f)
        sim.step()
    sq, sqd, stau = noise
    return Recording(t_rec[:k_rec], tuple(prior_model.joint_names), q_rec[:k_rec] + rng.normal(0, sq, (k_rec, n)),
                     qd_rec[:k_rec] + rng.normal(0, sqd, (k_rec, n)), None,
                     tau_rec[:k_rec] + rng.normal(0, stau, (k_rec, n)), "mujoco")
