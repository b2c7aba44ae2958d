"""nodes/ helpers (parameters, diagnostics, runtime) the nodes rely on: parameter specs, rate-limited log, latency statistics."""
from __future__ import annotations

import math

import numpy as np
import pytest
import rclpy
from rclpy.exceptions import InvalidParameterValueException
from rclpy.parameter import Parameter

from robot_dynamics_ros.nodes.diagnostics import LatencyStats, RateLimitedLog
from robot_dynamics_ros.nodes.parameters import ParamSpec, resolve_robot_source
from robot_dynamics_ros.errors import UserError


class FakeLogger:
    def __init__(self):
        self.lines = []

    def warning(self, text):
        self.lines.append(("W", text))

    def error(self, text):
        self.lines.append(("E", text))

    def info(self, text):
        self.lines.append(("I", text))


def test_rate_limited_log_suppresses_per_key_and_reports_the_count():
    t = [0.0]
    log = FakeLogger()
    rl = RateLimitedLog(log, period=1.0, clock=lambda: t[0])
    assert rl.warning("nan", "bad 1")
    for i in range(5):
        t[0] += 0.1
        assert not rl.warning("nan", f"bad {i}")
    assert rl.error("other", "different key logs at once")
    t[0] = 1.2
    assert rl.warning("nan", "bad again")
    assert log.lines == [("W", "bad 1"), ("E", "different key logs at once"),
                         ("W", "bad again (5 similar suppressed)")]


def test_param_spec_checks_name_the_parameter_and_value():
    g = ParamSpec("gravity", [0.0, 0.0, -9.81], "m/s²", length=3, range=(-100.0, 100.0))
    assert g.check([0.0, 0.0, -9.81]) is None
    assert "'gravity'" in g.check([0.0, 9.81]) and "3 entries" in g.check([0.0, 9.81])
    assert "within [-100.0, 100.0]" in g.check([0.0, 0.0, 1e6])
    assert g.check([0.0, 0.0, math.nan]) is not None
    m = ParamSpec("mass", 0.0, "kg", range=(0.0, 10.0))
    assert m.check(-1.0) is not None and m.check(math.nan) is not None and m.check(3.0) is None
    c = ParamSpec("integrator", "implicitfast", "", choices=("Euler", "implicitfast"))
    assert "one of" in c.check("rk45")
    assert ParamSpec("x", 1.0, "").check(math.inf) is not None


def test_latency_stats_percentiles():
    s = LatencyStats(size=100)
    assert math.isnan(s.summary()["p50_us"])
    for v in np.arange(1, 201) * 1e-6:      # the ring keeps the last 100: 101..200 us
        s.add(v)
    out = s.summary()
    assert out["max_us"] == pytest.approx(200.0) and out["p50_us"] == pytest.approx(150.5)
    assert s.count == 200


def test_robot_source_resolution():
    src, held, label = resolve_robot_source({"urdf_path": "panda", "held_joint_names": [],
                                             "held_joint_positions": []})
    assert src.endswith("panda.urdf") and held == {"panda_finger_joint1": 0.02, "panda_finger_joint2": 0.02}
    src, held, _ = resolve_robot_source({"urdf_path": "", "robot_description": "<robot name='a'/>",
                                         "held_joint_names": ["j"], "held_joint_positions": [0.5]})
    assert src.startswith("<robot") and held == {"j": 0.5}
    src, held, label = resolve_robot_source({"urdf_path": "", "robot_description": "",
                                             "robot_description_topic": "/rd"})
    assert src is None and label == "/rd"
    with pytest.raises(UserError, match="held_joint_names has 1 entries but held_joint_positions has 0"):
        resolve_robot_source({"held_joint_names": ["j"], "held_joint_positions": []})


def test_bad_parameter_override_stops_the_node_with_a_clear_error():
    from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        # the descriptor's range is enforced by rclpy itself at declaration
        with pytest.raises(InvalidParameterValueException, match=r"state_timeout out of range"):
            GravityCompensationNode(context=ctx, parameter_overrides=[
                Parameter("urdf_path", value="panda"), Parameter("state_timeout", value=-1.0)])
        # what the descriptor cannot express (array length) is checked by the spec
        with pytest.raises(ValueError, match=r"parameter 'gravity' = \[0.0, -9.81\]: needs exactly 3"):
            GravityCompensationNode(context=ctx, parameter_overrides=[
                Parameter("urdf_path", value="panda"), Parameter("gravity", value=[0.0, -9.81])])
    finally:
        rclpy.shutdown(context=ctx)


def test_empty_array_overrides_are_accepted(tmp_path):
    """`held_joint_names: []` in a params file (or an empty Parameter) means 'none', not a type error."""
    from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode

    f = tmp_path / "p.yaml"
    f.write_text("gravity_compensation:\n  ros__parameters:\n    urdf_path: ur5\n    held_joint_names: []\n"
                 "    held_joint_positions: []\n    joints: []\n")
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=["x", "--ros-args", "--params-file", str(f)])
    try:
        node = GravityCompensationNode(context=ctx, parameter_overrides=[
            Parameter("held_joint_names", Parameter.Type.STRING_ARRAY, [])])
        assert node.p["held_joint_names"] == [] and node.model.n == 6
        assert node.mapper.command_joints == node.model.joint_names
        node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)


