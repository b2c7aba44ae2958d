"""What a new user feeds the retimer: joint_limits.yaml entries and MoveIt's default scaling factors,
start/end velocities against the path direction, duplicate joint names, bare config names, the UR10.

Expected values come from the YAML texts written here (their own numbers), from the straight path's
direction (the waypoints' difference) and from the files of config/ read with PyYAML.
"""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.retiming import service as core
from robot_dynamics_ros.retiming.request import RetimeOptions, RetimeStatus
from robot_dynamics_ros.retiming.retimer import Retimer
from robot_dynamics_ros.robots import ROBOTS
from test_cli_outputs import _csv as waypoint_csv
from test_cli_outputs import _run

UR = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
      "wrist_3_joint"]
#: a straight UR5 move inside the position limits (rad)
Q0 = [0.0, -1.57, 1.57, -1.57, -1.57, 0.0]
Q1 = [0.8, -1.2, 1.2, -1.2, -1.57, 0.3]
#: velocity and acceleration limits of the YAML below (rad/s, rad/s²)
VEL = [2.0, 2.0, 3.0, 3.0, 3.0, 3.0]
ACC = [5.0, 4.0, 5.0, 6.0, 6.0, 6.0]
PARAMS = {"default_gridpoints": 0, "default_velocity_scaling_factor": 0.0,
          "default_acceleration_scaling_factor": 0.0, "default_torque_margin": 1.0,
          "default_path_tolerance": 1e-3, "default_sample_period": 0.0, "friction": False,
          "joint_state_timeout": 0.5, "max_waypoints": 100_000, "max_samples": 200_000}


def _limits_yaml(path, velocity_factor=0.1, acceleration_factor=0.1, extra=""):
    lines = ["# as MoveIt Setup Assistant writes it"]
    if velocity_factor is not None:
        lines.append(f"default_velocity_scaling_factor: {velocity_factor}")
    if acceleration_factor is not None:
        lines.append(f"default_acceleration_scaling_factor: {acceleration_factor}")
    lines.append("joint_limits:")
    for j, v, a in zip(UR, VEL, ACC):
        lines.append(f"  {j}: {{has_velocity_limits: true, max_velocity: {v}, has_acceleration_limits: true, "
                     f"max_acceleration: {a}}}")
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def _ur5(joint_limits):
    return RobotModel.from_urdf(ROBOTS["ur5"].path, joint_limits=joint_limits)


def _ratios(qd, qdd, scale_v, scale_a):
    """max |qd| / (scale_v V), max |qdd| / (scale_a A) over samples and joints (the YAML's limits)."""
    return ((np.abs(qd) / (scale_v * np.array(VEL))).max(), (np.abs(qdd) / (scale_a * np.array(ACC))).max())


@pytest.fixture(scope="module")
def ur5_moveit(tmp_path_factory):
    model = _ur5(_limits_yaml(tmp_path_factory.mktemp("lim") / "joint_limits.yaml"))
    retimer = Retimer(model)
    retimer.warmup()
    return model, retimer


# ------------------------------------------------------------------ 1. has_* without max_*
@pytest.mark.parametrize("flag, key", [("has_jerk_limits", "max_jerk"),
                                       ("has_acceleration_limits", "max_acceleration"),
                                       ("has_velocity_limits", "max_velocity")])
def test_a_limit_flag_without_its_value_is_refused_naming_file_joint_and_key(tmp_path, flag, key):
    path = tmp_path / "lim.yaml"
    path.write_text(f"joint_limits:\n  elbow_joint: {{{flag}: true}}\n")
    with pytest.raises(UserError) as err:
        _ur5(path)
    msg = str(err.value)
    assert "\n" not in msg
    assert str(path) in msg and "'elbow_joint'" in msg and key in msg and flag in msg


def test_a_false_flag_with_a_placeholder_value_is_no_limit(tmp_path):
    # MoveIt Setup Assistant writes `has_acceleration_limits: false, max_acceleration: 0`
    path = tmp_path / "lim.yaml"
    path.write_text("joint_limits:\n  elbow_joint: {has_acceleration_limits: false, max_acceleration: 0}\n"
                    "  wrist_1_joint: {has_acceleration_limits: true, max_acceleration: 2.5}\n")
    model = _ur5(path)
    assert np.isinf(model.acceleration_limit[model.index["elbow_joint"]])
    assert model.acceleration_limit[model.index["wrist_1_joint"]] == 2.5


