"""`robot-dynamics run`: one OS process per node, parameters from a standard rcl params YAML."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import rclpy

from robot_dynamics_testing.attack import child_pids
from robot_dynamics_tools.commands.run import check_params_file, start_nodes, undeclared_parameters
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


def test_misspelled_parameter_in_a_params_file_is_reported(tmp_path):
    """rclpy ignores overrides of undeclared parameters; `run` names them instead of failing silently."""
    f = tmp_path / "typo.yaml"
    f.write_text(YAML.replace("state_timeout: 0.25", "state_timout: 0.25"))
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=["x", "--ros-args", "--params-file", str(check_params_file(str(f)))])
    try:
        sim, grav = start_nodes(["mujoco_simulator", "gravity_compensation"], context=ctx)
        try:
            problems = undeclared_parameters([str(f)], [sim, grav])
            assert len(problems) == 1, problems
            assert "node '/gravity_compensation'" in problems[0] and "'state_timout'" in problems[0]
            assert grav.p["state_timeout"] == 0.1          # the default: the typo did not reach the node
        finally:
            sim.destroy_node()
            grav.destroy_node()
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


def _retime_client(ctx, service: str):
    from robot_dynamics_interfaces.srv import RetimeTrajectory

    node = rclpy.create_node("run_test_client", context=ctx)
    return node, node.create_client(RetimeTrajectory, service), RetimeTrajectory


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the child processes of ``pid`` (one that ends meanwhile is left out)."""
    out = []
    for child in child_pids(pid):
        try:
            out.append((child, Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()))
        except OSError:
            continue
    return out


def _children_cmdlines(pid: int) -> list[str]:
    return [c for _, c in _children(pid)]


def _counting_node(ctx, topics: dict):
    """A node counting the messages of ``topics`` ({name: type}) as they arrive."""
    node = rclpy.create_node("run_test_listener", context=ctx)
    counts = dict.fromkeys(topics, 0)

    def counter(name):
        def on_msg(_msg):
            counts[name] += 1
        return on_msg

    for name, typ in topics.items():
        node.create_subscription(typ, name, counter(name), 10)
    return node, counts


