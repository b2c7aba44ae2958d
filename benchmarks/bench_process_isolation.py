"""Process isolation: the gravity node in its own process loses no more commands beside 100 000-point retiming
requests than with no request at all, measured side by side in one run.

    python benchmarks/bench_process_isolation.py [--duration S] [--blocks N] [--waypoints N] [--json OUT]

Each block runs the two scenarios back to back, in alternating order (so that a slow drift of the machine's
load falls on both): the gravity node as its own process (``topology twoproc``, events executor) at 1 kHz
from a publisher process, its commands received and matched here (:func:`robot_dynamics_testing.latency.
run_scenario`), once with no retiming request and once while a client process sends ``--waypoints``-point
requests back to back to the retiming service in a process of its own (the service's entry point setup:
:func:`robot_dynamics_testing.retiming_load.serve_main`). A lost command is a joint state the node never
answered (``dropped``). Printed: sent / dropped per scenario and block, and the totals of both. DDS: a private
``ROS_DOMAIN_ID`` (``--domain-id`` to choose it), localhost discovery.
"""
from __future__ import annotations

import argparse
import json
import sys

from robot_dynamics_testing import latency, retiming_load


def run(duration_s: float, blocks: int, waypoints: int) -> dict:
    """The side-by-side measurement (module docstring); returns the per-block rows and the totals."""
    retiming_load.LOAD_WAYPOINTS = waypoints
    rows = []
    for block in range(blocks):
        order = (None, "retiming-sep") if block % 2 == 0 else ("retiming-sep", None)
        for load in order:
            sc = latency.Scenario(node="gravity", executor="events", topology="twoproc", duration_s=duration_s,
                                  load=load, label=f"gravity-{'retiming-100k' if load else 'alone'}")
            res = latency.run_scenario(sc).as_dict()
            row = {"block": block, "scenario": sc.label, "sent": res["sent"], "dropped": res["dropped"],
                   "p99_us": res["p99_us"], "max_us": res.get("max_us")}
            if load:
                stats = res.get("load_stats", {})
                row["retiming"] = {k: stats.get(k) for k in ("waypoints", "requests", "answered", "success",
                                                               "rtt_ms_mean", "solve_ms_mean", "errors")}
            print(json.dumps(row), flush=True)
            rows.append(row)
    totals = {}
    for label in ("gravity-alone", "gravity-retiming-100k"):
        mine = [r for r in rows if r["scenario"] == label]
        totals[label] = {"sent": sum(r["sent"] for r in mine), "dropped": sum(r["dropped"] for r in mine)}
    return {"rows": rows, "totals": totals}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per scenario window (default 10)")
    parser.add_argument("--blocks", type=int, default=1, help="blocks of the two scenarios (default 1)")
    parser.add_argument("--waypoints", type=int, default=100_000, help="waypoints per retiming request")
    parser.add_argument("--json", help="write the result here")
    parser.add_argument("--domain-id", type=int, default=None,
                        help="ROS_DOMAIN_ID (default: a private one chosen by the code, never $ROS_DOMAIN_ID)")
    args = parser.parse_args(argv)
    domain = latency.isolate_dds(args.domain_id)   # localhost discovery, MALLOC_TOP_PAD_ for the children
    print(f"ROS_DOMAIN_ID {domain}", flush=True)
    out = run(args.duration, args.blocks, args.waypoints)
    alone, loaded = out["totals"]["gravity-alone"], out["totals"]["gravity-retiming-100k"]
    print(f"lost commands, gravity node in its own process at 1 kHz: {alone['dropped']} of {alone['sent']} with no "
          f"retiming request, {loaded['dropped']} of {loaded['sent']} beside {args.waypoints}-point requests")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