@pytest.mark.parametrize("value", ["1.5", "0", "-0.1", "fast", "true", ".nan"])
def test_a_default_scaling_factor_outside_0_1_is_refused_naming_the_file(tmp_path, value):
    path = tmp_path / "lim.yaml"
    path.write_text(f"default_acceleration_scaling_factor: {value}\njoint_limits: {{}}\n")
    with pytest.raises(UserError) as err:
        _ur5(path)
    assert str(path) in str(err.value) and "default_acceleration_scaling_factor" in str(err.value)


def test_the_yaml_default_scaling_applies_when_the_request_gives_none(ur5_moveit):
    model, retimer = ur5_moveit
    wp = np.array([Q0, Q1])
    res = retimer.retime(wp, options=RetimeOptions(sample_period=0.002))
    assert res.success, res.message
    v, a = _ratios(res.qd, res.qdd, 0.1, 0.1)
    assert v <= 1 + 1e-6 and a <= 1 + 1e-6
    assert max(v, a) >= 0.99  # time-optimal at the scaled limits
    # explicit scales win over the YAML's
    res = retimer.retime(wp, options=RetimeOptions(sample_period=0.002, velocity_scale=1.0,
                                                   acceleration_scale=1.0))
    v, a = _ratios(res.qd, res.qdd, 1.0, 1.0)
    assert v <= 1 + 1e-6 and a <= 1 + 1e-6 and max(v, a) >= 0.99


def test_service_scaling_order_request_parameter_yaml(ur5_moveit):
    model, retimer = ur5_moveit
    req = SimpleNamespace(path=SimpleNamespace(joint_names=list(UR), points=[
        SimpleNamespace(positions=list(Q0)), SimpleNamespace(positions=list(Q1))]),
        velocity_scaling=0.0, acceleration_scaling=0.0, torque_margin=0.0, path_tolerance=0.0,
        sample_period=0.002, jerk_scaling=0.0, gridpoints=0, start_velocity=[], end_velocity=[])
    measured = core.MeasuredPositions(model.joint_names)

    def peaks(request, params):
        answer = core.handle_request(request, retimer, model, params, measured, 0.0)
        assert answer.success, answer.message
        return answer.qd, answer.qdd

    # parameters not set (0): the YAML's 0.1
    v, a = _ratios(*peaks(req, PARAMS), 0.1, 0.1)
    assert v <= 1 + 1e-6 and a <= 1 + 1e-6 and max(v, a) >= 0.99
    # a parameter set wins over the YAML
    params = dict(PARAMS, default_velocity_scaling_factor=0.5, default_acceleration_scaling_factor=0.5)
    v, a = _ratios(*peaks(req, params), 0.5, 0.5)
    assert v <= 1 + 1e-6 and a <= 1 + 1e-6 and max(v, a) >= 0.99
    # the request wins over both
    fast = SimpleNamespace(**{**vars(req), "velocity_scaling": 1.0, "acceleration_scaling": 1.0})
    v, a = _ratios(*peaks(fast, params), 1.0, 1.0)
    assert v <= 1 + 1e-6 and a <= 1 + 1e-6 and max(v, a) >= 0.99


def _csv(path, rows, names=UR):
    return waypoint_csv(path, rows, names=names)


