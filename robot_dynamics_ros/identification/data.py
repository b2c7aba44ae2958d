"""Recorded joint data for identification: CSV or rosbag2 in, (t, q, qd, qdd, tau) in model order out.

Inputs:

* CSV in the package's trajectory format (the one ``robot-dynamics retime`` writes): a header row with
  ``t`` (s) and, per joint, ``<joint>/position`` (rad or m), ``<joint>/velocity``, ``<joint>/effort``
  (N·m or N), optionally ``<joint>/acceleration``.
* rosbag2 (directory with ``metadata.yaml``, sqlite3 or mcap, or a bare ``.db3``/``.mcap``) with
  ``sensor_msgs/msg/JointState`` on one topic (``--topic``; default: the only JointState topic). Time is the
  header stamp when it is set, else the record time.

Joint names pass through a map (``FROM=TO``: data name -> model name), efforts through a per-joint scale
(``tau_model = scale · tau_data``; −1 for drivers that report the opposite sign).

Derivatives, when the data lacks them (:func:`differentiate`): a Savitzky–Golay filter (Savitzky & Golay,
Anal. Chem. 36(8), 1964), cubic, window ``window`` samples (default: the odd number nearest 0.1 s),
applied forward and centred, so it is zero-phase: qd = d/dt of the fitted polynomial of q where no
velocity is recorded, qdd = d/dt of the fitted polynomial of qd (recorded or estimated). The same
smoothing (no derivative) is applied to q and tau for the fit, so the regressor and the torque see the
same filter (Gautier 1997's parallel filtering); validation compares predictions with the RAW torque.
The first and last window/2 samples are dropped (the polynomial fit is one-sided there).
Samples must be uniformly spaced (jitter ≤ 5 % of the median step), else the recording is resampled
onto a uniform grid by linear interpolation (and the report says so). A step longer than
:data:`GAP_FACTOR` × the median step is a gap (dropped messages, a paused recorder): interpolating across
it would fabricate samples, so the recording is refused, naming the time and length of the first gap.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.signal import savgol_coeffs
from scipy.signal import savgol_filter

from robot_dynamics_ros.errors import UserError
from robot_dynamics_ros.robots import ROBOTS

__all__ = ["Recording", "read_csv", "parse_joint_map", "parse_effort_scale",
           "differentiate", "Prepared", "prepare"]


@dataclass
class Recording:
    """Raw recorded data, columns in ``joint_names`` (data names, before the map).

    Attributes: t (N,) s; q (N, n); qd, qdd (N, n) or None when not recorded; tau (N, n); source (str).
    """

    t: np.ndarray
    joint_names: tuple[str, ...]
    q: np.ndarray
    qd: np.ndarray | None
    qdd: np.ndarray | None
    tau: np.ndarray
    source: str
    notes: list[str] = field(default_factory=list)


def _fail(source: str, msg: str) -> UserError:
    return UserError(f"{source}: {msg}")


def read_csv(path: str | Path) -> Recording:
    """Read a CSV recording (see the module docstring). Raises UserError naming the file and column."""
    p = Path(path)
    src = str(p)
    try:
        with open(p, encoding="utf-8-sig", newline="") as fh:
            rows = list(csv.reader(fh))
    except OSError as exc:
        raise _fail(src, f"cannot read: {exc}") from None
    if len(rows) < 2:
        raise _fail(src, "needs a header row and data rows")
    header = [h.strip() for h in rows[0]]
    if "t" not in header:
        raise _fail(src, f"no 't' column (header starts {','.join(header[:4])!r})")
    data = []
    for k, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise _fail(src, f"line {k}: {len(row)} fields, header has {len(header)}")
        try:
            data.append([float(c) for c in row])
        except ValueError:
            raise _fail(src, f"line {k}: not a number in {row!r:.60}") from None
    arr = np.array(data, dtype=float)
    col = {h: i for i, h in enumerate(header)}
    joints = []
    for h in header:
        if h.endswith("/position"):
            joints.append(h[:-len("/position")])
    if not joints:
        raise _fail(src, "no '<joint>/position' column")

    def block(suffix: str, required: bool):
        missing = [j for j in joints if f"{j}/{suffix}" not in col]
        if missing:
            if required or len(missing) != len(joints):
                raise _fail(src, f"no '{missing[0]}/{suffix}' column")
            return None
        return arr[:, [col[f"{j}/{suffix}"] for j in joints]]

    rec = Recording(arr[:, col["t"]], tuple(joints), block("position", True), block("velocity", False),
                    block("acceleration", False), block("effort", True), src)
    return rec


def parse_joint_map(text: str | None) -> dict[str, str]:
    """``"a=b,c=d"`` -> ``{"a": "b", "c": "d"}`` (data name -> model name). Raises UserError."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        a, sep, b = item.partition("=")
        if not sep or not a.strip() or not b.strip():
            raise UserError(f"--joint-map: '{item}' is not FROM=TO")
        out[a.strip()] = b.strip()
    return out


