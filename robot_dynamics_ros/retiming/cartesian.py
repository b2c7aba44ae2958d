"""Straight-line Cartesian paths as joint-space path points (空间直线插补), for the retimer.

A tool frame moves from its pose at a start configuration along a straight line to a goal position; the
orientation is held or interpolated by slerp. The line is cut into ``points`` equally spaced poses and
each is solved by damped least-squares inverse kinematics (Wampler 1986; Buss 2004 §5; Lynch & Park
§6.2), warm-started at the previous solution so the joint path is continuous and stays on the arm's
branch. The retimer then times the joint path; between path points the joint-space curve deviates from
the line, and :func:`line_path` measures that deviation on a denser sampling of the piecewise-linear joint
path (the retimer's path tolerance keeps its own curve within that of the polyline).

Frames: positions in m and rotations in the robot's base (root link) frame; the orientation error is
the rotation vector log(R_target R(q)ᵀ) in base axes (rad), matching the LOCAL_WORLD_ALIGNED Jacobian.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot_dynamics_ros.errors import UserError

__all__ = ["CartesianLine", "line_path", "solve_pose", "rotation_log", "rotation_exp"]


def rotation_log(R: np.ndarray) -> np.ndarray:
    """Rotation vector ω (3,) rad with exp([ω]×) = R (R a (3, 3) rotation matrix)."""
    c = float(np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0))
    angle = np.arccos(c)
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if angle < 1e-6:
        return 0.5 * w
    if np.pi - angle < 1e-6:  # near π: axis from the symmetric part
        k = int(np.argmax(np.diag(R)))
        axis = (R[:, k] + np.eye(3)[k]) / np.sqrt(2.0 * (1.0 + R[k, k]))
        return angle * axis
    return angle / (2.0 * np.sin(angle)) * w


def rotation_exp(w: np.ndarray) -> np.ndarray:
    """Rotation matrix (3, 3) of a rotation vector ω (3,) rad (Rodrigues)."""
    angle = float(np.linalg.norm(w))
    if angle < 1e-12:
        return np.eye(3)
    k = np.asarray(w) / angle
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


@dataclass
class CartesianLine:
    """Joint path points of a straight tool line.

    Attributes:
        q: (points, n) joint positions, rad/m, model joint order; ``q[0]`` is the start configuration.
        positions: (points, 3) the line's target tool positions, m, base frame.
        length: line length, m.
        ik_error: largest residual of the solved points (position m, orientation rad), ``(pos, rot)``.
        deviation: largest distance of the tool from the line along the piecewise-linear joint path
            between points (sampled ``oversample`` times per interval), m.
    """

    q: np.ndarray
    positions: np.ndarray
    length: float
    ik_error: tuple[float, float]
    deviation: float


def _ik(engine, frame, q0, p_target, R_target, lower, upper, *, damping, tol, max_iter):
    q = q0.copy()
    for _ in range(max_iter):
        T = engine.frame_placement(q, frame)
        e = np.concatenate([p_target - T[:3, 3], rotation_log(R_target @ T[:3, :3].T)])
        if np.linalg.norm(e[:3]) < tol and np.linalg.norm(e[3:]) < tol:
            return q, e
        J = engine.frame_jacobian(q, frame)  # (6, n), LOCAL_WORLD_ALIGNED: (v, ω) in base axes
        dq = J.T @ np.linalg.solve(J @ J.T + damping ** 2 * np.eye(6), e)
        q = np.clip(q + dq, lower, upper)
    return q, e


def solve_pose(engine, frame: str, q_seed, position, rotation=None, *, damping: float = 1e-3,
               tol: float = 1e-10, max_iter: int = 500) -> np.ndarray:
    """Joint positions (n,) that put ``frame`` at ``position`` (3,) m with ``rotation`` (3, 3) (None: the
    orientation at ``q_seed``), base frame, by damped least squares from ``q_seed`` (the branch it lands on).

    Raises:
        UserError: the pose is not reached within the joint limits (names the residual).
    """
    m = engine.model
    q0 = np.asarray(q_seed, dtype=float)
    R = engine.frame_placement(q0, frame)[:3, :3] if rotation is None else np.asarray(rotation, dtype=float)
    lower = np.where(np.isfinite(m.lower), m.lower, -np.inf)
    upper = np.where(np.isfinite(m.upper), m.upper, np.inf)
    q, e = _ik(engine, frame, q0, np.asarray(position, dtype=float), R, lower, upper, damping=damping, tol=tol,
               max_iter=max_iter)
    if np.linalg.norm(e[:3]) > 1e3 * tol or np.linalg.norm(e[3:]) > 1e3 * tol:
        raise UserError(f"cartesian pose: {np.round(position, 4).tolist()} m is not reachable for {frame!r} from "
                        f"the seed (residual {np.linalg.norm(e[:3]):.2e} m, {np.linalg.norm(e[3:]):.2e} rad)")
    return q


def line_path(engine, frame: str, q_start, *, goal_position=None, displacement=None, goal_rotation=None,
              points: int = 200, damping: float = 1e-3, tol: float = 1e-10, max_iter: int = 100,
              oversample: int = 10) -> CartesianLine:
    """Joint path points that move ``frame`` on a straight line from its pose at ``q_start``.

    Args:
        engine: :class:`~robot_dynamics_ros.dynamics.pinocchio_engine.PinocchioDynamics` of the robot
            (kinematics only; a payload does not matter).
        frame: tool link or frame name.
        q_start: (n,) start configuration, rad/m.
        goal_position: (3,) goal tool position in the base frame, m; or ``displacement`` (3,) m from the
            start position (exactly one of the two).
        goal_rotation: (3, 3) goal tool orientation, base frame; None holds the start orientation. The
            orientation is interpolated by slerp at the same path fraction as the position.
        points: number of path points including both ends (≥ 2; the case study uses 200).
        damping: λ of the damped least squares, m (keeps steps bounded near singularities).
        tol: IK convergence on position (m) and orientation (rad) of every point.
        oversample: samples per interval for the ``deviation`` measure.

    Returns:
        :class:`CartesianLine`.

    Raises:
        UserError: both or neither of goal_position/displacement, fewer than 2 points, an unknown frame,
            or a point the arm cannot reach within its position limits (names the point and the residual).
    """
    if (goal_position is None) == (displacement is None):
        raise UserError("cartesian line: give exactly one of goal_position and displacement")
    if int(points) != points or points < 2:
        raise UserError(f"cartesian line: points={points} must be an integer ≥ 2")
    m = engine.model
    q0 = np.asarray(q_start, dtype=float)
    if q0.shape != (m.n,) or not np.all(np.isfinite(q0)):
        raise UserError(f"cartesian line: q_start must be {m.n} finite values in {list(m.joint_names)} order")
    T0 = engine.frame_placement(q0, frame)
    p0, R0 = T0[:3, 3].copy(), T0[:3, :3].copy()
    p1 = np.asarray(goal_position, dtype=float) if goal_position is not None else p0 + np.asarray(displacement, float)
    if p1.shape != (3,) or not np.all(np.isfinite(p1)):
        raise UserError("cartesian line: the goal must be 3 finite numbers (m)")
    R1 = R0 if goal_rotation is None else np.asarray(goal_rotation, dtype=float)
    w01 = rotation_log(R1 @ R0.T)
    lower = np.where(np.isfinite(m.lower), m.lower, -np.inf)
    upper = np.where(np.isfinite(m.upper), m.upper, np.inf)
    s = np.linspace(0.0, 1.0, int(points))
    P = p0 + s[:, None] * (p1 - p0)
    Q = np.empty((len(s), m.n))
    Q[0] = q0
    worst = (0.0, 0.0)
    q = q0
    for i in range(1, len(s)):
        R_i = rotation_exp(s[i] * w01) @ R0
        q, e = _ik(engine, frame, q, P[i], R_i, lower, upper, damping=damping, tol=tol, max_iter=max_iter)
        ep, er = float(np.linalg.norm(e[:3])), float(np.linalg.norm(e[3:]))
        if ep > 1e3 * tol or er > 1e3 * tol:
            raise UserError(f"cartesian line: point {i} of {len(s) - 1} ({P[i].round(4).tolist()} m) is not "
                            f"reachable within the joint limits (residual {ep:.2e} m, {er:.2e} rad)")
        worst = (max(worst[0], ep), max(worst[1], er))
        Q[i] = q
    # deviation of the tool from the line along the straight joint segments between path points
    d = p1 - p0
    L = float(np.linalg.norm(d))
    u = d / L if L > 0 else np.zeros(3)
    dev = 0.0
    for a, b in zip(Q[:-1], Q[1:]):
        for f in np.linspace(0.0, 1.0, oversample + 1)[1:-1]:
            x = engine.frame_placement(a + f * (b - a), frame)[:3, 3] - p0
            dev = max(dev, float(np.linalg.norm(x - (x @ u) * u)))
    return CartesianLine(Q, P, L, worst, dev)
