"""``robot-dynamics run``: start the chosen nodes (the stand-in for ``ros2 launch``).

    robot-dynamics run --params config/panda.yaml --nodes mujoco_simulator gravity_compensation
    robot-dynamics run --urdf ur5 --nodes gravity_compensation            # waits for joint_states
    robot-dynamics run --params config/panda.yaml --duration 10           # stop by itself after 10 s
    robot-dynamics run --params config/panda.yaml --nodes retiming_service --ros-args -r __ns:=/r1

Node parameters come from a standard rcl parameter file (``<node name>: ros__parameters: ...``, the
format ``ros2 launch`` and ``--ros-args --params-file`` read), handed to rclpy as global ``--params-file``
arguments, so each node picks its sections as rclpy does in any process (:func:`section_applies`): a
section names the node's fully qualified name, a leading ``/`` implied, ``*`` one namespace token and
``**`` any number. A plain ``gravity_compensation:`` is the root-namespace node ``/gravity_compensation``
only; the bundled ``config/<robot>.yaml`` files use ``/**/gravity_compensation:`` so that they also reach
``/r1/gravity_compensation`` under ``-r __ns:=/r1``. ``run`` names, in one line, each section meant for a
started node (same node name) that applies to none of them (the file, the section and the nodes' fully
qualified names), and, one per line, the keys of an applied section that the node does not declare.
``--urdf`` sets
``urdf_path`` of every started node and wins over the file; for a bundled robot name it also sets
``joint_limits_path`` to the package's ``config/<robot>_joint_limits.yaml`` when no params file is given
(``--joint-limits`` chooses another file, ``--joint-limits ''`` none). Arguments after ``--ros-args``
(remaps such as ``-r __ns:=/r1``, ``-p name:=value``) go to every node, as with ``ros2 run``.

Processes: one OS process per node, as ``ros2 launch`` starts them: ``python -m
robot_dynamics_ros.nodes.<module> --ros-args --params-file F ... -p urdf_path:=... -r ...`` (the node's
console entry point, :func:`child_command`), each in a process group of its own so that ``run`` alone decides
when its nodes stop. Before starting them, ``run`` builds the nodes once in its own process (public
constructors, :func:`start_nodes`; on a private domain, quiet, without their start-up work:
:func:`check_nodes`) to report bad parameters, unreadable URDFs, unmatched sections and undeclared keys
(above), then destroys them. Ctrl-C (SIGINT) or ``--duration`` sends SIGINT to every node
(SIGKILL after :data:`STOP_TIMEOUT_S`); a node that ends by itself is reported with its exit code and the
others are stopped; the exit status is then 1. A node whose ``run`` is killed receives SIGINT (Linux
``PR_SET_PDEATHSIG``). The last line on stdout is a JSON summary: the nodes and their exit codes.

DDS: ``run`` uses the environment's ``ROS_DOMAIN_ID`` and discovery range unchanged: its nodes are meant
to be reached by controllers and planners, on this host or others.
"""
from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from robot_dynamics_ros.errors import UserError

#: node name -> (module, class name); the node name is also the section name in a params file
NODES: dict[str, tuple[str, str]] = {
    "mujoco_simulator": ("robot_dynamics_ros.nodes.simulator", "SimulatorNode"),
    "gravity_compensation": ("robot_dynamics_ros.nodes.gravity_compensation", "GravityCompensationNode"),
    "computed_torque": ("robot_dynamics_ros.nodes.computed_torque", "ComputedTorqueNode"),
    "retiming_service": ("robot_dynamics_ros.nodes.retiming_service", "RetimingServiceNode"),
    "external_torque_observer": ("robot_dynamics_ros.nodes.external_torque_observer",
                                 "ExternalTorqueObserverNode"),
}
DEFAULT_NODES = ("mujoco_simulator", "gravity_compensation")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--urdf", help="URDF file or robot name (panda, ur5, ...): urdf_path of every node")
    parser.add_argument("--params", action="append", default=[], metavar="YAML",
                        help="rcl parameter file (node_name: ros__parameters: ...); may be repeated")
    parser.add_argument("--nodes", nargs="+", default=list(DEFAULT_NODES), metavar="NODE",
                        help=f"nodes to start, from {list(NODES)} (default: {' '.join(DEFAULT_NODES)})")
    parser.add_argument("--duration", type=float, default=0.0,
                        help="stop after this many seconds (default 0: run until Ctrl-C)")
    parser.add_argument("--joint-limits", default=None, metavar="YAML",
                        help="joint_limits.yaml (MoveIt format) for every node; default: with --urdf NAME of a "
                             "bundled robot and no --params, the package's config/NAME_joint_limits.yaml; "
                             "'' for none")
    parser.add_argument("--ros-args", dest="ros_args", nargs=argparse.REMAINDER, default=[],
                        help="ROS arguments for every node (remaps, -p), as after ros2 run's --ros-args")


