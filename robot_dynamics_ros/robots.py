"""Where robot descriptions come from: the bundled planar 2R arm and the real arms of example-robot-data.

``example-robot-data`` (PyPI) installs the URDFs of real robots under
``<site-packages>/cmeel.prefix/share/example-robot-data/robots``. This module only resolves paths and
remembers, per robot, which joints a demo holds fixed (e.g. Panda's fingers); it does not parse URDFs
(see :mod:`robot_dynamics_ros.description`).
"""
from __future__ import annotations

import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.share import data_file


def package_urdf(name: str) -> str:
    """One of this package's own URDFs (``urdf/`` in its share directory after any install, or the source
    tree: :func:`robot_dynamics_ros.share.data_file`); the name itself when it is not found (the loader
    then reports the missing file)."""
    found = data_file("urdf", name)
    return str(found) if found is not None else name


def example_robot_data_dir() -> Path:
    """Return ``.../cmeel.prefix/share/example-robot-data/robots``.

    Raises:
        UserError: example-robot-data is not installed in this environment.
    """
    candidates = [Path(sysconfig.get_paths()["purelib"]), Path(sysconfig.get_paths()["platlib"])]
    for base in candidates:
        p = base / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
        if p.is_dir():
            return p
    raise UserError("example-robot-data is not installed (pip install example-robot-data)")


def example_robot_data_urdfs() -> list[Path]:
    """Every ``*.urdf`` of example-robot-data (sorted paths; see :func:`example_robot_data_dir`)."""
    return sorted(example_robot_data_dir().glob("**/*.urdf"))


@dataclass(frozen=True)
class RobotEntry:
    """A named robot: URDF path relative to example-robot-data (or absolute), joints held fixed, a pose."""

    name: str
    urdf: str
    held_joints: dict[str, float] = field(default_factory=dict)
    #: a non-trivial pose (rad), joint name -> value, used by demos
    demo_pose: dict[str, float] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        p = Path(self.urdf)
        return p if p.is_absolute() else example_robot_data_dir() / p


#: Fixed-base arms of example-robot-data used by demos, tests and benchmarks.
ROBOTS: dict[str, RobotEntry] = {
    "panda": RobotEntry(
        "panda",
        "panda_description/urdf/panda.urdf",
        held_joints={"panda_finger_joint1": 0.02, "panda_finger_joint2": 0.02},
        demo_pose={"panda_joint1": 0.3, "panda_joint2": 0.6, "panda_joint3": -0.4, "panda_joint4": -1.6,
                   "panda_joint5": 0.5, "panda_joint6": 1.9, "panda_joint7": 0.7},
    ),
    "ur5": RobotEntry(
        "ur5",
        "ur_description/urdf/ur5_robot.urdf",
        demo_pose={"shoulder_pan_joint": 0.4, "shoulder_lift_joint": -1.0, "elbow_joint": 1.2,
                   "wrist_1_joint": -0.8, "wrist_2_joint": 1.2, "wrist_3_joint": 0.3},
    ),
    # the case study's arm (robot-dynamics casestudy); config/ur10_joint_limits.yaml and
    # config/ur10_motor_limits.yaml are its bundled limits
    "ur10": RobotEntry(
        "ur10",
        "ur_description/urdf/ur10_robot.urdf",
        demo_pose={"shoulder_pan_joint": 0.4, "shoulder_lift_joint": -1.0, "elbow_joint": 1.2,
                   "wrist_1_joint": -0.8, "wrist_2_joint": 1.2, "wrist_3_joint": 0.3},
    ),
    "kinova": RobotEntry("kinova", "kinova_description/robots/kinova.urdf"),
    "z1": RobotEntry("z1", "z1_description/urdf/z1.urdf"),
    "so100": RobotEntry("so100", "so_arm_description/urdf/so100.urdf"),
    "baxter": RobotEntry("baxter", "baxter_description/urdf/baxter.urdf"),
    "talos_left_arm": RobotEntry("talos_left_arm", "talos_data/robots/talos_left_arm.urdf"),
    "xarm7": RobotEntry("xarm7", "xarm_description/urdf/xarm7.urdf"),
    "planar_2r": RobotEntry("planar_2r", package_urdf("planar_2r.urdf")),
}

DEFAULT_ROBOT = "panda"


def bundled_joint_limits(name: str | Path | None) -> str | None:
    """The package's ``config/<name>_joint_limits.yaml`` for a bundled robot name that has one, else None
    (a URDF path, an unknown name, or no such file): the default joint limits of ``run``, ``retime`` and
    ``track``."""
    if not name or str(name) not in ROBOTS:
        return None

    found = data_file("config", f"{name}_joint_limits.yaml")
    return str(found) if found is not None else None


def resolve(name_or_path: str | Path) -> RobotEntry:
    """Return the :class:`RobotEntry` for a robot name in :data:`ROBOTS` or a URDF file path.

    Raises:
        UserError: a directory, or neither a known robot name nor an existing file.
    """
    key = str(name_or_path)
    if key in ROBOTS:
        return ROBOTS[key]
    p = Path(key).expanduser()
    if p.is_file():
        return RobotEntry(p.stem, str(p.resolve()))
    if p.is_dir():
        raise UserError(f"URDF '{key}': is a directory, not a URDF file")
    raise UserError(f"URDF '{key}': no such file, and not one of the known robots {sorted(ROBOTS)}")
