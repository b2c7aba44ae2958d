"""``robot-dynamics push``'s human summary when the push was not detected (the residual stayed under the
threshold): it says so, instead of a delay of "never ms"."""
from __future__ import annotations

import argparse

from robot_dynamics_tools.commands import push as push_cmd


def _summary(delay):
    return {"force_N": 5.0, "link": "panda_link5", "push_onset_s": 1.0, "peak_velocity_fraction": 0.5,
            "detection_delay_ms": delay, "estimate_error_ratio": 0.02, "peak_external_torque_Nm": 2.0,
            "settle_time_constants": 3, "contact_free_s": 10.0, "false_collisions": 0,
            "contact_free_max_residual_Nm": 0.1, "plot": None, "pass": delay is not None}


def _run(monkeypatch, capsys, delay) -> str:
    monkeypatch.setattr(push_cmd, "push", lambda *a, **kw: _summary(delay))
    parser = argparse.ArgumentParser()
    push_cmd.configure_parser(parser)
    push_cmd.run(parser.parse_args(["--out", ""]))
    return capsys.readouterr().out


def test_an_undetected_push_is_said_so(monkeypatch, capsys):
    out = _run(monkeypatch, capsys, None)
    assert "not detected (the residual stayed under the threshold)" in out and "never ms" not in out


def test_a_detected_push_gives_its_delay(monkeypatch, capsys):
    assert "detected after 12.5 ms" in _run(monkeypatch, capsys, 12.5)
