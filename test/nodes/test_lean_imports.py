"""Lean nodes (issue 23): a node's own process loads only what its run-time path needs.

Each node runs in a process of its own (``robot-dynamics run``, ``ros2 launch``), so what one node imports
is that process's resident memory: numba's LLVM ~100 MB, scipy, mujoco, Pinocchio ~48 MB. Here a fresh
interpreter builds the nodes through their public constructors (configured and activated, ``autostart``, the
Panda of ``config/panda.yaml``) and reports ``sys.modules``; the RSS itself is measured by
``benchmarks/bench_memory.py``, not here. Two processes, started together: the three control nodes share
their allowed set (Pinocchio yes; numba, scipy, mujoco, matplotlib no), the simulator has its own (mujoco
yes; Pinocchio, numba, scipy, matplotlib no). The retiming service needs numba (its kernels, which load
scipy's core) but neither Pinocchio nor the jerk solver's scipy.sparse and HiGHS until a jerk-limited request.
"""
from __future__ import annotations

import json
import subprocess
import sys

from robot_dynamics_testing import REPO, child_env

#: node names (``robot-dynamics run``) -> heavy top-level modules their process must not import
FORBIDDEN = {
    ("gravity_compensation", "computed_torque", "external_torque_observer"):
        ("numba", "llvmlite", "scipy", "mujoco", "matplotlib"),
    ("mujoco_simulator",): ("pinocchio", "numba", "llvmlite", "scipy", "matplotlib"),
    ("retiming_service",): ("pinocchio", "scipy.sparse", "scipy.optimize", "mujoco", "matplotlib"),
}
#: a module each group does load: the check sees what a node imports
LOADED = {("mujoco_simulator",): "mujoco", ("retiming_service",): "numba"}
HEAVY = sorted({m for mods in FORBIDDEN.values() for m in mods} | set(LOADED.values()))

CHILD = """
import json, sys
import rclpy
from robot_dynamics_tools.commands.run import start_nodes
names, params = sys.argv[1].split(","), sys.argv[2]
ctx = rclpy.Context()
rclpy.init(context=ctx, args=["lean", "--ros-args", "--params-file", params, "-p", "crossval_samples:=0"])
nodes = start_nodes(names, context=ctx, urdf="panda")
print(json.dumps({"nodes": [n.get_name() for n in nodes],
                  "loaded": sorted(m for m in json.loads(sys.argv[3]) if m in sys.modules)}))
for n in nodes:
    n.destroy_node()
rclpy.shutdown(context=ctx)
"""


def test_each_node_process_imports_no_heavy_module_it_does_not_use():
    params = str(REPO / "config" / "panda.yaml")
    procs = {names: subprocess.Popen([sys.executable, "-c", CHILD, ",".join(names), params, json.dumps(HEAVY)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
             for names in FORBIDDEN}
    done = {names: (proc.communicate(timeout=120), proc.returncode) for names, proc in procs.items()}
    for names, ((out, err), code) in done.items():
        assert code == 0, err[-2000:]
        report = json.loads(out.strip().splitlines()[-1])
        assert report["nodes"] == list(names), report   # built, configured and activated (autostart raises)
        assert not set(report["loaded"]) & set(FORBIDDEN[names]), (names, report["loaded"])
        assert LOADED.get(names, "pinocchio") in report["loaded"], report
