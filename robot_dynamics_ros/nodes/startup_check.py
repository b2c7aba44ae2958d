"""The gravity node's start-up cross-check, run in a child process.

The check compares Pinocchio with the in-package Newton–Euler engine
(:func:`robot_dynamics_ros.dynamics.crossval.crossvalidate`) on random states of the node's model. The
Newton–Euler engine is numba-compiled; importing numba (which imports scipy) and compiling its kernels
would stay in the node's memory for its whole life (measured on the Panda: about 270 MB resident against
about 145 MB without it) for a check that runs once. So the node hands the model's recipe to
``python -m robot_dynamics_ros.nodes.startup_check`` (JSON on stdin: :func:`model_spec`), which rebuilds the
model the same way, runs the check and prints one JSON line ``{"passed": bool, "text": str}``; the node
process never imports numba or scipy.

The child is the same interpreter (``sys.executable``) with the same environment; it runs no ROS code.
"""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from robot_dynamics_ros.friction import JointFriction
from robot_dynamics_ros.model import RobotModel

__all__ = ["model_spec", "model_from_spec", "run_in_child", "check", "main"]

#: seconds the child may take (model build + numba compile + the samples) before the check counts as failed
TIMEOUT_S = 600.0


def model_spec(model, *, joint_limits: str | None = None, friction: str | None = None) -> dict[str, Any]:
    """The JSON-able recipe of ``model`` (a :class:`~robot_dynamics_ros.model.RobotModel`): its URDF text,
    held joints, gravity (m/s²) and payload (link, kg, m, kg·m² 3×3), plus the files it was built with
    (``joint_limits`` — the MoveIt limits YAML — and ``friction`` — the identified friction YAML; None:
    none), which :func:`model_from_spec` reads again."""
    p = model.payload
    return {"urdf": model.urdf_xml, "held": {k: float(v) for k, v in dict(model.held_joints).items()},
            "joint_limits": joint_limits or None, "friction": friction or None,
            "gravity": [float(x) for x in model.gravity],
            "payload": None if p is None else [p.link, float(p.mass), [float(x) for x in p.com],
                                               [[float(x) for x in row] for row in p.inertia]]}


def model_from_spec(spec: dict[str, Any]):
    """The model of a :func:`model_spec` recipe.

    Raises:
        URDFError / UserError: the URDF, a file or a setting is refused (as when the node built it).
    """
    model = RobotModel.from_text(spec["urdf"], held_joints=spec["held"] or None, joint_limits=spec["joint_limits"])
    if spec["friction"]:
        model = model.with_settings(friction=JointFriction.from_yaml(spec["friction"], model.joint_names))
    payload = tuple(spec["payload"]) if spec["payload"] is not None else None
    return model.with_settings(gravity=spec["gravity"], payload=payload)


def check(spec: dict[str, Any], samples: int) -> tuple[bool, str]:
    """The cross-check of the recipe's model on ``samples`` random states, in this process:
    ``(passed, text)`` (the text names the worst difference, or why it could not run)."""
    # numba and scipy enter here, in the child process only (the point of this module)
    from robot_dynamics_ros.dynamics.crossval import crossvalidate

    try:
        report = crossvalidate(model_from_spec(spec), samples=samples, mujoco=False)
        worst = report.worst("newton-euler")
    except Exception as exc:  # noqa: BLE001 - reported to the node, which withholds commands
        return False, f"crossval could not run: {exc}"
    if report.passed:
        return True, f"passed: {samples} states, max |NE - Pinocchio| {worst:.1e}"
    return False, f"crossval FAILED: max |NE - Pinocchio| {worst:.3e} on {samples} states"


def run_in_child(spec: dict[str, Any], samples: int, timeout: float = TIMEOUT_S) -> tuple[bool, str]:
    """:func:`check` in a child process (``python -m robot_dynamics_ros.nodes.startup_check``); the
    child's failure (a crash, a timeout, no answer) is a failed check with its reason."""
    try:
        done = subprocess.run([sys.executable, "-m", __name__], input=json.dumps({"spec": spec, "samples": samples}),
                              capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"crossval could not run: {' '.join(str(exc).split())[:200]}"
    for line in reversed(done.stdout.splitlines()):
        try:
            answer = json.loads(line)
            return bool(answer["passed"]), str(answer["text"])
        except (ValueError, KeyError, TypeError):
            continue
    tail = " ".join(done.stderr.split()[-40:])
    return False, f"crossval could not run: the check process exited with {done.returncode}: {tail[:300]}"


def main() -> int:
    """Child process: read ``{"spec": ..., "samples": n}`` from stdin, print the answer as one JSON line."""
    request = json.loads(sys.stdin.read())
    passed, text = check(request["spec"], int(request["samples"]))
    print(json.dumps({"passed": passed, "text": text}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
