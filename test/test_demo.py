"""The demo's closed loop (simulator + gravity node over DDS) and its CLI contract."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from robot_dynamics_ros.commands.demo import run_demo


def test_demo_core_holds_with_compensation_and_falls_without(tmp_path):
    lines = []
    summary = run_demo("panda", duration=0.6, rate=1000.0, out=tmp_path, make_plot=True, log=lines.append)
    assert summary["robot"] == "panda"
    assert summary["max_drift_compensated_rad"] < 1e-3
    assert summary["max_drift_uncompensated_rad"] >= 0.1
    assert summary["samples"] >= 2 * 600
    assert (tmp_path / "demo.png").stat().st_size > 10_000
    saved = json.loads((tmp_path / "demo.json").read_text())
    assert saved["max_drift_compensated_rad"] == summary["max_drift_compensated_rad"]
    # the drift table names every joint
    table = "\n".join(str(x) for x in lines)
    assert all(f"panda_joint{i}" in table for i in range(1, 8))
    assert np.isfinite(saved["final_drift_uncompensated_rad"]).all()


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "robot_dynamics_ros.cli", "demo", *args],
                          capture_output=True, text=True, timeout=120)


def test_missing_and_malformed_urdf_give_one_line_error(tmp_path):
    r = _cli("--robot", str(tmp_path / "nope.urdf"), "--out", str(tmp_path))
    assert r.returncode == 1
    assert "nope.urdf" in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    bad = tmp_path / "broken.urdf"
    bad.write_text("<robot name='x'><link name='a'><inertial><mass value='-1'/></inertial></link>")
    r = _cli("--robot", str(bad), "--out", str(tmp_path))
    assert r.returncode == 1
    assert "broken.urdf" in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