def check_params_file(path: str) -> Path:
    """Check that ``path`` is a readable rcl parameter YAML; return it.

    Raises:
        UserError: missing file, invalid YAML, or an entry that is neither a node section (with
            ``ros__parameters``) nor a namespace mapping of such sections.
    """
    import yaml

    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"parameter file '{path}': no such file")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"parameter file '{path}': invalid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise UserError(f"parameter file '{path}': expected 'node_name: ros__parameters: ...' mappings")
    param_sections(data, path)
    return p.resolve()


def param_sections(data: dict, path: str = "") -> list[tuple[str, str, dict]]:
    """The node sections of a parsed rcl parameter file: ``(key, name, ros__parameters)`` per section.

    ``key`` is the section as written (nested namespace keys joined by ``/``: ``r1: {gravity_compensation:
    {ros__parameters: ...}}`` is ``r1/gravity_compensation``, as rcl_yaml_param_parser reads it); ``name`` is
    the name rclpy matches, with the leading ``/`` it adds (``gravity_compensation`` -> ``/gravity_compensation``).

    Raises:
        UserError: an entry that is neither a node section nor a namespace mapping of node sections.
    """
    out = []

    def walk(d: dict, prefix: str) -> None:
        for key, val in d.items():
            full = f"{prefix.rstrip('/')}/{str(key).lstrip('/')}" if prefix else str(key)
            if isinstance(val, dict) and "ros__parameters" in val:
                body = val["ros__parameters"]
                out.append((full, full if full.startswith("/") else f"/{full}",
                            body if isinstance(body, dict) else {}))
            elif isinstance(val, dict) and val and all(isinstance(v, dict) for v in val.values()):
                walk(val, full)
            else:
                raise UserError(f"parameter file '{path}': entry '{full}' has no 'ros__parameters' mapping")

    walk(data, "")
    return out


def section_applies(name: str, node_fqn) -> bool:
    """Whether rclpy gives the section ``name`` (as :func:`param_sections` returns it) to the node whose fully
    qualified name is ``node_fqn`` (a node object: its ``get_fully_qualified_name()``).

    rclpy's rule (wildcard matching of rclpy's ``Node::get_parameters``, ros2/rclpy#987; the same as
    rclcpp's): the name, with a leading ``/`` implied, must equal the fully qualified name token by token
    (tokens split at ``/``), where ``*`` is one token and ``**`` zero or more; no partial tokens. So a plain
    ``gravity_compensation:`` is the node ``/gravity_compensation`` in the root namespace only,
    ``/**/gravity_compensation:`` that node in any namespace, ``/r1/*:`` every node in ``/r1`` and ``/**:``
    every node.
    """
    import re

    fqn = node_fqn if isinstance(node_fqn, str) else node_fqn.get_fully_qualified_name()
    tokens = [tok for tok in name.split("/") if tok]
    pattern = "".join("(?:/[^/]+)*" if tok == "**" else "/[^/]+" if tok == "*" else "/" + re.escape(tok)
                      for tok in tokens)
    return re.fullmatch(pattern or "/", fqn) is not None


def section_parameters(data: dict, node_fqn: str, path: str = "") -> dict:
    """The parameters (dotted names) a parsed rcl parameter file gives the node ``node_fqn``: every section
    that applies (:func:`section_applies`), later ones winning."""
    out: dict = {}
    for _, name, body in param_sections(data, path):
        if section_applies(name, node_fqn):
            out.update(flatten_parameters(body))
    return out


