"""Where the tools read and write: the one check of every output path (``--out``, ``--report``, ``--plot``, a
bag folder), the size cap of an input read whole into memory, and the atomic text write.

An output is **a regular file** (a symbolic link to one counts) **or a new name in an existing, writable
directory**; anything else — a directory where a file is expected, a FIFO, a device node, a socket, a
symbolic link to any of those or to nothing — is refused with one line before any work, so a command never
blocks on a FIFO nor replaces what it does not own (as root, an atomic rename would replace even
``/dev/full``). A command that writes side files beside its main output (``identify``'s report and plot)
checks each of them the same way. An output *directory* a command creates (``--out`` of ``demo``,
``track``, ``push``) is an existing directory or a new name whose nearest existing ancestor is a
writable directory. A bag folder (``replay --out``) must not exist at all.

Writability is tried, not guessed: ``os.access`` says yes to root for a read-only mount or ``/proc``, so
:func:`check_output_path` creates and removes a temporary name in the directory.
"""
from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from robot_dynamics_ros.errors import UserError

__all__ = ["check_output_path", "check_outputs", "check_new_folder", "check_input_size", "write_text"]


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _probe_directory(base: Path, what: str, path) -> None:
    """Create and remove a temporary file in ``base``: the directory really takes new files."""
    try:
        fd, name = tempfile.mkstemp(prefix=".probe.", dir=base)
    except OSError as exc:
        raise UserError(f"{what} '{path}': cannot write in '{base}': {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(name)


def check_output_path(path: str | os.PathLike, what: str, *, directory: bool = False) -> Path:
    """Check, before any work, that an output can be written at ``path``; return it as a Path.

    ``directory=False``: ``path`` is a file the command writes: an existing regular file (or a symbolic link
    to one) or a new name in an existing directory (the command does not create directories).
    ``directory=True``: ``path`` is a directory the command creates with its parents, or an existing one;
    the nearest existing ancestor must be a directory. Either way the directory written into must take a
    new file (tried).

    Raises:
        UserError: one line naming ``what`` and ``path``: the parent is missing, a file, or not writable,
            or ``path`` is of the wrong kind (a directory, FIFO, device, socket, a dangling link).
    """
    p = Path(path).expanduser()
    if not str(path):
        raise UserError(f"{what}: empty path")
    if directory:
        if p.exists() and not p.is_dir():
            raise UserError(f"{what} '{path}': exists and is not a directory")
        base = p
        while not base.exists() and not base.is_symlink():  # the nearest existing ancestor
            base = base.parent
        if not base.is_dir():
            raise UserError(f"{what} '{path}': '{base}' is a file, not a directory")
    else:
        if p.is_symlink() and not p.exists():
            raise UserError(f"{what} '{path}': a symbolic link to nothing; not writing through it")
        if p.exists():
            mode = p.stat().st_mode  # follows a link: what would be written is its target
            if stat.S_ISDIR(mode):
                raise UserError(f"{what} '{path}': is a directory, expected a file name")
            if not stat.S_ISREG(mode):
                link = " (through a symbolic link)" if p.is_symlink() else ""
                raise UserError(f"{what} '{path}': is {_kind(mode)}{link}, expected a regular file or a new "
                                "file name")
            p_real = p.resolve()
        else:
            p_real = p
        base = p_real.parent
        if not base.exists():
            raise UserError(f"{what} '{path}': directory '{base}' does not exist")
        if not base.is_dir():
            raise UserError(f"{what} '{path}': '{base}' is a file, not a directory")
    _probe_directory(base, what, path)
    return p


def check_new_folder(path: str | os.PathLike, what: str) -> Path:
    """A folder the command creates whole (a rosbag2): ``path`` must not exist (nor be a link) and its
    parent must be an existing directory that takes new files.

    Raises:
        UserError: one line naming ``what`` and ``path``.
    """
    p = Path(path).expanduser()
    if not str(path):
        raise UserError(f"{what}: empty path")
    if p.exists() or p.is_symlink():
        raise UserError(f"{what} '{path}': already exists (a bag is a new directory); choose another {what}")
    base = p.parent
    if not base.is_dir():
        raise UserError(f"{what} '{path}': directory '{base}' does not exist")
    _probe_directory(base, what, path)
    return p


def check_outputs(outputs: Iterable[tuple[str, str]], inputs: Iterable[tuple[str, str]] = ()) -> None:
    """Every ``(option, path)`` output checked by :func:`check_output_path` (files), none the same file as
    another output or as an input (``(option, path)`` pairs; a name that is not a file is skipped).

    Raises:
        UserError: one line naming the option and path.
    """
    outputs = list(outputs)
    seen: dict[Path, str] = {}
    for what, path in outputs:
        check_output_path(path, what)
        r = Path(path).expanduser().resolve()
        if r in seen:
            raise UserError(f"{what} '{path}' is also the {seen[r]} output; choose another {what}")
        seen[r] = what
    for w_in, p_in in inputs:
        p = Path(p_in).expanduser()
        if not p.exists():
            continue
        r_in = p.resolve()
        if r_in in seen:
            what = seen[r_in]
            raise UserError(f"{what} '{dict(outputs)[what]}' is the {w_in} input '{p_in}': refusing to "
                            f"overwrite it; choose another {what}")


def check_input_size(path: str | os.PathLike, limit_bytes: float, what: str, option: str) -> int:
    """Bytes of an input read whole into memory (a regular file, or every regular file of a folder, such as
    a rosbag2), checked before reading; devices, FIFOs and sockets are refused.

    Args:
        path: the input.
        limit_bytes: the cap.
        what: how the error names the input (``"--data"``, ``"IN_BAG"``).
        option: the option that sets the cap (named in the error).

    Raises:
        UserError: one line naming the input, its size and the cap.
    """
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise UserError(f"{what} '{path}': {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        size = sum(f.stat().st_size for f in p.iterdir() if f.is_file())
    elif stat.S_ISREG(st.st_mode):
        size = st.st_size
    else:
        raise UserError(f"{what} '{path}': is {_kind(st.st_mode)}, expected a regular file or a bag folder")
    if size > limit_bytes:
        raise UserError(f"{what} '{path}': {size / 2**20:.1f} MiB is above {option} {limit_bytes / 2**20:g} "
                        "(the whole input is held in memory)")
    return size


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(path: str | os.PathLike, text: str, what: str) -> None:
    """Write ``text`` (UTF-8) atomically: a temporary file beside the target, renamed over it when complete,
    so a failure leaves no half-written file. A symbolic link to a regular file is written through (its
    target is replaced), never replaced by a file.

    Raises:
        UserError: one line naming ``what`` and ``path`` (the temporary file is removed).
    """
    p = Path(path).expanduser()
    target = p.resolve() if p.is_symlink() else p
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o666 & ~_umask())
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        # strerror, not str(exc): the latter names the temporary file, not the one the user asked for
        raise UserError(f"{what} '{path}': cannot write: {exc.strerror or exc}") from None
