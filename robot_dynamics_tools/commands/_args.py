"""Command-line argument parsing shared by the ``crossval``, ``dynamics`` and ``retime`` subcommands.

The robot options (``--urdf``, ``--held``, ``--payload``, ``--gravity``, ``--friction-yaml``, ``--strict``), the model they describe, and the
small parsers of numbers, comma-separated lists and ``JOINT=VALUE`` lists. Every bad value raises
:class:`robot_dynamics_ros.errors.UserError` naming the option and the value (the CLI prints it as one line).
"""
from __future__ import annotations

import argparse
import math
import os
import sys

from robot_dynamics_ros.errors import UserError
from robot_dynamics_tools.paths import check_output_path  # re-exported: the commands' one output check

__all__ = ["add_robot_arguments", "number", "float_list", "named_values", "parse_held", "model_from_args",
           "check_output_path", "joint_limits_file", "print_to_pipe"]


def add_robot_arguments(parser: argparse.ArgumentParser) -> None:
    """``--urdf``, ``--held``, ``--payload``, ``--gravity``, ``--friction-yaml``, ``--strict``: shared by every
    command that loads a robot (``crossval``, ``dynamics``, ``retime``)."""
    parser.add_argument("--urdf", "--robot", dest="urdf", required=True,
                        help="URDF file, or a robot of the catalogue (panda, ur5, ur10, kinova, z1, so100, baxter, "
                             "talos_left_arm, xarm7, planar_2r; their default held joints apply)")
    parser.add_argument("--held", action="append", default=None, metavar="JOINT=VALUE",
                        help="hold a joint fixed at VALUE (rad or m); repeatable; replaces the catalogue's "
                             "default held joints; --held none holds nothing")
    parser.add_argument("--payload", metavar="LINK,MASS[,CX,CY,CZ]",
                        help="point-mass payload of MASS kg on LINK, centre of mass (CX, CY, CZ) m in the "
                             "link frame (default 0,0,0)")
    parser.add_argument("--gravity", metavar="GX,GY,GZ", help="gravity in the root link frame, m/s² "
                        "(default 0,0,-9.81)")
    parser.add_argument("--friction-yaml", dest="friction_path", metavar="FILE",
                        help="friction YAML of 'robot-dynamics identify' (<out>.friction.yaml): coulomb/viscous "
                             "replace the URDF <dynamics>, armature (kg·m²) enters M(q), offset (N·m) is the "
                             "measured-torque bias; the nodes' friction_path parameter")
    parser.add_argument("--strict", action="store_true",
                        help="refuse the URDF instead of loading it with warnings (non-physical inertias, "
                             "the fixed base's inertia ignored, links without mass, "
                             "broken <mimic>)")


def number(text: str, what: str) -> float:
    """One finite number from ``text``.

    Raises:
        UserError: ``"<what>: '<text>' is not a number"`` or ``"... is not finite"``.
    """
    try:
        v = float(text)
    except ValueError:
        raise UserError(f"{what}: '{text.strip()}' is not a number") from None
    if not math.isfinite(v):
        raise UserError(f"{what}: '{text.strip()}' is not finite")
    return v


def float_list(text: str, what: str, count: int | None = None) -> list[float]:
    """``"1,2.5,-3"`` -> ``[1.0, 2.5, -3.0]``: finite numbers, exactly ``count`` of them when given.

    Raises:
        UserError: a value is not a number or not finite, or the count is wrong (naming ``what`` and ``text``).
    """
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise UserError(f"{what}: '{text}' is not a comma-separated list of numbers") from None
    if not all(math.isfinite(v) for v in values):
        raise UserError(f"{what}: '{text}' contains a non-finite number")
    if count is not None and len(values) != count:
        raise UserError(f"{what}: expected {count} numbers, got '{text}'")
    return values


