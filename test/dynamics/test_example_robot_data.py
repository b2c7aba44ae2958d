"""Every URDF of example-robot-data loads and cross-validates (Newton–Euler vs Pinocchio, MuJoCo where it
compiles), or is refused with the reason that docs/dynamics.md lists for it; the table there is checked
row by row against a fresh run (3 random states per robot)."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("crossval_all", ROOT / "benchmarks" / "crossval_all.py")
crossval_all = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crossval_all)


def _documented_rows() -> dict[str, dict]:
    text = (ROOT / "docs" / "dynamics.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- example-robot-data table:.*?-->\n(.*?)<!-- end of example-robot-data table -->", text,
                      re.S).group(1)
    rows = {}
    for line in block.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = {"joints": int(cells[1]) if cells[1] else None, "result": cells[2],
                          "mujoco_compiled": cells[4].startswith("max err"), "warnings": int(cells[5] or 0)}
    return rows


@pytest.fixture(scope="module")
def results():
    return {r["file"]: r for r in (crossval_all.check(p, samples=3) for p in crossval_all.urdf_files())}


def test_the_documented_table_lists_every_file(results):
    assert len(results) == 69
    assert sorted(_documented_rows()) == sorted(results)


def test_every_file_passes_or_is_refused_as_documented(results):
    doc = _documented_rows()
    for name, r in results.items():
        d = doc[name]
        assert r["result"] == d["result"], name
        assert r["joints"] == d["joints"], name
        assert len(r["warnings"]) == d["warnings"], name
        assert r["mujoco"].startswith("max err") == d["mujoco_compiled"], name
        if r["result"] == "pass":
            assert r["max_error"] <= 1e-9, name  # crossval's own tolerance, N·m and kg·m²
        else:
            assert r["result"].startswith(("refused: ", "Pinocchio refuses it too: ")), name


def test_refusals_are_the_physically_impossible_or_empty_ones(results):
    refused = {n: r["result"] for n, r in results.items() if r["result"] != "pass"}
    assert refused == {
        "hector_description/robots/quadrotor_base.urdf":
            "refused: no actuated joints (every moving joint is held, mimic or fixed)",
        "iris_description/robots/iris_simple.urdf":
            "refused: no actuated joints (every moving joint is held, mimic or fixed)",
        "romeo_description/urdf/romeo_laas_small.urdf":
            "refused: link 'LHipPitch_link' <inertial>: inertia is not positive semi-definite (principal moments "
            "-0.00272042, 0.0395126, 0.0540499 kg·m²)",
        "ur_description/urdf/ur3.urdf":
            "Pinocchio refuses it too: The file ur_description/urdf/ur3.urdf does not contain a valid URDF model.",
    }


def test_the_refused_romeo_link_is_indefinite_by_its_own_numbers():
    # independent of our reader: the six numbers of the file, through numpy
    import xml.etree.ElementTree as ET

    import numpy as np

    from robot_dynamics_ros.robots import example_robot_data_dir

    root = ET.parse(example_robot_data_dir() / "romeo_description/urdf/romeo_laas_small.urdf").getroot()
    link = next(el for el in root.findall("link") if el.get("name") == "LHipPitch_link")
    a = {k: float(v) for k, v in link.find("inertial/inertia").attrib.items()}
    I = np.array([[a["ixx"], a["ixy"], a["ixz"]], [a["ixy"], a["iyy"], a["iyz"]], [a["ixz"], a["iyz"], a["izz"]]])
    w = np.linalg.eigvalsh(I)
    assert w[0] < -0.05 * w[-1]  # 5 % of the largest moment below zero: no rounding
