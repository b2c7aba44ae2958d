"""``robot-dynamics replay``: bags written by plain rosbags and recorded from the MuJoCo simulator node, both
storage formats, replayed over real DDS into the gravity-compensation node; commands checked against the
in-package Newton-Euler g(q) (an engine independent of the Pinocchio the node and the replay use)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer
from sensor_msgs.msg import JointState

from robot_dynamics_ros import robots
from robot_dynamics_ros.errors import UserError
from robot_dynamics_tools import bags, cli
from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.model import RobotModel

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[2]
PARAMS = str(ROOT / "config" / "panda.yaml")
ARM = [f"panda_joint{i}" for i in range(1, 8)]
FINGERS = ["panda_finger_joint1", "panda_finger_joint2"]
T0 = 1_700_000_000_000_000_000  # ns


@pytest.fixture(scope="module")
def panda():
    e = robots.ROBOTS["panda"]
    return RobotModel.from_urdf(e.path, held_joints=e.held_joints)


def write_with_rosbags(path: Path, storage: str, n: int, hz: float = 500.0, *, topic="/joint_states",
                       nan_at: int | None = None, names=None, shuffle=True) -> np.ndarray:
    """A JointState bag written by rosbags itself (not our writer); returns q (n, 7) in ARM order."""
    store = bags.typestore("jazzy")
    T = store.types
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    if names is None:
        names = [*ARM[::-1], *FINGERS] if shuffle else [*ARM, *FINGERS]
    order = [ARM.index(j) if j in ARM else None for j in names]
    k = np.arange(n)[:, None]
    q = np.array([0.3, 0.6, -0.4, -1.6, 0.5, 1.9, 0.7]) + 0.4 * np.sin(2 * np.pi * 0.5 * k / hz + np.arange(7))
    with Writer(path, version=9, storage_plugin=plugin) as w:
        conn = w.add_connection(topic, bags.JOINT_STATE, typestore=store)
        for i in range(n):
            ns = T0 + int(round(i * 1e9 / hz))
            pos = np.array([q[i, o] if o is not None else 0.02 for o in order])
            if i == nan_at:
                pos[0] = np.nan
            msg = T[bags.JOINT_STATE](
                header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=ns // 10**9,
                                                                                     nanosec=ns % 10**9),
                                                frame_id=""),
                name=names, position=pos, velocity=np.zeros(len(names)), effort=np.zeros(0))
            w.write(conn, ns + 200_000, store.serialize_cdr(msg, bags.JOINT_STATE))
    return q


def replay(capfd, *args) -> tuple[int, dict | None, str]:
    """Run the CLI in this process; a generous --timeout so a stall of a busy machine is not a drop."""
    if "--timeout" not in args:
        args = (*args, "--timeout", "10")
    status = cli.main(["replay", *map(str, args)])
    out, err = capfd.readouterr()
    lines = out.strip().splitlines()
    summary = json.loads(lines[-1]) if status in (0, 2) else None
    return status, summary, err


def recorded_commands(out_bag: Path) -> np.ndarray:
    msgs = bags.read_messages(out_bag, {"/effort_controller/commands": "std_msgs/msg/Float64MultiArray"})
    return np.array([list(m.msg.data) for m in msgs])


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_rosbags_written_bag_as_fast_as_possible(tmp_path, capfd, panda, storage):
    q = write_with_rosbags(tmp_path / "in", storage, 400, nan_at=150)
    status, s, _ = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda",
                          "--params", PARAMS, "--as-fast-as-possible")
    assert status == 0 and s["ok"]
    assert s["messages_in"] == 400 and s["no_command_expected"] == 1  # the NaN record is rejected by the node
    assert s["commands"] == 399 and s["dropped"] == 0 and s["unmatched_commands"] == 0
    assert s["max_abs_diff_nm"] <= 1e-9 and s["storage"] == storage
    assert s["max_abs_diff_at"]["joint"] in ARM and 0 <= s["max_abs_diff_at"]["input"] < 400  # where it is
    assert s["node_counters"]["received"] == 399 and s["node_counters"]["rejected"] == 1
    assert set(s["latency_us"]) == {"p50", "p90", "p99", "max"} and 0 < s["latency_us"]["p50"] < 1e5
    # the recording: inputs as replayed, commands in the node's joint order (config: ARM), = g(q) of NE
    with bags.BagReader(tmp_path / "out") as out:
        assert out.storage == storage
        assert out.counts["/joint_states"] == 400 and out.counts["/effort_controller/commands"] == 399
    tau = recorded_commands(tmp_path / "out")
    keep = np.delete(np.arange(400), 150)
    g_ne = NewtonEulerDynamics(panda).gravity(q[keep])
    np.testing.assert_allclose(tau, np.clip(g_ne, -panda.effort_limit, panda.effort_limit), rtol=0, atol=1e-9)
    assert np.abs(tau).max() > 10  # a real load, not zeros


def test_a_ros1_bag_replays(tmp_path, capfd, panda):
    """A ROS 1 bag (rosbags' rosbag1 Writer, Noetic definitions: the header carries seq) of Panda joint states
    replays into gravity compensation; the commands equal the in-package Newton-Euler g(q); the recording
    is a rosbag2 (mcap) of ROS 2 messages."""
    from rosbags.rosbag1 import Writer as Ros1Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS1_NOETIC)
    T = store.types
    n = 200
    k = np.arange(n)[:, None]
    q = np.array([0.3, 0.6, -0.4, -1.6, 0.5, 1.9, 0.7]) + 0.4 * np.sin(2 * np.pi * k / 500 + np.arange(7))
    with Ros1Writer(tmp_path / "panda.bag") as w:
        conn = w.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=store)
        for i in range(n):
            ns = T0 + i * 2_000_000
            msg = T["sensor_msgs/msg/JointState"](
                header=T["std_msgs/msg/Header"](seq=i, stamp=T["builtin_interfaces/msg/Time"](
                    sec=ns // 10**9, nanosec=ns % 10**9), frame_id=""),
                name=[*ARM, *FINGERS], position=np.array([*q[i], 0.02, 0.02]), velocity=np.zeros(9),
                effort=np.zeros(9))
            w.write(conn, ns + 100_000, store.serialize_ros1(msg, "sensor_msgs/msg/JointState"))
    status, s, _ = replay(capfd, tmp_path / "panda.bag", "--out", tmp_path / "out", "--urdf", "panda",
                          "--params", PARAMS, "--as-fast-as-possible")
    assert status == 0 and s["ok"] and s["storage"] == "mcap", json.dumps(s)
    assert s["messages_in"] == n and s["commands"] == n and s["max_abs_diff_nm"] <= 1e-9
    g_ne = np.clip(NewtonEulerDynamics(panda).gravity(q), -panda.effort_limit, panda.effort_limit)
    assert np.abs(recorded_commands(tmp_path / "out") - g_ne).max() <= 1e-9
    assert_every_message_deserializes_with_rosbags(tmp_path / "out", s["recorded"])


def test_recorded_timing_is_kept_at_rate_one(tmp_path, capfd):
    """Paced replay is not flow controlled: a node that stalls longer than its keep-last depth (10 at
    500 Hz = 20 ms) loses messages, as it would on the robot. A deeper queue keeps this test about timing
    on a busy machine."""
    write_with_rosbags(tmp_path / "in", "mcap", 250, shuffle=False)  # 0.498 s at 500 Hz
    params = tmp_path / "p.yaml"
    params.write_text((ROOT / "config" / "panda.yaml").read_text().replace(
        "    state_timeout: 0.1", "    state_timeout: 0.1\n    qos_overrides:\n"
        "      /joint_states:\n        subscription: {depth: 1000, reliability: reliable}", 1))
    status, s, _ = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda",
                          "--params", params, "--rate", "1.0")
    assert status == 0 and s["dropped"] == 0 and s["commands"] == 250 and s["max_abs_diff_nm"] <= 1e-9, json.dumps(s)
    assert 0.49 <= s["wall_s"] < 5.0  # paced by the bag's record times, not as fast as possible


@pytest.fixture(scope="module")
def simulator_bags(tmp_path_factory):
    """/joint_states recorded (raw CDR, as ros2 bag record) from the MuJoCo simulator node, both formats."""
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    from robot_dynamics_ros.nodes import runtime
    from robot_dynamics_ros.nodes.simulator import SimulatorNode

    d = tmp_path_factory.mktemp("sim")
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=["sim", "--ros-args", "--params-file", PARAMS],
               signal_handler_options=SignalHandlerOptions.NO)
    records = []
    try:
        from rclpy.parameter import Parameter

        # slowed down (no controller here): the arm falls, but in the recorded 0.6 s of wall time never faster
        # than the control cores' plausible velocity (2 x the limit), whose states would rightly get no command;
        # free running (the bundled config holds the pose until a controller's first command)
        sim = SimulatorNode(context=ctx, parameter_overrides=[Parameter("real_time_factor", value=0.2),
                                                              Parameter("start_on_first_command", value=False)])
        rec = rclpy.create_node("recorder", context=ctx)
        rec.create_subscription(JointState, "/joint_states",
                                lambda raw: records.append((time.time_ns(), bytes(raw))), 1000, raw=True)
        ex = runtime.make_executor("events", context=ctx)
        ex.add_node(sim)
        ex.add_node(rec)
        end = time.monotonic() + 10.0
        while len(records) < 300 and time.monotonic() < end:
            ex.spin_once(timeout_sec=0.01)
        sim.destroy_node()
        rec.destroy_node()
        ex.shutdown()
    finally:
        rclpy.shutdown(context=ctx)
    assert len(records) >= 300
    out = {}
    for storage in ("sqlite3", "mcap"):
        with bags.BagWriter(d / storage, storage=storage) as w:
            for t_ns, raw in records[:300]:
                w.write_serialized("/joint_states", bags.JOINT_STATE, raw, t_ns)
        out[storage] = d / storage
    return out


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_simulator_recorded_bag(tmp_path, capfd, panda, simulator_bags, storage):
    status, s, _ = replay(capfd, simulator_bags[storage], "--out", tmp_path / "out", "--urdf", "panda",
                          "--params", PARAMS, "--as-fast-as-possible")
    assert status == 0 and s["messages_in"] == 300 and s["commands"] == 300 and s["dropped"] == 0
    assert s["max_abs_diff_nm"] <= 1e-9
    js = bags.read_messages(simulator_bags[storage], ["/joint_states"])
    q = np.array([[m.msg.position[list(m.msg.name).index(j)] for j in ARM] for m in js])
    assert np.ptp(q, axis=0).max() > 1e-3  # the unactuated arm moved under gravity: varied inputs
    tau = recorded_commands(tmp_path / "out")
    np.testing.assert_allclose(tau, np.clip(NewtonEulerDynamics(panda).gravity(q), -panda.effort_limit,
                                            panda.effort_limit), rtol=0, atol=1e-9)


# ------------------------------------------------------------------------------------------- bad bags
def test_wrong_type_on_topic(tmp_path, capfd):
    bags.write_bag(tmp_path / "in", [("/joint_states", 1, bags.rclpy_class(bags.FLOAT64_MULTI_ARRAY)(data=[1.0]))])
    status, _, err = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda")
    assert status == 1
    assert "topic '/joint_states' holds std_msgs/msg/Float64MultiArray, expected sensor_msgs/msg/JointState" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_missing_topic(tmp_path, capfd):
    write_with_rosbags(tmp_path / "in", "sqlite3", 5, topic="/robot/joint_states")
    status, _, err = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda")
    assert status == 1 and "topic '/joint_states' is not in the bag (topics: /robot/joint_states" in err
    status, s, _ = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda", "--params", PARAMS,
                          "--joint-states-topic", "/robot/joint_states", "--as-fast-as-possible")
    assert status == 0 and s["commands"] == 5  # any topic name given by option


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_truncated_bag(tmp_path, capfd, storage):
    write_with_rosbags(tmp_path / "in", storage, 200)
    f = next(p for p in (tmp_path / "in").iterdir() if p.suffix in (".db3", ".mcap"))
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    status, _, err = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda")
    assert status == 1 and "truncated or corrupt" in err and str(tmp_path / "in") in err
    assert not (tmp_path / "out").exists()


def test_joint_not_in_model_is_ignored_as_the_node_ignores_it(tmp_path, capfd, panda):
    """A joint_state_broadcaster bag with joints the URDF lacks (a gripper, another arm's joint): replayed,
    the names reported once, the commands g(q) of the model's own joints."""
    names = [*ARM[::-1], "gripper_finger", *FINGERS, "elbow_joint"]
    q = write_with_rosbags(tmp_path / "in", "mcap", 20, names=names)
    status, s, err = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda",
                            "--params", PARAMS, "--as-fast-as-possible")
    assert status == 0 and s["ok"], err
    assert s["ignored_joint_names"] == ["elbow_joint", "gripper_finger"]
    assert s["commands"] == 20 and s["dropped"] == 0 and s["max_abs_diff_nm"] <= 1e-9
    tau = recorded_commands(tmp_path / "out")
    g_ne = NewtonEulerDynamics(panda).gravity(q)
    np.testing.assert_allclose(tau, np.clip(g_ne, -panda.effort_limit, panda.effort_limit), rtol=0, atol=1e-9)


def test_robot_joint_never_in_bag(tmp_path, capfd):
    write_with_rosbags(tmp_path / "in", "mcap", 5, names=[*ARM[:6], *FINGERS])
    status, _, err = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda")
    assert status == 1 and "joint 'panda_joint7' of 'panda' never appears" in err


def test_robot_joint_missing_is_refused_even_with_a_name_not_in_the_model(tmp_path, capfd):
    """An unknown name is not a stand-in for a missing one (here a UR joint where panda_joint7 should be)."""
    write_with_rosbags(tmp_path / "in", "mcap", 5, names=[*ARM[:6], "elbow_joint", *FINGERS])
    status, _, err = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda")
    assert status == 1 and "joint 'panda_joint7' of 'panda' never appears" in err
    assert "ignored: ['elbow_joint']" in err and not (tmp_path / "out").exists()


def test_a_misspelt_joint_name_is_named_as_the_likely_cause(tmp_path, capfd):
    write_with_rosbags(tmp_path / "in", "mcap", 5, names=[*ARM[:6], "panda_jiont7", *FINGERS])
    status, _, err = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda")
    assert status == 1 and len(err.strip().splitlines()) == 1
    assert "joint 'panda_joint7' of 'panda' never appears" in err
    assert "likely misspelt: 'panda_jiont7' for 'panda_joint7'" in err
    write_with_rosbags(tmp_path / "in2", "mcap", 5, names=[*ARM[:6], "elbow_joint", *FINGERS])
    status, _, err = replay(capfd, tmp_path / "in2", "--out", tmp_path / "out", "--urdf", "panda")
    assert status == 1 and "misspelt" not in err  # another robot's joint is no misspelling


def test_refuses_existing_out(tmp_path, capfd):
    write_with_rosbags(tmp_path / "in", "mcap", 5)
    (tmp_path / "out").mkdir()
    status, _, err = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda")
    assert status == 1 and "already exists" in err


# ------------------------------------------------------------------------------------------- done-when
@pytest.mark.slow
@pytest.mark.serial  # its wall-time bound is judged on a machine no other test loads
def test_sixty_seconds_at_500_hz_as_fast_as_possible(tmp_path, capfd, panda):
    """Issue 6 done-when: 60 s of 500 Hz 7-DoF joint states, zero dropped, commands = recomputation to 1e-9."""
    t = time.perf_counter()
    q = write_with_rosbags(tmp_path / "in", "mcap", 30_000)
    status, s, _ = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda",
                          "--params", PARAMS, "--as-fast-as-possible")
    assert status == 0 and s["ok"]
    assert s["messages_in"] == 30_000 and s["commands"] == 30_000 and s["dropped"] == 0
    assert s["max_abs_diff_nm"] <= 1e-9 and s["bag_duration_s"] == pytest.approx(59.998)
    tau = recorded_commands(tmp_path / "out")
    g_ne = np.clip(NewtonEulerDynamics(panda).gravity(q), -panda.effort_limit, panda.effort_limit)
    assert np.abs(tau - g_ne).max() <= 1e-9
    assert time.perf_counter() - t < 40.0


