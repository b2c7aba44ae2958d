"""The demo's closed loop (simulator + gravity node over DDS) and its CLI contract."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from robot_dynamics_tools.commands.demo import run_demo


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
    return subprocess.run([sys.executable, "-m", "robot_dynamics_tools.cli", "demo", *args],
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


def test_payload_parameter_end_to_end():
    """A 2 kg payload in the simulated hand: the arm sags until the gravity node is told the payload."""
    from rclpy.parameter import Parameter

    from robot_dynamics_tools.commands.demo import DemoRunner

    payload = [Parameter("payload.link", value="panda_hand"), Parameter("payload.mass", value=2.0),
               Parameter("payload.com", value=[0.0, 0.0, 0.1])]
    with DemoRunner("panda", rate=1000.0, log=lambda *a: None) as r:
        assert r.sim_node.set_parameters_atomically(payload).successful
        unknown = r.run_phase(True, 0.4)
        assert np.abs(unknown["q"] - unknown["q0"]).max() > 5e-3
        assert r.gravity_node.set_parameters_atomically(payload).successful
        known = r.run_phase(True, 0.4)
        assert np.abs(known["q"] - known["q0"]).max() < 1e-6
        # the simulator refuses a payload on a link it does not have
        bad = r.sim_node.set_parameters([Parameter("payload.link", value="nope")])[0]
        assert not bad.successful and "nope" in bad.reason
        r.gravity_node.set_parameters([Parameter("payload.link", value="")])   # shared model: leave it clean


def test_demo_realtime_free_running_simulator(tmp_path):
    """Same closed loop with the simulator in wall-clock time: commands arrive with the real DDS latency."""
    summary = run_demo("panda", duration=0.6, rate=500.0, out=tmp_path, make_plot=False, log=lambda *a: None,
                       realtime=True)
    assert summary["simulator"] == "realtime"
    assert summary["max_drift_compensated_rad"] < 1e-3
    assert summary["max_drift_uncompensated_rad"] >= 0.1
