"""``NewtonEulerDynamics.path_torque_terms`` — the a, b, c of τ = a s̈ + b ṡ² + c that the retimer's torque
rows use — on every URDF of example-robot-data, against Pinocchio called directly on the model it builds
from the file (``reference.PinByName``: CRBA, the Coriolis matrix and g, not RNEA):
a = M q', b = M q'' + C(q, q') q', c = g, with a rotor inertia (armature) on the diagonal of M."""
from __future__ import annotations

import numpy as np

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.errors import URDFError, UserError
from robot_dynamics_ros.friction import JointFriction
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import example_robot_data_urdfs
from robot_dynamics_testing.reference import PinByName


def test_path_torque_terms_match_pinocchio_on_every_loadable_robot_with_armature():
    rng = np.random.default_rng(11)
    checked = worst = 0
    for path in example_robot_data_urdfs():
        try:
            base = RobotModel.from_file(path)
        except (URDFError, UserError):
            continue  # refused with its reason (test_example_robot_data.py)
        if base.has_mimic:
            continue  # Pinocchio's own URDF model has no mimic coupling to compare with
        z = np.zeros(base.n)
        arm = rng.uniform(0.0, 0.5, base.n)
        model = base.with_settings(friction=JointFriction(z, z, z, arm, "test"))
        ref = PinByName.from_urdf(path, model.joint_names)
        P = 5
        q = np.array([model.random_configuration(rng) for _ in range(P)])
        dq, ddq = rng.uniform(-1, 1, (P, model.n)), rng.uniform(-2, 2, (P, model.n))
        idx = np.array([4, 0, 2])
        a, b, c = NewtonEulerDynamics(model).path_torque_terms(q, dq, ddq, idx)
        for r, k in enumerate(idx):
            g = ref.gravity(q[k])
            want_a = ref.computed_torque(q[k], z, dq[k]) - g + arm * dq[k]           # M q'
            want_b = ref.computed_torque(q[k], dq[k], ddq[k]) - g + arm * ddq[k]     # M q'' + C(q, q') q'
            scale = 1.0 + max(np.abs(w).max() for w in (want_a, want_b, g))
            for got, want in ((a[r], want_a), (b[r], want_b), (c[r], g)):
                err = np.abs(got - want).max() / scale
                worst = max(worst, err)
                assert err < 1e-11, (path.name, err)
        checked += 1
    assert checked >= 40, checked
    print(f"{checked} robots, worst relative error {worst:.1e}")
