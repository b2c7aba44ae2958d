"""``robot-dynamics crossval``: compare Pinocchio, the in-package Newton–Euler and MuJoCo on random states.

    robot-dynamics crossval --urdf PATH|ROBOT [--samples N] [--seed S] [--held J=V ...]
                            [--payload LINK,MASS[,CX,CY,CZ]] [--tol T] [--tol-mujoco T] [--no-mujoco] [--json]

Prints, per engine and quantity (tau, M, C·qd, g), the maximum absolute and relative error against
Pinocchio; exits 0 when every comparison is within tolerance, 1 otherwise (or on a bad argument/URDF,
printed as one line). See :mod:`robot_dynamics_ros.dynamics.crossval`.
"""
from __future__ import annotations

import argparse
import math
import sys

from robot_dynamics_ros.errors import UserError


def add_robot_arguments(parser: argparse.ArgumentParser) -> None:
    """``--urdf``, ``--held``, ``--payload``, ``--gravity``: shared by ``crossval`` and ``dynamics``."""
    parser.add_argument("--urdf", "--robot", dest="urdf", required=True,
                        help="URDF file, or a robot of the catalogue (panda, ur5, kinova, z1, so100, baxter, "
                             "talos_left_arm, xarm7, planar_2r; their default held joints apply)")
    parser.add_argument("--held", action="append", default=None, metavar="JOINT=VALUE",
                        help="hold a joint fixed at VALUE (rad or m); repeatable; replaces the catalogue's "
                             "default held joints; --held none holds nothing")
    parser.add_argument("--payload", metavar="LINK,MASS[,CX,CY,CZ]",
                        help="point-mass payload of MASS kg on LINK, centre of mass (CX, CY, CZ) m in the "
                             "link frame (default 0,0,0)")
    parser.add_argument("--gravity", metavar="GX,GY,GZ", help="gravity in the root link frame, m/s² "
                        "(default 0,0,-9.81)")


def _floats(text: str, what: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise UserError(f"{what}: '{text}' is not a comma-separated list of numbers") from None
    if not all(math.isfinite(v) for v in values):
        raise UserError(f"{what}: '{text}' contains a non-finite number")
    return values


def parse_held(items: list[str] | None) -> dict[str, float] | None:
    """``["j1=0.1", "j2=0"]`` -> dict; None when not given; ``["none"]`` -> {}."""
    if items is None:
        return None
    held: dict[str, float] = {}
    for item in items:
        if item.strip().lower() == "none":
            continue
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UserError(f"--held: '{item}' is not JOINT=VALUE")
        held[name.strip()] = _floats(value, f"--held {name}")[0]
    return held


def model_from_args(args):
    """Build the :class:`RobotModel` of ``--urdf/--held/--payload/--gravity`` (raises UserError)."""
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.robots import resolve

    entry = resolve(args.urdf)
    held = parse_held(args.held)
    if held is None:
        held = dict(entry.held_joints)
    gravity = (0.0, 0.0, -9.81)
    if getattr(args, "gravity", None):
        gravity = _floats(args.gravity, "--gravity")
        if len(gravity) != 3:
            raise UserError(f"--gravity: expected 3 numbers GX,GY,GZ, got '{args.gravity}'")
    model = RobotModel.from_urdf(entry.path, held_joints=held, gravity=gravity)
    if getattr(args, "payload", None):
        link, _, rest = args.payload.partition(",")
        values = _floats(rest, "--payload") if rest else []
        if len(values) not in (1, 4):
            raise UserError(f"--payload: expected LINK,MASS or LINK,MASS,CX,CY,CZ, got '{args.payload}'")
        model.set_payload(link.strip(), values[0], values[1:] if len(values) == 4 else (0.0, 0.0, 0.0))
    return model


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_robot_arguments(parser)
    parser.add_argument("--samples", type=int, default=100, help="random states (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--tol", type=float, default=1e-9,
                        help="absolute tolerance Newton-Euler vs Pinocchio, N·m (default 1e-9)")
    parser.add_argument("--tol-mujoco", type=float, default=1e-6,
                        help="absolute tolerance MuJoCo vs Pinocchio, N·m (default 1e-6)")
    parser.add_argument("--no-mujoco", action="store_true", help="compare Pinocchio and Newton-Euler only")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args) -> int:
    from robot_dynamics_ros.dynamics.crossval import crossvalidate

    if args.samples < 1:
        raise UserError(f"--samples: must be ≥ 1, got {args.samples}")
    if not (args.tol > 0 and args.tol_mujoco > 0):
        raise UserError(f"--tol/--tol-mujoco: must be > 0, got {args.tol}, {args.tol_mujoco}")
    model = model_from_args(args)
    report = crossvalidate(model, samples=args.samples, seed=args.seed, tol=args.tol,
                           tol_mujoco=args.tol_mujoco, mujoco=not args.no_mujoco)
    print(report.to_json() if args.json else report.format_table())
    if not report.passed:
        print(f"robot-dynamics crossval: engines disagree beyond tolerance on {report.robot}", file=sys.stderr)
        return 1
    return 0
