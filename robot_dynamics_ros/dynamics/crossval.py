"""Cross-validation of the dynamics engines: Pinocchio, the in-package Newton–Euler, and MuJoCo.

The three engines share only the URDF text: Newton–Euler is built from our own reading of it
(:mod:`robot_dynamics_ros.description`), Pinocchio and MuJoCo from :meth:`RobotModel.reduced_urdf` by their
own parsers. On random states within the joint limits, each quantity

* ``tau``   = M(q) qdd + C(q, qd) qd + g(q)          (N·m)
* ``M``     = M(q)                                   (kg·m²)
* ``C·qd``  = C(q, qd) qd                            (N·m)
* ``g``     = g(q)                                   (N·m)

is compared against Pinocchio (the reference), reporting the maximum absolute error over all samples and
entries and a relative error (that maximum divided by the largest magnitude of the reference quantity
over the samples). A comparison passes when its absolute error is ≤ its tolerance: ``tol`` for
Newton–Euler (default 1e-9, issue 3) and ``tol_mujoco`` for MuJoCo (default 1e-6).

MuJoCo is compared like with like: ``mj_rne`` with accelerations (no passive forces, so no URDF damping),
``mj_fullM`` for M. The model's rotor inertia (``model.armature``, from an identified friction YAML) is set
as MuJoCo's ``dof_armature`` of the actuated joints, which ``mj_fullM`` includes; ``mj_rne`` leaves it
out (MuJoCo adds it in ``qM`` only), so ``armature·qdd`` is added to its torque. Mimic joints are separate degrees of freedom in MuJoCo (tied by an
equality constraint that ``mj_rne`` ignores): they are set from the master and their forces folded back,
``tau = Gᵀ tau_moving``, as in the other engines. Robots MuJoCo cannot compile (e.g. the point-mass 2R
arm: MuJoCo wants a non-zero inertia on moving bodies) are reported with the reason and not compared.

A model without any moving mass (:meth:`RobotModel.torque_model_problem` even with ``allow_partial``: a
kinematics-only description) is **not comparable**: every engine returns zeros (g = 0, M = 0), so agreement
would prove nothing. Its report has ``not_comparable`` set to that line and ``passed`` False, and no
comparison is run. Models with some massless moving links (virtual frames of multi-DoF joints) are compared.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from robot_dynamics_ros.dynamics.newton_euler import NewtonEulerDynamics
from robot_dynamics_ros.dynamics.pinocchio_engine import PinocchioDynamics
from robot_dynamics_ros.model import RobotModel
from robot_dynamics_ros.sim.mujoco_model import build_mujoco_model

QUANTITIES = ("tau", "M", "C·qd", "g")
UNITS = {"tau": "N·m", "M": "kg·m²", "C·qd": "N·m", "g": "N·m"}


@dataclass
class Comparison:
    """One engine against the reference (Pinocchio) for one quantity."""

    engine: str
    quantity: str
    max_abs: float
    max_rel: float
    tol: float

    @property
    def passed(self) -> bool:
        return bool(self.max_abs <= self.tol)


@dataclass
class CrossvalReport:
    """Result of :func:`crossvalidate`. ``passed`` is True when the model is comparable (``not_comparable``
    empty; otherwise it holds the one-line reason) and every comparison is within tolerance."""

    robot: str
    joint_names: tuple[str, ...]
    samples: int
    seed: int
    held_joints: dict[str, float]
    payload: dict | None
    comparisons: list[Comparison] = field(default_factory=list)
    mujoco: str = "not requested"  # "compared", or why not
    seconds: float = 0.0
    not_comparable: str = ""

    @property
    def passed(self) -> bool:
        return not self.not_comparable and all(c.passed for c in self.comparisons)

    def worst(self, engine: str) -> float:
        """Largest absolute error of one engine over all quantities (nan when not compared)."""
        errs = [c.max_abs for c in self.comparisons if c.engine == engine]
        return max(errs) if errs else float("nan")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["joint_names"] = list(self.joint_names)
        d["passed"] = self.passed
        for c, cd in zip(self.comparisons, d["comparisons"]):
            cd["passed"] = c.passed
            cd["unit"] = UNITS[c.quantity]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def format_table(self) -> str:
        lines = [f"robot {self.robot}: {len(self.joint_names)} actuated joints, {self.samples} random states "
                 f"(seed {self.seed}), held {self.held_joints or 'none'}, payload {self.payload or 'none'}",
                 f"reference: pinocchio; mujoco: {self.mujoco}",
                 *([f"NOT COMPARABLE: {self.not_comparable}"] if self.not_comparable else []),
                 f"{'engine':<14}{'quantity':<10}{'max abs err':>14}{'max rel err':>14}{'tol':>10}  result"]
        for c in self.comparisons:
            lines.append(f"{c.engine:<14}{c.quantity:<10}{c.max_abs:>14.3e}{c.max_rel:>14.3e}{c.tol:>10.0e}  "
                         f"{'ok' if c.passed else 'FAIL'}")
        lines.append(f"{'PASS' if self.passed else 'FAIL'} ({self.seconds:.2f} s)")
        return "\n".join(lines)


def random_states(model: RobotModel, samples: int, seed: int):
    """Random (q, qd, qdd), each (samples, n): q uniform within the position limits (unbounded: [-π, π]),
    qd uniform within ±min(velocity limit, π) rad/s, qdd uniform within ±min(acceleration limit, 10) rad/s²."""
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng, samples)
    vmax = np.minimum(model.velocity_limit, np.pi)
    amax = np.minimum(model.acceleration_limit, 10.0)
    qd = rng.uniform(-vmax, vmax, size=q.shape)
    qdd = rng.uniform(-amax, amax, size=q.shape)
    return q, qd, qdd


class MujocoInverse:
    """MuJoCo as an inverse-dynamics engine (``mj_rne`` with accelerations, ``mj_fullM``), single state.

    Uses :func:`robot_dynamics_ros.sim.mujoco_model.build_mujoco_model` to compile the same reduced URDF.
    Gravity and payload are taken from the model when this object is made.
    """

    def __init__(self, model: RobotModel):
        # mujoco is optional and heavy: loaded only when the MuJoCo leg of the comparison runs
        import mujoco

        self._mujoco = mujoco
        self.model = model
        self.mm = build_mujoco_model(model)
        mj = self.mm.mj
        ids = []
        for jn in model.moving_joint_names:  # actuated and mimic joints
            jid = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, jn)
            if jid < 0:
                raise ValueError(f"joint '{jn}' is not in the MuJoCo model")
            ids.append(jid)
        ids = np.asarray(ids, dtype=np.intp)
        self.qpos_adr = mj.jnt_qposadr[ids]
        self.dof_adr = mj.jnt_dofadr[ids]
        self.G = model.mimic_matrix
        moving_k = {jn: k for k, jn in enumerate(model.moving_joint_names)}
        mj.dof_armature[:] = 0.0
        mj.dof_armature[self.dof_adr[[moving_k[jn] for jn in model.joint_names]]] = model.armature
        self.armature = np.array(model.armature, dtype=float)
        self.data = mujoco.MjData(mj)
        self._M = np.zeros((mj.nv, mj.nv))
        self._out = np.zeros(mj.nv)

    def _set(self, q, qd):
        d, m = self.data, self.model
        d.qpos[:] = self.mm.mj.qpos0
        d.qvel[:] = 0.0
        d.qpos[self.qpos_adr] = m.expand(q)
        d.qvel[self.dof_adr] = m.expand_rate(qd)
        self._mujoco.mj_forward(self.mm.mj, d)

    def rnea(self, q, qd, qdd) -> np.ndarray:
        """tau (n,) = Gᵀ mj_rne(q, qd, qdd) + armature·qdd — no passive (damping) forces."""
        self._set(q, qd)
        d = self.data
        d.qacc[:] = 0.0
        d.qacc[self.dof_adr] = self.model.expand_rate(qdd)
        self._mujoco.mj_rne(self.mm.mj, d, 1, self._out)
        return self.G.T @ self._out[self.dof_adr] + self.armature * np.asarray(qdd, dtype=float)

    def mass_matrix(self, q) -> np.ndarray:
        self._set(q, np.zeros(self.model.n))
        self._mujoco.mj_fullM(self.mm.mj, self.data, self._M)
        Mm = self._M[np.ix_(self.dof_adr, self.dof_adr)]
        return self.G.T @ Mm @ self.G


def _errors(test: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    err = float(np.max(np.abs(test - ref))) if test.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    return err, (err / scale if scale > 0 else err)


def crossvalidate(model: RobotModel, samples: int = 100, seed: int = 0, tol: float = 1e-9,
                  tol_mujoco: float = 1e-6, mujoco: bool = True) -> CrossvalReport:
    """Compare Newton–Euler (and MuJoCo) against Pinocchio on random states of ``model``.

    Args:
        model: the robot (its held joints, payload and gravity are used as they are).
        samples: number of random states (> 0).
        seed: random seed of the states.
        tol: absolute tolerance (N·m, and kg·m² for M) for Newton–Euler vs Pinocchio.
        tol_mujoco: absolute tolerance for MuJoCo vs Pinocchio.
        mujoco: also compare MuJoCo when the model compiles in it.

    Returns:
        :class:`CrossvalReport` (``report.passed``; ``report.format_table()``, ``report.to_json()``).
        Nodes call this at start-up and refuse to run when ``passed`` is False.

    Raises:
        ValueError: samples < 1 or a tolerance ≤ 0.
    """
    if int(samples) < 1:
        raise ValueError(f"samples: must be ≥ 1, got {samples}")
    if not (tol > 0 and tol_mujoco > 0):
        raise ValueError(f"tol: tolerances must be > 0, got {tol}, {tol_mujoco}")
    t0 = time.perf_counter()
    samples = int(samples)
    p = model.payload
    report = CrossvalReport(
        robot=model.description.name, joint_names=tuple(model.joint_names), samples=samples, seed=int(seed),
        held_joints=dict(model.held_joints),
        payload=None if p is None else {"link": p.link, "mass": p.mass, "com": p.com.tolist(),
                                        "inertia": p.inertia.tolist()})
    problem = model.torque_model_problem(allow_partial=True)
    if problem is not None:
        report.not_comparable = problem
        report.mujoco = "not compared: the model is not comparable"
        report.seconds = time.perf_counter() - t0
        return report
    q, qd, qdd = random_states(model, samples, seed)
    pino = PinocchioDynamics(model)
    ref = {
        "tau": np.array([pino.rnea(q[k], qd[k], qdd[k]) for k in range(samples)]),
        "M": np.array([pino.mass_matrix(q[k]) for k in range(samples)]),
        "C·qd": np.array([pino.coriolis_matrix(q[k], qd[k]) @ qd[k] for k in range(samples)]),
        "g": np.array([pino.gravity(q[k]) for k in range(samples)]),
    }
    ne = NewtonEulerDynamics(model)
    got = {"tau": ne.rnea(q, qd, qdd), "M": ne.mass_matrix(q), "C·qd": ne.coriolis_qd(q, qd), "g": ne.gravity(q)}
    for name in QUANTITIES:
        a, r = _errors(got[name], ref[name])
        report.comparisons.append(Comparison("newton-euler", name, a, r, tol))
    if mujoco:
        try:
            mj = MujocoInverse(model)
        except ImportError as exc:  # pragma: no cover - mujoco is a dependency
            report.mujoco = f"not available ({exc})"
        except ValueError as exc:
            report.mujoco = f"not compared: {exc}".replace("\n", " ")
        else:
            zero = np.zeros(model.n)
            g_mj = np.array([mj.rnea(q[k], zero, zero) for k in range(samples)])
            got_mj = {
                "tau": np.array([mj.rnea(q[k], qd[k], qdd[k]) for k in range(samples)]),
                "M": np.array([mj.mass_matrix(q[k]) for k in range(samples)]),
                "C·qd": np.array([mj.rnea(q[k], qd[k], zero) for k in range(samples)]) - g_mj,
                "g": g_mj,
            }
            for name in QUANTITIES:
                a, r = _errors(got_mj[name], ref[name])
                report.comparisons.append(Comparison("mujoco", name, a, r, tol_mujoco))
            report.mujoco = "compared"
    report.seconds = time.perf_counter() - t0
    return report
