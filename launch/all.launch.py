"""Everything together: the effort controller node (computed_torque.launch.py or
gravity_compensation.launch.py), the TOPP-RA retiming service (retiming.launch.py) and, with ``sim:=true``,
the MuJoCo simulator standing in for Gazebo/hardware (mujoco_simulator.launch.py). This file only includes
those, passing its arguments through.

    ros2 launch robot_dynamics_ros all.launch.py robot:=panda sim:=true
    ros2 launch robot_dynamics_ros all.launch.py robot:=ur5 controller:=gravity_compensation
    ros2 launch robot_dynamics_ros all.launch.py robot_description_topic:=/robot_description use_sim_time:=true

Only one effort node is started: two nodes publishing on one effort controller's command topic would
fight. Parameters come from ``params_file`` (default ``config/<robot>.yaml``, one section per node); an
argument left empty keeps the file's value. The simulator (free running) publishes /joint_states and
applies /<controller_name>/commands; it has no /clock, so keep use_sim_time false with it.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.substitutions import FindPackageShare


def _controller_is(name):
    return IfCondition(PythonExpression(["'", LaunchConfiguration("controller"), "' == '", name, "'"]))


def _sim_on():  # sim:=true / 1 / yes (any case)
    return IfCondition(PythonExpression(
        ["'", LaunchConfiguration("sim"), "'.strip().lower() in ('true', '1', 'yes')"]))


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
            description="Parameters YAML with a section per node (/**/node_name: ros__parameters: ...)."),
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
            "rate", default_value="",
            description="Control rate of computed_torque and state rate of the simulator, Hz; empty: "
                        "params_file's."),
        DeclareLaunchArgument(
            "joint_limits",
            default_value=[
                PathJoinSubstitution([FindPackageShare("robot_dynamics_ros"), "config", LaunchConfiguration("robot")]),
                "_joint_limits.yaml"],
            description="MoveIt-style joint_limits.yaml for the retiming service (acceleration limits)."),
        DeclareLaunchArgument(
            "use_sim_time", default_value="false",
            description="Use /clock (simulation or bag replay) as the nodes' time."),
        DeclareLaunchArgument(
            "controller", default_value="computed_torque",
            description="Effort node to start: computed_torque or gravity_compensation."),
        DeclareLaunchArgument(
            "sim", default_value="false",
            description="Also start the MuJoCo simulator (true/false)."),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(
                PathJoinSubstitution([FindPackageShare("robot_dynamics_ros"), "launch", "computed_torque.launch.py"])),
            launch_arguments={
                "robot": LaunchConfiguration("robot"),
                "params_file": LaunchConfiguration("params_file"),
                "urdf_path": LaunchConfiguration("urdf_path"),
                "robot_description_topic": LaunchConfiguration("robot_description_topic"),
                "joints": LaunchConfiguration("joints"),
                "controller_name": LaunchConfiguration("controller_name"),
                "rate": LaunchConfiguration("rate"),
                "use_sim_time": LaunchConfiguration("use_sim_time"),
            }.items(),
            condition=_controller_is("computed_torque"),
        ),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(
                PathJoinSubstitution(
                    [FindPackageShare("robot_dynamics_ros"), "launch", "gravity_compensation.launch.py"])),
            launch_arguments={
                "robot": LaunchConfiguration("robot"),
                "params_file": LaunchConfiguration("params_file"),
                "urdf_path": LaunchConfiguration("urdf_path"),
                "robot_description_topic": LaunchConfiguration("robot_description_topic"),
                "joints": LaunchConfiguration("joints"),
                "controller_name": LaunchConfiguration("controller_name"),
                "use_sim_time": LaunchConfiguration("use_sim_time"),
            }.items(),
            condition=_controller_is("gravity_compensation"),
        ),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(
                PathJoinSubstitution([FindPackageShare("robot_dynamics_ros"), "launch", "retiming.launch.py"])),
            launch_arguments={
                "robot": LaunchConfiguration("robot"),
                "params_file": LaunchConfiguration("params_file"),
                "urdf_path": LaunchConfiguration("urdf_path"),
                "robot_description_topic": LaunchConfiguration("robot_description_topic"),
                "joint_limits": LaunchConfiguration("joint_limits"),
                "use_sim_time": LaunchConfiguration("use_sim_time"),
            }.items(),
        ),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(
                PathJoinSubstitution([FindPackageShare("robot_dynamics_ros"), "launch", "mujoco_simulator.launch.py"])),
            launch_arguments={
                "robot": LaunchConfiguration("robot"),
                "params_file": LaunchConfiguration("params_file"),
                "urdf_path": LaunchConfiguration("urdf_path"),
                "robot_description_topic": LaunchConfiguration("robot_description_topic"),
                "joints": LaunchConfiguration("joints"),
                "controller_name": LaunchConfiguration("controller_name"),
                "rate": LaunchConfiguration("rate"),
                "use_sim_time": LaunchConfiguration("use_sim_time"),
            }.items(),
            condition=_sim_on(),
        ),
    ])
