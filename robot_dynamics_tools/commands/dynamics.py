"""``robot-dynamics dynamics``: tau, g, M and C·qd at one state, by joint name.

    robot-dynamics dynamics --urdf PATH|ROBOT --q Q [--qd QD] [--qdd QDD]
                            [--engine pinocchio|newton-euler] [--held J=V ...]
                            [--payload LINK,MASS[,CX,CY,CZ]] [--gravity GX,GY,GZ] [--strict] [--json]

Q, QD, QDD are either n comma-separated numbers in the model's actuated joint order (printed by the
command; URDF tree order) or ``name=value`` pairs (missing joints are 0). Units: rad, rad/s, rad/s²
(m, m/s, m/s² for prismatic joints) in; N·m (N) and kg·m² out.

``--json`` prints ``{"robot", "engine", "joint_names", "q", "qd", "qdd", "tau", "g", "C_qd", "M",
"units"}`` where the vectors are objects keyed by joint name and ``M`` is a list of rows in
``joint_names`` order.

The URDF is loaded leniently: what was accepted with a warning (non-physical inertias,
the fixed base's inertia ignored, links without mass, a broken ``<mimic>``) is printed on stderr, one
``warning:`` line each; ``--strict`` refuses the URDF instead (exit 1, one line).
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from robot_dynamics_tools.commands._args import add_robot_arguments, model_from_args, number, print_to_pipe
from robot_dynamics_ros.errors import UserError


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_robot_arguments(parser)
    parser.add_argument("--q", required=True, help="joint positions, rad or m: Q1,Q2,... (all joints, model order) or NAME=V,... (by name; "
                        "joints not named are 0)")
    parser.add_argument("--qd", help="joint velocities, same forms, joints not named 0 (default 0)")
    parser.add_argument("--qdd", help="joint accelerations, same forms, joints not named 0 (default 0)")
    parser.add_argument("--engine", choices=("pinocchio", "newton-euler"), default="pinocchio",
                        help="dynamics engine (default pinocchio)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def parse_vector(text: str | None, joint_names: tuple[str, ...], what: str) -> np.ndarray:
    """``"0.1,0.2"`` (all n joints, model order) or ``"j1=0.1,j3=-0.2"`` (by name, others 0) -> (n,)."""
    n = len(joint_names)
    if text is None:
        return np.zeros(n)
    items = [s.strip() for s in text.split(",") if s.strip()]
    out = np.zeros(n)
    if items and all("=" in s for s in items):
        index = {jn: i for i, jn in enumerate(joint_names)}
        seen: set[str] = set()
        for s in items:
            name, _, value = s.partition("=")
            name = name.strip()
            if name not in index:
                raise UserError(f"{what}: '{name}' is not an actuated joint (joints: {', '.join(joint_names)})")
            if name in seen:
                raise UserError(f"{what}: joint '{name}' appears twice")
            seen.add(name)
            out[index[name]] = number(value, f"{what} {name}")
        return out
    if any("=" in s for s in items):
        raise UserError(f"{what}: mix of NAME=VALUE and plain values in '{text}'")
    if len(items) != n:
        raise UserError(f"{what}: expected {n} values for joints {', '.join(joint_names)}, got {len(items)}")
    for i, s in enumerate(items):
        out[i] = number(s, f"{what} {joint_names[i]}")
    return out


def evaluate(model, engine: str, q, qd, qdd) -> dict[str, np.ndarray]:
    """tau, g, C·qd (n,) and M (n, n) with the chosen engine."""
    if engine == "pinocchio":
        from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics

        eng = PinocchioDynamics(model)
        return {"tau": eng.rnea(q, qd, qdd), "g": eng.gravity(q), "C_qd": eng.coriolis_qd(q, qd),
                "M": eng.mass_matrix(q)}
    from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics

    eng = NewtonEulerDynamics(model)
    return {"tau": eng.rnea(q, qd, qdd), "g": eng.gravity(q), "C_qd": eng.coriolis_qd(q, qd),
            "M": eng.mass_matrix(q)}


def run(args) -> int:
    model = model_from_args(args)
    names = model.joint_names
    q = parse_vector(args.q, names, "--q")
    qd = parse_vector(args.qd, names, "--qd")
    qdd = parse_vector(args.qdd, names, "--qdd")
    res = evaluate(model, args.engine, q, qd, qdd)
    if args.json:
        def by_name(v):
            return {jn: float(x) for jn, x in zip(names, v)}

        out = {"robot": model.description.name, "engine": args.engine, "joint_names": list(names),
               "held_joints": dict(model.held_joints),
               "payload": None if model.payload is None else {"link": model.payload.link, "mass": model.payload.mass,
                                                             "com": model.payload.com.tolist()},
               "gravity": model.gravity.tolist(),
               "q": by_name(q), "qd": by_name(qd), "qdd": by_name(qdd),
               "tau": by_name(res["tau"]), "g": by_name(res["g"]), "C_qd": by_name(res["C_qd"]),
               "M": res["M"].tolist(),
               "units": {"q": "rad or m", "qd": "rad/s or m/s", "qdd": "rad/s² or m/s²", "tau": "N·m or N",
                         "g": "N·m or N", "C_qd": "N·m or N", "M": "kg·m² (kg for prismatic rows/columns)"}}
        print_to_pipe(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    w = max(len(jn) for jn in names)
    lines = [f"robot {model.description.name}, engine {args.engine}, held {dict(model.held_joints) or 'none'}",
             f"{'joint':<{w}} {'q':>10} {'qd':>10} {'qdd':>10} {'tau':>12} {'g':>12} {'C·qd':>12}"]
    for i, jn in enumerate(names):
        lines.append(f"{jn:<{w}} {q[i]:>10.4f} {qd[i]:>10.4f} {qdd[i]:>10.4f} {res['tau'][i]:>12.6f} "
                     f"{res['g'][i]:>12.6f} {res['C_qd'][i]:>12.6f}")
    lines.append("M (rows and columns in the joint order above):")
    with np.printoptions(precision=6, suppress=True, linewidth=160):
        lines.append(str(res["M"]))
    print_to_pipe("\n".join(lines))
    return 0
