"""The external-torque core (no ROS): MuJoCo pushes checked against Jᵀf, the wrench against the applied
force, and the input policy branches (stale, missing effort, commanded source, NaN, settings)."""
from __future__ import annotations

import mujoco
import numpy as np
import pytest

from robot_dynamics_ros.control.joint_mapping import JointStateFields
from robot_dynamics_ros.control.core import ERROR, OK, WARN
from robot_dynamics_ros.control.external_torque import ExternalTorqueCore, ObserverSettings



def _panda():
    from robot_dynamics_ros import robots
    from robot_dynamics_ros.model import RobotModel

    entry = robots.resolve("panda")
    model = RobotModel.from_urdf(entry.path, held_joints=entry.held_joints)
    return model, np.array([entry.demo_pose[j] for j in model.joint_names])


def _fields(model, t_ns, q, qd, effort=None, names=None):
    names = names or model.joint_names
    return JointStateFields(int(t_ns), tuple(n.encode() for n in names), tuple(map(float, q)),
                            tuple(map(float, qd)), () if effort is None else tuple(map(float, effort)))


def _run(core, model, q0, *, body, force, t_on, t_off, steps, effort_in_states=True, stamp0=10**12):
    """Hold q0 under gravity + PD in MuJoCo, push ``body``; feed the core. Returns results and Jᵀf, F."""
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
    from robot_dynamics_ros.sim.mujoco_sim import MujocoSim

    engine = PinocchioDynamics(model)
    sim = MujocoSim(model, timestep=0.001)
    sim.reset(q0)
    bid = mujoco.mj_name2id(sim.mj, mujoco.mjtObj.mjOBJ_BODY, body)
    out, ext, wrench_true = [], [], []
    prev_ext, prev_w = np.zeros(model.n), np.zeros(6)
    for k in range(steps):
        t_ns = stamp0 + k * 1_000_000
        q, qd = sim.q, sim.qd
        tau = engine.gravity(q) + 100.0 * (q0 - q) - 10.0 * qd
        sim.set_effort(tau)
        if effort_in_states:
            rej = core.on_joint_state(_fields(model, t_ns, q, qd, sim.effort), t_ns, t_ns)
        else:
            rej = core.on_joint_state(_fields(model, t_ns, q, qd), t_ns, t_ns)
            core.on_command(list(sim.effort))
        assert rej is None
        out.append(core.step(t_ns, t_ns))
        ext.append(prev_ext)
        wrench_true.append(prev_w)
        prev_w = np.zeros(6)
        if t_on <= k * 0.001 < t_off:
            prev_ext = sim.push(body, force)   # Jᵀf from MuJoCo's Jacobian of the body's centre of mass
            o = engine.frame_placement(q, body)[:3, 3]
            prev_w = np.concatenate([force, np.cross(sim.data.xipos[bid] - o, force)])
        else:
            prev_ext = sim.push(None)
        sim.step()
    return out, np.array(ext), np.array(wrench_true)


def test_push_on_the_hand_link_estimated_torque_and_wrench():
    model, q0 = _panda()
    core = ExternalTorqueCore(model, ObserverSettings(gain=100.0, threshold=(3.0,), state_timeout=0.1))
    force = np.array([10.0, -20.0, 5.0])
    out, ext, w_true = _run(core, model, q0, body="panda_link7", force=force, t_on=0.2, t_off=0.5, steps=600)
    r = np.array([o.tau_ext for o in out])
    settled = slice(260, 500)
    peak = np.abs(ext).max()
    assert peak > 3.0
    assert np.abs(r[settled] - ext[settled]).max() < 0.01 * peak
    assert np.abs(r[20:200]).max() < 0.01 * peak  # no contact: only discretization error
    onsets = [k for k, o in enumerate(out) if o.onset]
    assert len(onsets) == 1 and 200 <= onsets[0] <= 210 and out[onsets[0]].level == ERROR
    assert out[150].level == OK and not out[150].collision
    F = core.wrench("panda_link7")  # at the last sample (after the push: ~0) ...
    assert np.abs(F).max() < 1.0
    # ... and during the push, from a fresh core run stopped there
    core2 = ExternalTorqueCore(model, ObserverSettings(gain=100.0, threshold=(3.0,)))
    _, _, w_true = _run(core2, model, q0, body="panda_link7", force=force, t_on=0.2, t_off=0.5, steps=400)
    np.testing.assert_allclose(core2.wrench("panda_link7"), w_true[-1], atol=0.02 * np.abs(force).max())