def flatten_parameters(d: dict, prefix: str = "") -> dict:
    """Nested ``ros__parameters`` mappings -> dotted names (``gains.j1.kp``), as rcl reads them."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten_parameters(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def unmatched_sections(params_files, nodes) -> list[str]:
    """One line per parameter-file section meant for a started node that applies to none of them.

    A section is "meant for" a started node when its last name component is that node's name (the
    ``gravity_compensation:`` of a file used with ``-r __ns:=/r1``, whose node is
    ``/r1/gravity_compensation``). The line names the file, the section and the started nodes' fully
    qualified names.
    """
    import yaml

    lines = []
    fqns = [n.get_fully_qualified_name() for n in nodes]
    basenames = {n.get_name() for n in nodes}
    for path in params_files:
        data = yaml.safe_load(Path(path).read_text()) or {}
        for key, name, _ in param_sections(data, path):
            if any(section_applies(name, n) for n in nodes):
                continue
            base = name.rsplit("/", 1)[-1]
            if base not in basenames:
                continue            # a section for a node this run does not start (or a '/r1/*' wildcard)
            want = next(n.get_fully_qualified_name() for n in nodes if n.get_name() == base)
            hint = (f"a section applies to the node whose fully qualified name it is, a leading '/' implied: "
                    f"write '{want}:', or '/**/{base}:' for the node in any namespace")
            lines.append(f"parameter file '{path}': section '{key}' matches none of the nodes "
                         f"[{', '.join(fqns)}] ({hint}); its parameters are not used")
    return lines


def undeclared_parameters(params_files, nodes) -> list[str]:
    """Keys of the parameter files that a started node does not declare (rclpy ignores them silently).

    A section applies to a node as rclpy applies it (:func:`section_applies`). Returns one human-readable
    line per undeclared key, naming the file, node and key.
    """
    import yaml

    problems = []
    for path in params_files:
        data = yaml.safe_load(Path(path).read_text()) or {}
        for key, name, body in param_sections(data, path):
            keys = flatten_parameters(body)
            for node in nodes:
                if not section_applies(name, node):
                    continue
                for k in keys:
                    if k != "use_sim_time" and not node.has_parameter(k):
                        problems.append(f"parameter file '{path}': node '{node.get_fully_qualified_name()}' "
                                        f"has no parameter '{k}' (ignored; see docs/nodes.md for the parameters)")
    return problems


def node_class(name: str):
    """The node class registered as ``name`` in :data:`NODES`.

    Raises:
        UserError: unknown node name, or its module is not available.
    """
    if name not in NODES:
        raise UserError(f"--nodes: unknown node '{name}', choose from {list(NODES)}")
    module, cls = NODES[name]
    try:
        return getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"node '{name}' is not available: {exc}") from None


def default_joint_limits(urdf: str | None, params_files) -> str | None:
    """The joint limits file ``run`` applies by default: for ``--urdf`` naming a bundled robot and no params
    file, :func:`robot_dynamics_ros.robots.bundled_joint_limits`; else None (the nodes' own)."""
    if params_files:
        return None
    from robot_dynamics_ros import robots

    return robots.bundled_joint_limits(urdf)


def start_nodes(names, *, context, urdf: str | None = None, joint_limits: str | None = None,
                per_node: dict | None = None):
    """Create the nodes ``names`` in ``context`` (parameter files must already be in its global args).

    ``urdf`` / ``joint_limits``: when given, ``urdf_path`` / ``joint_limits_path`` of every node;
    ``per_node``: node name -> {parameter: value} set on that node only, over the files.

    Raises:
        UserError: a node cannot start (bad parameter, unreadable URDF, ...), naming the node.
    """
    from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
    from rclpy.parameter import Parameter

    overrides = [Parameter("urdf_path", value=str(urdf))] if urdf else []
    if joint_limits is not None:
        overrides.append(Parameter("joint_limits_path", value=str(joint_limits)))
    nodes = []
    try:
        for name in names:
            cls = node_class(name)
            own = [Parameter(k, value=v) for k, v in (per_node or {}).get(name, {}).items()]
            try:
                nodes.append(cls(context=context, parameter_overrides=[*overrides, *own]))
            except UserError as exc:
                raise UserError(f"node '{name}': {exc}") from None
            except (ValueError, TypeError, InvalidParameterTypeException, InvalidParameterValueException) as exc:
                raise UserError(f"node '{name}': {exc}") from None
    except BaseException:
        for n in nodes:
            n.destroy_node()
        raise
    return nodes


def yaml_value(value: str) -> str:
    """``value`` as a single-quoted YAML string, for ``-p name:=<yaml>`` (a path like ``123`` or ``''`` stays
    a string)."""
    return "'" + str(value).replace("'", "''") + "'"


def child_command(name: str, ros_args, urdf: str | None = None, joint_limits: str | None = None) -> list[str]:
    """The command line of node ``name``'s own process: its entry point module with ``ros_args`` (parameter
    files, remaps, ``-p``) and ``urdf`` / ``joint_limits`` as ``urdf_path`` / ``joint_limits_path`` last, so
    that they win over the files."""
    params = []
    if urdf:
        params += ["-p", f"urdf_path:={yaml_value(urdf)}"]
    if joint_limits is not None:
        params += ["-p", f"joint_limits_path:={yaml_value(joint_limits)}"]
    return [sys.executable, "-m", NODES[name][0], "--ros-args", *ros_args, *params]


#: what the check pass turns off in the nodes it builds: work their own processes do at start-up anyway
CHECK_PASS_PARAMETERS = {"retiming_service": {"warmup": False}, "gravity_compensation": {"crossval_samples": 0}}


def check_nodes(names, ros_args, params_files, urdf, joint_limits) -> None:
    """Build the nodes ``names`` once in this process (as their own processes will) and print the parameter
    file warnings (:func:`unmatched_sections`, :func:`undeclared_parameters`); then destroy them.

    The check pass stays out of the way of the real start: on a private domain (its nodes, with the real
    names, never appear on the caller's), logging warnings and errors only (no start-up line twice), and
    without the start-up work the nodes' own processes do (:data:`CHECK_PASS_PARAMETERS`: the retiming
    kernels' warm-up, the gravity node's cross-check).

    Raises:
        UserError: a node cannot start (from :func:`start_nodes`).
    """
    import rclpy

    from robot_dynamics_tools.commands.isolation import private_domain_id

    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=["robot-dynamics-run", "--ros-args", *ros_args, "--log-level", "warn"],
               domain_id=private_domain_id())
    nodes = []
    try:
        nodes = start_nodes(list(names), context=ctx, urdf=urdf, joint_limits=joint_limits,
                            per_node=CHECK_PASS_PARAMETERS)
        for line in unmatched_sections(params_files, nodes) + undeclared_parameters(params_files, nodes):
            print(f"robot-dynamics run: warning: {line}", file=sys.stderr, flush=True)
    finally:
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown(context=ctx)


