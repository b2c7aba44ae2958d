"""Every node's standard parameter services over DDS, called as ``ros2 param`` calls them: list, describe,
get (all listed names in one request), get types, and set (a run-time value, a read-only one, an
out-of-range one).

Each node class runs in-process on its own rclpy Context with ``urdf_path: panda``; a peer node on the same
context is the client. The values set and the values expected back are chosen here from the parameter
tables (README "Nodes", docs/nodes.md, docs/retiming.md, docs/observer.md), not read from the node's specs.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.srv import (DescribeParameters, GetParameters, GetParameterTypes, ListParameters,
                                SetParameters)
from rclpy.parameter import Parameter

from robot_dynamics_testing.ros_world import RosWorld

pytestmark = pytest.mark.ros


@dataclass(frozen=True)
class Case:
    """One node class and the parameters its set checks use (all DOUBLE unless the value says otherwise).

    settable: (name, new value) accepted at run time.
    read_only: (name, value) refused because the parameter is read-only.
    out_of_range: (name, value) refused because it lies outside the documented range of a scalar.
    invalid: (name, value) outside a set of choices or an array's entry range, which the node's own
        on-set callback checks (the descriptor's range covers scalars only).
    """

    module: str
    cls: str
    node_name: str
    overrides: tuple[tuple[str, object], ...]
    settable: tuple[str, object]
    read_only: tuple[str, object]
    out_of_range: tuple[str, object]
    invalid: tuple[str, object]


CASES = [
    Case("gravity_compensation", "GravityCompensationNode", "gravity_compensation",
         (("crossval_samples", 0),),
         settable=("position_margin", 0.25), read_only=("crossval_samples", 5),
         out_of_range=("velocity_factor", 0.5),             # velocity_factor >= 1
         invalid=("stale_policy", "freeze")),               # hold | zero
    Case("computed_torque", "ComputedTorqueNode", "computed_torque", (),
         settable=("state_timeout", 0.2), read_only=("controller_name", "other_controller"),
         out_of_range=("control_rate", 0.0),                # control_rate > 0 Hz
         invalid=("mode", "open_loop")),                    # feedforward | computed_torque | gravity
    Case("retiming_service", "RetimingServiceNode", "retiming_service", (("warmup", False),),
         settable=("request_deadline", 10.0), read_only=("warmup", True),
         out_of_range=("default_velocity_scaling_factor", 1.5),    # MoveIt scaling factor in (0, 1]
         invalid=("payload.com", [0.0, 0.0, 20.0])),               # a centre of mass 20 m off the link
    Case("simulator", "SimulatorNode", "mujoco_simulator", (),
         settable=("real_time_factor", 0.5), read_only=("timestep", 0.002),
         out_of_range=("publish_rate", 0.0),                 # publish_rate > 0 Hz
         invalid=("gravity", [0.0, 0.0, -200.0])),           # 20 g
    Case("external_torque_observer", "ExternalTorqueObserverNode", "external_torque_observer", (),
         settable=("gain", 80.0), read_only=("wrench_frame", "panda_link0"),
         out_of_range=("release", 1.5),                      # release is a fraction of the threshold
         invalid=("torque_source", "estimated")),            # auto | measured | commanded
]


def _value_msg(value) -> ParameterValue:
    return Parameter("x", value=value).to_parameter_msg().value


def _python(v: ParameterValue):
    return Parameter.from_parameter_msg(ParameterMsg(name="x", value=v)).value


class World(RosWorld):
    """One context: the node under test and a peer that calls its parameter services."""

    def __init__(self, case: Case):
        import importlib

        super().__init__("param_client")
        cls = getattr(importlib.import_module(f"robot_dynamics_ros.nodes.{case.module}"), case.cls)
        params = {"urdf_path": "panda", **dict(case.overrides)}
        self.node = self.add(cls(case.node_name, context=self.ctx,
                                 parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]))
        self.prefix = f"/{self.node.get_name()}"

    def call(self, srv_type, service, request):
        return super().call(srv_type, f"{self.prefix}/{service}", request)

    def names(self) -> list[str]:
        return list(self.call(ListParameters, "list_parameters", ListParameters.Request()).result.names)

    def get(self, names):
        return self.call(GetParameters, "get_parameters", GetParameters.Request(names=list(names))).values

    def set(self, name, value):
        req = SetParameters.Request(parameters=[ParameterMsg(name=name, value=_value_msg(value))])
        (result,) = self.call(SetParameters, "set_parameters", req).results
        return result


@pytest.fixture(scope="module", params=CASES, ids=[c.cls for c in CASES])
def world(request):
    w = World(request.param)
    w.case = request.param
    yield w
    w.close()


def test_list_names_the_node_specs_and_standard_parameters(world):
    names = world.names()
    assert len(names) == len(set(names))
    # Parameters every node of the package declares (README "Main parameters"), plus rclpy's own.
    c = world.case
    for expected in ("urdf_path", "robot_description", "held_joint_names", "held_joint_positions",
                     "joint_limits_path", "friction_path", "use_sim_time",
                     c.settable[0], c.read_only[0], c.out_of_range[0], c.invalid[0]):
        assert expected in names, f"{world.case.cls}: '{expected}' not listed"


def test_get_all_listed_names_in_one_request_returns_a_typed_value_each(world):
    names = world.names()
    values = world.get(names)
    assert len(values) == len(names), f"{world.case.cls}: {len(values)} values for {len(names)} names"
    unset = [n for n, v in zip(names, values) if v.type == ParameterType.PARAMETER_NOT_SET]
    assert unset == [], f"{world.case.cls}: NOT_SET values for {unset}"
    by_name = dict(zip(names, values))
    assert _python(by_name["urdf_path"]) == "panda"
    # Empty array defaults come back as typed empty arrays, not NOT_SET.
    assert by_name["held_joint_names"].type == ParameterType.PARAMETER_STRING_ARRAY
    assert list(by_name["held_joint_names"].string_array_value) == []
    assert by_name["held_joint_positions"].type == ParameterType.PARAMETER_DOUBLE_ARRAY
    assert list(by_name["held_joint_positions"].double_array_value) == []


def test_get_parameter_types_agree_with_get_and_describe(world):
    names = world.names()
    types = list(world.call(GetParameterTypes, "get_parameter_types",
                            GetParameterTypes.Request(names=names)).types)
    values = world.get(names)
    desc = world.call(DescribeParameters, "describe_parameters",
                      DescribeParameters.Request(names=names)).descriptors
    assert len(types) == len(names) == len(desc)
    mismatch = [(n, t, v.type, d.type) for n, t, v, d in zip(names, types, values, desc)
                if not (t == v.type == d.type) or t == ParameterType.PARAMETER_NOT_SET]
    assert mismatch == [], f"{world.case.cls}: (name, get_types, get, describe) disagree: {mismatch}"


def test_every_parameter_is_described(world):
    names = world.names()
    desc = world.call(DescribeParameters, "describe_parameters",
                      DescribeParameters.Request(names=names)).descriptors
    assert [d.name for d in desc] == names
    undescribed = [d.name for d in desc if not d.description.strip()]
    assert undescribed == [], f"{world.case.cls}: no description for {undescribed}"
    by_name = {d.name: d for d in desc}
    assert by_name[world.case.read_only[0]].read_only
    assert not by_name[world.case.settable[0]].read_only


def test_set_a_run_time_parameter_and_get_it_back(world):
    name, value = world.case.settable
    (before,) = world.get([name])
    assert _python(before) != value
    result = world.set(name, value)
    assert result.successful, f"{world.case.cls}: set {name}={value!r} refused: {result.reason}"
    (after,) = world.get([name])
    assert _python(after) == value


def test_set_a_read_only_parameter_is_refused(world):
    name, value = world.case.read_only
    (before,) = world.get([name])
    result = world.set(name, value)
    assert not result.successful, f"{world.case.cls}: read-only {name} accepted {value!r}"
    (after,) = world.get([name])
    assert _python(after) == _python(before)


@pytest.mark.parametrize("which", ["out_of_range", "invalid"])
def test_set_out_of_range_is_refused_with_a_reason_naming_the_parameter(world, which):
    name, value = getattr(world.case, which)
    # a read-only parameter would be refused whatever the value: the value must be what is refused
    (desc,) = world.call(DescribeParameters, "describe_parameters",
                         DescribeParameters.Request(names=[name])).descriptors
    assert not desc.read_only, f"{world.case.cls}: {name} is read-only"
    (before,) = world.get([name])
    result = world.set(name, value)
    assert not result.successful, f"{world.case.cls}: {name}={value!r} accepted"
    assert name in result.reason, f"{world.case.cls}: reason does not name {name}: {result.reason!r}"
    (after,) = world.get([name])
    assert _python(after) == _python(before)


#: parameters read only when the node starts or configures: a run-time set must be refused, not shown
#: by get and then ignored
START_UP_PARAMS = ("urdf_path", "robot_description", "robot_description_topic", "held_joint_names",
                   "held_joint_positions", "joint_limits_path", "friction_path", "joints", "controller_name",
                   "joint_states_topic", "command_topic", "command_joints")


def test_start_up_parameters_are_refused_at_run_time_and_keep_their_value(world):
    names = [n for n in world.names() if n in START_UP_PARAMS]
    assert "urdf_path" in names and "robot_description" in names
    before = dict(zip(names, world.get(names)))
    values = {"urdf_path": "/etc/passwd", "robot_description": "<robot name='x'/>",
              "held_joint_names": ["panda_finger_joint1"], "held_joint_positions": [0.01]}
    for name in names:
        value = values.get(name, "/other")
        if before[name].type == ParameterType.PARAMETER_STRING_ARRAY and name not in values:
            value = ["other"]
        result = world.set(name, value)
        assert not result.successful, f"{world.case.cls}: run-time set of {name}={value!r} accepted"
        assert "read-only" in result.reason, result.reason
        (after,) = world.get([name])
        assert _python(after) == _python(before[name]), f"{world.case.cls}: {name} changed"