def test_cli_scales_default_to_the_yaml_and_the_options_win(tmp_path, capsys):
    limits = str(_limits_yaml(tmp_path / "lim.yaml"))
    wp = _csv(tmp_path / "wp.csv", [Q0, Q1])
    out_csv = tmp_path / "t.csv"
    base = ["retime", "--urdf", "ur5", "--waypoints", wp, "--out", str(out_csv), "--dt", "0.002",
            "--joint-limits", limits]
    code, out, err = _run(capsys, *base)
    assert code == 0, err
    data = np.loadtxt(out_csv, delimiter=",", skiprows=1)
    v, a = _ratios(data[:, 2::4], data[:, 3::4], 0.1, 0.1)
    assert v <= 1 + 1e-6 and a <= 1 + 1e-6 and max(v, a) >= 0.99
    code, out, err = _run(capsys, *base, "--velocity-scale", "0.5", "--acceleration-scale", "0.5")
    assert code == 0, err
    data = np.loadtxt(out_csv, delimiter=",", skiprows=1)
    v, a = _ratios(data[:, 2::4], data[:, 3::4], 0.5, 0.5)
    assert v <= 1 + 1e-6 and a <= 1 + 1e-6 and max(v, a) >= 0.99


# ------------------------------------------------------------------ 3. start / end velocity along the path
def _direction():
    d = np.subtract(Q1, Q0)
    return d / np.linalg.norm(d)


def _direction_text():
    return ", ".join(f"{j} {x:.4g}" for j, x in zip(UR, _direction()))


@pytest.mark.parametrize("pan", [-0.1, -0.5])
def test_a_backward_start_velocity_is_refused_naming_the_joint_and_the_path_direction(ur5_moveit, pan):
    model, retimer = ur5_moveit
    v = np.zeros(6)
    v[0] = pan
    res = retimer.retime(np.array([Q0, Q1]), start_velocity=v, options=RetimeOptions(velocity_scale=1.0))
    assert res.status == RetimeStatus.INVALID_REQUEST
    msg = res.message
    assert msg.startswith("start_velocity: joint(s) ['shoulder_pan_joint'] disagree with the path direction "
                          "at waypoint 0") and "backwards" in msg and _direction_text() in msg


def test_start_and_end_velocity_must_be_parallel_to_the_end_segments(ur5_moveit):
    model, retimer = ur5_moveit
    wp = np.array([Q0, Q1])
    d = _direction()
    opts = RetimeOptions(velocity_scale=1.0, acceleration_scale=1.0)
    # 0.2 rad/s along the path, plus 0.01 rad/s on wrist_2 (which does not move): 0.05 of the norm, refused
    v = 0.2 * d
    v[4] += 0.01
    res = retimer.retime(wp, end_velocity=v, options=opts)
    assert res.status == RetimeStatus.INVALID_REQUEST
    assert res.message.startswith("end_velocity: joint(s) ['wrist_2_joint'] disagree with the path direction at "
                                  "waypoint 1") and "not parallel" in res.message
    # within 1e-3 of the norm: accepted, and the trajectory starts / ends at exactly that velocity
    v = 0.2 * d
    v[4] += 0.5e-3 * 0.2
    res = retimer.retime(wp, start_velocity=v, end_velocity=0.1 * d, options=opts)
    assert res.success, res.message
    np.testing.assert_allclose(res.qd[0], v, atol=1e-9)
    np.testing.assert_allclose(res.qd[-1], 0.1 * d, atol=1e-9)


def test_cli_and_service_refuse_a_backward_start_velocity(ur5_moveit, tmp_path, capsys):
    wp = _csv(tmp_path / "wp.csv", [Q0, Q1])
    code, out, err = _run(capsys, "retime", "--urdf", "ur5", "--waypoints", wp, "--out", str(tmp_path / "t.csv"),
                          "--start-velocity", "shoulder_pan_joint=-0.1")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "['shoulder_pan_joint'] disagree with the path direction" in err
    assert json.loads(out.strip().splitlines()[-1])["status"] == "invalid_request"
    model, retimer = ur5_moveit
    req = SimpleNamespace(path=SimpleNamespace(joint_names=list(UR), points=[
        SimpleNamespace(positions=list(Q0)), SimpleNamespace(positions=list(Q1))]),
        velocity_scaling=0.0, acceleration_scaling=0.0, torque_margin=0.0, path_tolerance=0.0,
        sample_period=0.0, jerk_scaling=0.0, gridpoints=0, start_velocity=[-0.1, 0, 0, 0, 0, 0], end_velocity=[])
    answer = core.handle_request(req, retimer, model, PARAMS, core.MeasuredPositions(UR), 0.0)
    assert not answer.success
    assert answer.message.startswith("start_velocity: joint(s) ['shoulder_pan_joint'] disagree")


