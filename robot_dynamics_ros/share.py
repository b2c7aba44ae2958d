"""The package's data files (``config/``, ``launch/``, ``urdf/``) after any kind of install, and the reader of its
YAML configuration files (:func:`read_yaml`).

Lookup order: the ament index (``colcon build`` / a ROS install: ``<prefix>/share/robot_dynamics_ros``), then
``<sys.prefix>/share/robot_dynamics_ros`` (``pip install .`` installs ``setup.py``'s ``data_files`` there), then
the source checkout this module is imported from (the repository root holding ``package.xml``), so the same
name works from a colcon workspace, a virtualenv and the repository.
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

from robot_dynamics_ros.errors import UserError

PACKAGE = "robot_dynamics_ros"


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


def read_yaml(path: str | Path, what: str):
    """The parsed content of the YAML file ``path`` (the package's configuration files: joint limits, motor
    limits, friction).

    Raises:
        UserError: ``"<what> '<path>': no such file"`` or ``"... cannot read: <reason>"`` (one line).
    """
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except FileNotFoundError:
        raise UserError(f"{what} {str(path)!r}: no such file") from None
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"{what} {str(path)!r}: cannot read: {exc}") from None
