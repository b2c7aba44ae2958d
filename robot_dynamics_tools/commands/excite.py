"""``robot-dynamics excite``: an optimized excitation trajectory for identification.

    robot-dynamics excite --urdf URDF --out TRAJ.csv [--period T] [--harmonics L] [--cycles C] [--rate HZ]
                          [--velocity-scale K] [--acceleration-limit A] [--evaluations N] [--seed S]
                          [--held J=V ...] [--range J=LO:HI ...] [--bag DIR] [--json]

A finite Fourier series per joint (Swevers et al. 1997) minimizing the condition number of the base
regressor (:func:`robot_dynamics_ros.identification.excitation.optimize`), at rest at the start and end
of every period, within the URDF position limits, ``K`` × the URDF velocity limits and ``A`` rad/s² (or
the joint_limits acceleration limits); ``--range JOINT=LO:HI`` tightens a joint's position bounds. Joint
limits only: the workspace (mounting surface, obstacles) is not checked, and the output says so. Written
as the package's trajectory CSV (``t``, ``<joint>/position``, ``/velocity``, ``/acceleration``,
``/effort`` = the model's torque without friction),
and with ``--bag`` as a rosbag2 holding one ``trajectory_msgs/msg/JointTrajectory`` on
``/excitation_trajectory``. Exit status 1 when the model torque exceeds an effort limit (the files are
still written; the message names the joints).
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from robot_dynamics_ros.errors import UserError


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--urdf", "--robot", dest="urdf", required=True, help="URDF file or catalogue robot")
    parser.add_argument("--out", required=True, help="trajectory CSV to write")
    parser.add_argument("--period", type=float, default=10.0, help="period T of the series, s (default 10)")
    parser.add_argument("--harmonics", type=int, default=5, help="harmonics L per joint (default 5)")
    parser.add_argument("--cycles", type=int, default=2, help="periods written (default 2)")
    parser.add_argument("--rate", type=float, default=100.0, help="CSV sample rate, Hz (default 100)")
    parser.add_argument("--velocity-scale", type=float, default=0.5,
                        help="fraction of the URDF velocity limits (default 0.5)")
    parser.add_argument("--acceleration-limit", type=float, default=3.0,
                        help="rad/s² for joints without an acceleration limit (default 3)")
    parser.add_argument("--evaluations", type=int, default=400, help="cost evaluations of the optimizer (400)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random start (default 0)")
    parser.add_argument("--held", action="append", default=None, metavar="JOINT=VALUE",
                        help="hold a joint fixed; --held none holds nothing")
    parser.add_argument("--range", action="append", default=None, metavar="JOINT=LO:HI",
                        help="tighten a joint's position bounds to [LO, HI] rad (m) within its URDF limits, e.g. "
                             "to keep the arm off its mounting surface (repeatable)")
    parser.add_argument("--bag", help="also write a rosbag2 (directory, must not exist) with a JointTrajectory")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


#: printed with every excitation: the optimizer knows the joint limits, not the robot's surroundings
WORKSPACE_WARNING = ("warning: the excitation respects the joint limits (and --range) only, not the workspace: "
                     "check it for collisions with the mounting surface, the robot itself and obstacles before "
                     "running it")


def parse_ranges(items, model) -> tuple[np.ndarray, np.ndarray]:
    """``--range JOINT=LO:HI`` options -> (lower, upper) (n,) bounds, the URDF limits tightened.

    Raises:
        UserError: not JOINT=LO:HI, an unknown joint, LO ≥ HI, or a range outside the joint's URDF limits
            (one line naming the joint).
    """
    lower, upper = np.array(model.lower, float), np.array(model.upper, float)
    index = {j: i for i, j in enumerate(model.joint_names)}
    for item in items or ():
        jn, sep, rng = item.partition("=")
        lo_s, sep2, hi_s = rng.partition(":")
        try:
            lo, hi = float(lo_s), float(hi_s)
        except ValueError:
            lo = hi = float("nan")
        if not (sep and sep2 and np.isfinite(lo) and np.isfinite(hi)):
            raise UserError(f"--range: '{item}' is not JOINT=LO:HI (numbers, rad or m)")
        j = index.get(jn.strip())
        if j is None:
            raise UserError(f"--range: joint '{jn.strip()}' is not a moving joint of the model "
                            f"(joints: {', '.join(model.joint_names)})")
        if not lo < hi:
            raise UserError(f"--range {item}: LO must be below HI")
        lo, hi = max(lo, lower[j]), min(hi, upper[j])
        if not lo < hi:
            raise UserError(f"--range {item}: outside the URDF limits [{model.lower[j]:g}, {model.upper[j]:g}] of "
                            f"'{jn.strip()}'")
        lower[j], upper[j] = lo, hi
    return lower, upper


def run(args) -> int:
    from robot_dynamics_tools.commands._args import parse_held
    from robot_dynamics_ros.identification.excitation import optimize
    from robot_dynamics_tools.paths import write_text
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.robots import resolve

    for name, v, ok in (("--period", args.period, args.period > 0),
                        ("--harmonics", args.harmonics, args.harmonics >= 1),
                        ("--cycles", args.cycles, args.cycles >= 1), ("--rate", args.rate, args.rate > 0),
                        ("--velocity-scale", args.velocity_scale, 0 < args.velocity_scale <= 1),
                        ("--acceleration-limit", args.acceleration_limit, args.acceleration_limit > 0),
                        ("--evaluations", args.evaluations, args.evaluations >= 1)):
        if not ok:
            raise UserError(f"{name}: {v} is out of range")
    from robot_dynamics_tools.paths import check_new_folder, check_outputs

    if args.bag:
        check_new_folder(args.bag, "--bag")  # a rosbag2 is a new directory
    entry = resolve(args.urdf)
    check_outputs([("--out", args.out)], [("--urdf", str(entry.path))])
    held = parse_held(args.held)
    model = RobotModel.from_urdf(entry.path, held_joints=dict(entry.held_joints) if held is None else held)
    lower, upper = parse_ranges(args.range, model)
    alim = np.where(np.isfinite(model.acceleration_limit), model.acceleration_limit, args.acceleration_limit)
    res = optimize(model, period=args.period, harmonics=args.harmonics, qd_max=args.velocity_scale *
                   np.where(np.isfinite(model.velocity_limit), model.velocity_limit, 2.0), qdd_max=alim,
                   seed=args.seed, max_evaluations=args.evaluations, lower=lower, upper=upper)
    from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics

    t = np.arange(int(round(args.cycles * args.period * args.rate)) + 1) / args.rate
    q, qd, qdd = res.trajectory.sample(t)
    tau = NewtonEulerDynamics(model).rnea(q, qd, qdd)
    cols = ["t"]
    blocks = [t[:, None]]
    for j, jn in enumerate(model.joint_names):
        cols += [f"{jn}/position", f"{jn}/velocity", f"{jn}/acceleration", f"{jn}/effort"]
        blocks.append(np.column_stack([q[:, j], qd[:, j], qdd[:, j], tau[:, j]]))
    lines = [",".join(cols)] + [",".join(f"{v:.12g}" for v in row) for row in np.hstack(blocks)]
    write_text(args.out, "\n".join(lines) + "\n", "--out")
    if args.bag:
        from builtin_interfaces.msg import Duration
        from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

        from robot_dynamics_tools.bags import write_bag

        pts = []
        for k in range(t.size):
            sec = int(t[k])
            pts.append(JointTrajectoryPoint(positions=q[k].tolist(), velocities=qd[k].tolist(),
                                            accelerations=qdd[k].tolist(), effort=tau[k].tolist(),
                                            time_from_start=Duration(sec=sec, nanosec=int(round((t[k] - sec) * 1e9)))))
        write_bag(args.bag, [("/excitation_trajectory", 0, JointTrajectory(joint_names=list(model.joint_names),
                                                                              points=pts))])
    over = [jn for j, jn in enumerate(model.joint_names) if np.max(np.abs(tau[:, j])) > model.effort_limit[j]]
    summary = {"robot": model.description.name, "period_s": args.period, "harmonics": args.harmonics,
               "condition_number": res.condition, "start_condition_number": res.start_condition,
               "evaluations": res.evaluations, "max_abs_velocity": np.abs(qd).max(axis=0).tolist(),
               "max_abs_acceleration": np.abs(qdd).max(axis=0).tolist(),
               "max_abs_torque": np.abs(tau).max(axis=0).tolist(), "torque_over_limit": over,
               "start_position": q[0].tolist(), "position_bounds": [lower.tolist(), upper.tolist()],
               "out": args.out, "bag": args.bag, "warning": WORKSPACE_WARNING}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"excite {summary['robot']}: condition number {res.condition:.3g} (random start "
              f"{res.start_condition:.3g}), {res.evaluations} evaluations; starts at rest at q = "
              f"{np.round(q[0], 4).tolist()}; wrote {args.out}" + (f", {args.bag}" if args.bag else ""))
        print(WORKSPACE_WARNING)
    if over:
        print(f"robot-dynamics excite: model torque exceeds the effort limit on {', '.join(over)}", file=sys.stderr)
        return 1
    return 0
