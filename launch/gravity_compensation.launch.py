"""Gravity compensation alone: joint_states -> tau = g(q) -> /<controller_name>/commands.

    ros2 launch robot_dynamics_ros gravity_compensation.launch.py robot:=panda
    ros2 launch robot_dynamics_ros gravity_compensation.launch.py robot:=ur5 use_sim_time:=true
    ros2 launch robot_dynamics_ros gravity_compensation.launch.py urdf_path:=/path/arm.urdf \\
        params_file:=/path/arm.yaml joints:="[j1, j2, j3]" controller_name:=arm_effort_controller
    ros2 launch robot_dynamics_ros gravity_compensation.launch.py robot_description_topic:=/robot_description

Parameters come from ``params_file`` (default ``config/<robot>.yaml``, section ``/**/gravity_compensation``);
an argument left empty keeps the file's value, a given one overrides it. The node commands once per
received joint state (it has no rate of its own). Its parameters are documented in docs/nodes.md.
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
        "joints": LaunchConfiguration("joints"),
        "controller_name": LaunchConfiguration("controller_name"),
        "use_sim_time": LaunchConfiguration("use_sim_time"),
    }
    # An empty argument means "not given": the parameters file (or the node's default) decides.
    overrides = {k: v for k, v in overrides.items() if v.perform(context).strip()}
    if "robot_description_topic" in overrides and "urdf_path" not in overrides:
        overrides["urdf_path"] = ""  # the topic is read only when urdf_path is empty
    return [
        Node(
            package="robot_dynamics_ros",
            executable="gravity_compensation",
            name="gravity_compensation",
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
            "joints", default_value="",
            description="Command joint order, YAML list '[j1, j2]'; empty: the params_file's (or all joints)."),
        DeclareLaunchArgument(
            "controller_name", default_value="",
            description="Effort controller: commands go to /<controller_name>/commands; empty: params_file's."),
        DeclareLaunchArgument(
            "use_sim_time", default_value="false",
            description="Use /clock (simulation or bag replay) as the node's time."),
        OpaqueFunction(function=launch_setup),
    ])
