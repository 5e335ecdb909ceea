"""The shape of the code, measured: rooms (packages, a top-level module counting as one), floors
(the package graph's layers), arrows between rooms (and those that climb back: a package cycle),
file-level circles (strongly connected groups of modules, imports under TYPE_CHECKING and inside
functions included), the largest modules, `type: ignore` and `Any` counts, mypy --strict errors,
import times and the test count.

    python benchmarks/bench_architecture.py            # everything (mypy takes about a minute)
    python benchmarks/bench_architecture.py --no-mypy

Prints one block of figures; compare two checkouts by running it in each.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "yanami"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the yanami modules it imports (from x import y counts y when y is a module)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in modules else base)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and target.startswith("yanami"):
                    graph[name].add(target)
    return graph


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "yanami"


def _sccs(graph: dict[str, set[str]], nodes: list[str]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def shape() -> dict[str, object]:
    modules = _modules()
    graph = _imports(modules)
    # A package's __init__ re-exporting its own modules is not a circle.
    file_graph = {
        m: {t for t in ts if not (modules[t].name == "__init__.py" and m.startswith(t + "."))}
        for m, ts in graph.items()
    }
    circles = _sccs(file_graph, list(modules))
    rooms: dict[str, set[str]] = defaultdict(set)
    for m, ts in graph.items():
        for t in ts:
            if room(m) != room(t) and room(t) != "yanami":
                rooms[room(m)].add(room(t))
    names = sorted({room(m) for m in modules} - {"yanami"})
    room_cycles = _sccs(rooms, names)
    in_cycle = {r for group in room_cycles for r in group}
    floor: dict[str, int] = {}

    def depth(r: str, seen: frozenset[str]) -> int:
        if r in floor:
            return floor[r]
        below = [depth(t, seen | {r}) for t in rooms.get(r, ()) if t not in seen]
        floor[r] = 1 + max(below, default=0)
        return floor[r]

    for r in names:
        depth(r, frozenset())
    arrows = sum(len(v) for v in rooms.values())
    upward = sum(1 for r, ts in rooms.items() for t in ts if r in in_cycle and t in in_cycle and floor[t] >= floor[r])
    lines = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in modules.items()}
    text = "\n".join(p.read_text(encoding="utf-8") for p in modules.values())
    return {
        "modules": len(modules),
        "lines": sum(lines.values()),
        "rooms": len(names),
        "floors": max(floor.values(), default=0),
        "arrows": arrows,
        "upward arrows": upward,
        "room cycles": room_cycles,
        "file circles": circles,
        "largest": sorted(lines.items(), key=lambda kv: -kv[1])[:6],
        "type: ignore": len(re.findall(r"type:\s*ignore", text)),
        "Any": len(re.findall(r"\bAny\b", text)),
    }


def _import_time(statement: str) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], check=True)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-mypy", action="store_true")
    args = parser.parse_args()
    figures = shape()
    for key, value in figures.items():
        if key == "largest":
            print("largest modules: " + ", ".join(f"{m} {n}" for m, n in value))  # type: ignore[attr-defined]
        else:
            print(f"{key}: {value}")
    bare = _import_time("import sys")
    for statement in (
        "import yanami.contract",
        "from yanami.contract import Request, Model, Judge",
        "from yanami.contract import Dialogue, RunManifest",
        "import yanami.models",
    ):
        print(f"{statement}: {1000 * (_import_time(statement) - bare):.0f} ms (over a bare interpreter)")
    if not args.no_mypy:
        out = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(SRC)],
            capture_output=True,
            text=True,
            cwd=REPO,
        ).stdout
        found = re.search(r"Found (\d+) errors?", out)
        print(f"mypy --strict errors: {found.group(1) if found else 0}")
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "-o", "addopts="],
        capture_output=True,
        text=True,
        cwd=REPO,
    ).stdout
    count = re.search(r"(\d+) tests? collected", collected)
    print(f"tests: {count.group(1) if count else '?'}")


if __name__ == "__main__":
    main()
