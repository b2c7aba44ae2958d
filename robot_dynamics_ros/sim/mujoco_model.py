"""Build a MuJoCo model from a :class:`~robot_dynamics_ros.model.RobotModel` (same URDF, same joints).

The URDF MuJoCo compiles is ``RobotModel.reduced_urdf()``: held joints welded at their values, visual and
collision geometry dropped (MuJoCo 4.0 cannot resolve ``package://`` meshes, and dynamics needs none).
Inertias, joint axes, position limits and ``<dynamics damping friction>`` are kept (MuJoCo's URDF
importer maps ``damping`` -> ``dof_damping``, ``friction`` -> ``dof_frictionloss``, whose soft constraint is stiffened to
2 dt / d = 0.999 so that it acts as Coulomb friction, see :func:`build_mujoco_model`). Static links are not
fused (``fusestatic="false"``), so every URDF link is a MuJoCo body of the same name and a payload can
be attached to any link. Gravity is the model's gravity vector (root link frame = MuJoCo world frame:
the URDF root is welded to the world).

Used by the simulator (:mod:`robot_dynamics_ros.sim.mujoco_sim`) and as a third engine in the
dynamics cross-validation (``mj_rne`` matches Pinocchio's RNEA to ~1e-14 on Panda, NOTES.md).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np

__all__ = ["MujocoModel", "build_mujoco_model", "apply_payload"]

_COMPILER = ('<mujoco><compiler fusestatic="false" discardvisual="true" balanceinertia="false" '
             'angle="radian"/></mujoco>')


@dataclass
class MujocoModel:
    """A compiled ``mujoco.MjModel`` plus the name maps the rest of the package needs.

    Attributes:
        mj: the ``mujoco.MjModel``.
        joint_names: the RobotModel's actuated joint order (``RobotModel.joint_names``), length n.
        joint_ids: ``(n,)`` MuJoCo joint ids, in ``joint_names`` order.
        qpos_adr: ``(n,)`` addresses into ``MjData.qpos`` of each joint (model order).
        dof_adr: ``(n,)`` addresses into ``MjData.qvel`` / ``qfrc_*`` of each joint (model order).
        moving_qpos_adr, moving_dof_adr: ``(n_moving,)`` the same for ``RobotModel.moving_joint_names``
            (actuated and mimic joints; MuJoCo's URDF importer couples a mimic joint to its master with a
            joint equality constraint).
        body_of_link: URDF link name -> MuJoCo body id (every link, fixed ones included).
        inertia_floor_applied: links whose zero principal inertia was raised to :data:`INERTIA_FLOOR`
            (MuJoCo refuses moving bodies with zero inertia, e.g. point masses).
        base_mass: ``(nbody,)``, ``base_ipos``, ``base_iquat``, ``base_inertia``: the body inertias as
            compiled, before any payload.
    """

    mj: object
    joint_names: tuple[str, ...]
    joint_ids: np.ndarray
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    body_of_link: dict[str, int]
    moving_qpos_adr: np.ndarray = field(repr=False)
    moving_dof_adr: np.ndarray = field(repr=False)
    base_mass: np.ndarray = field(repr=False)
    base_ipos: np.ndarray = field(repr=False)
    base_iquat: np.ndarray = field(repr=False)
    base_inertia: np.ndarray = field(repr=False)
    inertia_floor_applied: tuple[str, ...] = ()

    def qpos_from_q(self, q: np.ndarray, qpos: np.ndarray) -> None:
        """Write model-order ``q`` (n,) into ``qpos`` (MjData.qpos) at the joints' addresses."""
        qpos[self.qpos_adr] = q


#: kg·m²: principal inertia given to massive links whose URDF inertia is zero (point masses), which MuJoCo
#: cannot simulate; 1e-9 kg·m² changes g(q) not at all and M(q) by ~1e-9.
INERTIA_FLOOR = 1e-9


