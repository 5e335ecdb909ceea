"""The house: no import cycle between packages, no import of another package's private module,
the run format readable without numpy, Pillow or the world, and a runner that never names a
family or asks which judge it holds."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import yanami

ROOT = Path(yanami.__file__).parent
ROOMS = sorted(
    p.name if p.is_dir() else p.stem
    for p in ROOT.iterdir()
    if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and not p.name.startswith("__"))
)
"""The rooms of the house: every package, and every top-level module, which is a room of its own."""


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in sorted(ROOT.rglob("*.py"))}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports() -> list[tuple[Path, str, str]]:
    """(file, its room, the module it imports) for every yanami import: at the top, inside a
    function, or under ``TYPE_CHECKING``. ``from a import b`` imports ``a.b`` where that is a module."""
    out = []
    for name, path in MODULES.items():
        rel = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("yanami"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    out.append((rel, _room(name), full if full in MODULES else node.module))
            elif isinstance(node, ast.Import):
                out += [(rel, _room(name), a.name) for a in node.names if a.name.startswith("yanami.")]
    return out


def _reaches(edges: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        for n in edges[todo.pop()]:
            if n == goal:
                return True
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return False


def test_no_import_cycle_between_rooms() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for _, room, module in _imports():
        target = _room(module)
        if room and target in ROOMS and target != room:
            edges[room].add(target)
    cycles = [r for r in ROOMS if _reaches(edges, r, r)]
    assert cycles == [], {r: sorted(edges[r]) for r in cycles}


def test_no_file_level_circle() -> None:
    """No two modules import each other, directly or around a circle (a package's ``__init__``
    re-exporting its own modules aside)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for rel, _, module in _imports():
        name = _module(ROOT / rel)
        target = module
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        init = MODULES.get(target, Path()).name == "__init__.py"
        if target and target != name and not (init and name.startswith(target + ".")):
            edges[name].add(target)
    circles = sorted(m for m in MODULES if _reaches(edges, m, m))
    assert circles == []


def test_core_imports_nothing_of_yanami_outside_itself() -> None:
    outside = [f"{rel}: {module}" for rel, room, module in _imports() if room == "core" and _room(module) != "core"]
    assert outside == []


def test_scoring_and_the_families_read_runs_without_the_runner() -> None:
    """Scores come from run files (the run format and the results store, `yanami.contract`) and
    the bench (`yanami.store`), never from the code that made them."""
    found = [
        f"{rel}: {module}"
        for rel, room, module in _imports()
        if room in ("scoring", "families") and _room(module) == "runner"
    ]
    assert found == []


def test_every_module_reaches_core_through_the_contract() -> None:
    direct = [
        f"{rel}: {module}"
        for rel, room, module in _imports()
        if _room(module) == "core" and room not in ("core", "contract")
    ]
    assert direct == []


def test_core_exports_every_public_name_of_its_modules_once() -> None:
    from yanami import contract, core

    defined: dict[str, str] = {}
    for path in sorted((ROOT / "core").glob("_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = [node.name] if isinstance(node, ast.FunctionDef | ast.ClassDef) else []
            if isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for name in names:
                if not name.startswith("_") and name != "SEPARATOR":
                    assert name not in defined, f"{name} is defined in {defined[name]} and {path.name}"
                    defined[name] = path.stem
    assert defined == core._WHERE and sorted(core.__all__) == sorted(defined)
    assert contract.__all__ == core.__all__ and all(getattr(contract, n) is getattr(core, n) for n in core.__all__)


def test_no_room_imports_another_rooms_private_module() -> None:
    private = [
        f"{rel}: {module}"
        for rel, room, module in _imports()
        if len(parts := module.split(".")) >= 3 and parts[1] in ROOMS and parts[1] != room and parts[2].startswith("_")
    ]
    assert private == []


def test_the_scan_sees_imports_under_type_checking_and_in_functions() -> None:
    found = {(str(rel), module) for rel, _, module in _imports()}
    assert ("models/_registry.py", "yanami.contract") in found  # at the top
    assert ("runner/_spec.py", "yanami.scale") in found  # inside a function
    assert ("judges/_context.py", "yanami.world") in found  # under TYPE_CHECKING


def test_the_command_modules_import_at_their_top() -> None:
    """No import inside a function of `yanami.cli`: a command's module is loaded when the command
    runs (`yanami.cli._app.COMMANDS`), so what it uses is imported at its top, where it is seen."""
    inside = [
        f"{path.name}:{node.lineno}"
        for path in sorted((ROOT / "cli").glob("*.py"))
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(fn)
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    assert inside == []


@pytest.mark.parametrize("module", ["yanami.core", "yanami.contract"])
def test_the_contract_and_the_run_format_load_without_numpy_pillow_or_the_world(module: str) -> None:
    code = (
        f"import sys, {module}; "
        "print(sorted(m for m in ('numpy', 'PIL', 'yanami.world', 'yanami.store', 'yanami.runner', 'yanami.models')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_runner_never_names_a_family_nor_asks_which_judge_it_holds() -> None:
    source = (ROOT / "runner" / "_run.py").read_text(encoding="utf-8")
    assert "Family." not in source and "FamilyJudge" not in source
    assert "isinstance(judge" not in source and "isinstance(the_judge" not in source


def _keyed_draws(tree: ast.AST) -> list[int]:
    """Lines that seed a generator from text of their own: ``random.Random("...")`` or an f-string."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("Random", "default_rng")
        and node.args
        and isinstance(node.args[0], ast.JoinedStr | ast.Constant | ast.BinOp)
        and not (isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, int))
    ]


def test_every_seed_key_is_made_in_one_place() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(ROOT.rglob("*.py"))
        if path.name != "_seeds.py"
        for line in _keyed_draws(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert found == []  # every draw is keyed by yanami.contract (seeded, derived)
    assert _keyed_draws(ast.parse('import random\nrandom.Random(f"{seed}/{k}")')) == [2]  # the scan sees one


def test_a_seed_key_joins_its_parts() -> None:
    import random

    from yanami.contract import derived, seed_key, seeded

    assert seed_key("free", 42, "d7", 3, 0) == "free:42:d7:3:0"
    assert seeded(42, "d7").random() == random.Random("42:d7").random()
    assert derived("letter", 1, "d", "q1", bits=8) == __import__("hashlib").sha256(b"letter:1:d:q1").digest()[0]
    assert 0 <= derived("x", bits=32) < 2**32


PLUGIN_ROOMS = {"yanami", "yanami.contract", "yanami.store", "yanami.judges", "yanami.scoring", "yanami.models"}
"""What an outside plug-in may import of yanami: the package's public modules."""


def test_opening_is_written_as_an_outside_plugin_would_be() -> None:
    """The OpenING family imports yanami's public modules and itself, nothing private (not even
    what the other families share in ``yanami.families._*``): an outside distribution could hold it."""
    used = {(str(rel), module) for rel, _, module in _imports() if str(rel).startswith("families/opening/")}
    assert {m for _, m in used} >= {"yanami.contract", "yanami.store", "yanami.judges", "yanami.scoring"}
    outside = sorted(
        f"{rel}: {m}"
        for rel, m in used
        if m not in PLUGIN_ROOMS and not m.startswith("yanami.families.opening")
        and not (m.rsplit(".", 1)[0] in PLUGIN_ROOMS and not m.rsplit(".", 1)[1].startswith("_"))
    )  # fmt: skip
    assert outside == []
