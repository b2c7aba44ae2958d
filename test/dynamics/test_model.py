"""RobotModel: joint order, mimic map, held joints, payload/gravity versioning, limits.

Expected values come from the URDF files themselves (read here with the standard library's XML parser as
an independent check of our parser) and from Pinocchio's own parser.
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS


def test_panda_limits_match_the_urdf_text():
    path = ROBOTS["panda"].path
    m = RobotModel.from_urdf(path, held_joints=ROBOTS["panda"].held_joints)
    root = ET.parse(path).getroot()
    for j in root.findall("joint"):
        name = j.get("name")
        if name in m.index:
            lim = j.find("limit")
            i = m.index[name]
            assert m.lower[i] == float(lim.get("lower")) and m.upper[i] == float(lim.get("upper"))
            assert m.velocity_limit[i] == float(lim.get("velocity"))
            assert m.effort_limit[i] == float(lim.get("effort"))
    assert np.all(np.isinf(m.acceleration_limit))


def test_joint_order_is_urdf_tree_order_and_source_can_be_text():
    path = ROBOTS["ur5"].path
    from_file = RobotModel.from_urdf(path)
    from_text = RobotModel.from_urdf(path.read_text())
    assert from_file.joint_names == from_text.joint_names == (
        "shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint", "wrist_3_joint")
    assert from_text.urdf_xml == path.read_text()
    assert dict(from_file.index) == {jn: i for i, jn in enumerate(from_file.joint_names)}


def test_mimic_map_follows_the_urdf():
    m = RobotModel.from_urdf(ROBOTS["baxter"].path)
    # baxter.urdf: r/l_gripper_r_finger_joint mimic the l_finger joint with multiplier -1
    assert "l_gripper_r_finger_joint" not in m.joint_names
    assert "l_gripper_r_finger_joint" in m.moving_joint_names
    q = np.zeros(m.n)
    q[m.index["l_gripper_l_finger_joint"]] = 0.01
    qm = dict(zip(m.moving_joint_names, m.expand(q)))
    assert qm["l_gripper_r_finger_joint"] == pytest.approx(-0.01)
    G = m.mimic_matrix
    assert G.shape == (len(m.moving_joint_names), m.n)
    # Pinocchio's own mimic parser agrees on the number of independent coordinates
    assert pin.buildModelFromUrdf(str(ROBOTS["baxter"].path), mimic=True).nv == m.n


def test_continuous_joints_unbounded_and_random_configuration_in_limits():
    m = RobotModel.from_urdf(ROBOTS["kinova"].path)
    cont = [i for i, t in enumerate(m.joint_types) if t == "continuous"]
    assert len(cont) == 3 and all(math.isinf(m.lower[i]) and math.isinf(m.upper[i]) for i in cont)
    q = m.random_configuration(np.random.default_rng(0), 500)
    lo = np.where(np.isfinite(m.lower), m.lower, -np.pi)
    hi = np.where(np.isfinite(m.upper), m.upper, np.pi)
    assert np.all(q >= lo) and np.all(q <= hi)
    assert np.all(m.neutral() >= m.lower) and np.all(m.neutral() <= m.upper)


def test_versions_are_unique_and_settings_validated():
    m = RobotModel.from_urdf(ROBOTS["planar_2r"].path)
    seen = [m.version]
    m = m.with_settings(gravity=(0, 0, -9.8))
    seen.append(m.version)
    loaded = m.with_settings(payload=("link2", 0.5))
    seen.append(loaded.version)
    assert loaded.payload.link == "link2" and loaded.payload.mass == 0.5 and m.payload is None
    cleared = loaded.with_settings(payload=None)
    seen.append(cleared.version)
    assert cleared.payload is None and loaded.payload is not None
    other = m.with_settings(gravity=(0, 0, -1.0))
    seen.append(other.version)
    assert len(set(seen)) == len(seen)  # every model, copies included, has its own version
    assert m.gravity[2] == -9.8 and other.gravity[2] == -1.0
    g = m.gravity
    g[2] = 0.0  # a copy: the model is unchanged
    assert m.gravity[2] == -9.8
    for name in ("set_payload", "clear_payload"):
        assert not hasattr(m, name)
    with pytest.raises(AttributeError):
        m.gravity = (0, 0, -1.0)
    with pytest.raises(AttributeError):
        m.payload = None
    v = m.version
    with pytest.raises(UserError, match="payload link 'nope'"):
        m.with_settings(payload=("nope", 1.0))
    with pytest.raises(UserError, match="payload mass -1"):
        m.with_settings(payload=("link2", -1.0))
    with pytest.raises(UserError, match="triangle"):
        m.with_settings(payload=("link2", 1.0, (0.0, 0.0, 0.0), np.diag([0.01, 0.01, 0.05])))
    with pytest.raises(UserError, match="gravity"):
        m.with_settings(gravity=(0, 0, float("nan")))
    assert m.version == v and m.payload is None and m.gravity[2] == -9.8


def test_held_joint_errors():
    with pytest.raises(UserError, match="held joint 'base_to_plane' is of type 'fixed'"):
        RobotModel.from_urdf(ROBOTS["planar_2r"].path, held_joints={"base_to_plane": 0.0})
    with pytest.raises(UserError, match="no actuated joints"):
        RobotModel.from_urdf(ROBOTS["planar_2r"].path, held_joints={"joint1": 0.0, "joint2": 0.0})


def _chain(n: int) -> str:
    parts = ['<robot name="chain"><link name="l0"/>']
    for i in range(1, n + 1):
        parts.append(f'<link name="l{i}"><inertial><origin xyz="0 0 0.05"/><mass value="1"/>'
                     '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>'
                     f'<joint name="j{i}" type="revolute"><origin xyz="0 0 0.1"/><parent link="l{i - 1}"/>'
                     f'<child link="l{i}"/><axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="10" velocity="2"/>'
                     '</joint>')
    return "".join(parts) + "</robot>"


def _in_fresh_process(code: str) -> dict:
    """Run ``code`` in a new interpreter (a clean heap: RSS growth is not hidden by memory freed by other
    tests) and return the dict it prints as JSON on its last line."""
    import json
    import subprocess
    import sys

    prelude = ("import json, resource, time\n"
               "def rss():\n    return int(open('/proc/self/statm').read().split()[1]) * 4096\n"
               "def peak():\n    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n")
    import os

    # glibc's top pad (the Makefile sets MALLOC_TOP_PAD_ for benchmarks) would add up to 64 MB to any growth
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_TOP_PAD_"}
    out = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120,
                         check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


CHAIN_SOURCE = (f"import sys\nsys.path[:0] = [{str(Path(__file__).parent.parent)!r}, {str(Path(__file__).parent)!r}]\n"
                "from test_model import _chain\n")


def test_a_1000_joint_chain_is_refused_before_allocating():
    from robot_dynamics_ros.model import MAX_ENGINE_BYTES

    r = _in_fresh_process(CHAIN_SOURCE + """