def _floor_point_masses(urdf: str) -> tuple[str, tuple[str, ...]]:
    """Raise ixx/iyy/izz below :data:`INERTIA_FLOOR` of links with mass > 0 to the floor."""
    root = ET.fromstring(urdf)
    changed = []
    for link in root.findall("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        mass, inertia = inertial.find("mass"), inertial.find("inertia")
        if mass is None or inertia is None or float(mass.get("value", "0")) <= 0:
            continue
        hit = False
        for key in ("ixx", "iyy", "izz"):
            if float(inertia.get(key, "0")) < INERTIA_FLOOR:
                inertia.set(key, repr(INERTIA_FLOOR))
                hit = True
        if hit:
            changed.append(link.get("name"))
    return ET.tostring(root, encoding="unicode"), tuple(changed)


def _with_compiler_block(urdf: str) -> str:
    start = urdf.find("<robot")
    if start < 0:
        raise ValueError("URDF text has no <robot> element")
    end = urdf.index(">", start) + 1
    if urdf[end - 2] == "/":
        raise ValueError("URDF <robot> element is empty")
    return urdf[:end] + _COMPILER + urdf[end:]


def build_mujoco_model(model, *, timestep: float = 0.001, integrator: str = "implicitfast",
                       payload: bool = True, inertia_floor: bool = False) -> MujocoModel:
    """Compile ``model`` (a RobotModel) into MuJoCo.

    Args:
        model: the :class:`~robot_dynamics_ros.model.RobotModel`.
        timestep: integration step, s (``mjOption.timestep``).
        integrator: ``"Euler"``, ``"implicitfast"`` (default; damping integrated implicitly),
            ``"implicit"`` or ``"RK4"``.
        payload: also attach ``model.payload`` (if any) to its link (:func:`apply_payload`).
        inertia_floor: when MuJoCo refuses a massive link with zero inertia (a point mass), raise its
            principal inertias to :data:`INERTIA_FLOOR` and compile again (the simulator does; a
            cross-check that must be exact should not).

    Returns:
        :class:`MujocoModel` (gravity = ``model.gravity``, no contacts: there is no geometry).

    Raises:
        ValueError: the MuJoCo compiler rejects the model (message names the robot and MuJoCo's
            reason), or a model joint is missing from the compiled model.
    """
    import mujoco  # optional and heavy: loaded when a model is compiled, not on import

    urdf = model.reduced_urdf()
    floored: tuple[str, ...] = ()
    try:
        mj = mujoco.MjModel.from_xml_string(_with_compiler_block(urdf))
    except ValueError as exc:
        if not inertia_floor or "mass and inertia of moving bodies" not in str(exc):
            raise ValueError(f"MuJoCo cannot compile robot '{model.description.name}': {exc}") from None
        urdf, floored = _floor_point_masses(urdf)
        try:
            mj = mujoco.MjModel.from_xml_string(_with_compiler_block(urdf))
        except ValueError as exc2:
            raise ValueError(f"MuJoCo cannot compile robot '{model.description.name}': {exc2}") from None
    if not timestep > 0:
        raise ValueError(f"timestep {timestep} s must be > 0")
    mj.opt.timestep = float(timestep)
    try:
        mj.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    except AttributeError:
        raise ValueError(f"integrator '{integrator}': must be Euler, implicitfast, implicit or RK4") from None
    mj.opt.gravity[:] = model.gravity
    # mimic couplings (joint equalities) as stiff as the step allows (time constant 2 dt, critically damped)
    for e in range(mj.neq):
        if mj.eq_type[e] == mujoco.mjtEq.mjEQ_JOINT:
            mj.eq_solref[e] = (2.0 * mj.opt.timestep, 1.0)
    # URDF Coulomb friction (dof_frictionloss) as hard as the step allows. MuJoCo's frictionloss is a soft
    # constraint: a force |f| ≤ F that drives the joint acceleration towards a_ref = −b·q̇ (b ≈ 2/(d·t_c)),
    # not −F·sign(q̇). With the default solref t_c = 0.02 s and solimp d ≈ 0.9 it stays in its linear zone far
    # above rest (xArm7 joint 7: 0.18 F at 1.4 rad/s, a 0.5 N·m push against F = 1 N·m creeps at 0.23 rad/s)
    # and, under a deceleration faster than b·q̇, pushes along the motion (joint 4 at +1.2 rad/s: +F). With
    # t_c = 2 dt (critically damped) and d = 0.999 it is ≈ −F·sign(q̇) once moving and holds a joint at rest
    # against |τ| < F (joint 7 under 0.5 N·m: creep 4e-3 rad/s, joint 1: 1e-4), as URDF Coulomb friction means.
    fric = mj.dof_frictionloss > 0
    if np.any(fric):
        mj.dof_solref[fric] = (2.0 * mj.opt.timestep, 1.0)
        mj.dof_solimp[fric, 0] = mj.dof_solimp[fric, 1] = 0.999

    def joint_ids_of(names) -> np.ndarray:
        ids = [mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, name) for name in names]
        for name, jid in zip(names, ids):
            if jid < 0:
                raise ValueError(f"joint '{name}' of the robot model is not in the MuJoCo model")
        return np.asarray(ids, dtype=np.intp)

    joint_ids = joint_ids_of(model.joint_names)
    bodies = {mj.body(b).name: b for b in range(mj.nbody)}
    moving_ids = joint_ids_of(model.moving_joint_names)
    mm = MujocoModel(
        mj=mj, joint_names=tuple(model.joint_names), joint_ids=joint_ids,
        qpos_adr=np.asarray(mj.jnt_qposadr[joint_ids], dtype=np.intp),
        dof_adr=np.asarray(mj.jnt_dofadr[joint_ids], dtype=np.intp),
        body_of_link=bodies,
        moving_qpos_adr=np.asarray(mj.jnt_qposadr[moving_ids], dtype=np.intp),
        moving_dof_adr=np.asarray(mj.jnt_dofadr[moving_ids], dtype=np.intp),
        inertia_floor_applied=floored,
        base_mass=mj.body_mass.copy(), base_ipos=mj.body_ipos.copy(), base_iquat=mj.body_iquat.copy(),
        base_inertia=mj.body_inertia.copy(),
    )
    if payload and getattr(model, "payload", None) is not None:
        p = model.payload
        apply_payload(mm, p.link, p.mass, p.com, p.inertia)
    return mm


