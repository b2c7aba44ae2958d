"""Joint-state recordings (rosbag2 or CSV) as :class:`robot_dynamics_ros.identification.data.Recording`.

Reading a bag is a tool's job (the runtime package never reads bags): ``identify`` and the tests call
:func:`read_recording`; the CSV reader and everything after the recording are in the runtime package.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.identification.data import Recording, read_csv
from robot_dynamics_tools.bags import JOINT_STATE, BagReader
from robot_dynamics_tools.paths import check_input_size


def _fail_data(source: str, msg: str) -> UserError:
    return UserError(f"{source}: {msg}")


def read_bag(path: str | Path, topic: str | None = None) -> Recording:
    """Read JointState messages from a rosbag2. Raises UserError (no JointState topic, no efforts, names
    changing between messages, too few messages)."""
    src = str(path)
    with BagReader(path) as bag:
        topics = {t: m for t, m in bag.topics.items() if m == JOINT_STATE}
        if topic is None:
            if len(topics) != 1:
                raise _fail_data(src, f"expected one {JOINT_STATE} topic, found {sorted(topics) or 'none'} "
                                 "(choose one with --topic)")
            topic = next(iter(topics))
        bag.check_topics({topic: JOINT_STATE})
        names = None
        t, t_rec, q, qd, tau = [], [], [], [], []
        has_v = True
        for rec in bag.messages([topic]):
            m = rec.msg
            nm = tuple(m.name)
            if names is None:
                names = nm
            elif nm != names:
                raise _fail_data(src, f"topic {topic}: joint names change at t = {rec.t_ns * 1e-9:.6f} s "
                                 f"({list(nm)[:3]}... after {list(names)[:3]}...)")
            n = len(nm)
            if len(m.position) != n:
                raise _fail_data(src, f"topic {topic}: a message has {len(m.position)} positions for {n} names")
            if len(m.effort) != n:
                raise _fail_data(src, f"topic {topic}: messages carry no efforts (effort has {len(m.effort)} "
                                 f"entries for {n} joints); identification needs measured torques")
            has_v = has_v and len(m.velocity) == n
            t.append(m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec)
            t_rec.append(rec.t_ns)
            q.append(list(m.position))
            qd.append(list(m.velocity) if len(m.velocity) == n else [math.nan] * n)
            tau.append(list(m.effort))
    if names is None or len(t) < 3:
        raise _fail_data(src, f"topic {topic}: {len(t)} JointState messages, need many more")
    # header stamps when every message has one; else the record times throughout: one unstamped message (a
    # simulator's clock at 0) must not put wall time among simulated stamps
    times = np.array(t if min(t) > 0 else t_rec, dtype=np.int64)
    return Recording((times - times[0]) * 1e-9, names, np.array(q), np.array(qd) if has_v else None, None,
                     np.array(tau), src)


#: default cap on the size of ``--data`` (bytes): a CSV is held in memory about 7 times over while it is
#: parsed (a 350 MB CSV took 2.4 GB before failing); 100 MiB is about 4 min of a 7-joint arm at 1 kHz
MAX_DATA_BYTES = 100 * 2**20


def read_recording(path: str | Path, topic: str | None = None, *, max_bytes: float = MAX_DATA_BYTES) -> Recording:
    """CSV (a file ending in .csv) or a bag (rosbag2 or ROS 1, anything else), at most ``max_bytes`` (checked
    before reading: :func:`robot_dynamics_tools.paths.check_input_size`).

    Raises:
        UserError: one line naming ``--data``: missing, too large, not a file or bag folder, a CSV that is not
            UTF-8 text, or what the readers refuse.
    """
    p = Path(path)
    if not p.exists():
        raise UserError(f"--data '{path}': no such file or directory")
    check_input_size(p, max_bytes, "--data", "--max-data-mb")
    if p.is_file() and p.suffix.lower() == ".csv":
        try:
            return read_csv(p)
        except UnicodeDecodeError as exc:
            raise UserError(f"--data '{path}': not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                            f"{exc.start}); a CSV recording is UTF-8") from None
    return read_bag(p, topic)
