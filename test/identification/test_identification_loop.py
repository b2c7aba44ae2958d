"""The identification loop end to end: excite -> computed-torque control of a perturbed plant -> rosbag2 ->
identify -> prediction of a DIFFERENT trajectory.

The plant: MuJoCo on the Panda URDF with link masses scaled by 0.8-1.2 and centres of mass shifted 1-2 cm
(:func:`~robot_dynamics_ros.identification.simulate.perturbed_urdf`), and per-joint Coulomb + viscous +
offset friction applied as torques (Coulomb fc·tanh(qd / 0.01 rad/s), re-evaluated at every 0.1 ms
physics substep). The controller is the computed-torque core the ``computed_torque`` node wraps
(:class:`~robot_dynamics_ros.control.computed_torque.ComputedTorqueController`, mode computed_torque, the
URDF as its model), stepped in lockstep with the plant at 1 kHz (not over DDS: deterministic under any
machine load); it follows the JointTrajectory that ``robot-dynamics excite --bag`` wrote. The recorded
JointState stream (200 Hz, positions, velocities, commanded efforts, with noise) is a rosbag2 (mcap), and
``robot-dynamics identify`` runs on it.

Independent check: a second trajectory (random Fourier series, another seed) run the same way; its measured
torques are predicted from the identified URDF FILE and friction YAML through the in-package Newton–Euler
engine (not the regressor that fitted them) and from the URDF. Over every sample (velocity reversals
included), per joint: RMS error ≤ 2 % of the joint's peak torque for the identified model, and the URDF at
least 5 × worse. The torque noise (0.005 N·m) is below 1 % of the smallest peak (joint 7, ~0.7 N·m): the
RMS of a prediction can never be below the noise of the measurement it is compared with.
"""
import argparse
import json

import numpy as np
import pytest
import yaml

from robot_dynamics_tools.commands import excite as excite_cmd
from robot_dynamics_tools.commands import identify as identify_cmd
from robot_dynamics_ros.control.computed_torque import ComputedTorqueController, ComputedTorqueSettings
from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.identification import simulate
from robot_dynamics_ros.identification.data import prepare
from robot_dynamics_ros.identification.excitation import FourierTrajectory
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS
from robot_dynamics_testing.identification_cases import HELD, held_out_errors  # noqa: F401

NOISE = (1e-5, 1e-3, 0.005)  # q rad, qd rad/s, tau N·m
FRICTION = np.column_stack([np.linspace(0.8, 0.3, 7), np.linspace(0.6, 0.2, 7), np.linspace(0.2, -0.1, 7)])
START_NS = 1_000_000_000


def _run(argv, module):
    parser = argparse.ArgumentParser()
    module.configure_parser(parser)
    return module.run(parser.parse_args(argv))


def _core(prior, msg):
    core = ComputedTorqueController(prior, ComputedTorqueSettings(mode="computed_torque"))
    core.submit_trajectory(core.trajectory_from_message(msg), START_NS * 1e-9)
    return core


