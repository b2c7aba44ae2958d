"""``robot-dynamics replay``'s offline reference: the command the node should publish for each replayed input,
computed by the node's own ROS-free control core (a separate instance with the running node's parameter
values), so replay compares the node over DDS with its core and holds no control law of its own."""
from __future__ import annotations

from typing import Any

import numpy as np


def _settings_for(settings_class, params: dict[str, Any], joint_names) -> Any:
    """``settings_class`` (a frozen settings dataclass of a control core) from the node's parameter values:
    every field whose name is a parameter takes its value; ``gains`` (computed torque) from the
    ``gains.<joint>.<kind>`` parameters; the other fields keep their defaults."""
    import dataclasses

    values: dict[str, Any] = {}
    for f in dataclasses.fields(settings_class):
        if f.name == "gains":
            gains: dict[str, dict[str, float]] = {}
            for j in joint_names:
                for kind in ("p", "d", "kp", "kd"):
                    key = f"gains.{j}.{kind}"
                    if key in params:
                        gains.setdefault(j, {})[kind] = float(params[key])
            values["gains"] = gains
        elif f.name in params:
            values[f.name] = params[f.name]
    return settings_class(**values)


def _model_for(model, params: dict[str, Any]):
    """``model`` with the node's ``gravity`` and ``payload.*`` parameters (when it has them), as a copy."""
    payload = None
    link = params.get("payload.link") or ""
    if link:
        a = list(params.get("payload.inertia", [0.0] * 6))
        inertia = np.array([[a[0], a[1], a[2]], [a[1], a[3], a[4]], [a[2], a[4], a[5]]])
        payload = (link, float(params.get("payload.mass", 0.0)), list(params.get("payload.com", [0.0] * 3)),
                   inertia)
    gravity = params.get("gravity")
    return model.with_settings(gravity=list(gravity) if gravity is not None else None, payload=payload)


class CoreRecomputation:
    """Offline, the command the node should publish for each joint state: the node's own ROS-free control
    core (:class:`~robot_dynamics_ros.control.gravity_compensator.GravityCompensator` or
    :class:`~robot_dynamics_ros.control.computed_torque.ComputedTorqueController`), a separate instance with
    the node's parameter values, fed the records in bag order at their bag time (arrival = now = the bag
    time, as ``/clock`` tells the node). Replay holds no control law of its own: what it checks is that
    the node over DDS commands what its core computes from the same inputs (transport, ordering, the
    parameters reaching the node, the trajectory timing).

    For ``external_torque_observer`` the output is τ_ext (the node's ``~/external_torque`` efforts, model
    joint order) from a separate :class:`~robot_dynamics_ros.control.external_torque.ExternalTorqueCore`
    with the node's settings (``settings_from`` of the node module), payload, gravity and friction file.

    Args:
        node_name: one of :data:`REPLAY_NODES`.
        model: the robot model built from the same URDF, held joints and joint limits.
        params: the running node's parameter values (name -> value).
        epoch_ns: the computed-torque node's trajectory time base (its clock at start).
    """

    def __init__(self, node_name: str, model, params: dict[str, Any], *, epoch_ns: int = 0):
        joints = list(params.get("joints") or []) or None
        used = _model_for(model, params) if node_name == "gravity_compensation" else model
        self.observer = node_name == "external_torque_observer"
        if self.observer:
            from robot_dynamics_ros.control.external_torque import ExternalTorqueCore
            from robot_dynamics_ros.nodes.model_source import model_with_params
            from robot_dynamics_ros.nodes.external_torque_observer import settings_from

            used = model_with_params(model, params)
            if params.get("friction_path"):
                from robot_dynamics_ros.friction import JointFriction

                used = used.with_settings(friction=JointFriction.from_yaml(params["friction_path"], used.joint_names))
            self.core = ExternalTorqueCore(used, settings_from(params), list(params.get("command_joints") or []) or None)
            self.ticks_on_stamp = False
        elif node_name == "gravity_compensation":
            from robot_dynamics_ros.control.gravity_compensator import GravityCompensator, GravitySettings

            self.core = GravityCompensator(used, _settings_for(GravitySettings, params, model.joint_names), joints)
            self.ticks_on_stamp = False
        else:
            from robot_dynamics_ros.control.computed_torque import ComputedTorqueController, ComputedTorqueSettings

            from robot_dynamics_ros.control.execution import TrajectoryExecution
            from robot_dynamics_ros.nodes.trajectory_action import execution_settings

            self.core = ComputedTorqueController(
                used, _settings_for(ComputedTorqueSettings, params, model.joint_names), joints,
                epoch_ns=int(epoch_ns))
            # trajectories take the node's own path (~/joint_trajectory: validation, past stamps, submission)
            self.execution = TrajectoryExecution(self.core, execution_settings(params))
            self.ticks_on_stamp = True

    @property
    def output_names(self) -> list[str]:
        """Joint names of the output's entries: the command joints (control nodes) or the model's joints
        (the observer's τ_ext)."""
        mapper = self.core.mapper
        return list(mapper.joint_names if self.observer else mapper.command_joints)

    def expected(self, records: list) -> list:
        """The command (array, command joint order) or None for each joint state of ``records`` (replay's
        ``Record`` objects, in bag order); trajectory records are submitted to the core at their bag time."""
        from robot_dynamics_ros.control.execution import GoalRejected
        from robot_dynamics_ros.nodes.cdr import fields_from_message

        core = self.core
        out = []
        for r in records:
            if r.index < 0:
                try:
                    self.execution.submit_topic(r.msg, core.time_s(r.t_ns))
                except GoalRejected:
                    pass
                continue
            fields = fields_from_message(r.msg)
            if core.on_joint_state(fields, r.t_ns, r.t_ns) is not None:
                out.append(None)
                continue
            if self.ticks_on_stamp:
                res = core.step(r.t_ns, r.t_ns, sample_ns=fields.stamp_ns or r.t_ns)
            else:
                res = core.step(r.t_ns, r.t_ns)
            value = res.tau_ext if self.observer else res.command
            out.append(None if value is None else np.asarray(value, dtype=float))
        return out