def test_freeze_gc_takes_the_start_up_objects_out_of_every_later_collection():
    """After freeze_gc() a full collection has (almost) nothing old to scan: the objects tracked before
    are in the permanent generation (the 40 ms full collections of a node process, see freeze_gc)."""
    import gc

    from robot_dynamics_ros.nodes.runtime import freeze_gc

    junk = [[i] for i in range(50_000)]   # 50 000 tracked containers, alive across the freeze
    tracked_before = len(gc.get_objects())
    try:
        frozen = freeze_gc()
        assert frozen >= 0.95 * tracked_before      # (gc.collect() first frees the garbage)
        assert len(gc.get_objects()) < 1_000          # what the next full collection would scan
        assert all(gc.is_tracked(x) for x in junk[:10])  # still tracked, only never scanned again
    finally:
        gc.unfreeze()
    assert len(gc.get_objects()) >= 0.95 * tracked_before


def test_middleware_environment_keeps_the_discovery_range_and_defers_to_the_users_set_up(tmp_path):
    """runtime.middleware_environment (issue 25): LOCALHOST becomes rmw_fastrtps' LOCALHOST set-up without
    SHM (the shipped profile, which rmw_fastrtps only leaves untouched under SYSTEM_DEFAULT); SUBNET or
    unset gets Fast DDS's default discovery without SHM; both take their endpoint settings from the profiles
    (readers with a DYNAMIC history, the rest as rmw_fastrtps sets it); nothing changes when the user chose
    the middleware's set-up or another RMW."""
    import xml.etree.ElementTree as ET

    from robot_dynamics_ros.nodes.runtime import LOCALHOST_PROFILE, SUBNET_PROFILE, middleware_environment

    assert middleware_environment({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}, cwd=tmp_path) == {
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT", "FASTDDS_DEFAULT_PROFILES_FILE": str(LOCALHOST_PROFILE),
        "RMW_FASTRTPS_USE_QOS_FROM_XML": "1"}
    for scope in ({}, {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}):
        assert middleware_environment(scope, cwd=tmp_path) == {
            "FASTDDS_DEFAULT_PROFILES_FILE": str(SUBNET_PROFILE), "RMW_FASTRTPS_USE_QOS_FROM_XML": "1"}
    ns = {"d": "http://www.eprosima.com"}
    roots = {path: ET.parse(path).getroot() for path in (LOCALHOST_PROFILE, SUBNET_PROFILE)}
    for root in roots.values():
        rtps = root.find("d:profiles/d:participant[@is_default_profile='true']/d:rtps", ns)
        assert rtps.findtext("d:useBuiltinTransports", namespaces=ns) == "false"
        assert [t.text for t in rtps.findall("d:userTransports/d:transport_id", ns)] == ["robot_dynamics_udpv4"]
        assert [t.findtext("d:type", namespaces=ns) for t in root.findall(
            "d:profiles/d:transport_descriptors/d:transport_descriptor", ns)] == ["UDPv4"]
        for kind in ("reader", "writer"):   # rmw_fastrtps' discovery histories
            assert rtps.findtext(f"d:builtin/d:{kind}HistoryMemoryPolicy", namespaces=ns) == "PREALLOCATED_WITH_REALLOC"
        reader = root.find("d:profiles/d:data_reader[@is_default_profile='true']", ns)
        writer = root.find("d:profiles/d:data_writer[@is_default_profile='true']", ns)
        assert reader.findtext("d:historyMemoryPolicy", namespaces=ns) == "DYNAMIC"
        assert writer.findtext("d:historyMemoryPolicy", namespaces=ns) == "PREALLOCATED_WITH_REALLOC"
        assert writer.findtext("d:qos/d:publishMode/d:kind", namespaces=ns) == "SYNCHRONOUS"
        for endpoint in (reader, writer):
            assert endpoint.findtext("d:qos/d:data_sharing/d:kind", namespaces=ns) == "OFF"
    lh, sub = roots[LOCALHOST_PROFILE], roots[SUBNET_PROFILE]
    assert lh.findtext(".//d:builtin/d:initialPeersList/d:locator/d:udpv4/d:address", namespaces=ns) == "127.0.0.1"
    assert sub.find(".//d:builtin/d:initialPeersList", ns) is None   # Fast DDS's multicast discovery
    for tag in ("data_reader", "data_writer"):   # the two files' endpoint profiles are one set-up
        assert ET.tostring(lh.find(f"d:profiles/d:{tag}", ns)) == ET.tostring(sub.find(f"d:profiles/d:{tag}", ns))
    assert middleware_environment({"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"}, cwd=tmp_path) == {}
    for key, value in [("FASTDDS_DEFAULT_PROFILES_FILE", "/x.xml"), ("FASTDDS_BUILTIN_TRANSPORTS", "SHM"),
                       ("ROS_STATIC_PEERS", "10.0.0.2"), ("RMW_IMPLEMENTATION", "rmw_cyclonedds_cpp"),
                       ("RMW_FASTRTPS_USE_QOS_FROM_XML", "0"), ("RMW_FASTRTPS_PUBLICATION_MODE", "ASYNCHRONOUS")]:
        assert middleware_environment({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", key: value}, cwd=tmp_path) == {}
    (tmp_path / "DEFAULT_FASTDDS_PROFILES.xml").write_text("<dds/>")
    assert middleware_environment({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}, cwd=tmp_path) == {}