def test_commanded_source_when_states_carry_no_effort():
    model, q0 = _panda()
    core = ExternalTorqueCore(model, ObserverSettings(gain=100.0, threshold=(3.0,)))
    out, ext, _ = _run(core, model, q0, body="panda_link5", force=[0.0, 30.0, 0.0], t_on=0.1, t_off=0.3,
                       steps=300, effort_in_states=False)
    r = np.array([o.tau_ext for o in out])
    assert "commanded" in out[50].reason and out[50].level == OK
    assert np.abs(r[160:300] - ext[160:300]).max() < 0.01 * np.abs(ext).max()
    strict = ExternalTorqueCore(model, ObserverSettings(torque_source="measured"))
    assert strict.on_joint_state(_fields(model, 1e12, q0, np.zeros(7)), 10**12, 10**12) is None
    res = strict.step(10**12, 10**12)
    assert res.tau_ext is None and res.level == WARN and "no finite effort" in res.reason


def test_stale_input_restarts_holds_the_flag_and_publishes_nothing():
    model, q0 = _panda()
    core = ExternalTorqueCore(model, ObserverSettings(gain=100.0, threshold=(3.0,), state_timeout=0.05))
    out, _, _ = _run(core, model, q0, body="panda_link5", force=[0.0, 30.0, 0.0], t_on=0.1, t_off=0.3,
                     steps=250)
    assert out[-1].collision
    late = 10**12 + 250 * 1_000_000 + 100_000_000  # 100 ms after the last state
    res = core.step(late, late)
    assert res.tau_ext is None and res.collision and res.level == ERROR and "stale" in res.reason
    assert core.observer.samples == 0  # restarted
    core.reset_collision()
    assert not core.step(late, late).collision
    # NaN position: the message is rejected by the input policy, nothing reaches the observer
    bad = _fields(model, late, [np.nan] * 7, np.zeros(7), np.zeros(7))
    assert core.on_joint_state(bad, late, late) is not None


def test_settings_checks():
    model, _ = _panda()
    for bad in (dict(gain=0.0), dict(threshold=(-1.0,)), dict(release=1.5), dict(torque_source="x"),
                dict(min_duration=-1.0)):
        with pytest.raises(ValueError):
            ExternalTorqueCore(model, ObserverSettings(**bad))
    with pytest.raises(ValueError, match="threshold"):
        ExternalTorqueCore(model, ObserverSettings(threshold=(1.0, 2.0)))


def test_non_finite_or_missing_effort_is_diagnosed_and_nothing_published():
    model, q0 = _panda()
    from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics

    g = NewtonEulerDynamics(model).gravity(q0)  # at rest: measured = g gives τ_ext = 0
    bad = {"nan": np.where(np.arange(7) == 3, np.nan, g), "inf": np.where(np.arange(7) == 3, np.inf, g)}
    core = ExternalTorqueCore(model, ObserverSettings(torque_source="measured"))
    out = []
    for k, effort in enumerate([g, g, bad["nan"], bad["inf"], g, g]):
        t = 10**12 + k * 1_000_000
        assert core.on_joint_state(_fields(model, t, q0, np.zeros(7), effort), t, t) is None
        out.append(core.step(t, t))
    for res in out[2:4]:  # rejected by the torque policy: diagnosed, naming the joint, nothing to publish
        assert res.tau_ext is None and res.level == WARN and "panda_joint4" in res.reason
    assert core.no_torque == 2
    assert out[4].tau_ext == [0.0] * 7 and "starting" in out[4].reason  # restarted after the gap in torque
    assert out[5].level == OK and max(map(abs, out[5].tau_ext)) < 1e-9
    # a state without efforts after states with them: no measured torque (not the last message's)
    t = 10**12 + 6 * 1_000_000
    assert core.on_joint_state(_fields(model, t, q0, np.zeros(7)), t, t) is None
    res = core.step(t, t)
    assert res.tau_ext is None and res.level == WARN and "no finite effort" in res.reason and core.no_torque == 3
    res = core.step(t + 1000, t + 1000)  # a node's timer steps the same state again: counted once
    assert res.tau_ext is None and core.no_torque == 3
    # auto: a non-finite effort falls back to the last command the drives were sent
    core = ExternalTorqueCore(model, ObserverSettings(torque_source="auto"))
    t = 10**12
    core.on_joint_state(_fields(model, t, q0, np.zeros(7), bad["nan"]), t, t)
    res = core.step(t, t)
    assert res.tau_ext is None and "panda_joint4" in res.reason and "no effort command" in res.reason
    assert core.on_command(list(g))
    for k in range(1, 4):
        t = 10**12 + k * 1_000_000
        core.on_joint_state(_fields(model, t, q0, np.zeros(7), bad["nan"]), t, t)
        res = core.step(t, t)
    assert "commanded" in res.reason and res.level == OK and max(map(abs, res.tau_ext)) < 1e-9
    assert not core.on_command([np.nan] * 7) and not core.on_command([0.0] * 6)  # refused, the last one kept