# ------------------------------------------------------------------ 4. duplicate joint names
def test_service_names_a_duplicated_joint(ur5_moveit):
    model, retimer = ur5_moveit
    req = SimpleNamespace(path=SimpleNamespace(joint_names=["elbow_joint", "elbow_joint"], points=[
        SimpleNamespace(positions=[1.57, 1.57]), SimpleNamespace(positions=[1.2, 1.2])]),
        velocity_scaling=0.0, acceleration_scaling=0.0, torque_margin=0.0, path_tolerance=0.0,
        sample_period=0.0, jerk_scaling=0.0, gridpoints=0, start_velocity=[], end_velocity=[])
    answer = core.handle_request(req, retimer, model, PARAMS, core.MeasuredPositions(UR), 0.0)
    assert not answer.success
    assert answer.message == "joint_names: joint 'elbow_joint' appears twice"


def test_cli_names_a_duplicated_header_column(tmp_path, capsys):
    names = UR[:2] + ["elbow_joint"] + UR[2:]
    wp = _csv(tmp_path / "wp.csv", [Q0[:3] + Q0[2:], Q1[:3] + Q1[2:]], names=names)
    code, out, err = _run(capsys, "retime", "--urdf", "ur5", "--waypoints", wp, "--out", str(tmp_path / "t.csv"))
    assert code == 1 and out == ""
    assert err.strip() == (f"robot-dynamics retime: error: --waypoints '{wp}': joint 'elbow_joint' appears twice "
                           "in the header (columns 2 and 3, counted from 0)")


# ------------------------------------------------------------------ 6. bare config names, the UR10
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_ur10_is_a_bundled_robot_with_its_config_limits():
    import xml.etree.ElementTree as ET

    from robot_dynamics_ros import robots

    entry = robots.resolve("ur10")
    assert entry.path.name == "ur10_robot.urdf" and entry.path.is_file()
    limits = yaml.safe_load((ROOT / "config" / "ur10_joint_limits.yaml").read_text())["joint_limits"]
    found = robots.bundled_joint_limits("ur10")
    assert found is not None and yaml.safe_load(open(found).read())["joint_limits"] == limits
    model = RobotModel.from_urdf(entry.path, joint_limits=found)
    urdf = {j.get("name"): j.find("limit") for j in ET.parse(entry.path).getroot().findall("joint")
            if j.get("type") in ("revolute", "continuous", "prismatic")}
    assert list(model.joint_names) == UR
    for j in UR:
        i = model.index[j]
        assert model.effort_limit[i] == float(urdf[j].get("effort"))
        assert model.velocity_limit[i] == limits[j]["max_velocity"]
        assert model.jerk_limit[i] == limits[j]["max_jerk"]


def test_motor_limits_bare_name_is_looked_up_in_config_like_joint_limits(tmp_path, capsys, monkeypatch):
    rules = yaml.safe_load((ROOT / "config" / "ur10_motor_limits.yaml").read_text())["motor_limits"]
    wp = _csv(tmp_path / "wp.csv", [Q0, Q1])
    monkeypatch.chdir(tmp_path)  # no ur10_motor_limits.yaml here: only config/ has one
    code, out, err = _run(capsys, "retime", "--urdf", "ur10", "--waypoints", wp, "--out", "t.csv",
                          "--motor-limits", "ur10_motor_limits.yaml", "--dt", "0.001")
    assert code == 0, err
    motor = json.loads(out.strip().splitlines()[-1])["motor_limits"]
    data = np.loadtxt(tmp_path / "t.csv", delimiter=",", skiprows=1)
    tau = data[:, 4::4]
    for k, j in enumerate(UR):
        # the output's own torques (its RMS by the trapezoid rule over time) within the file's rules
        assert np.abs(tau[:, k]).max() <= rules[j]["peak_torque"] * (1 + 1e-6)
        rms = np.sqrt(np.trapezoid(tau[:, k] ** 2, data[:, 0]) / data[-1, 0])
        assert rms <= rules[j]["rated_torque"] * (1 + 1e-3)
        assert motor[j]["rms_torque"] == pytest.approx(rms, rel=1e-2)
    # the service's motor_limits_path takes a bare name the same way
    options = core.options_from_request(SimpleNamespace(
        velocity_scaling=0.0, acceleration_scaling=0.0, torque_margin=0.0, path_tolerance=0.0, sample_period=0.0,
        jerk_scaling=0.0, gridpoints=0), dict(PARAMS, motor_limits_path="ur10_motor_limits.yaml"))
    assert yaml.safe_load(open(options.motor_limits).read())["motor_limits"] == rules


