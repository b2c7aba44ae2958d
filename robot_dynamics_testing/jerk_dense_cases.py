"""Shared test helpers (moved here from test/test_jerk_dense.py so tests of other areas import them from the harness)."""
from __future__ import annotations

import numpy as np


def longest_above(t, a, level):
    """Longest run of a(t) > level, s, ends at the linearly interpolated crossings (t, a (K,))."""
    above = np.concatenate(([False], a > level, [False]))
    starts = np.flatnonzero(~above[:-1] & above[1:])  # first sample above
    ends = np.flatnonzero(above[:-1] & ~above[1:]) - 1  # last sample above
    best = 0.0
    for i, j in zip(starts, ends):
        t0 = t[i] if i == 0 else t[i - 1] + (level - a[i - 1]) / (a[i] - a[i - 1]) * (t[i] - t[i - 1])
        t1 = t[j] if j == len(t) - 1 else t[j] + (level - a[j]) / (a[j + 1] - a[j]) * (t[j + 1] - t[j])
        best = max(best, t1 - t0)
    return best
