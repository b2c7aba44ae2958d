"""The TOPP-RA retiming service alone: ``/retiming_service/retime`` (robot_dynamics_interfaces/srv/RetimeTrajectory).

    ros2 launch robot_dynamics_ros retiming.launch.py robot:=panda
    ros2 launch robot_dynamics_ros retiming.launch.py robot:=ur5 joint_limits:=/path/ur5_joint_limits.yaml
    ros2 launch robot_dynamics_ros retiming.launch.py robot_description_topic:=/robot_description

Parameters come from ``params_file`` (default ``config/<robot>.yaml``, section ``/**/retiming_service``); an
argument left empty keeps the file's value. Acceleration limits come from the MoveIt-style
``joint_limits`` file (default ``config/<robot>_joint_limits.yaml``; URDFs carry none).
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare


def launch_setup(context, *args, **kwargs):
    overrides = {
        "urdf_path": LaunchConfiguration("urdf_path"),
        "robot_description_topic": LaunchConfiguration("robot_description_topic"),
        "joint_limits_path": LaunchConfiguration("joint_limits"),
        "use_sim_time": LaunchConfiguration("use_sim_time"),
    }
    # An empty argument means "not given": the parameters file (or the node's default) decides.
    overrides = {k: v for k, v in overrides.items() if v.perform(context).strip()}
    if "robot_description_topic" in overrides and "urdf_path" not in overrides:
        overrides["urdf_path"] = ""  # the topic is read only when urdf_path is empty
    return [
        Node(
            package="robot_dynamics_ros",
            executable="retiming_service",
            # the node's own name is retiming_service, the section name in the parameters file; a name=
            # here renames it (one node per process: the service, its joint states and parameters)
            output="screen",
            emulate_tty=True,
            parameters=[LaunchConfiguration("params_file"), overrides],
        )
    ]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument(
            "robot", default_value="panda",
            description="Bundled robot whose config/<robot>.yaml is the default params_file (panda, ur5)."),
        DeclareLaunchArgument(
            "params_file",
            default_value=[
                PathJoinSubstitution([FindPackageShare("robot_dynamics_ros"), "config", LaunchConfiguration("robot")]),
                ".yaml"],
            description="Parameters YAML (/**/node_name: ros__parameters: ...)."),
        DeclareLaunchArgument(
            "urdf_path", default_value="",
            description="URDF file or bundled robot name; empty: the params_file's urdf_path."),
        DeclareLaunchArgument(
            "robot_description_topic", default_value="",
            description="Read the URDF from this std_msgs/String topic (transient local) instead of a file."),
        DeclareLaunchArgument(
            "joint_limits",
            default_value=[
                PathJoinSubstitution([FindPackageShare("robot_dynamics_ros"), "config", LaunchConfiguration("robot")]),
                "_joint_limits.yaml"],
            description="MoveIt-style joint_limits.yaml (acceleration limits); empty: none."),
        DeclareLaunchArgument(
            "use_sim_time", default_value="false",
            description="Use /clock (simulation or bag replay) as the node's time."),
        OpaqueFunction(function=launch_setup),
    ])
