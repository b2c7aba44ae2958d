"""Excitation trajectories: the Fourier series' derivatives against central differences, limits checked at
10x the optimizer's grid, at rest at the period ends, and the optimizer's condition number against its start."""
import argparse

import numpy as np

from robot_dynamics_tools.commands import excite as excite_cmd
from robot_dynamics_ros.identification.data import read_csv
from robot_dynamics_ros.identification.excitation import FourierTrajectory, optimize
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS


def _model(name):
    e = ROBOTS[name]
    return RobotModel.from_urdf(e.path, held_joints=e.held_joints)


def test_fourier_derivatives_and_rest_at_period_ends():
    tr = FourierTrajectory.random(3, 4, 5.0, np.random.default_rng(0), q0=[0.1, -0.2, 0.3]).at_rest()
    t = np.linspace(0.3, 4.7, 50)
    h = 1e-5
    q, qd, qdd = tr.sample(t)
    qp, qdp, _ = tr.sample(t + h)
    qm, qdm, _ = tr.sample(t - h)
    assert np.allclose((qp - qm) / (2 * h), qd, atol=1e-8)
    assert np.allclose((qdp - qdm) / (2 * h), qdd, atol=1e-7)
    q_end, qd_end, qdd_end = tr.sample(np.array([0.0, 5.0]))
    assert np.abs(qd_end).max() < 1e-12 and np.abs(qdd_end).max() < 1e-12
    assert np.allclose(q_end[0], q_end[1], atol=1e-12)


def test_optimized_excitation_is_better_conditioned_and_within_limits():
    model = _model("ur5")
    vlim = 0.5 * model.velocity_limit
    alim = np.full(model.n, 3.0)
    res = optimize(model, period=8.0, harmonics=3, samples=60, qd_max=vlim, qdd_max=alim, max_evaluations=50)
    assert res.condition < 0.5 * res.start_condition
    t = np.linspace(0.0, 8.0, 601)  # 10x the optimizer's grid
    q, qd, qdd = res.trajectory.sample(t)
    assert np.all(q >= model.lower) and np.all(q <= model.upper)
    assert np.all(np.abs(qd) <= vlim * (1 + 1e-9)) and np.all(np.abs(qdd) <= alim * (1 + 1e-9))
    assert res.torque_ok


def test_excite_command_writes_csv_and_bag(tmp_path):
    parser = argparse.ArgumentParser()
    excite_cmd.configure_parser(parser)
    args = parser.parse_args(["--urdf", "ur5", "--out", str(tmp_path / "x.csv"), "--period", "6",
                              "--harmonics", "2", "--evaluations", "40", "--cycles", "1", "--rate", "50",
                              "--bag", str(tmp_path / "bag")])
    assert excite_cmd.run(args) == 0
    rec = read_csv(tmp_path / "x.csv")
    assert rec.t.size == 301 and rec.qdd is not None and rec.joint_names == _model("ur5").joint_names
    from trajectory_msgs.msg import JointTrajectory

    from robot_dynamics_tools.bags import read_messages
    msgs = list(read_messages(tmp_path / "bag", {"/excitation_trajectory": JointTrajectory}))
    assert len(msgs) == 1 and len(msgs[0].msg.points) == 301
    assert np.allclose(msgs[0].msg.points[100].positions, rec.q[100], atol=1e-10)
