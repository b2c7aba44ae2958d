"""``robot-dynamics crossval``: compare Pinocchio, the in-package Newton–Euler and MuJoCo on random states.

    robot-dynamics crossval --urdf PATH|ROBOT [--samples N] [--seed S] [--held J=V ...]
                            [--payload LINK,MASS[,CX,CY,CZ]] [--tol T] [--tol-mujoco T] [--no-mujoco] [--strict] [--json]

Prints, per engine and quantity (tau, M, C·qd, g), the maximum absolute and relative error against
Pinocchio; exits 0 when every comparison is within tolerance, 1 otherwise (or on a bad argument/URDF,
printed as one line). A model without any moving mass (a kinematics-only URDF) is "not comparable" (every
engine gives zeros): exit 1 with that line on stderr. See :mod:`robot_dynamics_ros.dynamics.crossval`.

The URDF is loaded leniently: what was accepted with a warning (non-physical inertias,
the fixed base's inertia ignored, links without mass, a broken ``<mimic>``) is printed on stderr, one
``warning:`` line each; ``--strict`` refuses the URDF instead (exit 1, one line).
"""
from __future__ import annotations

import argparse
import sys

from robot_dynamics_tools.commands._args import add_robot_arguments, model_from_args, print_to_pipe
from robot_dynamics_ros.errors import UserError


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
    print_to_pipe(report.to_json() if args.json else report.format_table())
    if report.not_comparable:
        print(f"robot-dynamics crossval: not comparable: {report.not_comparable}", file=sys.stderr)
        return 1
    if not report.passed:
        print(f"robot-dynamics crossval: engines disagree beyond tolerance on {report.robot}", file=sys.stderr)
        return 1
    return 0
