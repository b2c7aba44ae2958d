"""Every URDF of example-robot-data through ``robot-dynamics crossval`` (Pinocchio vs the in-package
Newton–Euler vs MuJoCo), or the reason it is refused.

    PYTHONPATH=$PWD python benchmarks/crossval_all.py [--samples N] [--no-mujoco] [--markdown] [--json]

Each file is loaded as the CLI loads it (``RobotModel.from_file``, lenient: warnings are counted), as a
fixed base: the root link of the URDF is the base (example-robot-data's legged and humanoid robots have no
floating joint in the URDF; Pinocchio adds one only on request). Pinocchio's own URDF parser is run first:
a file Pinocchio cannot read is listed as such. Prints one row per file: path (relative to the robots
directory), actuated joints, result (``pass``, ``FAIL`` or ``refused: <reason>``), the largest
Newton–Euler error against Pinocchio over tau, M, C·qd, g, the MuJoCo comparison, and the warnings.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path


def urdf_files() -> list[Path]:
    from robot_dynamics_ros.robots import example_robot_data_urdfs

    return example_robot_data_urdfs()


def _pinocchio_loads(path: Path) -> str | None:
    """None when Pinocchio's URDF parser reads the file, else its message (urdfdom prints to stderr:
    silenced here)."""
    import pinocchio as pin

    fd = sys.stderr.fileno()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            try:
                pin.buildModelFromUrdf(str(path))
            except Exception as exc:  # noqa: BLE001 - any parser failure is the answer
                return str(exc).splitlines()[0]
    finally:
        os.dup2(saved, fd)
        os.close(saved)
    return None


def check(path: Path, samples: int = 5, mujoco: bool = True, seed: int = 0) -> dict:
    """One row: {"file", "joints", "result", "max_error", "mujoco", "warnings"}."""
    from robot_dynamics_ros.dynamics.crossval import crossvalidate
    from robot_dynamics_ros.errors import UserError
    from robot_dynamics_ros.model import RobotModel
    from robot_dynamics_ros.robots import example_robot_data_dir

    row = {"file": str(path.relative_to(example_robot_data_dir())), "joints": None, "result": "",
           "max_error": None, "mujoco": "", "warnings": []}
    pin_error = _pinocchio_loads(path)
    if pin_error is not None:
        row["result"] = f"Pinocchio refuses it too: {pin_error.replace(str(path), row['file'])}"
        return row
    try:
        model = RobotModel.from_file(path)
    except UserError as exc:
        row["result"] = f"refused: {str(exc).split(': ', 1)[-1]}"
        return row
    row["joints"] = model.n
    row["warnings"] = list(model.warnings)
    # MuJoCo appends its compiler warnings to MUJOCO_LOG.TXT in the working directory: keep them out of the
    # checkout
    with tempfile.TemporaryDirectory() as scratch, contextlib.chdir(scratch), \
            contextlib.redirect_stderr(io.StringIO()):
        report = crossvalidate(model, samples=samples, seed=seed, mujoco=mujoco)
    row["result"] = "pass" if report.passed else "FAIL"
    row["max_error"] = report.worst("newton-euler")
    mj = report.worst("mujoco")
    if report.mujoco == "compared":
        row["mujoco"] = f"max err {mj:.1e}"
    else:  # MuJoCo's compiler checks inertias more strictly than Pinocchio: keep its own words, shortly
        row["mujoco"] = "not compiled: " + report.mujoco.rsplit("Error: ", 1)[-1].replace(
            "error 'inertia must have positive eigenvalues' in fullinertia", "inertia must have positive eigenvalues")
    return row


def markdown(rows: list[dict]) -> str:
    lines = ["| file | joints | result | max error NE vs Pinocchio | MuJoCo vs Pinocchio | warnings |",
             "|---|---:|---|---:|---|---:|"]
    for r in rows:
        err = f"{r['max_error']:.1e}" if r["max_error"] is not None else ""
        lines.append(f"| {r['file']} | {r['joints'] if r['joints'] is not None else ''} | {r['result']} | {err} | "
                     f"{r['mujoco']} | {len(r['warnings']) or ''} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--no-mujoco", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = [check(p, samples=args.samples, mujoco=not args.no_mujoco) for p in urdf_files()]
    if args.json:
        print(json.dumps(rows, indent=2))
    elif args.markdown:
        print(markdown(rows))
    else:
        for r in rows:
            err = f"{r['max_error']:.1e}" if r["max_error"] is not None else "-"
            print(f"{r['file']:<60} {r['joints'] if r['joints'] is not None else '-':>4} {err:>9}  {r['result']}"
                  f"  [{r['mujoco']}] warnings={len(r['warnings'])}")
    return 1 if any(r["result"] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
