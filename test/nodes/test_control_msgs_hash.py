"""The control_msgs types in the venv are wire-compatible with the ROS 2 distribution's control_msgs.

Independent source: the RIHS01 type hashes below were computed once (rosidl_generator_type_description of
the venv's rosidl 4.9.5) from the upstream definitions of ros-controls/control_msgs 6.8.0 (field lists
unchanged since 6.3.0, the Kilted release with ``int32 index`` / ``int32 multi_dof_index`` in the
feedback), not from the files in ./control_msgs. A field added, dropped, renamed or retyped changes the
hash, and then MoveIt's action client would not match our server.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import control_msgs

UPSTREAM_RIHS01 = {
    "control_msgs/action/FollowJointTrajectory":
        "RIHS01_ff29901b2693f5deb847e96084a1c2cdb26e70b7c847be21859b70a55fb29cf0",
    "control_msgs/action/FollowJointTrajectory_Goal":
        "RIHS01_8a9060704b269608f5a340934cc26e66869dd14bdac29e2e7fd9ec8b9882d205",
    "control_msgs/action/FollowJointTrajectory_Result":
        "RIHS01_8002e99ed2c14c6faa522f2a93c26d744c5982f254f9e98ff9c6f19789bdb220",
    "control_msgs/action/FollowJointTrajectory_Feedback":
        "RIHS01_0bb018d181bdc6384dd75365480967bd1d6eaee4ef3dd597c64cd0b8bdc10867",
    "control_msgs/action/FollowJointTrajectory_FeedbackMessage":
        "RIHS01_95618cc73912d99b9acaa17d2da5e832cb0bfdeede7534fa8ec600feca2a6c4b",
    "control_msgs/action/FollowJointTrajectory_SendGoal_Request":
        "RIHS01_179c93691f1f6d1d115881ff88c3917b7cc6eac2ba4bf56766cc7c4389e19ef1",
    "control_msgs/action/FollowJointTrajectory_GetResult_Response":
        "RIHS01_08eefbaa146ce02ba45898d5e99160afd6c4c54a30d159aee0f2ca6035b1580f",
    "control_msgs/msg/JointTolerance":
        "RIHS01_c254f9cece0f3b733017b6990fd46d1326e25242d6b8844398c97d9a88e7d648",
    "control_msgs/msg/JointComponentTolerance":
        "RIHS01_739ea7566931944d33830fa10f1bf5e7a7fbdc3172bce7a7eaac642bd6e3ffa4",
    "control_msgs/msg/SpeedScalingFactor":
        "RIHS01_0c240f349f2b74e33e8741f83e0f196ddeb6585923663876ed3c1f51f0566037",
}
FILES = {"action/FollowJointTrajectory.json", "msg/JointTolerance.json", "msg/JointComponentTolerance.json",
         "msg/SpeedScalingFactor.json"}


def _installed_hashes() -> dict[str, str]:
    # <prefix>/lib/pythonX.Y/site-packages/control_msgs -> <prefix>/share/control_msgs: the rosidl install
    # layout of a venv and of /opt/ros/<distro> alike (the venv sets no AMENT_PREFIX_PATH)
    share = Path(control_msgs.__file__).resolve().parents[4] / "share" / "control_msgs"
    out: dict[str, str] = {}
    for rel in FILES:
        for entry in json.loads((share / rel).read_text())["type_hashes"]:
            out[entry["type_name"]] = entry["hash_string"]
    return out


@pytest.mark.parametrize("type_name", sorted(UPSTREAM_RIHS01))
def test_type_hash_matches_upstream_control_msgs(type_name):
    assert _installed_hashes().get(type_name) == UPSTREAM_RIHS01[type_name]


def test_generated_python_types_have_the_kilted_fields():
    from control_msgs.action import FollowJointTrajectory
    from control_msgs.msg import SpeedScalingFactor

    fb = FollowJointTrajectory.Feedback.get_fields_and_field_types()
    assert fb["index"] == "int32" and fb["multi_dof_index"] == "int32"
    assert FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED == -4
    assert FollowJointTrajectory.Result.GOAL_TOLERANCE_VIOLATED == -5
    assert SpeedScalingFactor.get_fields_and_field_types() == {"factor": "double"}
