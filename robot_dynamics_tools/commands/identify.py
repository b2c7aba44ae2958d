"""``robot-dynamics identify``: dynamic parameters (and friction) of a robot from recorded joint data.

    robot-dynamics identify --urdf URDF --data FILE --out IDENTIFIED.urdf
                            [--effort-scale S | J=S,...] [--joint-map FROM=TO,...] [--topic TOPIC]
                            [--payload LINK] [--holdout F] [--armature] [--prior-weight W] [--window N]
                            [--static] [--min-velocity V] [--coulomb-velocity V|auto]
                            [--effort-shift S|auto]
                            [--held J=V ...] [--gravity GX,GY,GZ] [--friction-yaml PATH] [--report PATH]
                            [--plot PATH] [--json]

``--data``: a CSV (``t``, ``<joint>/position``, ``/velocity``, ``/effort``, optional ``/acceleration``; UTF-8)
or a rosbag2 or ROS 1 bag with ``sensor_msgs/msg/JointState`` (see :mod:`robot_dynamics_ros.identification.data`
and :mod:`robot_dynamics_tools.recordings`), at most ``--max-data-mb`` (default 100 MiB, checked before
reading). Every output (``--out`` and the side files) is a regular file or a new name in an existing
directory (:mod:`robot_dynamics_tools.paths`); a FIFO, device, directory or a link to one is refused. The URDF
is the prior; the last ``--holdout`` fraction of the recording (default 0.25) is not fitted and serves to
compare the URDF and the identified model; the prior weight is chosen by validation inside the fit block
(``--prior-weight auto``, the default), and parameter groups that make a joint worse than the rigid-body
URDF on the held-out block are written with the URDF's values (report: ``kept_urdf``). Writes ``--out``
(the URDF with identified inertials and ``<dynamics>``), ``--friction-yaml`` (default
``<out>.friction.yaml``), ``--report`` (JSON, default ``<out>.json``, ``<out>.report.json`` when --out is a
.json) and ``--plot`` (PNG, default ``<out>.png``);
nothing is written when identification fails.

``--payload LINK``: the arm's parameters are taken from ``--urdf`` as they are (e.g. an identified URDF)
and only a payload rigidly attached to LINK (mass, centre of mass, inertia) and the joint friction are
estimated; ``--out`` is then a JSON with the payload (the ``~/set_payload`` request's fields).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from robot_dynamics_ros.errors import UserError
from robot_dynamics_tools import paths


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--urdf", "--robot", dest="urdf", required=True,
                        help="URDF file (the prior) or a robot of the catalogue (panda, ur5, ...)")
    parser.add_argument("--data", required=True, help="CSV recording or rosbag2 (sqlite3 or mcap) with JointState")
    parser.add_argument("--out", required=True, help="identified URDF to write (with --payload: a JSON)")
    parser.add_argument("--topic", help="JointState topic of the bag (default: its only JointState topic)")
    parser.add_argument("--max-data-mb", type=float, default=None, metavar="MB",
                        help="refuse a --data larger than this, checked before reading (default 100 MiB: a CSV "
                             "is held in memory several times over while parsed)")
    parser.add_argument("--effort-scale", metavar="S|J=S,...",
                        help="tau_model = S * effort_data, for all joints or per joint (e.g. -1 for drivers "
                             "that report the opposite sign)")
    parser.add_argument("--joint-map", metavar="FROM=TO,...", help="data joint name -> model joint name")
    parser.add_argument("--payload", metavar="LINK", help="identify only a payload on LINK, arm model fixed")
    parser.add_argument("--holdout", type=float, default=0.25,
                        help="fraction of the recording (its end) kept out of the fit for validation (0.25)")
    parser.add_argument("--armature", action="store_true", help="also fit a rotor inertia per joint")
    parser.add_argument("--prior-weight", default=None, metavar="W|auto",
                        help="weight of the URDF prior (larger stays closer to the URDF); 'auto' (default; "
                             "with --payload the default is 1) chooses it by validation on the last quarter "
                             "of the fit block (one more fit per candidate)")
    parser.add_argument("--window", type=int, help="Savitzky-Golay window, samples (odd; default ~0.1 s)")
    parser.add_argument("--static", action="store_true",
                        help="the samples are poses at rest (static-pose log): qd = qdd = 0, no filtering")
    parser.add_argument("--min-velocity", type=float, default=0.05,
                        help="|qd| below which a joint's sample is left out of the fit, rad/s (default 0.05)")
    parser.add_argument("--coulomb-velocity", default="auto", metavar="V|auto",
                        help="v_s of the Coulomb law fc*tanh(qd/v_s), rad/s; 0 for fc*sign(qd); 'auto' (default) "
                             "chooses it from the data")
    parser.add_argument("--effort-shift", default="auto", metavar="S|auto",
                        help="s: the effort sample stamped t was measured at t+S (a command held over the next "
                             "control period T: S = T/2); 'auto' (default) estimates it by least squares")
    parser.add_argument("--held", action="append", default=None, metavar="JOINT=VALUE",
                        help="hold a joint fixed (as in the other commands); --held none holds nothing")
    parser.add_argument("--gravity", metavar="GX,GY,GZ", help="gravity in the root link frame (0,0,-9.81)")
    parser.add_argument("--friction-yaml", help="friction YAML to write (default <out>.friction.yaml)")
    parser.add_argument("--report", help="JSON report to write (default <out>.json)")
    parser.add_argument("--plot", help="PNG of the held-out block (default <out>.png); 'none' to skip")
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")


def _model(args):
    from robot_dynamics_tools.commands._args import float_list, parse_held
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.robots import resolve

    entry = resolve(args.urdf)
    held = parse_held(args.held)
    if held is None:
        held = dict(entry.held_joints)
    gravity = float_list(args.gravity, "--gravity", 3) if args.gravity else (0.0, 0.0, -9.81)
    return RobotModel.from_urdf(entry.path, held_joints=held, gravity=gravity)


def _summary(report: dict) -> str:
    from robot_dynamics_ros.identification.pipeline import MOVED_RATIO

    lines = [f"identify {report['robot']}: {report['samples']} samples, dt {report['dt_s'] * 1e3:.3g} ms, "
             f"data rank {report['data_rank']} of {report['structural_base_parameters']} base parameters, "
             f"condition number {report['condition_number']:.3g}"]
    if "validation" in report:
        lines.append(f"held-out block {report['validation_block_s'][0]:.3f}-{report['validation_block_s'][1]:.3f} s"
                     "  (RMS / max torque error, N·m)")
        lines.append("  (URDF: its rigid-body model, the baseline; +dyn: with its <dynamics> simulation damping)")
        lines.append(f"  {'joint':<24} {'URDF rms':>9} {'URDF max':>9} {'+dyn rms':>9} {'ident rms':>9} "
                     f"{'ident max':>9} {'rms/peak':>8}")
        for jn, v in report["validation"].items():
            lines.append(f"  {jn:<24} {v['urdf_rms']:9.4g} {v['urdf_max']:9.4g} "
                         f"{v.get('urdf_damped_rms', float('nan')):9.4g} {v['identified_rms']:9.4g} "
                         f"{v['identified_max']:9.4g} {100 * v['identified_rms_over_peak']:7.2f}%")
    for group, v in report.get("kept_urdf", {}).items():
        worse = ", ".join(f"{j} {w['identified_rms']:.4g} > URDF {w['urdf_rms']:.4g} N·m"
                          for j, w in v["worse_joints"].items())
        lines.append(f"kept at the rigid-body URDF's values: {group} (worse on the held-out block before: {worse})")
    if "payload" in report:
        p = report["payload"]
        lines.append(f"payload on {p['link']}: mass {p['mass']:.4g} kg, com {p['com']} m")
    counts = ", ".join(f"{k} {v['identified']}/{v['total']}" for k, v in report.get("identified_counts", {}).items())
    moved = report.get("moved_not_excited", {})
    if counts:
        lines.append(f"excited by the data: {counts}; the others are written within {MOVED_RATIO:g} prior std "
                     "of the URDF" + (f", but for {len(moved)}:" if moved else ""))
    if moved:
        lines.append("moved without being excited (URDF -> written, prior std): " + ", ".join(
            f"{nm} {v['urdf']:.4g} -> {v['written']:.4g} ({v['prior_std']:.2g})" for nm, v in moved.items()))
    for w in report["notes"] + report["warnings"]:
        lines.append(f"note: {w}")
    return "\n".join(lines)


def _auto_number(text, ok, message: str) -> float | None:
    """None for 'auto', else the number ``text`` when ``ok(number)``; UserError(message) otherwise."""
    if str(text).lower() == "auto":
        return None
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not ok(v):
        raise UserError(message)
    return v


def run(args) -> int:
    from robot_dynamics_ros.identification import data as data_mod
    from robot_dynamics_ros.friction import friction_yaml
    from robot_dynamics_ros.identification import outputs, pipeline

    given_weight = args.prior_weight if args.prior_weight is not None else ("1" if args.payload else "auto")
    prior_weight = _auto_number(given_weight, lambda v: 0 < v < float("inf"),
                                f"--prior-weight: {args.prior_weight} must be > 0 or 'auto'")
    if prior_weight is None and args.payload:
        raise UserError("--prior-weight auto: not with --payload (give a number)")
    if not args.min_velocity >= 0:
        raise UserError(f"--min-velocity: {args.min_velocity} must be ≥ 0")
    v_s = _auto_number(args.coulomb_velocity, lambda v: 0 <= v < float("inf"),
                       f"--coulomb-velocity: '{args.coulomb_velocity}' must be 'auto' or a number ≥ 0 (rad/s)")
    shift = _auto_number(args.effort_shift, lambda v: abs(v) < float("inf"),
                         f"--effort-shift: '{args.effort_shift}' must be 'auto' or a finite number of seconds")
    out = Path(args.out)
    stem = out.with_suffix("")
    targets = [("--out", str(out))]
    if not args.payload:
        targets.append(("--friction-yaml", args.friction_yaml or f"{stem}.friction.yaml"))
    report_path = args.report or (f"{stem}.report.json" if out.suffix.lower() == ".json" else f"{stem}.json")
    targets.append(("--report", report_path))
    plot_path = None if (args.plot or "").lower() == "none" else (args.plot or f"{stem}.png")
    if plot_path:
        targets.append(("--plot", plot_path))
    from robot_dynamics_ros.robots import resolve

    paths.check_outputs(targets, [("--urdf", str(resolve(args.urdf).path)), ("--data", args.data)])
    model = _model(args)
    from robot_dynamics_tools.recordings import read_recording

    if args.max_data_mb is not None and not args.max_data_mb > 0:
        raise UserError(f"--max-data-mb: {args.max_data_mb} must be > 0")
    rec = read_recording(args.data, args.topic, **(
        {"max_bytes": args.max_data_mb * 2**20} if args.max_data_mb is not None else {}))
    scale = data_mod.parse_effort_scale(args.effort_scale, model.joint_names)
    prepared = data_mod.prepare(rec, model, joint_map=data_mod.parse_joint_map(args.joint_map),
                                effort_scale=scale, window=args.window, static=args.static)
    files: list[tuple[str, str, str]] = []  # (what, path, text)
    try:
        if args.payload:
            from robot_dynamics_ros.identification.payload import run_payload

            outcome = run_payload(model, args.payload, prepared, holdout=args.holdout,
                                  prior_weight=prior_weight, min_velocity=args.min_velocity,
                                  coulomb_velocity=v_s, effort_shift=shift)
            files.append(("--out", str(out), outputs.json_text(outcome.report["payload"])))
        else:
            outcome = pipeline.run(model, prepared, holdout=args.holdout, armature=args.armature,
                                   prior_weight=prior_weight, min_velocity=args.min_velocity,
                                   coulomb_velocity=v_s, effort_shift=shift)
            urdf_text, notes = outputs.identified_urdf(model, outcome.result)
            outcome.report["notes"] += notes
            files.append(("--out", str(out), urdf_text))
            files.append((targets[1][0], targets[1][1], friction_yaml(model, outcome.result)))
    except ValueError as exc:
        raise UserError(f"identify {args.data}: {exc}") from None
    outcome.report["data"] = str(args.data)
    outcome.report["outputs"] = [p for _, p, _ in files] + [report_path]
    files.append(("--report", report_path, outputs.json_text(outcome.report)))
    written = []
    try:
        for what, path, text in files:
            paths.write_text(path, text, what)
            written.append(path)
        if plot_path and outcome.t_val.size:
            pipeline.plot(plot_path, outcome, model.joint_names)
            written.append(plot_path)
    except UserError as exc:
        raise UserError(f"{exc} (written before the failure: {', '.join(written) or 'nothing'})") from None
    print(outputs.json_text(outcome.report) if args.json else _summary(outcome.report))
    if not args.json:
        print("wrote " + ", ".join(written), file=sys.stderr)
    return 0
