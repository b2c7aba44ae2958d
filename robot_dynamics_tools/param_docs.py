"""The parameter tables of docs/nodes.md, generated from the node schemas (``robot_dynamics_ros/nodes/params``).

``python -m robot_dynamics_tools.param_docs [--check] [docs/nodes.md]`` rewrites every block between
``<!-- param-table:<schema> -->`` and ``<!-- /param-table:<schema> -->`` with the table of that schema's
own parameters (fragments it includes are named in a line above the table, each fragment has its own
block). ``--check`` rewrites nothing and exits 1 when a block differs from the schema (naming it).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

from robot_dynamics_ros.nodes.parameters import SCHEMA_DIR, NodeSchema, ParamSpec, node_schema

#: the docs file the tables live in
DOCS = Path(__file__).resolve().parents[1] / "docs" / "nodes.md"

_BLOCK = re.compile(r"(<!-- param-table:(?P<name>[a-z_]+) -->\n)(?P<body>.*?)(<!-- /param-table:(?P=name) -->)",
                    re.S)


def _value(v) -> str:
    if isinstance(v, bool):
        return f"`{str(v).lower()}`"
    if isinstance(v, str):
        return f'`"{v}"`' if v == "" else f"`{v}`"
    if isinstance(v, (list, tuple)):
        return "`[" + ", ".join(_value(x).strip("`") for x in v) + "]`"
    return f"`{v!r}`" if isinstance(v, float) else f"`{v}`"


def _rules(spec: ParamSpec) -> str:
    parts = []
    if spec.range is not None:
        lo, hi = spec.range
        parts.append(("each in " if spec.length is not None or spec.kind.endswith("_array") else "")
                     + f"[{lo:g}, {hi:g}]")
    if spec.length is not None:
        parts.append(f"{spec.length} entries")
    if spec.choices is not None:
        parts.append(", ".join(f"`{c}`" for c in spec.choices))
    if spec.file:
        parts.append("a regular file")
    return "; ".join(parts)


def _row(spec: ParamSpec) -> str:
    text = " ".join(spec.description.split()).replace("|", "\\|")
    return (f"| `{spec.name}` | {spec.type_name} | {_value(spec.default)} | {_rules(spec)} | "
            f"{'yes' if spec.read_only else ''} | {text} |")


def _own_specs(name: str) -> tuple[list[str], list[ParamSpec], NodeSchema]:
    """The fragments ``name`` includes (as written) and the specs its own file defines."""
    schema = node_schema(name)
    tree = yaml.safe_load((SCHEMA_DIR / f"{name}.yaml").read_text(encoding="utf-8"))[name]
    includes = []
    inherited: set[str] = set()
    for inc in tree.get("__include__", []):
        frag, only = (inc, None) if isinstance(inc, str) else next(iter(inc.items()))
        part = node_schema(frag).specs
        names = [s.name for s in part if only is None or s.name in only]
        inherited.update(names)
        includes.append(f"`{frag}`" + ("" if only is None else " (" + ", ".join(f"`{n}`" for n in names) + ")"))
    return includes, [s for s in schema.specs if s.name not in inherited], schema


def table(name: str) -> str:
    """The markdown block of schema ``name`` (ends with a newline)."""
    includes, specs, schema = _own_specs(name)
    lines = []
    if includes:
        lines += [f"Also the parameters of {', '.join(includes)} (tables above).", ""]
    lines += ["| Parameter | Type | Default | Range / choices | Read-only | Meaning |",
              "|---|---|---|---|---|---|"]
    lines += [_row(s) for s in specs]
    for key in schema.templates:
        lines += [_row(s) for s in schema.template(key, f"<{key}>")]
    return "\n".join(lines) + "\n"


def render(text: str) -> tuple[str, list[str]]:
    """``text`` with every param-table block regenerated, and the names of the blocks that changed."""
    changed = []

    def sub(m):
        new = table(m.group("name"))
        if new != m.group("body"):
            changed.append(m.group("name"))
        return m.group(1) + new + m.group(4)

    return _BLOCK.sub(sub, text), changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m robot_dynamics_tools.param_docs", description=__doc__.split("\n")[0])
    ap.add_argument("docs", nargs="?", type=Path, default=DOCS)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when a table is out of date")
    args = ap.parse_args(argv)
    text = args.docs.read_text(encoding="utf-8")
    new, changed = render(text)
    if args.check:
        if changed:
            print(f"{args.docs}: parameter tables out of date: {', '.join(changed)} (run without --check)",
                  file=sys.stderr)
            return 1
        return 0
    if changed:
        args.docs.write_text(new, encoding="utf-8")
    print(f"{args.docs}: {len(changed)} table(s) rewritten" + (f": {', '.join(changed)}" if changed else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
