"""Static checker of ROS 2 Python launch files (``launch/*.launch.py``) against the package itself.

``launch``/``launch_ros`` cannot be installed from PyPI, so the launch files cannot be executed in CI.
This module reads them as Python syntax trees (:mod:`ast`, nothing is imported or run) and checks what a
real ``ros2 launch`` would otherwise only find at run time, or never:

1. they import only ``launch`` / ``launch_ros`` names and define ``generate_launch_description()``;
2. every ``DeclareLaunchArgument`` has a constant name and a description, is declared once, and is used
   by a ``LaunchConfiguration``; every ``LaunchConfiguration`` refers to a declared argument;
3. every ``launch_ros.actions.Node`` of this package names an executable of setup.py's
   ``console_scripts``, and its node name is known (``name=``, or the node's own default name);
4. every parameter passed to a node — keys of ``parameters=[{...}]`` dicts (also of a dict bound to a
   name: the keys of the dict literals assigned to it and of ``name["key"] = ...``), and the keys of the node's
   section (``<node name>:`` or ``/**:``) in each parameters YAML file it is given — is a parameter the
   node declares (``declared`` below: in the tests, read from the real node classes);
5. every ``IncludeLaunchDescription`` names an existing launch file of the package and passes only
   arguments that file declares.

Substitutions are evaluated statically where they are made of constants: ``LaunchConfiguration`` ->
its argument's default, ``FindPackageShare(<this package>)`` -> the source tree (whose ``launch/`` and
``config/`` are installed unchanged to ``share/<package>``), ``PathJoinSubstitution``,
``TextSubstitution``, ``ParameterValue``, and names bound by simple assignments.

Usage::

    problems = check_launch_dir("launch", declared=declared_parameters_by_instantiation,
                                entry_points=entry_points_from_setup("setup.py"))
    assert problems == []

Each problem is one line ``<file>:<line>: <what is wrong>``.
"""
from __future__ import annotations

import ast
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["check_launch_file", "check_launch_dir", "entry_points_from_setup", "declared_parameters_by_instantiation",
           "launch_arguments", "load_params_file_into_node", "node_class", "node_info_by_instantiation", "UNKNOWN"]

PACKAGE = "robot_dynamics_ros"
ALLOWED_IMPORT_ROOTS = frozenset({"launch", "launch_ros", "__future__"})
#: parameters every rclpy/rclcpp node declares itself
BUILTIN_PARAMETERS = frozenset({"use_sim_time"})


