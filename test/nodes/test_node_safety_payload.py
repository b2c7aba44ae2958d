"""Payload changes through set_parameters: the same replan warning as ~/set_payload, and a mass without a
link is refused (it would be accepted and have no effect). Through the parameter services."""
from __future__ import annotations

import numpy as np
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.srv import SetParameters
from rclpy.parameter import Parameter

from robot_dynamics_ros.nodes.gravity_compensation import GravityCompensationNode
from robot_dynamics_testing.ros_world import RosWorld


class Lines:
    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def __getattr__(self, level):
        return lambda text, *a, **k: self.lines.append((level, text))


def _set(world, node, **values):
    req = SetParameters.Request(parameters=[
        ParameterMsg(name=k.replace("__", "."), value=Parameter("x", value=v).to_parameter_msg().value)
        for k, v in values.items()])
    return world.call(SetParameters, f"/{node.get_name()}/set_parameters", req).results


def test_payload_mass_set_by_parameter_warns_and_mass_without_link_is_refused():
    with RosWorld("param_client") as w:
        node = w.add(GravityCompensationNode("gravity_compensation", context=w.ctx, parameter_overrides=[
            Parameter("urdf_path", value="panda"), Parameter("crossval_samples", value=0)]))
        lines = Lines()
        node.get_logger = lambda: lines
        # a mass with no link: refused, naming both parameters; nothing changes
        (res,) = _set(w, node, payload__mass=5.0)
        assert not res.successful
        assert "payload.mass" in res.reason and "payload.link" in res.reason
        assert node.get_parameter("payload.mass").value == 0.0 and node.model.payload is None
        # link first, then 5 kg: accepted, the model carries it, and the replan warning is logged once
        (res,) = _set(w, node, payload__link="panda_link8")
        assert res.successful and not [t for lv, t in lines.lines if lv == "warning"]   # still 0 kg
        (res,) = _set(w, node, payload__mass=5.0)
        assert res.successful, res.reason
        assert node.model.payload is not None
        warnings = [t for lv, t in lines.lines if lv == "warning"]
        assert len(warnings) == 1 and "0 kg" in warnings[0] and "5 kg" in warnings[0], warnings
        assert node.diag.values["payload_change"].startswith("WARN")
        # +4 % : below the 10 % threshold, no further warning
        (res,) = _set(w, node, payload__mass=5.2)
        assert res.successful and len([t for lv, t in lines.lines if lv == "warning"]) == 1
        # clearing the link alone removes the payload (accepted, warned: 5.2 kg -> none)
        (res,) = _set(w, node, payload__link="")
        assert res.successful and node.model.payload is None
        assert len([t for lv, t in lines.lines if lv == "warning"]) == 2
        assert np.isclose(node.get_parameter("payload.mass").value, 5.2)