def test_joint_limits_entries_for_joints_the_urdf_lacks_are_ignored_with_a_warning(tmp_path):
    """A MoveIt joint_limits.yaml written for the arm and its gripper, used with the arm's URDF: the gripper
    entry is ignored (MoveIt does the same) and named in one warning; the arm's entries apply; --strict
    refuses."""
    import xml.etree.ElementTree as ET

    urdf = str(ROBOTS["ur5"].path)
    names = [j.get("name") for j in ET.parse(urdf).getroot().iter("joint") if j.get("type") != "fixed"]
    path = tmp_path / "joint_limits.yaml"
    path.write_text(yaml.safe_dump({"joint_limits": {
        names[1]: {"has_acceleration_limits": True, "max_acceleration": 2.5},
        "gripper_finger_joint": {"has_velocity_limits": True, "max_velocity": 1.0}}}))
    model = RobotModel.from_urdf(urdf, joint_limits=str(path))
    assert model.acceleration_limit[model.index[names[1]]] == 2.5
    assert [w for w in model.warnings if "gripper_finger_joint" in w and "ignored" in w and str(path) in w]
    with pytest.raises(UserError, match="gripper_finger_joint"):
        RobotModel.from_urdf(urdf, joint_limits=str(path), strict=True)


def test_a_node_logs_what_the_lenient_loader_accepted(tmp_path):
    """A node given such a joint_limits file logs the same warning the CLI prints (once, at load)."""
    from robot_dynamics_ros.nodes.model_source import ModelLoader
    from robot_dynamics_ros.nodes.parameters import robot_source_params

    path = tmp_path / "joint_limits.yaml"
    path.write_text(yaml.safe_dump({"joint_limits": {"gripper_finger_joint": {"has_velocity_limits": True,
                                                                              "max_velocity": 1.0}}}))
    lines, models = [], []
    logger = SimpleNamespace(warning=lines.append, info=lines.append, error=lines.append)
    node = SimpleNamespace(get_logger=lambda: logger)
    params = {s.name: s.default for s in robot_source_params()}
    params.update(urdf_path="ur5", joint_limits_path=str(path))
    ModelLoader(node, lambda model, label: models.append(label), log=None, params=params)
    assert len(models) == 1
    assert [line for line in lines if "gripper_finger_joint" in line and "ignored" in line], lines


def test_a_joint_with_zero_urdf_limits_that_the_path_does_not_move():
    """romeo.urdf gives its hands velocity="0" effort="0": a path that leaves them still is retimed, and
    their zero limits count 0 in peak_fraction (they raised ZeroDivisionError in the report)."""
    from robot_dynamics_ros.robots import example_robot_data_urdfs

    urdf = next(p for p in example_robot_data_urdfs() if p.name == "romeo.urdf")
    model = RobotModel.from_urdf(str(urdf))
    hands = [model.index[j] for j in ("LHand", "RHand")]
    assert (model.velocity_limit[hands] == 0).all() and (model.effort_limit[hands] == 0).all()
    lo = np.where(np.isfinite(model.lower), model.lower, -1.0)
    hi = np.where(np.isfinite(model.upper), model.upper, 1.0)
    start = (lo + hi) / 2
    goal = start + 0.1 * (hi - lo) / 2
    goal[hands] = start[hands]
    res = Retimer(model).retime(np.array([start, goal]))
    assert res.success, res.message
    assert np.abs(res.qd[:, hands]).max() == 0.0
    assert all(v is None or np.isfinite(v) for v in res.peak_fraction.values()), res.peak_fraction
