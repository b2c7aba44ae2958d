"""Shared test helpers (moved here from test/test_identified_model.py so tests of other areas import them from the harness)."""
from __future__ import annotations



VALUES = {"panda_joint1": (0.8, 0.61, 0.20, 0.31), "panda_joint2": (0.5, 0.40, -0.35, 0.27),
          "panda_joint3": (0.7, 0.30, 0.05, 0.19), "panda_joint4": (0.9, 0.55, 0.12, 0.22),
          "panda_joint5": (0.3, 0.20, -0.08, 0.11), "panda_joint6": (0.25, 0.15, 0.02, 0.09)}


def _yaml(path, values=VALUES):
    lines = ["robot_dynamics_friction:", "  version: 1", "  joints:"]
    for jn, (fc, fv, fo, ia) in values.items():
        lines.append(f"    {jn}: {{coulomb: {fc}, viscous: {fv}, offset: {fo}, armature: {ia}}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