# ------------------------------------------------------------------------------------------- computed torque
def write_tracking_bag(path: Path, storage: str, trajectory_at: int = 100) -> None:
    """1 s of 500 Hz joint states near the demo pose, a 3-point JointTrajectory (reversed joint order) before
    joint state ``trajectory_at`` (default 100: at 0.2 s; 0: recorded 0.2 s before the first joint state)."""
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    q0 = np.array([0.3, 0.6, -0.4, -1.6, 0.5, 1.9, 0.7])
    with bags.BagWriter(path, storage=storage) as w:
        for k in range(500):
            t, ns = k / 500, T0 + k * 2_000_000
            q = q0 + 0.05 * np.sin(2 * np.pi * t + np.arange(7))
            qd = 0.1 * np.pi * np.cos(2 * np.pi * t + np.arange(7))
            if k == trajectory_at:
                tr = JointTrajectory(joint_names=ARM[::-1])
                for dt, dq in ((0.3, 0.1), (0.6, 0.2), (0.7, 0.15)):
                    p = JointTrajectoryPoint(positions=list((q0 + dq)[::-1]))
                    p.time_from_start.nanosec = int(round(dt * 1e9))
                    tr.points.append(p)
                w.write("/computed_torque/joint_trajectory", tr, ns + 50_000 if k else T0 - 200_000_000)
            m = JointState(name=[*ARM, *FINGERS], position=[*q, 0.02, 0.02], velocity=[*qd, 0.0, 0.0])
            m.header.stamp.sec, m.header.stamp.nanosec = divmod(ns, 10**9)
            w.write("/joint_states", m, ns + 150_000)


