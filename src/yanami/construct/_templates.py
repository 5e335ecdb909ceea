"""The construction's prompt templates: shipped in the package, overridable file by file.

A template is named by its path under ``templates/`` without ``.txt`` (``author``,
``scenarios/editing``, ``capabilities/coreference``, ``verify-image``, …). ``--templates DIR``
replaces any of them with ``DIR/<name>.txt``; the others stay the package's. Every dialogue
records the id and the SHA-256 (first 16 hex digits) of each template it was built with, so a
changed template is visible in the provenance and in the construction's settings.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from yanami.contract import Capability, Scenario, UserError

TEMPLATE_VERSION = "v1"
"""The version of the package's template set (part of every template id)."""

FIELDS: dict[str, frozenset[str]] = {
    "author": frozenset(
        {"scenario_title", "scenario_text", "capabilities_text", "offered", "fence", "pool_notes", "split_text"}
        | {"schema"}
    ),
    "split-bench": frozenset(),
    "split-train": frozenset(),
    "verify-logic": frozenset({"fence", "plan", "capabilities", "scenario_title"}),
    "verify-image": frozenset({"fence", "instruction", "checks"}),
    "revise-plan": frozenset({"fence", "problems"}),
    "revise-image": frozenset({"instruction", "fence", "finding"}),
}
"""Each fillable template and the placeholders it may use."""


@dataclass(frozen=True)
class Template:
    """One template as used: its name, text, hash and where it came from."""

    name: str
    text: str
    sha16: str
    source: str
    """``package`` or the --templates folder."""

    @property
    def id(self) -> str:
        """``<name>@<version>`` for the package's, ``<name>@custom`` for an override."""
        return f"{self.name}@{TEMPLATE_VERSION if self.source == 'package' else 'custom'}"

    def fill(self, **values: object) -> str:
        """The text with its placeholders filled (``{{`` and ``}}`` stand for braces)."""
        return self.text.format(**values)


def all_names() -> list[str]:
    """Every template the construction uses."""
    return [
        *FIELDS,
        *(f"scenarios/{s.value}" for s in Scenario),
        *(f"capabilities/{c.value}" for c in Capability),
    ]


class Templates:
    """The package's templates, with the files of ``override`` (a folder) in their place."""

    def __init__(self, override: Path | None = None) -> None:
        if override is not None and not override.is_dir():
            raise UserError(f"--templates {override}: no such folder")
        self.override = override
        self._cache: dict[str, Template] = {}
        for name in all_names():
            self._check(self.get(name))
        if override is not None:
            known = set(all_names())
            for path in sorted(override.rglob("*.txt")):
                rel = path.relative_to(override).with_suffix("").as_posix()
                if rel not in known:
                    raise UserError(f"{path}: not a template name (known: {', '.join(sorted(known))})")

    def get(self, name: str) -> Template:
        """A template by name (see the module docstring)."""
        if name in self._cache:
            return self._cache[name]
        mine = self.override / f"{name}.txt" if self.override is not None else None
        if mine is not None and mine.is_file():
            try:
                text = mine.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise UserError(f"{mine}: cannot be read ({exc})") from None
            source = str(self.override)
        else:
            text = files("yanami.construct").joinpath("templates", f"{name}.txt").read_text(encoding="utf-8")
            source = "package"
        t = Template(name, text, hashlib.sha256(text.encode()).hexdigest()[:16], source)
        self._cache[name] = t
        return t

    def _check(self, t: Template) -> None:
        where = t.source if t.source == "package" else f"{t.source}/{t.name}.txt"
        if t.name.startswith("scenarios/"):
            first = t.text.split("\n", 1)[0]
            if not first.startswith("capabilities:"):
                raise UserError(f"{where}: the first line must be 'capabilities: <names>'")
            for name in first.removeprefix("capabilities:").split(","):
                if name.strip() not in {c.value for c in Capability}:
                    raise UserError(f"{where}: line 1: {name.strip()!r} is not a capability")
            return
        allowed = FIELDS.get(t.name)
        if allowed is None:
            return
        try:
            used = {f for _, f, _, _ in string.Formatter().parse(t.text) if f is not None}
        except ValueError as exc:
            raise UserError(f"{where}: {exc} (write {{{{ and }}}} for a literal brace)") from None
        if unknown := sorted(used - allowed):
            raise UserError(f"{where}: unknown placeholder {{{unknown[0]}}} (allowed: {', '.join(sorted(allowed))})")

    def scenario(self, s: Scenario) -> tuple[list[Capability], str]:
        """A scenario's capabilities (the template's first line) and its description."""
        first, _, rest = self.get(f"scenarios/{s.value}").text.partition("\n")
        caps = [Capability(c.strip()) for c in first.removeprefix("capabilities:").split(",")]
        return caps, rest.strip()

    def used_by(self, scenario: Scenario, capabilities: list[Capability], bench: bool) -> dict[str, str]:
        """``name -> id:hash`` of the templates one dialogue is built with."""
        names = ["author", f"scenarios/{scenario.value}", *(f"capabilities/{c.value}" for c in capabilities),
                 "split-bench" if bench else "split-train", "verify-logic", "verify-image", "revise-plan",
                 "revise-image"]  # fmt: skip
        return {name: f"{self.get(name).id}:{self.get(name).sha16}" for name in names}

    def used(self) -> dict[str, str]:
        """``name -> id:hash`` of every template (the construction's settings record them)."""
        return {name: f"{self.get(name).id}:{self.get(name).sha16}" for name in all_names()}
