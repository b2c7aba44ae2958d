"""The CLI's heartbeat: a long step logs a line every period, a quick one logs nothing."""
from __future__ import annotations

import time

from robot_dynamics_tools.commands._progress import heartbeat


def test_heartbeat_lines_only_while_a_step_lasts():
    lines = []
    with heartbeat(lines.append, "compiling", period=0.05):
        time.sleep(0.28)
    n = len(lines)
    assert 3 <= n <= 6 and all(line.startswith("  ... compiling (") for line in lines)
    time.sleep(0.15)
    assert len(lines) == n   # stopped with the step
    quick = []
    with heartbeat(quick.append, "fast", period=0.5):
        pass
    assert quick == []
