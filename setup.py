"""ament_python package definition (also installable with pip, as `make` does)."""
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "robot_dynamics_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    # The runtime package, the developer tools (the `robot-dynamics` command) and the shared test and
    # benchmark harness: three top-level packages; the runtime package imports neither of the others.
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*", "robot_dynamics_tools", "robot_dynamics_tools.*",
                                    "robot_dynamics_testing", "robot_dynamics_testing.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
        (f"share/{PACKAGE}/urdf", glob("urdf/*.urdf")),
    ],
    # the per-node parameter schemas: read at run time by nodes/parameters.py
    package_data={PACKAGE: ["py.typed", "nodes/params/*.yaml", "nodes/dds/*.xml"]},
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="robot_dynamics_ros maintainers",
    maintainer_email="maintainers@robot-dynamics-ros.org",
    description="Rigid-body dynamics, gravity compensation, computed torque and TOPP-RA retiming for ROS 2",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            # The one user-facing command with subcommands (demo, run, crossval, dynamics, retime, ...).
            "robot-dynamics = robot_dynamics_tools.cli:main",
            # `ros2 run robot_dynamics_ros <executable>` entry points, one per node.
            "gravity_compensation = robot_dynamics_ros.nodes.gravity_compensation:main",
            "computed_torque = robot_dynamics_ros.nodes.computed_torque:main",
            "retiming_service = robot_dynamics_ros.nodes.retiming_service:main",
            "mujoco_simulator = robot_dynamics_ros.nodes.simulator:main",
            "external_torque_observer = robot_dynamics_ros.nodes.external_torque_observer:main",
        ],
    },
)