def _scale_value(text: str, item: str, form: str) -> float:
    """One --effort-scale factor; ``item`` (the text the user wrote) and ``form`` name it in the UserError."""
    try:
        s = float(text)
    except ValueError:
        raise UserError(f"--effort-scale: '{item}' is not {form}") from None
    if not (math.isfinite(s) and s != 0):
        raise UserError(f"--effort-scale: {item}: scale must be finite and non-zero")
    return s


def parse_effort_scale(text: str | None, joint_names) -> np.ndarray:
    """``"S"`` (all joints) or ``"J=S,..."`` (model names; others 1) -> (n,) scale. Raises UserError."""
    n = len(joint_names)
    if not text:
        return np.ones(n)
    if "=" not in text:
        return np.full(n, _scale_value(text, text, "a number or J=S,..."))
    out = np.ones(n)
    index = {j: i for i, j in enumerate(joint_names)}
    for item in text.split(","):
        j, _, v = item.partition("=")
        j = j.strip()
        if j not in index:
            raise UserError(f"--effort-scale: joint '{j}' is not in the model (joints: {', '.join(joint_names)})")
        out[index[j]] = _scale_value(v, item, "J=S")
    return out


#: a time step longer than this multiple of the median step is a gap in the recording (refused)
GAP_FACTOR = 5.0

#: rad (m): a recording in which no joint's position range exceeds this is one pose
CONSTANT_POSE = 1e-3


def default_window(dt: float) -> int:
    """Odd window length nearest 0.1 s, at least 7 samples."""
    w = int(round(0.1 / dt))
    w = max(w, 7)
    return w if w % 2 else w + 1


#: relative RMS change of the accelerations between the window and one a third as long above which the
#: window is reported as smearing the motion (a cubic window of 0.1 s changes a 5 Hz sine's by ~1 %)
SMEAR_RATIO = 0.05
#: the narrow window's least length: a cubic derivative over fewer samples is dominated by noise
SMEAR_MIN_NARROW = 9


