"""The package's data files (``config/``, ``launch/``, ``urdf/``) after any kind of install, the one reader of
files named by a user (:func:`read_regular_file`: regular files only, size-capped) and the reader of its YAML
configuration files (:func:`read_yaml`).

Lookup order: the ament index (``colcon build`` / a ROS install: ``<prefix>/share/robot_dynamics_ros``), then
``<sys.prefix>/share/robot_dynamics_ros`` (``pip install .`` installs ``setup.py``'s ``data_files`` there), then
the source checkout this module is imported from (the repository root holding ``package.xml``), so the same
name works from a colcon workspace, a virtualenv and the repository.
"""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import yaml

from robot_dynamics_ros.errors import UserError

PACKAGE = "robot_dynamics_ros"

#: largest configuration file read (joint limits, motor limits, friction YAML, payload JSON), bytes; the
#: package's largest is below 10 kB
MAX_CONFIG_BYTES = 1024 * 1024
#: the refusal of a path that is not a readable regular file. Policy: the same words whether the path does not
#: exist, is a directory, FIFO, socket or device, or cannot be opened, so that a parameter cannot be used to
#: learn which files exist on the node's machine
NOT_REGULAR = "not a readable regular file"


def share_dirs() -> list[Path]:
    """Existing candidate share directories, in lookup order (may be empty)."""
    out: list[Path] = []
    try:
        # optional: only a ROS install (colcon, apt) has the ament index
        from ament_index_python.packages import get_package_share_directory

        out.append(Path(get_package_share_directory(PACKAGE)))
    except (ImportError, LookupError, OSError, ValueError):
        pass  # no ament index in this environment (pip / source checkout)
    out.append(Path(sys.prefix) / "share" / PACKAGE)
    source = Path(__file__).resolve().parent.parent
    if (source / "package.xml").is_file():
        out.append(source)
    seen, result = set(), []
    for p in out:
        if p.is_dir() and p.resolve() not in seen:
            seen.add(p.resolve())
            result.append(p)
    return result


def data_file(subdir: str, name: str) -> Path | None:
    """``<share>/<subdir>/<name>`` from the first share directory that has it, else None."""
    for base in share_dirs():
        p = base / subdir / name
        if p.is_file():
            return p
    return None


def resolve_config_file(value: str) -> str:
    """A parameter naming a config file: an existing path (``~`` expanded) stays as given; a bare file name
    (no directory part, ``.yaml`` optional) found in the package's ``config/`` becomes that file's path;
    anything else is returned unchanged (the reader then names it in its error). Empty stays empty."""
    text = str(value or "").strip()
    if not text:
        return ""
    path = Path(text).expanduser()
    if path.is_file():
        return str(path)
    if path.name == text:
        # "ur10_motor_limits" as well as "ur10_motor_limits.yaml"
        for name in (text,) if path.suffix in (".yaml", ".yml") else (text, text + ".yaml"):
            found = data_file("config", name)
            if found is not None:
                return str(found)
    return text


def _shown(path) -> str:
    """``'<path>'`` for a message, at most 200 characters of it, control characters escaped."""
    text = str(path)
    head = text[:200].encode("unicode_escape", errors="backslashreplace").decode("ascii")[:200]
    return f"'{head}'" + ("..." if len(text) > 200 else "")


def check_regular_file(path: str | Path, what: str, error: type[Exception] = UserError) -> Path:
    """``path`` (``~`` expanded) when it names a regular file (symbolic links followed), checked with
    ``os.stat`` without opening it: a FIFO or device is never opened.

    Raises:
        ``error`` (UserError by default): ``"<what> '<path>': not a readable regular file"`` (:data:`NOT_REGULAR`,
        one line; the same words for a missing path, a directory, a FIFO, a device or a stat failure).
    """
    raw = str(path)
    if not raw or len(raw) > 4096 or "\x00" in raw:  # PATH_MAX; a NUL cannot name a file
        raise error(f"{what} {_shown(raw)}: {NOT_REGULAR}")
    p = Path(raw).expanduser()
    try:
        st = os.stat(p)
    except (OSError, ValueError):
        raise error(f"{what} {_shown(p)}: {NOT_REGULAR}") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{what} {_shown(p)}: {NOT_REGULAR}")
    return p


def read_regular_file(path: str | Path, what: str, max_bytes: int = MAX_CONFIG_BYTES,
                      error: type[Exception] = UserError) -> bytes:
    """The bytes of the regular file ``path``: checked first (:func:`check_regular_file`), then opened
    non-blocking and checked again on the open descriptor (a path swapped for a FIFO in between is refused,
    never waited on), at most ``max_bytes`` bytes read.

    Raises:
        ``error`` (UserError by default), one line: ``"<what> '<path>': not a readable regular file"``, or
        ``"... more than <max_bytes> bytes"``.
    """
    p = check_regular_file(path, what, error)
    refusal = f"{what} {_shown(p)}: {NOT_REGULAR}"
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        raise error(refusal) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(refusal)
        if st.st_size > max_bytes:
            raise error(f"{what} {_shown(p)}: {st.st_size} bytes, more than the {max_bytes} bytes accepted")
        chunks, size = [], 0
        while size <= max_bytes:  # the file may grow after fstat: read at most the cap + 1 byte
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        raise error(refusal) from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise error(f"{what} {_shown(p)}: more than the {max_bytes} bytes accepted")
    return b"".join(chunks)


def read_yaml(path: str | Path, what: str):
    """The parsed content of the YAML file ``path`` (the package's configuration files: joint limits, motor
    limits, friction), read by :func:`read_regular_file` (at most :data:`MAX_CONFIG_BYTES` bytes).

    Raises:
        UserError: one line, ``"<what> '<path>': not a readable regular file"``, ``"... more than N bytes"``,
        ``"... not UTF-8 text"`` or ``"... not valid YAML (line L, column C)"`` (no content is quoted).
    """
    data = read_regular_file(path, what)
    try:
        return yaml.safe_load(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {_shown(path)}: not UTF-8 text (byte {exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise UserError(f"{what} {_shown(path)}: not valid YAML{where}") from None
