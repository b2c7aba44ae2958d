"""The momentum observer against a closed form and against MuJoCo with a known external force."""
from __future__ import annotations

import numpy as np
import pytest

from robot_dynamics_ros.control.momentum_observer import DEFAULT_COULOMB_VELOCITY, CollisionDetector, MomentumObserver


class _PointMass:
    """1-DoF unit mass on a line, no gravity, no friction: ṗ = τ_m + τ_ext exactly."""

    n = 1

    def mass_matrix(self, q):
        return np.eye(1)

    def coriolis_matrix(self, q, qd):
        return np.zeros((1, 1))

    def gravity(self, q):
        return np.zeros(1)

    def friction_torque(self, qd):
        return np.zeros(1)


def test_residual_is_the_backward_euler_low_pass_of_the_external_torque():
    # exact motion of a unit mass under τ_m = 1 N and a step τ_ext = 2 N from t = 0: qd = 3 t
    K, dt, tau_m, tau_ext = 40.0, 0.001, 1.0, 2.0
    obs = MomentumObserver(_PointMass(), K, friction=False)
    r = [obs.update(k * dt, [0.0], [(tau_m + tau_ext) * k * dt], [tau_m])[0] for k in range(200)]
    k = np.arange(200)
    expected = tau_ext * (1.0 - (1.0 + K * dt) ** (-k.astype(float)))  # r_k(1 + KΔt) = r_{k-1} + KΔt τ_ext
    np.testing.assert_allclose(r, expected, rtol=0, atol=1e-12)
    # and it is the continuous first-order response to O(KΔt)
    assert abs(r[-1] - tau_ext * (1 - np.exp(-K * 199 * dt))) < 0.05 * tau_ext


def test_gap_backward_time_and_bad_input_restart_or_leave_the_state():
    obs = MomentumObserver(_PointMass(), 10.0, friction=False, max_dt=0.05)
    obs.update(0.0, [0.0], [0.0], [0.0])
    r1 = obs.update(0.001, [0.0], [0.01], [0.0]).copy()  # 10 N of unexplained force
    assert r1[0] > 0
    with pytest.raises(ValueError, match="qd"):
        obs.update(0.002, [0.0], [float("nan")], [0.0])
    assert obs.residual[0] == r1[0] and obs.samples == 2
    assert obs.update(0.2, [0.0], [0.0], [0.0])[0] == 0.0  # gap > max_dt: restart
    assert obs.update(0.1, [0.0], [0.5], [0.0])[0] == 0.0  # time went backwards: restart
    with pytest.raises(ValueError, match="gain"):
        MomentumObserver(_PointMass(), 0.0)


def test_collision_detector_hysteresis_and_minimum_duration():
    det = CollisionDetector(2, [1.0, 2.0], release=0.5, min_duration=0.003)
    dt = 0.001
    # a 2-sample spike above threshold: rejected by the minimum duration
    states = [det.update(k * dt, [1.5 if k in (1, 2) else 0.0, 0.0]) for k in range(6)]
    assert not any(s.collision for s in states)
    # sustained: declared at the sample where it has lasted 3 ms, once
    states = [det.update(0.01 + k * dt, [0.0, 2.5]) for k in range(6)]
    onset = [k for k, s in enumerate(states) if s.onset]
    assert onset == [3] and states[-1].collision and states[-1].joints == (1,)
    # between release (1.0) and threshold (2.0): stays declared
    assert all(det.update(0.02 + k * dt, [0.0, 1.5]).collision for k in range(10))
    # below release for the minimum duration: cleared
    states = [det.update(0.04 + k * dt, [0.0, 0.9]) for k in range(5)]
    assert states[2].collision and not states[3].collision
    assert det.count == 1


