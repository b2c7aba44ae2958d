"""Fuzzing our URDF reader: any mutation of a valid URDF either loads or raises URDFError (a one-line
message), never another exception. And what loads is consistent with Pinocchio's own parser."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from xml.sax.saxutils import quoteattr

import numpy as np
import pinocchio as pin
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.errors import URDFError
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.robots import ROBOTS

BASE = ROBOTS["ur5"].path.read_text()
ELEMENTS = ET.fromstring(BASE)
ATTRS = [(i, el.tag, k) for i, el in enumerate(ELEMENTS.iter()) for k in el.attrib]
VALUES = st.one_of(
    st.sampled_from(["", "0", "-1", "nan", "inf", "1e400", "0 0", "0 0 0", "1 2 3 4", "x", "-0.5 0.2 1",
                     "world", "base_link", "shoulder_link", "floating", "planar", "fixed", "continuous"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=8),
)


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(0, len(ATTRS) - 1), VALUES), min_size=1, max_size=4),
       st.lists(st.integers(0, 200), max_size=2))
def test_mutated_urdf_loads_or_raises_urdf_error(changes, removals):
    root = ET.fromstring(BASE)
    elements = list(root.iter())
    for idx, value in changes:
        i, _, key = ATTRS[idx]
        elements[i].set(key, value)
    for r in removals:  # drop a child element somewhere (an <inertial>, an <axis>, a whole <joint>, ...)
        parents = [el for el in root.iter() if len(el)]
        parent = parents[r % len(parents)]
        parent.remove(parent[r % len(parent)])
    text = ET.tostring(root, encoding="unicode")
    try:
        model = RobotModel.from_urdf(text)
    except URDFError as exc:
        msg = str(exc)
        assert msg and "\n" not in msg
        return
    # it loaded: our reading and Pinocchio's agree on the gravity torque (NaN-free) at a random state
    eng = PinocchioDynamics(model)
    q = model.random_configuration(np.random.default_rng(0))
    g = eng.gravity(q)
    from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics

    # absolute 1e-9 N·m at arm scale; fuzzed masses (up to MAX_LINK_MASS) scale the rounding with them
    np.testing.assert_allclose(NewtonEulerDynamics(model).gravity(q), g, rtol=0, atol=1e-9 * max(1.0, np.abs(g).max()))
    assert pin.buildModelFromXML(model.reduced_urdf()).nv == model.n


TAGS = st.sampled_from(["robot", "link", "joint", "inertial", "mass", "inertia", "origin", "visual", "parent",
                        "child", "axis", "limit", "mimic", "x"])
ATTR = st.dictionaries(st.sampled_from(["name", "type", "value", "xyz", "rpy", "link", "ixx", "izz", "joint"]),
                       VALUES, max_size=3)


def _xml(tree) -> str:
    tag, attrs, children = tree
    a = "".join(f" {k}={quoteattr(v)}" for k, v in attrs.items())
    return f"<{tag}{a}>" + "".join(_xml(c) for c in children) + f"</{tag}>"


TREES = st.recursive(st.tuples(TAGS, ATTR, st.just([])),
                     lambda kids: st.tuples(TAGS, ATTR, st.lists(kids, max_size=4)), max_leaves=30)


@settings(max_examples=80)
@given(st.one_of(st.text(max_size=200), TREES.map(_xml), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_any_text_loads_or_raises_one_short_line(text):
    try:
        RobotModel.from_text(text)
    except URDFError as exc:
        msg = str(exc)
        assert msg and "\n" not in msg and len(msg) < 400
