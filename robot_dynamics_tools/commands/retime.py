"""``robot-dynamics retime``: time-optimal retiming (TOPP-RA) of a joint-space path given as CSV.

    robot-dynamics retime --urdf PATH|ROBOT --waypoints FILE.csv --out TRAJ.csv
                          [--joint-limits YAML] [--velocity-scale A] [--acceleration-scale A]
                          [--torque-margin M] [--gridpoints N] [--dt SECONDS]
                          [--hold JOINT=VALUE ...] [--start-velocity J=V,...] [--end-velocity J=V,...]
                          [--acceleration-limit A] [--friction] [--held JOINT=VALUE ...]
                          [--payload LINK,MASS[,CX,CY,CZ]] [--gravity GX,GY,GZ] [--path-tolerance TOL]
                          [--jerk-limit J] [--jerk-scale A] [--motor-limits YAML]

Input CSV (at most ``MAX_CSV_BYTES``): a header naming joints (any order, matched by name), then one row per
waypoint (rad / m). Model joints absent from the header must be given with ``--hold JOINT=VALUE,...``
(held fixed there), else the command stops with a one-line error naming them. (``--held`` is different: it
welds a joint out of the model, e.g. gripper fingers.)

Output CSV: ``t`` (s) and, per model joint, ``<joint>/position``, ``<joint>/velocity``,
``<joint>/acceleration``, ``<joint>/effort`` (rad, rad/s, rad/s², N·m), one row per sample (every ``--dt``
seconds plus the end time; one per gridpoint without ``--dt``).

The output file is written to a temporary file in the same directory and renamed over ``--out``, so a
failed write leaves a previous file intact; ``--out`` naming the input file, or in a directory that is
missing, a file or not writable, is refused before any work.

The last stdout line is a JSON summary: ``success``, ``status``, ``message``, ``duration`` (s),
``gridpoints``, ``solve_ms`` (the whole retiming), ``samples``, ``peak_fraction`` (max over the samples of
|value| / applied limit for velocity, acceleration, effort, jerk; null where no limit applies, jerk also
where the timing is not jerk-limited), ``jerk_limits`` (joint -> rad/s³ applied; only with jerk limits),
``max_path_deviation`` (rad / m, bound on the distance from the CSV's polyline), ``tolerance_bound`` (the
corners where the curvature within ``--path-tolerance``, not a joint limit, sets the speed, and the seconds
spent there: :func:`robot_dynamics_ros.retiming.binding.tolerance_bound`), ``warnings`` (list of one-line
strings; on a model without any moving mass, a kinematics-only URDF, one says that the torque limits cannot
bind: its torques are zeros), ``warmup_ms`` (loading the compiled kernels, before the timed retiming) and
``out``.

Exit status: 0 success. 1: bad input or options. Found before the solve: a one-line error on stderr and no
JSON line (unreadable or malformed files, a CSV column that is not a joint of the model, a model joint
neither in the CSV nor held, an option out of range such as ``--velocity-scale 1.5`` or a scale or margin
below its floor 0.001 (``MIN_SCALE``), an ``--out`` whose
directory is missing or not writable); found by the retimer (``status: invalid_request``: a NaN waypoint,
a start velocity against the path direction, motor limits on a path with direction reversals, ...): the
one-line error and the JSON line with ``success: false``. 2: the retimer could not time the path (any other
``status``: a waypoint outside the position limits or where gravity alone exceeds the torque limit, a start
velocity too fast to stop, ``limit_exceeded`` when the timing's own samples pass a limit by more than 1e-4,
``solver_failure``, ...): the JSON line with ``success: false``. No output file is written on failure.

Joint limits: without ``--joint-limits``, a bundled robot name (``--urdf panda``) applies the package's
``config/<robot>_joint_limits.yaml`` when it exists, as ``robot-dynamics run`` does; ``--joint-limits ''``
applies none; a bare file name is looked up in the package's ``config/`` as the nodes'
``joint_limits_path`` is. Its top-level ``default_velocity_scaling_factor`` /
``default_acceleration_scaling_factor`` (MoveIt Setup Assistant) are the scales when ``--velocity-scale`` /
``--acceleration-scale`` are not given (1 without them).
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from robot_dynamics_tools.commands._args import (add_robot_arguments, check_output_path, joint_limits_file,
                                               model_from_args, named_values, print_to_pipe)
from robot_dynamics_tools.commands._progress import heartbeat
from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.share import resolve_config_file

#: exit status of bad input or options (before the solve, or the retimer's ``invalid_request``)
EXIT_BAD_INPUT = 1
#: exit status of a path the retimer cannot time (any other failure status)
EXIT_INFEASIBLE = 2
#: RetimeOptions field -> the option that sets it (for the one-line error of an out-of-range value)
_OPTION_OF = {"velocity_scale": "--velocity-scale", "acceleration_scale": "--acceleration-scale",
              "torque_margin": "--torque-margin", "jerk_scale": "--jerk-scale", "gridpoints": "--gridpoints",
              "jerk_limit": "--jerk-limit", "path_tolerance": "--path-tolerance", "sample_period": "--dt"}
#: largest waypoint CSV read (bytes): ~ 1 million waypoints of 7 joints
MAX_CSV_BYTES = 100_000_000


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_robot_arguments(parser)
    parser.add_argument("--waypoints", required=True, metavar="FILE.csv",
                        help="CSV: header of joint names, one row per waypoint (rad or m)")
    parser.add_argument("--out", required=True, metavar="TRAJ.csv", help="output trajectory CSV")
    parser.add_argument("--joint-limits", metavar="YAML", help="MoveIt joint_limits.yaml (acceleration and "
                        "jerk limits, overrides); a bare name is looked up in the package's config/; default: "
                        "config/<robot>_joint_limits.yaml for a bundled robot name; '' for none")
    parser.add_argument("--velocity-scale", type=float, help="fraction [0.001, 1] of the velocity limits "
                        "(default: the joint limits YAML's default_velocity_scaling_factor, else 1)")
    parser.add_argument("--acceleration-scale", type=float, help="fraction [0.001, 1] of the acceleration limits "
                        "(default: the joint limits YAML's default_acceleration_scaling_factor, else 1)")
    parser.add_argument("--torque-margin", type=float, default=1.0, help="fraction [0.001, 1] of the URDF effort "
                        "limits the trajectory may use, e.g. 0.9 (default 1)")
    parser.add_argument("--acceleration-limit", type=float, metavar="A",
                        help="acceleration limit (rad/s²) for joints that have none (URDFs carry none)")
    parser.add_argument("--jerk-limit", type=float, metavar="J",
                        help="jerk limit (rad/s³) for joints without max_jerk in --joint-limits (joints with "
                        "max_jerk keep it, times --jerk-scale); with any jerk limit the trajectory is "
                        "jerk-limited, at rest at both ends")
    parser.add_argument("--motor-limits", metavar="YAML", help="motor_limits.yaml (rated_torque, peak_torque, "
                        "peak_duration per joint): jerk-limited timing within them, per-joint figures in the "
                        "JSON (margin = --torque-margin on the peak); a bare name is looked up in the "
                        "package's config/ as for --joint-limits")
    parser.add_argument("--jerk-scale", type=float, default=1.0, help="fraction [0.001, 1] of the joint_limits.yaml "
                        "max_jerk limits (default 1); does not scale --jerk-limit, which fills only the joints "
                        "without max_jerk, so both may be given")
    parser.add_argument("--gridpoints", type=int, help="number of gridpoints along s (default "
                        "max(200, waypoints))")
    parser.add_argument("--dt", type=float, help="output sample period, s (default: one row per gridpoint)")
    parser.add_argument("--hold", action="append", metavar="JOINT=VALUE,...",
                        help="values (rad or m) of model joints absent from the CSV, held fixed there; "
                        "repeatable; required for every such joint")
    parser.add_argument("--path-tolerance", type=float, metavar="TOL",
                        help="rad or m, infinity norm: the retimed path stays within TOL of the straight "
                        "joint-space segments between the CSV's waypoints; waypoints within TOL/2 of the "
                        "previous one are merged (default 0.001)")
    parser.add_argument("--start-velocity", metavar="J=V,...", help="joint velocities (rad/s) at the first "
                        "waypoint, by name (default: at rest); must point forward along the first segment "
                        "(parallel within 1e-3 of its norm)")
    parser.add_argument("--end-velocity", metavar="J=V,...", help="joint velocities at the last waypoint; "
                        "must point forward along the last segment")
    parser.add_argument("--friction", action="store_true", help="include URDF <dynamics> damping and "
                        "friction in the torque limits and efforts")


def read_waypoints(path: str) -> tuple[list[str], np.ndarray]:
    """Header names and (W, k) values of a waypoint CSV ('nan' cells stay NaN for the retimer to report).

    Raises:
        UserError: missing/unreadable file, empty header, a header in one column separated by ';', tab or
            '|' instead of commas, a joint named twice in the header, a row of the wrong length, a non-numeric
            cell.
    """
    p = Path(path)
    try:
        if p.exists() and not p.is_file():
            raise UserError(f"--waypoints '{path}': not a regular file")
        with p.open("rb") as raw:
            data = raw.read(MAX_CSV_BYTES + 1)
        if len(data) > MAX_CSV_BYTES:
            raise UserError(f"--waypoints '{path}': larger than MAX_CSV_BYTES = {MAX_CSV_BYTES} bytes")
        rows = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    except FileNotFoundError:
        raise UserError(f"--waypoints '{path}': no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"--waypoints '{path}': cannot read: {exc}") from None
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise UserError(f"--waypoints '{path}': empty file (expected a header of joint names)")
    names = [c.strip() for c in rows[0]]
    if len(names) == 1:
        other = next((d for d in (";", "\t", "|") if d in names[0]), None)
        if other is not None:
            raise UserError(f"--waypoints '{path}': the header is one column '{names[0]}'; columns are separated "
                            f"by commas, this file uses {other!r}")
    if not all(names):
        raise UserError(f"--waypoints '{path}': empty joint name in the header {rows[0]}")
    for j, name in enumerate(names):
        if name in names[:j]:
            raise UserError(f"--waypoints '{path}': joint '{name}' appears twice in the header (columns "
                            f"{names.index(name)} and {j}, counted from 0)")
    values = np.empty((len(rows) - 1, len(names)))
    for i, row in enumerate(rows[1:]):
        if len(row) != len(names):
            raise UserError(f"--waypoints '{path}' line {i + 2}: {len(row)} values for {len(names)} joints")
        for j, cell in enumerate(row):
            try:
                values[i, j] = float(cell)
            except ValueError:
                raise UserError(f"--waypoints '{path}' line {i + 2}, joint '{names[j]}': '{cell.strip()}' is "
                                "not a number") from None
    if values.shape[0] == 0:
        raise UserError(f"--waypoints '{path}': no waypoint rows after the header")
    return names, values


def build_model(args):
    """RobotModel from --urdf/--held/--payload/--gravity/--joint-limits/--acceleration-limit."""
    model = model_from_args(args, joint_limits=joint_limits_file(args.joint_limits, args.urdf))
    if args.acceleration_limit is not None:
        a = float(args.acceleration_limit)
        if not (math.isfinite(a) and a > 0):
            raise UserError(f"--acceleration-limit: {args.acceleration_limit} must be a positive number")
        acc = np.array(model.acceleration_limit, dtype=float)
        acc[~np.isfinite(acc)] = a
        model.acceleration_limit = acc
    return model


def write_trajectory(path: str, result) -> None:
    """CSV with ``t`` and ``<joint>/position|velocity|acceleration|effort`` per joint."""
    cols = ["t"]
    blocks = [result.t[:, None]]
    for j, name in enumerate(result.joint_names):
        cols += [f"{name}/position", f"{name}/velocity", f"{name}/acceleration", f"{name}/effort"]
        blocks.append(np.column_stack((result.q[:, j], result.qd[:, j], result.qdd[:, j], result.tau[:, j])))
    data = np.hstack(blocks)
    target = Path(path)
    tmp = None
    try:
        # a temporary file in the same directory, renamed over the target: a failed write (disk full,
        # interrupted) leaves any previous file intact, and readers never see a half-written one
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or Path("."))
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(",".join(cols) + "\n")
            np.savetxt(fh, data, delimiter=",", fmt="%.12g")
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise UserError(f"--out '{path}': cannot write: {exc}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def run(args: argparse.Namespace) -> int:
    from robot_dynamics_ros.retiming.request import RetimeOptions, RetimeStatus
    from robot_dynamics_ros.retiming.retimer import Retimer

    if Path(args.out).resolve() == Path(args.waypoints).resolve():
        raise UserError(f"--out '{args.out}': is the input file --waypoints '{args.waypoints}'; choose another "
                        "output path")
    check_output_path(args.out, "--out")
    names, values = read_waypoints(args.waypoints)
    options = RetimeOptions(velocity_scale=args.velocity_scale, acceleration_scale=args.acceleration_scale,
                            torque_margin=args.torque_margin, gridpoints=args.gridpoints,
                            sample_period=args.dt or None, friction=args.friction,
                            jerk_scale=args.jerk_scale, jerk_limit=args.jerk_limit,
                            **({} if args.path_tolerance is None else {"path_tolerance": args.path_tolerance}))
    problem = options.problem(names=_OPTION_OF)
    if problem:
        raise UserError(problem)
    model = build_model(args)
    unknown = [c for c in names if c not in model.index]
    if unknown:
        held = [c for c in unknown if c in model.held_joints]
        raise UserError(f"--waypoints '{args.waypoints}': column(s) {unknown} are not joints of the model"
                        + (f" ({held} held fixed by --held or the catalogue)" if held else "")
                        + f"; model joints are {list(model.joint_names)}")
    hold = {}
    for item in args.hold or []:
        hold.update(named_values(item, "--hold"))
    in_csv = [k for k in hold if k in names]
    if in_csv:
        raise UserError(f"--hold: joint(s) {in_csv} are columns of the waypoint CSV '{args.waypoints}'; "
                        f"--hold only sets model joints absent from it")
    unknown = [k for k in hold if k not in model.index]
    if unknown:
        raise UserError(f"--hold: unknown joint(s) {unknown}; model joints are {list(model.joint_names)}")
    absent = [j for j in model.joint_names if j not in names and j not in hold]
    if absent:
        raise UserError(f"--waypoints '{args.waypoints}': model joint(s) {absent} are not columns; add them or "
                        "hold them with --hold " + ",".join(f"{j}=VALUE" for j in absent))
    v0 = named_values(args.start_velocity, "--start-velocity")
    v1 = named_values(args.end_velocity, "--end-velocity")
    for what, vel in (("--start-velocity", v0), ("--end-velocity", v1)):
        unknown = [k for k in vel if k not in names]
        if unknown:
            raise UserError(f"{what}: joint(s) {unknown} are not columns of the waypoint CSV {names}")
    start = [v0.get(n, 0.0) for n in names] if v0 else None
    end = [v1.get(n, 0.0) for n in names] if v1 else None
    motor_limits = None
    if args.motor_limits:
        from robot_dynamics_ros.retiming.motor_limits import load_motor_limits

        motor_limits = load_motor_limits(model, resolve_config_file(args.motor_limits))
    options = dataclasses.replace(options, motor_limits=motor_limits)
    retimer = Retimer(model)

    def note(line: str) -> None:
        print(f"robot-dynamics retime: {line.strip()}", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    # the very first run compiles the kernels (~45 s; a first jerk-limited one ~15 s more): a line every 5 s
    # says so instead of a silent terminal
    with heartbeat(note, "loading the compiled kernels (the first run compiles them, cached afterwards)"):
        # load the compiled kernels from numba's cache (compiles them on the very first run); the jerk-limited
        # solve's where this request uses it (jerk or motor limits)
        retimer.warmup(jerk=bool(np.isfinite(retimer.checks.jerk_limits(options)).any())
                       or options.motor_limits is not None)
    warmup_ms = (time.perf_counter() - t0) * 1e3
    with heartbeat(note, "retiming (a first jerk-limited request compiles its kernels, cached afterwards)"):
        result = retimer.retime(values, joint_names=names, start_velocity=start, end_velocity=end, hold=hold,
                                options=options)
    summary = result.summary()
    summary["warmup_ms"] = warmup_ms
    summary["joint_names"] = list(result.joint_names)
    massless = model.torque_model_problem(allow_partial=True)   # no moving mass at all
    if massless is not None and (motor_limits is not None or np.isfinite(model.effort_limit).any()):
        # zero torques always fit: the effort figures say nothing on a model without mass
        summary["warnings"] = [*summary.get("warnings", []), f"torque limits cannot bind: {massless}"]
    for line in summary.get("warnings", result.warnings):
        print(f"robot-dynamics retime: warning: {line}", file=sys.stderr)
    if result.success:
        write_trajectory(args.out, result)
        summary["out"] = str(args.out)
        if "merged" in result.message:
            print(f"robot-dynamics retime: note: {result.message.split('; ', 1)[-1]}", file=sys.stderr)
    else:
        summary["out"] = None
        print(f"robot-dynamics retime: {summary.get('status', 'failed')}: {result.message} "
              f"(waypoints '{args.waypoints}', rows counted from 0)", file=sys.stderr)
    print_to_pipe(json.dumps(summary, ensure_ascii=False))
    if result.success:
        return 0
    # the retimer's INVALID_REQUEST is bad input the user can fix (a NaN cell, an option the path rules
    # out): the same status as the checks before the solve
    return EXIT_BAD_INPUT if result.status == RetimeStatus.INVALID_REQUEST else EXIT_INFEASIBLE
