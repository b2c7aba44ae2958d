"""The latency benchmark (issue 7): the analysis on synthetic data, the interleaved blocks, and a short
real run of the command.

Pooling of blocks is checked against numpy's percentiles of the concatenated latencies; the block order
(ABBA, ABCD DCBA) and the suite's groups are checked with ``run_scenario`` replaced by a recorder (no DDS).
The smoke test runs ``benchmarks/bench_latency.py`` for real (two interleaved blocks of 0.5 s over DDS,
in-process, the relay and the gravity node, EventsExecutor) and checks the JSON document and the one-line
summary: the latencies are finite and positive and ordered, messages were answered, the gravity node's
commands matched Pinocchio's g(q) of the poses sent (the harness matches each command to its message by
value), each scenario has two blocks that add up to the pooled window.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
from pathlib import Path
import sys

import numpy as np
import pytest

from robot_dynamics_testing.reference import ProbeRobot, expected_gravity

from robot_dynamics_testing import latency_bench as bench
from robot_dynamics_testing import latency
from robot_dynamics_testing.latency import (RawWindow, ScenarioResult, interleaved_rounds, match_outputs, pool_blocks,
                                probe_positions, summarize, window_latencies_us)
from robot_dynamics_ros.errors import UserError


def test_match_and_summarize_find_drops_reordering_and_latency():
    rng = np.random.default_rng(3)
    n = 400
    expected = rng.normal(size=(n, 7))
    send = 10**9 + np.arange(n, dtype=np.int64) * 1_000_000  # 1 kHz
    answered = [k for k in range(n) if k not in (50, 51, 300)]  # three dropped
    answered[100], answered[101] = answered[101], answered[100]  # two arrive swapped
    delay_us = rng.uniform(50.0, 900.0, size=len(answered))
    arrival = np.array([send[k] + int(d * 1e3) for k, d in zip(answered, delay_us)], dtype=np.int64)
    outputs = expected[answered] + 1e-9  # the node's rounding
    outputs = np.vstack([outputs, np.full((1, 7), 123.0)])  # one garbage command
    arrival = np.append(arrival, arrival[-1] + 1000)
    seq, err = match_outputs(outputs, expected)
    assert list(seq[:-1]) == answered and seq[-1] == -1
    assert err[:-1].max() < 1e-8
    s = summarize(send, (0, n), arrival, seq, err)
    assert s["dropped"] == 3 and s["unmatched"] == 1 and s["duplicates"] == 0
    assert s["received"] == n - 3
    lat = np.array([(a - send[k]) / 1e3 for a, k in zip(arrival[:-1], answered)])
    assert s["p99_us"] == pytest.approx(np.percentile(lat, 99), abs=0.1)
    assert s["max_us"] == pytest.approx(lat.max(), abs=0.1)
    assert s["sent_rate_hz"] == pytest.approx(1000.0)
    assert s["sustained_rate_hz"] == pytest.approx(1000.0 * (n - 3) / n, rel=1e-3)
    # the node repeating its last command (a hold on stale input) 0.1 s and 0.2 s later: duplicates, and
    # the last message's latency stays that of its first answer
    seq_rep = np.append(seq, [answered[-1]] * 2)
    arrival_rep = np.append(arrival, [arrival[-1] + 100_000_000, arrival[-1] + 200_000_000])
    s_rep = summarize(send, (0, n), arrival_rep, seq_rep, np.append(err, [0.0, 0.0]))
    assert s_rep["duplicates"] == 2 and s_rep["dropped"] == 3
    assert s_rep["max_us"] == pytest.approx(lat.max(), abs=0.1)
    # a measurement window excludes the warm-up messages
    s2 = summarize(send, (200, n), arrival, seq, err)
    assert s2["sent"] == 200 and s2["dropped"] == 1


def test_probe_poses_are_distinct_and_expected_gravity_is_pinocchio():
    robot = ProbeRobot.panda()
    q = probe_positions(robot, 3000)
    step = np.abs(np.diff(q, axis=0)).max(axis=1)
    assert step.min() > 1e-4  # consecutive messages are told apart by value
    g = expected_gravity(robot, q[:3])
    # independent check: Panda joint 1 is vertical, so it carries no gravity torque; joint 2 does
    assert np.abs(g[:, 0]).max() < 1e-9 and np.abs(g[:, 1]).min() > 1.0


def _block(rng, name: str, n: int, scale_us: float, drop: int, cpu_s: float,
           duration_s: float = 1.0) -> ScenarioResult:
    """A block measured the way run_scenario does it, on synthetic send/arrival times (1 kHz, n messages,
    the last ``drop`` ones unanswered, heavy-tailed latencies of scale ``scale_us``)."""
    send = 10**9 + np.arange(n, dtype=np.int64) * 1_000_000
    answered = np.arange(n - drop)
    lat_ns = (rng.pareto(2.5, size=answered.size) + 1.0) * scale_us * 1e3
    arrival = send[answered] + lat_ns.astype(np.int64)
    seq, err = answered.astype(np.int64), np.full(answered.size, 1e-9)
    stats = summarize(send, (0, n), arrival, seq, err)
    raw = RawWindow(window_latencies_us(send, (0, n), arrival, seq), cpu_s, duration_s,
                    (send[-1] - send[0]) / 1e9)
    return ScenarioResult(name, {"node": "gravity", "duration_s": duration_s}, stats, raw=raw)


def test_pooled_blocks_are_the_statistics_of_the_concatenated_latencies():
    rng = np.random.default_rng(7)
    # a fast and a slow machine phase: the pooled p99 is not the mean of the block p99s
    blocks = [_block(rng, "g", 1000, 200.0, 3, 0.3), _block(rng, "g", 1000, 2000.0, 11, 0.5),
              _block(rng, "g", 1000, 300.0, 0, 0.4)]
    pooled = pool_blocks(blocks)
    lat = np.concatenate([b.raw.latency_us for b in blocks])
    assert lat.size == 3000 - 14
    for key, q in (("p50_us", 50), ("p99_us", 99), ("p999_us", 99.9)):
        assert pooled.stats[key] == pytest.approx(np.percentile(lat, q), abs=0.051), key
    assert pooled.stats["max_us"] == pytest.approx(lat.max(), abs=0.051)
    assert pooled.stats["mean_us"] == pytest.approx(lat.mean(), abs=0.051)
    assert pooled.stats["p99_us"] != pytest.approx(np.mean([b.stats["p99_us"] for b in blocks]), rel=0.01)
    assert pooled.stats["dropped"] == 14 and pooled.stats["sent"] == 3000
    assert pooled.stats["received"] == 3000 - 14
    assert pooled.scenario["duration_s"] == 3.0
    assert pooled.cpu_percent == pytest.approx(100.0 * 1.2 / 3.0, abs=0.05)
    assert pooled.cpu_ms_per_1000_msgs == pytest.approx(1.2e6 / 2986, abs=0.05)
    assert pooled.stats["sent_rate_hz"] == pytest.approx(1000.0)
    assert [b["dropped"] for b in pooled.extra["blocks"]] == [3, 11, 0]
    assert [b["p99_us"] for b in pooled.extra["blocks"]] == [b.stats["p99_us"] for b in blocks]
    assert "raw" not in pooled.as_dict()
    # one block (--blocks 1) is today's result: the block's own statistics
    single = pool_blocks(blocks[1:2])
    assert {k: single.stats[k] for k in blocks[1].stats} == blocks[1].stats
    with pytest.raises(ValueError, match="different scenarios"):
        pool_blocks([blocks[0], _block(rng, "r", 100, 100.0, 0, 0.1)])


def test_interleaved_rounds_alternate_the_order():
    assert interleaved_rounds(2, 4) == [[0, 1], [1, 0], [0, 1], [1, 0]]  # AB BA AB BA
    assert interleaved_rounds(4, 2) == [[0, 1, 2, 3], [3, 2, 1, 0]]  # ABCD DCBA
    assert interleaved_rounds(3, 1) == [[0, 1, 2]]
    with pytest.raises(ValueError, match="blocks 0"):
        interleaved_rounds(2, 0)


def test_suite_runs_compared_scenarios_interleaved_and_pools_them(monkeypatch):
    """run_suite with run_scenario replaced by a recorder: which block runs when, and how long."""
    calls = []
    rng = np.random.default_rng(11)

    def fake_run_scenario(sc, robot=None):
        calls.append((sc.name, sc.duration_s))
        # the machine slows down over the run; the gravity node costs 1.5x the relay at any moment
        scale = 100.0 * (1 + len(calls)) * (1.5 if sc.node == "gravity" else 1.0)
        r = _block(rng, sc.name, int(round(sc.duration_s * sc.rate_hz)), scale, 0, 0.1, sc.duration_s)
        r.scenario = {k: v for k, v in dataclasses.asdict(sc).items() if k != "label"}
        return r

    monkeypatch.setattr(latency, "run_scenario", fake_run_scenario)
    cfg = latency.SuiteConfig(duration_s=6.0, compare_duration_s=2.0, executors=("events", "single"),
                              sweep=True, sweep_rates_hz=(1000,), sweep_duration_s=1.0, retiming_load=True,
                              blocks=3)
    doc = latency.run_suite(cfg)
    names = [n for n, _ in calls]
    # the executor comparison (short windows): one block each, as before
    assert calls[:4] == [("relay-inproc-events", 2.0), ("gravity-inproc-events", 2.0),
                         ("relay-inproc-single", 2.0), ("gravity-inproc-single", 2.0)]
    best = doc["recommended_executor"]
    main = [f"relay-inproc-{best}-main", f"gravity-inproc-{best}-main"]
    assert names[4:10] == [main[0], main[1], main[1], main[0], main[0], main[1]]  # AB BA AB
    two = [f"relay-twoproc-{best}", f"gravity-twoproc-{best}", f"gravity-twoproc-{best}-retiming",
           f"gravity-twoproc-{best}-retiming-sep"]
    assert names[10:22] == two + two[::-1] + two  # ABCD DCBA ABCD
    assert all(d == 2.0 for _, d in calls[4:22])  # duration / blocks
    assert names[22:] == [f"relay-inproc-{best}-sweep-1000hz", f"gravity-inproc-{best}-sweep-1000hz"]
    rows = {r["name"]: r for r in doc["scenarios"]}
    for name in main + two:
        assert rows[name]["duration_s"] == 6.0 and rows[name]["sent"] == 6000 and len(rows[name]["blocks"]) == 3
    assert len(rows["relay-inproc-events"]["blocks"]) == 1
    # per block: each block over the relay's block of the same round; the median of those
    g, relay = rows[two[2]], rows[two[0]]
    assert g["relay_reference"] == two[0]
    expect = [round(b["p99_us"] / rb["p99_us"], 3) for b, rb in zip(g["blocks"], relay["blocks"])]
    assert g["p99_ratio_per_block"] == expect
    assert g["p99_ratio_median_of_blocks"] == pytest.approx(np.median(expect), abs=1e-3)
    assert g["p99_ratio_vs_relay"] == pytest.approx(g["p99_us"] / relay["p99_us"], abs=1e-3)
    assert rows[main[0]]["p99_ratio_per_block"] == [1.0, 1.0, 1.0]
    md = bench.markdown(doc)
    assert "3 interleaved block(s)" in md
    assert f"{main[1]} / {main[0]} p99 per block: " in md


def test_flood_scenarios_run_side_by_side_and_judge_the_answered_shares(monkeypatch):
    """--flood: relay and gravity node beside the flood join the two-process rotation; the target compares
    their shares of answered good states (1 - dropped / sent, counted here from the fake blocks' drops) with
    a 5 % margin and lists each block's node RSS."""
    calls = []
    rng = np.random.default_rng(3)
    drops = {"relay": 100, "gravity": 100}   # per 1000-message block

    def fake_run_scenario(sc, robot=None):
        calls.append(sc.name)
        n = int(round(sc.duration_s * sc.rate_hz))
        r = _block(rng, sc.name, n, 300.0, drops[sc.node] if sc.load == "flood" else 0, 0.1, sc.duration_s)
        r.scenario = {k: v for k, v in dataclasses.asdict(sc).items() if k != "label"}
        r.extra["rss_mb"] = {"start": 100.0 + len(calls), "end": 101.0 + len(calls)}
        return r

    monkeypatch.setattr(latency, "run_scenario", fake_run_scenario)
    cfg = latency.SuiteConfig(duration_s=2.0, executors=("events",), topologies=("twoproc",), sweep=False,
                              retiming_load=False, flood=True, flood_rate_hz=4000.0, blocks=2)
    doc = latency.run_suite(cfg)
    two = ["relay-twoproc-events", "gravity-twoproc-events", "relay-twoproc-events-flood",
           "gravity-twoproc-events-flood"]
    assert calls[4:] == two + two[::-1]   # after the in-process executor comparison (2 x 2 blocks): ABCD DCBA
    rows = {r["name"]: r for r in doc["scenarios"]}
    assert rows[two[3]]["flood_rate_hz"] == 4000.0 and rows[two[3]]["dropped"] == 200
    t = doc["targets"]
    assert t["flood_answered_share"] == {"gravity": 0.9, "relay": 0.9}
    assert t["flood_share_within_5pct_of_relay"] is True
    assert [b["start"] for b in t["flood_rss_mb"]["gravity"]] == [108.0, 109.0]   # the 8th and 9th run
    # 6.1 % more dropped than the relay: not within 5 %; 4.9 %: within
    drops.update(gravity=161)
    calls.clear()
    assert latency.run_suite(cfg)["targets"]["flood_share_within_5pct_of_relay"] is False
    drops.update(gravity=149)
    assert latency.run_suite(cfg)["targets"]["flood_share_within_5pct_of_relay"] is True


def test_blocks_option_parsing_and_errors(capsys, monkeypatch):
    parser = argparse.ArgumentParser()
    bench.configure_parser(parser)
    assert parser.parse_args([]).blocks == 6
    assert parser.parse_args(["--blocks", "1"]).blocks == 1
    assert parser.parse_args(["--blocks", "4"]).blocks == 4
    for bad in ("0", "-2", "2.5"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--blocks", bad])
        err = capsys.readouterr().err
        assert "--blocks" in err and bad in err, err
    # blocks too short to hold 10 messages: a one-line user error naming the option and its value
    monkeypatch.setenv("MALLOC_TOP_PAD_", "67108864")  # else run() re-executes the interpreter
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")  # run() sets these: restored after
    monkeypatch.setenv("ROS_DOMAIN_ID", os.environ["ROS_DOMAIN_ID"])
    args = parser.parse_args(["--duration", "0.02", "--rate", "1000", "--blocks", "3"])
    with pytest.raises(UserError, match="--blocks 3"):
        bench.run(args)


@pytest.mark.ros
@pytest.mark.slow
def test_bench_latency_command_measures_relay_and_gravity_node_in_blocks(tmp_path):
    out = tmp_path / "latency.json"
    cmd = [sys.executable, str(Path(__file__).resolve().parents[2] / "benchmarks" / "bench_latency.py"), "--duration", "1", "--blocks", "2",
           "--warmup", "0.5", "--executors", "events", "--topologies", "inproc", "--no-sweep",
           "--no-retiming-load", "--output", str(out), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MALLOC_TOP_PAD_": "67108864"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    doc = json.loads(out.read_text())
    assert last["output"] == str(out) and last["recommended_executor"] == "events"
    assert set(last["scenarios"]) == {"relay-inproc-events", "gravity-inproc-events"}
    for name, summary in last["scenarios"].items():
        assert set(summary) >= {"p50_us", "p99_us", "max_us", "dropped", "cpu_percent", "p99_ratio_vs_relay"}
        assert 0 < summary["p50_us"] <= summary["p99_us"] <= summary["max_us"] < 5e6, name
        assert math.isfinite(summary["max_us"]) and summary["cpu_percent"] > 0
    assert doc["config"]["blocks"] == 2
    rows = {r["name"]: r for r in doc["scenarios"]}
    for r in rows.values():
        # a real 1 kHz run; a busy CI machine may drop messages at the node's keep-last-10 queue, so
        # only a floor on the answered count (the benchmark itself reports the drops)
        assert r["sent"] == 1000 and r["received"] >= 100, r
        assert r["unmatched"] == 0, r  # every command was one of the expected values
        assert r["max_output_error"] <= 1e-6
        # two blocks of 0.5 s pooled into a 1 s window; the publisher's own send stamps agree
        assert r["duration_s"] == 1.0 and len(r["blocks"]) == 2, r
        assert [b["sent"] for b in r["blocks"]] == [500, 500]
        assert sum(b["dropped"] for b in r["blocks"]) == r["dropped"]
        assert r["sent"] / r["sent_rate_hz"] == pytest.approx(1.0, rel=0.05)
        # (the pooled statistics are asserted exactly on known blocks in
        # test_pooled_blocks_are_the_statistics_of_the_concatenated_latencies)
    relay, g = rows["relay-inproc-events"], rows["gravity-inproc-events"]
    assert relay["p99_ratio_vs_relay"] == 1.0 and relay["p99_ratio_per_block"] == [1.0, 1.0]
    assert g["p99_ratio_vs_relay"] == pytest.approx(g["p99_us"] / relay["p99_us"], abs=1e-3)
    assert len(g["p99_ratio_per_block"]) == 2
    assert doc["machine"]["cores"] >= 1 and doc["machine"]["rmw"]


def test_qos_depth_option_reaches_both_nodes_under_test(capsys, monkeypatch):
    """--qos-depth (default 100 = the gravity node's default) sets the same keep-last depth on the relay,
    the gravity node and the publisher; 0 or a non-integer is refused naming the option."""
    import rclpy
    from rclpy.qos import ReliabilityPolicy

    parser = argparse.ArgumentParser()
    bench.configure_parser(parser)
    assert parser.parse_args([]).qos_depth == 100
    assert parser.parse_args(["--qos-depth", "10"]).qos_depth == 10
    for bad in ("0", "ten"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--qos-depth", bad])
        assert "--qos-depth" in capsys.readouterr().err
    monkeypatch.setenv(latency.QOS_ENV, "37")
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        relay = latency.make_relay(ctx)
        grav = latency.make_gravity_node(ctx, latency.ProbeRobot.panda())
        assert [x.qos_profile.depth for x in relay.subscriptions] == [37] and relay._pub.qos_profile.depth == 37
        assert grav.sub.qos_profile.depth == 37 and grav.pub.qos_profile.depth == 37
        assert grav.sub.qos_profile.reliability == grav.pub.qos_profile.reliability == ReliabilityPolicy.RELIABLE
        relay.destroy_node()
        grav.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
