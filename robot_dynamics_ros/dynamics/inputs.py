"""Shape and finiteness checks of the engines' array inputs (q, qd, qdd, tau), one mechanism for both engines.

Cheap enough for the control path: a single state costs one pass of ``math.isfinite`` over its Python floats
on the good path (about 0.25 µs for 7 joints); the search for the offending entry runs only to write the message, e.g.
``"qd[3] (panda_joint4) is NaN"``.
"""
from __future__ import annotations

import math

import numpy as np


def _bad_entry(a: np.ndarray, name: str, joint_names) -> str:
    flat = np.argwhere(~np.isfinite(a))[0]
    k, j = (int(flat[0]), int(flat[1])) if a.ndim == 2 else (None, int(flat[0]))
    v = a[k, j] if k is not None else a[j]
    where = f"{name}[{k}, {j}]" if k is not None else f"{name}[{j}]"
    return f"{where} ({joint_names[j]}) is {'NaN' if np.isnan(v) else repr(float(v))}"


def vector(x, n: int, name: str, joint_names) -> np.ndarray:
    """``x`` as a float (n,) array in ``joint_names`` order.

    Raises:
        ValueError: ``"q: expected shape (7,) in model.joint_names order, got (6,)"``, or
            ``"qd[3] (panda_joint4) is NaN"`` (inf likewise).
    """
    a = np.asarray(x, dtype=float)
    if a.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},) in model.joint_names order, got {np.shape(x)}")
    # over Python floats: 0.25 µs for n = 7, a quarter of np.isfinite(a).all(), and no floating-point
    # warning (inf·0 or inf − inf would raise "invalid value")
    if not all(map(math.isfinite, a.tolist())):
        raise ValueError(_bad_entry(a, name, joint_names))
    return a


def batch(x, n: int, name: str, joint_names, rows: int | None = None) -> np.ndarray:
    """``x`` as a C-contiguous float (N, n) array (a single state (n,) becomes (1, n)); ``rows`` forces N.

    Raises:
        ValueError: wrong shape (naming ``name`` and the expected shape) or a non-finite entry
            (``"q[4, 2] (elbow_joint) is inf"``).
    """
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] != n or (rows is not None and a.shape[0] != rows):
        want = f"({rows}, {n})" if rows is not None else f"(N, {n}) or ({n},)"
        raise ValueError(f"{name}: expected shape {want} in model.joint_names order, got {np.shape(x)}")
    if not np.isfinite(a).all():
        raise ValueError(_bad_entry(a if np.ndim(x) == 2 else a[0], name, joint_names))
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)