def _panda_push(gain, force, t_on, t_off, duration):
    """Panda in MuJoCo tracking a sinusoid under PD + gravity; ``force`` (N, world) on link5's centre
    of mass during [t_on, t_off). Returns times, residuals, and Jᵀf of MuJoCo at each sample."""
    import mujoco

    from robot_dynamics_ros import robots
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.sim.mujoco_sim import MujocoSim

    entry = robots.resolve("panda")
    model = RobotModel.from_urdf(entry.path, held_joints=entry.held_joints)
    engine = PinocchioDynamics(model)
    sim = MujocoSim(model, timestep=0.001)
    q0 = np.array([entry.demo_pose[j] for j in model.joint_names])
    sim.reset(q0)
    obs = MomentumObserver(engine, gain)
    mj, data = sim.mj, sim.data
    body = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, "panda_link5")
    dof = np.array([mj.jnt_dofadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, j)]
                    for j in model.joint_names])
    jacp = np.zeros((3, mj.nv))
    T, R, E = [], [], []
    ext_prev = np.zeros(model.n)
    for k in range(int(round(duration / 0.001))):
        t = k * 0.001
        q, qd = sim.q, sim.qd
        q_des = q0 + 0.25 * np.sin(np.pi * t)
        qd_des = 0.25 * np.pi * np.cos(np.pi * t) * np.ones(model.n)
        sim.set_effort(engine.gravity(q) + 200.0 * (q_des - q) + 20.0 * (qd_des - qd))
        R.append(obs.update(t, q, qd, sim.effort).copy())
        T.append(t)
        E.append(ext_prev)  # the force of the interval that ends at this sample
        data.xfrc_applied[:] = 0.0
        ext_prev = np.zeros(model.n)
        if t_on <= t < t_off:
            mujoco.mj_forward(mj, data)
            mujoco.mj_jac(mj, data, jacp, None, data.xipos[body], body)
            data.xfrc_applied[body, :3] = force
            ext_prev = (jacp.T @ np.asarray(force))[dof]
        sim.step()
    return np.array(T), np.array(R), np.array(E)


def test_panda_push_in_mujoco_residual_matches_jacobian_transpose_force():
    gain = 100.0
    T, R, E = _panda_push(gain, [0.0, 30.0, 0.0], 0.5, 0.8, 1.0)
    peak = np.abs(E).max()
    assert peak > 5.0  # the push is felt (N·m)
    settled = (T >= 0.5 + 5.0 / gain) & (T < 0.8)
    err = np.abs(R[settled] - E[settled]).max() / peak
    assert err < 0.01, err
    quiet = (T > 0.01) & (T < 0.5)
    assert np.abs(R[quiet]).max() < 0.003 * peak  # model = plant: only discretization error
    det = CollisionDetector(7, 0.1 * peak, min_duration=0.002)
    onsets = [t for t, r in zip(T, R) if det.update(t, r).onset]
    assert len(onsets) == 1 and 0.5 <= onsets[0] <= 0.5 + 0.02


def test_push_scenario_detects_within_20_ms_and_estimates_within_10_percent(tmp_path):
    from robot_dynamics_tools.commands.push import push

    s = push("panda", quiet=3.0, out=str(tmp_path))
    assert s["peak_velocity_fraction"] >= 0.8
    assert s["peak_external_torque_Nm"] > 5.0
    assert s["detection_delay_ms"] is not None and 0.0 <= s["detection_delay_ms"] <= 20.0
    assert s["estimate_error_ratio"] <= 0.1
    assert s["filtered_error_ratio"] <= 0.01  # against the observer's own first-order design
    assert s["false_collisions"] == 0 and s["contact_free_s"] >= 3.0
    assert s["pass"] and (tmp_path / "push.png").stat().st_size > 10_000


def _panda_with_friction():
    from robot_dynamics_ros import robots
    from robot_dynamics_ros.friction import JointFriction
    from robot_dynamics_ros.model import RobotModel

    e = robots.resolve("panda")
    base = RobotModel.from_urdf(e.path, held_joints=e.held_joints)
    n = base.n
    model = base.with_settings(friction=JointFriction(np.linspace(0.5, 1.5, n), np.linspace(0.1, 0.4, n),
                                                      np.zeros(n), np.linspace(0.05, 0.2, n), "test"))
    return model, np.array([e.demo_pose[j] for j in model.joint_names])


class _TermsOnly:
    """PinocchioDynamics seen through its momentum_terms and friction_torque only (no ``model``): the
    observer then subtracts the engine's friction_torque instead of its own friction law."""

    def __init__(self, engine):
        self._e, self.n = engine, engine.n

    def momentum_terms(self, q, qd):
        return self._e.momentum_terms(q, qd)

    def friction_torque(self, qd):
        return self._e.friction_torque(qd)