def _quat_to_matrix(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def _matrix_to_quat(R: np.ndarray) -> np.ndarray:
    import mujoco  # optional and heavy: loaded when a model is compiled, not on import

    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R).ravel())
    return q


def apply_payload(mm: MujocoModel, link: str | None, mass: float = 0.0, com=(0.0, 0.0, 0.0),
                  inertia=None) -> None:
    """Add a rigid payload to a link's body (or restore the compiled inertias with ``link=None``).

    The body's inertia becomes the sum of the compiled one and the payload's (both moved to the combined
    centre of mass by the parallel-axis theorem; Featherstone 2008, eq. 2.63), re-diagonalized into
    MuJoCo's ``body_ipos`` / ``body_iquat`` / ``body_inertia``.

    Args:
        mm: the model to change in place.
        link: URDF link name carrying the payload; None removes any payload.
        mass: kg. com: (3,) in the link frame, m. inertia: (3, 3) about the payload's centre of mass,
            link axes, kg·m² (default: a point mass).

    Raises:
        ValueError: unknown link.
    """
    mj = mm.mj
    mj.body_mass[:] = mm.base_mass
    mj.body_ipos[:] = mm.base_ipos
    mj.body_iquat[:] = mm.base_iquat
    mj.body_inertia[:] = mm.base_inertia
    if link is None or mass == 0.0:
        return
    if link not in mm.body_of_link:
        raise ValueError(f"payload link '{link}' is not a body of the MuJoCo model")
    b = mm.body_of_link[link]
    # the compiler may have flagged the inertial frame as coinciding (in rotation and/or position) with the
    # body frame; mj_kinematics then ignores body_iquat/ipos. The new inertia has its own frame.
    mj.body_sameframe[b] = 0  # mjSAMEFRAME_NONE
    m0, c0 = float(mm.base_mass[b]), mm.base_ipos[b]
    R0 = _quat_to_matrix(mm.base_iquat[b])
    I0 = R0 @ np.diag(mm.base_inertia[b]) @ R0.T
    m1, c1 = float(mass), np.asarray(com, dtype=float)
    I1 = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, dtype=float)
    m = m0 + m1
    c = (m0 * c0 + m1 * c1) / m

    def shift(Ic, mi, d):  # inertia about a point displaced by d from the com
        return Ic + mi * (np.dot(d, d) * np.eye(3) - np.outer(d, d))

    I = shift(I0, m0, c0 - c) + shift(I1, m1, c1 - c)
    w, V = np.linalg.eigh(0.5 * (I + I.T))
    if np.linalg.det(V) < 0:
        V[:, 0] = -V[:, 0]
    mj.body_mass[b] = m
    mj.body_ipos[b] = c
    mj.body_iquat[b] = _matrix_to_quat(V)
    mj.body_inertia[b] = np.maximum(w, 0.0)
