"""A benchmark's own judge prompts, read at run time from the user's checkout of its repository.

``--protocol-source DIR`` points at a copy of the benchmark's public code; the family judge then
asks exactly its prompts, laid out as its evaluator lays them out (docs/benchmarks.md), and
records their digest in its version. Nothing of them is copied into yanami or its runs beyond
what a judge request carries. Each family's judge says where its prompts are
(`ProtocolJudge.load_source`) with the two readers here: a text file (`prompt_file`), or a
Python file's string constants, parsed and never executed (`string_constants`).
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from yanami.contract import UserError, read_regular

MAX_PROMPT_BYTES = 1 << 20


@dataclass(frozen=True)
class ProtocolSource:
    """A family's judge prompts as its repository holds them."""

    family: str
    root: Path
    prompts: dict[str, str]
    """WEAVE: its constants by name; IMUG-Bench: ``points`` and ``dynamic``."""

    @property
    def digest(self) -> str:
        """SHA-256 of the prompts (name, text), in a fixed order: what a run records."""
        h = hashlib.sha256()
        for name in sorted(self.prompts):
            h.update(f"{name}\0{self.prompts[name]}\0".encode())
        return h.hexdigest()


def prompt_file(path: Path) -> str:
    if not path.is_file():
        raise UserError(f"--protocol-source: {path}: not found (give the root of the benchmark's repository)")
    if path.stat().st_size > MAX_PROMPT_BYTES:
        raise UserError(f"--protocol-source: {path}: larger than {MAX_PROMPT_BYTES} bytes; not a prompt file")
    try:
        return read_regular(path, MAX_PROMPT_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--protocol-source: {path}: cannot be read ({exc})") from None


def string_constants(path: Path, names: tuple[str, ...]) -> dict[str, str]:
    """Module-level ``NAME = "..."`` string constants of a Python file, read without running it."""
    try:
        tree = ast.parse(prompt_file(path), filename=str(path))
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise UserError(f"--protocol-source: {path}: not a Python file this reads ({exc})") from None
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in names:
                    found[target.id] = node.value.value
    missing = [n for n in names if n not in found]
    if missing:
        raise UserError(f"--protocol-source: {path}: no string constant {', '.join(missing)}")
    return found