class _Unknown:
    """A value that cannot be known without running the launch file."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


def _callee(call: ast.Call) -> str:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return ""


def _arg(call: ast.Call, pos: int, kw: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == kw:
            return k.value
    return call.args[pos] if len(call.args) > pos else None


def _const_str(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _LaunchFile:
    def __init__(self, path: Path, share_root: Path, package: str):
        self.path = Path(path)
        self.share_root = share_root
        self.package = package
        self.tree = ast.parse(self.path.read_text(), filename=str(self.path))
        self.problems: list[str] = []
        self.names: dict[str, ast.expr] = {}
        #: name -> parameter-name expressions of dict literals assigned to it and of ``name["key"] = ...``
        self.dict_keys: dict[str, list[ast.expr]] = {}
        self.arguments: dict[str, ast.Call] = {}  # declared name -> DeclareLaunchArgument call
        self.used: set[str] = set()
        for node in ast.walk(self.tree):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target = node.targets[0]
            if isinstance(target, ast.Name):
                self.names.setdefault(target.id, node.value)  # the first binding: the literal, not a filter
                if isinstance(node.value, ast.Dict):
                    self.dict_keys.setdefault(target.id, []).extend(k for k in node.value.keys if k is not None)
            elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                self.dict_keys.setdefault(target.value.id, []).append(target.slice)

    def problem(self, node: ast.AST | None, text: str) -> None:
        line = getattr(node, "lineno", 0)
        self.problems.append(f"{self.path}:{line}: {text}")

    # ----------------------------------------------------------------------------- evaluation
    def eval(self, node: ast.expr | None, depth: int = 0) -> Any:
        """Statically evaluate a substitution expression (a str, list, dict, or UNKNOWN)."""
        if node is None or depth > 20:
            return UNKNOWN
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.eval(self.names[node.id], depth + 1) if node.id in self.names else UNKNOWN
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.eval(e, depth + 1) for e in node.elts]
        if isinstance(node, ast.Dict):
            return {self.eval(k, depth + 1): self.eval(v, depth + 1) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.Call):
            name = _callee(node)
            if name == "LaunchConfiguration":
                arg = _const_str(_arg(node, 0, "variable_name"))
                decl = self.arguments.get(arg or "")
                if decl is not None:
                    return self.eval(_arg(decl, 1, "default_value"), depth + 1)
                return self.eval(_arg(node, 1, "default"), depth + 1)
            if name == "TextSubstitution":
                return self.eval(_arg(node, 0, "text"), depth + 1)
            if name == "ParameterValue":
                return self.eval(_arg(node, 0, "value"), depth + 1)
            if name == "FindPackageShare":
                pkg = self.eval(_arg(node, 0, "package"), depth + 1)
                return str(self.share_root) if pkg == self.package else UNKNOWN
            if name == "PathJoinSubstitution":
                parts = self.eval(_arg(node, 0, "substitutions"), depth + 1)
                if not isinstance(parts, list):
                    return UNKNOWN
                texts = [_concat(p) for p in parts]
                return UNKNOWN if any(t is UNKNOWN for t in texts) else os.path.join(*texts)
            if name == "PythonLaunchDescriptionSource":
                return self.eval(_arg(node, 0, "launch_file_path"), depth + 1)
        return UNKNOWN

    # ----------------------------------------------------------------------------- checks
    default_name: Callable[[str], str] | None = None

    def check(self, declared: Callable[[str], set[str]], entry_points: Mapping[str, str]) -> list[str]:
        self._check_imports()
        if not any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description"
                   for n in self.tree.body):
            self.problem(None, "no module-level generate_launch_description()")
        calls = [n for n in ast.walk(self.tree) if isinstance(n, ast.Call)]
        for call in calls:
            if _callee(call) == "DeclareLaunchArgument":
                self._declare(call)
        for call in calls:
            if _callee(call) == "LaunchConfiguration":
                name = _const_str(_arg(call, 0, "variable_name"))
                if name is None:
                    self.problem(call, "LaunchConfiguration with a non-constant name")
                    continue
                self.used.add(name)
                if name not in self.arguments and _arg(call, 1, "default") is None:
                    self.problem(call, f"LaunchConfiguration('{name}') but no DeclareLaunchArgument('{name}')")
        for name, call in self.arguments.items():
            if name not in self.used:
                self.problem(call, f"launch argument '{name}' is declared but never used")
        for call in calls:
            if _callee(call) in ("Node", "LifecycleNode"):
                self._check_node(call, declared, entry_points)
            elif _callee(call) == "IncludeLaunchDescription":
                self._check_include(call)
        return self.problems

    def _check_imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""] if node.level == 0 else ["." * node.level]
            else:
                continue
            for m in mods:
                if m.split(".")[0] not in ALLOWED_IMPORT_ROOTS:
                    self.problem(node, f"imports '{m}': a launch file may import only launch / launch_ros")

    def _declare(self, call: ast.Call) -> None:
        name = _const_str(_arg(call, 0, "name"))
        if name is None:
            self.problem(call, "DeclareLaunchArgument with a non-constant name")
            return
        if name in self.arguments:
            self.problem(call, f"launch argument '{name}' declared twice")
        if _arg(call, 2, "description") is None:
            self.problem(call, f"launch argument '{name}' has no description")
        self.arguments[name] = call

    def _check_node(self, call: ast.Call, declared: Callable[[str], set[str]],
                    entry_points: Mapping[str, str]) -> None:
        package = self.eval(_arg(call, 99, "package"))
        if package != self.package:
            if package is UNKNOWN:
                self.problem(call, "Node with a package that is not a constant")
            return
        executable = _const_str(_arg(call, 99, "executable"))
        if executable is None:
            self.problem(call, "Node executable is not a constant string")
            return
        if executable not in entry_points:
            self.problem(call, f"executable '{executable}' is not a console_scripts entry point of setup.py "
                               f"(have: {sorted(entry_points)})")
            return
        name_arg = _arg(call, 99, "name")
        node_name = self.eval(name_arg) if name_arg is not None else (
            self.default_name(executable) if self.default_name is not None else UNKNOWN)
        if not isinstance(node_name, str):
            self.problem(call, f"Node '{executable}': its node name is unknown (give a constant name=, or "
                               "default_names to the checker) and is needed to match its YAML section")
        params = _arg(call, 99, "parameters")
        if params is None:
            return
        if not isinstance(params, (ast.List, ast.Tuple)):
            self.problem(params, f"parameters of '{executable}' must be a list literal")
            return
        known = set(declared(executable)) | BUILTIN_PARAMETERS
        for entry in params.elts:
            keys = None
            if isinstance(entry, ast.Dict):
                keys = entry.keys
            elif isinstance(entry, ast.Name) and entry.id in self.dict_keys:
                keys = self.dict_keys[entry.id]
            if keys is not None:
                for key in keys:
                    k = _const_str(key)
                    if k is None:
                        self.problem(key or entry, f"parameter name of '{executable}' is not a constant string")
                    elif k not in known:
                        self.problem(key, f"parameter '{k}' passed to '{executable}' is not declared by the node "
                                          f"(declared: {sorted(known)})")
            else:
                self._check_param_file(entry, executable, node_name, known)

    def _check_param_file(self, entry: ast.expr, executable: str, node_name: Any, known: set[str]) -> None:
        import yaml

        path = _concat(self.eval(entry))
        if path is UNKNOWN or not isinstance(path, str):
            self.problem(entry, f"parameters file of '{executable}' cannot be resolved statically")
            return
        p = Path(path)
        if not p.is_file():
            self.problem(entry, f"parameters file '{path}' of '{executable}' does not exist")
            return
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            self.problem(entry, f"parameters file '{path}' is not valid YAML: {exc}")
            return
        from robot_dynamics_tools.commands.run import param_sections, section_applies

        if not isinstance(data, dict):
            self.problem(entry, f"parameters file '{path}' is not a mapping of node sections")
            return
        for section, name, body in param_sections(data, path):
            if not section_applies(name, f"/{node_name}"):     # the sections rclpy gives the root-namespace node
                continue
            for key in _flatten(body):
                if key not in known:
                    self.problem(entry, f"parameter '{key}' of section '{section}' in '{p.name}' is not "
                                        f"declared by '{executable}'")

    def _check_include(self, call: ast.Call) -> None:
        source = _concat(self.eval(_arg(call, 0, "launch_description_source")))
        if not isinstance(source, str):
            self.problem(call, "included launch file cannot be resolved statically")
            return
        target = Path(source)
        if not target.is_file():
            self.problem(call, f"included launch file '{source}' does not exist")
            return
        declared_there = launch_arguments(target)
        args = _arg(call, 99, "launch_arguments")
        if args is None:
            return
        if (isinstance(args, ast.Call) and isinstance(args.func, ast.Attribute) and args.func.attr == "items"):
            args = args.func.value
        if isinstance(args, ast.Dict):
            keys = list(args.keys)
        elif isinstance(args, (ast.List, ast.Tuple)):
            keys = [e.elts[0] if isinstance(e, ast.Tuple) else e for e in args.elts]
        else:
            self.problem(args, "launch_arguments must be a dict literal (with .items()) or a list of pairs")
            return
        for key in keys:
            k = _const_str(key)
            if k is None:
                self.problem(key, "launch argument name passed to an include is not a constant")
            elif k not in declared_there:
                self.problem(key, f"argument '{k}' passed to '{target.name}', which does not declare it "
                                  f"(declares: {sorted(declared_there)})")


def _concat(value: Any) -> Any:
    """A list of substitution values is their concatenation (launch's rule for substitution lists)."""
    if isinstance(value, list):
        parts = [_concat(v) for v in value]
        return UNKNOWN if any(not isinstance(v, str) for v in parts) else "".join(parts)
    return value if isinstance(value, str) else UNKNOWN


def _flatten(params: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Nested YAML parameter dicts -> dotted names (``a: {b: 1}`` is parameter ``a.b``)."""
    out = []
    for k, v in params.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.extend(_flatten(v, name + "."))
        else:
            out.append(name)
    return out


def launch_arguments(path: str | Path) -> set[str]:
    """Names of the ``DeclareLaunchArgument``s of a launch file (constant names only)."""
    tree = ast.parse(Path(path).read_text())
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and _callee(n) == "DeclareLaunchArgument":
            name = _const_str(_arg(n, 0, "name"))
            if name:
                out.add(name)
    return out


def check_launch_file(path: str | Path, *, declared: Callable[[str], set[str]] | Mapping[str, set[str]],
                      entry_points: Mapping[str, str], share_root: str | Path | None = None,
                      package: str = PACKAGE,
                      default_names: Callable[[str], str] | Mapping[str, str] | None = None) -> list[str]:
    """Check one launch file; returns the problems found (empty list: none).

    Args:
        path: the ``.launch.py`` file.
        declared: executable name -> the parameter names its node declares (a mapping or a function).
        entry_points: console_scripts of setup.py, name -> ``module:function``.
        share_root: directory standing for ``share/<package>`` (default: the launch file's parent's parent).
        package: this package's name (nodes of other packages are not checked).
        default_names: executable -> the name its node takes when the launch file gives no ``name=``
            (needed to find the node's section in a parameters file).

    Raises:
        SyntaxError: the file is not valid Python (message names file and line).
    """
    path = Path(path)
    root = Path(share_root) if share_root is not None else path.resolve().parent.parent
    fn = declared.__getitem__ if isinstance(declared, Mapping) else declared
    lf = _LaunchFile(path, root, package)
    if default_names is not None:
        lf.default_name = default_names.__getitem__ if isinstance(default_names, Mapping) else default_names
    return lf.check(fn, entry_points)


def check_launch_dir(launch_dir: str | Path, **kwargs) -> list[str]:
    """:func:`check_launch_file` on every ``*.launch.py`` of a directory (problems of all files)."""
    out: list[str] = []
    files = sorted(Path(launch_dir).glob("*.launch.py"))
    if not files:
        return [f"{launch_dir}: no *.launch.py files"]
    for f in files:
        out.extend(check_launch_file(f, **kwargs))
    return out


def entry_points_from_setup(setup_py: str | Path) -> dict[str, str]:
    """``console_scripts`` of a setup.py, read from its syntax tree: name -> ``module:function``.

    Raises:
        ValueError: no ``console_scripts`` list literal found.
    """
    tree = ast.parse(Path(setup_py).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if _const_str(k) == "console_scripts" and isinstance(v, (ast.List, ast.Tuple)):
                    out = {}
                    for e in v.elts:
                        text = _const_str(e)
                        if text and "=" in text:
                            name, target = (s.strip() for s in text.split("=", 1))
                            out[name] = target
                    return out
    raise ValueError(f"{setup_py}: no console_scripts entry points")


def node_class(target: str) -> type:
    """The rclpy ``Node`` subclass defined in the module of an entry point ``module:main``.

    Looks at the module's attributes and the names in its ``__all__`` (so a class the module builds
    lazily in a module ``__getattr__`` is found too).

    Raises:
        LookupError: none or several Node subclasses are defined in that module.
    """
    import importlib
    import inspect

    from rclpy.node import Node

    module = importlib.import_module(target.split(":")[0])
    names = {*dir(module), *getattr(module, "__all__", ())}  # __all__ also reaches lazily built classes
    found = {id(c): c for c in (getattr(module, n, None) for n in sorted(names))
             if inspect.isclass(c) and issubclass(c, Node) and c is not Node
             and c.__module__ == module.__name__}
    classes = list(found.values())
    if len(classes) != 1:
        raise LookupError(f"{module.__name__}: expected one rclpy Node subclass, found {[c.__name__ for c in classes]}")
    return classes[0]


def node_info_by_instantiation(target: str, *, ros_args: list[str] | None = None) -> tuple[str, set[str]]:
    """``(default node name, declared parameter names)`` of the node of an entry point, from a real instance.

    The node is created in its own rclpy context with ``ros_args`` (default: the bundled Panda as
    ``urdf_path``), its name and parameters read, then it is destroyed and the context shut down.

    Raises:
        LookupError: see :func:`node_class`; any error of the node's constructor.
    """
    import rclpy

    cls = node_class(target)
    ctx = rclpy.Context()
    rclpy.init(args=["--ros-args", *(ros_args if ros_args is not None else ["-p", "urdf_path:=panda"])],
               context=ctx)
    try:
        node = cls(context=ctx)
        try:
            return node.get_name(), set(node.list_parameters([], 0).names)
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)


def declared_parameters_by_instantiation(target: str, *, ros_args: list[str] | None = None) -> set[str]:
    """Parameter names the node of an entry point declares (see :func:`node_info_by_instantiation`)."""
    return node_info_by_instantiation(target, ros_args=ros_args)[1]


def load_params_file_into_node(target: str, params_file: str | Path, node_name: str | None = None
                               ) -> tuple[set[str], dict[str, Any]]:
    """Start the node of an entry point with ``--params-file params_file`` (rcl's own YAML parser, as
    ``ros2 run ... --ros-args --params-file`` and launch do) and read back what it got.

    Returns:
        ``(declared, values)``: every parameter name the node declared, and name -> value as the node
        holds it for each key of the file's sections that apply to the node (as rclpy applies them, nested
        keys dotted). A key of the file missing from ``declared`` is a parameter the node silently ignored.

    Raises:
        Whatever the node's constructor raises for a bad value (ValueError/UserError naming it).
    """
    import rclpy
    import yaml

    from robot_dynamics_tools.commands.run import section_parameters

    cls = node_class(target)
    data = yaml.safe_load(Path(params_file).read_text()) or {}
    ctx = rclpy.Context()
    rclpy.init(args=["--ros-args", "--params-file", str(params_file)], context=ctx)
    try:
        node = cls(context=ctx) if node_name is None else cls(node_name, context=ctx)
        try:
            name = node.get_name()
            keys = list(section_parameters(data, node.get_fully_qualified_name()))
            declared = set(node.list_parameters([], 0).names)
            values = {k: node.get_parameter(k).value for k in keys if k in declared}
            return declared, values
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
