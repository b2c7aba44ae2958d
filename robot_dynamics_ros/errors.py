"""Exceptions shared by the core, the nodes and the CLI."""
from __future__ import annotations


class UserError(Exception):
    """An error the user can fix (bad file, bad argument, infeasible request).

    The CLI prints it as one line (no traceback) and exits with :attr:`exit_status`.
    """

    exit_status = 1


class URDFError(UserError, ValueError):
    """The URDF cannot be read or describes a non-physical robot.

    The message names the file (when known) and the link or joint at fault.
    """
