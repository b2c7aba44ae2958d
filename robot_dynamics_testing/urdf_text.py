"""Small serial-chain URDF texts for tests: each body a joint to its parent and a link with its inertia.

    serial_urdf("two_axis", [Body("a", "revolute", mass=2, com=(0.2, 0, 0), inertia=(0.01, 0.02, 0.02),
                                  limit=(-3, 3, 50, 1.5)), ...])
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Body:
    """Joint ``name`` (``jtype``, ``axis``, ``origin`` from the parent link's frame, ``limit`` = lower, upper,
    effort, velocity) and its child link ``link`` (default ``l_<name>``): ``mass`` kg, ``com`` m,
    principal ``inertia`` (ixx, iyy, izz) kg·m² about the COM."""

    name: str
    jtype: str
    mass: float
    com: tuple = (0.0, 0.0, 0.0)
    inertia: tuple = (0.01, 0.01, 0.01)
    limit: tuple = (-3.0, 3.0, 10.0, 2.0)
    axis: tuple = (0.0, 0.0, 1.0)
    origin: tuple = (0.0, 0.0, 0.0)
    link: str = ""


def _xyz(v) -> str:
    return " ".join(repr(float(x)) for x in v)


def serial_urdf(robot: str, bodies: list[Body], base: str = "base") -> str:
    """The URDF text of the chain ``base`` → bodies[0] → bodies[1] → ..."""
    parts, parent = [f'<robot name="{robot}">', f'<link name="{base}"/>'], base
    for b in bodies:
        link = b.link or f"l_{b.name}"
        ixx, iyy, izz = b.inertia
        lo, hi, effort, velocity = b.limit
        parts.append(f'<link name="{link}"><inertial><origin xyz="{_xyz(b.com)}"/><mass value="{b.mass!r}"/>'
                     f'<inertia ixx="{ixx!r}" ixy="0" ixz="0" iyy="{iyy!r}" iyz="0" izz="{izz!r}"/></inertial></link>')
        parts.append(f'<joint name="{b.name}" type="{b.jtype}"><origin xyz="{_xyz(b.origin)}"/>'
                     f'<parent link="{parent}"/><child link="{link}"/><axis xyz="{_xyz(b.axis)}"/>'
                     f'<limit lower="{lo!r}" upper="{hi!r}" effort="{effort!r}" velocity="{velocity!r}"/></joint>')
        parent = link
    parts.append("</robot>")
    return "\n".join(parts)
