"""Run every benchmark in this folder (``bench_*.py``), one after the other, each in its own process.

Each script is called as ``python benchmarks/bench_<name>.py --json <results>/<name>.json`` (every
benchmark here takes ``--json PATH``), with MALLOC_TOP_PAD_=67108864 set (shared NOTES "Benchmarks").
Prints each script's output as it runs, then a table: script, exit status, wall time, result file.
The machine should be otherwise idle: the benchmarks measure time.

Run:  make bench     or     .venv/bin/python benchmarks/run_all.py [--only latency retiming] [--results DIR]
Exit status: 0 when every benchmark exited 0, else 1.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def discover(only: list[str] | None) -> list[Path]:
    scripts = sorted(HERE.glob("bench_*.py"))
    if only:
        wanted = {f"bench_{name.removeprefix('bench_').removesuffix('.py')}.py" for name in only}
        unknown = wanted - {p.name for p in scripts}
        if unknown:
            raise SystemExit(f"run_all.py: no such benchmark {sorted(unknown)}; have {[p.name for p in scripts]}")
        scripts = [p for p in scripts if p.name in wanted]
    return scripts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these (e.g. latency retiming)")
    ap.add_argument("--results", type=Path, default=HERE / "results", help="folder for the JSON results")
    args = ap.parse_args(argv)
    args.results.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("MALLOC_TOP_PAD_", "67108864")
    rows = []
    for script in discover(args.only):
        name = script.stem.removeprefix("bench_")
        out = args.results / f"{name}.json"
        print(f"=== {script.name} -> {out}", flush=True)
        t0 = time.monotonic()
        rc = subprocess.call([sys.executable, str(script), "--json", str(out)], env=env)
        rows.append((script.name, rc, time.monotonic() - t0, out if out.exists() else "-"))
    print("\nbenchmark               status  wall_s  results")
    for name, rc, wall, out in rows:
        print(f"{name:<23} {rc:<7} {wall:<7.1f} {out}")
    return 0 if all(rc == 0 for _, rc, _, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
