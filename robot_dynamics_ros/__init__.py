"""robot_dynamics_ros: rigid-body dynamics from a URDF for ROS 2.

Pinocchio is the production engine (:mod:`robot_dynamics_ros.dynamics.pinocchio_engine`); an
independent, batched Newton-Euler (:mod:`robot_dynamics_ros.dynamics.newton_euler`) cross-validates it
and evaluates whole paths at once for the TOPP-RA retiming (:mod:`robot_dynamics_ros.retiming`).
Nodes (:mod:`robot_dynamics_ros.nodes`) are thin rclpy shells over this core.
"""

__version__ = "0.1.0"