@pytest.mark.parametrize("mode", ["computed_torque", "gravity"])
def test_computed_torque_with_a_trajectory(tmp_path, capfd, panda, mode):
    write_tracking_bag(tmp_path / "in", "sqlite3")
    params = tmp_path / "p.yaml"
    params.write_text((ROOT / "config" / "panda.yaml").read_text().replace("mode: computed_torque", f"mode: {mode}"))
    status, s, _ = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda", "--params", params,
                          "--node", "computed_torque", "--as-fast-as-possible")
    assert status == 0 and s["ok"] and s["trajectories_in"] == 1
    assert s["messages_in"] == 500 and s["commands"] == 500 and s["dropped"] == 0
    assert s["max_abs_diff_nm"] <= 1e-9  # = the replay's own Pinocchio recomputation
    assert s["node_counters"]["trajectories_accepted"] == 1
    out = bags.read_messages(tmp_path / "out", ["/joint_states", "/computed_torque/desired_state",
                                               "/effort_controller/commands"])
    js = [m.msg for m in out if m.topic == "/joint_states"]
    desired = [m.msg for m in out if m.topic == "/computed_torque/desired_state"]
    tau = np.array([list(m.msg.data) for m in out if m.topic == "/effort_controller/commands"])
    q = np.array([list(m.position)[:7] for m in js])
    q_d = np.array([list(m.position) for m in desired])
    assert np.abs(q_d[-1] - (np.array([0.3, 0.6, -0.4, -1.6, 0.5, 1.9, 0.7]) + 0.15)).max() < 1e-12  # followed
    assert np.abs(q_d[50] - q[0]).max() < 1e-12  # held the first measured q before the trajectory
    if mode == "gravity":  # tau = g(q) + P e + D ė, g from the in-package Newton-Euler
        qd = np.array([list(m.velocity)[:7] for m in js])
        qd_d = np.array([list(m.velocity) for m in desired])
        p = np.array([600.0, 600, 600, 600, 250, 150, 50])  # config/panda.yaml gains.*.p / .d
        d = np.array([50.0, 50, 50, 20, 20, 20, 10])
        want = NewtonEulerDynamics(panda).gravity(q) + p * (q_d - q) + d * (qd_d - qd)
        np.testing.assert_allclose(tau, np.clip(want, -panda.effort_limit, panda.effort_limit), rtol=0, atol=1e-9)


