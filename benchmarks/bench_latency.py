"""Latency benchmark: the gravity-compensation node against a bare rclpy relay, interleaved blocks over DDS.

    python benchmarks/bench_latency.py [--duration S] [--blocks N] [--json OUT]

The command line, the run and the report are :mod:`robot_dynamics_testing.latency_bench` (tested there by
``test/system/test_bench_latency.py``); this script is its entry point.
"""
import sys

from robot_dynamics_testing.latency_bench import main

if __name__ == "__main__":
    sys.exit(main())
