"""A payload identified from a bag of the nodes, then set through ``~/set_payload`` on the running
``gravity_compensation`` node, over DDS (private domain, lockstep MuJoCo simulator node; helpers of
test_identification_loop_dds.py).

5 kg on ``panda_link8`` with its centre of mass 8.8 cm off the flange, attached to the simulated plant (the
simulator's ``payload.*`` parameters); the ``computed_torque`` node, on the plant's arm URDF (the arm model
fixed, as ``identify --payload`` takes it), follows the ``excite`` trajectory for 20 s; ``identify
--payload`` on the recorded bag. Then the ``gravity_compensation`` node (plant arm URDF) receives the
identified payload through ``~/set_payload`` (fields from ``nodes.services.payload_request_fields``) before
the simulation starts, and holds the loaded arm for 5 s. The plant's Coulomb friction is MuJoCo's dry
friction here, which holds any residual below fc; the hold without any stiction (creep δg·v_s/fc) is
test_identification_loop.py's. Without the service call the same hold falls away.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from test_identification_loop_dds import (HELD, _run, computed_torque_node, held_params, run_lockstep,
                                          write_plant_and_excitation)

from robot_dynamics_tools.commands import identify as identify_cmd
from robot_dynamics_tools.recordings import read_bag
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS

pytestmark = pytest.mark.ros

LINK, MASS, COM = "panda_link8", 5.0, np.array([0.03, -0.02, 0.08])
INERTIA = [0.02, 0.0, 0.0, 0.03, 0.0, 0.01]  # ixx ixy ixz iyy iyz izz, kg·m² about the COM
HOLD_POSE = np.array([0.3, -0.4, 0.2, -2.0, 0.1, 1.8, 0.6])


def _sim_payload():
    from rclpy.parameter import Parameter

    return [Parameter("payload.link", value=LINK), Parameter("payload.mass", value=MASS),
            Parameter("payload.com", value=COM.tolist()), Parameter("payload.inertia", value=INERTIA)]


def _gravity_node(urdf, request_fields, responses):
    """A factory for run_lockstep: the gravity node, sent ``request_fields`` on ~/set_payload (if any)."""
    def make(ctx):
        from rclpy.parameter import Parameter

        from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode

        return GravityCompensationNode("gravity_compensation", context=ctx, parameter_overrides=[
            Parameter("urdf_path", value=str(urdf)), *held_params(), Parameter("use_sim_time", value=True),
            Parameter("crossval_samples", value=0)])

    def start(node, peer, spin_until):
        if request_fields is None:
            return
        from robot_dynamics_interfaces.srv import SetPayload

        cli = peer.create_client(SetPayload, "/gravity_compensation/set_payload")
        spin_until(cli.service_is_ready, 10.0, "~/set_payload")
        fut = cli.call_async(SetPayload.Request(**request_fields))
        spin_until(fut.done, 10.0, "the ~/set_payload response")
        responses.append((fut.result(), node.model))

    return make, start


def test_payload_from_a_bag_then_set_payload_on_the_gravity_node_holds_the_arm(tmp_path):
    from robot_dynamics_ros.nodes.services import payload_request_fields

    prior = RobotModel.from_urdf(ROBOTS["panda"].path, held_joints=HELD)
    traj = write_plant_and_excitation(tmp_path, prior)
    plant = tmp_path / "plant.urdf"
    run_lockstep(plant, computed_torque_node(traj, plant), traj.points[0].positions, 20.0, tmp_path / "payload_bag",
                 _sim_payload())
    held = [a for j, v in HELD.items() for a in ("--held", f"{j}={v}")]
    assert _run(["--urdf", str(plant), "--data", str(tmp_path / "payload_bag"), "--out", str(tmp_path / "p.json"),
                 "--payload", LINK, "--plot", "none", *held], identify_cmd) == 0
    fields = payload_request_fields(tmp_path / "p.json")
    print("payload:", json.dumps(fields))
    assert fields["link"] == LINK and abs(fields["mass"] - MASS) <= 0.02 * MASS, fields
    assert np.linalg.norm(np.array(fields["com"]) - COM) <= 0.005, fields
    drift = {}
    for label, request in (("with", fields), ("without", None)):
        responses = []
        run_lockstep(plant, _gravity_node(plant, request, responses), HOLD_POSE, 5.0, tmp_path / f"hold_{label}",
                     _sim_payload())
        if request is not None:
            (resp, model), = responses
            assert resp.success, resp.message
            assert model.payload is not None and model.payload.mass == pytest.approx(fields["mass"])
        drift[label] = np.abs(read_bag(tmp_path / f"hold_{label}").q[:, :7] - HOLD_POSE).max(axis=0)
    print("hold drift over 5 s, mrad:", {k: np.round(1e3 * v, 4) for k, v in drift.items()})
    assert np.all(drift["with"] < 1e-3), drift
    assert drift["without"].max() > 0.05, drift