def test_computed_torque_as_fast_as_possible_is_the_same_run_after_run(tmp_path, capfd):
    """The trajectory precedes the first joint state: three flow-controlled replays record the same commands
    (bit for bit) and each equals the offline recomputation. The node must read each record's /clock time
    before the record reaches it (DDS does not order two topics)."""
    write_tracking_bag(tmp_path / "in", "sqlite3", trajectory_at=0)
    runs = []
    for i in range(3):
        status, s, _ = replay(capfd, tmp_path / "in", "--out", tmp_path / f"out{i}", "--urdf", "panda",
                              "--params", PARAMS, "--node", "computed_torque", "--as-fast-as-possible")
        assert status == 0 and s["ok"] and s["dropped"] == 0 and s["max_abs_diff_nm"] <= 1e-9, json.dumps(s)
        runs.append(recorded_commands(tmp_path / f"out{i}"))
    assert runs[0].shape == (500, 7)
    assert np.array_equal(runs[0], runs[1]) and np.array_equal(runs[0], runs[2])


def test_output_and_input_checked_before_any_work(tmp_path, capfd):
    import os

    src = tmp_path / "in"
    write_with_rosbags(src, "sqlite3", 20)
    cases = [
        (["--out", str(src / "inner")], "is IN_BAG"),
        (["--out", str(tmp_path / "no_folder" / "out")], "does not exist"),
        (["--out", str(tmp_path / "out"), "--max-input-mb", "0.001"], "above --max-input-mb 0.001"),
    ]
    (tmp_path / "taken.partial").mkdir()
    cases.append((["--out", str(tmp_path / "taken")], "taken.partial' exists already"))
    for extra, expect in cases:
        t0 = time.monotonic()
        status, _, err = replay(capfd, src, "--urdf", "panda", *extra)
        assert status == 1 and expect in err, err
        assert len(err.strip().splitlines()) == 1 and time.monotonic() - t0 < 5  # refused before the work
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    status, _, err = replay(capfd, fifo, "--urdf", "panda", "--out", tmp_path / "o2")
    assert status == 1 and "is a FIFO, expected a regular file or a bag folder" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "o2").exists()


