"""Benchmark: joint-state -> command latency of the control path over real DDS (issue 7).

The same measurement as ``robot-dynamics bench latency`` (see docs/realtime.md for what is measured and
how): a bare rclpy relay and the gravity-compensation node on a 7-DoF Panda at 1 kHz, in-process and
across two processes, rclpy's three executors compared, the rate ramped to the maximum sustained, and
back-to-back 100-waypoint retiming requests as background load.

Run:  .venv/bin/python benchmarks/bench_latency.py [--json out.json] [any `bench latency` option]
e.g.  .venv/bin/python benchmarks/bench_latency.py --duration 60 --json benchmarks/results/latency.json
(``--json PATH`` writes the result document, like the other benchmarks; it re-executes itself with
MALLOC_TOP_PAD_=67108864, see shared NOTES "Benchmarks").
"""
from __future__ import annotations

import os
import sys

if os.environ.get("MALLOC_TOP_PAD_") is None:  # glibc reads it at start-up only
    os.environ["MALLOC_TOP_PAD_"] = "67108864"
    os.execv(sys.executable, [sys.executable, *sys.argv])


def main(argv: list[str]) -> int:
    from robot_dynamics_ros.cli import main as cli_main

    args = list(argv)
    if "--json" in args:  # this script's --json PATH is the command's --output PATH
        i = args.index("--json")
        if i + 1 >= len(args):
            print("bench_latency.py: --json needs a file path", file=sys.stderr)
            return 2
        args[i] = "--output"
    return cli_main(["bench", "latency", *args])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
