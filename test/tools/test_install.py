"""A normal (non-editable) install finds its bundled data through the share directory: the package is
installed with pip into a temporary prefix and imported from there, outside the source tree."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_non_editable_install_resolves_bundled_robot_and_configs(tmp_path):
    import shutil

    src = tmp_path / "src"  # a copy: setuptools writes build/ and egg-info next to setup.py
    for name in ("robot_dynamics_ros", "resource", "launch", "config", "urdf"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    for name in ("setup.py", "setup.cfg", "package.xml"):
        shutil.copy2(REPO / name, src / name)
    prefix = tmp_path / "prefix"
    # --ignore-installed: without it pip uninstalls the environment's own (editable) robot_dynamics_ros first
    build = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                            "--ignore-installed", "--prefix", str(prefix), str(src)], capture_output=True,
                           text=True, timeout=300, cwd=tmp_path)
    assert build.returncode == 0, build.stderr[-2000:]
    site = next(prefix.glob("lib/python*/site-packages"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["PYTHONPATH"] = str(site)
    env["AMENT_PREFIX_PATH"] = os.pathsep.join([str(prefix), env.get("AMENT_PREFIX_PATH", "")]).rstrip(os.pathsep)
    code = ("import json, robot_dynamics_ros\n"
            "from robot_dynamics_ros import robots, share\n"
            "print(json.dumps({'pkg': robot_dynamics_ros.__file__, 'urdf': str(robots.resolve('planar_2r').path),"
            " 'limits': share.resolve_config_file('panda_joint_limits.yaml')}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    share = prefix / "share" / "robot_dynamics_ros"
    assert got["pkg"].startswith(str(site))  # imported from the install, not the checkout
    assert Path(got["urdf"]) == share / "urdf" / "planar_2r.urdf"
    assert Path(got["limits"]) == share / "config" / "panda_joint_limits.yaml"