def _records(n):
    from rclpy.serialization import serialize_message
    from std_msgs.msg import Float64MultiArray

    return [("/effort_controller/commands", bags.FLOAT64_MULTI_ARRAY, T0 + k,
             bytes(serialize_message(Float64MultiArray(data=[float(k)])))) for k in range(n)]


def _on_write(monkeypatch, k: int, action) -> None:
    """``action()`` before the ``k``-th message the bag writer writes (1-based), then the real write."""
    real, calls = bags.BagWriter.write_serialized, []

    def write(self, *a, **kw):
        calls.append(1)
        if len(calls) == k:
            action()
        return real(self, *a, **kw)

    monkeypatch.setattr(bags.BagWriter, "write_serialized", write)


def test_recording_is_written_atomically(tmp_path, monkeypatch):
    from robot_dynamics_tools.commands.replay import write_recording

    def disk_full():
        raise OSError(28, "No space left on device")

    _on_write(monkeypatch, 5, disk_full)
    with pytest.raises(UserError, match="No space left on device"):  # one line, not a traceback
        write_recording(tmp_path / "out", _records(10), "sqlite3")
    assert list(tmp_path.iterdir()) == []  # neither a half bag nor a temporary folder left


def test_a_ctrl_c_during_the_write_is_held_until_the_bag_is_complete(tmp_path, monkeypatch):
    import os
    import signal

    from robot_dynamics_tools.commands.replay import write_recording

    _on_write(monkeypatch, 3, lambda: os.kill(os.getpid(), signal.SIGINT))
    n, interrupted = write_recording(tmp_path / "out", _records(10), "sqlite3")
    assert (n, interrupted) == (10, True)
    msgs = bags.read_messages(tmp_path / "out", {"/effort_controller/commands": bags.FLOAT64_MULTI_ARRAY})
    assert [m.msg.data[0] for m in msgs] == [float(k) for k in range(10)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_an_interrupt_keeps_what_was_recorded_and_says_so(tmp_path, sig):
    import signal
    import subprocess
    import sys

    src = tmp_path / "in"
    write_with_rosbags(src, "sqlite3", 3000)  # 6 s at the recorded pace
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "robot_dynamics_tools.cli", "replay", str(src), "--out", str(out),
                          "--urdf", "panda", "--params", PARAMS, "--rate", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        while "robot 'panda'" not in line:  # the node under test is up; the replay starts right after
            assert line, "replay ended before its node started"
            line = p.stderr.readline()
        time.sleep(2.5)
        p.send_signal(getattr(signal, sig))
        stdout, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, stderr[-2000:]
    partial = tmp_path / "out.partial"
    assert not out.exists() and partial.is_dir()
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["interrupted"] is True and summary["out_bag"] == str(partial)
    assert 0 < summary["messages_in"] < 3000
    kept = bags.read_messages(partial, {"/joint_states": bags.JOINT_STATE})
    assert len(kept) == summary["messages_in"]  # everything replayed before the interrupt is in the bag
    assert f"are in '{partial}'" in stdout


# ------------------------------------------------------------------------------------------- the observer
def write_push_bag(path: Path, panda, *, force, body: str, t_on: float, t_off: float, steps: int) -> np.ndarray:
    """A MuJoCo run of the Panda held at its demo pose (gravity + PD from the plant's own torques), pushed on
    ``body`` by ``force`` (N, world) over [t_on, t_off); /joint_states at 1 kHz with the applied joint torques
    as efforts. Returns Jᵀf (steps, 7) from MuJoCo's Jacobian of the body's centre of mass, by sample: the
    torque felt over the interval that ends at that sample (independent of the observer's model)."""
    from robot_dynamics_ros import robots
    from robot_dynamics_ros.sim.mujoco_sim import MujocoSim

    entry = robots.resolve("panda")
    q0 = np.array([entry.demo_pose[j] for j in panda.joint_names])
    sim = MujocoSim(panda, timestep=0.001)
    sim.reset(q0)
    ne = NewtonEulerDynamics(panda)
    ext, felt = [], np.zeros(7)
    with bags.BagWriter(path, storage="mcap") as w:
        for k in range(steps):
            ns = T0 + k * 1_000_000
            q, qd = sim.q, sim.qd
            sim.set_effort(ne.gravity(q) + 100.0 * (q0 - q) - 10.0 * qd)
            m = JointState(name=[*ARM, *FINGERS], position=[*q, 0.04, 0.04], velocity=[*qd, 0.0, 0.0],
                           effort=[*sim.effort, 0.0, 0.0])
            m.header.stamp.sec, m.header.stamp.nanosec = divmod(ns, 10**9)
            w.write("/joint_states", m, ns + 100_000)
            ext.append(felt)
            # Jᵀf from MuJoCo's Jacobian of the body's centre of mass, felt until the next sample
            felt = sim.push(body, force) if t_on <= k * 0.001 < t_off else sim.push(None)
            sim.step()
    return np.array(ext)


def test_observer_replayed_on_a_recorded_push_matches_jacobian_transpose_force(tmp_path, capfd, panda):
    """robot-dynamics replay --node external_torque_observer on a MuJoCo recording with a known 30 N push on
    the forearm: the replayed τ_ext equals Jᵀf (MuJoCo) within 10 % of its peak from three time constants
    after the onset to the end of the push, the recorded flag turns true once, and the node's output equals the
    offline recomputation by its own core."""
    gain, t_on, t_off = 100.0, 0.15, 0.4
    ext = write_push_bag(tmp_path / "in", panda, force=[0.0, 30.0, 0.0], body="panda_link5", t_on=t_on,
                         t_off=t_off, steps=500)
    params = tmp_path / "observer.yaml"
    params.write_text("external_torque_observer:\n  ros__parameters:\n"
                      f"    gain: {gain}\n    threshold: [3.0]\n")
    status, s, _ = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda",
                          "--node", "external_torque_observer", "--params", params, "--as-fast-as-possible")
    assert status == 0 and s["ok"], json.dumps(s)
    assert s["messages_in"] == 500 and s["commands"] == 500 and s["dropped"] == 0
    assert s["max_abs_diff_nm"] <= 1e-9 and s["collision_onsets"] == 1
    topic = s["output_topic"]
    assert topic == "/external_torque_observer/external_torque"
    msgs = bags.read_messages(tmp_path / "out", {topic: bags.JOINT_STATE})
    stamps = np.array([m.msg.header.stamp.sec * 10**9 + m.msg.header.stamp.nanosec for m in msgs])
    k = np.rint((stamps - T0) / 1e6).astype(int)
    assert np.array_equal(k, np.arange(500))
    tau_ext = np.array([[m.msg.effort[list(m.msg.name).index(j)] for j in ARM] for m in msgs])
    peak = np.abs(ext).max()
    assert peak > 3.0
    # from 3 time constants after the onset (the first sample whose interval carried the force), as the push
    # scenario's estimate_error_ratio: a first-order lag has e⁻³ ≈ 5 % of the step left there
    after = (k * 1e-3 >= t_on + 0.001 + 3.0 / gain) & (k * 1e-3 <= t_off)
    err = np.abs(tau_ext[after] - ext[after]).max() / peak
    assert err <= 0.1, err
    assert np.abs(tau_ext[(k > 20) & (k * 1e-3 < t_on)]).max() < 0.01 * peak  # before the push: no contact
    assert_every_message_deserializes_with_rosbags(tmp_path / "out", s["recorded"])


