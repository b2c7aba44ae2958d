"""Hostile files given to the tools: every input error is one line on stderr, exit status 1, and nothing is
written. Outputs (``--out`` and the side files beside it) must be a regular file or a new name in an
existing directory: FIFOs, symbolic links to a FIFO or to nothing, and directories are refused (tested with
a FIFO and links in a temporary directory, never a real device)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from robot_dynamics_tools import cli, paths
from robot_dynamics_tools.recordings import MAX_DATA_BYTES

NAMES = [f"panda_joint{j}" for j in range(1, 8)]


def _csv(path: Path, n: int = 600) -> Path:
    t = 0.005 * np.arange(n)
    q = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.7]) + 0.3 * np.sin(2 * t)[:, None]
    cols = ["t"] + [f"{j}/{s}" for j in NAMES for s in ("position", "effort")]
    rows = np.column_stack([t] + [np.column_stack([q[:, j], np.ones(n)]) for j in range(7)])
    path.write_text(",".join(cols) + "\n" + "\n".join(",".join(f"{v:.9g}" for v in r) for r in rows) + "\n")
    return path


def _fails_in_one_line(capfd, argv: list, match: str) -> str:
    status = cli.main([str(a) for a in argv])
    out, err = capfd.readouterr()
    assert status == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert match in lines[0], lines[0]
    return lines[0]


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ------------------------------------------------------------------------------------------- identify inputs
def test_identify_on_a_csv_that_is_not_utf8(tmp_path, capfd):
    data = _csv(tmp_path / "latin1.csv")
    data.write_bytes(data.read_bytes().replace(b"panda_joint1/position", b"panda_joint1/position\xe9"))
    before = _listing(tmp_path)
    _fails_in_one_line(capfd, ["identify", "--urdf", "panda", "--data", data, "--out", tmp_path / "o.urdf"],
                       "not UTF-8 text (byte 0xe9")
    assert _listing(tmp_path) == before


def test_identify_on_a_csv_above_the_size_cap_is_refused_before_reading(tmp_path, capfd):
    data = tmp_path / "huge.csv"
    with open(data, "wb") as fh:  # sparse: its size is above the cap, no disk is used, and reading it
        fh.write(b"t,panda_joint1/position\n")  # whole would take several times the cap in memory
        fh.truncate(MAX_DATA_BYTES + 1)
    before = _listing(tmp_path)
    _fails_in_one_line(capfd, ["identify", "--urdf", "panda", "--data", data, "--out", tmp_path / "o.urdf"],
                       "MiB is above --max-data-mb 100")
    small = _csv(tmp_path / "small.csv")
    _fails_in_one_line(capfd, ["identify", "--urdf", "panda", "--data", small, "--out", tmp_path / "o.urdf",
                               "--max-data-mb", "0.01"], "is above --max-data-mb 0.01")
    assert _listing(tmp_path) == before + ["small.csv"]


def test_identify_data_that_is_a_fifo_is_refused(tmp_path, capfd):
    os.mkfifo(tmp_path / "data.csv")
    _fails_in_one_line(capfd, ["identify", "--urdf", "panda", "--data", tmp_path / "data.csv", "--out",
                               tmp_path / "o.urdf"], "is a FIFO")


# ------------------------------------------------------------------------------------------- outputs
def _special_outputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Output paths that are not a regular file or a new name: path -> the refusal's words."""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "to_fifo").symlink_to(tmp_path / "fifo")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "x")
    (tmp_path / "folder").mkdir()
    return {"fifo": (tmp_path / "fifo", "is a FIFO"),
            "link to a FIFO": (tmp_path / "to_fifo", "is a FIFO (through a symbolic link)"),
            "dangling link": (tmp_path / "dangling", "a symbolic link to nothing"),
            "directory": (tmp_path / "folder", "is a directory")}


@pytest.mark.parametrize("kind", ["fifo", "link to a FIFO", "dangling link", "directory"])
def test_identify_out_that_is_not_a_regular_file_is_refused_and_no_side_file_written(tmp_path, capfd, kind):
    data = _csv(tmp_path / "data.csv")
    out, words = _special_outputs(tmp_path)[kind]
    before = _listing(tmp_path)
    _fails_in_one_line(capfd, ["identify", "--urdf", "panda", "--data", data, "--out", out], words)
    assert _listing(tmp_path) == before  # no report, friction YAML or plot beside it
    if kind == "fifo":
        assert (tmp_path / "fifo").is_fifo()


def test_identify_side_file_that_is_a_fifo_is_refused_before_any_work(tmp_path, capfd):
    data = _csv(tmp_path / "data.csv")
    os.mkfifo(tmp_path / "report.json")
    before = _listing(tmp_path)
    _fails_in_one_line(capfd, ["identify", "--urdf", "panda", "--data", data, "--out", tmp_path / "o.urdf",
                               "--report", tmp_path / "report.json"], "--report")
    assert _listing(tmp_path) == before


def test_retime_and_excite_out_use_the_same_check(tmp_path, capfd):
    os.mkfifo(tmp_path / "fifo")
    wp = tmp_path / "wp.csv"
    wp.write_text(",".join(NAMES) + "\n" + ",".join(["0.0"] * 7) + "\n" + ",".join(["0.1"] * 7) + "\n")
    _fails_in_one_line(capfd, ["retime", "--urdf", "panda", "--waypoints", wp, "--out", tmp_path / "fifo"],
                       "is a FIFO")
    _fails_in_one_line(capfd, ["excite", "--urdf", "panda", "--out", tmp_path / "fifo"], "is a FIFO")


def test_replay_out_in_a_place_that_takes_no_files(tmp_path, capfd):
    """/proc is a directory every Linux has that takes no new files, even for root (os.access says yes)."""
    from rosbags.rosbag2 import Writer

    with Writer(tmp_path / "in", version=9):
        pass
    for out, words in ((Path("/proc/robot_dynamics_replay_out"), "cannot write in '/proc'"),
                       (tmp_path / "missing" / "out", "does not exist"),
                       (tmp_path / "in" / "metadata.yaml" / "out", "does not exist")):
        before = _listing(tmp_path)
        _fails_in_one_line(capfd, ["replay", tmp_path / "in", "--out", out, "--urdf", "panda"], words)
        assert _listing(tmp_path) == before


def test_a_link_to_a_regular_file_is_written_through(tmp_path):
    (tmp_path / "real.txt").write_text("old")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    paths.check_output_path(tmp_path / "link.txt", "--out")
    paths.write_text(tmp_path / "link.txt", "new", "--out")
    assert (tmp_path / "link.txt").is_symlink() and (tmp_path / "real.txt").read_text() == "new"
    assert _listing(tmp_path) == ["link.txt", "real.txt"]  # no temporary file left