def named_values(text: str | None, what: str) -> dict[str, float]:
    """``"j1=0.1,j2=-0.2"`` -> ``{"j1": 0.1, "j2": -0.2}`` (rad or m, rad/s, ...); empty or None -> ``{}``.

    Raises:
        UserError: an item is not ``JOINT=VALUE``, or its value is not a finite number.
    """
    out: dict[str, float] = {}
    if not text:
        return out
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"{what}: '{item}' is not JOINT=VALUE")
        out[name.strip()] = number(value, f"{what} {name.strip()}")
    return out


def parse_held(items: list[str] | None) -> dict[str, float] | None:
    """The ``--held`` values ``["j1=0.1", "j2=0"]`` -> ``{"j1": 0.1, "j2": 0.0}`` (rad or m); None when not
    given (the catalogue's default applies); ``["none"]`` -> ``{}``.

    Raises:
        UserError: an item is not ``JOINT=VALUE`` or its value is not a finite number.
    """
    if items is None:
        return None
    held: dict[str, float] = {}
    for item in items:
        if item.strip().lower() == "none":
            continue
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UserError(f"--held: '{item}' is not JOINT=VALUE")
        held[name.strip()] = number(value, f"--held {name.strip()}")
    return held


def model_from_args(args: argparse.Namespace, joint_limits=None):
    """The :class:`robot_dynamics_ros.model.RobotModel` of
    ``--urdf/--held/--payload/--gravity/--friction-yaml/--strict`` (see :func:`add_robot_arguments`), with the
    MoveIt ``joint_limits`` file or mapping when given.

    Raises:
        UserError: unknown robot / missing or bad URDF, or a bad ``--held``, ``--gravity``, ``--payload`` or
            ``--friction-yaml`` (naming the file and joint).
    """
    from robot_dynamics_ros.friction import JointFriction
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.robots import resolve

    entry = resolve(args.urdf)
    held = parse_held(args.held)
    if held is None:
        held = dict(entry.held_joints)
    gravity = (0.0, 0.0, -9.81)
    if getattr(args, "gravity", None):
        gravity = float_list(args.gravity, "--gravity", 3)
    model = RobotModel.from_file(entry.path, held_joints=held, gravity=gravity, joint_limits=joint_limits,
                                 strict=bool(getattr(args, "strict", False)))
    if getattr(args, "friction_path", None):
        model = model.with_settings(friction=JointFriction.from_yaml(args.friction_path, model.joint_names))
    if getattr(args, "payload", None):
        link, _, rest = args.payload.partition(",")
        values = float_list(rest, "--payload") if rest else []
        if len(values) not in (1, 4):
            raise UserError(f"--payload: expected LINK,MASS or LINK,MASS,CX,CY,CZ, got '{args.payload}'")
        com = values[1:] if len(values) == 4 else (0.0, 0.0, 0.0)
        model = model.with_settings(payload=(link.strip(), values[0], com))
    for w in model.warnings:  # what the lenient loader accepted (--strict refuses it)
        print(f"warning: {w}", file=sys.stderr)
    return model


def joint_limits_file(value: str | None, urdf: str | None) -> str | None:
    """The joint_limits.yaml a command applies for ``--joint-limits value`` and ``--urdf urdf``.

    None (option not given): the bundled robot's ``config/<robot>_joint_limits.yaml`` if the package has one
    (:func:`robot_dynamics_ros.robots.bundled_joint_limits`, the same default as ``robot-dynamics run``),
    else None. ``''``: None (no file). Otherwise a path, or a bare file name found in the package's
    ``config/`` (:func:`robot_dynamics_ros.share.resolve_config_file`, as the nodes' ``joint_limits_path``).
    """
    if value is None:
        from robot_dynamics_ros import robots

        return robots.bundled_joint_limits(urdf)
    if not str(value).strip():
        return None
    from robot_dynamics_ros.share import resolve_config_file

    return resolve_config_file(value)


def print_to_pipe(text: str) -> None:
    """Print ``text`` to stdout; when the reader has gone (``... --json | head``) stop quietly instead of a
    BrokenPipeError traceback: stdout is pointed at /dev/null so the interpreter's final flush succeeds
    (the recipe of the Python documentation, "Note on SIGPIPE")."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