from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.model import RobotModel
text = _chain(1000)
p0 = peak(); t0 = time.perf_counter()
try:
    RobotModel.from_text(text)
    msg = None
except UserError as exc:
    msg = str(exc)
print(json.dumps({"msg": msg, "seconds": time.perf_counter() - t0, "grown": peak() - p0}))
""")
    assert r["msg"] is not None and "1000 moving joints" in r["msg"] and "MAX_ENGINE_BYTES" in r["msg"]
    assert r["seconds"] < 5.0
    assert r["grown"] < MAX_ENGINE_BYTES / 10  # not one Data of 33 GiB, nor any part of it


def test_engine_memory_estimate_matches_pinocchio_data():
    # the cap rests on estimated_engine_bytes: check it against the resident growth of one Data (nv = 120)
    from robot_dynamics_ros.model import estimated_engine_bytes

    r = _in_fresh_process(CHAIN_SOURCE + """
import pinocchio as pin
pm = pin.buildModelFromXML(_chain(120))
r0 = rss()
data = pm.createData()
print(json.dumps({"grown": rss() - r0}))
""")
    assert 0.5 * estimated_engine_bytes(120) < r["grown"] < 1.5 * estimated_engine_bytes(120)


def test_the_engine_keeps_one_pinocchio_data(monkeypatch):
    from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics

    created = []
    create = pin.Model.createData
    monkeypatch.setattr(pin.Model, "createData", lambda self: created.append(1) or create(self))
    m = RobotModel.from_text(_chain(30))
    eng = PinocchioDynamics(m)
    data = eng.data
    eng.model = m.with_settings(gravity=(0, 0, -1.62))  # a new version: gravity refreshed, Data kept
    q = np.zeros(m.n)
    q[0] = np.pi / 2  # the chain horizontal: the last joint holds its link, 1 kg at 0.05 m, against 1.62 m/s²
    np.testing.assert_allclose(abs(eng.gravity(q)[-1]), 1.0 * 1.62 * 0.05, rtol=0, atol=1e-12)
    assert eng.data is data and len(created) == 1
