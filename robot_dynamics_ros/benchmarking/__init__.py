"""Benchmark harnesses importable by ``robot-dynamics bench`` and the scripts in ``benchmarks/``.

:mod:`robot_dynamics_ros.benchmarking.latency` measures the joint-state -> command latency of the
control nodes against a bare rclpy relay over real DDS (see ``docs/realtime.md``).
"""
