"""The MuJoCo simulator alone (the Gazebo / hardware stand-in): applies /<controller_name>/commands as joint
efforts and publishes /joint_states.

    ros2 launch robot_dynamics_ros mujoco_simulator.launch.py robot:=panda
    ros2 launch robot_dynamics_ros mujoco_simulator.launch.py robot:=ur5 rate:=250 controller_name:=arm_ctrl

Parameters come from ``params_file`` (default ``config/<robot>.yaml``, section ``/**/mujoco_simulator``); an
argument left empty keeps the file's value, a given one overrides it. It publishes /clock only with the
file's ``publish_clock: true``; otherwise keep use_sim_time false with it. all.launch.py includes this file
when ``sim:=true``.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def launch_setup(context, *args, **kwargs):
    overrides = {
        "urdf_path": LaunchConfiguration("urdf_path"),
        "robot_description_topic": LaunchConfiguration("robot_description_topic"),
        "joints": LaunchConfiguration("joints"),
        "controller_name": LaunchConfiguration("controller_name"),
        "publish_rate": LaunchConfiguration("rate"),
        "use_sim_time": LaunchConfiguration("use_sim_time"),
    }
    # An empty argument means "not given": the parameters file (or the node's default) decides.
    overrides = {k: v for k, v in overrides.items() if v.perform(context).strip()}
    if "robot_description_topic" in overrides and "urdf_path" not in overrides:
        overrides["urdf_path"] = ""  # the topic is read only when urdf_path is empty
    if "publish_rate" in overrides:  # rate:=250 must reach the node as a double, not an integer
        overrides["publish_rate"] = ParameterValue(overrides["publish_rate"], value_type=float)
    return [
        Node(
            package="robot_dynamics_ros",
            executable="mujoco_simulator",
            name="mujoco_simulator",
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
            description="Joint order of the effort commands, YAML list '[j1, j2]'; empty: the params_file's "
                        "(or all joints)."),
        DeclareLaunchArgument(
            "controller_name", default_value="",
            description="Effort controller: commands are read from /<controller_name>/commands; empty: "
                        "params_file's."),
        DeclareLaunchArgument(
            "rate", default_value="",
            description="/joint_states publication rate, Hz; empty: the params_file's."),
        DeclareLaunchArgument(
            "use_sim_time", default_value="false",
            description="Use /clock as the node's time."),
        OpaqueFunction(function=launch_setup),
    ])