def assert_every_message_deserializes_with_rosbags(path: Path, count: int) -> None:
    """Every record of the bag deserializes with rosbags' own reader and typestore (no rclpy involved)."""
    from rosbags.rosbag2 import Reader

    store = bags.typestore("latest")
    n = 0
    with Reader(path) as reader:
        for conn, _, data in reader.messages():
            store.deserialize_cdr(data, conn.msgtype)  # SerdeError on a size mismatch or bad data
            n += 1
    assert n == count > 0


def test_observer_replayed_slowly_follows_the_recorded_time(tmp_path, capfd, panda):
    """At --rate 0.01 a 1 kHz recording arrives every 100 ms of wall time, the observer's state_timeout: its
    staleness follows the bag's /clock (arrival_clock node), so it never restarts — a τ_ext for every state,
    equal to the offline recomputation of the continuous recording."""
    write_push_bag(tmp_path / "in", panda, force=[0.0, 30.0, 0.0], body="panda_link5", t_on=0.02,
                   t_off=0.05, steps=60)
    params = tmp_path / "observer.yaml"
    # state_timeout 50 ms: half the wall time between two states at this rate, 50 times the recorded one
    params.write_text("external_torque_observer:\n  ros__parameters:\n    gain: 100.0\n    threshold: [3.0]\n"
                      "    state_timeout: 0.05\n")
    status, s, _ = replay(capfd, tmp_path / "in", "--out", tmp_path / "out", "--urdf", "panda",
                          "--node", "external_torque_observer", "--params", params, "--rate", "0.01")
    assert status == 0 and s["ok"], json.dumps(s)
    assert s["messages_in"] == 60 and s["commands"] == 60 and s["dropped"] == 0
    assert s["max_abs_diff_nm"] <= 1e-9 and s["wall_s"] >= 5.9  # it did run at 1 % speed
    assert_every_message_deserializes_with_rosbags(tmp_path / "out", s["recorded"])
