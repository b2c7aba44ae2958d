"""``replay``'s comparison of the node's outputs with the offline recomputation: the summary names where the
largest difference is (input, bag time, joint, both values). Fed serialized commands directly, no DDS."""
from __future__ import annotations

from collections import deque

import numpy as np
from rclpy.serialization import serialize_message
from std_msgs.msg import Float64MultiArray

from robot_dynamics_tools.commands._replay_inputs import Record
from robot_dynamics_tools.commands.replay import ReplayResult, _Matcher, worst_difference

T0 = 1_700_000_000_000_000_000
NAMES = ["a", "b", "c"]


def test_the_largest_difference_is_located():
    expected = [np.array([1.0, 2.0, 3.0]), None, np.array([4.0, 5.0, 6.0]), np.array([7.0, 8.0, 9.0])]
    sent = {0: [1.0, 2.0, 3.0 + 1e-7], 2: [4.0, 5.0 - 0.25, 6.0], 3: [7.0, 8.0, 9.0 + 0.1]}
    records = [Record(T0 + 2_000_000 * k, "/joint_states", "sensor_msgs/msg/JointState", b"", None, index=k)
               for k in range(4)]
    res, pending, now = ReplayResult(), deque(), [T0]
    m = _Matcher(res, expected, pending, now, ("/cmd", Float64MultiArray, lambda msg: msg.data))
    for i, values in sent.items():
        pending.append((i, 0.0))
        m.on_command(bytes(serialize_message(Float64MultiArray(data=values))))
    assert res.matched == 3 and res.dropped == 0
    assert abs(res.max_abs_diff - 0.25) < 1e-15
    at = worst_difference(res.worst, records, NAMES)
    assert at == {"input": 2, "t_s": (T0 + 4_000_000) * 1e-9, "joint": "b", "command": 4.75, "recomputed": 5.0}
    assert worst_difference(None, records, NAMES) is None