def test_cli_runs_the_loop_as_one_process_per_node_and_stops_cleanly_on_sigint(tmp_path):
    """`robot-dynamics run` starts each node as its own process (the node's entry point module), the loop closes
    over DDS, and Ctrl-C (SIGINT) ends them all with exit 0 and a summary of their exit codes."""
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    f = tmp_path / "p.yaml"
    f.write_text(YAML)
    p = subprocess.Popen([sys.executable, "-m", "robot_dynamics_tools.cli", "run", "--params", str(f),
                          "--duration", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        line = p.stdout.readline()          # "running ['mujoco_simulator', 'gravity_compensation'] as processes"
        assert line.startswith("running ['mujoco_simulator', 'gravity_compensation']"), p.stderr.read()
        children = _children_cmdlines(p.pid)
        assert sorted(c.split()[2] for c in children) == ["robot_dynamics_ros.nodes.gravity_compensation",
                                                          "robot_dynamics_ros.nodes.simulator"], children
        assert all(f"--params-file {f.resolve()}" in c for c in children), children
        node, counts = _counting_node(ctx, {"/joint_states": JointState,
                                            "/arm_controller/commands": Float64MultiArray})
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
        deadline = time.monotonic() + 60
        # the closed loop runs: the simulator publishes states, the gravity node answers with commands
        while min(counts.values()) <= 50:
            assert time.monotonic() < deadline and p.poll() is None, (counts, p.poll())
            ex.spin_once(timeout_sec=0.1)
        node.destroy_node()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
        rclpy.try_shutdown(context=ctx)
    assert p.returncode == 0 and "Traceback" not in err, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary == {"nodes": ["mujoco_simulator", "gravity_compensation"], "failed": None,
                       "exit_codes": {"mujoco_simulator": 0, "gravity_compensation": 0}}
    r = subprocess.run([sys.executable, "-m", "robot_dynamics_tools.cli", "run", "--params",
                        str(tmp_path / "nope.yaml")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "nope.yaml" in r.stderr and "Traceback" not in r.stderr


def test_a_node_that_dies_is_reported_and_the_others_are_stopped(tmp_path):
    """kill -9 of one node process: `run` names it and its end, stops the other node and exits 1."""
    f = tmp_path / "p.yaml"
    f.write_text(YAML)
    p = subprocess.Popen([sys.executable, "-m", "robot_dynamics_tools.cli", "run", "--params", str(f),
                          "--duration", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().startswith("running"), p.stderr.read()
        pids = {c.split()[2].rsplit(".", 1)[1]: pid for pid, c in _children(p.pid)}
        time.sleep(1.0)
        os.kill(pids["simulator"], signal.SIGKILL)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 1, err[-3000:]
    assert "node 'mujoco_simulator' ended by itself (signal SIGKILL); stopping the others" in err, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["failed"] == "mujoco_simulator"
    # the other node was stopped with SIGINT: a clean exit, or SIGINT's own end while it was still importing
    assert summary["exit_codes"]["mujoco_simulator"] == -signal.SIGKILL
    assert summary["exit_codes"]["gravity_compensation"] in (0, -signal.SIGINT), summary
    assert not Path(f"/proc/{pids['gravity_compensation']}").exists() or \
        Path(f"/proc/{pids['gravity_compensation']}/stat").read_text().split()[2] == "Z"


def test_duration_ends_every_node_process(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(YAML)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "robot_dynamics_tools.cli", "run", "--params", str(f),
                        "--nodes", "gravity_compensation", "--duration", "3"], capture_output=True, text=True,
                       timeout=90)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["exit_codes"] == {"gravity_compensation": 0}
    assert time.monotonic() - t0 >= 3.0


def test_retiming_service_solves_in_its_own_process_with_the_robots_acceleration_limits(tmp_path):
    """`run --urdf panda --nodes mujoco_simulator retiming_service --ros-args -r __ns:=/r1`: the service is its
    own child process of `run` (its entry point module, with urdf_path and joint_limits_path passed as ROS
    arguments); every name lands under /r1, and the service plans within config/panda_joint_limits.yaml's
    accelerations (read here with yaml, independently)."""
    import numpy as np
    import yaml
    from rclpy.executors import SingleThreadedExecutor
    from trajectory_msgs.msg import JointTrajectoryPoint

    from robot_dynamics_ros.share import data_file

    limits = yaml.safe_load(data_file("config", "panda_joint_limits.yaml").read_text())["joint_limits"]
    p = subprocess.Popen([sys.executable, "-m", "robot_dynamics_tools.cli", "run", "--urdf", "panda", "--nodes",
                          "mujoco_simulator", "retiming_service", "--duration", "60", "--ros-args", "-r",
                          "__ns:=/r1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        node, client, srv = _retime_client(ctx, "/r1/retiming_service/retime")
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
        # `run` checks every node's parameters before it starts them: wait for its children first (a service of
        # an earlier test's node on this session's domain may still be listed meanwhile)
        deadline = time.monotonic() + 60
        while not (service_cmd := [c for c in _children_cmdlines(p.pid)
                                   if "robot_dynamics_ros.nodes.retiming_service" in c]):
            assert time.monotonic() < deadline and p.poll() is None, (p.poll(), _children_cmdlines(p.pid))
            time.sleep(0.1)
        assert len(service_cmd) == 1 and "-r __ns:=/r1" in service_cmd[0], _children_cmdlines(p.pid)
        assert client.wait_for_service(timeout_sec=60)
        assert "-p urdf_path:='panda' -p joint_limits_path:=" in service_cmd[0], service_cmd
        want = {("mujoco_simulator", "/r1"), ("retiming_service", "/r1")}
        deadline = time.monotonic() + 10
        while not want <= set(graph := node.get_node_names_and_namespaces()):
            assert time.monotonic() < deadline, graph
            time.sleep(0.1)
        # the endpoints of this run's nodes (the domain may still list those of an earlier test's processes)
        topics = set()
        for name, ns in want:
            for query in (node.get_publisher_names_and_types_by_node, node.get_subscriber_names_and_types_by_node):
                topics |= {t for t, _ in query(name, ns)}
        assert {"/r1/joint_states", "/r1/effort_controller/commands"} <= topics
        assert not {"/joint_states", "/effort_controller/commands"} & topics, topics
        req = srv.Request()
        names = [f"panda_joint{i}" for i in range(1, 8)]
        req.path.joint_names = names
        req.path.points = [JointTrajectoryPoint(positions=q) for q in
                           ([0.0, 0.0, 0.0, -1.5, 0.0, 1.5, 0.0], [1.5, 0.8, -1.0, -0.5, 1.0, 2.5, 1.5])]
        req.sample_period = 0.002
        deadline = time.monotonic() + 300  # a first run compiles the kernels: the answer is "busy" meanwhile
        while True:
            fut = client.call_async(req)
            ex.spin_until_future_complete(fut, timeout_sec=60)
            resp = fut.result()
            if resp is None or not resp.message.startswith("busy") or time.monotonic() > deadline:
                break
        assert resp is not None and resp.success, resp and resp.message
        assert "no acceleration limits" not in resp.message
        qdd = np.array([pt.accelerations for pt in resp.trajectory.points])
        amax = np.array([limits[j]["max_acceleration"] for j in names])
        peak = (np.abs(qdd) / amax).max()
        assert 0.5 < peak <= 1 + 1e-3, peak   # the limits bind, and hold (218 rad/s² without them)
        node.destroy_node()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
        rclpy.try_shutdown(context=ctx)
    assert p.returncode == 0, err[-2000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["nodes"] == ["mujoco_simulator", "retiming_service"]
    assert summary["exit_codes"] == {"mujoco_simulator": 0, "retiming_service": 0}


NS_YAML = """
gravity_compensation:
  ros__parameters:
    urdf_path: ur5
    state_timeout: 0.25
computed_torque:
  ros__parameters:
    urdf_path: ur5
    gains:
      shoulder_pan_joint: {kp: 400.0, kd: 40.0}
mujoco_simulator:
  ros__parameters:
    publish_rate: 250.0
"""


def _namespaced_nodes(f, ns):
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=["x", "--ros-args", "--params-file", str(check_params_file(str(f))),
                                  "-r", f"__ns:={ns}"])
    return ctx, start_nodes(["gravity_compensation", "computed_torque"], context=ctx)


def test_plain_sections_do_not_reach_namespaced_nodes_and_run_says_so_in_one_line_each(tmp_path):
    """rclpy gives a node the '/**' section and the one named by its fully qualified name (a leading '/'
    implied): a plain 'gravity_compensation:' is '/gravity_compensation', not '/rt1/gravity_compensation'.
    `run` reports each such section once (file, section, nodes' names), never per parameter."""
    from robot_dynamics_tools.commands.run import unmatched_sections

    f = tmp_path / "plain.yaml"
    f.write_text(NS_YAML)
    ctx, nodes = _namespaced_nodes(f, "/rt1")
    try:
        grav, ct = nodes
        assert grav.get_fully_qualified_name() == "/rt1/gravity_compensation"
        assert grav.p["state_timeout"] == 0.1 and grav.p["urdf_path"] == ""   # rclpy applied nothing
        assert undeclared_parameters([str(f)], nodes) == []                  # no per-parameter flood
        lines = unmatched_sections([str(f)], nodes)
        assert len(lines) == 2, lines                       # mujoco_simulator: a node this run does not start
        for line, section in zip(lines, ("gravity_compensation", "computed_torque")):
            assert line.startswith(f"parameter file '{f}': section '{section}' matches none of the nodes "
                                   "[/rt1/gravity_compensation, /rt1/computed_torque]"), line
            assert f"write '/rt1/{section}:'" in line and "\n" not in line
    finally:
        for n in nodes:
            n.destroy_node()
        rclpy.shutdown(context=ctx)


@pytest.mark.parametrize("key, applies", [("/rt2/gravity_compensation", True),
                                          ("rt2/gravity_compensation", True),
                                          ("/**/gravity_compensation", True),
                                          ("/*/gravity_compensation", True),
                                          ("/x/gravity_compensation", False),
                                          ("/gravity_compensation", False)])
def test_namespaced_sections_reach_the_node_as_rclpy_applies_them(tmp_path, key, applies):
    from robot_dynamics_tools.commands.run import unmatched_sections

    f = tmp_path / "ns.yaml"
    f.write_text(f"'{key}':\n  ros__parameters:\n    state_timeout: 0.25\n    state_timout: 1.0\n")
    ctx, nodes = _namespaced_nodes(f, "/rt2")
    try:
        grav = nodes[0]
        assert grav.p["state_timeout"] == (0.25 if applies else 0.1)   # what rclpy itself applied
        lines = unmatched_sections([str(f)], nodes)
        undeclared = undeclared_parameters([str(f)], nodes)
        if applies:
            assert lines == [] and len(undeclared) == 1 and "'/rt2/gravity_compensation'" in undeclared[0]
            assert "'state_timout'" in undeclared[0]
        else:
            assert len(lines) == 1 and f"section '{key}'" in lines[0] and undeclared == [], (lines, undeclared)
    finally:
        for n in nodes:
            n.destroy_node()
        rclpy.shutdown(context=ctx)


def test_nested_namespace_sections_are_read_as_rcl_reads_them(tmp_path):
    f = tmp_path / "nested.yaml"
    f.write_text("rt3:\n  gravity_compensation:\n    ros__parameters:\n      state_timeout: 0.25\n")
    ctx, nodes = _namespaced_nodes(f, "/rt3")
    try:
        from robot_dynamics_tools.commands.run import unmatched_sections

        assert nodes[0].p["state_timeout"] == 0.25 and unmatched_sections([str(f)], nodes) == []
    finally:
        for n in nodes:
            n.destroy_node()
        rclpy.shutdown(context=ctx)


SECTION_KEYS = ["gravity_compensation", "/gravity_compensation", "/rt4/gravity_compensation",
                "rt4/gravity_compensation", "/**/gravity_compensation", "/*/gravity_compensation", "/rt4/*", "/*",
                "/**", "**/gravity_compensation", "/**/rt4/gravity_compensation", "/*/*", "/rt4/**",
                "/x/gravity_compensation", "/**/other", "/rt4/gravity_compensation/**"]


@pytest.mark.parametrize("ns", ["/", "/rt4", "/a/rt4"])
def test_section_matching_is_rclpys_own(tmp_path, ns):
    """`run`'s section rule against rclpy itself: for each key, whether a plain rclpy node (which declares
    whatever the file gives it) got the section's parameter."""
    from rclpy.node import Node

    from robot_dynamics_tools.commands.run import section_applies

    for i, key in enumerate(SECTION_KEYS):
        f = tmp_path / f"k{i}.yaml"
        f.write_text(f"'{key}':\n  ros__parameters:\n    probe_value: 1\n")
        ctx = rclpy.Context()
        rclpy.init(context=ctx, args=["x", "--ros-args", "--params-file", str(f), "-r", f"__ns:={ns}"])
        try:
            node = Node("gravity_compensation", context=ctx, automatically_declare_parameters_from_overrides=True)
            try:
                got = node.has_parameter("probe_value")
                name = key if key.startswith("/") else f"/{key}"
                assert section_applies(name, node) == got, (ns, key, got)
            finally:
                node.destroy_node()
        finally:
            rclpy.shutdown(context=ctx)


def test_bundled_config_reaches_namespaced_nodes(tmp_path):
    """The README's `run --params config/panda.yaml ... --ros-args -r __ns:=/r1`: the file's values arrive."""
    root = Path(__file__).resolve().parents[2]
    ctx, nodes = _namespaced_nodes(root / "config" / "panda.yaml", "/rt5")
    try:
        from robot_dynamics_tools.commands.run import unmatched_sections

        grav, ct = nodes
        assert grav.p["urdf_path"] == "panda" and ct.p["urdf_path"] == "panda"
        assert ct.get_parameter("gains.panda_joint5.p").value == 250.0      # config/panda.yaml, by hand
        files = [str(root / "config" / "panda.yaml")]
        assert unmatched_sections(files, nodes) == [] and undeclared_parameters(files, nodes) == []
    finally:
        for n in nodes:
            n.destroy_node()
        rclpy.shutdown(context=ctx)
