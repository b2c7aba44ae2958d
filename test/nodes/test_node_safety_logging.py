"""Rate-limited logging keeps distinct reasons apart: each distinct rejection reason (code, field, joint;
a description's kind of refusal) is logged at least once per period. ROS-free (no executor)."""
from __future__ import annotations

import threading

import numpy as np

from robot_dynamics_testing.reference import ProbeRobot
from robot_dynamics_ros.control.gravity_compensator import GravityCompensator, GravitySettings
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.nodes.diagnostics import RateLimitedLog
from robot_dynamics_ros.nodes.model_source import ModelLoader, model_from_text

PANDA = ProbeRobot.panda()


class Lines:
    def __init__(self):
        self.lines: list[str] = []

    def __getattr__(self, level):
        return lambda text, *a, **k: self.lines.append(text)


def _core():
    model = RobotModel.from_urdf(PANDA.urdf, held_joints=dict(PANDA.held_joints))
    return GravityCompensator(model, GravitySettings(), list(model.joint_names))


def test_implausible_position_and_velocity_are_both_logged_within_one_period():
    core = _core()
    names = list(core.model.joint_names)
    q = np.array(PANDA.base_pose)
    log = RateLimitedLog(Lines(), period=100.0, clock=lambda: 0.0)
    far = q.copy()
    far[0] = 50.0                                  # 50 rad: beyond any limit + margin
    fast = np.zeros(len(names))
    fast[1] = 1e6                                   # rad/s
    keys = []
    for pos, vel in ((far, fast * 0), (q, fast), (far, fast * 0), (q, fast)):
        rej = core.mapper.update(names, pos.tolist(), vel.tolist(), arrival_ns=1)
        assert rej is not None and rej.code.name == "IMPLAUSIBLE", rej
        keys.append(rej.key)
        log.warning(rej.key, str(rej))
    lines = log._logger.lines
    assert len(lines) == 2, lines                   # one per distinct reason, the repeats suppressed
    assert "position['panda_joint1']" in lines[0] and "velocity['panda_joint2']" in lines[1]
    assert keys[0] != keys[1] and keys[0] == keys[2] and keys[1] == keys[3]


def _refusal(text):
    try:
        model_from_text(text)
    except Exception as exc:  # noqa: BLE001 - the refusal text is what the loader logs
        return " ".join(str(exc).split())[:300]
    raise AssertionError("accepted")


def test_distinct_description_refusals_are_each_logged():
    doctype = _refusal('<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "b">]><robot name="x"/>')
    no_robot = _refusal('<?xml version="1.0"?><notarobot name="x"/>')
    loader = ModelLoader.__new__(ModelLoader)     # only the delivery step's state, no node
    lines = Lines()
    loader._log = RateLimitedLog(lines, period=100.0, clock=lambda: 0.0)
    loader._lock = threading.Lock()
    loader.subscription = None
    for error in (no_robot, doctype, no_robot):
        loader._result = (None, error)
        loader._deliver()
    assert len(lines.lines) == 2, lines.lines
    assert "DOCTYPE" in lines.lines[1] or "ENTITY" in lines.lines[1], lines.lines


def test_log_keys_stay_bounded():
    log = RateLimitedLog(Lines(), period=100.0, clock=lambda: 0.0)
    for i in range(10 * RateLimitedLog.MAX_KEYS):
        log.warning(f"k{i}", "x")
    assert len(log._last) <= RateLimitedLog.MAX_KEYS