#: seconds a node may take to end after SIGINT before it is killed
STOP_TIMEOUT_S = 10.0
#: seconds between two looks at the node processes
POLL_S = 0.1


def _in_own_group_dying_with_parent() -> None:
    """``preexec_fn`` of a node process: a process group of its own (a terminal's Ctrl-C reaches ``run``
    only, which stops every node once) and SIGINT when ``run`` dies (kill -9 included)."""
    os.setpgid(0, 0)
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGINT), 0, 0, 0)


def stop_processes(procs: dict, timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGINT to every process of ``procs`` still running, SIGKILL to those still running ``timeout`` s
    later; returns when all have ended."""
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + timeout
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def supervise(procs: dict, until) -> tuple[str | None, int | None]:
    """Wait until ``until()`` (SIGINT or the duration) or a process of ``procs`` ends by itself; returns
    ``(name, exit code)`` of that process, or ``(None, None)``."""
    while not until():
        for name, proc in procs.items():
            code = proc.poll()
            if code is not None:
                return name, code
        time.sleep(POLL_S)
    return None, None


def exit_text(code: int) -> str:
    """``exit code N`` or, for a process ended by a signal, ``signal NAME``."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def run(args: argparse.Namespace) -> int:
    if len(set(args.nodes)) != len(args.nodes):
        raise UserError(f"--nodes: a node is listed twice in {args.nodes}")
    for name in args.nodes:
        node_class(name)
    if args.urdf:
        from robot_dynamics_ros import robots

        robots.resolve(args.urdf)  # UserError naming the file when it does not exist
    if args.duration < 0:
        raise UserError(f"--duration {args.duration}: must be ≥ 0 s")
    ros_args = []
    for path in args.params:
        ros_args += ["--params-file", str(check_params_file(path))]
    ros_args += list(args.ros_args or [])
    joint_limits = args.joint_limits if args.joint_limits is not None else default_joint_limits(args.urdf,
                                                                                                  args.params)
    check_nodes(args.nodes, ros_args, args.params, args.urdf, joint_limits)
    stop = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: stop.append(signum))
    procs: dict[str, subprocess.Popen] = {}
    failed = (None, None)
    try:
        for name in args.nodes:
            procs[name] = subprocess.Popen(child_command(name, ros_args, args.urdf, joint_limits),
                                           stdin=subprocess.DEVNULL, preexec_fn=_in_own_group_dying_with_parent)
        print(f"running {list(procs)} as processes {[p.pid for p in procs.values()]}"
              + (f" for {args.duration:g} s" if args.duration else " (Ctrl-C to stop)"), flush=True)
        t_end = time.monotonic() + args.duration if args.duration else None
        failed = supervise(procs, lambda: bool(stop) or (t_end is not None and time.monotonic() >= t_end))
        if failed[0] is not None:
            print(f"robot-dynamics run: node '{failed[0]}' ended by itself ({exit_text(failed[1])}); stopping "
                  f"the others", file=sys.stderr, flush=True)
    finally:
        stop_processes(procs)
        signal.signal(signal.SIGINT, previous)
    codes = {name: proc.returncode for name, proc in procs.items()}
    print(json.dumps({"nodes": list(procs), "exit_codes": codes, "failed": failed[0]}), flush=True)
    return 1 if failed[0] is not None or any(c not in (0, -signal.SIGINT) for c in codes.values()) else 0
