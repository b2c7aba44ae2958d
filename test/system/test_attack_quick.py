"""The attack benchmark's quick run over DDS, asserted against the hardening targets.

``benchmarks/bench_attack.py --quick`` runs once for the module (separate processes: the nodes started as
``robot-dynamics run`` starts them, a 1 kHz publisher, retiming clients; on this session's private ROS
domain from test/conftest.py). Each test reads one concern from its JSON document. The benchmark judges a
command against g(q) from Pinocchio called directly on the URDF (test/reference.py), so a command
computed from a hostile message is told apart from one computed from a good state by its value.

Targets the nodes do not meet yet (a gravity node sharing its process with a 100 000-point retiming request,
a 50 MB description stalling control) are not tests here: the benchmark reports them as NOT MET and
docs/hardening.md lists them. Gap and recovery-time targets are judged against 2 × state_timeout plus the
largest gap of the good-states-only baseline of the same run (:func:`_gap_limit`): on an oversubscribed
machine the scheduler's stalls show in the baseline too.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GAP_TARGET_MS = 200.0          # 2 x state_timeout (0.1 s)
RSS_TARGET_MB = 20.0
LOG_LINE_TARGET = 500
#: wall time the quick run may take. Its windows: ~45 s of hostile kinds, descriptions and retiming, plus the
#: 100 000-message flood, which is as fast as the nodes take it. Measured on a quiet 2-core machine: 69.5 s
#: (flood window 11 s) on 2026-12-07; one earlier run with every node newly UDP-only took 166 s (window
#: 110 s) while helper sessions loaded the machine after the start-of-run check. CI's machine ran the rest of
#: the suite 2.4x slower than this one (833 s against 342 s), so the budget is about 3.5x the quiet figure.
WALL_LIMIT_S = 240.0

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.serial]


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    out = tmp_path_factory.mktemp("attack") / "attack.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_attack.py"), "--quick", "--json",
                           str(out)], capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert proc.returncode in (0, 2), (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    d = json.loads(out.read_text())
    assert json.loads(proc.stdout.strip().splitlines()[-1])["targets"] == d["targets"]
    return d


def _rows(doc):
    return doc["joint_states"]["rows"]


def test_quick_run_is_complete_and_quick(doc):
    assert all(doc["ready"].values()), doc["ready"]
    for seg in ("joint_states", "sim_time", "retiming_clients", "shared_process", "descriptions"):
        assert seg in doc and "error" not in doc[seg], (seg, doc.get(seg))
    assert all("error" not in r for r in _rows(doc))
    # the wall-time budget holds on a machine that is not oversubscribed (load ≤ cores at the start)
    if doc["loadavg_1min_at_start"] <= doc["cpus"]:
        assert doc["wall_s"] <= WALL_LIMIT_S, doc["segment_wall_s"]
    flood = next(r for r in _rows(doc) if r["kind"] == "rss_flood")
    assert flood["sent_hostile"] == 100_000
    for r in _rows(doc):
        assert r["sent_hostile"] > 0 and r["sent_good"] > 0, r
        # good states reached the gravity node: the baseline is answered with g(q) of the good pose
        assert r["gravity_compensation"]["good"] > 0, r


def test_no_node_dies_and_no_output_is_non_finite(doc):
    assert doc["deaths"] == []
    for r in _rows(doc):
        for node in ("gravity_compensation", "computed_torque"):
            assert r[node]["nonfinite"] == 0, (r["kind"], node)
    for r in doc["descriptions"]["rows"]:
        assert r["alive"], r
        for node in ("gravity_compensation", "computed_torque"):
            assert r[node]["nonfinite"] == 0, (r["description"], node)


def test_good_states_alone_are_answered_with_gravity_only(doc):
    """The baseline row: no hostile message, so every command is g(q) of the good pose."""
    base = next(r for r in _rows(doc) if r["kind"] == "good_only")
    for node in ("gravity_compensation", "computed_torque"):
        assert base[node]["caused"] == 0 and base[node]["commands"] == base[node]["good"] > 0, base


def test_implausible_states_cause_no_command(doc):
    caused = {(r["kind"], n): r[n]["caused"] for r in _rows(doc) if r["must_reject"]
              for n in ("gravity_compensation", "computed_torque")}
    bad = {k: v for k, v in caused.items() if v}
    assert not bad, (bad, {k: v[:3] for k, v in doc.get("other_command_examples", {}).items()})


def _gap_limit(doc) -> float:
    """The command-gap bound of this run, ms: the target (2 × state_timeout) plus the largest gap the same
    nodes showed with good states only (the baseline row of the same run). On an idle machine the baseline
    gap is a few ms; on an oversubscribed one the scheduler's stalls show there too, and only what a hostile
    message adds beyond them is judged."""
    base = next(r for r in _rows(doc) if r["kind"] == "good_only")
    return GAP_TARGET_MS + max(base[n]["max_gap_ms"] for n in ("gravity_compensation", "computed_torque"))


def test_command_gap_after_each_burst_within_two_state_timeouts(doc):
    limit = _gap_limit(doc)
    gaps = {(r["kind"], n): r[n]["max_gap_ms"] for r in _rows(doc) if r["kind"] not in ("rss_flood", "names_10000")
            for n in ("gravity_compensation", "computed_torque")}
    assert all(v <= limit for v in gaps.values()), (limit, gaps)


def test_command_gap_after_10000_name_messages_within_two_state_timeouts(doc):
    limit = _gap_limit(doc)
    row = next(r for r in _rows(doc) if r["kind"] == "names_10000")
    gaps = {n: row[n]["max_gap_ms"] for n in ("gravity_compensation", "computed_torque")}
    assert all(v <= limit for v in gaps.values()), (limit, gaps)


def test_rss_growth_over_100000_hostile_messages_bounded(doc):
    flood = next(r for r in _rows(doc) if r["kind"] == "rss_flood")
    assert flood["rss_growth_mb"] <= RSS_TARGET_MB, flood


def test_backward_sim_time_jump_is_followed_within_two_state_timeouts(doc):
    st = doc["sim_time"]
    for node in ("gravity_compensation", "computed_torque"):
        assert st[node]["commands_before_jump"] > 0, st
        assert st[node]["recovery_ms"] is not None, st[node]
    limit = _gap_limit(doc)   # the recovery time is a command gap
    for node in ("gravity_compensation", "computed_torque"):
        assert st[node]["recovery_ms"] <= limit, (limit, st[node])
        assert st[node]["diagnostics_ok_without_fresh_state"] == 0, st[node]
        assert st[node]["nonfinite"] == 0


def test_future_stamp_never_blocks_later_correct_states(doc):
    fut = next(r for r in _rows(doc) if r["kind"] == "future_stamp")
    base = next(r for r in _rows(doc) if r["kind"] == "good_only")
    # a future stamp held as the newest would make every later correct state "out of order": the nodes'
    # rejection counters would grow by about the good states sent. Allowed: the baseline's own rejections
    # (two interleaved streams) plus 10 % of the good states of the row.
    for node in ("gravity_compensation", "computed_torque"):
        rejected = fut[node]["diagnostic_counts"].get("rejected", 0)
        allowed = base[node]["diagnostic_counts"].get("rejected", 0) + 0.1 * fut["sent_good"]
        assert rejected <= allowed, (node, rejected, allowed, fut[node]["diagnostic_counts"])
    limit = _gap_limit(doc)
    for node in ("gravity_compensation", "computed_torque"):
        assert fut[node]["max_gap_ms"] <= limit, (limit, fut)


def test_every_retiming_request_is_answered(doc):
    rc = doc["retiming_clients"]
    assert rc["clients"] == 10 and rc["requests"] >= 10
    assert rc["unanswered"] == 0, (rc["unanswered_examples"], rc.get("server_log"), rc)
    sp = doc["shared_process"]["clients"]
    assert sp["requests"] >= 1 and sp["unanswered"] == 0, sp


def test_bad_retiming_requests_are_refused_and_good_ones_solved(doc):
    per_kind = doc["retiming_clients"]["per_kind"]
    for kind in ("nan", "inf", "unknown_joint", "empty"):
        assert per_kind[kind]["answered"] > 0 and per_kind[kind]["success"] == 0, (kind, per_kind[kind])
    assert per_kind["normal"]["success"] == per_kind["normal"]["answered"] > 0, per_kind["normal"]


_DESCRIPTIONS = ["path_existing_urdf", "path_dev_zero", "path_fifo", "junk_50mb", "mass_1e300", "nested_150k"]


@pytest.mark.parametrize("name", _DESCRIPTIONS)
def test_hostile_description_keeps_every_node_on_its_previous_model(doc, name):
    row = next(r for r in doc["descriptions"]["rows"] if r["description"] == name)
    assert row["acked"], row                          # every node's reader got it, and each refused it:
    assert row["handled"] == {n: "rejected" for n in ("computed_torque", "gravity_compensation",
                                                      "retiming_service")}, row
    assert row["alive"], row
    assert row["model_kept"], row                     # commands still g(q) of the Panda, nothing else
    assert not row.get("fifo_opened", False), row     # nobody held the FIFO open for reading
    assert not row.get("file_opened", False), row     # the heavier URDF on disk did not become the model
    assert row["error_lines"] == 3, row               # one line per node...
    assert row["max_log_line_chars"] <= LOG_LINE_TARGET, row  # ... and short (no 50 MB echo)