def window_smearing(qd: np.ndarray, dt: float, window: int, qdd: np.ndarray):
    """(joint index, ratio, narrow window) when the ``window``-sample derivative ``qdd`` (N, n) of ``qd``
    differs from the derivative with a window a third as long ("narrow", at least :data:`SMEAR_MIN_NARROW`
    samples) by more than :data:`SMEAR_RATIO` (RMS over the samples both keep, relative to the narrow one's
    RMS) on some joint; else None. A wide window smears fast motion (the steps of a time-optimal
    trajectory's acceleration); a narrow window of fewer samples would mostly show sensor noise, so short
    windows (low sample rates) are not judged."""
    narrow = (window // 3) | 1
    if narrow < SMEAR_MIN_NARROW:
        return None
    qdd_n = differentiate(qd, dt, narrow, 1)
    h = window // 2
    sl = slice(h, qd.shape[0] - h)
    den = np.sqrt(np.mean(qdd_n[sl] ** 2, axis=0))
    num = np.sqrt(np.mean((qdd[sl] - qdd_n[sl]) ** 2, axis=0))
    ratio = np.where(den > 1e-9, num / np.maximum(den, 1e-300), 0.0)
    j = int(np.argmax(ratio))
    return (j, float(ratio[j]), narrow) if ratio[j] > SMEAR_RATIO else None


def differentiate(x: np.ndarray, dt: float, window: int, deriv: int) -> np.ndarray:
    """Savitzky–Golay (cubic, zero-phase) smoothing (deriv=0) or derivative (deriv=1) along axis 0."""
    return savgol_filter(x, window, 3, deriv=deriv, delta=dt, axis=0, mode="interp")


@dataclass
class Prepared:
    """Data ready for identification, model order. t (N,), q, qd, qdd (N, n) (filtered), tau (N, n)
    filtered, tau_raw (N, n) as recorded (scaled); window (samples), dt (s); notes (what was done).
    ``correlation`` = 1/Σh² of the smoothing filter h: consecutive samples per independent one.
    ``tau_rate`` (N, n): d tau / dt by the same filter, N·m/s (None for static poses), for the
    effort-time alignment of :func:`~robot_dynamics_ros.identification.estimate.identify`."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    tau_raw: np.ndarray
    dt: float
    window: int
    notes: list[str]
    tau_rate: np.ndarray | None = None

    @property
    def correlation(self) -> float:
        return 1.0 if self.window < 5 else float(1.0 / np.sum(savgol_coeffs(self.window, 3) ** 2))


def prepare(rec: Recording, model, *, joint_map=None, effort_scale=None, window: int | None = None,
            static: bool = False) -> Prepared:
    """Map names to the model, scale efforts, check values, resample if needed, filter and differentiate.

    ``static``: the samples are poses at rest (a static-pose log): qd = qdd = 0, no filtering, no
    resampling, every sample kept (window 1); ``t`` only orders the samples.

    Raises:
        UserError: a model joint missing from the data (naming it and the data's names, or the ``--held``
            options when the catalogue's robots hold every missing joint), NaN/inf values
            (naming the joint and time), non-increasing time, too few samples for the filter window, a
            constant pose (no joint's position range above :data:`CONSTANT_POSE`), a gap (a time step
            above :data:`GAP_FACTOR` × the median step; not checked for ``static``).
    """
    jm = dict(joint_map or {})
    names = [jm.get(n, n) for n in rec.joint_names]
    unknown = [n for n in jm if n not in rec.joint_names]
    if unknown:
        raise UserError(f"--joint-map: '{unknown[0]}' is not a joint of {rec.source} (joints: "
                        f"{', '.join(rec.joint_names)})")
    idx = {n: i for i, n in enumerate(names)}
    missing = [j for j in model.joint_names if j not in idx]
    if missing:
        # a URDF file of a bundled robot (e.g. an identified copy) is loaded with no joint held: the
        # catalogue says which joints that robot normally holds, and at what value
        usual = {j: (e.name, v) for e in ROBOTS.values() for j, v in e.held_joints.items()}
        if all(j in usual for j in missing):
            hold = " ".join(f"--held {j}={usual[j][1]:g}" for j in missing)
            raise UserError(f"{rec.source}: model joint '{missing[0]}' not in the data; the catalogue robot "
                            f"'{usual[missing[0]][0]}' holds it: add {hold} (or --joint-map FROM=TO if the data "
                            "names it differently)")
        raise UserError(f"{rec.source}: model joint '{missing[0]}' not in the data (data joints: "
                        f"{', '.join(names)}; use --joint-map FROM=TO)")
    cols = [idx[j] for j in model.joint_names]
    notes = list(rec.notes)
    extra = [n for n in names if n not in model.joint_names]
    if extra:
        notes.append(f"data joints not in the model, ignored: {', '.join(extra)}")
    t = np.asarray(rec.t, dtype=float)
    arrays = {"position": rec.q[:, cols], "effort": rec.tau[:, cols]}
    if rec.qd is not None:
        arrays["velocity"] = rec.qd[:, cols]
    if rec.qdd is not None:
        arrays["acceleration"] = rec.qdd[:, cols]
    for what, a in [("t", t[:, None])] + list(arrays.items()):
        bad = np.argwhere(~np.isfinite(a))
        if bad.size:
            k, j = bad[0]
            where = "" if what == "t" else f" of joint '{model.joint_names[j]}'"
            raise UserError(f"{rec.source}: {what}{where} is NaN or inf at sample {k} (t = {t[k]:.6g} s)")
    q_range = np.ptp(arrays["position"], axis=0) if t.size else np.zeros(model.n)
    if np.all(q_range < CONSTANT_POSE):
        raise UserError(f"{rec.source}: constant pose: no joint moves by more than {CONSTANT_POSE * 1e3:g} mrad "
                        f"(mm) over the {t.size} samples (largest range {q_range.max() * 1e3:.3g} mrad, joint "
                        f"'{model.joint_names[int(np.argmax(q_range))]}'): one pose cannot separate gravity from "
                        "the torque offsets; record the trajectory of 'robot-dynamics excite', or many different "
                        "poses with --static")
    dts = np.diff(t)
    scale = np.asarray(effort_scale if effort_scale is not None else np.ones(model.n), dtype=float)
    if static:
        if t.size < 10:
            raise UserError(f"{rec.source}: {t.size} poses, need at least 10")
        notes.append("static poses: qd = qdd = 0, recorded velocities/accelerations ignored, no filtering")
        z = np.zeros_like(arrays["position"])
        tau_s = arrays["effort"] * scale
        return Prepared(t, arrays["position"], z, z.copy(), tau_s, tau_s.copy(), float(np.median(dts)) if
                        t.size > 1 else 0.0, 1, notes)
    if np.any(dts <= 0):
        k = int(np.argmax(dts <= 0))
        raise UserError(f"{rec.source}: time does not increase at sample {k + 1} (t = {t[k + 1]:.6g} s)")
    dt = float(np.median(dts))
    gaps = np.flatnonzero(dts > GAP_FACTOR * dt)
    if gaps.size:
        k = int(gaps[0])
        more = f", the first of {gaps.size} gaps" if gaps.size > 1 else ""
        raise UserError(f"{rec.source}: gap of {dts[k]:.6g} s in the recording at t = {t[k]:.6g} s{more} (median "
                        f"step {dt * 1e3:.4g} ms; a step above {GAP_FACTOR:g} × the median is a gap, and "
                        "interpolating across it would fabricate samples): record without gaps or cut the file "
                        "at the gap")
    if np.max(np.abs(dts - dt)) > 0.05 * dt:
        tu = t[0] + dt * np.arange(int(math.floor((t[-1] - t[0]) / dt)) + 1)
        arrays = {k: np.column_stack([np.interp(tu, t, a[:, j]) for j in range(a.shape[1])])
                  for k, a in arrays.items()}
        notes.append(f"time steps vary by more than 5 % of the median {dt * 1e3:.3f} ms: resampled uniformly")
        t = tu
    tau_raw = arrays["effort"] * scale
    w = window or default_window(dt)
    if w % 2 == 0 or w < 5:
        raise UserError(f"--window: {w} must be an odd number ≥ 5")
    if t.size < 3 * w:
        raise UserError(f"{rec.source}: {t.size} samples, need at least {3 * w} for the {w}-sample filter window")
    q = differentiate(arrays["position"], dt, w, 0)
    if "velocity" in arrays:
        qd = differentiate(arrays["velocity"], dt, w, 0)
        qd_src = arrays["velocity"]
    else:
        qd = differentiate(arrays["position"], dt, w, 1)
        qd_src = qd
        notes.append(f"velocity not recorded: Savitzky-Golay derivative of position (cubic, {w} samples)")
    if "acceleration" in arrays:
        qdd = differentiate(arrays["acceleration"], dt, w, 0)
    else:
        qdd = differentiate(qd_src, dt, w, 1)
        notes.append(f"acceleration not recorded: Savitzky-Golay derivative of velocity (cubic, {w} samples)")
        smear = window_smearing(qd_src, dt, w, qdd)
        if smear is not None:
            j, ratio, w_narrow = smear
            notes.append(f"the {w}-sample window ({w * dt * 1e3:.0f} ms) changes the accelerations of "
                         f"'{model.joint_names[j]}' by {100 * ratio:.0f} % (RMS) against a {w_narrow}-sample one: the "
                         f"motion is fast for this window; try --window {w_narrow} (noisy data wants the wider one)")
    tau = differentiate(tau_raw, dt, w, 0)
    tau_rate = differentiate(tau_raw, dt, w, 1)
    h = w // 2
    sl = slice(h, t.size - h)
    return Prepared(t[sl], q[sl], qd[sl], qdd[sl], tau[sl], tau_raw[sl], dt, w, notes, tau_rate[sl])
