"""`robot-dynamics run`: nodes in one process, parameters from a standard rcl params YAML."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import rclpy

from robot_dynamics_ros.commands.run import check_params_file, start_nodes
from robot_dynamics_ros.errors import UserError

YAML = """
/**:
  ros__parameters:
    controller_name: arm_controller
gravity_compensation:
  ros__parameters:
    urdf_path: ur5
    joints: [wrist_3_joint, shoulder_pan_joint, shoulder_lift_joint, elbow_joint, wrist_1_joint, wrist_2_joint]
    state_timeout: 0.25
    gravity: [0.0, -9.81, 0.0]
mujoco_simulator:
  ros__parameters:
    urdf_path: ur5
    publish_rate: 250.0
"""


def test_params_yaml_reaches_each_node_by_name(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(YAML)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=["x", "--ros-args", "--params-file", str(check_params_file(str(f)))])
    try:
        sim, grav = start_nodes(["mujoco_simulator", "gravity_compensation"], context=ctx)
        try:
            assert grav.p["state_timeout"] == 0.25 and grav.p["gravity"] == [0.0, -9.81, 0.0]
            assert grav.mapper.command_joints[0] == "wrist_3_joint"
            assert list(grav.model.gravity) == [0.0, -9.81, 0.0]
            assert grav.command_topic == "/arm_controller/commands" == sim.command_topic   # from /**
            assert sim.p["publish_rate"] == 250.0 and sim.sim.n == 6
        finally:
            sim.destroy_node()
            grav.destroy_node()
        # --urdf wins over the file: the file's UR5 joint list no longer fits, and the error says so
        with pytest.raises(UserError, match=r"command joint 'wrist_3_joint' is not one of \['panda_joint1'"):
            start_nodes(["gravity_compensation"], context=ctx, urdf="panda")
    finally:
        rclpy.shutdown(context=ctx)


def test_bad_inputs_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        check_params_file(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("gravity_compensation:\n  urdf_path: ur5\n")
    with pytest.raises(UserError, match="'gravity_compensation' has no 'ros__parameters'"):
        check_params_file(str(bad))
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        with pytest.raises(UserError, match="node 'gravity_compensation'.*no_such.urdf"):
            start_nodes(["gravity_compensation"], context=ctx, urdf=str(tmp_path / "no_such.urdf"))
        with pytest.raises(UserError, match="unknown node 'foo'"):
            start_nodes(["foo"], context=ctx)
    finally:
        rclpy.shutdown(context=ctx)


def test_cli_runs_simulator_and_gravity_node_for_a_duration(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(YAML)
    r = subprocess.run([sys.executable, "-m", "robot_dynamics_ros.cli", "run", "--params", str(f),
                        "--duration", "1.5"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["nodes"] == ["mujoco_simulator", "gravity_compensation"]
    # the closed loop ran: the gravity node received the simulator's states, the simulator its commands
    assert summary["gravity_compensation"]["received"] > 50
    assert summary["mujoco_simulator"]["commands"] > 50
    r = subprocess.run([sys.executable, "-m", "robot_dynamics_ros.cli", "run", "--params",
                        str(tmp_path / "nope.yaml")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "nope.yaml" in r.stderr and "Traceback" not in r.stderr
