"""Every test in this folder talks over real DDS (rclpy): marked ``ros`` here, not file by file."""
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.ros)