def _write_joint_state_bag(path, rec):
    from builtin_interfaces.msg import Time
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Header

    from robot_dynamics_tools.bags import write_bag

    def records():
        for k in range(rec.t.size):
            ns = START_NS + int(round(rec.t[k] * 1e9))
            yield "/joint_states", ns, JointState(
                header=Header(stamp=Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)),
                name=list(rec.joint_names), position=rec.q[k].tolist(), velocity=rec.qd[k].tolist(),
                effort=rec.tau[k].tolist())

    write_bag(path, records(), storage="mcap")


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    from robot_dynamics_tools.bags import BagReader

    tmp = tmp_path_factory.mktemp("loop")
    prior = RobotModel.from_urdf(ROBOTS["panda"].path, held_joints=HELD)
    plant = RobotModel.from_urdf(simulate.perturbed_urdf(
        prior, mass_scale={"panda_link2": 1.2, "panda_link4": 1.2, "panda_link6": 0.8, "panda_link7": 1.2},
        com_shift={"panda_link3": (0.02, 0.0, -0.01), "panda_link5": (0.0, 0.015, 0.01)}), held_joints=HELD)
    assert _run(["--urdf", "panda", "--out", str(tmp / "excite.csv"), "--bag", str(tmp / "excite_bag"),
                 "--evaluations", "100", "--cycles", "2"], excite_cmd) == 0
    with BagReader(tmp / "excite_bag") as bag:
        (traj,) = [r.msg for r in bag.messages(["/excitation_trajectory"])]
    duration = traj.points[-1].time_from_start.sec + traj.points[-1].time_from_start.nanosec * 1e-9
    rec, _ = simulate.record_core(plant, _core(prior, traj), duration, friction=FRICTION, noise=NOISE,
                                  q0=np.array(traj.points[0].positions), start_ns=START_NS)
    _write_joint_state_bag(tmp / "rec_bag", rec)
    assert _run(["--urdf", "panda", "--data", str(tmp / "rec_bag"), "--out", str(tmp / "id.urdf"),
                 "--plot", "none", "--holdout", "0"], identify_cmd) == 0
    return tmp, prior, plant, traj


def _held_out(prior, plant, seed=11, duration=10.0):
    """A different trajectory: a random 6-harmonic Fourier series, at rest at both ends, as a message."""
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    tr = FourierTrajectory.random(7, 6, duration, np.random.default_rng(seed),
                                  q0=0.5 * (prior.lower + prior.upper), amplitude=3.0).at_rest()
    tr = tr.scaled_into(prior.lower, prior.upper, 0.5 * prior.velocity_limit, np.full(7, 3.0),
                        np.linspace(0, duration, 4000))
    t = np.arange(int(duration * 100) + 1) / 100.0
    q, qd, qdd = tr.sample(t)
    msg = JointTrajectory(joint_names=list(prior.joint_names), points=[
        JointTrajectoryPoint(positions=q[k].tolist(), velocities=qd[k].tolist(), accelerations=qdd[k].tolist(),
                             time_from_start=Duration(sec=int(t[k]), nanosec=int(round((t[k] % 1) * 1e9))))
        for k in range(t.size)])
    rec, _ = simulate.record_core(plant, _core(prior, msg), duration, friction=FRICTION, noise=NOISE, q0=q[0],
                                  start_ns=START_NS, seed=5)
    return rec


def test_identified_model_predicts_a_held_out_trajectory_within_2_percent(loop):
    tmp, prior, plant, _ = loop
    report = json.loads((tmp / "id.json").read_text())
    assert report["data_rank"] == report["structural_base_parameters"]
    e = held_out_errors(tmp, prior, _held_out(prior, plant))
    peak, rms_id, rms_urdf = e["peak"], e["identified"], e["urdf"]
    pct = np.round(100 * rms_id / peak, 3), np.round(100 * rms_urdf / peak, 2)
    print("held-out RMS % of peak, identified / URDF:", pct, "peak N·m", np.round(peak, 3))
    assert np.all(rms_id <= 0.02 * peak), pct
    assert np.all(rms_urdf >= 5 * rms_id), pct


def test_excited_parameters_and_friction_match_the_plant(loop):
    tmp, prior, plant, _ = loop
    from robot_dynamics_ros.identification.regressor import Regressor

    report = json.loads((tmp / "id.json").read_text())
    assert report["coulomb_velocity"] == 0.01  # the plant's tanh law, chosen among 7 candidates by the data
    # the recorded effort is the command computed from that state and held over the next period: +T/2
    assert report["effort_shift_s"] == pytest.approx(0.5e-3, abs=0.25e-3)
    truth = dict(zip(Regressor(plant).parameter_names, Regressor(plant).parameters()))
    excited = {k: v for k, v in report["parameters"].items() if v["excited"] and k in truth}
    assert len(excited) >= 30
    for name, v in excited.items():
        assert abs(v["identified"] - truth[name]) <= 5 * v["posterior_std"] + 0.02 * abs(truth[name]), (name, v)
    for j, jn in enumerate(prior.joint_names):
        assert report["parameters"][f"{jn}.fc"]["identified"] == pytest.approx(FRICTION[j, 0], rel=0.05)
        assert report["parameters"][f"{jn}.fv"]["identified"] == pytest.approx(FRICTION[j, 1], rel=0.10)


