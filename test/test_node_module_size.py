"""Every node module is a thin shell: under 300 lines (the policy lives in the ROS-free cores and common.py)."""
from pathlib import Path

NODES = Path(__file__).resolve().parent.parent / "robot_dynamics_ros" / "nodes"


def test_every_node_module_is_under_300_lines():
    sizes = {p.name: len(p.read_text().splitlines()) for p in NODES.glob("*.py") if p.name != "common.py"}
    assert len(sizes) >= 6 and all(n < 300 for n in sizes.values()), sizes
