"""The observer's per-sample terms on every URDF of example-robot-data: PinocchioDynamics.momentum_terms
against the in-package Newton–Euler engine, independently: p = M q̇ from its CRBA, and Cᵀq̇ − g from the
identity Cᵀq̇ = Ṁq̇ − Cq̇ (Ṁ by a central difference of its M along q̇, Cq̇ and g from its RNEA)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.errors import URDFError, UserError
from robot_dynamics_ros.model import RobotModel

_spec = importlib.util.spec_from_file_location(
    "crossval_all", Path(__file__).resolve().parent.parent / "benchmarks" / "crossval_all.py")
crossval_all = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crossval_all)


def test_momentum_terms_match_newton_euler_on_every_loadable_robot():
    rng = np.random.default_rng(7)
    checked, worst = 0, 0.0
    for path in crossval_all.urdf_files():
        try:
            model = RobotModel.from_file(path)
            pin_eng, ne = PinocchioDynamics(model), NewtonEulerDynamics(model)
        except (URDFError, UserError):
            continue  # refused with its reason: docs/dynamics.md, test_example_robot_data.py
        if model.has_mimic:
            continue  # Pinocchio 4.1's Coriolis matrix disagrees with its own RNEA on mimic models
        q = model.random_configuration(rng)
        qd = rng.uniform(-1.0, 1.0, model.n)
        p, beta = pin_eng.momentum_terms(q, qd)
        h = 1e-6
        Mdot = (ne.mass_matrix((q + h * qd)[None])[0] - ne.mass_matrix((q - h * qd)[None])[0]) / (2 * h)
        g = ne.gravity(q[None])[0]
        c_qd = ne.rnea(q[None], qd[None], np.zeros((1, model.n)))[0] - g
        expected_beta = Mdot @ qd - c_qd - g
        scale = 1.0 + np.abs(expected_beta).max() + np.abs(g).max()
        np.testing.assert_allclose(p, ne.mass_matrix(q[None])[0] @ qd, atol=1e-10 * (1 + np.abs(p).max()),
                                   err_msg=path.name)
        err = np.abs(beta - expected_beta).max() / scale
        assert err < 1e-6, (path.name, err)
        worst = max(worst, err)
        checked += 1
    assert checked >= 50, checked
    print(f"{checked} robots, worst relative error {worst:.1e}")
