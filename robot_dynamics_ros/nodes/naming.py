"""The robot-source parameter values the retiming service and the simulator hand to
:class:`~robot_dynamics_ros.nodes.model_source.ModelLoader`, with config file names resolved through the
package's share directory."""
from __future__ import annotations

from typing import Any, Mapping

from robot_dynamics_ros.share import resolve_config_file


def loader_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the node's parameter values for :class:`~robot_dynamics_ros.nodes.model_source.ModelLoader`,
    with ``joint_limits_path`` resolved by :func:`robot_dynamics_ros.share.resolve_config_file` (a bare
    file name such as ``panda_joint_limits.yaml`` is the package's ``config/`` file)."""
    out = dict(params)
    out["joint_limits_path"] = resolve_config_file(out.get("joint_limits_path", ""))
    return out
