"""Benchmark: joint-state -> command latency of the control path over real DDS.

Run:  .venv/bin/python benchmarks/bench_latency.py [--json out.json | --output out.json] [options]
e.g.  .venv/bin/python benchmarks/bench_latency.py --duration 60 --json benchmarks/results/latency.json
      .venv/bin/python benchmarks/bench_latency.py --nodes relay,gravity --topologies twoproc --no-sweep \
          --no-retiming-load --flood --duration 10 --blocks 2      # issue 25's flood target, side by side
(``--json PATH`` writes the result document, like the other benchmarks, and prints only the summary;
it re-executes itself with MALLOC_TOP_PAD_=67108864, see shared NOTES "Benchmarks").

Runs, in one process run and with the same executor, a bare rclpy relay (JointState in, Float64MultiArray
out, no dynamics) and the gravity-compensation node on a 7-DoF Panda at ``--rate`` (1 kHz), in-process
and across two processes, compares rclpy's executors, optionally adds back-to-back retiming requests as
background load (``--flood``: a hostile-name flood beside relay and gravity node), and ramps the rate to
the maximum the node sustains. See ``docs/realtime.md`` and
:mod:`robot_dynamics_testing.latency` for what is measured and how. Scenarios compared with
each other run interleaved in ``--blocks`` blocks (ABBA...) and are pooled, so the VM's speed drifting over
minutes hits them alike (:func:`robot_dynamics_testing.latency.run_suite`).

Writes the full result document to ``--output`` (JSON); the last stdout line is a JSON summary with, per
scenario, ``p50_us``, ``p99_us``, ``max_us``, ``dropped``, ``cpu_percent`` and ``p99_ratio_vs_relay``.
Exit status 0 when every scenario ran (targets met or not: they are reported), 1 when one failed to run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from robot_dynamics_ros.errors import UserError  # noqa: E402

SUMMARY_KEYS = ("p50_us", "p99_us", "max_us", "dropped", "cpu_percent", "p99_ratio_vs_relay")


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value
    return parse


def _at_least_one(text: str) -> int:
    """An integer >= 1 (``--blocks``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def _choices(allowed):
    def parse(text: str) -> tuple[str, ...]:
        items = tuple(x.strip() for x in text.split(",") if x.strip())
        bad = [x for x in items if x not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"'{text}': choose from {','.join(allowed)}")
        return items
    return parse


def configure_parser(parser: argparse.ArgumentParser) -> None:
    from robot_dynamics_testing.latency import EXECUTOR_KINDS, FLOOD_STAMPS, NODE_KINDS, TOPOLOGIES

    parser.add_argument("--duration", type=_positive(float), default=60.0, metavar="S",
                        help="measurement window per main scenario, s (default 60; plus 1 s warm-up)")
    parser.add_argument("--rate", type=_positive(float), default=1000.0, metavar="HZ",
                        help="joint-state rate, Hz (default 1000)")
    parser.add_argument("--compare-duration", type=_positive(float), default=None, metavar="S",
                        help="window of the in-process executor comparison, s (default: --duration)")
    parser.add_argument("--warmup", type=_positive(float), default=1.0, metavar="S",
                        help="warm-up before each measured window (each block), s (default 1; not measured)")
    parser.add_argument("--blocks", type=_at_least_one, default=6, metavar="N",
                        help="interleaved blocks per compared group (relay/gravity in-process; relay/gravity/"
                             "retiming loads across processes): each scenario runs N windows of duration/N "
                             "(each with its own warm-up), round-robin ABBA..., and pools them (default 6; "
                             "1 = one window per scenario, one after the other)")
    parser.add_argument("--executors", type=_choices(EXECUTOR_KINDS), default=EXECUTOR_KINDS,
                        help=f"executors to compare, comma-separated (default {','.join(EXECUTOR_KINDS)})")
    parser.add_argument("--nodes", type=_choices(NODE_KINDS), default=NODE_KINDS,
                        help=f"nodes under test (default {','.join(NODE_KINDS)})")
    parser.add_argument("--topologies", type=_choices(TOPOLOGIES), default=TOPOLOGIES,
                        help=f"in-process and/or across two processes (default {','.join(TOPOLOGIES)})")
    parser.add_argument("--no-sweep", action="store_true", help="skip the maximum-rate ramp")
    parser.add_argument("--sweep-duration", type=_positive(float), default=3.0, metavar="S",
                        help="window per step of the rate ramp, s (default 3)")
    parser.add_argument("--no-retiming-load", action="store_true",
                        help="skip the scenarios with back-to-back retiming requests as background load")
    parser.add_argument("--flood", action="store_true",
                        help="add relay and gravity node across two processes beside a hostile-name flood on "
                             "their input topic (the 7 joints + 50 new names a message, --flood-rate), in the "
                             "same rotation: each one's share of answered good states and its RSS "
                             "(target: the gravity node's share within 5 %% of the relay's)")
    parser.add_argument("--flood-rate", type=_positive(float), default=5000.0, metavar="HZ",
                        help="messages per second of the flood (default 5000; fewer when the publisher "
                             "cannot keep up, reported as flood_rate_hz)")
    parser.add_argument("--flood-stamp", choices=FLOOD_STAMPS, default="none",
                        help="header stamps of the flood's messages: none (default: the node does all its "
                             "work on each and no good state becomes out of order) or now (stamped when sent: "
                             "the node refuses the good states that arrive after a newer flood message)")
    parser.add_argument("--rt-priority", type=int, default=None, metavar="N",
                        help="run the measuring process and the node under test with SCHED_FIFO priority N "
                             "(1..99; needs CAP_SYS_NICE); the retiming load stays at normal priority")
    parser.add_argument("--qos-depth", type=_positive(int), default=100, metavar="N",
                        help="keep-last depth of the joint_states and command endpoints of the publisher, "
                             "the relay and the gravity node (reliable, through the node's QoS overrides; default 100)")
    parser.add_argument("--domain-id", type=int, default=None,
                        help="ROS_DOMAIN_ID to use (default: a private one in 102..201 chosen by the code, never "
                             "$ROS_DOMAIN_ID); discovery is localhost-only in every case")
    parser.add_argument("--output", type=Path, default=Path("bench_latency.json"),
                        help="result document (JSON), default ./bench_latency.json")
    parser.add_argument("--markdown", type=Path, default=None, metavar="PATH",
                        help="also write the results as a markdown table (with the machine) to PATH")
    parser.add_argument("--json", action="store_true",
                        help="print only the JSON summary (no progress lines, no table)")


def _fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def _table(doc: dict) -> str:
    cols = ("name", "p50_us", "p99_us", "max_us", "dropped", "sustained_rate_hz", "cpu_percent",
            "cpu_ms_per_1000_msgs", "p99_ratio_vs_relay")
    rows = [cols] + [tuple(_fmt(r.get(c)) if "error" not in r or c == "name" else "ERROR" for c in cols)
                     for r in doc["scenarios"]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows)


def _ratio_text(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def block_lines(doc: dict) -> list[str]:
    """One line per scenario compared with a relay block by block (more than one block, not the relay
    itself): its p99 / relay p99 per round and their median."""
    lines = []
    for r in doc["scenarios"]:
        ratios = r.get("p99_ratio_per_block")
        if "error" in r or r.get("node") == "relay" or not ratios or len(ratios) < 2:
            continue
        lines.append(f"{r['name']} / {r['relay_reference']} p99 per block: "
                     f"{', '.join(_ratio_text(x) for x in ratios)} "
                     f"(median {_ratio_text(r.get('p99_ratio_median_of_blocks'))}, "
                     f"pooled {_ratio_text(r.get('p99_ratio_vs_relay'))})")
        ref = next((x for x in doc["scenarios"] if x.get("name") == r["relay_reference"]), None)
        if ref is not None and ref.get("blocks") and r.get("blocks"):
            # CPU per message block by block: one slow block (a machine stall) shows here, not only in the sum
            def cpu(blocks):
                return ", ".join(str(b.get("cpu_ms_per_1000_msgs")) for b in blocks)
            lines.append(f"{r['name']} CPU ms / 1000 msgs per block: {cpu(r['blocks'])}; "
                         f"{ref['name']}: {cpu(ref['blocks'])}")
    return lines


def markdown(doc: dict) -> str:
    """The result document as a markdown table plus the machine line (for docs/realtime.md)."""
    m = doc["machine"]
    cfg = doc["config"]
    lines = [f"Machine: {m['cpu']}, {m['cores']} cores, Linux {m['kernel']}, Python {m['python']}, "
             f"rclpy {m['rclpy']} ({m['rmw']}); load average {m.get('loadavg_1min_at_start')} at start, "
             f"{m.get('loadavg_1min_at_end')} at end; SCHED_FIFO priority: {cfg.get('rt_priority') or 'none'}; "
             f"QoS reliable keep-last {cfg.get('qos_depth', 10)} on every endpoint; "
             f"rate {cfg['rate_hz']:g} Hz; {cfg.get('blocks', 1)} interleaved block(s) per compared group "
             f"(each duration / blocks + {cfg.get('warmup_s', 1.0):g} s warm-up, order ABBA...).", "",
             "| scenario | window s | p50 µs | p99 µs | max µs | dropped / sent | sustained Hz | CPU % | "
             "CPU ms / 1000 msgs | p99 / relay |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["scenarios"]:
        if "error" in r:
            lines.append(f"| {r['name']} | error: {r['error']} |||||||||")
            continue
        lines.append(f"| {r['name']} | {r['duration_s']:g} | {_fmt(r['p50_us'])} | {_fmt(r['p99_us'])} | "
                     f"{_fmt(r['max_us'])} | {r['dropped']} / {r['sent']} | {_fmt(r['sustained_rate_hz'])} | "
                     f"{_fmt(r['cpu_percent'])} | {_fmt(r['cpu_ms_per_1000_msgs'])} | "
                     f"{_fmt(r.get('p99_ratio_vs_relay'))} |")
    per_block = block_lines(doc)
    if per_block:
        lines += [""] + [f"- {line}" for line in per_block]
    lines += ["", f"Recommended executor: {doc['recommended_executor']}; maximum sustained rate: "
              f"{doc['max_sustained_rate_hz']}; targets: {doc['targets']}."]
    return "\n".join(lines) + "\n"


def summary(doc: dict, output: Path) -> dict:
    """The one-line JSON: per scenario the SUMMARY_KEYS, plus recommendation, rates and targets."""
    return {
        "benchmark": "latency",
        "output": str(output),
        "recommended_executor": doc["recommended_executor"],
        "max_sustained_rate_hz": doc["max_sustained_rate_hz"],
        "targets": doc["targets"],
        "scenarios": {r["name"]: ({k: r.get(k) for k in SUMMARY_KEYS} if "error" not in r
                                  else {"error": r["error"]}) for r in doc["scenarios"]},
    }


def run(args: argparse.Namespace) -> int:
    from robot_dynamics_testing import latency

    latency.isolate_dds(args.domain_id)
    if args.domain_id is not None and not 0 <= args.domain_id <= 232:
        raise UserError(f"--domain-id {args.domain_id}: a ROS domain id is 0..232")
    if args.rate * 0.5 < 1 or args.duration * args.rate < 10:
        raise UserError(f"--duration {args.duration} s at --rate {args.rate} Hz: fewer than 10 messages")
    if args.duration / args.blocks * args.rate < 10:
        raise UserError(f"--blocks {args.blocks}: --duration {args.duration} s at --rate {args.rate} Hz "
                        "gives fewer than 10 messages per block")
    try:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.touch()
    except OSError as exc:
        raise UserError(f"--output {args.output}: cannot write ({exc.strerror})") from None

    cfg = latency.SuiteConfig(
        duration_s=args.duration, rate_hz=args.rate, executors=args.executors, nodes=args.nodes,
        topologies=args.topologies, compare_duration_s=args.compare_duration, sweep=not args.no_sweep,
        sweep_duration_s=args.sweep_duration, retiming_load=not args.no_retiming_load,
        flood=args.flood, flood_rate_hz=args.flood_rate, flood_stamp=args.flood_stamp,
        rt_priority=args.rt_priority, blocks=args.blocks, warmup_s=args.warmup, qos_depth=args.qos_depth)
    if args.rt_priority is not None:
        if not 1 <= args.rt_priority <= 99:
            raise UserError(f"--rt-priority {args.rt_priority}: a SCHED_FIFO priority is 1..99")
        try:
            latency.set_realtime_priority(args.rt_priority)
        except PermissionError:
            raise UserError(f"--rt-priority {args.rt_priority}: real-time scheduling not permitted here "
                            "(needs CAP_SYS_NICE or an rtprio limit)") from None

    def progress(r: dict) -> None:
        if args.json:
            return
        name = f"{r['name']} [block {r['block']}]" if "block" in r else r["name"]
        if "error" in r:
            print(f"{name}: ERROR {r['error']}", flush=True)
        else:
            print(f"{name}: p50 {r['p50_us']} us, p99 {r['p99_us']} us, max {r['max_us']} us, "
                  f"dropped {r['dropped']}/{r['sent']}, cpu {r['cpu_percent']} %", flush=True)

    if cfg.retiming_load:
        from robot_dynamics_testing.retiming_load import available

        if not available():
            cfg.retiming_load = False
            if not args.json:
                print("retiming service not available: retiming-load scenarios skipped", flush=True)
    doc = latency.run_suite(cfg, progress=progress)
    args.output.write_text(json.dumps(doc, indent=1) + "\n")
    if args.markdown is not None:
        args.markdown.write_text(markdown(doc))
    if not args.json:
        print(_table(doc))
        for line in block_lines(doc):
            print(line)
        print(f"recommended executor: {doc['recommended_executor']}; targets: {doc['targets']}")
        print(f"results written to {args.output}")
    print(json.dumps(summary(doc, args.output)), flush=True)
    return 1 if any("error" in r for r in doc["scenarios"]) else 0


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("MALLOC_TOP_PAD_") is None:
        # glibc reads it at start-up only: re-execute with it (shared NOTES, "Benchmarks": heap trimming
        # made numpy-heavy code up to 2.5x slower depending on process state)
        os.environ["MALLOC_TOP_PAD_"] = "67108864"
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    parser = argparse.ArgumentParser(prog="bench_latency.py", description=__doc__.splitlines()[0])
    configure_parser(parser)
    argv = list(sys.argv[1:] if argv is None else argv)
    # --json PATH (as every script run by run_all.py takes) = --output PATH --json
    if "--json" in argv:
        i = argv.index("--json")
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            argv[i:i + 2] = ["--output", argv[i + 1], "--json"]
    args = parser.parse_args(argv)
    try:
        return run(args)
    except UserError as exc:
        print(f"bench_latency.py: error: {exc}", file=sys.stderr)
        return exc.exit_status


if __name__ == "__main__":
    sys.exit(main())
