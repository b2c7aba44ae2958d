"""Measured joint torques are gated before the momentum observer uses them (issue 25): three 1e6 N·m
samples are bad samples, never a collision, and a real push (MuJoCo, the force applied to a body; Jᵀf
from MuJoCo's Jacobian) is still detected and estimated."""
from __future__ import annotations

import mujoco
import numpy as np
import pytest

from robot_dynamics_ros import robots
from robot_dynamics_ros.control.joint_mapping import JointStateFields
from robot_dynamics_ros.control.core import ERROR, OK, WARN
from robot_dynamics_ros.control.external_torque import ExternalTorqueCore, ObserverSettings
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.sim.mujoco_sim import MujocoSim


def _panda():
    entry = robots.resolve("panda")
    model = RobotModel.from_urdf(entry.path, held_joints=entry.held_joints)
    return model, np.array([entry.demo_pose[j] for j in model.joint_names])


def _run(core, model, q0, *, bad: dict, body="panda_link7", force=(10.0, -20.0, 5.0), t_on=0.2, t_off=0.5,
         steps=600, source="measured"):
    """Hold q0 under gravity + PD in MuJoCo and push ``body`` in [t_on, t_off); the joint torque of sample k
    is replaced by ``bad[k]`` where given. Returns the core's results and the true τ_ext (Jᵀf)."""
    engine = PinocchioDynamics(model)
    sim = MujocoSim(model, timestep=0.001)
    sim.reset(q0)
    mujoco.mj_name2id(sim.mj, mujoco.mjtObj.mjOBJ_BODY, body)
    out, ext, prev_ext = [], [], np.zeros(model.n)
    names = tuple(n.encode() for n in model.joint_names)
    for k in range(steps):
        t_ns = 10**12 + k * 1_000_000
        q, qd = sim.q, sim.qd
        sim.set_effort(engine.gravity(q) + 100.0 * (q0 - q) - 10.0 * qd)
        effort = np.asarray(bad.get(k, sim.effort), dtype=float)
        if source == "measured":
            fields = JointStateFields(t_ns, names, tuple(map(float, q)), tuple(map(float, qd)),
                                      tuple(map(float, effort)))
        else:
            fields = JointStateFields(t_ns, names, tuple(map(float, q)), tuple(map(float, qd)), ())
            core.on_command(list(effort))
        assert core.on_joint_state(fields, t_ns, t_ns) is None
        out.append(core.step(t_ns, t_ns))
        ext.append(prev_ext)
        prev_ext = sim.push(body, np.asarray(force)) if t_on <= k * 0.001 < t_off else sim.push(None)
        sim.step()
    return out, np.array(ext)


@pytest.mark.parametrize("source", ["measured", "commanded"])
def test_three_1e6_samples_are_rejected_and_a_real_push_is_still_detected(source):
    model, q0 = _panda()
    core = ExternalTorqueCore(model, ObserverSettings(gain=100.0, threshold=(3.0,), torque_source=source))
    spike = np.full(model.n, 0.0)
    spike[1] = 1e6
    bad = {k: spike for k in (100, 101, 102)}
    out, ext = _run(core, model, q0, bad=bad, source=source)
    assert not any(o.collision for o in out[:200])
    assert core.bad_torque == 3
    for k in bad:
        assert out[k].tau_ext is None and not out[k].collision and out[k].level == WARN
        assert "implausible" in out[k].reason and "'panda_joint2'" in out[k].reason
    # the observer's state went on from the last good sample: no transient after the spikes
    peak = np.abs(ext).max()
    r = np.array([o.tau_ext if o.tau_ext is not None else [np.nan] * model.n for o in out])
    assert np.nanmax(np.abs(r[103:200])) < 0.01 * peak and out[150].level == OK
    onsets = [k for k, o in enumerate(out) if o.onset]
    assert len(onsets) == 1 and 200 <= onsets[0] <= 210 and out[onsets[0]].level == ERROR
    assert np.abs(r[260:500] - ext[260:500]).max() < 0.01 * peak


def test_the_bound_is_effort_factor_times_the_urdf_limit():
    model, q0 = _panda()
    limit = model.effort_limit[1]     # 87 N·m in the Panda URDF
    core = ExternalTorqueCore(model, ObserverSettings(effort_factor=2.0, torque_source="measured"))
    g = PinocchioDynamics(model).gravity(q0)
    names = tuple(n.encode() for n in model.joint_names)
    for k, value in enumerate((g[1], 1.99 * limit, 2.01 * limit)):
        effort = g.copy()
        effort[1] = value
        t_ns = 10**12 + k * 1_000_000
        core.on_joint_state(JointStateFields(t_ns, names, tuple(map(float, q0)), (0.0,) * model.n,
                                             tuple(map(float, effort))), t_ns, t_ns)
        res = core.step(t_ns, t_ns)
    assert core.bad_torque == 1 and res.tau_ext is None
    with pytest.raises(ValueError, match="effort_factor"):
        ObserverSettings(effort_factor=0.5).check()
