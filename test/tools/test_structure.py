"""The house rules of the runtime package, read from its code (AST, function-local imports included).

- rclpy, rosidl and message packages are imported only under ``robot_dynamics_ros/nodes/`` (the tools
  package ``robot_dynamics_tools`` and the harness ``robot_dynamics_testing`` are outside the runtime package);
- the runtime package has no import circle and never imports the tools or the harness;
- no module over 700 lines, no function over 150;
- no developer tool (demo, track, replay, casestudy, push, bags) inside it; ``retiming/`` runs no worker
  process (no pickle, socket, subprocess or multiprocessing);
- benchmarks never edit ``sys.path`` and tests never import ``benchmarks``.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "robot_dynamics_ros"
ROS_ROOTS = {"rclpy", "rosidl_runtime_py", "rosidl_parser", "builtin_interfaces", "sensor_msgs", "std_msgs",
             "std_srvs", "trajectory_msgs", "diagnostic_msgs", "rosgraph_msgs", "lifecycle_msgs",
             "rcl_interfaces", "geometry_msgs", "control_msgs", "robot_dynamics_interfaces", "action_msgs"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = p
    return out


MODS = _modules()


def _imports(mod: str, path: Path):
    """(line, imported dotted name) for every import in the module, function-local ones included."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".")
                base = base[: len(base) - node.level + (1 if path.name == "__init__.py" else 0)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            yield node.lineno, prefix
            for a in node.names:
                yield node.lineno, f"{prefix}.{a.name}"


def test_ros_imports_only_in_nodes():
    offenders = sorted({f"{p.relative_to(ROOT)}:{line} {name}" for mod, p in MODS.items() if ".nodes" not in mod
                        for line, name in _imports(mod, p) if name.split(".")[0] in ROS_ROOTS})
    assert offenders == []


def test_runtime_package_never_imports_tools_or_harness():
    offenders = sorted({f"{p.relative_to(ROOT)}:{line} {name}" for mod, p in MODS.items()
                        for line, name in _imports(mod, p)
                        if name.split(".")[0] in ("robot_dynamics_tools", "robot_dynamics_testing", "benchmarks")})
    assert offenders == []


def test_no_import_circle():
    edges = defaultdict(set)
    for mod, p in MODS.items():
        for _, name in _imports(mod, p):
            while name and name not in MODS:
                name = name.rpartition(".")[0]
            if name and name != mod and not mod.startswith(name + "."):
                edges[mod].add(name)
    # Tarjan's strongly connected components
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in list(MODS):
        if v not in index:
            visit(v)
    assert comps == []


def test_module_and_function_sizes():
    long_modules, long_functions = [], []
    for p in MODS.values():
        src = p.read_text(encoding="utf-8")
        if src.count("\n") > 700:
            long_modules.append(f"{p.relative_to(ROOT)} ({src.count(chr(10))})")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 150:
                    long_functions.append(f"{p.relative_to(ROOT)}:{node.name} ({n})")
    assert long_modules == [] and long_functions == []


def test_no_developer_tools_and_no_worker_protocol_in_runtime_package():
    tools = [m for m in MODS if m.rpartition(".")[2] in ("demo", "track", "replay", "casestudy", "push", "bags")]
    assert tools == []
    worker = sorted({f"{m}: {name}" for m, p in MODS.items() if ".retiming" in m for _, name in _imports(m, p)
                     if name.split(".")[0] in ("pickle", "socket", "subprocess", "multiprocessing")})
    assert worker == []


def test_benchmarks_and_tests_are_separate():
    edits = [str(p.relative_to(ROOT)) for p in (ROOT / "benchmarks").rglob("*.py") if "sys.path" in p.read_text()]
    assert edits == []
    importing = [str(p.relative_to(ROOT)) for p in (ROOT / "test").rglob("*.py")
                 if any(line.lstrip().startswith(("import benchmarks", "from benchmarks"))
                        for line in p.read_text().splitlines())]
    assert importing == []
    flat = [p.name for p in (ROOT / "test").glob("test_*.py")]
    areas = [d.name for d in (ROOT / "test").iterdir() if d.is_dir() and any(d.glob("test_*.py"))]
    assert flat == [] and {"dynamics", "retiming", "control", "identification", "nodes", "tools"} <= set(areas)
