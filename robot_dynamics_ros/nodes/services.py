"""Services the nodes share: ``~/set_payload`` and the computed-torque node's collision reaction.

* :func:`create_payload_service` (with :func:`payload_change_warning` beyond
  :data:`PAYLOAD_REPLAN_FRACTION`) and :func:`payload_request_fields` (the request from the JSON of
  ``robot-dynamics identify --payload``).
* :func:`create_collision_reaction` — ``collision_topic`` latches gravity-only, ``~/reset_collision``
  resumes.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from rclpy.parameter import Parameter
from robot_dynamics_interfaces.srv import SetPayload
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.nodes.diagnostics import Diagnostics, RateLimitedLog
from robot_dynamics_ros.nodes.wire import collision_qos, service_qos
from robot_dynamics_ros.share import read_regular_file

__all__ = ["PAYLOAD_REPLAN_FRACTION", "payload_change_warning", "payload_request_fields", "create_payload_service",
           "create_collision_reaction"]


#: relative payload-mass change above which ``~/set_payload`` warns that retimed trajectories need a replan
#: (the case study's ±10 %)
PAYLOAD_REPLAN_FRACTION = 0.10


def payload_change_warning(old_link: str, old_mass: float, new_link: str, new_mass: float,
                           fraction: float = PAYLOAD_REPLAN_FRACTION) -> str | None:
    """The one-line warning when a payload change moves the mass by more than ``fraction`` of the old
    mass (kg; no payload counts as 0 kg, so adding or removing any payload warns), else None.

    Trajectories retimed at the torque limits with the old payload may then exceed them: replan.
    """
    m0 = float(old_mass) if old_link else 0.0
    m1 = float(new_mass) if new_link else 0.0
    if abs(m1 - m0) <= fraction * m0:
        return None
    rel = f"{(m1 - m0) / m0:+.0%}" if m0 > 0 else "from none"
    return (f"payload mass changed {m0:g} kg ('{old_link}') -> {m1:g} kg ('{new_link}'), {rel}: more than "
            f"±{fraction:.0%}, replan trajectories retimed with the old payload")


def _log(node) -> RateLimitedLog:
    """The node's :class:`RateLimitedLog` (its ``log`` attribute, looked up at each call: a node replaces it
    when ``log_period`` changes), else one kept on the node: a flood of requests logs one line per period."""
    log = getattr(node, "log", None)
    if isinstance(log, RateLimitedLog):
        return log
    return node.__dict__.setdefault("_services_log", RateLimitedLog(node.get_logger()))


def payload_request_fields(path) -> dict[str, Any]:
    """The ``SetPayload`` request fields from the JSON of ``robot-dynamics identify --payload LINK``:
    ``{"link": str, "mass": kg, "com": [x, y, z] m (link frame), "inertia": [ixx, ixy, ixz, iyy, iyz, izz]
    kg·m² about the COM, link axes}`` (the JSON's 3×3 ``inertia`` is taken row-wise from its upper
    triangle; 6 values are taken as they are).

    Raises:
        UserError: unreadable file, missing field, or values of the wrong count or not finite (naming the
            file and the field).
    """
    data = read_regular_file(path, "payload JSON")
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except ValueError as exc:
        raise UserError(f"payload JSON '{path}': not valid JSON ({type(exc).__name__})") from None
    if isinstance(doc, dict) and isinstance(doc.get("payload"), dict):  # the <out>.report.json layout
        doc = doc["payload"]
    try:
        link, mass = str(doc["link"]), float(doc["mass"])
        com = [float(x) for x in doc["com"]]
        inertia = np.asarray(doc.get("inertia", [0.0] * 6), dtype=float)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"payload JSON '{path}': expected link, mass, com, inertia ({exc})") from None
    if inertia.shape == (3, 3):
        inertia = inertia[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]]
    if len(com) != 3 or inertia.shape != (6,):
        raise UserError(f"payload JSON '{path}': com needs 3 values and inertia 3x3 or 6, got {len(com)} and "
                        f"{list(inertia.shape)}")
    if not all(math.isfinite(v) for v in [mass, *com, *inertia.tolist()]):
        raise UserError(f"payload JSON '{path}': mass, com and inertia must be finite")
    return {"link": link, "mass": mass, "com": com, "inertia": inertia.tolist()}


def create_payload_service(node, values: Callable[[], Mapping[str, Any]], diag: Diagnostics | None = None):
    """``~/set_payload`` (robot_dynamics_interfaces/srv/SetPayload): sets the ``payload.*`` parameters in one
    atomic change (the node builds the new model and swaps it in; a refused request changes nothing).

    A change of the payload mass by more than :data:`PAYLOAD_REPLAN_FRACTION` of the previous one
    (:func:`payload_change_warning`), through this service or through ``set_parameters`` (a post-set
    callback sees both), is logged as a warning and kept in the node's diagnostics as ``payload_change``
    (with the count ``payload_replan_warnings``); the service also appends it to its response message.

    Args:
        node: the rclpy node that declares the ``payload.*`` parameters.
        values: returns the node's current parameter values (name -> value; read after each change).
        diag: where the warning is kept (None: logged only).

    Returns:
        the service.
    """
    # the warning follows every accepted payload change, from this service or from set_parameters
    p = values()
    seen = {"link": str(p.get("payload.link", "")), "mass": float(p.get("payload.mass", 0.0)), "warning": None}

    def after_set(params) -> None:
        if not any(p.name in ("payload.link", "payload.mass") for p in params):
            return
        p = values()
        link, mass = str(p.get("payload.link", "")), float(p.get("payload.mass", 0.0))
        warning = payload_change_warning(seen["link"], seen["mass"], link, mass)
        seen.update(link=link, mass=mass, warning=warning)
        if warning:
            _log(node).warning("payload_change", f"payload: {warning}")
            if diag is not None:
                diag.set("payload_change", f"WARN: {warning}")
                diag.count("payload_replan_warnings")

    node.add_post_set_parameters_callback(after_set)

    def on_request(request, response):
        seen["warning"] = None
        params = [Parameter("payload.link", value=str(request.link)),
                  Parameter("payload.mass", value=float(request.mass)),
                  Parameter("payload.com", value=[float(x) for x in request.com]),
                  Parameter("payload.inertia", value=[float(x) for x in request.inertia])]
        result = node.set_parameters_atomically(params)
        response.success = bool(result.successful)
        response.message = (f"payload {request.mass:g} kg on '{request.link}'" if request.link else
                            "payload removed") if result.successful else f"refused: {result.reason}"
        _log(node).info("set_payload", f"set_payload: {response.message}")
        if result.successful and seen["warning"]:
            response.message += f"; WARNING: {seen['warning']}"
        return response

    return node.create_service(SetPayload, "~/set_payload", on_request, qos_profile=service_qos())


def create_collision_reaction(node, topic: str, core: Callable[[], Any]):
    """The computed-torque node's collision reaction: ``collision_topic`` (``std_msgs/Bool``, reliable +
    transient local, as ``external_torque_observer`` publishes ``~/collision``; empty: no reaction) latches
    the core's gravity-only command on ``True``; ``~/reset_collision`` (``std_srvs/Trigger``) resumes, and is
    refused while the last flag heard is still ``True`` (the observer publishes only on change, so resuming
    then would ignore an ongoing contact).

    Args:
        node: the rclpy node; topic: the flag's topic (``collision_topic``; empty: no subscription).
        core: returns the node's current core (with ``collision``, ``set_collision()``,
            ``reset_collision()``), or None before a model.

    Returns:
        the ``~/reset_collision`` service.
    """
    state = {"flag": False}

    def on_flag(msg) -> None:
        state["flag"] = bool(msg.data)
        c = core()
        if msg.data and c is not None and not c.collision:
            c.set_collision()
            _log(node).error("collision", "collision reported: commanding gravity only until ~/reset_collision")

    def on_reset(request, response):
        c = core()
        if state["flag"]:
            response.success, response.message = False, "refused: the observer still reports a collision"
        elif c is None:
            response.success, response.message = False, "no robot model yet"
        else:
            c.reset_collision()
            response.success, response.message = True, "resumed: holding the measured position"
        _log(node).info("reset_collision", f"reset_collision: {response.message}")
        return response

    if topic:
        node.create_subscription(Bool, topic, on_flag, collision_qos())
    return node.create_service(Trigger, "~/reset_collision", on_reset, qos_profile=service_qos())
