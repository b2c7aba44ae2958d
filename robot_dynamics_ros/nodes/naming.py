"""Parameters of the robot source as the retiming service and the simulator declare them: the shared
:func:`robot_dynamics_ros.nodes.common.robot_source_params` with relative names, and config file names
resolved through the package's share directory."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from robot_dynamics_ros.nodes import common


def source_params() -> list[common.ParamSpec]:
    """:func:`~robot_dynamics_ros.nodes.common.robot_source_params` with a relative description topic
    (``robot_description``: a namespace or remap applies to it)."""
    out = []
    for spec in common.robot_source_params():
        if spec.name == "robot_description_topic" and str(spec.default).startswith("/"):
            spec = dataclasses.replace(spec, default=str(spec.default).lstrip("/"))
        out.append(spec)
    return out


def loader_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the node's parameter values for :class:`~robot_dynamics_ros.nodes.common.ModelLoader`,
    with ``joint_limits_path`` resolved by :func:`robot_dynamics_ros.share.resolve_config_file` (a bare
    file name such as ``panda_joint_limits.yaml`` is the package's ``config/`` file)."""
    from robot_dynamics_ros.share import resolve_config_file

    out = dict(params)
    out["joint_limits_path"] = resolve_config_file(out.get("joint_limits_path", ""))
    return out
