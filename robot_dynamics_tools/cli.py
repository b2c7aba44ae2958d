"""robot-dynamics: dynamics, control nodes and time-optimal retiming from a URDF (ROS 2).

Implementation: one entry point, one module per subcommand.

Each subcommand lives in its own module that defines ``configure_parser(parser)`` and
``run(args) -> int`` (the exit status). Modules are imported only when their subcommand runs, so
``robot-dynamics crossval`` does not pay for rclpy and ``robot-dynamics demo`` does not pay for numba.

Errors the user can fix (a bad URDF, a bad CSV, an infeasible request) are raised as
:class:`robot_dynamics_ros.errors.UserError` and printed as one line on stderr; exit status 1
(or the status the error carries).
"""
from __future__ import annotations

import argparse
import importlib
import sys

#: subcommand -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("robot_dynamics_tools.commands.demo", "gravity compensation on a simulated real arm: holds vs falls"),
    "run": ("robot_dynamics_tools.commands.run", "start the nodes, one process each (the launch files' stand-in)"),
    "crossval": ("robot_dynamics_tools.commands.crossval", "compare Pinocchio, in-package Newton-Euler and MuJoCo"),
    "dynamics": ("robot_dynamics_tools.commands.dynamics", "tau, g, M and C*qd at one state, by joint name"),
    "retime": ("robot_dynamics_tools.commands.retime", "time-optimal retiming (TOPP-RA) of a CSV path"),
    "track": ("robot_dynamics_tools.commands.track", "end-to-end tracking: retime, computed torque, MuJoCo"),
    "replay": ("robot_dynamics_tools.commands.replay", "replay a rosbag2 file through the nodes and record"),
    "record": ("robot_dynamics_tools.commands.record", "record named topics of the running nodes into a rosbag2 (mcap)"),
    "push": ("robot_dynamics_tools.commands.push", "a known push on a moving arm in MuJoCo, seen by the momentum observer"),
    "casestudy": ("robot_dynamics_tools.commands.casestudy", "the reference case: 15 kg on a UR10 along a 1.2 m line, jerk- and motor-limited"),
    "identify": ("robot_dynamics_tools.commands.identify", "dynamic parameters, friction or a payload from a recorded bag or CSV"),
    "excite": ("robot_dynamics_tools.commands.excite", "optimized excitation trajectory (Fourier series) for identification"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="robot-dynamics", description=__doc__.splitlines()[0],
        epilog="Run `robot-dynamics COMMAND --help` for the options of a command.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    wanted = sys.argv[1] if len(sys.argv) > 1 else None
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == wanted:  # configure only the chosen subcommand: imports stay lazy
            _load(module).configure_parser(p)
        p.set_defaults(_module=module)
    return parser


def _load(module: str):
    return importlib.import_module(module)


def main(argv: list[str] | None = None) -> int:
    from robot_dynamics_ros.errors import UserError

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:])
    try:
        return int(_load(args._module).run(args) or 0)
    except UserError as exc:
        print(f"robot-dynamics {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