def test_observer_on_pinocchio_equals_the_observer_on_the_in_package_kernel():
    """Same samples, three sources of p, β: Pinocchio's terms with the observer's friction law (the node's
    engine), the in-package one-sweep Newton–Euler kernel (NewtonEulerDynamics.momentum_terms, independent
    of Pinocchio) with the same law, and Pinocchio's terms with PinocchioDynamics.friction_torque: the same
    residuals, both integrations."""
    from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics

    model, q0 = _panda_with_friction()
    engine = PinocchioDynamics(model)
    rng = np.random.default_rng(3)
    t = np.arange(300) * 1e-3
    w = rng.uniform(1.0, 4.0, model.n)
    q = q0 + 0.3 * np.sin(np.outer(t, w))
    qd = 0.3 * w * np.cos(np.outer(t, w))
    assert np.abs(qd).min() > DEFAULT_COULOMB_VELOCITY  # where the ramp and friction_torque's sign agree
    tau = rng.normal(0.0, 5.0, (len(t), model.n))
    for integration in ("euler", "trapezoid"):
        pin_obs = MomentumObserver(engine, 80.0, integration=integration)
        kernel = MomentumObserver(NewtonEulerDynamics(model), 80.0, integration=integration)
        ref = MomentumObserver(_TermsOnly(engine), 80.0, integration=integration)
        worst = 0.0
        for k in range(len(t)):
            a = pin_obs.update(t[k], q[k], qd[k], tau[k]).copy()
            b = kernel.update(t[k], q[k], qd[k], tau[k]).copy()
            c = ref.update(t[k], q[k], qd[k], tau[k]).copy()
            worst = max(worst, np.abs(a - b).max(), np.abs(a - c).max())
        assert np.abs(b).max() > 1.0 and worst < 1e-9, worst


def _state(obs):
    """The observer's own state (p̂, β of the previous sample, r, samples)."""
    return list(obs._p_hat), list(obs._beta_prev), obs.residual.tolist(), obs.samples


@pytest.mark.filterwarnings("ignore:(overflow|invalid value) encountered:RuntimeWarning")  # the 1e200 case
def test_observer_refuses_non_finite_input_and_overflow_and_keeps_its_state():
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics

    model, q0 = _panda_with_friction()
    engine = PinocchioDynamics(model)
    obs, twin = MomentumObserver(engine, 50.0), MomentumObserver(engine, 50.0)
    qd, tau = np.full(model.n, 0.2), engine.gravity(q0)
    for o in (obs, twin):
        o.update(0.0, q0, qd, tau)
        o.update(0.001, q0 + 2e-4, qd, tau + 1.0)
    kept = _state(obs)
    nan = np.where(np.arange(model.n) == 3, np.nan, 0.0)
    cases = (("q", (q0 + nan, qd, tau)), ("qd", (q0, qd + nan, tau)), ("tau", (q0, qd, np.where(nan != nan, np.inf, tau))))
    for name, args in cases:
        with pytest.raises(ValueError, match=rf"^{name}: non-finite value at index 3"):
            obs.update(0.002, *args)
        assert _state(obs) == kept and obs.samples == 2
    with pytest.raises(ValueError, match="non-finite model term"):
        obs.update(0.002, q0, np.full(model.n, 1e200), tau)  # finite, but Cᵀq̇ ~ q̇² overflows
    assert _state(obs) == kept and obs.samples == 2
    with pytest.raises(ValueError, match="qd: expected shape"):
        obs.update(0.002, q0, qd[:-1], tau)
    # the next good sample continues from the kept state, as if the refused ones never came
    np.testing.assert_array_equal(obs.update(0.002, q0, qd, tau), twin.update(0.002, q0, qd, tau))


def test_watch_flags_a_residual_above_the_level():
    """``above`` after each update equals |r| > level computed here from the returned residual (closed-form
    unit mass: r_k = τ_ext (1 − (1 + KΔt)^−k)), and on the Panda with Pinocchio's terms."""
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics

    K, dt, tau_ext = 40.0, 0.001, 2.0
    obs = MomentumObserver(_PointMass(), K, friction=False)
    obs.watch(1.0)
    flags = []
    for k in range(100):
        r = obs.update(k * dt, [0.0], [tau_ext * k * dt], [0.0])[0]
        flags.append((obs.above, abs(r) > 1.0))
    assert all(a == b for a, b in flags) and flags[-1] == (True, True) and flags[5] == (False, False)
    model, q0 = _panda_with_friction()
    engine = PinocchioDynamics(model)
    obs = MomentumObserver(engine, 50.0)
    level = np.linspace(0.5, 3.0, model.n)
    obs.watch(level)
    g = engine.gravity(q0)
    for k in range(60):  # at rest, the drives 2 N·m short on every joint: r → g − τ = 2 on each
        r = obs.update(k * dt, q0, np.zeros(model.n), g - 2.0).copy()
        assert obs.above == bool(np.any(np.abs(r) > level))
    assert obs.above and np.all(np.abs(r - 2.0) < 0.2)
