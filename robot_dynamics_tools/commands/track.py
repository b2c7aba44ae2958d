"""``robot-dynamics track``: end-to-end tracking — retime a path, follow it with the computed-torque node on
the MuJoCo simulator over DDS, and compare control laws.

The scenario (issue 5), for a real 6/7-DoF arm (Panda by default):

1. a path through waypoints around the robot's demo pose (a wide swing of every joint and back);
2. timing: TOPP-RA (:mod:`robot_dynamics_ros.retiming`, velocity limits × ``velocity_scale`` and torque
   limits × ``torque_margin``; a retiming failure is an error, never a silent change of timing), or, with
   ``--timing quintic``, rest-to-rest quintic segments (Lynch & Park 2017, §9.2.2) each as short as the velocity limits ×
   ``velocity_scale`` and the torque limits × ``torque_margin`` allow;
3. per control mode, a fresh computed-torque node (:mod:`robot_dynamics_ros.nodes.computed_torque`,
   ``tick_source=joint_states``, ``use_sim_time``) and a lockstep MuJoCo simulator
   (:class:`~robot_dynamics_ros.nodes.simulator.SimulatorNode` with ``lockstep`` and ``publish_clock``)
   exchange ``/joint_states``,
   ``/effort_controller/commands`` and ``/clock`` over DDS in one process: each command is applied for one
   control period, then the simulator publishes the next state (deterministic whatever the machine load).
   All modes run on one private DDS domain with localhost-only discovery
   (:mod:`robot_dynamics_tools.commands.isolation`), never the caller's ``ROS_DOMAIN_ID``: the commands use
   the standard topic names a real effort controller listens on.
   The trajectory goes to the node as a ``trajectory_msgs/JointTrajectory`` on
   ``/computed_torque/joint_trajectory``;
4. the modes, all with the same joint PD gains P, D (N·m/rad, N·m·s/rad; P = ω² M_jj(q0), D = 2ω M_jj(q0),
   ω = ``pd_bandwidth``): ``gravity`` (g(q) + PD), ``feedforward`` (RNEA(q_d, qd_d, qdd_d) + PD), and
   ``computed_torque`` (M(q)(qdd_d + K_d ė + K_p e) + C qd + g, K_p = ω_c², K_d = 2ω_c, ω_c =
   ``ct_bandwidth``);
5. the errors are measured at every control tick against the desired state the node published for that
   tick (same stamp): joint error (rad) and tool-frame position error (mm, forward kinematics from
   :meth:`PinocchioDynamics.frame_placement`);
6. outputs: a PNG under ``out/`` (desired vs actual, tool error, torques vs limits), a rosbag2 (sqlite3,
   written with rosbags via :mod:`robot_dynamics_tools.bags`) holding ``/joint_states``,
   ``/effort_controller/commands``, ``/computed_torque/desired_state`` and
   ``/computed_torque/joint_trajectory`` of all modes (one after the other in time), and a summary whose
   JSON form is the last stdout line.

:func:`track` is the callable core (returns the summary dict); :func:`run` is the CLI wrapper.
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robot_dynamics_ros.errors import UserError

__all__ = ["MODES", "TIMINGS", "configure_parser", "parse_modes", "run", "track", "plan_trajectory", "Plan"]

#: control modes compared, in report order, with their report labels
MODES = ("gravity", "feedforward", "computed_torque")
MODE_LABELS = {"gravity": "gravity + PD", "feedforward": "feedforward + PD",
               "computed_torque": "computed torque"}
#: trajectory timings
TIMINGS = ("topp-ra", "quintic")


def parse_modes(text) -> tuple[str, ...]:
    """Comma-separated control modes → a tuple of :data:`MODES` (UserError naming an unknown one)."""
    modes = tuple(m.strip() for m in str(text).split(",") if m.strip())
    for mname in modes:
        if mname not in MODES:
            raise UserError(f"mode '{mname}': must be one of {list(MODES)}")
    if not modes:
        raise UserError(f"modes '{text}': name at least one of {list(MODES)}")
    return modes

#: sim-time epoch of the first mode (s): a non-zero, small time base (a zero stamp means "now" in ROS)
_EPOCH_S = 1000
#: sim time between consecutive modes in the bag (s)
_MODE_SPACING_S = 100
#: hold before the trajectory starts and after it ends (s)
_LEAD_S = 0.2
_TAIL_S = 0.3


# --------------------------------------------------------------------------------------------- planning
@dataclass
class Plan:
    """The desired motion of the scenario, arrays in model joint order.

    Attributes:
        waypoints: (W, n) rad.
        timing: ``"topp-ra"`` or ``"quintic"``.
        t, q, qd, qdd: the points sent in the JointTrajectory: (K,) s from its start; (K, n) rad, rad/s,
            rad/s². For quintic timing these are the waypoints at rest (the node's quintic interpolation
            between rest points *is* the timing law).
        duration: s.
    """

    waypoints: np.ndarray
    timing: str
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    duration: float
    extra: dict = field(default_factory=dict)


def _start_pose(model, entry) -> np.ndarray:
    q0 = model.neutral().copy()
    lo, hi = model.lower, model.upper
    mid = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), 0.0)
    q0 = np.where(np.isfinite(lo) & np.isfinite(hi), mid, q0)
    for name, value in (entry.demo_pose or {}).items():
        if name in model.index:
            q0[model.index[name]] = value
    return q0


def default_waypoints(model, entry) -> np.ndarray:
    """Start pose → a wide swing → the opposite swing → start pose, inside the position limits.

    Each joint swings by ``a_j = min(1 rad, 0.3 (upper − lower))`` (m for prismatic joints) times a fixed
    per-joint pattern, clipped 5 % of the range inside the limits. Returns (4, n) rad.
    """
    q0 = _start_pose(model, entry)
    rng = np.where(np.isfinite(model.upper - model.lower), model.upper - model.lower, 2 * np.pi)
    amp = np.minimum(1.0, 0.3 * rng)
    pattern = np.array([1.0, -0.4, 0.5, 0.6, 0.7, -0.5, 0.9])
    s1 = pattern[np.arange(model.n) % len(pattern)]
    s2 = -np.array([1.0, -0.75, 1.0, 0.8, 0.85, -1.0, 1.0])[np.arange(model.n) % 7]
    lo = np.where(np.isfinite(model.lower), model.lower + 0.05 * rng, -np.inf)
    hi = np.where(np.isfinite(model.upper), model.upper - 0.05 * rng, np.inf)
    q0 = np.clip(q0, lo, hi)
    W = np.stack([q0, q0 + amp * s1, q0 + amp * s2, q0])
    return np.clip(W, lo, hi)


def _quintic_timing(model, engine, W, velocity_scale, torque_margin) -> Plan:
    """Rest-to-rest quintic segments, each as short as the velocity and torque limits allow.

    A quintic q_a + Δ·(10x³ − 15x⁴ + 6x⁵), x = t/T, peaks at qd = 15Δ/(8T) (Lynch & Park 2017, §9.2.2);
    T starts at the velocity bound and grows by 2 % until RNEA(q, qd, qdd) + friction stays within
    torque_margin × effort limit at 200 samples of the segment.
    """
    from robot_dynamics_ros.control import laws
    from robot_dynamics_ros.control.interpolation import PiecewisePolynomialTrajectory

    vmax = velocity_scale * model.velocity_limit
    tmax = torque_margin * model.effort_limit
    durations = []
    for a, b in zip(W[:-1], W[1:]):
        dq = np.abs(b - a)
        T = max(float(np.max(15.0 / 8.0 * dq / vmax)), 1e-3)
        for _ in range(200):
            seg = PiecewisePolynomialTrajectory([0.0, T], [a, b], np.zeros((2, model.n)), np.zeros((2, model.n)))
            q, qd, qdd = seg.sample_many(np.linspace(0, T, 200))
            # with the friction feedforward the node commands (zero without URDF <dynamics>)
            tau = np.array([laws.feedforward(engine, *x, friction=True) for x in zip(q, qd, qdd)])
            if np.all(np.abs(tau) <= tmax):
                break
            T *= 1.02
        else:
            raise UserError(f"quintic timing: segment {len(durations)} needs more than "
                            f"{torque_margin:.0%} of the effort limits even when slow (gravity alone?)")
        durations.append(T)
    t = np.concatenate([[0.0], np.cumsum(durations)])
    zeros = np.zeros_like(W)
    return Plan(W, "quintic", t, W.copy(), zeros, zeros.copy(), float(t[-1]))


def _toppra_timing(model, W, velocity_scale, torque_margin, period) -> Plan:
    from robot_dynamics_ros.retiming.request import RetimeOptions
    from robot_dynamics_ros.retiming.retimer import Retimer

    # the controller commands the URDF friction too (friction feedforward): the torque budget includes it,
    # except with jerk limits (the jerk-limited timing has no friction term; the margin must cover it)
    friction = bool(np.any(model.damping) or np.any(model.friction)) and not np.any(np.isfinite(model.jerk_limit))
    res = Retimer(model).retime(W, options=RetimeOptions(velocity_scale=velocity_scale, torque_margin=torque_margin,
                                                         sample_period=period, friction=friction))
    if not res.success:
        raise RuntimeError(f"TOPP-RA retiming failed: {res.message}")
    return Plan(W, "topp-ra", np.asarray(res.t), np.asarray(res.q), np.asarray(res.qd), np.asarray(res.qdd),
                float(res.duration), extra={"retime": res.summary()})


def plan_trajectory(model, engine, W, *, timing="topp-ra", velocity_scale=0.9, torque_margin=0.7,
                    period=0.01) -> Plan:
    """Time the path through waypoints ``W`` ((W, n) rad) with TOPP-RA or quintic segments.

    Args:
        timing: ``"topp-ra"`` or ``"quintic"`` (:data:`TIMINGS`).
        velocity_scale: fraction of the URDF velocity limits the trajectory may use.
        torque_margin: fraction of the URDF effort limits the feedforward torque may use.
        period: TOPP-RA output sample period (s); the node interpolates between samples.

    Raises:
        UserError: unknown timing, the retiming fails (its message), or the quintic timing cannot meet
            the torque limits.
    """
    if timing not in TIMINGS:
        raise UserError(f"--timing '{timing}': must be one of {', '.join(TIMINGS)}")
    if timing == "topp-ra":
        try:
            return _toppra_timing(model, W, velocity_scale, torque_margin, period)
        except RuntimeError as exc:
            raise UserError(str(exc)) from None
    return _quintic_timing(model, engine, W, velocity_scale, torque_margin)


def _trajectory_msg(joint_names, plan: Plan, start_ns: int):
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    msg = JointTrajectory()
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(start_ns), 1_000_000_000)
    msg.joint_names = list(joint_names)
    for k in range(len(plan.t)):
        p = JointTrajectoryPoint()
        p.positions = plan.q[k].tolist()
        p.velocities = plan.qd[k].tolist()
        p.accelerations = plan.qdd[k].tolist()
        p.time_from_start.sec, p.time_from_start.nanosec = divmod(int(round(plan.t[k] * 1e9)), 1_000_000_000)
        msg.points.append(p)
    return msg


def default_tool_frame(model) -> str:
    """The tool frame: the deepest link below the last actuated joint, not behind a held joint (e.g.
    ``panda_hand_tcp``, ``tool0``); on ties, a name containing 'tcp' or 'tool' wins."""
    d = model.description
    held = set(model.held_joints)
    children: dict[str, list] = {}
    for j in d.joints.values():
        children.setdefault(j.parent, []).append(j)
    last = d.joints[model.joint_names[-1]]
    best, best_depth = last.child, 0
    stack = [(last.child, 0)]
    while stack:
        link, depth = stack.pop()
        named = any(k in link.lower() for k in ("tcp", "tool"))
        best_named = any(k in best.lower() for k in ("tcp", "tool"))
        if depth > best_depth or (depth == best_depth and named and not best_named):
            best, best_depth = link, depth
        for j in children.get(link, []):
            if j.name not in held and (j.type == "fixed" or j.name in model.index):
                stack.append((j.child, depth + 1))
    return best


# --------------------------------------------------------------------------------------------- one run
def _make_recorder_class():
    from rclpy.node import Node
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from robot_dynamics_ros.nodes import wire

    class Recorder(Node):
        """Sends the trajectory and records what the loop exchanges: the desired states the node publishes
        (by stamp) and, optionally, every message of the run in a rosbag2 (raw bytes, bag time = the
        simulated time of the state a message belongs to)."""

        def __init__(self, model, bag=None, context=None):
            super().__init__("track_recorder", context=context)
            self.model = model
            self.bag = bag
            self.desired: dict[int, tuple] = {}
            #: desired-state messages ignored because they do not describe this model's joints
            self.foreign_messages = 0
            self.last_state_ns = 0
            self._deserialize = deserialize_message
            self._JointState = JointState
            from trajectory_msgs.msg import JointTrajectory

            self.pub_traj = self.create_publisher(JointTrajectory, "computed_torque/joint_trajectory", 10)
            self.sub_desired = self.create_subscription(JointState, "computed_torque/desired_state",
                                                        self._on_desired, 100, raw=True)
            self.create_subscription(JointState, "joint_states", self._on_state, wire.joint_state_qos(), raw=True)
            self.create_subscription(Float64MultiArray, "effort_controller/commands", self._on_command,
                                     wire.command_qos(), raw=True)

        def record(self, topic, msgtype, raw: bytes, t_ns: int) -> None:
            if self.bag is not None:
                self.bag.write_serialized(topic, msgtype, raw, t_ns)

        def _on_state(self, raw) -> None:
            msg = self._deserialize(raw, self._JointState)
            st = msg.header.stamp
            self.last_state_ns = st.sec * 1_000_000_000 + st.nanosec
            self.record("/joint_states", self._JointState, raw, self.last_state_ns)

        def _on_command(self, raw) -> None:
            from std_msgs.msg import Float64MultiArray

            # lockstep: a command answers the last state (the next one is published after it is applied)
            self.record("/effort_controller/commands", Float64MultiArray, raw, self.last_state_ns)

        def _on_desired(self, raw) -> None:
            msg = self._deserialize(raw, self._JointState)
            st = msg.header.stamp
            t_ns = st.sec * 1_000_000_000 + st.nanosec
            # another publisher of this topic (another run, a tool) may send any names or sizes: only a
            # message naming exactly this model's joints, each once, with full arrays, is a desired state
            n = self.model.n
            if (len(msg.name) != n or set(msg.name) != set(self.model.joint_names)
                    or not len(msg.position) == len(msg.velocity) == len(msg.effort) == n):
                self.foreign_messages += 1
                return
            self.record("/computed_torque/desired_state", self._JointState, raw, t_ns)
            idx = [self.model.index[j] for j in msg.name]
            q_d = np.empty(n)
            qd_d = np.empty(n)
            ff = np.empty(n)
            q_d[idx], qd_d[idx], ff[idx] = msg.position, msg.velocity, msg.effort
            self.desired[t_ns] = (q_d, qd_d, ff)

    return Recorder


@dataclass
class _Run:
    mode: str
    t_ns: np.ndarray          # (T,) stamps of the states
    q: np.ndarray             # (T, n) actual
    q_d: np.ndarray           # (T, n) desired (published by the node for that stamp)
    qd: np.ndarray            # (T, n) actual
    qd_d: np.ndarray
    tau: np.ndarray           # (T, n) applied command
    tau_ff: np.ndarray        # (T, n) feedforward of the desired motion
    wall_s: float
    foreign: int = 0
    resent: int = 0


def _run_mode(mode, model, engine, plan: Plan, *, source, held, rate, pd_gains, ct_gains, epoch_ns,
              bag, timestep, wall_timeout, domain_id, localhost, executor_kind="events", joint_limits=None):
    """One mode: the simulator node (lockstep, /clock from ``epoch_ns``) and a fresh computed-torque node
    (``tick_source=joint_states``, ``use_sim_time``) on a private context; returns the recorded run."""
    import rclpy
    from rclpy.parameter import Parameter

    from robot_dynamics_tools.commands import isolation
    from robot_dynamics_ros.nodes import runtime
    from robot_dynamics_ros.nodes.computed_torque import ComputedTorqueNode
    from robot_dynamics_ros.nodes.simulator import SimulatorNode

    steps = max(1, int(round(1.0 / rate / timestep)))
    stop_s = _LEAD_S + plan.duration + _TAIL_S
    ctx, _ = isolation.init_context(domain_id, localhost=localhost)
    node = sim = recorder = executor = None
    states: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = []
    try:
        source_params = [Parameter("urdf_path", value=source)]
        if joint_limits:
            source_params.append(Parameter("joint_limits_path", value=str(joint_limits)))
        if held:  # (an empty list would be typed BYTE_ARRAY by rclpy)
            source_params += [Parameter("held_joint_names", value=list(held)),
                              Parameter("held_joint_positions", value=[float(v) for v in held.values()])]
        # velocity_factor: the simulated arm under gravity + PD may really move faster than twice its
        # velocity limit; the cores' sensor-plausibility gate must not stop the loop (lockstep would wait)
        params = [*source_params, Parameter("mode", value=mode), Parameter("tick_source", value="joint_states"),
                  Parameter("use_sim_time", value=True), Parameter("velocity_factor", value=1e6),
                  Parameter("position_margin", value=100.0)]
        for i, j in enumerate(model.joint_names):
            params += [Parameter(f"gains.{j}.p", value=float(pd_gains[0][i])),
                       Parameter(f"gains.{j}.d", value=float(pd_gains[1][i])),
                       Parameter(f"gains.{j}.kp", value=float(ct_gains[0][i])),
                       Parameter(f"gains.{j}.kd", value=float(ct_gains[1][i]))]
        node = ComputedTorqueNode("computed_torque", context=ctx, parameter_overrides=params)
        if tuple(node.model.joint_names) != tuple(model.joint_names):
            raise UserError(f"internal: the node's joints {list(node.model.joint_names)} are not the scenario's")
        sim = SimulatorNode(context=ctx, parameter_overrides=[
            *source_params, Parameter("lockstep", value=True), Parameter("publish_clock", value=True),
            Parameter("clock_start", value=epoch_ns * 1e-9), Parameter("publish_rate", value=float(rate)),
            # a state sent twice would be a second control tick: only after a long silence (a lost message)
            Parameter("lockstep_resend", value=5.0),
            Parameter("timestep", value=1.0 / rate / steps),
            Parameter("joints", Parameter.Type.STRING_ARRAY, list(node.mapper.command_joints)),
            Parameter("initial_joint_names", Parameter.Type.STRING_ARRAY, list(model.joint_names)),
            Parameter("initial_positions", Parameter.Type.DOUBLE_ARRAY, [float(v) for v in plan.q[0]])])
        sim.stop_time = stop_s
        sim.on_publish.append(lambda t, q, qd, eff: states.append((t, q, qd, eff)))
        recorder = _make_recorder_class()(model, bag=bag, context=ctx)
        executor = runtime.make_executor(executor_kind, context=ctx)
        executor.add_node(node)
        executor.add_node(recorder)  # the simulator joins when the trajectory is in place

        def spin_until(cond, timeout, what):
            end = time.monotonic() + timeout
            while not cond():
                if time.monotonic() > end:
                    raise UserError(f"track ({mode}): timed out after {timeout:.0f} s waiting for {what}")
                executor.spin_once(timeout_sec=0.01)

        spin_until(lambda: (recorder.pub_traj.get_subscription_count() > 0
                            and sim.state_pub.get_subscription_count() > 1
                            and sim.cmd_sub.get_publisher_count() > 0
                            and recorder.sub_desired.get_publisher_count() > 0
                            and sim.clock_subscribers() > 0), 10.0, "DDS discovery")
        # the node's clock must read sim time before the first state (else that state is "from the future")
        sim.publish_clock()
        spin_until(lambda: node.get_clock().now().nanoseconds == sim.now_ns(), 5.0, "/clock")
        start_ns = epoch_ns + int(_LEAD_S * 1e9)
        traj = _trajectory_msg(model.joint_names, plan, start_ns)
        recorder.pub_traj.publish(traj)
        from rclpy.serialization import serialize_message
        from trajectory_msgs.msg import JointTrajectory

        recorder.record("/computed_torque/joint_trajectory", JointTrajectory, serialize_message(traj), sim.now_ns())
        spin_until(lambda: node.trajectories_accepted + node.trajectories_rejected > 0, 5.0,
                   "the trajectory to reach the node")
        if node.trajectories_rejected:
            raise UserError(f"track ({mode}): the node rejected the trajectory: {node.last_rejection}")
        executor.add_node(sim)
        t_wall = time.monotonic()
        sim.publish_state()
        spin_until(lambda: sim.done, wall_timeout, f"the simulation to reach {stop_s:.2f} s")
        wall = time.monotonic() - t_wall
        last_ns = epoch_ns + int(round(states[-1][0] * 1e9))
        # the last desired_state may still be in flight
        spin_until(lambda: last_ns in recorder.desired, 2.0, "the last desired state")
    finally:
        runtime.close_ros(executor, (node, sim, recorder), ctx)
    # state k's command is the effort applied while stepping to state k + 1 (reported with state k + 1)
    t_ns = [epoch_ns + int(round(t * 1e9)) for t, *_ in states]
    applied = [eff for *_, eff in states[1:]] + [np.full(model.n, np.nan)]
    keep = [k for k, t in enumerate(t_ns) if t in recorder.desired]
    des = [recorder.desired[t_ns[k]] for k in keep]
    return _Run(mode, np.array([t_ns[k] for k in keep]), np.array([states[k][1] for k in keep]),
                np.array([d[0] for d in des]), np.array([states[k][2] for k in keep]),
                np.array([d[1] for d in des]), np.array([applied[k] for k in keep]),
                np.array([d[2] for d in des]), wall, recorder.foreign_messages, sim.resent)


def _metrics(run: _Run, model, engine, tool: str, start_ns: int, end_ns: int) -> dict:
    sel = (run.t_ns >= start_ns) & (run.t_ns <= end_ns)
    q, q_d = run.q[sel], run.q_d[sel]
    p = np.array([engine.frame_placement(x, tool)[:3, 3] for x in q])
    p_d = np.array([engine.frame_placement(x, tool)[:3, 3] for x in q_d])
    tool_err = np.linalg.norm(p - p_d, axis=1) * 1e3
    joint_err = np.abs(q - q_d)
    tau = run.tau[sel]
    tau_frac = np.nanmax(np.abs(tau) / model.effort_limit, axis=0)
    vel_frac = np.max(np.abs(run.qd[sel]) / model.velocity_limit, axis=0)
    return {
        "tool_error_max_mm": float(tool_err.max()),
        "tool_error_rms_mm": float(np.sqrt(np.mean(tool_err ** 2))),
        "joint_error_max_rad": float(joint_err.max()),
        "joint_error_rms_rad": float(np.sqrt(np.mean(joint_err ** 2))),
        "worst_joint": model.joint_names[int(np.argmax(joint_err.max(axis=0)))],
        "peak_torque_fraction": float(tau_frac.max()),
        "peak_torque_joint": model.joint_names[int(np.argmax(tau_frac))],
        "peak_velocity_fraction": float(vel_frac.max()),
        "peak_velocity_joint": model.joint_names[int(np.argmax(vel_frac))],
        "samples": int(sel.sum()),
        "wall_s": round(run.wall_s, 3),
        "foreign_desired_states_ignored": run.foreign,
        "resent_states": run.resent,
        "_tool_err": tool_err,
        "_sel": sel,
    }


def _plot(path: Path, runs: dict, metrics: dict, model, robot: str, plan: Plan) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(runs)
    dec = slice(None, None, 4)  # every 4th tick is plenty for the eye (and 4x faster to draw)
    colors = {"gravity": "tab:red", "feedforward": "tab:orange", "computed_torque": "tab:green"}
    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    ref = runs[modes[-1]]
    t0 = ref.t_ns[0]
    # (a) desired vs actual, the joint that moves most
    j = int(np.argmax(np.ptp(ref.q_d, axis=0)))
    ax = axes[0, 0]
    ax.plot((ref.t_ns[dec] - t0) * 1e-9, ref.q_d[dec, j], "k--", lw=1.5, label="desired")
    for mname, r in runs.items():
        ax.plot((r.t_ns[dec] - r.t_ns[0]) * 1e-9, r.q[dec, j], color=colors.get(mname), lw=1,
                label=MODE_LABELS[mname])
    ax.set_title(f"{model.joint_names[j]}: desired vs actual")
    ax.set_xlabel("t [s]")
    ax.set_ylabel("q [rad]")
    ax.legend(fontsize=8)
    # (b) tool error
    ax = axes[0, 1]
    for mname, r in runs.items():
        m = metrics[mname]
        tt = (r.t_ns[m["_sel"]] - r.t_ns[0]) * 1e-9
        ax.semilogy(tt[dec], np.maximum(m["_tool_err"][dec], 1e-4), color=colors.get(mname),
                    label=f"{MODE_LABELS[mname]} (max {m['tool_error_max_mm']:.3g} mm)")
    ax.axhline(1.0, color="gray", ls=":", lw=1)
    ax.set_title("tool position error")
    ax.set_xlabel("t [s]")
    ax.set_ylabel("|p - p_d| [mm]")
    ax.legend(fontsize=8)

    def per_limit(ax, values, limit, title, ylabel):  # one line per joint, values / limit, ±1 marked
        for i, name in enumerate(model.joint_names):
            ax.plot((ref.t_ns[dec] - t0) * 1e-9, values[dec, i] / limit[i], lw=1, label=name)
        ax.axhline(1.0, color="k", lw=1)
        ax.axhline(-1.0, color="k", lw=1)
        ax.set_title(title)
        ax.set_xlabel("t [s]")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7, ncol=2)

    # (c) torques vs limits (computed torque run)
    per_limit(axes[1, 0], ref.tau, model.effort_limit,
              f"commanded torque / effort limit ({MODE_LABELS[modes[-1]]})", "tau / limit")
    # (d) velocities vs limits (desired)
    per_limit(axes[1, 1], ref.qd_d, model.velocity_limit,
              f"desired velocity / velocity limit ({plan.timing} timing)", "qd / limit")
    fig.suptitle(f"robot-dynamics track: {robot}, {plan.duration:.2f} s trajectory")
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.07, top=0.92, hspace=0.32, wspace=0.18)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def track(urdf: str = "panda", *, out_dir: str | Path = "out", modes=MODES, rate: float = 1000.0,
          timing: str = "topp-ra", velocity_scale: float = 0.9, torque_margin: float = 0.7,
          pd_bandwidth: float = 10.0, ct_bandwidth: float = 30.0, tool: str | None = None,
          bag: bool = True, plot: bool = True, timestep: float = 0.00025, wall_timeout: float = 120.0,
          domain_id: int | None = None, localhost: bool | None = None, log=lambda text: None,
          joint_limits: str | None = None) -> dict:
    """Run the tracking scenario and return its summary (see the module docstring).

    Args:
        urdf: robot name of :data:`robot_dynamics_ros.robots.ROBOTS` or a URDF path.
        out_dir: directory for the PNG and the bag.
        modes: subset of :data:`MODES`.
        rate: control rate, Hz (one command per simulated period 1/rate).
        timing, velocity_scale, torque_margin: see :func:`plan_trajectory`.
        pd_bandwidth: ω (rad/s) of the joint PD shared by the gravity and feedforward modes.
        ct_bandwidth: ω_c (rad/s) of the computed-torque error dynamics.
        tool: tool frame for the Cartesian error (default :func:`default_tool_frame`).
        bag, plot: write the rosbag2 / the PNG.
        timestep: MuJoCo step (s), at most 1/rate (rounded so that an integer number of steps fits).
        domain_id, localhost: DDS domain of every mode; default a private domain with localhost-only
            discovery (:func:`robot_dynamics_tools.commands.isolation.init_context`).
        log: called with one progress line per step (timing, each mode), so a long first run (numba
            compiles the retiming kernels once, 1-2 min) is never silent.
        joint_limits: MoveIt joint_limits.yaml path applied to the planning model and every node
            (``joint_limits_path``), or None for the URDF limits only (the CLI's default is the bundled
            robot's config file: :func:`robot_dynamics_tools.commands._args.joint_limits_file`).

    Returns:
        ``{"robot", "joints", "tool_frame", "timing", "duration_s", "trajectory_peak_torque_fraction",
        "trajectory_peak_velocity_fraction", "modes": {mode: {"tool_error_max_mm", "tool_error_rms_mm",
        "joint_error_max_rad", "peak_torque_fraction", "peak_velocity_fraction", ...}}, "criteria": {...},
        "plot", "bag"}``.

    Raises:
        UserError: unknown robot / URDF, unknown mode or tool frame, bad numbers, a timed-out run.
    """
    from robot_dynamics_ros import robots
    from robot_dynamics_ros.nodes import model_source

    for name, v, lo, hi in (("rate", rate, 1.0, 10000.0), ("velocity_scale", velocity_scale, 1e-3, 1.0),
                            ("torque_margin", torque_margin, 1e-3, 1.0), ("pd_bandwidth", pd_bandwidth, 0.0, 1e4),
                            ("ct_bandwidth", ct_bandwidth, 0.0, 1e4), ("timestep", timestep, 1e-5, 0.1)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and lo <= v <= hi):
            raise UserError(f"{name} = {v!r}: must be a number in [{lo}, {hi}]")
    modes = parse_modes(",".join(modes))
    from robot_dynamics_tools.commands import isolation

    domain_id, private = isolation.resolve(domain_id)
    localhost = private if localhost is None else bool(localhost)
    entry = robots.resolve(urdf)
    source = str(Path(entry.path).resolve())
    held = dict(entry.held_joints)
    model = model_source.shared_model(source, held or None, joint_limits or None)
    engine = model_source.shared_engine(model)
    if model.n < 2:
        raise UserError(f"robot '{entry.name}' has {model.n} actuated joint(s); track needs an arm")
    tool = tool or default_tool_frame(model)
    if tool not in model.description.links:
        raise UserError(f"--tool '{tool}' is not a link of {model.description.name}")
    if not np.all(np.isfinite(model.velocity_limit)) or not np.all(np.isfinite(model.effort_limit)):
        raise UserError(f"robot '{entry.name}': every joint needs URDF velocity and effort limits")

    W = default_waypoints(model, entry)
    log(f"timing the path ({timing}; the first run compiles the retiming kernels, 1-2 min, cached after)")
    from robot_dynamics_tools.commands._progress import heartbeat

    with heartbeat(log, "timing the path"):
        plan = plan_trajectory(model, engine, W, timing=timing, velocity_scale=velocity_scale,
                               torque_margin=torque_margin, period=0.01)
    # the desired motion as the node will sample it, for the trajectory's own limit usage
    from robot_dynamics_ros.control import laws
    from robot_dynamics_ros.control.interpolation import PiecewisePolynomialTrajectory

    dense = PiecewisePolynomialTrajectory(plan.t, plan.q, plan.qd, plan.qdd)
    ts = np.arange(0.0, plan.duration, 1.0 / rate)
    Qs, QDs, QDDs = dense.sample_many(ts)
    # the feedforward the node commands: RNEA + the friction at the desired velocity (computed_torque core)
    tau_ff = np.array([laws.feedforward(engine, *x, friction=True) for x in zip(Qs, QDs, QDDs)])
    traj_tau = np.max(np.abs(tau_ff) / model.effort_limit, axis=0)
    traj_vel = np.max(np.abs(QDs) / model.velocity_limit, axis=0)

    q0 = plan.q[0]
    Mjj = np.diag(engine.mass_matrix(q0))
    pd_gains = (pd_bandwidth ** 2 * Mjj, 2.0 * pd_bandwidth * Mjj)
    ct_gains = (np.full(model.n, ct_bandwidth ** 2), np.full(model.n, 2.0 * ct_bandwidth))

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bag_path = out / f"track_{entry.name}_bag"
    writer = None
    if bag:
        from robot_dynamics_tools.bags import BagWriter

        if bag_path.exists():
            if not (bag_path / "metadata.yaml").is_file():
                raise UserError(f"'{bag_path}' exists and is not a bag; not overwriting it")
            shutil.rmtree(bag_path)
        writer = BagWriter(bag_path, storage="sqlite3")
        writer.open()
    runs, metrics = {}, {}
    try:
        for k, mname in enumerate(modes):
            log(f"running mode {MODE_LABELS[mname]} ({plan.duration:.2f} s trajectory, domain {domain_id})")
            epoch_ns = (_EPOCH_S + k * _MODE_SPACING_S) * 1_000_000_000
            run_ = _run_mode(mname, model, engine, plan, source=source, held=held, rate=rate,
                             joint_limits=joint_limits,
                             pd_gains=pd_gains, ct_gains=ct_gains, epoch_ns=epoch_ns, bag=writer,
                             timestep=timestep, wall_timeout=wall_timeout, domain_id=domain_id,
                             localhost=localhost)
            start_ns = epoch_ns + int(_LEAD_S * 1e9)
            end_ns = start_ns + int((plan.duration + _TAIL_S) * 1e9)
            runs[mname] = run_
            metrics[mname] = _metrics(run_, model, engine, tool, start_ns, end_ns)
    except BaseException as exc:
        if writer is not None:
            writer.fail(exc)
        raise
    if writer is not None:
        writer.close()
    plot_path = out / f"track_{entry.name}.png"
    if plot:
        _plot(plot_path, runs, metrics, model, entry.name, plan)

    summary_modes = {m: {k: (round(v, 6) if isinstance(v, float) else v) for k, v in d.items()
                         if not k.startswith("_")} for m, d in metrics.items()}
    criteria = {}
    if "gravity" in metrics and "feedforward" in metrics:
        ratio = metrics["gravity"]["tool_error_max_mm"] / max(metrics["feedforward"]["tool_error_max_mm"], 1e-12)
        criteria["feedforward_vs_gravity_max_error_ratio"] = round(ratio, 3)
        criteria["feedforward_5x_better"] = bool(ratio >= 5.0)
    if "computed_torque" in metrics:
        criteria["computed_torque_under_1mm"] = bool(metrics["computed_torque"]["tool_error_max_mm"] < 1.0)
    criteria["uses_80pct_of_a_limit"] = bool(max(traj_tau.max(), traj_vel.max()) >= 0.8)
    return {
        "robot": entry.name,
        "joints": list(model.joint_names),
        "tool_frame": tool,
        "timing": plan.timing,
        "domain_id": domain_id,
        "duration_s": round(plan.duration, 4),
        "control_rate_hz": rate,
        "pd_gains": {"p": [round(x, 4) for x in pd_gains[0]], "d": [round(x, 4) for x in pd_gains[1]]},
        "ct_gains": {"kp": ct_bandwidth ** 2, "kd": 2 * ct_bandwidth},
        "trajectory_peak_torque_fraction": round(float(traj_tau.max()), 4),
        "trajectory_peak_torque_joint": model.joint_names[int(np.argmax(traj_tau))],
        "trajectory_peak_velocity_fraction": round(float(traj_vel.max()), 4),
        "trajectory_peak_velocity_joint": model.joint_names[int(np.argmax(traj_vel))],
        "modes": summary_modes,
        "criteria": criteria,
        "plot": str(plot_path) if plot else None,
        "bag": str(bag_path) if bag else None,
    }


# --------------------------------------------------------------------------------------------- CLI
def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("exit status: 0 when every acceptance criterion of the summary (feedforward_5x_better, "
                     "computed_torque_under_1mm, uses_80pct_of_a_limit; those of the modes run) is true, 2 when "
                     "the scenario ran but one is false (as demo and push), 1 on an error")
    parser.add_argument("--urdf", default="panda", metavar="PATH",
                        help="URDF file or robot name (default: panda)")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary line")
    parser.add_argument("--joint-limits", metavar="YAML", help="MoveIt joint_limits.yaml for the trajectory and "
                        "the nodes; a bare name is looked up in the package's config/; default: "
                        "config/<robot>_joint_limits.yaml for a bundled robot name; '' for none")
    parser.add_argument("--out", default="out", help="output directory for the PNG and the bag (default: out)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated subset of {','.join(MODES)} (default: all)")
    parser.add_argument("--rate", type=float, default=1000.0, help="control rate, Hz (default: 1000)")
    parser.add_argument("--timing", default="topp-ra", choices=TIMINGS,
                        help="trajectory timing (default: topp-ra; a retiming failure is an error)")
    parser.add_argument("--domain-id", type=int, default=None,
                        help="DDS domain (default: a private one chosen by the code, never $ROS_DOMAIN_ID, "
                             "localhost-only discovery; an explicit id keeps the environment's discovery)")
    parser.add_argument("--velocity-scale", type=float, default=0.9,
                        help="fraction of the velocity limits the trajectory may use (default: 0.9)")
    parser.add_argument("--torque-margin", type=float, default=0.7,
                        help="fraction of the effort limits the feedforward may use (default: 0.7)")
    parser.add_argument("--pd-bandwidth", type=float, default=10.0,
                        help="ω of the joint PD of the gravity and feedforward modes, rad/s (default: 10)")
    parser.add_argument("--ct-bandwidth", type=float, default=30.0,
                        help="ω of the computed-torque error dynamics, rad/s (default: 30)")
    parser.add_argument("--tool", default=None, help="tool frame for the Cartesian error (default: deepest "
                        "link after the last actuated joint)")
    parser.add_argument("--no-bag", action="store_true", help="do not write the rosbag2")
    parser.add_argument("--no-plot", action="store_true", help="do not write the PNG")


def print_report(summary: dict, log=print) -> None:
    """Print the human-readable tracking report of a :func:`track` summary (one call of ``log`` per line)."""
    log(f"robot {summary['robot']} ({len(summary['joints'])} joints), tool frame {summary['tool_frame']}, "
        f"{summary['timing']} timing, {summary['duration_s']} s at {summary['control_rate_hz']:.0f} Hz")
    log(f"  trajectory uses {summary['trajectory_peak_velocity_fraction']:.0%} of the velocity limit "
        f"({summary['trajectory_peak_velocity_joint']}) and {summary['trajectory_peak_torque_fraction']:.0%} "
        f"of the effort limit ({summary['trajectory_peak_torque_joint']})")
    log(f"  {'mode':<18}{'tool max mm':>12}{'tool rms mm':>12}{'joint max rad':>14}"
        f"{'peak tau':>10}{'peak vel':>10}")
    for mname, m in summary["modes"].items():
        log(f"  {MODE_LABELS[mname]:<18}{m['tool_error_max_mm']:>12.3f}{m['tool_error_rms_mm']:>12.3f}"
            f"{m['joint_error_max_rad']:>14.5f}{m['peak_torque_fraction']:>10.0%}"
            f"{m['peak_velocity_fraction']:>10.0%}")
    for mname, m in summary["modes"].items():
        over = [f"{m[key]:.0%} of the {what} limit" for what, key in (("velocity", "peak_velocity_fraction"),
                                                                     ("effort", "peak_torque_fraction"))
                if m[key] > 1.0]
        if over:
            # the simulated arm, not the trajectory: MuJoCo caps no joint velocity, a real drive would fault
            log(f"  note: {MODE_LABELS[mname]} drives the simulated arm to {' and '.join(over)}: it lags the "
                f"trajectory by up to {m['joint_error_max_rad']:.2f} rad and overshoots catching up (the "
                "trajectory itself stays within its limits, line 2)")
    for k, v in summary["criteria"].items():
        log(f"  {k}: {v}")
    if summary["plot"]:
        log(f"  plot: {summary['plot']}")
    if summary["bag"]:
        log(f"  bag: {summary['bag']}")


def run(args) -> int:
    from robot_dynamics_tools.commands._args import check_output_path, joint_limits_file

    if not (args.no_bag and args.no_plot):
        check_output_path(args.out, "--out", directory=True)
    summary = track(args.urdf, out_dir=args.out, modes=parse_modes(args.modes), rate=args.rate,
                    timing=args.timing, velocity_scale=args.velocity_scale, torque_margin=args.torque_margin,
                    pd_bandwidth=args.pd_bandwidth, ct_bandwidth=args.ct_bandwidth, tool=args.tool,
                    bag=not args.no_bag, plot=not args.no_plot, domain_id=args.domain_id,
                    log=(lambda text: None) if args.json else (lambda text: print(text, flush=True)),
                    joint_limits=joint_limits_file(args.joint_limits, args.urdf))
    if not args.json:
        print_report(summary)
    print(json.dumps(summary))
    # as demo and push: 2 when the scenario ran but one of its own criteria is False
    return 0 if all(v for v in summary["criteria"].values() if isinstance(v, bool)) else 2