PAYLOAD = ("panda_link8", 5.0, np.array([0.03, -0.02, 0.08]), np.diag([0.02, 0.03, 0.01]))
HOLD_POSE = np.array([0.3, -0.4, 0.2, -2.0, 0.1, 1.8, 0.6])


def _hold(plant, model, payload, seconds=5.0):
    """The gravity core (``gravity_compensation`` node's, ``model`` as its model) holding the loaded plant at
    rest at HOLD_POSE; returns max |q(t) − q(0)| per joint over ``seconds``, rad."""
    from robot_dynamics_ros.control.gravity_compensator import GravityCompensator

    rec, _ = simulate.record_core(plant, GravityCompensator(model), seconds, friction=FRICTION * [1, 1, 0],
                                  q0=HOLD_POSE, payload=payload, start_ns=START_NS)
    return np.abs(rec.q - HOLD_POSE).max(axis=0)


def test_payload_recovered_then_set_payload_holds_the_loaded_arm(loop):
    """5 kg on panda_link8 with its COM 8.8 cm off the flange: ``identify --payload`` on a 20 s recording (the
    excitation run again by the computed-torque core on the IDENTIFIED arm model, which is also the arm model
    fixed in the payload fit), then the payload through the nodes' settings path
    (``nodes.services.payload_request_fields`` -> ``payload.*`` parameters -> ``model_with_params``, what
    ``~/set_payload`` runs) and the gravity core on that model holds the loaded plant."""
    from robot_dynamics_ros.nodes.model_source import model_with_params
    from robot_dynamics_ros.nodes.services import payload_request_fields

    tmp, prior, plant, traj = loop
    held = [a for j, v in HELD.items() for a in ("--held", f"{j}={v}")]
    ident = RobotModel.from_urdf(tmp / "id.urdf", held_joints=HELD)
    rec, _ = simulate.record_core(plant, _core(ident, traj), 20.0, friction=FRICTION, noise=NOISE,
                                  q0=np.array(traj.points[0].positions), payload=PAYLOAD, start_ns=START_NS, seed=9)
    _write_joint_state_bag(tmp / "payload_bag", rec)
    assert _run(["--urdf", str(tmp / "id.urdf"), "--data", str(tmp / "payload_bag"), "--out",
                 str(tmp / "payload.json"), "--payload", PAYLOAD[0], "--plot", "none", *held], identify_cmd) == 0
    req = payload_request_fields(tmp / "payload.json")
    assert req["link"] == PAYLOAD[0]
    assert abs(req["mass"] - PAYLOAD[1]) <= 0.02 * PAYLOAD[1], req
    assert np.linalg.norm(np.array(req["com"]) - PAYLOAD[2]) <= 0.005, req
    params = {"payload.link": req["link"], "payload.mass": req["mass"], "payload.com": req["com"],
              "payload.inertia": req["inertia"]}
    loaded = model_with_params(ident, params)
    assert loaded is not ident and ident.payload is None  # a new immutable model, the old one unchanged
    drift = _hold(plant, loaded, PAYLOAD)
    drift_without = _hold(plant, ident, PAYLOAD)
    print("hold drift over 5 s, mrad: with the identified payload", np.round(1e3 * drift, 4),
          "without it", np.round(1e3 * drift_without, 1))
    assert np.all(drift < 1e-3), drift
    assert drift_without.max() > 0.05  # the same hold without the payload fails: the check can fail
