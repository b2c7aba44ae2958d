"""Two robots side by side, each in its own namespace: a Panda under ``/r1`` and a UR5 under ``/r2``.

    ros2 launch robot_dynamics_ros two_robots.launch.py
    ros2 launch robot_dynamics_ros two_robots.launch.py sim:=false controller:=gravity_compensation

Each group pushes its namespace and includes all.launch.py with that robot's ``config/<robot>.yaml`` and
``config/<robot>_joint_limits.yaml``: every node's relative names land in the namespace
(``/r1/joint_states``, ``/r1/effort_controller/commands``, ``/r1/retiming_service/retime``, ... and the
same under ``/r2``), so the robots never see each other's states or commands. Every node runs as a
process of its own (the retiming service included).
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, GroupAction, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import PushRosNamespace
from launch_ros.substitutions import FindPackageShare

#: namespace -> bundled robot
ROBOTS = (("r1", "panda"), ("r2", "ur5"))


def _robot_group(namespace: str, robot: str) -> GroupAction:
    share = FindPackageShare("robot_dynamics_ros")
    return GroupAction([
        PushRosNamespace(namespace),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution([share, "launch", "all.launch.py"])),
            launch_arguments={
                "robot": robot,
                "params_file": PathJoinSubstitution([share, "config", f"{robot}.yaml"]),
                "joint_limits": PathJoinSubstitution([share, "config", f"{robot}_joint_limits.yaml"]),
                "controller": LaunchConfiguration("controller"),
                "sim": LaunchConfiguration("sim"),
            }.items(),
        ),
    ])


def generate_launch_description():
    controller = DeclareLaunchArgument("controller", default_value="computed_torque", description=(
        "Effort node of each robot: computed_torque or gravity_compensation."))
    sim = DeclareLaunchArgument("sim", default_value="true", description=(
        "Also start a MuJoCo simulator per robot (true/false)."))
    return LaunchDescription([controller, sim, *(_robot_group(ns, robot) for ns, robot in ROBOTS)])
