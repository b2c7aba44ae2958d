"""Hold-out validation: fit on one contiguous part of a recording, judge on another.

The recording (after filtering, :func:`~robot_dynamics_ros.identification.data.prepare`) is cut in time:
the first ``1 − holdout`` is the fit block, the last ``holdout`` the validation block, with a gap of one
filter window between them so that no filtered sample of the validation block has seen a fit sample.
On the validation block both models (the URDF prior and the identified one) predict the torque from
the filtered state, and the errors are taken against the RAW recorded torque (scaled), per joint:
RMS, maximum absolute error, and the RMS as a fraction of the joint's peak |tau|. Interleaved samples
would let a model that memorizes noise look good; a later block of the motion does not.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot_dynamics_ros.identification.data import Prepared

__all__ = ["split", "block_split", "errors", "Split", "validation_report"]


@dataclass
class Split:
    """Samples of the fit and validation blocks of a :class:`Prepared` recording: slices, or for the fit
    of :func:`block_split` an index array (ascending)."""

    fit: slice | np.ndarray
    validation: slice

    def fit_indices(self, n_samples: int) -> np.ndarray:
        """The fit block's sample indices (ascending)."""
        return np.arange(n_samples)[self.fit]

    def take(self, p: Prepared, which: str):
        s = self.fit if which == "fit" else self.validation
        return p.q[s], p.qd[s], p.qdd[s], p.tau[s], p.tau_raw[s]


def split(p: Prepared, holdout: float) -> Split:
    """Contiguous blocks: fit = first (1 − holdout), validation = last holdout, one window apart.

    Raises ValueError when holdout is not in [0, 0.9] or a block would be shorter than 3 windows.
    """
    if not 0.0 <= holdout <= 0.9:
        raise ValueError(f"holdout {holdout}: must be in [0, 0.9]")
    N = p.t.size
    if holdout == 0.0:
        return Split(slice(0, N), slice(N, N))
    nv = int(round(holdout * N))
    nf = N - nv - p.window
    if nv < 3 * p.window or nf < 3 * p.window:
        raise ValueError(f"{N} samples: too few to hold out {holdout:.0%} (each block needs ≥ {3 * p.window})")
    return Split(slice(0, nf), slice(N - nv, N))


def block_split(p: Prepared, start: int, stop: int) -> Split:
    """Validation = samples [start, stop) anywhere in the recording; fit = every sample at least one filter
    window away from it (before and after).

    Raises ValueError when the block is outside the recording or a block would be shorter than 3 windows.
    """
    N, w = p.t.size, p.window
    if not 0 <= start < stop <= N:
        raise ValueError(f"validation block [{start}, {stop}) is not inside the {N} samples")
    fit = np.r_[0:max(start - w, 0), min(stop + w, N):N]
    if stop - start < 3 * w or fit.size < 3 * w:
        raise ValueError(f"{N} samples: too few for a validation block [{start}, {stop}) "
                         f"(each block needs ≥ {3 * w})")
    return Split(fit, slice(start, stop))


def errors(tau_pred: np.ndarray, tau_meas: np.ndarray, moving: np.ndarray | None = None) -> dict:
    """Per-joint error statistics (N·m): rms (n,), max (n,), peak |tau_meas| (n,), rms/peak (n,), and
    rms_moving (n,): the RMS over the samples where ``moving`` (N, n) is True (NaN when there are none)."""
    e = tau_pred - tau_meas
    rms = np.sqrt(np.mean(e ** 2, axis=0))
    peak = np.max(np.abs(tau_meas), axis=0)
    out = {"rms": rms, "max": np.max(np.abs(e), axis=0), "peak": peak,
           "rms_over_peak": np.where(peak > 0, rms / np.where(peak > 0, peak, 1.0), np.inf)}
    if moving is not None:
        cnt = moving.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out["rms_moving"] = np.sqrt(np.where(moving, e ** 2, 0.0).sum(axis=0) / cnt)
    return out


def validation_report(joint_names, tau_urdf: np.ndarray, tau_ident: np.ndarray, tau_meas: np.ndarray,
                      moving: np.ndarray, tau_urdf_damped: np.ndarray | None = None) -> tuple[dict, dict, dict]:
    """The report's ``validation`` entry: joint -> URDF (``tau_urdf``, the baseline: the rigid-body URDF)
    and identified RMS / max error, peak, RMS over the moving samples and identified RMS / peak, and with
    ``tau_urdf_damped`` (the URDF with its ``<dynamics>`` simulation damping and friction) its RMS as
    ``urdf_damped_rms`` (N·m; arrays (M, n), ``moving`` (M, n) bool); also returns the two :func:`errors`
    dicts (URDF, identified)."""
    eu, ei = errors(tau_urdf, tau_meas, moving), errors(tau_ident, tau_meas, moving)
    ed = None if tau_urdf_damped is None else errors(tau_urdf_damped, tau_meas)
    table = {jn: {"urdf_rms": eu["rms"][j], "urdf_max": eu["max"][j], "identified_rms": ei["rms"][j],
                  "identified_max": ei["max"][j], "peak": eu["peak"][j], "urdf_rms_moving": eu["rms_moving"][j],
                  "identified_rms_moving": ei["rms_moving"][j], "identified_rms_over_peak": ei["rms_over_peak"][j],
                  **({} if ed is None else {"urdf_damped_rms": ed["rms"][j]})}
             for j, jn in enumerate(joint_names)}
    return table, eu, ei
