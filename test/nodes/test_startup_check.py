"""The gravity node's start-up cross-check in a child process (nodes/startup_check.py): the child rebuilds
the node's model from its recipe, and a child that cannot check is a failed check."""
from __future__ import annotations

import json

import numpy as np
import pytest

from robot_dynamics_ros import robots
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.nodes import startup_check
from robot_dynamics_ros.nodes.model_source import model_with_params, shared_model

ROOT_CONFIG = "config/panda_joint_limits.yaml"


def test_the_recipe_rebuilds_the_same_dynamics():
    entry = robots.resolve("panda")
    base = shared_model(str(entry.path), entry.held_joints, ROOT_CONFIG)
    model = model_with_params(base, {"gravity": [0.5, -1.0, -9.7], "payload.link": "panda_link7", "payload.mass": 1.5,
                                     "payload.com": [0.01, 0.0, 0.08],
                                     "payload.inertia": [0.004, 0.0, 0.0, 0.005, 0.0, 0.003]})
    spec = json.loads(json.dumps(startup_check.model_spec(model, joint_limits=ROOT_CONFIG)))
    rebuilt = startup_check.model_from_spec(spec)
    assert rebuilt.joint_names == model.joint_names
    np.testing.assert_array_equal(rebuilt.lower, model.lower)
    np.testing.assert_array_equal(rebuilt.upper, model.upper)
    # Pinocchio measures both: gravity torque, mass matrix and RNEA at random states
    a, b = PinocchioDynamics(model), PinocchioDynamics(rebuilt)
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = rng.uniform(model.lower, model.upper)
        qd, qdd = rng.normal(size=model.n), rng.normal(size=model.n)
        np.testing.assert_array_equal(b.gravity(q), a.gravity(q))
        np.testing.assert_array_equal(b.mass_matrix(q), a.mass_matrix(q))
        np.testing.assert_array_equal(b.rnea(q, qd, qdd), a.rnea(q, qd, qdd))


def test_a_child_that_cannot_check_is_a_failed_check():
    entry = robots.resolve("panda")
    spec = startup_check.model_spec(shared_model(str(entry.path), entry.held_joints))
    spec["urdf"] = "<robot name='broken'><link name='a'/>"
    ok, text = startup_check.run_in_child(spec, 3)
    assert not ok and text.startswith("crossval could not run:"), text


@pytest.mark.parametrize("samples", [4])
def test_the_child_passes_the_panda(samples):
    entry = robots.resolve("panda")
    spec = startup_check.model_spec(shared_model(str(entry.path), entry.held_joints))
    ok, text = startup_check.run_in_child(spec, samples)
    assert ok and text.startswith(f"passed: {samples} states"), text
